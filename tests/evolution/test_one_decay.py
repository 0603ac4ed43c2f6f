"""One decay model (issue 15): node reads, AMQL and context packs report the same decay
status and effective confidence, from ``amcp.evolution.decay.view`` (upstream T2-05)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from amcp.amf.record import DecayModel
from amcp.amf.timefmt import format_ts
from amcp.amf.types import DecayType
from amcp.amql.run import run_query
from amcp.evolution.decay import DAY, view
from amcp.memory import Memory
from amcp.node.views import x_state


@pytest.fixture
def mem(tmp_path: Path) -> Memory:
    return Memory(tmp_path / "memory.db", embedder="hashing")


def _old(days: float) -> str:
    return format_ts(datetime.fromtimestamp(time.time() - days * DAY, UTC))


def test_a_context_two_half_lives_old_has_lost_three_quarters(mem: Memory) -> None:
    """T2-05: KT-CONTEXT with a 3-day exponential half-life, written six days ago."""
    ctx = mem.remember("the build cache lives in /tmp/x this week", type="KT-CONTEXT",
                       confidence=0.8, created_at=_old(6),
                       decay=DecayModel(DecayType.EXPONENTIAL, 3.0))
    fact = mem.remember("the project is written in Python", type="KT-FACT",
                        confidence=0.8, created_at=_old(6))
    now = time.time()
    old = x_state(mem, mem.get(ctx.knowledge_id), now)
    kept = x_state(mem, mem.get(fact.knowledge_id), now)
    assert old["effective_confidence"] == pytest.approx(0.8 * 0.25, rel=0.05)
    assert old["decay_status"] in ("decaying", "expired")
    assert kept["effective_confidence"] == pytest.approx(0.8)
    assert kept["decay_status"] == "fresh"
    mem.close()


def test_node_reads_amql_and_the_model_agree(mem: Memory) -> None:
    ids = {
        days: mem.remember(f"context note {days}", type="KT-CONTEXT", confidence=0.9,
                           created_at=_old(days)).knowledge_id
        for days in (0, 5, 30)
    }
    now = time.time()
    for kid in ids.values():
        item = mem.get(kid)
        want = view(item.record, item.state, now).status.value  # type: ignore[arg-type]
        assert x_state(mem, item, now)["decay_status"] == want
        got = run_query(mem, f"RECALL * WHERE knowledge_id = '{kid}' AND decay_status = "
                             f"'{want}'", now=now)
        assert [r.knowledge_id for r in got.records] == [kid]
    mem.close()
