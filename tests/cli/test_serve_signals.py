"""How the long-running commands stop: the real ``amcp serve`` / ``amcp http`` processes.

SIGTERM (systemd, Docker, ``kill``) must stop them as cleanly as Ctrl-C: before, it killed
``amcp serve`` on the spot, leaving its runtime file naming a dead HTTP port and losing the
buffered access counts. A process started with SIGINT ignored (a background job of a shell
without job control) keeps ignoring it — before, uvicorn took that SIGINT, stopped the
HTTP half and left the node running.
"""

from __future__ import annotations

import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from tests.amcp_process import amcp_argv

from amcp.agent.hooks.runtime import read_runtime, runtime_path
from amcp.memory import Memory

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _start(args: list[str], err: Path, *, ignore_sigint: bool = False) -> subprocess.Popen[bytes]:
    with err.open("wb") as fh:
        return subprocess.Popen(
            amcp_argv(*args, sigint="ignore" if ignore_sigint else "default"),
            stdout=subprocess.DEVNULL, stderr=fh,
        )


def _wait_for(check: Callable[[], bool], proc: subprocess.Popen[bytes], err: Path) -> None:
    for _ in range(1200):
        if check():
            return
        assert proc.poll() is None, err.read_text()
        time.sleep(0.05)
    raise AssertionError(f"not ready in 60 s: {err.read_text()}")


def _stop(proc: subprocess.Popen[bytes], sig: int, err: Path) -> int:
    proc.send_signal(sig)
    try:
        return proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"still running 30 s after {sig}: {err.read_text()}") from None


def _serve(tmp_path: Path, *, ignore_sigint: bool = False) -> tuple[
    subprocess.Popen[bytes], Path, int, int
]:
    store = tmp_path / "memory.db"
    node_port, http_port = _free_port(), _free_port()
    err = tmp_path / "serve.err"
    proc = _start(["serve", "--store", str(store), "--port", str(node_port),
                   "--http-port", str(http_port), "--embedder", "hashing"], err,
                  ignore_sigint=ignore_sigint)
    _wait_for(lambda: read_runtime(store) is not None, proc, err)
    return proc, store, node_port, http_port


def test_sigterm_stops_amcp_serve_cleanly(tmp_path: Path) -> None:
    proc, store, node_port, http_port = _serve(tmp_path)
    try:
        assert _listening(node_port) and _listening(http_port)
    finally:
        code = _stop(proc, signal.SIGTERM, tmp_path / "serve.err")
    assert code == 0, (tmp_path / "serve.err").read_text()
    assert not runtime_path(store).exists()  # the finally ran: no file naming a dead port
    assert not _listening(node_port) and not _listening(http_port)


def test_an_ignored_sigint_stays_ignored_and_sigterm_still_stops(tmp_path: Path) -> None:
    proc, store, node_port, http_port = _serve(tmp_path, ignore_sigint=True)
    err = tmp_path / "serve.err"
    try:
        proc.send_signal(signal.SIGINT)
        time.sleep(1.0)
        assert proc.poll() is None, err.read_text()
        assert _listening(node_port) and _listening(http_port)  # neither half stopped
        assert runtime_path(store).exists()
    finally:
        code = _stop(proc, signal.SIGTERM, err)
    assert code == 0, err.read_text()
    assert not runtime_path(store).exists()


def test_sigterm_stops_amcp_http_and_writes_the_access_counts(tmp_path: Path) -> None:
    store = tmp_path / "memory.db"
    with Memory(store, embedder="hashing") as mem:
        kid = mem.remember("the deploy script needs bash 5", scope="p").knowledge_id
    port = _free_port()
    err = tmp_path / "http.err"
    proc = _start(["http", "--store", str(store), "--port", str(port), "--embedder", "hashing"],
                  err)
    try:
        _wait_for(lambda: _listening(port), proc, err)
        got = httpx.get(f"http://127.0.0.1:{port}/v1/memories/{kid}", timeout=30)
        assert got.status_code == 200, got.text
    finally:
        code = _stop(proc, signal.SIGTERM, err)
    assert code == 0, err.read_text()
    # The read was counted in memory (flushed at most once a second); a clean stop closes
    # the Memory, which writes what is still buffered.
    with sqlite3.connect(store) as db:
        (count,) = db.execute(
            "SELECT access_count FROM records WHERE knowledge_id=?", (kid,)
        ).fetchone()
    assert count >= 1


def test_sigterm_stops_amcp_mcp_between_requests(tmp_path: Path) -> None:
    """The stdio MCP server: a client that stops it with SIGTERM (with stdin still open)
    gets a clean exit, not a process killed mid-write."""
    import json

    store = tmp_path / "memory.db"
    err = tmp_path / "mcp.err"
    with err.open("wb") as fh:
        proc = subprocess.Popen(
            amcp_argv("mcp", "--store", str(store), "--embedder", "hashing"),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=fh,
        )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "signal-test", "version": "0"}}}
        proc.stdin.write(json.dumps(hello).encode() + b"\n")
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        assert answer.get("id") == 1 and "result" in answer, answer
    finally:
        code = _stop(proc, signal.SIGTERM, err)
        proc.stdin.close()
        proc.stdout.close()
    assert code == 0, err.read_text()


def test_listening_is_printed_once_both_servers_answer(tmp_path: Path) -> None:
    """"listening on" is what scripts and the README tests wait for. Printed before the HTTP
    side was loaded, the first AMCP handshake waited behind that import (seconds at load) and
    the HTTP port was not bound yet."""
    store = tmp_path / "memory.db"
    node_port, http_port = _free_port(), _free_port()
    proc = subprocess.Popen(
        amcp_argv("serve", "--store", str(store), "--port", str(node_port),
                  "--http-port", str(http_port), "--embedder", "hashing"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if "listening on" in line:
                break
        assert any("listening on" in line for line in seen), "".join(seen)
        assert any(line.startswith("HTTP API") for line in seen), "".join(seen)
        assert _listening(node_port) and _listening(http_port)
        assert read_runtime(store) is not None  # the hooks can find this node already
        assert httpx.get(f"http://127.0.0.1:{http_port}/v1/health", timeout=30).status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
