"""Hooks talking to a running node over its HTTP hook routes, found by the runtime file;
and every way that channel can fail falling back to the file."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.agent.hooks.kit import (
    COMMIT_LINE_STDOUT,
    call,
    config,
    context_of,
    git_project,
    payload,
    seed,
)

from amcp.agent.hooks.claude_code import node_http
from amcp.agent.hooks.nodehttp import HttpBackend, NodeHttpError
from amcp.agent.hooks.runtime import (
    NodeRuntime,
    new_token,
    parse_runtime,
    read_runtime,
    remove_runtime,
    runtime_path,
    write_runtime,
)
from amcp.memory import Memory


@contextlib.contextmanager
def http_node(mem: Memory, store: Path, *, token: str | None = None) -> Iterator[str]:
    """What ``amcp serve`` does for the hooks: the HTTP API with the hook routes, and the
    runtime file written once it listens, removed when it stops. Yields the token."""
    import uvicorn

    from amcp.api.serve import build_server_app

    token = token or new_token()
    server = uvicorn.Server(uvicorn.Config(
        build_server_app(mem, mcp=False, hook_token=token), host="127.0.0.1", port=0,
        log_level="error", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(3000):
        if server.started:
            break
        time.sleep(0.01)
    assert server.started, "the HTTP API did not start"
    port = server.servers[0].sockets[0].getsockname()[1]
    write_runtime(store, http=("127.0.0.1", port), token=token)
    try:
        yield token
    finally:
        remove_runtime(store, token)
        server.should_exit = True
        thread.join(30)


def _lexical_memory(home: Path) -> Memory:
    # No embedder: the node's recall is then the same lexical recall the file path does,
    # so the two paths' answers can be compared exactly.
    return Memory(home / "memory.db", embedder=None, check_embedder=False)


def test_node_answers_equal_the_file_path(tmp_path: Path) -> None:
    home = tmp_path / "home"
    seed(home)
    proj = git_project(tmp_path)
    file_cfg = config(home, capture_prompts=False)
    node_cfg = config(home, node=("127.0.0.1", 1), capture_prompts=False)
    events = [
        ("session-start", payload("SessionStart", proj, session="a")),
        ("prompt", payload("UserPromptSubmit", proj, session="b",
                           prompt="postgresql port for the integration tests")),
        ("prompt", payload("UserPromptSubmit", proj, session="b",
                           prompt="ruff check before committing")),
        ("prompt", payload("UserPromptSubmit", proj, session="b",
                           prompt="postgresql port for the integration tests")),
    ]
    want = [call(e, p, file_cfg) for e, p in events]
    (home / "ledger").rename(home / "ledger.file")
    with _lexical_memory(home) as mem, http_node(mem, home / "memory.db"):
        assert isinstance(node_http(node_cfg), HttpBackend)
        got = [call(e, p, node_cfg) for e, p in events]
    assert got == want
    assert "PostgreSQL" in context_of(want[1]) and "ruff" in context_of(want[2])
    assert want[3] is None  # shown once per session, whichever side answered


def test_node_writes_and_captures(tmp_path: Path) -> None:
    home = tmp_path / "home"
    seed(home)
    proj = git_project(tmp_path)
    cfg = config(home, node=("127.0.0.1", 1), write_mode="background",
                 capture_mode="background")
    with Memory(home / "memory.db", embedder="hashing") as mem, \
            http_node(mem, home / "memory.db"):
        out = call("post-tool", payload("PostToolUse", proj, tool_name="Bash",
                                        tool_input={"command": "git commit -m y"},
                                        tool_response={"stdout": COMMIT_LINE_STDOUT}), cfg)
        ctx = context_of(out)
        assert "work boundary (K-" in ctx  # written by the node, named, no detached writer
        recs = mem.recall("lexical fallback", k=3, kinds=["work_boundary"]).records
        assert len(recs) == 1 and recs[0].vendor_extensions["x-commit"] == "9f8e7d6"
        assert recs[0].knowledge_id[:14] in ctx

        call("stop", payload("Stop", proj, stop_hook_active=False), cfg)
        out = call("stop", payload("Stop", proj, last_assistant_message=(
            "AMCP-LEARN: the flaky test needs a fixed random seed")), cfg)
        assert out is not None and "stored the session's learning" in out["systemMessage"]
        assert mem.recall("flaky test random seed", k=3, kinds=["learning"]).records

        out = call("prompt", payload("UserPromptSubmit", proj,
                                     prompt="From now on always use pytest for tests."), cfg)
        assert "[AMCP] remembered K-" in context_of(out)


def test_runtime_file_written_0600_and_removed_only_by_its_owner(tmp_path: Path) -> None:
    store = tmp_path / "memory.db"
    store.touch()
    path = write_runtime(store, http=("0.0.0.0", 8765), token="t" * 32, amcp=("::", 7707))
    assert path == runtime_path(store) and path.name == "memory.db.node.json"
    assert path.stat().st_mode & 0o777 == 0o600
    rt = read_runtime(store)
    assert rt == NodeRuntime(os.getpid(), str(store.resolve()), ("127.0.0.1", 8765), "t" * 32,
                             ("::", 7707))
    remove_runtime(store, "u" * 32)  # another node's token: not ours to remove
    assert path.exists()
    remove_runtime(store, "t" * 32)
    assert not path.exists()
    remove_runtime(store, "t" * 32)  # already gone: no error


def _dead_pid() -> int:
    pid = 2**22 - 1
    while pid > 1:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except PermissionError:
            pass
        pid -= 1
    raise AssertionError("no free pid")


@pytest.mark.parametrize("contents", [
    "", "not json", "[]", '{"v": 2}', "{" * 5000,
    '{"v": 1, "pid": "1", "store": "S", "http": ["127.0.0.1", 8765], "token": "%s"}',
    '{"v": 1, "pid": 1, "store": "S", "http": ["127.0.0.1", 70000], "token": "%s"}',
    '{"v": 1, "pid": 1, "store": "S", "http": "127.0.0.1:8765", "token": "%s"}',
    '{"v": 1, "pid": 1, "store": "S", "http": ["127.0.0.1", 8765], "token": "short"}',
    '{"v": 1, "pid": true, "store": "S", "http": ["127.0.0.1", 8765], "token": "%s"}',
])
def test_bad_runtime_file_contents_mean_no_node(tmp_path: Path, contents: str) -> None:
    store = tmp_path / "memory.db"
    text = contents.replace("S", str(store)).replace("%s", "t" * 32)
    path = runtime_path(store)
    path.write_text(text)
    path.chmod(0o600)
    assert read_runtime(store) is None


def test_untrustworthy_runtime_files_mean_no_node(tmp_path: Path) -> None:
    store = tmp_path / "memory.db"
    good = {"v": 1, "pid": os.getpid(), "store": str(store), "http": ["127.0.0.1", 8765],
            "token": "t" * 32}
    path = runtime_path(store)
    path.write_text(json.dumps(good))
    path.chmod(0o600)
    assert read_runtime(store) is not None
    path.chmod(0o644)  # readable by others: its token is no secret, do not trust it
    assert read_runtime(store) is None
    path.chmod(0o600)
    path.write_text(json.dumps({**good, "store": str(tmp_path / "other.db")}))
    assert read_runtime(store) is None  # another store's node
    path.write_text(json.dumps({**good, "pid": _dead_pid()}))
    assert read_runtime(store) is None  # the node died without removing it
    path.unlink()
    path.symlink_to(tmp_path / "elsewhere.json")
    (tmp_path / "elsewhere.json").write_text(json.dumps(good))
    assert read_runtime(store) is None
    assert parse_runtime(json.dumps(good)) is not None


def _answers_from_file(home: Path, proj: Path) -> tuple[str, str]:
    cfg = config(home, node=None, capture_prompts=False)
    return (context_of(call("session-start", payload("SessionStart", proj, session="f"), cfg)),
            context_of(call("prompt", payload("UserPromptSubmit", proj, session="fp",
                                              prompt="postgresql port integration tests"),
                            cfg)))


def _answers_with(home: Path, proj: Path, **kw: float) -> tuple[str, str]:
    cfg = config(home, node=("127.0.0.1", 1), capture_prompts=False, **kw)
    return (context_of(call("session-start", payload("SessionStart", proj, session="n"), cfg)),
            context_of(call("prompt", payload("UserPromptSubmit", proj, session="np",
                                              prompt="postgresql port integration tests"),
                            cfg)))


def test_dead_node_stale_file_falls_back(tmp_path: Path) -> None:
    home = tmp_path / "home"
    seed(home)
    proj = git_project(tmp_path)
    want = _answers_from_file(home, proj)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nobody listens here once closed
    # A live pid (ours) but nothing on the port: the node crashed and the pid was reused.
    write_runtime(home / "memory.db", http=("127.0.0.1", port), token=new_token())
    assert _answers_with(home, proj) == want


def test_wrong_token_falls_back(tmp_path: Path) -> None:
    home = tmp_path / "home"
    seed(home)
    proj = git_project(tmp_path)
    want = _answers_from_file(home, proj)
    store = home / "memory.db"
    with _lexical_memory(home) as mem, http_node(mem, store) as token:
        rt = read_runtime(store)
        assert rt is not None
        with pytest.raises(NodeHttpError, match="401"):
            HttpBackend(rt._replace(token="x" * 43)).user_scopes()
        write_runtime(store, http=rt.http, token="x" * 43)  # another node's file, say
        assert _answers_with(home, proj) == want
        write_runtime(store, http=rt.http, token=token)


def test_node_that_never_answers_times_out_and_falls_back(tmp_path: Path) -> None:
    home = tmp_path / "home"
    seed(home)
    proj = git_project(tmp_path)
    want = _answers_from_file(home, proj)
    with socket.socket() as srv:  # accepts connections (the backlog) but never replies
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        write_runtime(home / "memory.db", http=srv.getsockname(), token=new_token())
        started = time.monotonic()
        assert _answers_with(home, proj, http_read_timeout=0.2) == want
        assert time.monotonic() - started < 30  # bounded by the timeouts, not hung


@pytest.mark.parametrize("raw", [
    b"", b"garbage", b"HTTP/1.1 200 OK\r\n\r\nnot json",
    b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{}",
    b"HTTP/1.1 500 Internal\r\nContent-Length: 2\r\n\r\n{}",
    b'HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{"lines":1}',
    b'HTTP/1.1 200 OK\r\nContent-Length: 26\r\n\r\n{"lines":[["K",1,2,3,4,5]]}',
])
def test_malformed_node_answers_are_errors(raw: bytes) -> None:
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)

        def answer() -> None:
            conn, _ = srv.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(raw)

        t = threading.Thread(target=answer, daemon=True)
        t.start()
        rt = NodeRuntime(os.getpid(), "S", srv.getsockname(), "t" * 32)
        with pytest.raises(NodeHttpError):
            HttpBackend(rt, read_timeout=5).recall("q", [], 3)
        t.join(5)


def test_amcp_serve_writes_and_removes_the_runtime_file(tmp_path: Path) -> None:
    """The real ``amcp serve``: the file appears once HTTP listens (0600, this store, a
    token the hook routes accept) and is gone after an interrupt."""
    import signal
    import subprocess

    from tests.agent.hooks.kit import hook_env
    from tests.amcp_process import amcp_argv

    home = tmp_path / "home"
    seed(home)
    store = home / "memory.db"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        http_port = s.getsockname()[1]
    with (tmp_path / "serve.err").open("wb") as err:
        proc = subprocess.Popen(
            # Ctrl-C as in a terminal, whatever the test runner's own SIGINT is.
            amcp_argv("serve", "--store", str(store), "--port", "0",
                      "--http-port", str(http_port), "--embedder", "hashing"),
            env=hook_env(home), stdout=subprocess.DEVNULL, stderr=err)
    try:
        rt = None
        for _ in range(1200):
            rt = read_runtime(store)
            if rt is not None or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert rt is not None, (tmp_path / "serve.err").read_text()
        assert rt.pid == proc.pid and rt.http == ("127.0.0.1", http_port)
        assert rt.amcp is not None and rt.amcp[1] > 0
        assert runtime_path(store).stat().st_mode & 0o777 == 0o600
        assert HttpBackend(rt, read_timeout=30).user_scopes() == ("user:alice",)
    finally:
        proc.send_signal(signal.SIGINT)
        killed = False
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            killed = True
            proc.kill()
            proc.wait()
    # If it fails, say how the node ended.
    assert not runtime_path(store).exists(), (
        f"killed after 60 s: {killed}; exit {proc.returncode}; stderr: "
        f"{(tmp_path / 'serve.err').read_text()[-2000:]}"
    )


def test_node_is_not_asked_to_capture_a_plain_question(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The capture gate holds for the node too: a question costs no capture request (and
    spawns no detached capture); a statement still goes to the node's capture."""
    from amcp.agent.hooks import claude_code

    home = tmp_path / "home"
    seed(home)
    proj = git_project(tmp_path)
    ops: list[str] = []
    real_call = HttpBackend.call

    def spy(self: HttpBackend, op: str, body: dict[str, Any]) -> Any:
        ops.append(op)
        return real_call(self, op, body)

    monkeypatch.setattr(HttpBackend, "call", spy)
    monkeypatch.setattr(claude_code, "spawn_detached", lambda *a: ops.append("spawn"))
    cfg = config(home, node=("127.0.0.1", 1), capture_mode="background")
    with Memory(home / "memory.db", embedder="hashing") as mem, \
            http_node(mem, home / "memory.db"):
        call("prompt", payload("UserPromptSubmit", proj,
                               prompt="why do the integration tests need postgres?"), cfg)
        assert ops == ["recall"]
        out = call("prompt", payload("UserPromptSubmit", proj,
                                     prompt="From now on always use pytest for tests."), cfg)
        assert ops == ["recall", "recall", "capture"]
        assert "[AMCP] remembered K-" in context_of(out)


def test_the_nodes_quarantine_figure_reaches_the_hook_output(tmp_path: Path) -> None:
    """A record the node quarantined on open is left out, and the hook says so."""
    import sqlite3

    home = tmp_path / "home"
    ids = seed(home)
    proj = git_project(tmp_path)
    raw = sqlite3.connect(home / "memory.db")
    raw.execute("DELETE FROM records WHERE knowledge_id=?", (ids["db"],))
    raw.commit()
    raw.close()
    with _lexical_memory(home) as mem, http_node(mem, home / "memory.db"):
        out = call("session-start", payload("SessionStart", proj), config(home))
    assert ids["ruff"][:14] in context_of(out)
    assert out is not None and "failed verification" in out["systemMessage"]
