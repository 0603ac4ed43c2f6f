"""Decay models (upstream L6 knowledge_types[*].decay) and the derived confidence views.

Nothing here is stored: a record's *effective confidence* and *decay status* are computed
from its immutable content (confidence, type, decay model, created_at), its mutable node
state (learned trust weight, lifecycle) and a clock, every time they are asked for. Storing
them would make two nodes with the same records disagree the moment their clocks differ.

Models (``f(t)`` is the time factor, ``t`` days since the record was created):

- ``none``: ``f = 1``.
- ``exponential`` (half-life ``h``): ``f = 2^(-t/h)``.
- ``linear`` (half-life ``h``): ``f = max(0, 1 - t/(2h))`` — reaches ½ at ``h`` like the
  exponential model, and 0 at ``2h``.
- ``event_triggered``: ``f = 1`` until the event has happened, then 0. For a KT-SIGNAL the
  event is its QEF status becoming ``resolved`` or ``dismissed`` (upstream: "expires as soon
  as it is resolved"); for other records ``amcp.evolution.events`` invalidates them, which
  the lifecycle check below already reports as expired.

Effective confidence = ``trust(core.confidence × f(t), weight)`` where ``trust`` moves the
confidence towards 1 as the learned weight goes from 0.5 (the store's default, neutral) to
1, and towards 0 as it goes to 0 — identity at 0.5, so an unused record keeps exactly the
confidence its writer gave it.

Decay status, relative to the type's ``confidence_floor`` (upstream):

- ``floor`` = the type floor, or half the record's starting confidence when it started at or
  below the floor (a fact written at 0.85 is weaker than the KT-FACT floor of 0.9 but should
  not be born expired);
- ``expired``: the lifecycle is not active/draft, the event has fired, or the effective
  confidence fell below ``floor``;
- ``decaying``: below the midpoint between the starting confidence and ``floor``;
- ``fresh``: otherwise. ``none``-decay records are therefore always fresh while active.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from amcp.amf.record import AMFRecord, DecayModel
from amcp.amf.summary import RecordSummary
from amcp.amf.timefmt import parse_ts
from amcp.amf.types import CONFIDENCE_FLOOR, DEFAULT_DECAY, DecayType, KnowledgeType, Lifecycle
from amcp.evolution.signals import TERMINAL, signal_status
from amcp.store.base import RecordState

DAY = 86_400.0
NEUTRAL_WEIGHT = 0.5  # the store's default weight: no outcome learned yet

_LIVE = frozenset({Lifecycle.ACTIVE, Lifecycle.DRAFT})


class DecayStatus(StrEnum):
    FRESH = "fresh"
    DECAYING = "decaying"
    EXPIRED = "expired"


@dataclass(frozen=True, slots=True)
class DecayView:
    """Everything derived about one record at one instant (PROFILE §6 ``x-state``)."""

    model: DecayType
    half_life_days: float | None
    factor: float
    effective_confidence: float
    floor: float
    status: DecayStatus


def decay_model_of(record: AMFRecord | RecordSummary) -> DecayModel:
    """The record's own model, or the upstream default for its type."""
    own = record.meta.decay_model
    default_type, default_hl = DEFAULT_DECAY[record.type]
    if own is None:
        return DecayModel(type=default_type, half_life_days=default_hl)
    if own.type in (DecayType.EXPONENTIAL, DecayType.LINEAR) and own.half_life_days is None:
        # A time model without a half-life borrows the type's; KT-FACT/PITFALL have none, so
        # 30 days (the KT-PATTERN default) stands in rather than dividing by nothing.
        return DecayModel(own.type, default_hl or 30.0, own.invalidation_events)
    return own


def time_factor(model: DecayModel, age_days: float, *, fired: bool = False) -> float:
    """``f(t)`` of the module docstring, in [0, 1]."""
    age = max(age_days, 0.0)
    if model.type is DecayType.NONE:
        return 1.0
    if model.type is DecayType.EVENT_TRIGGERED:
        return 0.0 if fired else 1.0
    half = model.half_life_days or 30.0
    if model.type is DecayType.EXPONENTIAL:
        return float(math.pow(2.0, -age / half))
    return max(0.0, 1.0 - age / (2.0 * half))


def trust(confidence: float, weight: float) -> float:
    """Move ``confidence`` by the learned trust ``weight`` (identity at 0.5), in [0, 1]."""
    c = _clamp(confidence)
    w = _clamp(weight)
    if w >= NEUTRAL_WEIGHT:
        return _clamp(c + (w - NEUTRAL_WEIGHT) * 2.0 * (1.0 - c))
    return _clamp(c * 2.0 * w)


def event_fired(record: AMFRecord | RecordSummary) -> bool:
    """Has the record's triggering event happened? Only KT-SIGNAL knows without a lookup."""
    if record.type is not KnowledgeType.SIGNAL:
        return False
    status = signal_status(record)
    return status is not None and status in TERMINAL


def age_days(record: AMFRecord, now: float) -> float:
    return max(0.0, (now - parse_ts(record.meta.created_at).timestamp()) / DAY)


def view(record: AMFRecord, state: RecordState | None, now: float) -> DecayView:
    created = parse_ts(record.meta.created_at).timestamp()
    return view_of(
        record.type, record.core.confidence, created, decay_model_of(record),
        event_fired(record), state, now,
    )


def view_of(
    ktype: KnowledgeType, confidence: float, created_ts: float, model: DecayModel,
    fired: bool, state: RecordState | None, now: float,
) -> DecayView:
    """``view`` from the parts it reads, for callers that hold them without a record
    (the CSE ranks candidates from their stored bytes)."""
    factor = time_factor(model, max(0.0, (now - created_ts) / DAY), fired=fired)
    weight = state.weight if state is not None else NEUTRAL_WEIGHT
    start = trust(confidence, weight)
    effective = trust(confidence * factor, weight)
    type_floor = CONFIDENCE_FLOOR[ktype]
    floor = type_floor if start > type_floor else start / 2.0
    live = state is None or state.lifecycle in _LIVE
    if not live or fired or effective < floor:
        status = DecayStatus.EXPIRED
    elif effective < (start + floor) / 2.0:
        status = DecayStatus.DECAYING
    else:
        status = DecayStatus.FRESH
    return DecayView(model.type, model.half_life_days, factor, effective, floor, status)


def default_model(ktype: KnowledgeType) -> DecayModel:
    """The upstream default model of a type (what a record without its own follows)."""
    return _DEFAULT_MODELS[ktype]


# A constant table (DecayModel is frozen), not a cache filled on first use.
_DEFAULT_MODELS: dict[KnowledgeType, DecayModel] = {
    ktype: DecayModel(type=dtype, half_life_days=half_life)
    for ktype, (dtype, half_life) in DEFAULT_DECAY.items()
}


def effective_confidence(record: AMFRecord, state: RecordState | None, now: float) -> float:
    return view(record, state, now).effective_confidence


def decay_status(record: AMFRecord, state: RecordState | None, now: float) -> DecayStatus:
    return view(record, state, now).status


def _clamp(x: float) -> float:
    return 0.0 if x < 0.0 else 1.0 if x > 1.0 else float(x)


__all__ = [
    "DAY",
    "NEUTRAL_WEIGHT",
    "DecayStatus",
    "DecayView",
    "age_days",
    "decay_model_of",
    "decay_status",
    "default_model",
    "effective_confidence",
    "event_fired",
    "time_factor",
    "trust",
    "view",
    "view_of",
]
