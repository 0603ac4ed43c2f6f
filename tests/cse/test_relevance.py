"""Task relevance for packs: SQ8 pre-scan + exact rerank (``amcp.cse.relevance``)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import faiss
import numpy as np
import pytest

from amcp.amf.types import KnowledgeType as KT
from amcp.amf.types import Lifecycle
from amcp.cse import relevance as rel
from amcp.memory import Memory
from amcp.store.base import RecordFilter

from .kit import NOW, add, open_mem, seed

TASK = "retry the api call after a timeout"


@pytest.fixture
def mem(tmp_path: Path) -> Memory:
    m = open_mem(tmp_path)
    seed(m, 60)
    return m


@pytest.fixture(params=[False, True], ids=["one-part", "two-parts"])
def quantise_small(request: pytest.FixtureRequest, mem: Memory) -> bool:
    """Use the quantised pre-scan even on a test-sized store, in one part and in two
    (scanned on two threads)."""
    split = 8 if request.param else rel.SPLIT_MIN
    rel.scan_for(mem.store).limits = rel.ScanLimits(min_quantised=0, split_min=split)
    return bool(request.param)


def _query(mem: Memory, text: str = TASK) -> np.ndarray:
    assert mem.embedder is not None
    return np.asarray(mem.embedder.embed_query(text), dtype=np.float32)


def _exact(mem: Memory, q: np.ndarray, k: int, flt: RecordFilter) -> list[tuple[str, float]]:
    """Brute force over every indexed vector: the answer the pre-scan must not change."""
    index = mem.searcher._ensure_index()
    assert index is not None
    rows = index.ids().tolist()
    names = mem.store.ids_for_rowids(rows)
    ok = {s.knowledge_id for s in mem.store.query(
        RecordFilter(scopes=flt.scopes, ids=tuple(names.values()), now=flt.now),
        limit=len(rows))}
    unit = (q / np.linalg.norm(q)).astype(np.float64)
    scored = []
    for r in rows:
        v = index.vector(r)
        assert v is not None
        if names[r] in ok:
            scored.append((names[r], float(v.astype(np.float64) @ unit)))
    scored.sort(key=lambda h: (-h[1], h[0]))
    return scored[:k]


def _codes(copy: rel._Copy) -> dict[int, bytes]:
    out = {}
    for part in copy.parts:
        sq = part.sq
        codes = faiss.vector_to_array(sq.codes).reshape(sq.ntotal, sq.code_size)
        out.update({int(r): codes[i].tobytes() for i, r in enumerate(part.rowids.tolist())})
    assert len(out) == len(copy)  # no row in two parts
    return out


@pytest.mark.parametrize("candidates", [16, 24, rel.CANDIDATES])
def test_equals_the_exact_top_k(mem: Memory, quantise_small: bool, candidates: int) -> None:
    flt = RecordFilter(now=NOW)
    for text in (TASK, "cache index budget", "python sqlite network socket"):
        q = _query(mem, text)
        got = rel.top_relevant(mem, q, flt, 5, candidates=candidates)
        want = _exact(mem, q, 5, flt)
        assert [k for k, _ in got] == [k for k, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-12)


def test_small_store_scans_every_row_without_a_copy(mem: Memory) -> None:
    q = _query(mem)
    flt = RecordFilter(now=NOW)
    assert rel.top_relevant(mem, q, flt, 7) == _exact(mem, q, 7, flt)
    assert rel.scan_for(mem.store).copy is None  # below MIN_QUANTISED: no SQ8 copy


def test_catch_up_equals_a_fresh_rebuild(mem: Memory, quantise_small: bool) -> None:
    flt = RecordFilter(now=NOW)
    q = _query(mem)
    rel.top_relevant(mem, q, flt, 5, candidates=16)
    copy = rel.scan_for(mem.store).copy
    assert copy is not None
    ids = [add(mem, f"retry timeout api call variant {i}", KT.PITFALL, at=NOW - 60 + i)
           for i in range(5)]
    mem.purge(ids[0], reason="test")
    victim = mem.list_records()[3].knowledge_id
    mem.invalidate(victim, "wrong")
    caught = rel.top_relevant(mem, q, flt, 5, candidates=16)
    assert rel.scan_for(mem.store).copy is copy  # caught up in place, not rebuilt
    index = mem.searcher._ensure_index()
    assert index is not None
    assert sorted(copy.rowids.tolist()) == sorted(index.ids().tolist())
    rel.scan_for(mem.store).copy = None
    fresh = rel.top_relevant(mem, q, flt, 5, candidates=16)
    rebuilt = rel.scan_for(mem.store).copy
    assert rebuilt is not None and rebuilt is not copy
    assert _codes(rebuilt) == _codes(copy)  # a code depends on its vector alone
    assert caught == fresh == _exact(mem, q, 5, flt)
    assert ids[0] not in {k for k, _ in caught} and victim not in {k for k, _ in caught}


def test_replaced_index_is_rebuilt(mem: Memory, quantise_small: bool) -> None:
    flt = RecordFilter(now=NOW)
    q = _query(mem)
    rel.top_relevant(mem, q, flt, 5, candidates=16)
    first = rel.scan_for(mem.store).copy
    mem.searcher.reset()
    assert rel.top_relevant(mem, q, flt, 5, candidates=16) == _exact(mem, q, 5, flt)
    assert rel.scan_for(mem.store).copy is not first


def test_pack_digest_same_after_catch_up_and_rebuild(mem: Memory, quantise_small: bool) -> None:
    mem.context(TASK, budget_tokens=6000, now=NOW)
    add(mem, "retry the call once the timeout passed", KT.PITFALL, at=NOW - 5)
    caught = mem.context(TASK, budget_tokens=6000, now=NOW).digest
    rel.scan_for(mem.store).copy = None
    assert mem.context(TASK, budget_tokens=6000, now=NOW).digest == caught


@pytest.mark.parametrize("query", [
    np.zeros(384, np.float32), np.full(384, np.nan, np.float32),
    np.array([np.inf] + [0.0] * 383, np.float32), np.ones(17, np.float32),
    np.zeros(0, np.float32),
])
def test_bad_queries_relate_to_nothing(mem: Memory, quantise_small: bool,
                                       query: np.ndarray) -> None:
    assert rel.top_relevant(mem, query, RecordFilter(now=NOW), 5) == []


def test_k_zero_and_empty_store(tmp_path: Path) -> None:
    m = open_mem(tmp_path)
    q = np.ones(384, np.float32)
    assert rel.top_relevant(m, q, RecordFilter(now=NOW), 5) == []
    add(m, "one record", KT.FACT)
    assert rel.top_relevant(m, q, RecordFilter(now=NOW), 0) == []


def test_records_without_vectors_are_not_candidates(mem: Memory, quantise_small: bool) -> None:
    flt = RecordFilter(now=NOW)
    q = _query(mem)
    best = rel.top_relevant(mem, q, flt, 3, candidates=16)[0][0]
    rowid = mem.store.rowid_of(best)
    mem.searcher.removed(rowid)  # the index no longer has its vector
    got = rel.top_relevant(mem, q, flt, 3, candidates=16)
    assert best not in {k for k, _ in got} and len(got) == 3
    assert got == _exact(mem, q, 3, flt)


def test_unpackable_records_are_skipped_and_replaced(mem: Memory, quantise_small: bool) -> None:
    flt = RecordFilter(scopes=("project:x",), now=NOW)
    q = _query(mem)
    before = rel.top_relevant(mem, q, flt, 4, candidates=16)
    other = add(mem, TASK, KT.FACT, scope="project:other", at=NOW - 1)
    expiring = mem.remember(TASK + " soon", type=KT.FACT, scope="project:x",
                            created_at=NOW - 10, ttl=5).knowledge_id
    got = rel.top_relevant(mem, q, flt, 4, candidates=16)
    assert other not in {k for k, _ in got}  # another scope
    assert expiring not in {k for k, _ in got}  # expired at flt.now
    assert got == before and len(got) == 4
    # Without the scope, the identical text is the best match.
    assert rel.top_relevant(mem, q, RecordFilter(now=NOW), 1, candidates=16)[0][0] == other


def test_sensitive_records_rank_by_their_indexed_vector(mem: Memory,
                                                        quantise_small: bool) -> None:
    kid = mem.remember("retry the api call after a timeout hunter2", type=KT.PITFALL,
                       scope="project:x", sensitive=True, created_at=NOW - 1).knowledge_id
    flt = RecordFilter(now=NOW)
    q = _query(mem)
    got = rel.top_relevant(mem, q, flt, 5, candidates=16)
    assert got == _exact(mem, q, 5, flt)
    pack = mem.context(TASK, budget_tokens=20_000, now=NOW)
    for it in pack.items:
        if it.knowledge_id == kid:
            assert "hunter2" not in it.pointer and "hunter2" not in repr(it.amf)


def test_member_matches_isin() -> None:
    rng = np.random.default_rng(1)
    for _ in range(100):
        a = rng.choice(5000, int(rng.integers(0, 300)), replace=False).astype(np.int64)
        b = rng.choice(5000, int(rng.integers(0, 300)), replace=False).astype(np.int64)
        assert np.array_equal(rel._member(a, b), np.isin(b, a))
    sparse = np.array([1, 10**12], np.int64)
    assert rel._member(sparse, np.array([10**12, 3], np.int64)).tolist() == [True, False]


@pytest.mark.parametrize("dim", [16, 100, 384])
def test_padded_codes_score_as_sq8(dim: int) -> None:
    """Every unit row's codes (SQ8 codes, then pad) sum to the same value — extreme rows
    included — so the direct scan's integer score is the SQ8 inner product with the
    rounded query plus one constant for all rows."""
    rng = np.random.default_rng(dim)
    ones = np.ones(dim, np.float32)
    e0 = np.eye(1, dim, dtype=np.float32)[0]
    rows = rel._unit(np.concatenate([
        rng.standard_normal((50, dim)).astype(np.float32),
        np.abs(rng.standard_normal((5, dim))).astype(np.float32),  # all components >= 0
        np.stack([ones, -ones, e0, -e0, np.zeros(dim, np.float32)]),
    ]))
    sq = rel._new_sq(dim)
    rel._add(sq, rows)
    assert sq.d % 16 == 0 and sq.d == dim + rel._pad(dim)
    codes = faiss.vector_to_array(sq.codes).reshape(len(rows), sq.d).astype(np.int64)
    assert (codes.sum(axis=1) == rel._code_sum(dim)).all()
    sq8 = rel._encoder(dim).sa_encode(rows).astype(np.int64)
    assert np.array_equal(codes[:, :dim], sq8)  # the same codes as the uniform SQ8
    for _ in range(5):
        q = rel._unit(rng.standard_normal((1, dim)).astype(np.float32))
        qc = rel._query_codes(q)
        assert qc.min() >= 1 and qc.max() <= 255 and np.array_equal(qc, np.rint(qc))
        dist, pos = sq.search(qc, len(rows))
        want = sq8 @ (qc[0, :dim].astype(np.int64) - 128) + 128 * rel._code_sum(dim)
        assert np.array_equal(dist[0].astype(np.int64), want[pos[0]])


def _sq8(vectors: np.ndarray) -> rel._Part:
    sq = rel._new_sq(vectors.shape[1])
    rel._add(sq, vectors)
    return rel._Part(sq, np.arange(len(vectors), dtype=np.int64) * 3 + 1)


@pytest.mark.parametrize("depth", [1, 7, 40, 99, 100, 150])
def test_split_scan_gives_the_one_part_set(depth: int) -> None:
    """Two parts scanned on two threads select exactly the codes one scan selects — also
    with many exact ties at the cut (repeated vectors) and parts smaller than ``depth``."""
    rng = np.random.default_rng(7)
    base = rng.standard_normal((60, 16)).astype(np.float32)
    vecs = rel._unit(np.concatenate([base, base[:25], base[:25], base[:10]]))  # 120 rows
    whole = _sq8(vecs)
    for cut in (1, 30, 60, 119):
        parts = [rel._Part(rel._new_sq(16), whole.rowids[:cut]),
                 rel._Part(rel._new_sq(16), whole.rowids[cut:])]
        rel._add(parts[0].sq, vecs[:cut])
        rel._add(parts[1].sq, vecs[cut:])
        for _ in range(20):
            q = rel._query_codes(rel._unit(rng.standard_normal((1, 16)).astype(np.float32)))
            one = rel._scan([whole], q, depth)
            two = rel._scan(parts, q, depth, rel.StoreScan().helper)
            assert sorted(two.tolist()) == sorted(one.tolist())
            assert len(one) < depth or depth > len(vecs)  # strictly above the cut


def test_split_copy_grows_into_two_parts(mem: Memory) -> None:
    """A one-part copy of a store that grew well past split_min is rebuilt in two."""
    scan = rel.scan_for(mem.store)
    scan.limits = rel.ScanLimits(min_quantised=0, split_min=1_000)
    flt = RecordFilter(now=NOW)
    q = _query(mem)
    rel.top_relevant(mem, q, flt, 5, candidates=16)
    copy = rel.scan_for(mem.store).copy
    assert copy is not None and len(copy.parts) == 1
    scan.limits = rel.ScanLimits(min_quantised=0, split_min=20)  # the 60 rows: 3x split_min
    add(mem, "retry the call once the timeout passed", KT.PITFALL, at=NOW - 5)
    assert rel.top_relevant(mem, q, flt, 5, candidates=16) == _exact(mem, q, 5, flt)
    grown = rel.scan_for(mem.store).copy
    assert grown is not None and grown is not copy and len(grown.parts) == 2
    index = mem.searcher._ensure_index()
    assert index is not None
    assert sorted(grown.rowids.tolist()) == sorted(index.ids().tolist())
    assert abs(len(grown.parts[0].rowids) - len(grown.parts[1].rowids)) <= 1


# -- the pre-scan only bounds the work ----------------------------------------------------


@pytest.fixture
def big(tmp_path: Path) -> Memory:
    m = open_mem(tmp_path)
    seed(m, 240)
    return m


QUERIES = (TASK, "cache index budget", "python sqlite network socket", "deploy schema vector",
           "order price risk agent")


def test_pack_digest_same_through_sq8_and_exact(big: Memory) -> None:
    """The pack is the exact pipeline's, whichever path found its candidates."""
    def digests() -> list[str]:
        rel.scan_for(big.store).copy = None
        return [big.context(t, budget_tokens=6000, now=NOW).digest for t in QUERIES]

    exact = digests()  # 240 rows < MIN_QUANTISED: every row is reranked exactly
    # SQ8 depth 96 for the pack's 48 hits, so the pre-scan really cuts the 240 rows
    rel.scan_for(big.store).limits = rel.ScanLimits(candidates=96, min_quantised=0)
    assert rel.scan_for(big.store).copy is None
    sq8 = digests()
    assert rel.scan_for(big.store).copy is not None  # the SQ8 path ran
    assert sq8 == exact


