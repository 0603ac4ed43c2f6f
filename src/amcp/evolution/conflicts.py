"""Supersede conflicts (PROFILE §10): the same winner on every node, whatever the order.

Two records that supersede the same predecessor P are a conflict. The winner has the longer
causal chain — more transitive ``caused_by`` / ``supersedes`` ancestors, plus its own
``core.evidence`` — then the greater HLC (``causal.hlc``, the creating node's clock, which
every copy carries unchanged), then the greater knowledge_id. That is a total order, so the
winner is the maximum of the claimant set, the same set gives the same winner, and the
state written below is a function of the set alone:

- P is superseded by the winner; an invalidated P stays invalidated (invalidation outranks
  a supersede) but names the winner too, so the state does not depend on which of the two
  arrived first; a purged P is left alone;
- every other claimant without successors of its own is superseded by the winner, with a
  conflict note as its reason (an invalidated one only gets the pointer); one with its own
  successor keeps that pointer;
- a claimant that had been marked a loser and now wins becomes active again;
- a purged claimant claims nothing (``claims``): with none left, P is active again.

This runs wherever a record that supersedes P is stored: on the node a client wrote it to
(``settle``, from the node's write path) as on every node sync brings it to — otherwise the
writer alone would keep P, or its own losing fork, active — and wherever a record that
superseded P is purged (``Memory.purge`` as much as a purge that came by sync: the same
``resolve``). It lives here, under ``Memory``, for that last reason; ``amcp.sync.conflicts``
is the name sync uses for it.

**Evicted records take part as if they were here** (docs/replication.md, "Tiers"). A
record evicted from tier 0 has no row, only its pointer; the pointer keeps the record's
causal facts (what it supersedes and cites, its HLC, its evidence count), so an evicted
claimant is ranked, and a chain walked through evicted ancestors, exactly as on a node
that still holds them; and a state this rule gives an evicted record is written on its
pointer (``TierIndex.restate``), which a fetch-back puts back. Before that, an evicted
loser was decided without (the stored fork "won" alone) and came back active. A pointer
from a build that did not keep the causal facts cannot be ranked: it is marked stale, so
sync brings the record back whole and its arrival decides the conflict again.

The claimant set of P is ``P.superseded_by`` plus the claimants seen before, kept in the
store's meta (``sync.claimants.P``) — the store port has no index on ``causal.supersedes``.
Blocking, sans-IO; runs on the node's write thread, inside the caller's transaction.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from amcp.amf.record import AMFRecord
from amcp.amf.types import Lifecycle
from amcp.clock import Timestamp
from amcp.errors import ValidationError
from amcp.ports import MemoryWriter
from amcp.store.base import ChangeOp, Pointer, StoredRecord

MAX_ANCESTORS = 10_000  # a chain walk stops here: a pathological history cannot stall apply
CONFLICT_NOTE = "conflict over {p}: lost to {w} ({why})"
_META = "sync.claimants."
HLC = tuple[int, int, str]


@dataclass(frozen=True, slots=True)
class Rank:
    chain: int
    hlc: HLC
    knowledge_id: str

    def key(self) -> tuple[int, HLC, str]:
        return (self.chain, self.hlc, self.knowledge_id)


@dataclass(frozen=True, slots=True)
class Held:
    """A record as the rule sees it: stored here, or evicted from tier 0 (its pointer)."""

    knowledge_id: str
    lifecycle: Lifecycle
    superseded_by: str | None
    reason: str | None
    supersedes: str | None
    refs: tuple[str, ...]  # caused_by, then supersedes
    evidence: int
    hlc: HLC
    evicted: bool = False
    known: bool = True  # False: an evicted record whose pointer lacks its causal facts


def _parse_hlc(text: str | None) -> HLC:
    if not text:
        return (0, 0, "")
    try:
        ts = Timestamp.parse(text)
    except ValidationError:
        return (0, 0, "")
    return (ts.physical_ms, ts.logical, ts.node)


def _refs(supersedes: str | None, caused_by: Sequence[str] | None) -> tuple[str, ...]:
    return (*(caused_by or ()), *((supersedes,) if supersedes else ()))


def _of_record(item: StoredRecord, record: AMFRecord) -> Held:
    causal, st = record.causal, item.state
    sup = causal.supersedes if causal is not None else None
    return Held(item.knowledge_id, st.lifecycle, st.superseded_by, st.reason, sup,
                _refs(sup, causal.caused_by if causal is not None else None),
                len(record.core.evidence or ()), _parse_hlc(causal.hlc if causal else None))


def _of_pointer(p: Pointer) -> Held:
    return Held(p.knowledge_id, p.lifecycle, p.superseded_by, p.reason, p.supersedes,
                _refs(p.supersedes, p.caused_by), p.evidence, _parse_hlc(p.causal_hlc),
                evicted=True, known=p.causal_known)


def held(memory: MemoryWriter, ids: Iterable[str]) -> tuple[dict[str, Held], set[str]]:
    """The records of ``ids`` known here (stored or evicted), and the purged ones."""
    wanted = sorted(set(ids))
    out: dict[str, Held] = {}
    gone: set[str] = set()
    for item in memory.store.get_many(wanted):
        if item.record is None:
            gone.add(item.knowledge_id)
        else:
            out[item.knowledge_id] = _of_record(item, item.record)
    tiers = memory.store.capabilities.tiers
    missing = [k for k in wanted if k not in out and k not in gone]
    if tiers is not None and missing:
        for kid, pointer in tiers.pointers(missing).items():
            out[kid] = _of_pointer(pointer)
    return out, gone


def _one(memory: MemoryWriter, kid: str) -> Held | None:
    found, _gone = held(memory, (kid,))
    return found.get(kid)


def _walk(memory: MemoryWriter, refs: Sequence[str]) -> int:
    """Transitive ancestors of ``refs`` (counted whether or not they are held here; walked
    through those that are, evicted ones included)."""
    seen: set[str] = set()
    todo = list(refs)
    while todo and len(seen) < MAX_ANCESTORS:
        kid = todo.pop()
        if kid in seen:
            continue
        seen.add(kid)
        found = _one(memory, kid)
        if found is not None:
            todo.extend(found.refs)
    return len(seen)


def chain_length(memory: MemoryWriter, record: AMFRecord) -> int:
    """Transitive ancestors (caused_by + supersedes) known here, plus own evidence."""
    causal = record.causal
    refs = _refs(causal.supersedes, causal.caused_by) if causal is not None else ()
    return _walk(memory, refs) + len(record.core.evidence or ())


def rank(memory: MemoryWriter, record: AMFRecord) -> Rank:
    causal = record.causal
    return Rank(chain_length(memory, record), _parse_hlc(causal.hlc if causal else None),
                record.knowledge_id)


def _rank(memory: MemoryWriter, h: Held) -> Rank:
    return Rank(_walk(memory, h.refs) + h.evidence, h.hlc, h.knowledge_id)


def why(winner: Rank, loser: Rank) -> str:
    if winner.chain != loser.chain:
        return "longer causal chain"
    if winner.hlc != loser.hlc:
        return "greater HLC"
    return "greater knowledge_id"


@dataclass(frozen=True, slots=True)
class Claims:
    live: list[Held]  # records held here (stored or evicted) that supersede P
    rivals: list[str]  # every id known to have claimed P, purged ones included (sorted)
    unranked: list[str]  # evicted claimants whose pointer lacks the facts to rank them


def claims(memory: MemoryWriter, pred: Held, new: str | None) -> Claims:
    """P's claimants. A purged one is no claimant any more: purge beats everything, and a
    node that got its tombstone before the record never learns it claimed P — so every
    node decides as if it had never been written. Its id stays a rival: a pointer to it is
    this conflict's, and stale."""
    known = _known(memory, pred.knowledge_id)
    ids = set(known)
    if pred.superseded_by:
        ids.add(pred.superseded_by)
    if new:
        ids.add(new)
    found, gone = held(memory, ids)
    live, unranked = [], []
    for h in found.values():
        if not h.known:
            unranked.append(h.knowledge_id)  # it may claim P: nobody here can tell
        elif h.supersedes == pred.knowledge_id:
            live.append(h)
    rivals = sorted({h.knowledge_id for h in live} | set(known) | gone)
    return Claims(sorted(live, key=lambda h: h.knowledge_id), rivals, sorted(unranked))


