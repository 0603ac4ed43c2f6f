"""Store.states: state rows without decoding bodies (the capability the CSE ranks with)."""

from __future__ import annotations

from pathlib import Path

from tests.cse.kit import T0, add, open_mem

from amcp.amf.types import KnowledgeType, Lifecycle
from amcp.store.base import RecordFilter


def test_states_ranked_by_weight_then_newest_then_id(tmp_path: Path) -> None:
    with open_mem(tmp_path) as mem:
        a = add(mem, "first fact", at=T0)
        b = add(mem, "second fact", at=T0 + 1)
        c = add(mem, "third fact", at=T0 + 2)
        add(mem, "a pitfall", KnowledgeType.PITFALL)
        mem.store.set_weight(a, 0.9)
        flt = RecordFilter(types=(KnowledgeType.FACT,))
        rows = mem.store.states(flt, limit=10, ranked=True)
        assert [r.knowledge_id for r in rows] == [a, c, b]
        assert rows[0].state.weight == 0.9 and rows[0].type is KnowledgeType.FACT
        assert [r.knowledge_id for r in mem.store.states(flt, limit=2)] == [a, b]  # rowid
        mem.invalidate(b, "wrong")
        live = mem.store.states(RecordFilter(ids=(a, b)), limit=5)
        assert [r.knowledge_id for r in live] == [a]
        both = mem.store.states(RecordFilter(ids=(a, b), lifecycles=None), limit=5)
        assert {r.knowledge_id: r.state.lifecycle for r in both}[b] is Lifecycle.INVALIDATED
