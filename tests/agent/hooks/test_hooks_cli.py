"""The Typer commands: ``amcp hook <event>`` and ``amcp hooks install …``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import typer
from tests.agent.hooks.kit import git_project, payload, seed
from typer.testing import CliRunner

from amcp.cli.hooks_cmd import hook_app, hooks_app


def _app() -> typer.Typer:
    app = typer.Typer()
    app.add_typer(hooks_app, name="hooks")
    app.add_typer(hook_app, name="hook")
    return app


def test_hook_commands_answer_per_contract(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    home = tmp_path / "home"
    ids = seed(home)
    proj = git_project(tmp_path)
    monkeypatch.setenv("AMCP_HOME", str(home))
    monkeypatch.setenv("AMCP_NODE", "off")
    runner = CliRunner()
    res = runner.invoke(_app(), ["hook", "session-start"],
                        input=json.dumps(payload("SessionStart", proj)))
    assert res.exit_code == 0, res.output
    assert ids["ruff"][:14] in json.loads(res.output)["hookSpecificOutput"]["additionalContext"]
    bad = runner.invoke(_app(), ["hook", "stop"], input="not json")
    assert bad.exit_code == 0 and "[AMCP]" in json.loads(bad.output)["systemMessage"]


def test_install_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    monkeypatch.chdir(repo)
    runner = CliRunner()
    res = runner.invoke(_app(), ["hooks", "install", "claude-code", "--project"])
    assert res.exit_code == 0, res.output
    data = json.loads((repo / ".claude" / "settings.json").read_text(encoding="utf-8"))
    assert set(data["hooks"]) == {"SessionStart", "UserPromptSubmit", "PostToolUse", "Stop"}
    assert "project:repo" in (repo / ".claude" / "commands" / "amcp.md").read_text("utf-8")
    again = runner.invoke(_app(), ["hooks", "install", "claude-code"])
    assert again.exit_code == 0 and "added none" in again.output
    both = runner.invoke(_app(), ["hooks", "install", "claude-code", "--project", "--user"])
    assert both.exit_code != 0
    git = runner.invoke(_app(), ["hooks", "install", "git"])
    assert git.exit_code == 0 and "installed" in git.output
    assert (repo / ".git" / "hooks" / "post-commit").exists()
