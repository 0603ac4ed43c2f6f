"""Lexical term selection, fusion and the common-term coverage boost."""

from __future__ import annotations

from pathlib import Path

import pytest

from amcp.memory import Memory
from amcp.retrieval.fusion import Candidate, boost_coverage, coverage, rrf
from amcp.retrieval.lexical import common_terms, prune_terms, query_terms
from amcp.retrieval.search import HybridSearcher, SearchTuning
from amcp.store.base import RecordFilter


def test_common_terms_are_the_known_ones_bm25_was_not_given() -> None:
    terms = ["caroline", "research", "adopt", "unknown"]
    df = {"caroline": 50, "research": 3, "adopt": 2}
    kept = prune_terms(terms, df, 100)
    assert kept == ["adopt", "research"]
    # 'unknown' is in no record: it can neither rank nor cover.
    assert common_terms(terms, df, kept) == ["caroline"]
    assert common_terms([], df, kept) == []
    assert common_terms(terms, {}, []) == []


def test_coverage_counts_the_records_own_terms() -> None:
    assert coverage(["caroline", "melanie"], "caroline went to a support group") == 0.5
    assert coverage(["caroline"], "carolines") == 0.0  # whole terms, not substrings
    assert coverage([], "anything") == 0.0
    assert coverage(["x"], "") == 0.0


def test_boost_coverage_reorders_near_ties_only() -> None:
    fused = rrf(["a", "b", "c"], [("a", 0.9), ("b", 0.8), ("c", 0.7)], k=10)
    assert [c.knowledge_id for c in fused] == ["a", "b", "c"]
    out = boost_coverage(fused, {"b": 1.0}, 0.4)
    assert [c.knowledge_id for c in out] == ["b", "a", "c"]
    # A record far below cannot be lifted over a clearly better one.
    far = [Candidate("top", 1.0, 0, 0, 0.9), Candidate("low", 0.5, 9, 9, 0.1)]
    assert [c.knowledge_id for c in boost_coverage(far, {"low": 1.0}, 0.4)] == ["top", "low"]
    # No weight, or no share: same order and scores.
    assert boost_coverage(fused, {"b": 1.0}, 0.0) == fused
    assert boost_coverage(fused, {}, 0.4) == fused


def test_tuning_rejects_bad_knobs() -> None:
    with pytest.raises(ValueError, match="coverage_weight"):
        SearchTuning(coverage_weight=-0.1)
    with pytest.raises(ValueError, match="rrf_k"):
        SearchTuning(rrf_k=0)
    with pytest.raises(ValueError, match="candidates"):
        SearchTuning(candidates=0)


def test_recall_prefers_candidates_that_also_say_the_common_words(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "m.db", embedder=None, check_embedder=False)
    # 'Caroline' is in most records, so BM25 is not asked about it; 'painted' ranks. The
    # shorter Melanie line wins on BM25 alone.
    melanie = mem.remember("Melanie: I painted a lake", scope="chat").knowledge_id
    caroline = mem.remember(
        "Caroline: I painted a sunset over the lake after the support group", scope="chat"
    ).knowledge_id
    for i in range(10):
        mem.remember(f"Caroline: note number {i} about the weather", scope="chat")
    query = "What did Caroline paint by the lake?"
    terms = query_terms(query)
    doc_freq, total = mem.store.capabilities.lexical.term_doc_freq(terms)
    assert common_terms(terms, doc_freq, prune_terms(terms, doc_freq, total)) == ["caroline"]
    flt = RecordFilter(scopes=("chat",))
    plain = HybridSearcher(mem.store, None, SearchTuning(coverage_weight=0.0))
    assert [h.knowledge_id for h in plain.search(query, flt, 2)] == [melanie, caroline]
    assert [h.knowledge_id for h in mem.searcher.search(query, flt, 2)] == [caroline, melanie]
    assert [h.knowledge_id for h in mem.recall(query, k=2, scope="chat").hits] == [
        caroline,
        melanie,
    ]
    mem.close()


def test_store_own_terms(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "m.db", embedder=None, check_embedder=False)
    a = mem.remember("deploys happen on Thursday", scope="x", context="said by the ops team")
    terms = mem.store.capabilities.lexical.own_terms([a.knowledge_id, "K-missing"])
    assert set(terms) == {a.knowledge_id}
    assert "thursday" in terms[a.knowledge_id].split()
    assert "ops" not in terms[a.knowledge_id].split()  # context is not the record's own text
    assert mem.store.capabilities.lexical.own_terms([]) == {}
    mem.close()
