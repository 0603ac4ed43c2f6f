"""The hook's two paths: the store opened directly (lexical-only, lock-tolerant, light
imports) and a running node; plus the lean entry as a real subprocess."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from tests.agent.hooks.kit import (
    COMMIT_LINE_STDOUT,
    RunningNode,
    call,
    config,
    context_of,
    git_project,
    hook_env,
    payload,
    run_entry,
    seed,
)

from amcp.agent.hooks.fastpath import NODE_PORT, LocalBackend, node_listening
from amcp.memory import Memory
from amcp.node import DEFAULT_PORT


def test_probe_port_matches_the_node_default() -> None:
    assert NODE_PORT == DEFAULT_PORT


def test_entry_contract_in_a_subprocess(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ids = seed(home)
    proj = git_project(tmp_path)
    env = hook_env(home)
    res = run_entry("session-start", payload("SessionStart", proj), env)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert ids["ruff"][:14] in out["hookSpecificOutput"]["additionalContext"]
    bad = run_entry("prompt", "{oops", env)
    assert bad.returncode == 0
    assert json.loads(bad.stdout)["systemMessage"].startswith("[AMCP] prompt hook skipped")


def test_no_store_subprocess_exit_zero(tmp_path: Path) -> None:
    res = run_entry("session-start", payload("SessionStart", tmp_path),
                    hook_env(tmp_path / "absent"))
    assert res.returncode == 0
    assert "no store" in json.loads(res.stdout)["systemMessage"]


def test_fast_path_imports_no_model_runtime_or_web_stack(tmp_path: Path) -> None:
    home = tmp_path / "home"
    seed(home)
    proj = git_project(tmp_path)
    probe = (
        "import runpy, sys, json\n"
        "sys.argv = ['x', 'prompt']\n"
        "try:\n    runpy.run_module('amcp.agent.hooks', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "heavy = [m for m in ('torch', 'onnxruntime', 'fastapi', 'transformers',"
        " 'sentence_transformers', 'typer', 'uvicorn') if m in sys.modules]\n"
        "sys.stderr.write('HEAVY=' + json.dumps(heavy))\n"
    )
    import subprocess
    import sys

    res = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
        input=json.dumps(payload("UserPromptSubmit", proj, prompt="postgresql port tests")),
        env=hook_env(home), check=False,
    )
    assert res.returncode == 0, res.stderr
    assert "HEAVY=[]" in res.stderr
    assert "K-" in res.stdout


def test_store_locked_by_another_writer(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ids = seed(home)
    proj = git_project(tmp_path)
    holder = sqlite3.connect(home / "memory.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("UPDATE records SET access_count = access_count WHERE 0")
    try:
        cfg = config(home, capture_prompts=False)
        # reads still work (WAL): the pointer tier and the prompt expansion
        assert ids["ruff"][:14] in context_of(call("session-start",
                                                   payload("SessionStart", proj), cfg))
        # a write cannot get the lock: one notice, no exception, fast
        out = call("post-tool", payload("PostToolUse", proj, tool_name="Bash",
                                        tool_input={"command": "git commit -m x"},
                                        tool_response={"stdout": COMMIT_LINE_STDOUT}), cfg)
        assert out is not None
        assert "locked" in out["systemMessage"] and out["systemMessage"].startswith("[AMCP]")
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_lexical_only_on_a_minilm_store(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with Memory(home / "memory.db", embedder="minilm") as mem:
        kid = mem.remember("The integration tests need a running PostgreSQL on port 5433",
                           scope="project:proj").knowledge_id
        assert mem.stats().vectors == 1
    backend = LocalBackend.open(home / "memory.db")
    try:
        assert backend.memory.embedder is None
        hits = backend.recall("postgresql port", ["project:proj"], 5)
        assert [h.knowledge_id for h in hits] == [kid]
    finally:
        backend.close()
    proj = git_project(tmp_path)
    ctx = context_of(call("prompt", payload("UserPromptSubmit", proj,
                                            prompt="what port does postgresql use for tests"),
                          config(home, capture_prompts=False)))
    assert kid[:14] in ctx
    with Memory(home / "memory.db", embedder="minilm") as mem:  # the store is still whole
        assert mem.stats().records == 1


def test_hooks_talk_to_a_running_node(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ids = seed(home)
    proj = git_project(tmp_path)
    with Memory(home / "memory.db", embedder="hashing") as mem, RunningNode(mem) as node:
        assert node_listening("127.0.0.1", node.port, 0.5)
        cfg = config(home, node=("127.0.0.1", node.port), capture_prompts=False)
        ctx = context_of(call("prompt", payload("UserPromptSubmit", proj,
                                                prompt="postgresql port integration tests"),
                              cfg))
        assert ids["db"][:14] in ctx
        out = call("post-tool", payload("PostToolUse", proj, tool_name="Bash",
                                        tool_input={"command": "git commit -m y"},
                                        tool_response={"stdout": COMMIT_LINE_STDOUT}), cfg)
        assert out is not None and "work boundary" in context_of(out)
        start = call("session-start", payload("SessionStart", proj, session="s-n"), cfg)
        assert start is not None and "hookSpecificOutput" in start
        recs = mem.recall("lexical fallback", k=3, kinds=["work_boundary"]).records
        assert len(recs) == 1 and recs[0].vendor_extensions["x-commit"] == "9f8e7d6"


def test_node_configured_but_down_falls_back_to_the_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ids = seed(home)
    proj = git_project(tmp_path)
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = config(home, node=("127.0.0.1", port), capture_prompts=False)
    assert ids["ruff"][:14] in context_of(call("session-start", payload("SessionStart", proj),
                                               cfg))


def test_config_from_env_defaults_and_expands_home(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    from amcp.agent.hooks.__main__ import config_from_env

    monkeypatch.setenv("HOME", str(tmp_path))
    assert Path(config_from_env({}).store) == tmp_path / ".amcp" / "memory.db"
    assert Path(config_from_env({"AMCP_HOME": "~/mem"}).home) == tmp_path / "mem"


def test_project_of_walks_up_to_the_git_root(tmp_path: Path) -> None:
    from amcp.agent.hooks.claude_code import project_of

    root = git_project(tmp_path, "my-repo")
    (root / "src" / "pkg").mkdir(parents=True)
    assert project_of(root / "src" / "pkg") == "my-repo"
    assert project_of(str(root)) == "my-repo"
    (tmp_path / "link").symlink_to(root / "src")
    assert project_of(tmp_path / "link") == "my-repo"  # resolved, as Path.resolve() did
    assert project_of(tmp_path / "absent" / "dir") is None


@pytest.mark.parametrize("value", ["off", "127.0.0.1:7800", "bad:port", ""])
def test_config_from_env(tmp_path: Path, value: str) -> None:
    from amcp.agent.hooks.__main__ import config_from_env

    cfg = config_from_env({"AMCP_HOME": str(tmp_path), "AMCP_NODE": value})
    assert Path(cfg.store) == tmp_path / "memory.db"
    assert Path(cfg.home) == tmp_path
    expected = {"off": None, "127.0.0.1:7800": ("127.0.0.1", 7800)}.get(
        value, ("127.0.0.1", NODE_PORT))
    assert cfg.node == expected


def test_entry_captures_the_prompt_in_the_background(tmp_path: Path) -> None:
    import time

    home = tmp_path / "home"
    seed(home)
    proj = git_project(tmp_path)
    res = run_entry("prompt", payload("UserPromptSubmit", proj,
                                      prompt="From now on, always use pytest -q."),
                    hook_env(home))
    assert res.returncode == 0, res.stderr
    assert "remembered" not in res.stdout  # not inline: the answer did not wait for it
    deadline = time.monotonic() + 60
    found: list[str] = []
    while time.monotonic() < deadline and not found:
        with Memory(home / "memory.db", embedder="hashing") as mem:
            found = [r.text for r in mem.recall("pytest", k=3).records if "pytest" in r.text]
        time.sleep(0.2)
    assert found


def _wait_for_commit(home: Path, sha: str) -> list[str]:
    import time

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with Memory(home / "memory.db", embedder="hashing") as mem:
            found = [r.text for r in mem.recall(sha, k=5, kinds=["work_boundary"]).records
                     if sha in r.text]
        if found:
            return found
        time.sleep(0.2)
    return []


def test_entry_writes_the_commit_record_in_the_background(tmp_path: Path) -> None:
    home = tmp_path / "home"
    seed(home)
    proj = git_project(tmp_path)
    data = payload("PostToolUse", proj, tool_name="Bash",
                   tool_input={"command": "git commit -m y"},
                   tool_response={"stdout": COMMIT_LINE_STDOUT})
    res = run_entry("post-tool", data, hook_env(home))
    assert res.returncode == 0, res.stderr
    assert "9f8e7d6 recorded as a work boundary" in context_of(json.loads(res.stdout))
    found = _wait_for_commit(home, "9f8e7d6")
    assert found == ["Commit 9f8e7d6 on main: fix: lexical fallback"]
    with Memory(home / "memory.db", embedder="hashing") as mem:
        assert mem.store.verify().ok  # chained and signed like any write
        rec = mem.recall("9f8e7d6", k=1, kinds=["work_boundary"]).records[0]
        assert rec.integrity.signature is not None
        assert mem.stats().vectors == 5  # the background writer embeds (hashing store)
    again = run_entry("post-tool", data, hook_env(home))  # the ledger has it: once only
    assert again.returncode == 0 and again.stdout == ""


def test_background_commit_failure_is_logged_and_forgotten(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proj = git_project(tmp_path)
    cfg = config(home)
    from amcp.agent.hooks.ledger import LedgerStore

    LedgerStore(home / "ledger").save(
        LedgerStore(home / "ledger").load("s-1").with_commit("9f8e7d6"))
    data = payload("PostToolUse", proj, tool_name="Bash", amcp_scope="project:proj",
                   tool_input={"command": "git commit -m y"},
                   tool_response={"stdout": COMMIT_LINE_STDOUT})
    out = call("record-commit", data, cfg)  # no store: the write fails
    assert out is not None and "no store" in out["systemMessage"]
    assert "9f8e7d6" not in LedgerStore(home / "ledger").load("s-1").commits
    assert "commit 9f8e7d6 not recorded" in (home / "hooks.log").read_text(encoding="utf-8")


def test_background_post_tool_without_store_is_a_notice(tmp_path: Path) -> None:
    proj = git_project(tmp_path)
    cfg = config(tmp_path / "absent", write_mode="background")
    out = call("post-tool", payload("PostToolUse", proj, tool_name="Bash",
                                    tool_input={"command": "git commit -m y"},
                                    tool_response={"stdout": COMMIT_LINE_STDOUT}), cfg)
    assert out is not None and "no store" in out["systemMessage"]


@pytest.mark.parametrize("event", ["session-start", "prompt"])
def test_read_hooks_load_neither_memory_nor_numpy_nor_cryptography(tmp_path: Path,
                                                                   event: str) -> None:
    home = tmp_path / "home"
    seed(home)
    proj = git_project(tmp_path)
    probe = (
        "import sys, json\n"
        f"sys.argv = ['amcp', 'hook', {event!r}]\n"
        "from amcp.cli.entry import main\n"
        "try:\n    main()\n"
        "except SystemExit:\n    pass\n"
        "heavy = [m for m in ('typer', 'rich', 'numpy', 'cryptography', 'amcp.memory',"
        " 'amcp.amf.record', 'amcp.node', 'subprocess') if m in sys.modules]\n"
        "sys.stderr.write('HEAVY=' + json.dumps(heavy))\n"
    )
    import subprocess
    import sys

    res = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
        input=json.dumps(payload("UserPromptSubmit", proj, prompt="postgresql port tests")),
        env=hook_env(home, AMCP_HOOK_CAPTURE="0"), check=False,
    )
    assert res.returncode == 0, res.stderr
    assert "HEAVY=[]" in res.stderr
    assert "K-" in res.stdout


def test_console_entry_leaves_other_commands_to_typer(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    import sys

    from amcp.cli import entry

    monkeypatch.setattr(sys, "argv", ["amcp", "hook", "--help"])
    with pytest.raises(SystemExit) as exc:
        entry.main()
    assert exc.value.code == 0
    assert "session-start" in capsys.readouterr().out


HEAVY = ("dataclasses", "subprocess", "inspect", "runpy", "numpy", "cryptography", "amcp.memory",
         "amcp.agent.capture")


@pytest.mark.parametrize(("event", "fields"), [
    ("session-start", {"source": "startup"}),
    ("prompt", {"prompt": "why do the integration tests need postgres?"}),
    ("stop", {"stop_hook_active": False}),
])
def test_read_hooks_stay_off_the_heavy_imports(tmp_path: Path, event: str,
                                               fields: dict[str, object]) -> None:
    """What keeps a hook process short, checked structurally (no timing): the no-node read
    hooks answer without dataclasses, numpy, cryptography, Memory or the capture engine."""
    import subprocess
    import sys

    home = tmp_path / "home"
    seed(home)
    proj = git_project(tmp_path)
    probe = ("import sys; from amcp.agent.hooks.__main__ import main; main([sys.argv[1]]); "
             f"print(sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)")
    claude = {"session-start": "SessionStart", "prompt": "UserPromptSubmit", "stop": "Stop"}
    res = subprocess.run([sys.executable, "-P", "-c", probe, event], cwd=tmp_path,
                         env=hook_env(home), capture_output=True, text=True, timeout=60,
                         check=False,
                         input=json.dumps(payload(claude[event], proj, **fields)))
    assert res.returncode == 0, res.stderr
    assert "skipped" not in res.stdout and res.stdout.strip()
    assert res.stderr.strip().splitlines()[-1] == "[]"


def _tamper(db: Path, *statements: tuple[str, tuple[object, ...]]) -> None:
    raw = sqlite3.connect(db)
    for sql, params in statements:
        raw.execute(sql, params)
    raw.commit()
    raw.close()


def test_a_record_left_out_is_said_in_the_hook_output(tmp_path: Path) -> None:
    """The fast reader leaves an edited record out, and the hook says so to the user."""
    home = tmp_path / "home"
    ids = seed(home)
    proj = git_project(tmp_path)
    raw = sqlite3.connect(home / "memory.db")
    body = raw.execute("SELECT body FROM records WHERE knowledge_id=?", (ids["db"],)).fetchone()
    raw.close()
    _tamper(home / "memory.db", ("UPDATE records SET body=? WHERE knowledge_id=?",
                                 (body[0].replace(b"PostgreSQL", b"PostgreSQX"), ids["db"])))
    out = call("session-start", payload("SessionStart", proj), config(home))
    text = context_of(out)
    assert ids["ruff"][:14] in text and ids["db"][:14] not in text
    assert out is not None and "1 record(s) failed verification" in out["systemMessage"]


def test_a_deleted_record_row_gets_the_full_check(tmp_path: Path) -> None:
    """A deleted row is seen from the signed head's count; the hook then opens Memory with
    the full check, which names the missing record, and still serves the rest."""
    home = tmp_path / "home"
    ids = seed(home)
    proj = git_project(tmp_path)
    _tamper(home / "memory.db", ("DELETE FROM records WHERE knowledge_id=?", (ids["db"],)))
    from amcp.agent.hooks.backends import open_backend

    backend = open_backend(config(home))
    try:
        assert backend.name == "local"
    finally:
        backend.close()
    out = call("session-start", payload("SessionStart", proj), config(home))
    assert ids["ruff"][:14] in context_of(out)
    assert out is not None and "failed verification" in out["systemMessage"]
