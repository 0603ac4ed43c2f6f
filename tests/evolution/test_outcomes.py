from __future__ import annotations

from pathlib import Path

import pytest
from tests.cse.kit import add, open_mem

from amcp.amf.types import KnowledgeType, Lifecycle
from amcp.errors import GoneError, NotFoundError, ValidationError
from amcp.evolution.outcomes import (
    ARCHIVED_REASON,
    KIND_DECAY,
    Result,
    amp_kind,
    apply_outcome,
    next_weight,
)
from amcp.memory import Memory
from amcp.store.base import ChangeOp


@pytest.fixture
def mem(tmp_path: Path) -> Memory:
    m = open_mem(tmp_path)
    yield m
    m.close()


@pytest.mark.parametrize(
    ("prev", "kind", "result", "expected"),
    [
        (0.5, "facts", Result.SUCCESS, 0.5 * 0.95 + 0.3),
        (0.5, "intent", Result.FAILURE, 0.5 * 0.97 - 0.2),
        (0.5, "discovery", Result.NEUTRAL, 0.5 * 0.85),
        (0.9, "pattern", Result.SUCCESS, 1.0),  # clamped
        (0.1, "events", Result.FAILURE, 0.0),  # clamped
        (0.2, "lifefact", Result.FAILURE, 1.0),  # pinned
    ],
)
def test_weight_rule(prev: float, kind: str, result: Result, expected: float) -> None:
    assert next_weight(prev, kind, result) == pytest.approx(expected)


def test_kind_table_is_the_amp_compilers() -> None:
    assert KIND_DECAY == {"intent": 0.97, "facts": 0.95, "pattern": 0.98, "invalidation": 0.95,
                          "discovery": 0.85, "events": 0.85, "lifefact": 1.0}


def test_outcome_persists_weights_and_returns_confidence(mem: Memory) -> None:
    a = add(mem, "use attachAlgoOrds for tp/sl", KnowledgeType.FACT)
    b = add(mem, "user was born in 1990", KnowledgeType.FACT, kind="lifefact")
    ups = mem.outcome([a, b, a], "success")
    assert [u.knowledge_id for u in ups] == [a, b]
    assert ups[0].weight == pytest.approx(0.775) and ups[1].weight == 1.0
    assert mem.get(a).state.weight == pytest.approx(0.775)
    assert ups[0].confidence > 0.9 and ups[1].confidence == 1.0
    ups = mem.outcome([a], "failure")
    assert ups[0].weight == pytest.approx(0.775 * 0.95 - 0.2)
    assert amp_kind(mem.get(b).record) == "lifefact"


def test_superseded_record_is_floored_and_archived(mem: Memory) -> None:
    old = add(mem, "deploy on fridays", KnowledgeType.DECISION)
    new = mem.supersede(old, "deploy on thursdays").knowledge_id
    (up,) = apply_outcome(mem, [old], "success")
    state = mem.get(old).state
    assert up.weight == 0.0 and state.weight == 0.0
    assert state.lifecycle is Lifecycle.ARCHIVED
    assert state.superseded_by == new  # the link to the new version is kept
    last = mem.store.changes(0, limit=10_000)[-1]
    assert (last.knowledge_id, last.op) == (old, ChangeOp.ARCHIVE)
    assert last.details["reason"] == ARCHIVED_REASON
    assert mem.store.verify().ok
    # A second round floors it again and writes nothing more to the log.
    head = mem.store.capabilities.feed.change_head()
    (again,) = apply_outcome(mem, [old], "failure")
    assert again.weight == 0.0 and mem.store.capabilities.feed.change_head() == head
    assert mem.get(new).state.lifecycle is Lifecycle.ACTIVE


def test_unknown_and_purged_change_nothing(mem: Memory) -> None:
    a = add(mem, "a fact", KnowledgeType.FACT)
    gone = add(mem, "a secret", KnowledgeType.FACT)
    mem.purge(gone)
    with pytest.raises(NotFoundError) as e404:
        apply_outcome(mem, [a, "K-" + "0" * 64], "success")
    assert int(e404.value.status) == 404
    with pytest.raises(GoneError) as e410:
        apply_outcome(mem, [a, gone], "success")
    assert int(e410.value.status) == 410
    assert mem.get(a).state.weight == 0.5
    with pytest.raises(ValidationError):
        apply_outcome(mem, [a], "great")
    with pytest.raises(ValidationError):
        apply_outcome(mem, [], "success")


def test_a_supersede_delivered_again_by_sync_keeps_the_archive(mem: Memory) -> None:
    """A peer re-sending (or first delivering) its SUPERSEDE for a record an outcome round
    archived must not move it back to 'superseded'."""
    from amcp.sync.feed import apply_changes

    old = add(mem, "the deploy uses blue/green", KnowledgeType.DECISION)
    new = mem.supersede(old, "the deploy uses canaries").knowledge_id
    apply_outcome(mem, [old], "success")
    result = apply_changes(
        mem, [{"op": "supersede", "knowledge_id": old, "superseded_by": new, "hlc": 1}]
    )
    assert (result.applied, result.duplicates) == (0, 1)
    assert mem.get(old).state.lifecycle is Lifecycle.ARCHIVED
