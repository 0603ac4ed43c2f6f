"""Unit vectors: the one normalisation every embedder applies (a leaf: embedders and the
MiniLM runtime both use it, and neither may import the other at module level)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]


def l2_normalize(x: npt.NDArray[Any]) -> F32:
    """Unit-normalise rows (or one vector); all-zero rows stay zero rather than becoming NaN."""
    arr = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(arr, axis=-1, keepdims=True)
    # A zero row (empty text) has no direction; dividing by 1 keeps it zero and finite.
    np.maximum(norms, np.float32(1e-12), out=norms)
    out: F32 = (arr / norms).astype(np.float32, copy=False)
    out[np.squeeze(norms, -1) <= 1e-12] = 0.0
    return out


__all__ = ["F32", "l2_normalize"]
