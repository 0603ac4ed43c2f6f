"""Supersede conflicts (PROFILE §10): the same winner on every node, whatever the order.

Two records that supersede the same predecessor P are a conflict. The winner has the longer
causal chain — more transitive ``caused_by`` / ``supersedes`` ancestors, plus its own
``core.evidence`` — then the greater HLC (``causal.hlc``, the creating node's clock, which
every copy carries unchanged), then the greater knowledge_id. That is a total order, so the
winner is the maximum of the claimant set, the same set gives the same winner, and the
state written below is a function of the set alone:

- P is superseded by the winner (unless P is invalidated or purged: those outrank it);
- every other claimant without successors of its own is superseded by the winner, with a
  conflict note as its reason; one with its own successor keeps that pointer;
- a claimant that had been marked a loser and now wins becomes active again.

The claimant set of P is ``P.superseded_by`` plus the claimants seen before, kept in the
store's meta (``sync.claimants.P``) — the store port has no index on ``causal.supersedes``.
Blocking, sans-IO; runs on the node's write thread inside the apply of a sync batch.
"""

from __future__ import annotations

import json
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


def claimants(memory: MemoryWriter, pred: StoredRecord, new: str | None) -> list[StoredRecord]:
    ids = set(_known(memory, pred.knowledge_id))
    if pred.state.superseded_by:
        ids.add(pred.state.superseded_by)
    if new:
        ids.add(new)
    out = []
    for item in memory.store.get_many(sorted(ids)):
        rec = item.record
        if rec is not None and rec.causal is not None and (
            rec.causal.supersedes == pred.knowledge_id
        ):
            out.append(item)
    return out


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
    items = claimants(memory, pred, new)
    if not items:
        return Resolution(False, False)
    ids = sorted(i.knowledge_id for i in items)
    if len(ids) > 1 and ids != sorted(_known(memory, pred_id)):
        memory.store.set_meta(_META + pred_id, json.dumps(ids))
    ranks = {i.knowledge_id: rank(memory, i.record) for i in items if i.record is not None}
    win = max(ranks.values(), key=Rank.key)
    changed = _point(memory, pred, win.knowledge_id, None)
    for item in items:
        if item.knowledge_id == win.knowledge_id:
            changed = _reinstate(memory, item, ids) or changed
            continue
        note = CONFLICT_NOTE.format(p=pred_id, w=win.knowledge_id,
                                    why=why(win, ranks[item.knowledge_id]))
        changed = _lose(memory, item, win.knowledge_id, ids, note) or changed
    return Resolution(len(items) > 1, changed)


def _point(memory: MemoryWriter, pred: StoredRecord, winner: str, note: str | None) -> bool:
    lc = pred.state.lifecycle
    if lc in (Lifecycle.INVALIDATED, Lifecycle.PURGED):
        return False  # invalidation and purge beat a supersede (PROFILE §10)
    if lc in (Lifecycle.SUPERSEDED, Lifecycle.ARCHIVED) and pred.state.superseded_by == winner:
        return False  # already so (an outcome round may have archived it since)
    memory.store.set_state(pred.knowledge_id, ChangeOp.SUPERSEDE, hlc=memory.clock.send(),
                           lifecycle=Lifecycle.SUPERSEDED, superseded_by=winner, reason=note)
    memory.searcher.drop(pred.knowledge_id)
    return True


def _own_successor(item: StoredRecord, rivals: list[str]) -> bool:
    by = item.state.superseded_by
    return by is not None and by not in rivals


def _lose(memory: MemoryWriter, item: StoredRecord, winner: str, rivals: list[str],
          note: str) -> bool:
    if item.state.lifecycle not in (Lifecycle.ACTIVE, Lifecycle.DRAFT, Lifecycle.SUPERSEDED):
        return False
    if _own_successor(item, rivals):
        return False  # it was superseded in its own right; that pointer stays
    return _point(memory, item, winner, note)


def _reinstate(memory: MemoryWriter, item: StoredRecord, rivals: list[str]) -> bool:
    """A claimant marked a loser earlier, which wins now, is active again."""
    st = item.state
    if st.lifecycle is not Lifecycle.SUPERSEDED or st.superseded_by not in rivals:
        return False
    # superseded_by="" clears the pointer: the store port only writes a non-None value.
    memory.store.set_state(item.knowledge_id, ChangeOp.CONFIRM, hlc=memory.clock.send(),
                           lifecycle=Lifecycle.ACTIVE, superseded_by="",
                           reason="conflict: wins over the record it had lost to")
    memory.searcher.reset()  # its vector left the index when it lost; rebuilt on next use
    return True


__all__ = ["CONFLICT_NOTE", "Rank", "Resolution", "chain_length", "rank", "resolve"]
