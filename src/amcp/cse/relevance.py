"""Task relevance for packs: the exact top-``k`` records by cosine, fast and deterministic.

A pack needs the ``k`` records most similar to the task. Scanning every float32 vector is
exact but reads ``n × dim × 4`` bytes per pack (150 MB at 100k × 384): memory-bound, and
the slowest step of a pack. The retrieval index's HNSW graph is faster but approximate and
depends on build order and readiness, which a pack's digest may not (PROFILE §7).

So two steps:

1. **pre-scan** a scalar-quantised copy of the vectors (SQ8, one byte a component, a
   quarter of the bytes) for the ``CANDIDATES`` best approximate scores. The range is
   FIXED at [-1, 1] (vectors are unit length), not trained on the data, so a vector's code
   depends on that vector alone: a copy caught up after writes holds the same codes as one
   rebuilt from scratch. The codes are scanned with integer multiply-adds (``_add``,
   ``_query_codes``), in two parts on two threads for a large copy (``_scan``). The
   candidates are every row whose approximate score is *strictly* above the
   ``CANDIDATES``-th best score — a set fixed by the scores alone, never by row order, by
   the split into parts or by how ties at the cut were broken;
2. **rerank** the candidates exactly (float64 dot products of the index's float32 rows),
   drop what is not packable (another scope, not active, expired), and order by score,
   ties by knowledge id.

Quantisation moves a score by about ``2/255/sqrt(12) ≈ 0.002`` (|q| = 1), far less than the
gap between the ``k``-th and the ``CANDIDATES``-th best on real stores, so the pre-scan keeps
every record of the exact top-``k`` (``bench/cse_pack.py`` measures how often it does not).

The copy mirrors ``HybridSearcher``'s vector index (the rows an exact scan would read) and
is kept per store in a ``StoreScan`` — with the store's ``ScanLimits`` and the helper
thread — which lives in the store's CSE cache (``cache_for``), so it goes with the store.
When the store's change mark moves, the rows added to or removed from the index are applied
and the records named by the change log are re-encoded; when the log cannot say what
changed, or the index was replaced, it is rebuilt.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, cast
from weakref import ref

import numpy as np
import numpy.typing as npt

from amcp.amf.types import Lifecycle
from amcp.cse.cache import MAX_CATCH_UP, ChangeMark, cache_for, change_mark
from amcp.store.base import RecordFilter, Store, vectors_of

if TYPE_CHECKING:
    from amcp.ports import MemoryReader
    from amcp.retrieval.vectors import VectorIndex

CANDIDATES = 384  # pre-scan depth: 8 × the pack's 48 hits; ~1 ms more rerank than 48
MIN_QUANTISED = 4_096  # below this, every row is a candidate (the exact rerank is cheaper)
SPLIT_MIN = 32_768  # rows from which the copy is two parts, scanned on two threads at once
_BUILD_CHUNK = 8_192  # rows encoded at a time while building (bounds the float copy)

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]


@dataclass(slots=True)
class _Part:
    """SQ8 codes of some of the index's rows, in a faiss index; ``rowids[i]`` is the id of
    code ``i``."""

    sq: Any  # faiss.IndexScalarQuantizer
    rowids: I64


@dataclass(slots=True)
class _Copy:
    """SQ8 codes of every row of the index, in one part, or two (scanned at once) from
    ``SPLIT_MIN`` rows on. Which part holds a row changes no score (see ``_scan``)."""

    index: ref[Any]  # the VectorIndex mirrored (weakly: a replaced index is rebuilt)
    mark: ChangeMark
    parts: list[_Part]
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def rowids(self) -> I64:
        out: I64 = np.concatenate([p.rowids for p in self.parts])
        return out

    def __len__(self) -> int:
        return sum(len(p.rowids) for p in self.parts)


@dataclass(frozen=True, slots=True)
class ScanLimits:
    """Where the pre-scan pays: ``candidates`` its depth, ``min_quantised`` the rows below
    which every row is reranked exactly (no copy), ``split_min`` the rows from which the
    copy is two parts scanned at once. The defaults are measured (docs/cse.md); tests use
    small ones to take the quantised paths on small stores."""

    candidates: int = CANDIDATES
    min_quantised: int = MIN_QUANTISED
    split_min: int = SPLIT_MIN


class StoreScan:
    """One store's pre-scan state: its ``limits``, its SQ8 ``copy`` and the helper thread
    that scans a copy's second part (made on first use; a forked child, which has the
    parent's executor object but not its thread, makes its own)."""

    def __init__(self, limits: ScanLimits | None = None) -> None:
        self.limits = limits or ScanLimits()
        self.copy: _Copy | None = None
        self._helper: ThreadPoolExecutor | None = None
        self._helper_pid = 0
        self._lock = threading.Lock()

    def helper(self) -> ThreadPoolExecutor:
        """The thread that scans the second part; its faiss calls run on one OpenMP thread,
        as the caller's do (see ``_one_thread``)."""
        with self._lock:
            if self._helper is None or self._helper_pid != os.getpid():
                self._helper = ThreadPoolExecutor(
                    1, thread_name_prefix="amcp-cse-scan", initializer=_single_omp_thread
                )
                self._helper_pid = os.getpid()
            return self._helper


