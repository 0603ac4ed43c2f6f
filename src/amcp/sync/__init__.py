"""amcp.sync: replication — the change feed, applying a peer's changes, conflicts, peers,
membership, digests and the anti-entropy plan.

Blocking and sans-IO: ``amcp.node`` (the replicator, the service) runs these in its thread
pool and moves the bytes.
"""

from __future__ import annotations

from amcp.sync.apply import ApplyResult, apply_changes
from amcp.sync.feed import PullBatch, pull_changes

__all__ = ["ApplyResult", "PullBatch", "apply_changes", "pull_changes"]
