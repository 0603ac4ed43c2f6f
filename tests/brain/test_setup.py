"""amcp setup: idempotent, never resets a store, self-check cleans up after itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from amcp.cli.app import app
from amcp.cli.setup_cmd import found_runtimes, self_check, setup
from amcp.memory import Memory
from amcp.store.base import RecordFilter


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_setup_twice_changes_nothing_and_keeps_memories(tmp_path: Path) -> None:
    home, store = tmp_path / "home", tmp_path / "amcp" / "memory.db"
    project = tmp_path / "proj"
    project.mkdir()
    with Memory(store, embedder="hashing") as mem:
        kept = mem.remember("an existing memory", scope="project:proj").knowledge_id
    kwargs = {"embedder": "hashing", "runtimes": ["claude-code", "codex", "gemini",
                                                  "opencode"],
              "home": home, "project": project, "brain": tmp_path / "amcp" / "brain"}
    first = setup(store, **kwargs)  # type: ignore[arg-type]
    assert not first.created and first.check.ok
    assert set(first.installed) == {"claude-code", "codex", "gemini", "opencode", "protocol"}
    configs = snapshot(home) | {f"proj/{k}": v for k, v in snapshot(project).items()}
    second = setup(store, **kwargs)  # type: ignore[arg-type]
    assert second.check.ok
    assert snapshot(home) | {f"proj/{k}": v for k, v in snapshot(project).items()} == configs
    with Memory(store, embedder="hashing") as mem:
        active = mem.list_records(RecordFilter(), limit=100)
        assert [i.knowledge_id for i in active] == [kept]  # no self-check memory left
        purged = mem.list_records(RecordFilter(lifecycles=None), limit=100)
        assert sum(1 for i in purged if i.record is None) == 2  # one tombstone per check
    brain = (tmp_path / "amcp" / "brain" / "INDEX.md").read_text()
    assert "self-check" not in brain and "selfcheck" not in brain
    assert not list((tmp_path / "amcp" / "ledger").glob("amcp-setup-check-*"))
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    assert len(settings["hooks"]["Stop"]) == 1


def test_self_check_reports_a_hook_that_cannot_recall(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "amcp" / "memory.db"
    Memory(store, embedder="hashing").close()
    monkeypatch.setattr("amcp.agent.hooks.hookio.hook_argv",
                        lambda python, event: [python, "-c", "print('{}')"])
    check = self_check(store)
    assert not check.recalled and check.compiled and check.removed and not check.ok


def test_cli_setup_and_detection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("AMCP_HOME", str(tmp_path / "amcp"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    (tmp_path / "home" / ".gemini").mkdir(parents=True)
    assert found_runtimes(tmp_path / "home") == ["gemini"]
    res = CliRunner().invoke(app, ["setup", "-e", "hashing"])
    assert res.exit_code == 0, res.output
    assert "store created" in res.output and "self-check passed" in res.output
    assert (tmp_path / "home" / ".gemini" / "extensions" / "amcp" / "hooks" /
            "hooks.json").exists()
    res = CliRunner().invoke(app, ["setup", "--runtime", "vim"])
    assert res.exit_code != 0 and "unknown runtime" in res.output
