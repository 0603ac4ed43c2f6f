"""Tier 0: which records stay, which are evicted, and how an evicted one comes back.

Upstream ``L2_distributed_storage.solidification_rules`` is the rule (docs/replication.md,
"Tiers"); this module is its sans-IO, blocking half — the node's replicator runs it on
its pools and asks the higher-tier peer (``amcp.node.tiering``):

- **stays** (``always_solidify_to_local``, L6 per-type solidification, and what exists
  nowhere else): KT-FACT, KT-PITFALL, KT-PRINCIPLE; ``decay_model.type = none``;
  ``access_count_7d > 10``; tags in the active project's; ``sync_priority = immediate``;
  KT-CONTEXT younger than 7 days; ``locality = local`` and sensitive records (never
  replicated, so no other copy); drafts and archived records (this node's decisions).
- **goes** (``evict_from_local``): idle longer than ``idle_days``; ``decay_status =
  expired``; and, while tier 0 is above ``high_water`` of a limit, the least recently used
  (then lowest weight) until it is back under. Walked in LRU order, so idle ones come first.
- only records a peer of a higher tier has just confirmed holding, with the same checksum,
  are evicted (``evict_held``): eviction never drops the last copy.
- **comes back**: a fetched copy must carry the pointer's id and checksum (and envelope),
  and goes through the write path as every received record (``restore``); its lifecycle at
  eviction is put back, logged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from amcp.amf.record import AMFRecord
from amcp.amf.types import DecayType, KnowledgeType, Lifecycle, Locality, SyncPriority
from amcp.errors import IntegrityError
from amcp.evolution.conflicts import resolve
from amcp.evolution.decay import DecayStatus, age_days, decay_model_of, decay_status
from amcp.ports import MemoryWriter
from amcp.store.base import ChangeOp, Pointer, RecordFilter, StoredRecord, TierIndex, TierUsage
from amcp.sync.tierconfig import TierConfig

log = logging.getLogger("amcp.sync")
ScopeCheck = Callable[[Sequence[str]], bool]

DAY = 86_400.0
PINNED_TYPES = frozenset({KnowledgeType.FACT, KnowledgeType.PITFALL, KnowledgeType.PRINCIPLE})
EVICTABLE = (Lifecycle.ACTIVE, Lifecycle.SUPERSEDED, Lifecycle.INVALIDATED)
HOT_ACCESSES = 10  # upstream: access_count_7d > 10 solidifies
CONTEXT_DAYS = 7.0  # L6: KT-CONTEXT is tier_0 for its first 7 days
CHUNK = 200


@dataclass(frozen=True, slots=True)
class Candidate:
    knowledge_id: str
    reason: str  # idle | expired | over limit
    size: int
    checksum: str


def tiers_of(memory: MemoryWriter) -> TierIndex | None:
    return memory.store.capabilities.tiers


def stays(item: StoredRecord, access_7d: int, config: TierConfig, now: float) -> str | None:
    """Why ``item`` must stay in tier 0, or None when it may be evicted."""
    rec, st = item.record, item.state
    if rec is None or st.lifecycle not in EVICTABLE:
        return "not evictable in its lifecycle"
    if rec.type in PINNED_TYPES:
        return f"{rec.type.value} is solidified to tier 0"
    if st.sensitive:
        return "sensitive: never replicated, no other copy"
    dist = rec.distribution
    if dist is not None and dist.locality is Locality.LOCAL:
        return "locality local: exists nowhere else"
    if dist is not None and dist.sync_priority is SyncPriority.IMMEDIATE:
        return "sync_priority immediate"
    if decay_model_of(rec).type is DecayType.NONE:
        return "decay_model none"
    if access_7d > HOT_ACCESSES:
        return f"accessed {access_7d} times in 7 days"
    tags = rec.annotation.tags if rec.annotation is not None else ()
    if config.active_tags and set(tags or ()) & set(config.active_tags):
        return "carries an active project tag"
    if rec.type is KnowledgeType.CONTEXT and age_days(rec, now) < CONTEXT_DAYS:
        return "KT-CONTEXT younger than 7 days"
    return None


def over_limit(usage: TierUsage, config: TierConfig) -> tuple[int, int]:
    """(bytes, records) to free to be back under ``high_water`` of each limit."""
    need_bytes = usage.bytes - int(config.high_water * config.max_bytes)
    need_records = 0
    if config.max_records:
        need_records = usage.records - int(config.high_water * config.max_records)
    return max(need_bytes, 0), max(need_records, 0)


def plan(memory: MemoryWriter, config: TierConfig, *, now: float | None = None,
         limit: int = 1000) -> list[Candidate]:
    """Up to ``limit`` records to evict now, in LRU order, with why (a read, no write)."""
    tiers = tiers_of(memory)
    if tiers is None:
        return []
    now = time.time() if now is None else now
    need_bytes, need_records = over_limit(tiers.usage(), config)
    idle_before = now - config.idle_days * DAY if config.idle_days else None
    store = memory.store
    rows = store.states(RecordFilter(lifecycles=EVICTABLE, include_expired=True),
                        limit=10**9)
    rows.sort(key=lambda r: (r.state.last_access or r.state.stored_at, r.state.weight,
                             r.knowledge_id))
    access = store.capabilities.access
    out: list[Candidate] = []
    for start in range(0, len(rows), CHUNK):
        part = rows[start:start + CHUNK]
        if (not need_bytes and not need_records and idle_before is not None
                and (part[0].state.last_access or part[0].state.stored_at) >= idle_before):
            break  # past the idle ones, and nothing more to free
        sizes = tiers.sizes([r.knowledge_id for r in part])
        for item in store.get_many([r.knowledge_id for r in part]):
            seven = access.access_count_since(item.knowledge_id, now - 7 * DAY) if access else 0
            if item.record is None or stays(item, seven, config, now) is not None:
                continue
            last = item.state.last_access or item.state.stored_at
            size = sizes.get(item.knowledge_id, 0)
            if idle_before is not None and last < idle_before:
                reason = "idle"
            elif decay_status(item.record, item.state, now) is DecayStatus.EXPIRED:
                reason = "expired"
            elif need_bytes > 0 or need_records > 0:
                reason = "over limit"
            else:
                continue
            need_bytes -= size
            need_records -= 1
            out.append(Candidate(item.knowledge_id, reason, size, item.record.integrity.checksum))
            if len(out) >= limit:
                return out
    return out


def evict_held(memory: MemoryWriter, candidates: Sequence[Candidate],
               held: Mapping[str, str], *, holder: str, tier: int) -> list[Pointer]:
    """Evict each candidate ``held`` confirms (id → the holder's checksum, equal to ours),
    in one transaction; a record changed since the plan is left alone."""
    tiers = tiers_of(memory)
    if tiers is None or tier < 1:
        return []
    done: list[Pointer] = []
    with memory.atomic():
        for cand in candidates:
            if held.get(cand.knowledge_id) != cand.checksum:
                continue
            found = memory.store.get(cand.knowledge_id)
            if found is None or found.record is None or \
                    found.record.integrity.checksum != cand.checksum:
                continue
            rowid = memory.searcher.rowid_of(cand.knowledge_id)
            done.append(tiers.evict(cand.knowledge_id, hlc=memory.clock.send(),
                                    holder=holder, tier=tier))
            memory.searcher.removed(rowid)
            memory.searcher.drop(cand.knowledge_id)
    return done


def held_copies(results: Sequence[Any]) -> dict[str, str]:
    """id → checksum of the records a peer's MEMORY_READ_RESPONSE returned."""
    out = {}
    for amf in results:
        if not isinstance(amf, Mapping):
            continue
        kid, integrity = amf.get("knowledge_id"), amf.get("integrity")
        if isinstance(kid, str) and isinstance(integrity, Mapping):
            checksum = integrity.get("checksum")
            if isinstance(checksum, str):
                out[kid] = checksum
    return out


def _split_view(amf: Mapping[str, Any]) -> tuple[dict[str, Any], Mapping[str, Any], str | None]:
    """The record as written, the holder's ``x-state`` and ``causal.superseded_by`` (its
    view of the record's state: not part of the record, not covered by its checksum)."""
    body = dict(amf)
    ext = dict(body.get("vendor_extensions") or {})
    view = ext.pop("x-state", None)
    if ext:
        body["vendor_extensions"] = ext
    else:
        body.pop("vendor_extensions", None)
    causal = body.get("causal")
    by = causal.get("superseded_by") if isinstance(causal, Mapping) else None
    return body, view if isinstance(view, Mapping) else {}, by if isinstance(by, str) else None


def restore(memory: MemoryWriter, amf: Mapping[str, Any], pointer: Pointer,
            writable: ScopeCheck | None = None) -> bool:
    """Store a fetched copy of an evicted record again. It must be the pointed record (id,
    checksum, envelope: else IntegrityError, the holder sent something else) and passes
    the whole write path. Its state: the pointer's (the state at eviction, or what the
    conflict rule decided since, ``TierIndex.restate``); for a stale pointer (changed
    elsewhere) the holder's, verified — an invalidation is taken as a peer's invalidate
    op would be (``writable``: the scopes that peer may write to us), and a supersede only
    as the conflict rule finds it from the records held here, never on the holder's word.
    Then the rule runs for the record both as a claimant and as a predecessor, as for any
    record stored. False: not evicted now."""
    body, view, by = _split_view(amf)
    record = AMFRecord.from_dict(body)
    if record.knowledge_id != pointer.knowledge_id or \
            record.integrity.checksum != pointer.checksum or \
            (pointer.envelope is not None and record.integrity.envelope != pointer.envelope):
        raise IntegrityError(f"{pointer.knowledge_id}: the fetched copy is not the evicted "
                             "record (id, checksum or envelope differ)")
    kid = pointer.knowledge_id
    with memory.atomic():
        tiers = tiers_of(memory)
        current = tiers.pointer(kid) if tiers is not None else None
        if current is None:
            return False
        memory.put_many([(record, False)], dedup=False)
        if current.stale:
            _holder_invalidation(memory, record, view, writable)
        elif current.lifecycle is not Lifecycle.ACTIVE:
            op = (ChangeOp.SUPERSEDE if current.lifecycle is Lifecycle.SUPERSEDED
                  else ChangeOp.INVALIDATE)
            memory.store.set_state(kid, op, hlc=memory.clock.send(),
                                   lifecycle=current.lifecycle, reason=current.reason,
                                   superseded_by=current.superseded_by)
            memory.searcher.drop(kid)
        # The record's successor as the holder and as the pointer last knew it: each is a
        # candidate the rule checks against the records held here (it must claim kid, or
        # be the winner over kid's own predecessor).
        named = sorted({c for c in (by, current.superseded_by) if c})
        pred = record.causal.supersedes if record.causal is not None else None
        if pred:
            for claimed in (kid, *named):
                resolve(memory, pred, claimed)
        for successor in named or [""]:
            resolve(memory, kid, successor or None)
    return True


def _holder_invalidation(memory: MemoryWriter, record: AMFRecord, view: Mapping[str, Any],
                         writable: ScopeCheck | None) -> None:
    if view.get("lifecycle") != Lifecycle.INVALIDATED.value:
        return
    if writable is not None and not writable(record.meta.project_scope):
        log.warning("tiers: %s: the holder's invalidation is not taken (scopes it may not "
                    "write)", record.knowledge_id)
        return
    memory.invalidate(record.knowledge_id, str(view.get("reason") or "invalidated at the holder"))


def purge_absent(memory: MemoryWriter, knowledge_id: str) -> bool:
    """A purge for an id without a row here (SYNC_PUSH op ``purge``). An evicted record is
    purged as a stored one is (``Memory.purge``: the tombstone replaces its pointer and
    what it superseded is decided again); an id unknown here gets its tombstone, so it
    can never arrive later."""
    tiers = tiers_of(memory)
    if tiers is not None and tiers.pointer(knowledge_id) is not None:
        memory.purge(knowledge_id, "sync")
        return True
    return memory.store.put_tombstone(knowledge_id, hlc=memory.clock.send(), reason="sync")


def pointer_view(p: Pointer) -> dict[str, Any]:
    """A pointer as reads, recall and the CLI show it."""
    return {"knowledge_id": p.knowledge_id, "type": p.type.value, "subject": p.subject,
            "text": p.text[:200],
            "scopes": list(p.scopes), "tags": list(p.tags), "checksum": p.checksum,
            "lifecycle": p.lifecycle.value, "tier": p.tier, "where": p.holder,
            "size": p.size, "evicted_at": p.evicted_at}


def matching_pointers(memory: MemoryWriter, query: str, readable: Callable[[Sequence[str]], bool],
                      *, limit: int = 10) -> list[dict[str, Any]]:
    """Recall's word: evicted records whose pointer matches ``query`` (upstream: the local
    index answers for data that is not here). Reading their ids fetches them back."""
    tiers = tiers_of(memory)
    if tiers is None or not isinstance(query, str):
        return []
    return [pointer_view(p) for p in tiers.find_pointers(query.split(), limit=limit)
            if readable(p.scopes)]


def note_state_change(memory: MemoryWriter, knowledge_id: str, why: str,
                      op: str = "supersede") -> bool:
    """A peer changed an evicted record's state. True: the id is evicted here (the change
    is taken care of); False: no pointer.

    - ``supersede`` (a successor arrived, or a peer says one did): the conflict rule
      decides it from the records held here, and ranks and marks evicted ones through
      their pointers (``evolution.conflicts``) — nothing to guess, the pointer stays fresh;
    - anything else (``invalidate``), or a pointer without the causal facts the rule needs
      (an older build's): the pointer is marked stale, so the digests leave it out and
      sync brings the record back whole, and a fetch-back takes the holder's state."""
    tiers = tiers_of(memory)
    pointer = tiers.pointer(knowledge_id) if tiers is not None else None
    if tiers is None or pointer is None:
        return False
    if op != "supersede" or not pointer.causal_known:
        tiers.release(knowledge_id, hlc=memory.clock.send(), why=why)
    return True


def is_evicted(memory: MemoryWriter, knowledge_id: str) -> bool:
    """Evicted from tier 0 here: a pointer (fresh or stale) stands for the record."""
    tiers = tiers_of(memory)
    return tiers is not None and tiers.pointer(knowledge_id) is not None


def fresh_pointer(memory: MemoryWriter, knowledge_id: str) -> Pointer | None:
    """The pointer of an evicted record whose copy sync may skip (not stale)."""
    tiers = tiers_of(memory)
    found = tiers.pointer(knowledge_id) if tiers is not None else None
    return found if found is not None and not found.stale else None


def digest_pointers(memory: MemoryWriter) -> Iterator[Pointer]:
    """The evicted records a digest counts as held here (not stale)."""
    tiers = tiers_of(memory)
    if tiers is None:
        return
    for p in tiers.iter_pointers():
        if not p.stale:
            yield p


def usage_view(memory: MemoryWriter, config: TierConfig | None) -> dict[str, Any] | None:
    """Tier 0's size, its limits and the pointers kept: ``amcp stats`` / ``amcp peers``."""
    tiers = tiers_of(memory)
    if tiers is None:
        return None
    u = tiers.usage()
    out: dict[str, Any] = {"tier0_records": u.records, "tier0_bytes": u.bytes,
                           "evicted": u.evicted, "evicted_bytes": u.evicted_bytes}
    if config is not None:
        out["limits"] = config.to_dict()
    return out


__all__ = ["Candidate", "digest_pointers", "evict_held", "fresh_pointer", "held_copies",
           "is_evicted", "matching_pointers", "note_state_change", "plan", "pointer_view",
           "purge_absent", "restore", "stays", "tiers_of", "usage_view"]
