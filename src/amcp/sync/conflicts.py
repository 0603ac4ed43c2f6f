"""Supersede conflicts (PROFILE §10), as sync applies them: ``amcp.evolution.conflicts``.

The rule lives under ``Memory`` (``amcp.evolution.conflicts``) because a local purge
(``Memory.purge``: ``amcp purge``, the inspector, the HTTP API) re-decides the purged
record's predecessor with it, exactly as a purge that arrives by sync does — the same
function, not a copy — and ``Memory`` may not import ``amcp.sync``. Sync (``apply``) and
the node's write path (``node.service``) import it from here.
"""

from __future__ import annotations

from amcp.evolution.conflicts import (
    CONFLICT_NOTE,
    Rank,
    Resolution,
    chain_length,
    rank,
    resolve,
    settle,
)

__all__ = ["CONFLICT_NOTE", "Rank", "Resolution", "chain_length", "rank", "resolve", "settle"]