def test_unpackable_rows_are_named_only_if_live(mem: Memory) -> None:
    """``_named_packable`` by row id equals asking the store's state rows by knowledge id."""
    index = mem.searcher._ensure_index()
    assert index is not None
    rows = index.ids().tolist()
    victim = mem.list_records()[2].knowledge_id
    mem.invalidate(victim, "wrong")
    for flt in (RecordFilter(now=NOW), RecordFilter(scopes=("project:x",), now=NOW),
                RecordFilter(scopes=("project:none",), now=NOW), RecordFilter()):
        names, ok = rel._named_packable(mem.store, rows, flt)
        all_names = mem.store.ids_for_rowids(rows)
        look = RecordFilter(scopes=flt.scopes, ids=tuple(all_names.values()), now=flt.now,
                            include_expired=flt.now is None)
        expected = {r.knowledge_id for r in mem.store.states(look, limit=len(rows))}
        assert ok == expected
        assert all(all_names[r] == k for r, k in names.items())
        assert victim not in ok


def test_named_rowids_names_what_filter_rowids_keeps(mem: Memory) -> None:
    index = mem.searcher._ensure_index()
    assert index is not None
    rows = index.ids().tolist()[::-1]  # any order: the answer keeps it
    mem.invalidate(mem.list_records()[1].knowledge_id, "wrong")
    store = mem.store
    assert store.named_rowids([], RecordFilter()) == {}  # type: ignore[attr-defined]
    for flt in (RecordFilter(lifecycles=(Lifecycle.ACTIVE,)), RecordFilter(),
                RecordFilter(scopes=("project:x",), now=NOW),
                RecordFilter(scopes=("project:none",))):
        named = store.named_rowids([*rows, 10**9], flt)  # type: ignore[attr-defined]
        kept = store.filter_rowids(rows, flt)  # type: ignore[attr-defined]
        assert list(named) == kept
        assert named == {r: store.ids_for_rowids(kept)[r] for r in kept}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_split_scan_works_in_a_forked_child(mem: Memory) -> None:
    """A child forked after a split scan makes its own helper thread (the parent's is not
    there), instead of waiting forever for it."""
    rel.scan_for(mem.store).limits = rel.ScanLimits(min_quantised=0, split_min=8)
    flt = RecordFilter(now=NOW)
    q = _query(mem)
    want = rel.top_relevant(mem, q, flt, 5, candidates=16)
    # the parent made its helper
    assert any(t.name.startswith("amcp-cse-scan") for t in threading.enumerate())
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit status
        code = 1
        try:
            done = threading.Event()
            threading.Thread(target=lambda: (rel.top_relevant(mem, q, flt, 5, candidates=16)
                                             == want and done.set()), daemon=True).start()
            code = 0 if done.wait(30) else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
