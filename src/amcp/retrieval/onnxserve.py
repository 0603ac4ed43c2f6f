"""An exported ONNX graph in the form onnxruntime opens fastest: optimised once, weights apart.

Opening the export itself costs every new process ~150 ms CPU (2 cores, measured with
``bench/onnx_session.py``): onnxruntime parses ~90 MB of protobuf with the weights inline
and copies them out; running the optimisers adds little beside that. ``amcp remember`` and
``amcp recall`` are new processes each, so that was paid on every command. Prepared once
(at ``amcp init`` or the first load):

* the weights go to a file beside the graph (ONNX external data), which onnxruntime reads
  straight into its buffers instead of out of a protobuf message;
* the graph is saved *after* onnxruntime's extended optimisations (fused attention, layer
  norm, GELU), so it opens with no optimiser (``ORT_DISABLE_ALL``) and keeps the fusions:
  the export opened that way runs ~10% slower.

Opening the prepared copy costs ~50 ms CPU; a query runs at the same speed (same kernels,
same fusions) and gives the same vectors (checked before the copy is published). Weight
pre-packing stays on: without it a session opens in ~10 ms but every query costs ~5 ms
more CPU, which a node serving many queries pays many times over.

``ORT_ENABLE_EXTENDED`` and not ``ORT_ENABLE_ALL``: the latter adds layout transforms
specific to the CPU that ran them (onnxruntime warns that such a saved graph must not move
to another machine); the extended fusions are the same on every x86 and ARM CPU. The
optimised graph uses onnxruntime's own fused operators, so the copy is keyed by the
onnxruntime version that made it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "GRAPH", "TELEMETRY_ENV", "load_onnxruntime", "prepare", "serving_dir", "session_options",
]

GRAPH = "model.onnx"  # the prepared graph inside its directory; its weights: GRAPH + ".data"
# Bump when the preparation recipe changes, so stale prepared copies are ignored.
_SERVE_REVISION = 1


# onnxruntime 1.29+ ships 1DS telemetry on Linux and macOS: each process that loads it
# records a ProcessInfo event (OS, CPU, container, interpreter path) in an offline queue
# under ~/.cache/Microsoft/DeveloperTools, keeps a device id there, and uploads when it can.
# amcp promises memory that stays on the machine, so it opts out before the runtime starts
# (the variable is read once, at initialisation); a user who sets it keeps their value.
TELEMETRY_ENV = "ORT_DISABLE_TELEMETRY"


def load_onnxruntime() -> Any:
    """The ``onnxruntime`` module, imported with its telemetry off (``TELEMETRY_ENV``).
    Every use of onnxruntime in amcp imports it through here."""
    os.environ.setdefault(TELEMETRY_ENV, "1")
    import onnxruntime as ort  # type: ignore[import-untyped]  # ships no stubs

    return ort


def serving_dir(graph: Path, runtime: str | None = None) -> Path:
    """Where the prepared copy of ``graph`` lives: a directory beside it, keyed by the
    graph's name (which carries its own version and revision), the onnxruntime version
    (``runtime``, default: the installed one) and this recipe's revision."""
    if runtime is None:
        runtime = str(load_onnxruntime().__version__)
    key = f"{graph.name}|onnxruntime {runtime}|s{_SERVE_REVISION}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return graph.with_name(f"{graph.stem}-serve-{digest}")


def session_options(threads: int, *, prepared: bool) -> Any:
    """The session options for one graph: ``threads`` intra-op threads, no spinning; no
    optimiser when the graph is a prepared copy (it already is optimised)."""
    ort = load_onnxruntime()

    opts = ort.SessionOptions()
    # One query is a chain of small matmuls: intra-op threads = cores helps, inter-op
    # parallelism does not (one linear graph).
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    level = ort.GraphOptimizationLevel
    opts.graph_optimization_level = level.ORT_DISABLE_ALL if prepared else level.ORT_ENABLE_ALL
    # No busy-waiting between ops: on a small shared CPU (the agent, its tools and this
    # node) spinning threads steal the cores the work needs; measured faster under load.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.log_severity_level = 3  # errors only: ORT warns about unused initialisers
    return opts


def prepare(graph: Path, target: Path, check: Callable[[Path], None]) -> None:
    """Write the prepared copy of ``graph`` to the directory ``target``.

    ``check`` is called with the new copy's graph before it is published and raises if the
    copy does not compute what ``graph`` does. Atomic: built in a temporary directory beside
    ``target`` and renamed into place; of two concurrent preparers the first rename wins and
    the other's copy (identical) is discarded.
    """
    ort = load_onnxruntime()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent))
    try:
        opts = session_options(1, prepared=False)
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        opts.optimized_model_filepath = str(tmp / GRAPH)
        # Every initialiser of 1 KB or more goes to the weights file (the graph keeps only
        # scalars and shapes); the name is relative, so the directory can be renamed.
        opts.add_session_config_entry(
            "session.optimized_model_external_initializers_file_name", GRAPH + ".data")
        opts.add_session_config_entry(
            "session.optimized_model_external_initializers_min_size_in_bytes", "1024")
        ort.InferenceSession(str(graph), sess_options=opts, providers=["CPUExecutionProvider"])
        check(tmp / GRAPH)
        try:
            os.rename(tmp, target)
        except OSError:
            if not (target / GRAPH).exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