def scan_for(store: Store) -> StoreScan:
    """``store``'s pre-scan state, kept in its CSE cache (made with default limits)."""
    cache = cache_for(store)
    with _SCAN_LOCK:
        if cache.scan is None:
            cache.scan = StoreScan()
        return cast(StoreScan, cache.scan)


_SCAN_LOCK = threading.Lock()  # makes each store's StoreScan once


def top_relevant(
    memory: MemoryReader, query: Any, flt: RecordFilter, k: int, *,
    candidates: int | None = None,
) -> list[tuple[str, float]]:
    """The ``k`` packable records most similar to ``query``: ``(knowledge_id, cosine)``,
    best first, ties by knowledge id. Packable: in ``flt.scopes`` (when given), active, not
    expired at ``flt.now``. A query that is empty, zero or not finite relates to nothing.
    ``candidates``: the pre-scan depth (default: the store's ``ScanLimits``)."""
    index = memory.searcher._ensure_index()
    if index is None or len(index) == 0 or k <= 0:
        return []
    q = np.asarray(query, dtype=np.float32).reshape(-1)
    if q.shape[0] != index.dim or not np.isfinite(q).all():
        return []
    norm = float(np.linalg.norm(q))
    if norm == 0.0:
        return []
    q = q / np.float32(norm)
    store = memory.store
    scan = scan_for(store)
    depth = scan.limits.candidates if candidates is None else candidates
    rows = _prescan(store, index, q, max(depth, k), scan)
    return _rerank(store, index, q, rows, flt, k)


# -- pre-scan --------------------------------------------------------------------------


def _prescan(
    store: Store, index: VectorIndex, q: F32, depth: int, scan: StoreScan | None = None
) -> I64:
    """Candidate row ids: all rows when few, else those strictly above the ``depth``-th
    best approximate score (a set that does not depend on row order)."""
    scan = scan or scan_for(store)
    if len(index) <= max(depth, scan.limits.min_quantised):
        return index.ids()
    faiss = _faiss()
    if faiss is None:  # no faiss: the index has no graph either, so its search is exact
        return np.asarray([r for r, _ in index.search(q, depth)], dtype=np.int64)
    copy = quantised(store, index, scan)
    with copy.lock, _one_thread(faiss):
        return _scan(copy.parts, _query_codes(q), depth, scan.helper)


def _scan(
    parts: list[_Part], q: F32, depth: int,
    helper: Callable[[], ThreadPoolExecutor] | None = None,
) -> I64:
    """Row ids of the codes strictly above the ``depth``-th best approximate score over all
    ``parts`` (all of them when there are fewer than ``depth`` codes).

    Parts after the first are scanned on a helper thread while this one scans the first
    (faiss releases the GIL; each scan runs on one OpenMP thread), which halves the scan's
    wall time when the node has a free core. The merge is the set one scan of every code
    gives: a code's score depends on that code and the query alone, and each code of the
    overall top ``depth`` is in its own part's top ``depth``, so the ``depth``-th best
    score of the parts' lists together is the overall ``depth``-th best. ``helper``: the
    executor for the later parts (made on first use)."""
    if len(parts) == 1:
        found = [_search(parts[0], q, depth)]
    else:
        assert helper is not None, "a copy in parts is scanned with a helper thread"
        pool = helper()
        later = [pool.submit(_search, p, q, depth) for p in parts[1:]]
        try:
            first = _search(parts[0], q, depth)
        finally:  # never leave a helper scanning a copy the caller is about to unlock
            rest = [f.result() for f in later]
        found = [first, *rest]
    dist = np.concatenate([d for d, _ in found])
    ids = np.concatenate([r for _, r in found])
    if len(ids) < depth:  # fewer codes than asked: all of them
        return ids
    cut = np.partition(dist, len(dist) - depth)[len(dist) - depth]  # the depth-th best
    out: I64 = ids[dist > cut]
    return out


