from __future__ import annotations

from pathlib import Path

import pytest
from tests.cse.kit import T0, add, open_mem

from amcp.amf.types import KnowledgeType, Lifecycle
from amcp.cse.pack import build_pack
from amcp.errors import ConflictError, NotFoundError, ValidationError
from amcp.evolution.decay import DecayStatus, decay_status
from amcp.evolution.qef import (
    TRANSITIONS,
    SignalStatus,
    find_signal,
    pending_signals,
    record_signal,
    signal_of,
    urgent_signals,
)
from amcp.memory import Memory

DAY = 86_400.0
S = SignalStatus


@pytest.fixture
def mem(tmp_path: Path) -> Memory:
    m = open_mem(tmp_path)
    yield m
    m.close()


def emit(mem: Memory, **extra: object):
    return record_signal(mem, {"type": "perf", "metric": {"p95_ms": 31.5, "trend": [40, 35, 31]},
                               "priority": "high", **extra})


def test_signal_id_and_record(mem: Memory) -> None:
    res = emit(mem, emitted_at=T0)
    assert res.status is S.EMITTED
    assert res.signal_id.startswith("QEF-PERF-20251009-") and len(res.signal_id) == 24
    rec = mem.get(res.signal_knowledge_id).record
    assert rec.type is KnowledgeType.SIGNAL and rec.core.subject == "qef." + res.signal_id


LEGAL = [(S.EMITTED, S.ACKNOWLEDGED), (S.ACKNOWLEDGED, S.ADDRESSED), (S.ADDRESSED, S.RESOLVED),
         (S.EMITTED, S.DISMISSED), (S.ACKNOWLEDGED, S.DISMISSED), (S.ADDRESSED, S.DISMISSED)]


def test_transition_table() -> None:
    assert {t for t in TRANSITIONS if t[0] is not None} == set(LEGAL)
    assert (None, S.EMITTED) in TRANSITIONS


@pytest.mark.parametrize("path", [
    [S.ACKNOWLEDGED, S.ADDRESSED, S.RESOLVED],
    [S.DISMISSED],
    [S.ACKNOWLEDGED, S.DISMISSED],
])
def test_lifecycle_walks_supersede(mem: Memory, path: list[SignalStatus]) -> None:
    res = emit(mem)
    first = res.signal_knowledge_id
    for status in path:
        nxt = record_signal(mem, {"signal_id": res.signal_id, "status": status.value})
        assert nxt.status is status and nxt.previous_knowledge_id == res.signal_knowledge_id
        assert mem.get(res.signal_knowledge_id).state.lifecycle is Lifecycle.SUPERSEDED
        res = nxt
    assert find_signal(mem, res.signal_id).knowledge_id == res.signal_knowledge_id
    assert mem.get(first).state.superseded_by
    cur = mem.get(res.signal_knowledge_id)
    assert decay_status(cur.record, cur.state, T0) is DecayStatus.EXPIRED  # terminal
    assert pending_signals(mem) == []


@pytest.mark.parametrize(("start", "bad"), [
    ([], S.RESOLVED), ([], S.ADDRESSED), ([S.ACKNOWLEDGED], S.EMITTED),
    ([S.DISMISSED], S.ACKNOWLEDGED), ([S.ACKNOWLEDGED, S.ADDRESSED, S.RESOLVED], S.DISMISSED),
])
def test_illegal_transition_is_409(mem: Memory, start: list[SignalStatus], bad: SignalStatus
                                   ) -> None:
    res = emit(mem)
    for status in start:
        record_signal(mem, {"signal_id": res.signal_id, "status": status.value})
    with pytest.raises(ConflictError) as exc:
        record_signal(mem, {"signal_id": res.signal_id, "status": bad.value})
    assert int(exc.value.status) == 409


def test_same_status_again_is_a_no_op(mem: Memory) -> None:
    res = emit(mem)
    again = record_signal(mem, {"signal_id": res.signal_id, "status": "emitted"})
    assert not again.changed and again.signal_knowledge_id == res.signal_knowledge_id


def test_new_signal_must_start_emitted(mem: Memory) -> None:
    with pytest.raises(ConflictError):
        emit(mem, status="resolved")


@pytest.mark.parametrize("metric", [{"note": "latency went up"}, {"ok": True}, {}, "12",
                                    {"t": [1, "x"]}, {"x": float("nan")}])
def test_text_metric_is_400(mem: Memory, metric: object) -> None:
    with pytest.raises(ValidationError) as exc:
        record_signal(mem, {"type": "perf", "metric": metric})
    assert int(exc.value.status) == 400
    assert mem.stats().records == 0


def test_outcome_updates_referenced_weights(mem: Memory) -> None:
    good = add(mem, "cache the index", KnowledgeType.PATTERN)
    bad = add(mem, "retry forever", KnowledgeType.PATTERN)
    res = record_signal(mem, {"type": "perf", "metric": {"hit_rate": 0.93},
                              "references": [good], "outcome": "success"})
    assert [u.knowledge_id for u in res.updated] == [good]
    assert mem.get(good).state.weight == pytest.approx(0.5 * 0.98 + 0.3)
    assert mem.get(res.signal_knowledge_id).record.causal.caused_by == (good,)
    res2 = record_signal(mem, {"type": "err", "metric": {"errors": 12},
                               "references": [bad], "outcome": "failure"})
    assert res2.updated[0].weight == pytest.approx(0.5 * 0.98 - 0.2)
    with pytest.raises(NotFoundError):
        record_signal(mem, {"type": "x", "metric": {"a": 1}, "references": ["K-" + "1" * 64],
                            "outcome": "success"})


def test_urgent_after_seven_days_in_pack(mem: Memory) -> None:
    old = emit(mem, emitted_at=T0)
    fresh = emit(mem, emitted_at=T0 + 6 * DAY)
    acked = emit(mem, emitted_at=T0)
    record_signal(mem, {"signal_id": acked.signal_id, "status": "acknowledged"})
    now = T0 + 8 * DAY
    urgent = urgent_signals(mem, now=now)
    assert [s.signal_id for s in urgent] == [old.signal_id]
    assert fresh.signal_id not in {s.signal_id for s in urgent}
    pack = build_pack(mem, "performance", budget_tokens=8000, project="x", now=now)
    assert [s["signal_id"] for s in pack.urgent_signals] == [old.signal_id]
    assert pack.pending_signals == 3 and "QEF: 3 pending" in pack.confirmation


def test_one_name_for_the_referenced_records(mem: Memory) -> None:
    """Issue 15: PROFILE's ``knowledge_ids`` everywhere (the old ``references`` still read),
    and AMQL's qef_signal_id() finds the node's own signals."""
    from amcp.amql.run import run_query
    from amcp.errors import ValidationError

    good = mem.remember("the deploy script retries three times").knowledge_id
    res = record_signal(mem, {"type": "DEPLOY", "metric": {"ok": 1},
                              "knowledge_ids": [good], "outcome": "success"})
    assert [u.knowledge_id for u in res.updated] == [good]
    signal = signal_of(mem.get(res.signal_knowledge_id))
    assert signal is not None and signal.knowledge_ids == (good,)
    assert signal.to_dict()["knowledge_ids"] == [good] and "references" not in signal.to_dict()
    with pytest.raises(ValidationError, match="not both"):
        record_signal(mem, {"type": "DEPLOY", "metric": {"ok": 1}, "knowledge_ids": [good],
                            "references": [good]})
    found = run_query(mem, f"RECALL * WHERE knowledge_id = qef_signal_id('{res.signal_id}')")
    assert [r.knowledge_id for r in found.records] == [res.signal_knowledge_id]
