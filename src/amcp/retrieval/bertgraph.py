"""all-MiniLM-L6-v2 as an ONNX graph, written from its weights with ``onnx`` alone (no torch).

The function is sentence-transformers' modules 0..2 for this model: BERT (eval mode, eager
attention, token type 0 everywhere) -> mean pooling over real tokens -> L2 normalisation.
Each step below names the ``transformers`` code it mirrors, so a reader can check it line
by line; the tests compare the graph's vectors with sentence-transformers' own (cosine
>= 0.9999) and with the torch export it replaced.

Why not ``torch.onnx.export``: tracing needs torch (~750 MB installed) and transformers at
``amcp init``, and takes ~15 s; this takes ~2 s and needs only ``onnx`` and numpy. The
weights are read from the packaged ``model.safetensors`` directly (the format is a JSON
header and raw little-endian arrays), so the ``safetensors`` package is not needed either.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["BertShape", "build_graph", "read_safetensors"]

_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32}


@dataclass(frozen=True)
class BertShape:
    """The sizes a BERT graph is built for (the model's config.json)."""

    layers: int
    heads: int
    hidden: int
    eps: float

    @classmethod
    def from_config(cls, path: Path) -> BertShape:
        cfg = json.loads(path.read_text(encoding="utf-8"))
        if cfg.get("model_type") != "bert" or cfg.get("hidden_act") != "gelu":
            raise ValueError(f"{path}: not a BERT model with exact GELU")
        if cfg.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"{path}: only absolute position embeddings are supported")
        return cls(layers=int(cfg["num_hidden_layers"]), heads=int(cfg["num_attention_heads"]),
                   hidden=int(cfg["hidden_size"]), eps=float(cfg["layer_norm_eps"]))


