"""``--store`` / ``AMCP_STORE`` name a store by path or URL; nothing else becomes a file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from amcp.cli.app import app

runner = CliRunner()


def test_amcp_store_names_the_store(tmp_path: Path) -> None:
    db = tmp_path / "env.db"
    env = {"AMCP_STORE": f"sqlite://{db}", "AMCP_HOME": str(tmp_path / "home")}
    res = runner.invoke(app, ["init", "--embedder", "hashing"], env=env)
    assert res.exit_code == 0, res.output
    assert f"store ready at {db}" in res.output
    res = runner.invoke(app, ["remember", "the kiln runs hot", "--json"], env=env)
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["stats", "--json"], env=env)
    assert json.loads(res.output)["records"] == 1
    assert not (tmp_path / "home" / "memory.db").exists()


def test_store_flag_wins_over_the_environment(tmp_path: Path) -> None:
    flag = tmp_path / "flag.db"
    env = {"AMCP_STORE": str(tmp_path / "env.db")}
    res = runner.invoke(app, ["init", "--store", f"sqlite:{flag}", "--embedder", "hashing"],
                        env=env)
    assert res.exit_code == 0, res.output
    assert flag.exists() and not (tmp_path / "env.db").exists()


@pytest.mark.parametrize("given", [
    "postgresql:/u:p@127.0.0.1:5432/amcp",  # the '//' a shell or Path swallowed
    "mysql://u:p@127.0.0.1/amcp",
    "redis://127.0.0.1",
])
def test_a_url_never_becomes_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    given: str) -> None:
    monkeypatch.chdir(tmp_path)
    for command in (["init", "--embedder", "hashing"], ["recall", "x"], ["serve"],
                    ["http"], ["mcp"], ["stats"]):
        res = runner.invoke(app, [*command, "--store", given])
        assert res.exit_code == 1, (command, res.output)
        assert res.output.count("\n") == 1 and res.output.startswith("error: "), res.output
        assert ":p@" not in res.output
    assert list(tmp_path.iterdir()) == []


def test_setup_says_it_needs_a_file(tmp_path: Path) -> None:
    res = runner.invoke(app, ["setup", "--store", "postgresql://u:hunter2@127.0.0.1:1/x",
                              "--no-check"], env={"HOME": str(tmp_path)})
    assert res.exit_code == 1
    assert "works on a SQLite store file" in res.output
    assert "hunter2" not in res.output
