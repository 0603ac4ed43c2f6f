"""Trust weights learned from outcomes (the AMP compiler's weight rule, on the store).

One *outcome round* = one call naming the records an agent used and how it went. For each
named record, in one transaction:

    w' = clamp(w × decay[kind] + delta[result], 0, 1)

- ``delta``: success +0.30, failure −0.20, neutral 0 (a neutral round only decays).
- ``decay[kind]`` is applied once per round *that names the record*, before the delta — the
  AMP compiler's per-round rule. We chose per round over per elapsed day because a weight is
  evidence from use: a record nobody reports on keeps its weight, and its age is already
  discounted by the time decay (``amcp.evolution.decay``) and the ROI recency factor, which
  would otherwise count time twice.
- AMP kinds (``vendor_extensions["x-kind"]``): intent .97, facts .95, pattern .98,
  invalidation .95, discovery .85, events .85, lifefact 1.0. Singular spellings (``fact``,
  ``event``) are the same kinds. Records without an AMP kind use their type's analogue:
  KT-FACT→facts, KT-PATTERN/KT-PRINCIPLE→pattern, KT-PITFALL→invalidation,
  KT-DECISION→intent, KT-CONTEXT/KT-SIGNAL→events.
- ``lifefact`` is pinned at 1.0 whatever the result (a life fact is not refuted by one task).
- A superseded record is floored to 0 and archived, as the AMP compiler does: lifecycle
  ``archived`` (an ARCHIVE change in the log, reason "superseded: archived by an outcome
  round"), its ``superseded_by`` link kept, since that link is what sync and readers follow
  to the new version. It was already out of every recall and pack; archiving says it is
  retired for good, not merely outranked. A later round naming it floors it again and
  changes nothing else.
- Unknown id → 404, purged → 410, invalidated → 410 (upstream 410 = INVALIDATED). Every id is
  checked before anything is written, so a bad id changes nothing.

Weights are node-local learned state (``store.set_weight``), not record content: they do not
enter the change log, exactly like access statistics.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING

from amcp.amf.record import AMFRecord
from amcp.amf.summary import RecordSummary
from amcp.amf.types import KnowledgeType, Lifecycle
from amcp.errors import GoneError, NotFoundError, ValidationError
from amcp.evolution.decay import effective_confidence
from amcp.store.base import ChangeOp, StoredRecord

if TYPE_CHECKING:
    from amcp.ports import MemoryWriter

ARCHIVED_REASON = "superseded: archived by an outcome round"
MAX_IDS = 1000  # one round names the records of one task, not a whole store


class Result(StrEnum):
    SUCCESS = "success"
    FAILURE = "failure"
    NEUTRAL = "neutral"


DELTA: dict[Result, float] = {Result.SUCCESS: 0.30, Result.FAILURE: -0.20, Result.NEUTRAL: 0.0}

KIND_DECAY: dict[str, float] = {
    "intent": 0.97,
    "facts": 0.95,
    "pattern": 0.98,
    "invalidation": 0.95,
    "discovery": 0.85,
    "events": 0.85,
    "lifefact": 1.0,
}
# The AMP compiler's kind names are plural for facts and events; portable records say
# ``fact`` / ``event``. Both spellings mean the same kind.
_KIND_ALIAS = {"fact": "facts", "event": "events"}
TYPE_KIND: dict[KnowledgeType, str] = {
    KnowledgeType.FACT: "facts",
    KnowledgeType.PATTERN: "pattern",
    KnowledgeType.PRINCIPLE: "pattern",
    KnowledgeType.PITFALL: "invalidation",
    KnowledgeType.DECISION: "intent",
    KnowledgeType.CONTEXT: "events",
    KnowledgeType.SIGNAL: "events",
}
PINNED = "lifefact"


@dataclass(frozen=True, slots=True)
class WeightUpdate:
    knowledge_id: str
    weight: float
    confidence: float  # effective confidence after the update (decay view, now)
    previous: float = 0.5
    kind: str = "facts"


def amp_kind(record: AMFRecord | RecordSummary) -> str:
    """The AMP kind whose decay factor applies to ``record``."""
    raw = (record.kind or "").strip().lower()
    kind = _KIND_ALIAS.get(raw, raw)
    return kind if kind in KIND_DECAY else TYPE_KIND[record.type]


def next_weight(previous: float, kind: str, result: Result, *, superseded: bool = False) -> float:
    """The pure weight rule of the module docstring."""
    if superseded:
        return 0.0
    if kind == PINNED:
        return 1.0
    w = previous * KIND_DECAY[kind] + DELTA[result]
    return 0.0 if w < 0.0 else 1.0 if w > 1.0 else round(w, 12)


def parse_result(result: str | Result) -> Result:
    try:
        return Result(str(result).strip().lower())
    except ValueError:
        raise ValidationError(
            "result", f"{result!r} is not one of success, failure, neutral"
        ) from None


def check_ids(memory: MemoryWriter, knowledge_ids: Sequence[str]) -> list[StoredRecord]:
    """Every id must name a stored, unpurged, not-invalidated record (404 / 410)."""
    if isinstance(knowledge_ids, str):
        knowledge_ids = [knowledge_ids]
    ids = list(dict.fromkeys(knowledge_ids))
    if not ids:
        raise ValidationError("knowledge_ids", "name at least one record")
    if len(ids) > MAX_IDS:
        raise ValidationError("knowledge_ids", f"at most {MAX_IDS} records per outcome")
    found: list[StoredRecord] = []
    for kid in ids:
        if not isinstance(kid, str):
            raise ValidationError("knowledge_ids", f"{kid!r} is not a knowledge id")
        item = memory.store.get(kid)
        if item is None:
            raise NotFoundError(f"no record {kid}; nothing was changed")
        if item.record is None:
            raise GoneError(f"{kid} was purged; nothing was changed")
        if item.state.lifecycle is Lifecycle.INVALIDATED:
            raise GoneError(f"{kid} is invalidated; nothing was changed")
        found.append(item)
    return found


def apply_outcome(
    memory: MemoryWriter,
    knowledge_ids: Sequence[str],
    result: str | Result,
    *,
    now: float | None = None,
) -> list[WeightUpdate]:
    """Apply one outcome round; returns the new weight and confidence of every record."""
    res = parse_result(result)
    items = check_ids(memory, knowledge_ids)
    return apply_to(memory, items, res, now=now)


def apply_to(
    memory: MemoryWriter, items: Sequence[StoredRecord], res: Result, *, now: float | None = None
) -> list[WeightUpdate]:
    """Apply a round to already-checked records (QEF uses this inside its own transaction)."""
    when = time.time() if now is None else now
    out: list[WeightUpdate] = []
    with memory.atomic():
        for item in items:
            assert item.record is not None  # check_ids refused tombstones
            kind = amp_kind(item.record)
            superseded = item.state.lifecycle is Lifecycle.SUPERSEDED or bool(
                item.state.superseded_by
            )
            weight = next_weight(item.state.weight, kind, res, superseded=superseded)
            memory.store.set_weight(item.knowledge_id, weight)
            state = replace(item.state, weight=weight)
            if item.state.lifecycle is Lifecycle.SUPERSEDED:
                # set_state keeps superseded_by when given None (COALESCE).
                memory.store.set_state(
                    item.knowledge_id, ChangeOp.ARCHIVE, hlc=memory.clock.send(),
                    lifecycle=Lifecycle.ARCHIVED, reason=ARCHIVED_REASON,
                )
                state = replace(state, lifecycle=Lifecycle.ARCHIVED)
            out.append(
                WeightUpdate(
                    item.knowledge_id,
                    weight,
                    round(effective_confidence(item.record, state, when), 12),
                    previous=item.state.weight,
                    kind=kind,
                )
            )
    return out


__all__ = [
    "DELTA",
    "KIND_DECAY",
    "PINNED",
    "TYPE_KIND",
    "Result",
    "WeightUpdate",
    "amp_kind",
    "apply_outcome",
    "apply_to",
    "check_ids",
    "next_weight",
    "parse_result",
]