def _known(memory: MemoryWriter, pred: str) -> list[str]:
    raw = memory.store.get_meta(_META + pred)
    if not raw:
        return []
    try:
        value = json.loads(raw)
    except ValueError:
        return []
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


@dataclass(frozen=True, slots=True)
class Resolution:
    conflict: bool  # two or more claimants
    changed: bool  # some state was written


def resolve(memory: MemoryWriter, pred_id: str, new: str | None = None) -> Resolution:
    """Bring P and its claimants (stored or evicted) to the state the rule gives.
    Idempotent: a second call writes nothing (``changed`` False)."""
    pred = _one(memory, pred_id)
    if pred is None:
        return Resolution(False, False)  # not here, or purged: nothing to decide
    found = claims(memory, pred, new)
    items, rivals = found.live, found.rivals
    tiers = memory.store.capabilities.tiers
    for kid in found.unranked:
        # Sync brings it back whole; its arrival decides again. Until then it is not
        # taken for gone: P is not reinstated for want of it.
        if tiers is not None:
            tiers.release(kid, hlc=memory.clock.send(), why=f"claims {pred_id}?: unrankable")
    if not items:
        if found.unranked:
            return Resolution(False, False)
        return Resolution(False, _unpoint(memory, pred, rivals))
    ids = sorted(i.knowledge_id for i in items)
    known = _known(memory, pred_id)
    if len(ids) > 1 and not set(ids) <= set(known):
        memory.store.set_meta(_META + pred_id, json.dumps(sorted(set(ids) | set(known))))
    ranks = {i.knowledge_id: _rank(memory, i) for i in items}
    win = max(ranks.values(), key=Rank.key)
    changed = _point(memory, pred, win.knowledge_id, None)
    for item in items:
        if item.knowledge_id == win.knowledge_id:
            changed = _reinstate(memory, item, rivals) or changed
            continue
        note = CONFLICT_NOTE.format(p=pred_id, w=win.knowledge_id,
                                    why=why(win, ranks[item.knowledge_id]))
        changed = _lose(memory, item, win.knowledge_id, rivals, note) or changed
    return Resolution(len(items) > 1, changed)


