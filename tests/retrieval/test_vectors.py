"""VectorIndex: exact search, ANN agreement, filters, removal, snapshots."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from amcp.retrieval.vectors import VectorIndex

DIM = 64


def _unit(rng: np.random.Generator, n: int, dim: int = DIM) -> npt.NDArray[np.float32]:
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _clustered(
    rng: np.random.Generator, n: int, dim: int, centres: int = 300
) -> npt.NDArray[np.float32]:
    # Embedding-like data: topics (centres) plus noise. Isotropic Gaussian data is the
    # worst case for any graph index and unlike real sentence embeddings.
    c = rng.standard_normal((centres, dim)).astype(np.float32)
    x = c[rng.integers(0, centres, n)] + 0.6 * rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _brute(ids: np.ndarray, mat: np.ndarray, q: np.ndarray, k: int) -> list[int]:
    s = mat @ q
    order = np.lexsort((ids, -s))[:k]
    return ids[order].tolist()


def test_exact_search_orders_by_cosine() -> None:
    rng = np.random.default_rng(0)
    x = _unit(rng, 500)
    ids = np.arange(1000, 1500, dtype=np.int64)
    idx = VectorIndex(DIM)
    idx.add(ids, x)
    assert len(idx) == 500
    assert sorted(idx.ids().tolist()) == ids.tolist()
    q = x[17]
    hits = idx.search(q, 10)
    assert hits[0][0] == 1017
    assert hits[0][1] == pytest.approx(1.0, abs=1e-5)
    assert [h[0] for h in hits] == _brute(ids, x, q, 10)
    scores = [s for _, s in hits]
    assert scores == sorted(scores, reverse=True)
    assert idx.search(q, 0) == []
    assert len(idx.search(q, 10_000)) == 500


def test_add_is_upsert_and_normalises() -> None:
    idx = VectorIndex(3)
    idx.add([1, 2], [[1, 0, 0], [0, 2, 0]])
    idx.add([1], [[0, 0, 5]])
    assert len(idx) == 2
    v = idx.vector(1)
    assert v is not None
    assert np.allclose(v, [0, 0, 1])
    assert idx.search([0, 0, 1], 1) == [(1, pytest.approx(1.0))]
    with pytest.raises(ValueError, match="shape"):
        idx.add([3], [[1, 0]])
    with pytest.raises(ValueError, match="NaN"):
        idx.add([3], [[np.nan, 0, 0]])
    with pytest.raises(ValueError, match="dimension"):
        idx.search([1, 0], 1)


def test_remove() -> None:
    rng = np.random.default_rng(1)
    x = _unit(rng, 100)
    idx = VectorIndex(DIM)
    idx.add(np.arange(100), x)
    assert idx.remove([5, 6, 999]) == 2
    assert len(idx) == 98
    assert 5 not in idx and 7 in idx
    assert all(i not in (5, 6) for i, _ in idx.search(x[5], 100))
    idx.add([5], x[5:6])
    assert idx.search(x[5], 1)[0][0] == 5


def test_filtered_exact() -> None:
    rng = np.random.default_rng(2)
    x = _unit(rng, 1000)
    ids = np.arange(1000, dtype=np.int64)
    idx = VectorIndex(DIM)
    idx.add(ids, x)
    allowed = np.arange(0, 1000, 7)
    hits = idx.search(x[3], 5, allowed=allowed)
    assert all(i % 7 == 0 for i, _ in hits)
    assert [i for i, _ in hits] == _brute(allowed, x[allowed], x[3], 5)
    assert idx.search(x[3], 5, allowed={14, 21, 99_999}) == idx.search(x[3], 5, allowed=[14, 21])
    assert idx.search(x[3], 5, allowed=np.array([], dtype=np.int64)) == []


@pytest.fixture(scope="module")
def big() -> tuple[VectorIndex, VectorIndex, np.ndarray]:
    rng = np.random.default_rng(3)
    n, dim = 30_000, 128
    x = _clustered(rng, n + 100, dim)
    ann = VectorIndex(dim, ann_threshold=20_000, background=False)
    exact = VectorIndex(dim, ann_threshold=None)
    ids = np.arange(n, dtype=np.int64) * 3 + 11  # ids need not be dense
    ann.add(ids, x[:n])
    exact.add(ids, x[:n])
    return ann, exact, x[n:]


def _recall(a: list[tuple[int, float]], b: list[tuple[int, float]]) -> float:
    return len({i for i, _ in a} & {i for i, _ in b}) / max(1, len(b))


def test_ann_agrees_with_exact(big: tuple[VectorIndex, VectorIndex, np.ndarray]) -> None:
    pytest.importorskip("faiss")
    ann, exact, queries = big
    assert ann.ann_ready
    recall = np.mean([_recall(ann.search(q, 10), exact.search(q, 10)) for q in queries])
    assert recall >= 0.95


def test_ann_filtered(big: tuple[VectorIndex, VectorIndex, np.ndarray]) -> None:
    ann, exact, queries = big
    all_ids = exact.ids()
    wide = all_ids[all_ids % 2 == 0]  # large filter: filtered graph walk
    narrow = all_ids[::50]  # small filter: gathered rows, exact
    for allowed in (wide, narrow):
        rec = []
        for q in queries[:30]:
            hits = ann.search(q, 10, allowed=allowed)
            assert len(hits) == 10
            assert {i for i, _ in hits} <= set(allowed.tolist())
            rec.append(_recall(hits, exact.search(q, 10, allowed=allowed)))
        assert np.mean(rec) >= 0.95
    # A filter that the graph walk cannot satisfy with k hits falls back to exact.
    few = all_ids[:5]
    assert {i for i, _ in ann.search(queries[0], 10, allowed=few)} == set(few.tolist())


def test_ann_remove_and_add_after_build(tmp_path: Path) -> None:
    pytest.importorskip("faiss")
    rng = np.random.default_rng(4)
    x = _clustered(rng, 2_600, 32, centres=50)
    idx = VectorIndex(32, ann_threshold=2_000, background=False)
    idx.add(np.arange(2_500), x[:2_500])
    assert idx.ann_ready
    idx.add(np.arange(2_500, 2_600), x[2_500:])  # incremental insert into the graph
    assert idx.search(x[2_550], 1)[0][0] == 2_550
    idx.remove(np.arange(0, 2_600, 2))
    hits = idx.search(x[2_551], 20)
    assert all(i % 2 == 1 for i, _ in hits)
    assert hits[0][0] == 2_551
    # Snapshot with the graph, and back.
    idx.save(tmp_path / "v.idx", watermark=7)
    loaded = VectorIndex.load(tmp_path / "v.idx", 32, background=False)
    assert loaded is not None
    again, mark = loaded
    assert mark == 7
    assert len(again) == len(idx)
    assert sorted(again.ids().tolist()) == sorted(idx.ids().tolist())
    for q in x[:20]:
        assert again.search(q, 5) == idx.search(q, 5)


def test_background_build_catches_up() -> None:
    pytest.importorskip("faiss")
    rng = np.random.default_rng(5)
    x = _clustered(rng, 3_000, 32, centres=50)
    idx = VectorIndex(32, ann_threshold=2_000)
    idx.add(np.arange(2_000), x[:2_000])  # starts the build thread
    idx.add(np.arange(2_000, 3_000), x[2_000:])  # journalled while it runs
    idx.remove(np.arange(0, 100))
    assert idx.wait_for_ann(timeout=120)
    assert len(idx) == 2_900
    assert idx.search(x[2_999], 1)[0][0] == 2_999
    assert all(i >= 100 for i, _ in idx.search(x[50], 50))


def test_waiting_for_the_ann_waits_for_its_ready_callback_too() -> None:
    """``_building`` is cleared before ``on_ann_ready`` (the searcher's snapshot save) runs;
    a caller told "ready" must find the snapshot written (a race seen once in the suite)."""
    pytest.importorskip("faiss")
    rng = np.random.default_rng(7)
    idx = VectorIndex(32, ann_threshold=500)
    done: list[bool] = []
    started = threading.Event()

    def slow_save() -> None:
        started.set()
        time.sleep(0.3)
        done.append(True)

    idx.on_ann_ready = slow_save
    idx.add(np.arange(600), _clustered(rng, 600, 32, centres=10))  # starts the build thread
    assert started.wait(120)  # the build is done and the callback is running
    assert idx.wait_for_ann(timeout=120)
    assert done == [True]


def test_save_load_roundtrip_and_corruption(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    x = _unit(rng, 300)
    idx = VectorIndex(DIM)
    idx.add(np.arange(300) * 2, x)
    path = tmp_path / "sub" / "vectors.idx"
    idx.save(path, watermark=123)
    loaded = VectorIndex.load(path, DIM)
    assert loaded is not None
    again, mark = loaded
    assert mark == 123
    assert again.search(x[9], 5) == idx.search(x[9], 5)
    assert list(path.parent.iterdir()) == [path]  # no temp files left behind

    assert VectorIndex.load(tmp_path / "missing.idx", DIM) is None
    assert VectorIndex.load(path, DIM + 1) is None  # dimension mismatch: rebuild
    raw = bytearray(path.read_bytes())
    raw[100] ^= 0xFF
    path.write_bytes(bytes(raw))
    assert VectorIndex.load(path, DIM) is None  # checksum
    path.write_bytes(b"AMCPVIX1 truncated")
    assert VectorIndex.load(path, DIM) is None


def test_clear() -> None:
    idx = VectorIndex(3)
    idx.add([1], [[1, 0, 0]])
    idx.clear()
    assert len(idx) == 0
    assert idx.search([1, 0, 0], 3) == []


@pytest.mark.parametrize("share", [2, 7])  # wide filter (mask scores) and narrow (gather rows)
def test_filtered_exact_large_allowed(share: int) -> None:
    rng = np.random.default_rng(7)
    x = _unit(rng, 2_000)
    ids = np.arange(2_000, dtype=np.int64) + 500
    idx = VectorIndex(DIM, exact_allowed_max=10)
    idx.add(ids, x)
    allowed = ids[::share]
    for q in x[:5]:
        hits = idx.search(q, 20, allowed=allowed)
        assert [i for i, _ in hits] == _brute(allowed, x[::share], q, 20)
    assert len(idx.search(x[0], 5_000, allowed=allowed)) == len(allowed)
