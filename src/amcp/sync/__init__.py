"""amcp.sync: replication — the HLC change feed (pull), applying a peer's changes (push).

Blocking and sans-IO: ``amcp.node`` runs these in its thread pool and moves the bytes.
"""

from __future__ import annotations

from amcp.sync.feed import ApplyResult, PullBatch, apply_changes, pull_changes

__all__ = ["ApplyResult", "PullBatch", "apply_changes", "pull_changes"]