def _set(memory: MemoryWriter, h: Held, op: ChangeOp, lifecycle: Lifecycle,
         superseded_by: str, reason: str | None) -> None:
    """Write ``h``'s new state: on its row, or on its pointer when it is evicted.
    ``superseded_by=""`` clears the pointer (the store port only writes a non-None value)."""
    tiers = memory.store.capabilities.tiers
    if h.evicted and tiers is not None:
        tiers.restate(h.knowledge_id, hlc=memory.clock.send(), lifecycle=lifecycle,
                      superseded_by=superseded_by or None, reason=reason)
        return
    memory.store.set_state(h.knowledge_id, op, hlc=memory.clock.send(), lifecycle=lifecycle,
                           superseded_by=superseded_by, reason=reason)


def _unpoint(memory: MemoryWriter, pred: Held, rivals: list[str]) -> bool:
    """No live claimant is left (the last one was purged): P is as if it had never been
    superseded. Its own place in a conflict over its predecessor is then decided again."""
    if not _reinstate(memory, pred, rivals, why="its successor was purged"):
        return False
    if pred.supersedes:
        resolve(memory, pred.supersedes)
    return True


def _point(memory: MemoryWriter, pred: Held, winner: str, note: str | None) -> bool:
    lc = pred.lifecycle
    if lc is Lifecycle.PURGED:
        return False  # purge beats everything (PROFILE §10)
    if pred.superseded_by == winner and lc in (
        Lifecycle.SUPERSEDED, Lifecycle.ARCHIVED, Lifecycle.INVALIDATED
    ):
        return False  # already so (an outcome round may have archived it since)
    if lc is Lifecycle.INVALIDATED:
        # Invalidation beats a supersede: the record stays invalidated, with its reason. It
        # still learns what replaced it, so the state is the same whichever of the two
        # arrived first (an invalidation keeps a pointer set before it).
        _set(memory, pred, ChangeOp.SUPERSEDE, Lifecycle.INVALIDATED, winner,
             pred.reason if pred.evicted else None)
        return True
    _set(memory, pred, ChangeOp.SUPERSEDE, Lifecycle.SUPERSEDED, winner, note)
    if not pred.evicted:
        memory.searcher.drop(pred.knowledge_id)
    return True


