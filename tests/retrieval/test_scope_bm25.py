"""Scope-local BM25: a scoped recall is scored with its scope's term statistics."""

from __future__ import annotations

from pathlib import Path

import pytest

from amcp.memory import Memory
from amcp.retrieval.lexical import bm25_scores, rescore
from amcp.retrieval.search import SearchTuning
from amcp.store.base import RecordFilter


@pytest.fixture
def mem(tmp_path: Path) -> Memory:
    m = Memory(tmp_path / "m.db", embedder=None, check_embedder=False)
    # Scope A: 'alpha' in two records, 'beta' in one. Scope B: 'beta' in half its records.
    m.remember("alpha one here", scope="A")
    m.remember("alpha two here", scope="A")
    m.remember("beta three here", scope="A")
    for i in range(20):
        m.remember(f"filler {i} of scope a", scope="A")
    for i in range(200):
        m.remember(f"beta {i} of scope b" if i % 2 else f"other {i} of scope b", scope="B")
    return m


def texts_of(mem: Memory, hits: list[str]) -> list[str]:
    return [mem.get(kid).record.text for kid in hits]  # type: ignore[union-attr]


def test_a_scoped_query_ranks_by_the_scopes_idf(mem: Memory) -> None:
    # Store-wide, 'beta' is in 101 of 223 records (IDF ~0.2) and 'alpha' in 2 (~4.4): the
    # alpha records win. Within A, 'beta' is the rarer word (1 of 23 against 2).
    scoped = mem.recall("alpha beta", scope="A", k=3, touch=False)
    assert texts_of(mem, [h.knowledge_id for h in scoped.hits])[0] == "beta three here"
    everywhere = mem.recall("alpha beta", k=3, touch=False)
    assert texts_of(mem, [h.knowledge_id for h in everywhere.hits])[:2] == [
        "alpha one here", "alpha two here"]


def test_other_lifecycles_or_many_scopes_fall_back_to_the_stores_statistics(
    mem: Memory,
) -> None:
    searcher = mem.searcher
    scoped = RecordFilter(scopes=("A",))
    assert searcher._scope_stats(scoped, ["beta"]) is not None
    for flt in (
        RecordFilter(scopes=("A",), lifecycles=None),
        RecordFilter(scopes=tuple(f"s{i}" for i in range(17))),
        RecordFilter(scopes=()),
        RecordFilter(),
    ):
        assert searcher._scope_stats(flt, ["beta"]) is None
    assert searcher._scope_stats(scoped, []) is None


def test_terms_common_in_the_scope_are_pruned_and_left_to_coverage(tmp_path: Path) -> None:
    m = Memory(tmp_path / "m.db", embedder=None, check_embedder=False)
    # 'caroline' is in most of chat 1's lines but rare in the store (chat 2 is larger).
    for i in range(8):
        m.remember(f"Caroline: line {i} about the weather", scope="chat1")
    m.remember("Melanie: I painted a lake", scope="chat1")
    for i in range(60):
        m.remember(f"Bob: note {i}", scope="chat2")
    flt = RecordFilter(scopes=("chat1",))
    hits, common, read = m.searcher._lexical("did caroline paint a lake", flt, 10)
    assert common == ["caroline"]
    # The re-scoring's own terms are handed on (coverage reuses them): the store's own.
    assert read and {kid for kid, _s in hits} <= set(read)
    assert read == m.store.capabilities.lexical.own_terms(list(read))
    _hits, common, read = m.searcher._lexical("did caroline paint a lake", RecordFilter(), 10)
    assert common == [] and read == {}  # store-wide, 8 of 69 records: rare enough for BM25


def test_bm25_scores_are_fts5s_with_the_whole_tables_statistics(tmp_path: Path) -> None:
    m = Memory(tmp_path / "m.db", embedder=None, check_embedder=False)
    for i in range(40):
        m.remember(
            f"note {i}: {'planner ' * (i % 3)}cache {'index' if i % 4 else 'vector'}",
            scope="one", context=f"context {'planner' if i % 5 == 0 else 'other'} words",
        )
    store = m.store
    terms = ["planner", "index", "vector"]
    fts = store.capabilities.lexical.search_lexical('"planner" OR "index" OR "vector"', RecordFilter(), 100,
                               context_weight=0.5)
    stats = store.capabilities.lexical.scope_term_stats(["one"], terms)
    ours = bm25_scores(terms, store.capabilities.lexical.lexical_texts([k for k, _s in fts]), stats.doc_freq,
                       stats.docs, stats.avg_len, context_weight=0.5)
    assert len(ours) == len(fts) == 40
    for kid, score in fts:
        assert ours[kid] == pytest.approx(score, rel=1e-9)
    assert [k for k, _s in rescore(fts, ours)] == [k for k, _s in fts]


def test_bm25_scores_edge_cases() -> None:
    texts = {"a": ("x y", ""), "b": ("", "x"), "c": ("z", "")}
    got = bm25_scores(["x"], texts, {"x": 2}, 3, 1.33, context_weight=0.5)
    assert got["a"] > got["b"] > 0 and got["c"] == 0
    # A term in most documents keeps a tiny positive weight (FTS5's floor), never negative.
    assert 0 < bm25_scores(["x"], texts, {"x": 3}, 3, 1.33)["a"] < 1e-5
    # An empty collection (no statistics): the floor weight, no division by zero.
    assert bm25_scores(["x"], texts, {}, 0, 0.0) == {
        "a": pytest.approx(1e-6), "b": pytest.approx(1e-6), "c": 0.0}
    assert bm25_scores([], texts, {}, 3, 1.0) == {"a": 0.0, "b": 0.0, "c": 0.0}
    assert rescore([("a", 1.0), ("gone", 2.0), ("b", 0.5)], {"a": 0.1, "b": 0.1}) == [
        ("a", 0.1), ("b", 0.1)]


def test_scope_depth_is_validated() -> None:
    with pytest.raises(ValueError, match="scope_depth"):
        SearchTuning(scope_depth=0)


def test_writes_supersede_and_purge_move_the_scoped_ranking(mem: Memory) -> None:
    beta = mem.recall("alpha beta", scope="A", k=1, touch=False).hits[0].knowledge_id
    # Two more 'beta' lines in A make it as common there as 'alpha' is ... and more.
    mem.remember("beta four here", scope="A")
    mem.remember("beta five here", scope="A")
    top = mem.recall("alpha beta", scope="A", k=1, touch=False).hits[0]
    assert top.item.record is not None and top.item.record.text.startswith("alpha")
    # ... and taking them out again (supersede, purge) restores the first answer.
    found = [h.knowledge_id for h in mem.recall("four five", scope="A", k=2, touch=False).hits]
    mem.supersede(found[0], "gamma instead")
    mem.purge(found[1])
    assert mem.recall("alpha beta", scope="A", k=1, touch=False).hits[0].knowledge_id == beta
