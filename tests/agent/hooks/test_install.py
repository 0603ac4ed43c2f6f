"""Installers merge into existing configuration, are idempotent, and chain git hooks."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from amcp.agent.hooks.install import (
    CHAINED_SUFFIX,
    GIT_MARKER,
    hook_command,
    install_claude_code,
    install_git,
    merge_settings,
)
from amcp.errors import ValidationError

EXISTING = {
    "permissions": {"allow": ["Bash(npm test:*)"]},
    "hooks": {
        "PostToolUse": [
            {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "prettier -w"}]}
        ],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
    },
    "model": "opus",
}


def test_claude_code_merges_without_clobbering(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps(EXISTING), encoding="utf-8")
    rep = install_claude_code(tmp_path, scope="project:x", python="/usr/bin/python3")
    data = json.loads(settings.read_text(encoding="utf-8"))
    assert data["permissions"] == EXISTING["permissions"] and data["model"] == "opus"
    assert set(rep.added) == {"SessionStart", "UserPromptSubmit", "PostToolUse", "Stop"}
    post = data["hooks"]["PostToolUse"]
    assert post[0] == EXISTING["hooks"]["PostToolUse"][0]  # theirs untouched, first
    assert post[1]["matcher"] == "Bash"
    assert post[1]["hooks"][0]["command"] == (
        "/usr/bin/python3 -P -c 'from amcp.agent.hooks.__main__ import run; run()' post-tool")
    assert data["hooks"]["Stop"][0] == EXISTING["hooks"]["Stop"][0]
    assert data["hooks"]["SessionStart"][0]["hooks"][0]["type"] == "command"
    cmd = (tmp_path / ".claude" / "commands" / "amcp.md").read_text(encoding="utf-8")
    assert cmd.startswith("---\n") and "$ARGUMENTS" in cmd and "project:x" in cmd


def test_claude_code_is_idempotent_and_refreshes_the_interpreter(tmp_path: Path) -> None:
    install_claude_code(tmp_path, python="/old/python")
    first = (tmp_path / ".claude" / "settings.json").read_text(encoding="utf-8")
    rep = install_claude_code(tmp_path, python="/old/python")
    assert rep.added == () and len(rep.updated) == 4
    assert (tmp_path / ".claude" / "settings.json").read_text(encoding="utf-8") == first
    install_claude_code(tmp_path, python="/new/python")
    data = json.loads((tmp_path / ".claude" / "settings.json").read_text(encoding="utf-8"))
    for groups in data["hooks"].values():
        commands = [h["command"] for g in groups for h in g["hooks"]]
        assert len(commands) == 1 and commands[0].startswith("/new/python -P -c ")


def test_merge_refreshes_the_older_dash_m_command() -> None:
    """Installs from before the ``-c`` entry are ours: replaced in place, not duplicated."""
    old = {"type": "command", "command": "/usr/bin/python3 -m amcp.agent.hooks prompt",
           "timeout": 10}
    merged, added, updated = merge_settings({"hooks": {"UserPromptSubmit": [
        {"hooks": [old]}]}}, python="/usr/bin/python3")
    assert "UserPromptSubmit" in updated and "UserPromptSubmit" not in added
    assert merged["hooks"]["UserPromptSubmit"] == [{"hooks": [
        {**old, "command": hook_command("prompt", "/usr/bin/python3")}]}]


def test_installed_command_runs_the_hook_outside_the_project_path(tmp_path: Path) -> None:
    """The written command, run by a shell as Claude Code does, answers the hook; and with
    ``-P`` a module in the agent's working directory cannot shadow the stdlib."""
    import os
    import subprocess
    import sys

    (tmp_path / "json.py").write_text("raise SystemExit('shadowed')\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMCP_")}
    src = str(Path(__file__).resolve().parents[3] / "src")
    # An empty PYTHONPATH entry means the working directory: join only what is there.
    path = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    env.update({"AMCP_HOME": str(tmp_path / "home"), "AMCP_NODE": "off", "PYTHONPATH": path})
    res = subprocess.run(hook_command("stop", sys.executable), shell=True,
                         cwd=tmp_path, input='{"session_id": "s", "cwd": "."}',
                         capture_output=True, text=True, env=env, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["decision"] == "block"


def test_merge_drops_duplicate_entries_of_ours() -> None:
    ours = {"type": "command", "command": "amcp hook stop"}
    settings = {"hooks": {"Stop": [{"hooks": [ours]}, {"hooks": [dict(ours)]}]}}
    merged, added, updated = merge_settings(settings, python="py")
    assert "Stop" in updated and "Stop" not in added
    assert merged["hooks"]["Stop"] == [{"hooks": [{**ours, "command": hook_command("stop", "py"),
                                                   "timeout": 10}]}]


def test_claude_code_refuses_to_overwrite_broken_json(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{ // a comment", encoding="utf-8")
    with pytest.raises(ValidationError):
        install_claude_code(tmp_path)
    assert settings.read_text(encoding="utf-8") == "{ // a comment"


def _repo(path: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    for k, v in (("user.email", "t@example.com"), ("user.name", "T"),
                 ("commit.gpgsign", "false")):
        subprocess.run(["git", "-C", str(path), "config", k, v], check=True)
    return path


def _commit(repo: Path, msg: str) -> str:
    (repo / "f.txt").write_text(msg, encoding="utf-8")
    subprocess.run(["git", "-C", str(repo), "add", "f.txt"], check=True)
    res = subprocess.run(["git", "-C", str(repo), "commit", "-qm", msg], check=True,
                         capture_output=True, text=True)
    return res.stdout + res.stderr


def test_git_post_commit_prints_reminder(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "r")
    rep = install_git(repo)
    assert rep.chained is None and not rep.already
    out = _commit(repo, "first change")
    assert "[AMCP] committed" in out and "first change" in out


def test_git_chains_an_existing_hook_and_is_idempotent(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "r")
    hooks = repo / ".git" / "hooks"
    old = hooks / "post-commit"
    old.write_text("#!/bin/sh\necho THEIRS-RAN\n", encoding="utf-8")
    os.chmod(old, 0o755)
    rep = install_git(repo)
    assert rep.chained == hooks / f"post-commit{CHAINED_SUFFIX}"
    assert "THEIRS-RAN" in rep.chained.read_text(encoding="utf-8")
    again = install_git(repo)
    assert again.already
    assert "THEIRS-RAN" in (hooks / f"post-commit{CHAINED_SUFFIX}").read_text(encoding="utf-8")
    assert GIT_MARKER in old.read_text(encoding="utf-8")
    out = _commit(repo, "second")
    assert out.index("THEIRS-RAN") < out.index("[AMCP] committed")
    assert out.count("[AMCP] committed") == 1


def test_git_respects_core_hooks_path(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "r")
    subprocess.run(["git", "-C", str(repo), "config", "core.hooksPath", "githooks"], check=True)
    rep = install_git(repo)
    assert rep.hook == repo / "githooks" / "post-commit"
    assert "[AMCP]" in _commit(repo, "third")


def test_git_install_outside_a_repo_fails_cleanly(tmp_path: Path) -> None:
    with pytest.raises(ValidationError):
        install_git(tmp_path / "nope-not-a-repo")
