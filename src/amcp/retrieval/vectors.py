"""In-memory vector index: int64 ids -> float32 unit vectors, cosine top-k, filtered.

The index is derived state: the store's vector table is the source of truth, and callers
rebuild the index from it (or load a snapshot with ``load`` and replay changes after the
saved watermark). So every failure here degrades to "rebuild", never to wrong answers.

Search is exact (one BLAS mat-vec) while the index is small. From ``ann_threshold``
vectors on, an HNSW graph (faiss) is built in a background thread — building 100k
vectors takes tens of seconds on a small CPU, and queries must not wait for it — and is
used once ready. Exact search stays the fallback whenever the ANN could be wrong or
wasteful: a small ``allowed`` set (gathering those rows is cheaper than a filtered graph
walk) or a filtered ANN walk that found fewer than ``k`` hits.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import struct
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from amcp.errors import ConfigError

__all__ = ["VectorIndex", "write_snapshot"]

log = logging.getLogger(__name__)

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]

# Below ~20k vectors an exact mat-vec takes ~1-2 ms; above it the scan cost grows past the
# 5 ms budget (100k x 384 floats is 150 MB of memory traffic per query).
ANN_THRESHOLD = 20_000
# Filtered queries with at most this many permitted ids gather their rows and scan them
# exactly: cheaper than a graph walk that must skip most nodes, and always exact.
EXACT_ALLOWED_MAX = 4_096
# HNSW parameters: M=16 / efConstruction=40 halves build time against M=32 with recall@10
# >= 0.99 on embedding-like data; efSearch is raised to k when k is larger.
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 40
HNSW_EF_SEARCH = 96

_MAGIC = b"AMCPVIX1"
_HEADER = struct.Struct("<8sIIqqQ")  # magic, version, dim, count, watermark, ann_bytes
# Version 2 adds a tag after the header (u32 length + UTF-8): what the snapshot was taken of
# (store, model, change-log hash), checked by the owner before trusting the watermark.
_VERSION = 2
_TAG_LEN = struct.Struct("<I")


def _has_duplicates(ids: I64) -> bool:
    """Whether ``ids`` holds an id twice. Sorted neighbours, not ``np.unique``: that checks
    for a masked array and so imports ``numpy.ma`` (~12 ms of a fresh ``amcp recall``,
    which loads its index here) for arrays that never are."""
    ordered = np.sort(ids)
    return bool((ordered[1:] == ordered[:-1]).any())


def _as_ids(ids: Any) -> I64:
    if isinstance(ids, set | frozenset):
        return np.fromiter(ids, dtype=np.int64, count=len(ids))
    arr = np.asarray(ids, dtype=np.int64)
    return arr.reshape(-1)


class _Ann:
    """A faiss HNSW graph over a snapshot of the rows, with its own sequential labels.

    faiss HNSW cannot delete, so removal is a tombstone (``alive[label] = False``) and
    searches pass a bitmap selector of live labels; the owner rebuilds when tombstones
    pile up.
    """

    def __init__(self, dim: int, ids: I64, vecs: F32) -> None:
        import faiss

        self._faiss = faiss
        index = faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        self.index: Any = index  # faiss' stubs type deserialize_index() as a base Index
        self.label_ids = np.empty(0, dtype=np.int64)
        self.alive = np.empty(0, dtype=bool)
        self.dead = 0
        self.add(ids, vecs)

    @classmethod
    def restore(cls, blob: bytes, label_ids: I64, alive: npt.NDArray[np.bool_]) -> _Ann:
        import faiss

        self = cls.__new__(cls)
        self._faiss = faiss
        self.index = faiss.deserialize_index(np.frombuffer(blob, dtype=np.uint8))
        if self.index.ntotal != len(label_ids) or len(alive) != len(label_ids):
            raise ValueError("ANN snapshot does not match its label map")
        self.label_ids = label_ids
        self.alive = alive
        self.dead = int((~alive).sum())
        return self

    def serialize(self) -> bytes:
        return bytes(self._faiss.serialize_index(self.index))

    def add(self, ids: I64, vecs: F32) -> I64:
        start = int(self.index.ntotal)
        if len(ids):
            self.index.add(np.ascontiguousarray(vecs, dtype=np.float32))
        self.label_ids = np.concatenate([self.label_ids, ids])
        self.alive = np.concatenate([self.alive, np.ones(len(ids), dtype=bool)])
        return np.arange(start, start + len(ids), dtype=np.int64)

    def kill(self, labels: I64) -> None:
        labels = labels[self.alive[labels]]
        self.alive[labels] = False
        self.dead += len(labels)

    def search(
        self, query: F32, k: int, live: npt.NDArray[np.bool_] | None
    ) -> list[tuple[int, float]]:
        faiss = self._faiss
        params = faiss.SearchParametersHNSW()
        params.efSearch = max(HNSW_EF_SEARCH, k)
        if live is not None:
            # Bit i of byte i >> 3, least significant first: faiss' IDSelectorBitmap layout.
            bits = np.packbits(live, bitorder="little")
            sel = faiss.IDSelectorBitmap(len(live), faiss.swig_ptr(bits))
            params.sel = sel
        scores, labels = self.index.search(query.reshape(1, -1), k, params=params)
        out = []
        for label, score in zip(labels[0].tolist(), scores[0].tolist(), strict=True):
            if label >= 0:
                out.append((int(self.label_ids[label]), float(score)))
        return out


class VectorIndex:
    """Ids -> unit vectors with cosine top-k search. Thread-safe; adds are upserts."""

    def __init__(
        self,
        dim: int,
        *,
        ann_threshold: int | None = ANN_THRESHOLD,
        exact_allowed_max: int = EXACT_ALLOWED_MAX,
        background: bool = True,
    ) -> None:
        if dim < 1:
            raise ConfigError(f"vector dimension must be positive, got {dim}")
        self.dim = dim
        # None disables the ANN (exact search only), e.g. where faiss is not installed.
        self.ann_threshold = ann_threshold if _faiss_available() else None
        self.exact_allowed_max = exact_allowed_max
        self.background = background
        self._mat: F32 = np.zeros((0, dim), dtype=np.float32)
        self._ids: I64 = np.zeros(0, dtype=np.int64)
        self._labels: I64 = np.zeros(0, dtype=np.int64)  # ANN label per row, -1 = none
        self._n = 0
        self._pos: dict[int, int] = {}
        self._lock = threading.RLock()
        self._ann: _Ann | None = None
        self._building: threading.Thread | None = None
        # The last background build's thread: ``_building`` is cleared before its
        # ``on_ann_ready`` (the snapshot save) runs, and waiting covers that too.
        self._builder: threading.Thread | None = None
        # Changes made while a background build runs, replayed onto the new graph.
        self._journal: list[tuple[str, I64]] | None = None
        # Called (on the builder thread, no lock held) once a new graph is in use: the owner
        # snapshots it, so the next process loads the graph instead of rebuilding it.
        self.on_ann_ready: Callable[[], object] | None = None

    # -- size and contents -------------------------------------------------------------

    def __len__(self) -> int:
        return self._n

    def __contains__(self, id_: object) -> bool:
        return isinstance(id_, int | np.integer) and int(id_) in self._pos

    def ids(self) -> I64:
        with self._lock:
            return self._ids[: self._n].copy()

    def vector(self, id_: int) -> F32 | None:
        with self._lock:
            row = self._pos.get(int(id_))
            return None if row is None else self._mat[row].copy()

    def vectors(self, ids: Any) -> tuple[I64, F32]:
        """``(kept, rows)``: the rows of those ``ids`` in the index (others are left out), in
        the order given, copied under one lock acquisition — not one call per id."""
        id_arr = _as_ids(ids)
        with self._lock:
            pos = self._pos
            found = [(i, pos[i]) for i in id_arr.tolist() if i in pos]
            at = np.fromiter((p for _, p in found), dtype=np.int64, count=len(found))
            mat: F32 = self._mat[at]  # fancy indexing copies
        kept = np.fromiter((i for i, _ in found), dtype=np.int64, count=len(found))
        return kept, mat

    @property
    def ann_ready(self) -> bool:
        return self._ann is not None

    # -- mutation ----------------------------------------------------------------------

    def add(self, ids: Any, vecs: npt.ArrayLike) -> None:
        """Insert or replace vectors. Rows are re-normalised (cheap, and guards cosine)."""
        id_arr = _as_ids(ids)
        mat = np.asarray(vecs, dtype=np.float32)
        if mat.ndim == 1:
            mat = mat.reshape(1, -1)
        if mat.shape != (len(id_arr), self.dim):
            raise ValueError(
                f"expected vectors of shape ({len(id_arr)}, {self.dim}), got {mat.shape}"
            )
        if not np.isfinite(mat).all():
            raise ValueError("vectors contain NaN or infinity")
        if len(id_arr) == 0:
            return
        if _has_duplicates(id_arr):
            # Last write wins, as a sequence of single adds would do.
            _, last = np.unique(id_arr[::-1], return_index=True)
            keep = np.sort(len(id_arr) - 1 - last)
            id_arr, mat = id_arr[keep], mat[keep]
        norms = np.linalg.norm(mat, axis=1, keepdims=True)
        mat = mat / np.maximum(norms, np.float32(1e-12))
        with self._lock:
            present = [i for i in id_arr.tolist() if i in self._pos]
            if present:
                self._remove_locked(np.asarray(present, dtype=np.int64))
            self._grow(self._n + len(id_arr))
            rows = np.arange(self._n, self._n + len(id_arr))
            self._mat[rows] = mat
            self._ids[rows] = id_arr
            self._labels[rows] = -1
            for row, i in zip(rows.tolist(), id_arr.tolist(), strict=True):
                self._pos[i] = row
            self._n += len(id_arr)
            if self._ann is not None:
                self._labels[rows] = self._ann.add(id_arr, mat)
            if self._journal is not None:
                self._journal.append(("add", id_arr))
            self._maybe_build()

    def remove(self, ids: Any) -> int:
        """Remove ids (unknown ids are ignored). Returns how many were removed."""
        id_arr = _as_ids(ids)
        with self._lock:
            return self._remove_locked(id_arr)

    def _remove_locked(self, id_arr: I64) -> int:
        removed = 0
        dead_labels = []
        for i in id_arr.tolist():
            row = self._pos.pop(i, None)
            if row is None:
                continue
            removed += 1
            if self._labels[row] >= 0:
                dead_labels.append(int(self._labels[row]))
            last = self._n - 1
            if row != last:  # swap-remove keeps rows dense for the exact scan
                self._mat[row] = self._mat[last]
                self._ids[row] = self._ids[last]
                self._labels[row] = self._labels[last]
                self._pos[int(self._ids[row])] = row
            self._n -= 1
        if self._ann is not None and dead_labels:
            self._ann.kill(np.asarray(dead_labels, dtype=np.int64))
            # Tombstones cost search time and memory: rebuild once a quarter are dead.
            if self._ann.dead > max(1_000, len(self._ann.alive) // 4):
                self._drop_ann()
        if self._journal is not None and removed:
            self._journal.append(("remove", id_arr))
        if removed:
            self._maybe_build()
        return removed

    def clear(self) -> None:
        with self._lock:
            self._n = 0
            self._pos.clear()
            self._drop_ann()

    def _grow(self, need: int) -> None:
        cap = len(self._ids)
        if need <= cap:
            return
        new_cap = max(need, cap * 2, 1024)
        mat = np.zeros((new_cap, self.dim), dtype=np.float32)
        mat[: self._n] = self._mat[: self._n]
        ids = np.zeros(new_cap, dtype=np.int64)
        ids[: self._n] = self._ids[: self._n]
        labels = np.full(new_cap, -1, dtype=np.int64)
        labels[: self._n] = self._labels[: self._n]
        self._mat, self._ids, self._labels = mat, ids, labels

    # -- ANN lifecycle -----------------------------------------------------------------

    def _drop_ann(self) -> None:
        self._ann = None
        self._labels[: self._n] = -1
        self._journal = None
        self._building = None  # a running build notices it was superseded and is discarded

    def _maybe_build(self) -> None:
        if (
            self.ann_threshold is None
            or self._ann is not None
            or self._building is not None
            or self._n < self.ann_threshold
        ):
            return
        ids = self._ids[: self._n].copy()
        mat = self._mat[: self._n].copy()
        self._journal = []
        if self.background:
            t = threading.Thread(
                target=self._build, args=(ids, mat), name="amcp-vector-ann", daemon=True
            )
            self._building = self._builder = t
            t.start()
        else:
            self._building = threading.current_thread()
            self._build(ids, mat)

    def _build(self, ids: I64, mat: F32) -> None:
        me = self._building if not self.background else threading.current_thread()
        try:
            ann = _Ann(self.dim, ids, mat)  # the slow part, outside the lock
        except Exception:  # an ANN failure must never break search: stay exact
            log.exception("building the ANN vector index failed; staying with exact search")
            with self._lock:
                if self._building is me:
                    self._building = None
                    self._journal = None
                    self.ann_threshold = None
            return
        with self._lock:
            if self._building is not me:
                return  # cleared or dropped meanwhile
            journal = self._journal or []
            label_of = dict(zip(ids.tolist(), range(len(ids)), strict=True))
            for op, changed in journal:
                for i in changed.tolist():
                    label = label_of.pop(i, None)
                    if label is not None:
                        ann.kill(np.array([label], dtype=np.int64))
                if op == "add":
                    rows = [self._pos[i] for i in changed.tolist() if i in self._pos]
                    if rows:
                        r = np.asarray(rows, dtype=np.int64)
                        for i, lab in zip(
                            changed.tolist(),
                            ann.add(self._ids[r], self._mat[r]).tolist(),
                            strict=False,
                        ):
                            label_of[i] = lab
            # Labels per current row, from the replayed map.
            cur = self._ids[: self._n].tolist()
            self._labels[: self._n] = [label_of.get(i, -1) for i in cur]
            self._ann = ann
            self._journal = None
            self._building = None
        callback = self.on_ann_ready
        if callback is not None:
            try:
                callback()
            except Exception:  # a failed snapshot costs a rebuild later, never a search
                log.exception("saving the vector index snapshot failed")

    def wait_for_ann(self, timeout: float | None = None) -> bool:
        """Block until a pending background ANN build finishes, its ``on_ann_ready``
        included; True if the ANN is in use."""
        t = self._building or self._builder
        if t is not None and t is not threading.current_thread():
            t.join(timeout)
        return self._ann is not None

    # -- search ------------------------------------------------------------------------

    def search(self, query: npt.ArrayLike, k: int, allowed: Any = None) -> list[tuple[int, float]]:
        """Top-``k`` ``(id, cosine)`` pairs, best first; ``allowed`` restricts the ids."""
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise ValueError(f"query has dimension {q.shape[0]}, index has {self.dim}")
        if k <= 0:
            return []
        norm = float(np.linalg.norm(q))
        if norm > 0:
            q = q / norm
        with self._lock:
            n = self._n
            if n == 0:
                return []
            if allowed is None:
                if self._ann is None:
                    return self._exact(q, k, None)
                live = None if self._ann.dead == 0 else self._ann.alive
                return self._ann.search(q, min(k, n), live)
            return self._search_filtered(q, k, _as_ids(allowed))

    def _search_filtered(self, q: F32, k: int, allowed_ids: I64) -> list[tuple[int, float]]:
        if len(allowed_ids) <= self.exact_allowed_max:
            return self._exact(q, k, self._rows_of(allowed_ids))
        n = self._n
        # Vectorised membership (a table lookup for dense rowids): a Python loop over tens
        # of thousands of permitted ids would cost more than the search itself.
        mask = np.isin(self._ids[:n], allowed_ids)
        count = int(mask.sum())
        ann = self._ann
        if ann is None or count <= self.exact_allowed_max:
            return self._exact_masked(q, k, mask, count)
        live = np.zeros(len(ann.alive), dtype=bool)
        labels = self._labels[:n][mask]
        live[labels[labels >= 0]] = True
        # A row added after the graph snapshot but not yet in it has label -1: the graph
        # cannot see it, so fall back to exact rather than miss it.
        missing = bool((labels < 0).any())
        hits = [] if missing else ann.search(q, min(k, count), live & ann.alive)
        if len(hits) < min(k, count):
            return self._exact_masked(q, k, mask, count)
        return hits

    def _exact_masked(
        self, q: F32, k: int, mask: npt.NDArray[np.bool_], count: int
    ) -> list[tuple[int, float]]:
        if count == 0:
            return []
        if count * 4 < self._n:  # few rows: gathering them beats scoring everything
            return self._exact(q, k, np.flatnonzero(mask))
        return self._exact(q, min(k, count), None, exclude=~mask)

    def _rows_of(self, ids: I64) -> I64:
        rows = {self._pos[i] for i in ids.tolist() if i in self._pos}
        return np.sort(np.fromiter(rows, dtype=np.int64, count=len(rows)))

    def _exact(
        self, q: F32, k: int, rows: I64 | None, exclude: npt.NDArray[np.bool_] | None = None
    ) -> list[tuple[int, float]]:
        if rows is None:
            mat, ids = self._mat[: self._n], self._ids[: self._n]
        else:
            if len(rows) == 0:
                return []
            mat, ids = self._mat[rows], self._ids[rows]
        # einsum is a single-threaded loop; ``mat @ q`` is an OpenBLAS gemv whose worker
        # threads spin after each call. At 10k x 384 the threads buy nothing (the product is
        # memory-bound) and, beside a busy event loop or a second process, cost ~2x the CPU
        # and most of the wall-time variance of a recall.
        scores = np.einsum("ij,j->i", mat, q)
        if exclude is not None:
            scores[exclude] = -np.inf  # caller caps k at the number of permitted rows
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
        # Ties broken by id so results are deterministic across runs and backends.
        order = np.lexsort((ids[top], -scores[top]))
        top = top[order]
        return list(zip(ids[top].tolist(), scores[top].astype(float).tolist(), strict=True))

    # -- persistence -------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str], watermark: int, *, tag: str = "") -> None:
        """Write a snapshot atomically; ``watermark`` says which store changes it includes
        and ``tag`` (free text) what it was taken of."""
        write_snapshot(path, self.snapshot(watermark, tag=tag))

    def snapshot(self, watermark: int, *, tag: str = "") -> list[bytes]:
        """The snapshot's bytes, copied under the lock (writing them needs no lock)."""
        with self._lock:
            n = self._n
            ids = self._ids[:n].tobytes()
            mat = self._mat[:n].tobytes()
            ann_parts: list[bytes] = []
            lab_count = 0
            if self._ann is not None:
                lab_count = len(self._ann.label_ids)
                ann_parts = [
                    self._ann.label_ids.tobytes(),
                    self._ann.alive.astype(np.uint8).tobytes(),
                    self._labels[:n].tobytes(),
                    self._ann.serialize(),
                ]
        ann_len = sum(len(p) for p in ann_parts)
        raw_tag = tag.encode("utf-8")
        header = _HEADER.pack(_MAGIC, _VERSION, self.dim, n, int(watermark), ann_len)
        head = header + _TAG_LEN.pack(len(raw_tag)) + raw_tag + struct.pack("<q", lab_count)
        return [head, ids, mat, *ann_parts]

    @classmethod
    def load(
        cls, path: str | os.PathLike[str], dim: int, **opts: Any
    ) -> tuple[VectorIndex, int] | None:
        """Read a snapshot; None if missing, corrupt or of another dimension (rebuild)."""
        found = cls.load_tagged(path, dim, **opts)
        return None if found is None else (found[0], found[1])

    @classmethod
    def load_tagged(
        cls, path: str | os.PathLike[str], dim: int, **opts: Any
    ) -> tuple[VectorIndex, int, str] | None:
        """``load``, also returning the snapshot's tag."""
        try:
            data = Path(path).read_bytes()
        except OSError:
            return None
        try:
            return cls._decode(data, dim, opts)
        except Exception as exc:  # noqa: BLE001  # any decoding problem means "rebuild"
            log.warning("ignoring vector index snapshot %s: %s", path, exc)
            return None

    @classmethod
    def _decode(
        cls, data: bytes, dim: int, opts: dict[str, Any]
    ) -> tuple[VectorIndex, int, str] | None:
        if len(data) < _HEADER.size + 8 + 16:
            return None
        body, digest = data[:-16], data[-16:]
        if hashlib.blake2b(body, digest_size=16).digest() != digest:
            return None
        magic, version, fdim, n, watermark, ann_len = _HEADER.unpack_from(body)
        if magic != _MAGIC or version not in (1, _VERSION) or fdim != dim or n < 0:
            return None
        off = _HEADER.size
        tag = ""
        if version >= 2:
            (tag_len,) = _TAG_LEN.unpack_from(body, off)
            off += _TAG_LEN.size
            tag = body[off : off + tag_len].decode("utf-8")
            off += tag_len
        (lab_n,) = struct.unpack_from("<q", body, off)
        off += 8
        ids = np.frombuffer(body, dtype=np.int64, count=n, offset=off).copy()
        off += 8 * n
        mat = np.frombuffer(body, dtype=np.float32, count=n * dim, offset=off).reshape(n, dim)
        off += 4 * n * dim
        if len(body) != off + ann_len:
            return None
        index = cls(dim, **opts)
        index._load_rows(ids, mat)
        if ann_len and index.ann_threshold is not None:
            label_ids = np.frombuffer(body, dtype=np.int64, count=lab_n, offset=off).copy()
            off += 8 * lab_n
            alive = np.frombuffer(body, dtype=np.uint8, count=lab_n, offset=off).astype(bool)
            off += lab_n
            labels = np.frombuffer(body, dtype=np.int64, count=n, offset=off).copy()
            off += 8 * n
            ann = _Ann.restore(body[off:], label_ids, alive)
            if len(labels) == n and (labels < lab_n).all():
                index._ann = ann
                index._labels[:n] = labels
        if index._ann is None:
            index._maybe_build()
        return index, int(watermark), tag

    def _load_rows(self, ids: I64, mat: F32) -> None:
        if _has_duplicates(ids):
            raise ValueError("duplicate ids in snapshot")
        self._grow(len(ids))
        self._mat[: len(ids)] = mat
        self._ids[: len(ids)] = ids
        self._pos = dict(zip(ids.tolist(), range(len(ids)), strict=True))
        self._n = len(ids)

    def __repr__(self) -> str:
        mode = "ann" if self._ann is not None else "exact"
        return f"VectorIndex(dim={self.dim}, n={self._n}, mode={mode})"


def write_snapshot(path: str | os.PathLike[str], parts: list[bytes]) -> None:
    """Write snapshot ``parts`` plus their digest atomically (temp file, fsync, rename)."""
    digest = hashlib.blake2b(digest_size=16)
    for part in parts:
        digest.update(part)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            for part in parts:
                f.write(part)
            f.write(digest.digest())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)  # readers see the old file or the new one, never half
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _faiss_available() -> bool:
    from importlib.util import find_spec

    return find_spec("faiss") is not None