def _search(part: _Part, q: F32, depth: int) -> tuple[F32, I64]:
    """The approximate scores and row ids of ``part``'s top ``depth`` codes."""
    dist, pos = part.sq.search(q, depth)
    dist, pos = np.asarray(dist[0]), np.asarray(pos[0], dtype=np.int64)
    ok = pos >= 0
    return dist[ok], part.rowids[pos[ok]]


def _single_omp_thread() -> None:
    faiss = _faiss()
    if faiss is not None:
        faiss.omp_set_num_threads(1)


def quantised(store: Store, index: VectorIndex, scan: StoreScan | None = None) -> _Copy:
    """The store's SQ8 copy of ``index``, caught up with the store's change mark."""
    scan = scan or scan_for(store)
    mark = change_mark(store)
    split_min = scan.limits.split_min
    copy = scan.copy
    if copy is not None and copy.index() is index:
        if copy.mark == mark and len(copy) == len(index):
            return copy
        with copy.lock:
            if _catch_up(store, index, copy, mark, split_min):
                return copy
    copy = _build(store, index, mark, split_min)
    scan.copy = copy
    return copy


def _pad(dim: int) -> int:
    """Pad components after a row's ``dim`` codes: enough to bring every code sum to
    ``_code_sum(dim)``, and a multiple of 16 in all (faiss's integer kernel needs it).

    A unit row's components sum to at most ``sqrt(dim)`` in magnitude, so its codes sum
    to ``127.5 × dim`` give or take ``127.5 × sqrt(dim) + dim``."""
    need = math.ceil((255 * math.sqrt(dim) + dim + 2) / 255)
    return -(-(dim + need) // 16) * 16 - dim


def _code_sum(dim: int) -> int:
    return math.ceil(127.5 * dim + 127.5 * math.sqrt(dim)) + 1


@lru_cache(maxsize=8)
def _encoder(dim: int) -> Any:
    """SQ8 over the FIXED range [-1, 1]: code ``floor(255 × (x + 1) / 2)``, so a code is a
    function of its vector alone (a trained range would move with the store's content)."""
    faiss = _faiss()
    assert faiss is not None
    enc = faiss.IndexScalarQuantizer(
        dim, faiss.ScalarQuantizer.QT_8bit_uniform, faiss.METRIC_INNER_PRODUCT
    )
    enc.train(np.stack([np.full(dim, -1.0, np.float32), np.full(dim, 1.0, np.float32)]))
    return enc


def _new_sq(dim: int) -> Any:
    """An empty copy part for ``dim``-component rows: their SQ8 codes, padded (``_add``),
    scanned by faiss's 8-bit *direct* inner product — integer multiply-adds, 16 components
    at a time, ~40% less CPU than decoding each code to floats (the uniform kernel)."""
    faiss = _faiss()
    assert faiss is not None
    width = dim + _pad(dim)
    sq = faiss.IndexScalarQuantizer(
        width, faiss.ScalarQuantizer.QT_8bit_direct, faiss.METRIC_INNER_PRODUCT
    )
    sq.train(np.zeros((1, width), np.float32))  # direct codes need no training
    return sq


def _add(sq: Any, mat: F32) -> None:
    """Append the codes of unit rows ``mat`` to ``sq``: each row's SQ8 codes, then pad
    codes that bring the row's code sum to ``_code_sum`` — so the scan's integer inner
    product with ``_query_codes`` (offset by 128 to be unsigned) ranks as the SQ8 scores do,
    the offset adding the same ``128 × _code_sum`` to every row."""
    n, dim = mat.shape
    if not n:
        return
    codes = _encoder(dim).sa_encode(np.ascontiguousarray(mat, dtype=np.float32))
    width = _pad(dim)
    pad = _code_sum(dim) - codes.sum(axis=1, dtype=np.int64)
    # A unit row always fits (see _pad); anything else is clipped: its score is then only
    # approximate, which the exact rerank absorbs.
    pad = np.clip(pad, 0, 255 * width)
    fill = np.clip(pad[:, None] - 255 * np.arange(width, dtype=np.int64), 0, 255)
    sq.add_sa_codes(np.ascontiguousarray(np.hstack([codes, fill.astype(np.uint8)])))


def _query_codes(q: F32) -> F32:
    """The query for the direct scan: ``round(q × s) + 128`` with ``s = 127 / max|q|`` (so
    1..255), then 128 for every pad component. Rounding moves a score by ~0.3/s (~0.001
    for a 384-d query), less than the codes' own quantisation (~0.002)."""
    q = q.reshape(-1)
    top = float(np.abs(q).max())
    scale = 127.0 / top if top > 0 else 0.0
    head = np.rint(q.astype(np.float64) * scale) + 128.0
    out: F32 = np.concatenate([head, np.full(_pad(len(q)), 128.0)]).astype(np.float32)
    return out.reshape(1, -1)


def _rows(index: VectorIndex, ids: I64) -> tuple[I64, F32]:
    """The index's float32 rows of ``ids`` (ids removed meanwhile are left out), in one
    index call: for a pack's few hundred candidates and the rows a catch-up adds."""
    kept, mat = index.vectors(ids)
    return kept, mat.astype(np.float32, copy=False)


def _unit(mat: F32) -> F32:
    """Rows scaled to unit length exactly as ``VectorIndex.add`` does, so a code built from
    the store's vector equals the code of the index's row (checked by the tests)."""
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    out: F32 = mat / np.maximum(norms, np.float32(1e-12))
    return out


def _build(
    store: Store, index: VectorIndex, mark: ChangeMark, split_min: int = SPLIT_MIN
) -> _Copy:
    """Encode every row of ``index``, reading the vectors from the store in batches: one
    index call per row would contend with a background HNSW build for the index's lock."""
    members = np.sort(index.ids())
    n = len(members)
    # Two parts from split_min rows: the first takes the first half of the rows read.
    sqs = [_new_sq(index.dim) for _ in range(2 if n >= split_min else 1)]
    limit = [n // 2, n] if len(sqs) == 2 else [n]
    ids_of: list[list[I64]] = [[] for _ in sqs]
    done = [0] * len(sqs)

    def add(ids: I64, mat: F32) -> None:
        at = 0
        for i in range(len(sqs)):
            take = len(ids) - at if i == len(sqs) - 1 else min(limit[i] - done[i], len(ids) - at)
            if take > 0:
                _add(sqs[i], mat[at:at + take])
                ids_of[i].append(ids[at:at + take])
                done[i] += take
                at += take

    for ids, mat in vectors_of(store).iter_vectors():
        keep = np.isin(ids, members, assume_unique=True)
        if keep.any() and mat.shape[1] == index.dim:
            add(ids[keep].astype(np.int64, copy=False),
                _unit(mat[keep].astype(np.float32, copy=False)))
    chunks = [i for part in ids_of for i in part]
    read = np.concatenate(chunks) if chunks else np.zeros(0, np.int64)
    missing = np.setdiff1d(members, read, assume_unique=True)
    if len(missing):  # in the index but not (or not as is) in the store: ask the index
        kept, mat = _rows(index, missing)
        if len(kept):
            add(kept, mat)
    parts = [
        _Part(sq, np.concatenate(ids) if ids else np.zeros(0, np.int64))
        for sq, ids in zip(sqs, ids_of, strict=True)
    ]
    return _Copy(ref(index), mark, parts)


def _catch_up(
    store: Store, index: VectorIndex, copy: _Copy, mark: ChangeMark, split_min: int = SPLIT_MIN
) -> bool:
    """Apply the index's changes since ``copy.mark``; False when a rebuild is needed.

    Rows added to or removed from the index are found by comparing id sets (that also
    covers purges, which leave no record to look a row id up by). A row whose vector was
    replaced in place keeps its id, so the change log names those: every record changed
    since the old mark is re-encoded. If the log cannot cover the gap, rebuild."""
    old_seq, new_seq = copy.mark.seq, mark.seq
    if old_seq is None or new_seq is None or not 0 <= new_seq - old_seq <= MAX_CATCH_UP:
        return False
    changes = store.changes(since_hlc=copy.mark.hlc, limit=MAX_CATCH_UP + 1)
    seqs = {c.seq for c in changes if c.seq > old_seq}
    if len(seqs) != new_seq - old_seq:  # a change not after the old HLC: start over
        return False
    if len(copy.parts) == 1 and len(index) >= 2 * split_min:
        return False  # grown well past split_min: rebuild in two parts
    now_ids = index.ids()
    have = copy.rowids
    in_now, in_have = _member(now_ids, have), _member(have, now_ids)
    gone, new = have[~in_now], now_ids[~in_have]
    rowid_of = vectors_of(store).rowid_of
    touched = {rowid_of(c.knowledge_id) for c in changes if c.seq > old_seq}
    same = np.asarray(sorted(r for r in touched if r is not None), dtype=np.int64)
    same = same[_member(have, same) & _member(now_ids, same)]
    drop = np.concatenate([gone, same])
    if len(drop):
        faiss = _faiss()
        assert faiss is not None
        for part in copy.parts:
            pos = np.flatnonzero(_member(drop, part.rowids)).astype(np.int64)
            if len(pos):
                # remove_ids compacts the codes in order; mirror it on the row ids.
                part.sq.remove_ids(faiss.IDSelectorBatch(len(pos), faiss.swig_ptr(pos)))
                part.rowids = np.delete(part.rowids, pos)
    kept, mat = _rows(index, np.concatenate([new, same]))
    if len(kept):
        part = min(copy.parts, key=lambda p: len(p.rowids))  # keep the halves even
        _add(part.sq, mat)
        part.rowids = np.concatenate([part.rowids, kept])
    if any(p.sq.ntotal != len(p.rowids) for p in copy.parts):
        return False
    copy.mark = mark
    return len(copy) == len(index)


def _member(pool: I64, ids: I64) -> npt.NDArray[np.bool_]:
    """``np.isin(ids, pool)``, by a bitmap when row ids are dense (SQLite's are): one pass
    instead of sorting 100k ids twice for a catch-up after one write."""
    if not len(ids) or not len(pool):
        return np.zeros(len(ids), dtype=bool)
    top = int(max(pool.max(), ids.max()))
    if int(min(pool.min(), ids.min())) < 0 or top > 4 * (len(pool) + len(ids)) + 1024:
        return np.isin(ids, pool)
    seen = np.zeros(top + 1, dtype=bool)
    seen[pool] = True
    out: npt.NDArray[np.bool_] = seen[ids]
    return out


# -- exact rerank ----------------------------------------------------------------------


def _rerank(
    store: Store, index: VectorIndex, q: F32, rows: I64, flt: RecordFilter, k: int
) -> list[tuple[str, float]]:
    rows = np.unique(rows)  # sorted: the dot products never depend on how rows arrived
    kept, mat = _rows(index, rows)
    if not len(kept):
        return []
    # float64: products of float32 values are exact, so the score is the cosine to ~1e-16.
    # einsum, not a BLAS call: OpenBLAS would split this small product over both cores and
    # leave its threads spinning, which on a loaded node costs more CPU than the product
    # (and shows up in every later step of the pack).
    scores = np.einsum("ij,j->i", mat.astype(np.float64), q.astype(np.float64))
    order = np.lexsort((kept, -scores))
    kept, scores = kept[order], scores[order]
    # Names and packability only for a prefix: best first, ``k`` at a time beyond ``2k``,
    # each cut extended over rows tied with its last score, so ties are ordered by
    # knowledge id over every row they involve.
    hits: list[tuple[str, float]] = []
    start, step = 0, 2 * k
    while start < len(kept) and len(hits) < k:
        end = min(start + step, len(kept))
        while end < len(kept) and scores[end] == scores[end - 1]:
            end += 1
        part = kept[start:end].tolist()
        names, ok = _named_packable(store, part, flt)
        hits.extend(
            (names[r], float(s)) for r, s in zip(part, scores[start:end].tolist(), strict=True)
            if names.get(r) in ok
        )
        start, step = end, k
    hits.sort(key=lambda h: (-h[1], h[0]))
    return hits[:k]


def _named_packable(
    store: Store, rowids: list[int], flt: RecordFilter
) -> tuple[dict[int, str], set[str]]:
    """Knowledge ids of ``rowids`` and those of them that are packable: rowid lookups (a
    knowledge-id ``IN`` list walks the id index and then the table for each)."""
    names = vectors_of(store).named_rowids(
        rowids, RecordFilter(scopes=flt.scopes, lifecycles=(Lifecycle.ACTIVE,),
                             now=flt.now, include_expired=flt.now is None))
    return names, set(names.values())


@contextmanager
def _one_thread(faiss: Any) -> Iterator[None]:
    """One OpenMP thread for this thread's faiss calls. faiss splits a single query's scan
    across threads; on a busy 2-core node that costs ~2.5x the CPU and more wall time than
    scanning alone (measured in docs/cse.md). The setting is this thread's own (OpenMP keeps
    it per thread), so the background HNSW build keeps its threads; it is restored after."""
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


def _faiss() -> Any:
    try:
        import faiss
    except ImportError:  # pragma: no cover - faiss is a dependency; exact search still works
        return None
    return faiss


__all__ = ["CANDIDATES", "ScanLimits", "StoreScan", "quantised", "scan_for", "top_relevant"]
