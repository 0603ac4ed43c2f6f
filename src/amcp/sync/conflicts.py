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
writer alone would keep P, or its own losing fork, active.

The claimant set of P is ``P.superseded_by`` plus the claimants seen before, kept in the
store's meta (``sync.claimants.P``) — the store port has no index on ``causal.supersedes``.
Blocking, sans-IO; runs on the node's write thread inside the apply of a sync batch.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from amcp.amf.record import AMFRecord
from amcp.amf.types import Lifecycle
from amcp.clock import Timestamp
from amcp.errors import ValidationError
from amcp.ports import MemoryWriter
from amcp.store.base import ChangeOp, StoredRecord

MAX_ANCESTORS = 10_000  # a chain walk stops here: a pathological history cannot stall apply
CONFLICT_NOTE = "conflict over {p}: lost to {w} ({why})"
_META = "sync.claimants."


@dataclass(frozen=True, slots=True)
class Rank:
    chain: int
    hlc: tuple[int, int, str]
    knowledge_id: str

    def key(self) -> tuple[int, tuple[int, int, str], str]:
        return (self.chain, self.hlc, self.knowledge_id)


def _hlc(record: AMFRecord) -> tuple[int, int, str]:
    text = record.causal.hlc if record.causal is not None else None
    if not text:
        return (0, 0, "")
    try:
        ts = Timestamp.parse(text)
    except ValidationError:
        return (0, 0, "")
    return (ts.physical_ms, ts.logical, ts.node)


def _refs(record: AMFRecord) -> list[str]:
    causal = record.causal
    if causal is None:
        return []
    out = list(causal.caused_by or ())
    if causal.supersedes:
        out.append(causal.supersedes)
    return out


def chain_length(memory: MemoryWriter, record: AMFRecord) -> int:
    """Transitive ancestors (caused_by + supersedes) stored here, plus own evidence."""
    seen: set[str] = set()
    todo = _refs(record)
    while todo and len(seen) < MAX_ANCESTORS:
        kid = todo.pop()
        if kid in seen:
            continue
        seen.add(kid)
        found = memory.store.get(kid)
        if found is not None and found.record is not None:
            todo.extend(_refs(found.record))
    return len(seen) + len(record.core.evidence or ())


def rank(memory: MemoryWriter, record: AMFRecord) -> Rank:
    return Rank(chain_length(memory, record), _hlc(record), record.knowledge_id)


def why(winner: Rank, loser: Rank) -> str:
    if winner.chain != loser.chain:
        return "longer causal chain"
    if winner.hlc != loser.hlc:
        return "greater HLC"
    return "greater knowledge_id"


@dataclass(frozen=True, slots=True)
class Claims:
    live: list[StoredRecord]  # stored records that supersede P
    rivals: list[str]  # every id known to have claimed P, purged ones included (sorted)


def claims(memory: MemoryWriter, pred: StoredRecord, new: str | None) -> Claims:
    """P's claimants. A purged one is no claimant any more: purge beats everything, and a
    node that got its tombstone before the record never learns it claimed P — so every
    node decides as if it had never been written. Its id stays a rival: a pointer to it is
    this conflict's, and stale."""
    known = _known(memory, pred.knowledge_id)
    ids = set(known)
    if pred.state.superseded_by:
        ids.add(pred.state.superseded_by)
    if new:
        ids.add(new)
    live, gone = [], set()
    for item in memory.store.get_many(sorted(ids)):
        rec = item.record
        if rec is None:
            gone.add(item.knowledge_id)
        elif rec.causal is not None and rec.causal.supersedes == pred.knowledge_id:
            live.append(item)
    rivals = sorted({i.knowledge_id for i in live} | set(known) | gone)
    return Claims(live, rivals)


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
    """Bring P and its claimants to the state the rule gives. Idempotent: a second call
    writes nothing (``changed`` False)."""
    pred = memory.store.get(pred_id)
    if pred is None or pred.record is None:
        return Resolution(False, False)
    found = claims(memory, pred, new)
    items, rivals = found.live, found.rivals
    if not items:
        return Resolution(False, _unpoint(memory, pred, rivals))
    ids = sorted(i.knowledge_id for i in items)
    known = _known(memory, pred_id)
    if len(ids) > 1 and not set(ids) <= set(known):
        memory.store.set_meta(_META + pred_id, json.dumps(sorted(set(ids) | set(known))))
    ranks = {i.knowledge_id: rank(memory, i.record) for i in items if i.record is not None}
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


