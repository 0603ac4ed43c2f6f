"""Applying a peer's changes (SYNC_PUSH, or a SYNC_PULL_RESPONSE we asked for). Sans-IO.

Every rule of the write path still holds: records go through ``Memory.put_many`` (schema,
410 for a purged id, 409, id / checksum / envelope / signature recomputed, 412 causal
predecessors, the firewall), in one transaction per run of consecutive puts so a large pull
is not one commit per record. On top of that, what only sync needs (PROFILE §10):

- a record marked ``distribution.locality = "local"`` never leaves its node: one arriving
  from a peer is refused;
- a record whose ``causal.hlc`` is further ahead of our clock than ``max_drift_ms`` is
  refused (PROFILE §5): it would win every conflict tie;
- a record outside the scopes the peer may write to us is refused;
- a purged id never comes back (410), whatever the peer says;
- two records superseding one predecessor are resolved by ``amcp.sync.conflicts``;
- invalidation and purge outrank supersede; invalidation wins over a concurrent put of
  the same id (content addressing makes that put a duplicate here).

One refused entry is a conflict, counted and named in ``problems``; the rest still apply.
So is a malformed entry, or one whose ``op`` this node does not apply (another build's
``weight``, a newer protocol's op): refusing the whole batch would stall everything behind
that one entry, on every round, since a puller only moves its watermark past batches it
applied. Such entries are also counted in ``malformed``. Only a record whose id or checksum
does not match its content stops the batch: it raises IntegrityError (a violation).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from amcp.amf.record import AMFRecord
from amcp.amf.types import Lifecycle, Locality
from amcp.clock import Timestamp
from amcp.errors import AmcpError, IntegrityError, ValidationError
from amcp.ports import MemoryWriter
from amcp.store.base import StoredRecord
from amcp.sync.bulk import Run, Verifier, store_run
from amcp.sync.conflicts import resolve
from amcp.sync.result import ApplyResult
from amcp.sync.tiers import is_evicted, note_state_change, purge_absent

OPS = frozenset({"put", "invalidate", "supersede", "purge"})
DEFAULT_MAX_DRIFT_MS = 60_000  # PROFILE §5
ScopeCheck = Callable[[Sequence[str]], bool]


def check_entry(change: Any, index: int) -> dict[str, Any]:
    where = f"changes[{index}]"
    if not isinstance(change, Mapping):
        raise ValidationError(where, "must be a map")
    op = change.get("op")
    if op not in OPS:
        raise ValidationError(f"{where}.op", f"must be one of {sorted(OPS)}")
    kid = change.get("knowledge_id")
    if not isinstance(kid, str) or not kid.startswith("K-") or len(kid) > 80:
        raise ValidationError(f"{where}.knowledge_id", "must be a knowledge id")
    if op == "put" and not isinstance(change.get("amf"), Mapping):
        raise ValidationError(f"{where}.amf", "a put carries the AMF record")
    return dict(change)


def apply_changes(
    memory: MemoryWriter,
    changes: Iterable[Any],
    *,
    writable: ScopeCheck | None = None,
    max_drift_ms: int = DEFAULT_MAX_DRIFT_MS,
    verifier: Verifier | None = None,
) -> ApplyResult:
    """Apply SYNC_PUSH / pulled entries in order. See the module docstring for the rules;
    ``verifier`` verifies a long run of puts in a worker process (``amcp.sync.bulk``)."""
    result = ApplyResult()
    run: Run = []
    for index, change in enumerate(changes):
        hlc = change.get("hlc") if isinstance(change, Mapping) else None
        if isinstance(hlc, int) and not isinstance(hlc, bool) and hlc > result.watermark:
            result.watermark = hlc
        try:
            entry = check_entry(change, index)
        except ValidationError as exc:
            kid = change.get("knowledge_id") if isinstance(change, Mapping) else None
            result.malformed += 1
            result.refuse(kid[:80] if isinstance(kid, str) else None, exc.message)
            continue
        if entry["op"] == "put":
            shaped = _admissible(entry, writable, max_drift_ms, result)
            if shaped is not None:
                run.append((entry, shaped))
            continue
        _flush(memory, run, result, verifier)
        run = []
        try:
            changed = _apply_state(memory, entry, writable, result)
        except IntegrityError:
            raise
        except AmcpError as exc:
            result.refuse(entry["knowledge_id"], exc.message)
            continue
        result.count(entry, changed)
    _flush(memory, run, result, verifier)
    return result


def _admissible(
    entry: Mapping[str, Any], writable: ScopeCheck | None, max_drift_ms: int,
    result: ApplyResult,
) -> AMFRecord | None:
    """The shaped record of a put worth storing, or None (refused and counted). Whether it
    is held here already is asked for the whole run at once (``bulk.held_here``)."""
    kid = entry["knowledge_id"]
    amf = entry["amf"]
    if amf.get("knowledge_id") != kid:
        result.refuse(kid, "the AMF's knowledge_id differs from the change's")
        return None
    try:
        shaped = AMFRecord.from_dict(amf)
    except AmcpError as exc:
        result.refuse(kid, exc.message)
        return None
    why = _why_not(shaped, writable, max_drift_ms)
    if why is not None:
        result.refuse(kid, why)
        return None
    return shaped


def _why_not(record: AMFRecord, writable: ScopeCheck | None, max_drift_ms: int) -> str | None:
    dist = record.distribution
    if dist is not None and dist.locality is Locality.LOCAL:
        return "locality 'local': such a record never leaves the node that wrote it"
    if writable is not None and not writable(record.meta.project_scope):
        return "write access to the record's scopes is not allowed"
    text = record.causal.hlc if record.causal is not None else None
    if text:
        try:
            ahead = Timestamp.parse(text).physical_ms - int(time.time() * 1000)
        except AmcpError:
            return "causal.hlc is not an HLC string"
        if ahead > max_drift_ms:
            return f"causal.hlc is {ahead} ms ahead of this node's clock (PROFILE §5)"
    return None


def _flush(memory: MemoryWriter, run: Run, result: ApplyResult,
           verifier: Verifier | None) -> None:
    if run:
        store_run(memory, run, result, verifier)


def _apply_state(
    memory: MemoryWriter, entry: Mapping[str, Any], writable: ScopeCheck | None,
    result: ApplyResult,
) -> bool:
    """invalidate / supersede / purge. True: applied; False: already reflected here."""
    op, kid = entry["op"], entry["knowledge_id"]
    found = memory.store.get(kid)
    if op == "purge":
        return _apply_purge(memory, kid, found, writable)
    if found is not None and found.record is None:
        raise AmcpError(f"{kid} was purged here and never comes back")
    if found is None and note_state_change(memory, kid, f"{op} from a peer", op):
        return True  # evicted here: sync brings it back whole, in its new state
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
    return _apply_supersede(memory, kid, found, entry.get("superseded_by"), result)


def _apply_purge(
    memory: MemoryWriter, kid: str, found: StoredRecord | None, writable: ScopeCheck | None
) -> bool:
    """A peer may purge what it may write. An id unknown here has no scope to check: only a
    peer that may write every scope plants its tombstone (so a peer limited to some scopes
    cannot erase ids in advance); the purge still reaches us through any such peer."""
    if found is None:
        if writable is not None and not writable(("*",)):
            raise AmcpError(f"{kid}: not stored here, and a tombstone needs write access "
                            "to every scope")
        return purge_absent(memory, kid)  # an evicted one re-decides what it superseded
    if found.state.lifecycle is Lifecycle.PURGED:
        return False
    assert found.record is not None
    if writable is not None and not writable(found.record.meta.project_scope):
        raise AmcpError(f"{kid}: write access to its scopes is not allowed")
    pred = found.record.causal.supersedes if found.record.causal is not None else None
    with memory.atomic():
        memory.purge(kid, "sync")
        if pred:
            # The purged record no longer claims its predecessor (conflicts.claims):
            # decided again, as on a node that only ever got the tombstone.
            resolve(memory, pred)
    return True


def _apply_supersede(
    memory: MemoryWriter, kid: str, found: StoredRecord, new: Any, result: ApplyResult
) -> bool:
    """The superseding record arrives as its own put (which resolves ``kid``); this entry
    only says so again. A pointer to a record that does not claim ``kid`` is a conflict
    loser's mark, which every node works out for itself from the claimants."""
    if not isinstance(new, str):
        raise AmcpError(f"{kid}: a supersede names its superseded_by")
    if found.state.superseded_by == new:
        return False
    successor = memory.store.get(new)
    if successor is None and is_evicted(memory, new):  # ranked from its pointer (tiers)
        return resolve(memory, kid, new).changed
    if successor is None:
        raise AmcpError(f"{kid}: the superseding record is not stored here")
    if successor.record is None:
        return False  # purged here since: it claims nothing any more (conflicts.claims)
    causal = successor.record.causal
    if causal is None or causal.supersedes != kid:
        return False
    done = resolve(memory, kid, new)
    result.resolved += int(done.conflict and done.changed)
    return done.changed


__all__ = ["DEFAULT_MAX_DRIFT_MS", "OPS", "ApplyResult", "apply_changes", "check_entry"]
