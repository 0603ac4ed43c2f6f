"""amcp's own NDJSON export as an import source: validated whole, then imported.

Kept apart from the other sources because its lines are complete AMF records with their
states and tombstones, not items to classify: they are restored exactly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from amcp.ndjson import validate_ndjson

if TYPE_CHECKING:  # Memory calls into this package: no import cycle at run time
    from amcp.memory import Memory


def is_amcp_export(path: Path) -> bool:
    if not path.is_file():
        return False
    with path.open("rb") as fh:
        first = fh.readline(64 * 1024)
    try:
        obj = json.loads(first)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False
    return isinstance(obj, dict) and "amcp_export" in obj


def run_amcp_import(memory: Memory, path: Path, *, dry_run: bool = False) -> dict[str, object]:
    with path.open("rb") as fh:
        records = validate_ndjson(fh)  # raises, naming the line, before anything is written
    if dry_run:
        return {"ok": True, "records": records, "dry_run": True}
    from amcp.portability.history import Recorder

    with path.open("rb") as fh:
        rep = memory.import_(fh)
    log = Recorder(str(path)).amcp(memory.store, rep)  # the import log (/ui/imports)
    return {"report": log.id, "ok": rep.complete and not rep.errors, "created": rep.created,
            "already": rep.already, "tombstones": rep.tombstones,
            "refused_purged": rep.refused_purged, "complete": rep.complete,
            "errors": rep.errors}
