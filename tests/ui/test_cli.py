"""``amcp ui``: where it finds the inspector."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from amcp.agent.hooks.runtime import write_runtime
from amcp.cli.app import app
from amcp.cli.ui_cmd import DEFAULT_URL, ui_url


def test_explicit_url_and_default(tmp_path: Path) -> None:
    store = tmp_path / "m.db"
    assert ui_url(store, "http://10.0.0.5:9000/ui") == ("http://10.0.0.5:9000/ui", "--url")
    url, source = ui_url(store, None)
    assert url == DEFAULT_URL and "no amcp serve" in source


def test_running_node_from_its_runtime_file(tmp_path: Path) -> None:
    store = tmp_path / "m.db"
    store.touch()
    write_runtime(store, http=("0.0.0.0", 8800), token="t" * 32)
    url, source = ui_url(store, None)
    assert url == "http://127.0.0.1:8800/ui" and "serving" in source


def test_command_prints_the_address(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["ui", "--store", str(tmp_path / "m.db"), "--no-browser"])
    assert result.exit_code == 0, result.output
    assert DEFAULT_URL in result.output
