from __future__ import annotations

import math
from pathlib import Path

import pytest
from tests.cse.kit import T0, add, open_mem

from amcp.amf.record import DecayModel
from amcp.amf.types import DecayType, KnowledgeType, Lifecycle
from amcp.evolution.decay import (
    DAY,
    DecayStatus,
    decay_model_of,
    decay_status,
    effective_confidence,
    time_factor,
    trust,
)
from amcp.store.base import RecordState

ACTIVE = RecordState(Lifecycle.ACTIVE, hlc=1)


@pytest.mark.parametrize(
    ("model", "age", "expected"),
    [
        (DecayModel(DecayType.NONE), 1000, 1.0),
        (DecayModel(DecayType.EXPONENTIAL, 30.0), 30, 0.5),
        (DecayModel(DecayType.EXPONENTIAL, 7.0), 14, 0.25),
        (DecayModel(DecayType.LINEAR, 10.0), 10, 0.5),
        (DecayModel(DecayType.LINEAR, 10.0), 25, 0.0),
        (DecayModel(DecayType.EVENT_TRIGGERED), 500, 1.0),
    ],
)
def test_time_factor(model: DecayModel, age: float, expected: float) -> None:
    assert math.isclose(time_factor(model, age), expected)


def test_event_triggered_fires_to_zero() -> None:
    assert time_factor(DecayModel(DecayType.EVENT_TRIGGERED), 0, fired=True) == 0.0


def test_trust_is_identity_at_neutral_weight_and_clamped() -> None:
    assert trust(0.7, 0.5) == 0.7
    assert trust(0.7, 1.0) == 1.0 and trust(0.7, 0.0) == 0.0
    assert 0.7 < trust(0.7, 0.8) < 1.0 and 0.0 < trust(0.7, 0.2) < 0.7


def test_upstream_defaults_per_type(tmp_path: Path) -> None:
    with open_mem(tmp_path) as mem:
        fact = mem.get(add(mem, "water boils at 100C", KnowledgeType.FACT)).record
        ctx = mem.get(add(mem, "sprint ends friday", KnowledgeType.CONTEXT)).record
        pat = mem.get(add(mem, "rsi below 25 wins", KnowledgeType.PATTERN)).record
    assert decay_model_of(fact).type is DecayType.NONE
    assert decay_model_of(ctx) == DecayModel(DecayType.EXPONENTIAL, 7.0)
    assert decay_model_of(pat).half_life_days == 30.0
    later = T0 + 365 * DAY
    assert effective_confidence(fact, ACTIVE, later) == pytest.approx(0.9)
    assert decay_status(fact, ACTIVE, later) is DecayStatus.FRESH
    # KT-CONTEXT 0.9: fresh at first, decaying after ~3 days, expired below its 0.5 floor.
    assert decay_status(ctx, ACTIVE, T0 + 1 * DAY) is DecayStatus.FRESH
    assert decay_status(ctx, ACTIVE, T0 + 4 * DAY) is DecayStatus.DECAYING
    assert decay_status(ctx, ACTIVE, T0 + 7 * DAY) is DecayStatus.EXPIRED
    assert effective_confidence(ctx, ACTIVE, T0 + 7 * DAY) == pytest.approx(0.45)


def test_inactive_is_expired_and_low_start_uses_half_floor(tmp_path: Path) -> None:
    with open_mem(tmp_path) as mem:
        low = mem.get(add(mem, "maybe a fact", KnowledgeType.FACT, confidence=0.6)).record
    assert decay_status(low, ACTIVE, T0) is DecayStatus.FRESH  # not born expired
    gone = RecordState(Lifecycle.INVALIDATED, hlc=2)
    assert decay_status(low, gone, T0) is DecayStatus.EXPIRED