def _unpoint(memory: MemoryWriter, pred: StoredRecord, rivals: list[str]) -> bool:
    """No live claimant is left (the last one was purged): P is as if it had never been
    superseded. Its own place in a conflict over its predecessor is then decided again."""
    if not _reinstate(memory, pred, rivals, why="its successor was purged"):
        return False
    up = pred.record.causal.supersedes if pred.record and pred.record.causal else None
    if up:
        resolve(memory, up)
    return True


def _point(memory: MemoryWriter, pred: StoredRecord, winner: str, note: str | None) -> bool:
    lc = pred.state.lifecycle
    if lc is Lifecycle.PURGED:
        return False  # purge beats everything (PROFILE §10)
    if pred.state.superseded_by == winner and lc in (
        Lifecycle.SUPERSEDED, Lifecycle.ARCHIVED, Lifecycle.INVALIDATED
    ):
        return False  # already so (an outcome round may have archived it since)
    if lc is Lifecycle.INVALIDATED:
        # Invalidation beats a supersede: the record stays invalidated, with its reason. It
        # still learns what replaced it, so the state is the same whichever of the two
        # arrived first (an invalidation keeps a pointer set before it).
        memory.store.set_state(pred.knowledge_id, ChangeOp.SUPERSEDE, hlc=memory.clock.send(),
                               lifecycle=Lifecycle.INVALIDATED, superseded_by=winner)
        return True
    memory.store.set_state(pred.knowledge_id, ChangeOp.SUPERSEDE, hlc=memory.clock.send(),
                           lifecycle=Lifecycle.SUPERSEDED, superseded_by=winner, reason=note)
    memory.searcher.drop(pred.knowledge_id)
    return True


def _own_successor(item: StoredRecord, rivals: list[str]) -> bool:
    by = item.state.superseded_by
    return bool(by) and by not in rivals  # "" is a pointer cleared by _reinstate


def _lose(memory: MemoryWriter, item: StoredRecord, winner: str, rivals: list[str],
          note: str) -> bool:
    if item.state.lifecycle not in (Lifecycle.ACTIVE, Lifecycle.DRAFT, Lifecycle.SUPERSEDED,
                                    Lifecycle.INVALIDATED):
        return False
    if _own_successor(item, rivals):
        return False  # it was superseded in its own right; that pointer stays
    return _point(memory, item, winner, note)


def _reinstate(memory: MemoryWriter, item: StoredRecord, rivals: list[str],
               why: str = "conflict: wins over the record it had lost to") -> bool:
    """A record whose pointer this conflict set (a claimant marked a loser earlier, which
    wins now; a predecessor whose successors were all purged) is active again."""
    st = item.state
    if st.superseded_by not in rivals or st.lifecycle not in (
        Lifecycle.SUPERSEDED, Lifecycle.INVALIDATED, Lifecycle.ARCHIVED
    ):
        return False
    # superseded_by="" clears the pointer: the store port only writes a non-None value.
    if st.lifecycle is not Lifecycle.SUPERSEDED:  # it stays invalidated / archived
        memory.store.set_state(item.knowledge_id, ChangeOp.CONFIRM, hlc=memory.clock.send(),
                               lifecycle=st.lifecycle, superseded_by="")
        return True
    memory.store.set_state(item.knowledge_id, ChangeOp.CONFIRM, hlc=memory.clock.send(),
                           lifecycle=Lifecycle.ACTIVE, superseded_by="", reason=why)
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


__all__ = ["CONFLICT_NOTE", "Rank", "Resolution", "chain_length", "rank", "resolve", "settle"]