def read_safetensors(path: Path) -> dict[str, np.ndarray[Any, Any]]:
    """Every tensor of a ``.safetensors`` file, as numpy arrays (copies; the file is closed)."""
    data = path.read_bytes()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + size])
    out: dict[str, np.ndarray[Any, Any]] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        dtype = np.dtype(_DTYPES[info["dtype"]]).newbyteorder("<")
        raw = np.frombuffer(data, dtype=dtype, offset=8 + size + start,
                            count=(end - start) // dtype.itemsize)
        out[name] = raw.reshape(info["shape"]).astype(dtype.newbyteorder("="))
    return out


class _Graph:
    """Nodes and initialisers under construction; each method adds one op, returns its
    output's name."""

    def __init__(self, weights: Mapping[str, np.ndarray[Any, Any]]) -> None:
        self.weights = weights
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self._n = 0

    def const(self, value: np.ndarray[Any, Any], name: str | None = None) -> str:
        from onnx import numpy_helper

        if name is None:
            self._n += 1
            name = f"c{self._n}"
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(self, kind: str, *inputs: str, name: str | None = None, **attrs: Any) -> str:
        from onnx import helper

        self._n += 1
        out = name or f"{kind.lower()}{self._n}"
        self.nodes.append(helper.make_node(kind, list(inputs), [out], **attrs))
        return out

    def linear(self, x: str, prefix: str) -> str:
        """nn.Linear: x @ W.T + b (W stored transposed, so the graph is one MatMul)."""
        w = self.const(self.weights[prefix + ".weight"].T, prefix + ".weight_t")
        return self.op("Add", self.op("MatMul", x, w), self.const(self.weights[prefix + ".bias"]))

    def layer_norm(self, x: str, prefix: str, eps: float) -> str:
        return self.op("LayerNormalization", x, self.const(self.weights[prefix + ".weight"]),
                       self.const(self.weights[prefix + ".bias"]), axis=-1, epsilon=eps)


def _embeddings(g: _Graph, shape: BertShape, ids: str) -> str:
    """BertEmbeddings: word + absolute position + token type 0, then LayerNorm."""
    w = g.weights
    words = g.op("Gather", g.const(w["embeddings.word_embeddings.weight"]), ids, axis=0)
    # positions 0..T-1: the first T rows of the position table, T = the batch's width
    width = g.op("Slice", g.op("Shape", ids), g.const(np.array([1])), g.const(np.array([2])))
    positions = g.op("Slice", g.const(w["embeddings.position_embeddings.weight"]),
                     g.const(np.array([0])), width, g.const(np.array([0])))
    token_type = g.const(w["embeddings.token_type_embeddings.weight"][0])
    summed = g.op("Add", g.op("Add", words, positions), token_type)
    return g.layer_norm(summed, "embeddings.LayerNorm", shape.eps)


def _attention(g: _Graph, shape: BertShape, x: str, prefix: str, bias: str) -> str:
    """BertSelfAttention (eager) + BertSelfOutput: scaled dot-product over heads, the
    additive mask, softmax, output projection, residual, LayerNorm."""
    head = shape.hidden // shape.heads
    split = g.const(np.array([0, 0, shape.heads, head]))

    def heads(name: str, perm: list[int]) -> str:
        projected = g.linear(x, f"{prefix}.attention.self.{name}")
        return g.op("Transpose", g.op("Reshape", projected, split), perm=perm)

    q = heads("query", [0, 2, 1, 3])  # (B, H, T, D)
    k = heads("key", [0, 2, 3, 1])  # (B, H, D, T)
    v = heads("value", [0, 2, 1, 3])
    scale = g.const(np.array(np.sqrt(head), dtype=np.float32))
    scores = g.op("Add", g.op("Div", g.op("MatMul", q, k), scale), bias)
    context = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
    merged = g.op("Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]),
                  g.const(np.array([0, 0, shape.hidden])))
    out = g.linear(merged, f"{prefix}.attention.output.dense")
    return g.layer_norm(g.op("Add", out, x), f"{prefix}.attention.output.LayerNorm", shape.eps)


def _feed_forward(g: _Graph, shape: BertShape, x: str, prefix: str) -> str:
    """BertIntermediate (exact GELU: 0.5 x (1 + erf(x / sqrt 2))) + BertOutput."""
    h = g.linear(x, f"{prefix}.intermediate.dense")
    erf = g.op("Erf", g.op("Div", h, g.const(np.array(np.sqrt(2.0), dtype=np.float32))))
    one, half = g.const(np.array(1.0, np.float32)), g.const(np.array(0.5, np.float32))
    gelu = g.op("Mul", g.op("Mul", h, g.op("Add", erf, one)), half)
    out = g.linear(gelu, f"{prefix}.output.dense")
    return g.layer_norm(g.op("Add", out, x), f"{prefix}.output.LayerNorm", shape.eps)


def _pool(g: _Graph, hidden: str, mask: str) -> str:
    """sentence-transformers' Pooling (mean over real tokens) and Normalize (L2, as
    torch.nn.functional.normalize: divided by max(norm, 1e-12))."""
    m = g.op("Unsqueeze", g.op("Cast", mask, to=1), g.const(np.array([-1])))  # (B, T, 1)
    axis = g.const(np.array([1]))
    total = g.op("ReduceSum", g.op("Mul", hidden, m), axis, keepdims=0)
    count = g.op("Max", g.op("ReduceSum", m, axis, keepdims=0),
                 g.const(np.array(1e-9, np.float32)))
    mean = g.op("Div", total, count)
    norm = g.op("Sqrt", g.op("ReduceSum", g.op("Mul", mean, mean),
                             g.const(np.array([1])), keepdims=1))
    return g.op("Div", mean, g.op("Max", norm, g.const(np.array(1e-12, np.float32))),
                name="embedding")


def build_graph(weights: Mapping[str, np.ndarray[Any, Any]], shape: BertShape,
                opset: int) -> Any:
    """The ONNX model: inputs ``input_ids`` and ``attention_mask`` (int64, batch x tokens),
    output ``embedding`` (float32, batch x hidden, unit length)."""
    from onnx import TensorProto, helper

    g = _Graph(weights)
    x = _embeddings(g, shape, "input_ids")
    # get_extended_attention_mask: 0 where attended, the dtype's minimum where padded.
    keep = g.op("Cast", "attention_mask", to=TensorProto.FLOAT)
    bias = g.op("Mul", g.op("Sub", g.const(np.array(1.0, np.float32)), keep),
                g.const(np.array(np.finfo(np.float32).min, np.float32)))
    bias = g.op("Unsqueeze", bias, g.const(np.array([1, 2])))  # (B, 1, 1, T)
    for i in range(shape.layers):
        x = _attention(g, shape, x, f"encoder.layer.{i}", bias)
        x = _feed_forward(g, shape, x, f"encoder.layer.{i}")
    _pool(g, x, "attention_mask")  # its output is the graph's, "embedding"
    tokens = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "tokens"])
              for n in ("input_ids", "attention_mask")]
    out = helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", shape.hidden])
    graph = helper.make_graph(g.nodes, "all-MiniLM-L6-v2", tokens, [out], initializer=g.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                             producer_name="amcp")