def _own_successor(item: Held, rivals: list[str]) -> bool:
    by = item.superseded_by
    return bool(by) and by not in rivals  # "" is a pointer cleared by _reinstate


def _lose(memory: MemoryWriter, item: Held, winner: str, rivals: list[str],
          note: str) -> bool:
    if item.lifecycle not in (Lifecycle.ACTIVE, Lifecycle.DRAFT, Lifecycle.SUPERSEDED,
                              Lifecycle.INVALIDATED):
        return False
    if _own_successor(item, rivals):
        return False  # it was superseded in its own right; that pointer stays
    return _point(memory, item, winner, note)


def _reinstate(memory: MemoryWriter, item: Held, rivals: list[str],
               why: str = "conflict: wins over the record it had lost to") -> bool:
    """A record whose pointer this conflict set (a claimant marked a loser earlier, which
    wins now; a predecessor whose successors were all purged) is active again."""
    if item.superseded_by not in rivals or item.lifecycle not in (
        Lifecycle.SUPERSEDED, Lifecycle.INVALIDATED, Lifecycle.ARCHIVED
    ):
        return False
    if item.lifecycle is not Lifecycle.SUPERSEDED:  # it stays invalidated / archived
        _set(memory, item, ChangeOp.CONFIRM, item.lifecycle, "",
             item.reason if item.evicted else None)
        return True
    _set(memory, item, ChangeOp.CONFIRM, Lifecycle.ACTIVE, "", why)
    if not item.evicted:
        memory.searcher.reset()  # its vector left the index when it lost; rebuilt on next use
    return True


def settle(memory: MemoryWriter, records: Iterable[AMFRecord]) -> int:
    """Resolve the predecessor of each of ``records`` that supersedes one (a no-op for the
    others); the number of conflicts this decided. Every node runs it when such a record is
    stored — the node where a client wrote it as much as those it reached by sync — so the
    writer holds the same state as everyone else, not only its peers."""
    decided = 0
    for record in records:
        pred = record.causal.supersedes if record.causal is not None else None
        if pred:
            done = resolve(memory, pred, record.knowledge_id)
            decided += int(done.conflict and done.changed)
    return decided


def superseded_by_purge(memory: MemoryWriter, knowledge_id: str) -> str | None:
    """What ``knowledge_id`` supersedes, read before it is purged (stored or evicted): the
    predecessor whose conflict the purge re-decides (``resolve`` after the purge)."""
    found = _one(memory, knowledge_id)
    return found.supersedes if found is not None else None


__all__ = ["CONFLICT_NOTE", "Claims", "Held", "Rank", "Resolution", "chain_length", "claims",
           "held", "rank", "resolve", "settle", "superseded_by_purge"]
