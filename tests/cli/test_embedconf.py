"""The OpenAI-compatible embedder configured from the -e option, the environment and
$AMCP_HOME/config.toml, against a real local /v1/embeddings server."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from typer.testing import CliRunner

from amcp.cli.app import app

runner = CliRunner()
DIM = 16


class _Embeddings(BaseHTTPRequestHandler):
    """Vectors from a hash of each input: deterministic, and the same text the same vector."""

    seen: ClassVar[list[dict[str, Any]]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Embeddings.seen.append({"path": self.path, "auth": self.headers.get("Authorization"),
                                 "model": body["model"]})
        data = []
        for i, text in enumerate(body["input"]):
            raw = hashlib.sha256(text.encode()).digest()[:DIM]
            data.append({"index": i, "embedding": [b / 255 for b in raw]})
        out = json.dumps({"data": data, "model": body["model"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


@pytest.fixture
def endpoint() -> Iterator[str]:
    _Embeddings.seen = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Embeddings)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()


def run(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    res = runner.invoke(app, args, env=env)
    return res.exit_code, res.output


def test_from_the_option(tmp_path: Path, endpoint: str) -> None:
    spec = f"openai,base_url={endpoint},model=tiny-embed,dim={DIM}"
    store = str(tmp_path / "m.db")
    code, out = run(["init", "--store", store, "-e", spec], {"AMCP_HOME": str(tmp_path)})
    assert code == 0 and "tiny-embed" in out, out
    code, out = run(["remember", "Alice prefers tabs", "--store", store, "-e", spec])
    assert code == 0, out
    code, out = run(["recall", "Alice prefers tabs", "--store", store, "-e", spec])
    assert code == 0 and "Alice prefers tabs" in out
    assert {c["model"] for c in _Embeddings.seen} == {"tiny-embed"}


def test_from_the_environment_and_the_config_file(tmp_path: Path, endpoint: str) -> None:
    env = {"AMCP_HOME": str(tmp_path), "AMCP_EMBED_BASE_URL": endpoint,
           "AMCP_EMBED_MODEL": "env-embed", "AMCP_EMBED_API_KEY": "sk-env"}
    code, out = run(["init", "--store", str(tmp_path / "a.db"), "-e", "openai"], env)
    assert code == 0 and "env-embed" in out, out
    assert _Embeddings.seen[-1]["auth"] == "Bearer sk-env"
    (tmp_path / "config.toml").write_text(
        f'[embedder]\nname = "openai"\nbase_url = "{endpoint}"\nmodel = "file-embed"\n'
        'api_key_env = "MY_KEY"\n', encoding="utf-8")
    env = {"AMCP_HOME": str(tmp_path), "MY_KEY": "sk-file", "AMCP_EMBED_BASE_URL": "",
           "AMCP_EMBED_MODEL": "", "AMCP_EMBED_API_KEY": "", "OPENAI_API_KEY": ""}
    code, out = run(["init", "--store", str(tmp_path / "b.db")], env)  # -e auto: the file's
    assert code == 0 and "file-embed" in out, out
    assert _Embeddings.seen[-1]["auth"] == "Bearer sk-file"
    code, out = run(["init", "--store", str(tmp_path / "c.db"), "-e", "hashing"], env)
    assert code == 0 and "hashing" in out  # naming another embedder still wins


def test_missing_settings_say_where_to_put_them(tmp_path: Path) -> None:
    env = {"AMCP_HOME": str(tmp_path), "AMCP_EMBED_BASE_URL": "", "AMCP_EMBED_MODEL": ""}
    code, out = run(["init", "--store", str(tmp_path / "m.db"), "-e", "openai"], env)
    assert code == 1 and "base_url and model" in out and "AMCP_EMBED_BASE_URL" in out
    assert "config.toml" in out and not (tmp_path / "m.db").exists()
    code, out = run(["init", "--store", str(tmp_path / "m.db"), "-e", "openai,colour=blue"], env)
    assert code == 1 and "unknown openai embedder setting 'colour'" in out
