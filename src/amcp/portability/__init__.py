"""Moving memories between amcp and other tools (docs/portability.md).

``import_path(memory, path, ImportOptions(...))`` reads another tool's files, decides
every item (the health report), writes in atomic batches and verifies; ``export_to``
writes a store out in another tool's format. One module per source under ``sources/``.
"""

from __future__ import annotations

from amcp.portability.model import Decision, ImportOptions, Kind, SourceItem

__all__ = ["Decision", "ImportOptions", "Kind", "SourceItem"]
