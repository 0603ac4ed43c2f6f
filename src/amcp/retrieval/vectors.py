"""In-memory vector index over int64 ids and float32 unit vectors (exact search).

Derived state: the store's vector table is the source of truth. This exact index is the
baseline; an ANN structure for large indexes may be layered on with the same API.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]


class VectorIndex:
    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._ids = np.empty(0, dtype=np.int64)
        self._mat = np.empty((0, dim), dtype=np.float32)
        self._pos: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._pos)

    def ids(self) -> I64:
        return self._ids.copy()

    def add(self, ids: I64, vecs: F32) -> None:
        ids = np.asarray(ids, dtype=np.int64)
        vecs = np.asarray(vecs, dtype=np.float32).reshape(len(ids), self.dim)
        fresh = [i for i, x in enumerate(ids.tolist()) if x not in self._pos]
        for i, x in enumerate(ids.tolist()):
            if x in self._pos:
                self._mat[self._pos[x]] = vecs[i]
        if fresh:
            start = len(self._ids)
            self._ids = np.concatenate([self._ids, ids[fresh]])
            self._mat = np.concatenate([self._mat, vecs[fresh]])
            for offset, x in enumerate(ids[fresh].tolist()):
                self._pos[x] = start + offset

    def remove(self, ids: I64) -> None:
        drop = {int(x) for x in np.asarray(ids).tolist() if int(x) in self._pos}
        if not drop:
            return
        keep = np.array([x not in drop for x in self._ids.tolist()], dtype=bool)
        self._ids, self._mat = self._ids[keep], self._mat[keep]
        self._pos = {x: i for i, x in enumerate(self._ids.tolist())}

    def search(
        self, query: F32, k: int, allowed: npt.NDArray[np.int64] | None = None
    ) -> list[tuple[int, float]]:
        if not len(self._ids) or k <= 0:
            return []
        if allowed is not None:
            rows = np.array([self._pos[x] for x in np.asarray(allowed).tolist() if x in self._pos],
                            dtype=np.int64)
            if not len(rows):
                return []
            scores = self._mat[rows] @ np.asarray(query, dtype=np.float32)
            ids = self._ids[rows]
        else:
            scores = self._mat @ np.asarray(query, dtype=np.float32)
            ids = self._ids
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.lexsort((ids[top], -scores[top]))]
        return [(int(ids[i]), float(scores[i])) for i in top]
