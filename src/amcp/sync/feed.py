"""The change feed: what SYNC_PULL_RESPONSE and SYNC_PUSH send (PROFILE §3, §6, §10).

Pull reads the store's HLC-ordered change log; ``amcp.sync.apply`` applies a peer's
changes. Blocking (SQLite) and sans-IO: the node runs it in its thread pool.

Decisions (docs/protocol.md, "Sync"):

- A ``put`` entry carries the record's AMF; an entry whose record has since been purged is
  left out (the later ``purge`` entry says all there is to say). A ``purge`` entry carries only
  ``knowledge_id`` and ``hlc`` — never content, never the reason.
- ``archive`` changes (local TTL expiry) are not replicated: every node computes TTL expiry
  itself from ``vendor_extensions["x-ttl"]``.
- ``weight`` changes (outcome weights, amcp.evolution.outcomes) are not replicated: a
  weight is what *this* node learned from the outcomes reported to it, like its access
  counts. The rule ``w' = clamp(w × decay + delta)`` does not commute, so two nodes
  exchanging absolute weights would overwrite each other's evidence; what travels is the
  evidence itself, the KT-SIGNAL record of a QEF outcome (a put like any other).
- Sensitive records are not replicated (they are encrypted at rest and left out of exports
  unless asked for; sync does not ask).
- A peer only receives entries for records with at least one scope it may read; purge
  entries go to everyone, since an id alone reveals nothing and no-resurrection needs them.
- A record with ``distribution.locality = "local"`` never leaves this node (PROFILE §10):
  none of its changes is in the feed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from amcp.amf.canonical import canonical_packb
from amcp.amf.record import AMFRecord
from amcp.amf.types import Locality
from amcp.errors import ValidationError
from amcp.ports import MemoryWriter
from amcp.store.base import Change, ChangeOp, StoredRecord
from amcp.sync.apply import ApplyResult, apply_changes  # applying moved there; still importable

__all__ = ["ApplyResult", "PullBatch", "apply_changes", "pull_changes", "stays_here"]

DEFAULT_LIMIT = 500
MAX_LIMIT = 5000
# Headroom under max_payload for the reply's own keys (status, watermark, ...).
_ENVELOPE = 1024

ScopeCheck = Callable[[Sequence[str]], bool]
# Not replicated. A hold or a release is this node's firewall's decision about a record; a
# peer that receives the record screens it with its own firewall and writer keys. A weight
# is this node's learning (module docstring). An eviction is this node's cache decision
# (docs/replication.md, "Tiers").
_LOCAL_OPS = frozenset({ChangeOp.ARCHIVE, ChangeOp.HOLD, ChangeOp.CONFIRM, ChangeOp.WEIGHT,
                        ChangeOp.EVICT})


@dataclass(frozen=True, slots=True)
class PullBatch:
    changes: tuple[dict[str, Any], ...]
    watermark: int  # the HLC of the last change examined: the next pull's ``since``
    more: bool

    def to_payload(self) -> dict[str, Any]:
        return {"changes": list(self.changes), "watermark": self.watermark, "more": self.more}


def pull_changes(
    memory: MemoryWriter,
    since: int,
    *,
    limit: int = DEFAULT_LIMIT,
    readable: ScopeCheck | None = None,
    scopes: Sequence[str] | None = None,
    max_bytes: int | None = None,
    skip: Callable[[Change], bool] | None = None,
) -> PullBatch:
    """Changes after ``since`` (an HLC), oldest first, as SYNC_PULL_RESPONSE entries.

    ``readable`` says whether the peer may read a record with the given scopes; ``scopes``
    narrows further to records in any of those (exact names). ``max_bytes`` bounds the
    MessagePack size of the batch so the reply fits one frame; ``more`` is then true.
    ``skip`` leaves a change out before its record is read (the replicator's "this came
    from there": most of a bulk sync's own log is changes it must not send back).
    """
    if isinstance(since, bool) or not isinstance(since, int) or not 0 <= since < 2**64:
        raise ValidationError("since", "must be an HLC (u64)")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ValidationError("limit", f"must be an integer from 1 to {MAX_LIMIT}")
    budget = None if max_bytes is None else max(max_bytes - _ENVELOPE, 1)
    rows = memory.store.changes(since, limit + 1)
    more = len(rows) > limit
    rows = rows[:limit]
    out: list[dict[str, Any]] = []
    size = 0
    watermark = since
    wanted = set(scopes) if scopes else None
    sent = [skip is None or not skip(c) for c in rows]
    # The page's records in one read (one statement per 500 ids, not one per change).
    held = {s.knowledge_id: s for s in memory.store.get_many(
        [c.knowledge_id for c, go in zip(rows, sent, strict=True)
         if go and c.op not in _LOCAL_OPS and c.op is not ChangeOp.PURGE])}
    for change, go in zip(rows, sent, strict=True):
        entry = None if not go else _entry(
            held.get(change.knowledge_id), change, readable, wanted)
        if entry is not None:
            cost = len(canonical_packb(entry))
            if budget is not None and out and size + cost > budget:
                more = True
                break
            size += cost
            out.append(entry)
        watermark = change.hlc
    return PullBatch(tuple(out), watermark, more)


def _entry(
    found: StoredRecord | None, change: Change, readable: ScopeCheck | None,
    wanted: set[str] | None,
) -> dict[str, Any] | None:
    """The feed entry of ``change`` (``found``: its record as stored now), or None."""
    op, kid, hlc, details = change.op, change.knowledge_id, change.hlc, change.details
    if op is ChangeOp.PURGE:
        return {"op": "purge", "knowledge_id": kid, "hlc": hlc}
    if op in _LOCAL_OPS:
        return None
    if found is None or found.record is None or found.state.sensitive:
        return None
    if stays_here(found.record):
        return None
    scopes = found.record.meta.project_scope
    if readable is not None and not readable(scopes):
        return None
    if wanted is not None and not wanted.intersection(scopes):
        return None
    entry: dict[str, Any] = {"op": op.value, "knowledge_id": kid, "hlc": hlc}
    if op is ChangeOp.PUT:
        entry["amf"] = found.record.to_dict()
    if details.get("reason"):
        entry["reason"] = details["reason"]
    if op is ChangeOp.SUPERSEDE and details.get("superseded_by"):
        entry["superseded_by"] = details["superseded_by"]
    return entry


def stays_here(record: AMFRecord) -> bool:
    """``distribution.locality = "local"``: the record never leaves this node."""
    dist = record.distribution
    return dist is not None and dist.locality is Locality.LOCAL
