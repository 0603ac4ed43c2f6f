"""The change feed: what SYNC_PULL_RESPONSE sends and what SYNC_PUSH applies (PROFILE §3, §6).

Pull reads the store's HLC-ordered change log; push applies a peer's changes through
``Memory`` so every rule of the write path (schema, 409, id/checksum, 412) still holds. Both
are blocking (SQLite) and sans-IO: the node runs them in its thread pool.

Decisions (docs/protocol.md, "Sync"):

- A ``put`` entry carries the record's AMF; an entry whose record has since been purged is
  left out (the later ``purge`` entry says all there is to say). A ``purge`` entry carries only
  ``knowledge_id`` and ``hlc`` — never content, never the reason.
- ``archive`` changes (local TTL expiry) are not replicated: every node computes TTL expiry
  itself from ``vendor_extensions["x-ttl"]``.
- Sensitive records are not replicated (they are encrypted at rest and left out of exports
  unless asked for; sync does not ask).
- A peer only receives entries for records with at least one scope it may read; purge
  entries go to everyone, since an id alone reveals nothing and no-resurrection needs them.
- Apply is idempotent: a change already reflected here counts as a duplicate. A purged id
  never comes back: a ``put`` for it is a conflict, whatever its content.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from amcp.amf.canonical import canonical_packb
from amcp.amf.types import Lifecycle
from amcp.errors import AmcpError, IntegrityError, ValidationError
from amcp.ports import MemoryWriter
from amcp.store.base import Change, ChangeOp, StoredRecord

OPS = frozenset({"put", "invalidate", "supersede", "purge"})
DEFAULT_LIMIT = 500
MAX_LIMIT = 5000
# Headroom under max_payload for the reply's own keys (status, watermark, ...).
_ENVELOPE = 1024

ScopeCheck = Callable[[Sequence[str]], bool]


@dataclass(frozen=True, slots=True)
class PullBatch:
    changes: tuple[dict[str, Any], ...]
    watermark: int  # the HLC of the last change examined: the next pull's ``since``
    more: bool

    def to_payload(self) -> dict[str, Any]:
        return {"changes": list(self.changes), "watermark": self.watermark, "more": self.more}


@dataclass(slots=True)
class ApplyResult:
    applied: int = 0
    duplicates: int = 0
    conflicts: int = 0
    watermark: int = 0
    problems: list[str] = field(default_factory=list)

    def to_payload(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "applied": self.applied,
            "duplicates": self.duplicates,
            "conflicts": self.conflicts,
            "watermark": self.watermark,
        }
        if self.problems:
            out["problems"] = self.problems[:32]  # a hint, not a log: keep replies small
        return out


def pull_changes(
    memory: MemoryWriter,
    since: int,
    *,
    limit: int = DEFAULT_LIMIT,
    readable: ScopeCheck | None = None,
    scopes: Sequence[str] | None = None,
    max_bytes: int | None = None,
) -> PullBatch:
    """Changes after ``since`` (an HLC), oldest first, as SYNC_PULL_RESPONSE entries.

    ``readable`` says whether the peer may read a record with the given scopes; ``scopes``
    narrows further to records in any of those (exact names). ``max_bytes`` bounds the
    MessagePack size of the batch so the reply fits one frame; ``more`` is then true.
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
    for change in rows:
        entry = _entry(memory, change, readable, wanted)
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
    memory: MemoryWriter, change: Change, readable: ScopeCheck | None, wanted: set[str] | None
) -> dict[str, Any] | None:
    op, kid, hlc, details = change.op, change.knowledge_id, change.hlc, change.details
    if op is ChangeOp.PURGE:
        return {"op": "purge", "knowledge_id": kid, "hlc": hlc}
    if op in (ChangeOp.ARCHIVE, ChangeOp.HOLD, ChangeOp.CONFIRM):
        # A hold or a release is this node's firewall's decision about a record; a peer
        # that receives the record screens it with its own firewall and writer keys.
        return None
    found = memory.store.get(kid)
    if found is None or found.record is None or found.state.sensitive:
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


def apply_changes(
    memory: MemoryWriter,
    changes: Iterable[Any],
    *,
    writable: ScopeCheck | None = None,
) -> ApplyResult:
    """Apply SYNC_PUSH entries in order. Never raises for one bad entry: it is a conflict.

    A malformed entry (not a map, unknown op, missing id) raises ValidationError (400) for
    the whole batch, since the sender is then broken rather than out of date; an AMF whose
    id or checksum does not match raises IntegrityError (a violation, as on MEMORY_WRITE).
    """
    entries = [_check_entry(c, i) for i, c in enumerate(changes)]
    result = ApplyResult()
    for entry in entries:
        hlc = entry.get("hlc")
        if isinstance(hlc, int) and not isinstance(hlc, bool) and hlc > result.watermark:
            result.watermark = hlc
        try:
            outcome = _apply_one(memory, entry, writable)
        except IntegrityError:
            raise
        except AmcpError as exc:
            result.conflicts += 1
            result.problems.append(f"{entry['knowledge_id']}: {exc.message}")
            continue
        if outcome:
            result.applied += 1
        else:
            result.duplicates += 1
    return result


def _check_entry(change: Any, index: int) -> dict[str, Any]:
    where = f"changes[{index}]"
    if not isinstance(change, Mapping):
        raise ValidationError(where, "must be a map")
    op = change.get("op")
    if op not in OPS:
        raise ValidationError(f"{where}.op", f"must be one of {sorted(OPS)}")
    kid = change.get("knowledge_id")
    if not isinstance(kid, str) or not kid.startswith("K-"):
        raise ValidationError(f"{where}.knowledge_id", "must be a knowledge id")
    if op == "put" and not isinstance(change.get("amf"), Mapping):
        raise ValidationError(f"{where}.amf", "a put carries the AMF record")
    return dict(change)


def _apply_one(memory: MemoryWriter, entry: Mapping[str, Any], writable: ScopeCheck | None) -> bool:
    """True: applied; False: already reflected here. Raises AmcpError for a conflict."""
    op, kid = entry["op"], entry["knowledge_id"]
    found = memory.store.get(kid)
    if op == "purge":
        return _apply_purge(memory, kid, found)
    if found is not None and found.record is None:
        raise AmcpError(f"{kid} was purged here and never comes back")
    if op == "put":
        return _apply_put(memory, entry, found, writable)
    if found is None:
        raise AmcpError(f"{kid} is not stored here")
    assert found.record is not None
    if writable is not None and not writable(found.record.meta.project_scope):
        raise AmcpError(f"{kid}: write access to its scopes is not allowed")
    if op == "invalidate":
        if found.state.lifecycle is Lifecycle.INVALIDATED:
            return False
        memory.invalidate(kid, str(entry.get("reason") or "invalidated by sync"))
        return True
    return _apply_supersede(memory, kid, found, entry.get("superseded_by"))


def _apply_purge(memory: MemoryWriter, kid: str, found: StoredRecord | None) -> bool:
    # Purge is applied whatever the scope: erasure must reach every copy.
    if found is None:
        return memory.store.put_tombstone(kid, hlc=memory.clock.send(), reason="sync")
    if found.state.lifecycle is Lifecycle.PURGED:
        return False
    memory.purge(kid, "sync")
    return True


def _apply_put(
    memory: MemoryWriter, entry: Mapping[str, Any], found: StoredRecord | None,
    writable: ScopeCheck | None,
) -> bool:
    amf = entry["amf"]
    if amf.get("knowledge_id") != entry["knowledge_id"]:
        raise ValidationError("amf.knowledge_id", "differs from the change's knowledge_id")
    _check_scopes(amf, writable)
    integrity = amf.get("integrity")
    checksum = integrity.get("checksum") if isinstance(integrity, Mapping) else None
    if found is not None and found.record is not None and (
        found.record.integrity.checksum == checksum
    ):
        return False
    # Memory.put keeps the write path's order: 400 → 409 → id/checksum → 412.
    return bool(memory.put(amf, dedup=False).created)


def _apply_supersede(memory: MemoryWriter, kid: str, found: StoredRecord, new: Any) -> bool:
    # The new record arrives as its own put; this entry only marks the old one. A record
    # already superseded, or archived after it was (an outcome round archives superseded
    # records), has had this entry applied: re-applying it would undo the archive.
    if found.state.lifecycle is Lifecycle.SUPERSEDED or (
        found.state.lifecycle is Lifecycle.ARCHIVED and found.state.superseded_by
    ):
        return False
    if not isinstance(new, str) or memory.store.get(new) is None:
        raise AmcpError(f"{kid}: the superseding record is not stored here")
    memory.store.set_state(
        kid, ChangeOp.SUPERSEDE, hlc=memory.clock.send(), lifecycle=Lifecycle.SUPERSEDED,
        superseded_by=new,
    )
    memory.searcher.drop(kid)
    return True


def _check_scopes(amf: Mapping[str, Any], writable: ScopeCheck | None) -> None:
    if writable is None:
        return
    meta = amf.get("meta")
    scopes = meta.get("project_scope") if isinstance(meta, Mapping) else None
    if not isinstance(scopes, list) or not writable(scopes):
        raise AmcpError("write access to the record's scopes is not allowed")
