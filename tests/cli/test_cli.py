from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from amcp.cli.app import app

runner = CliRunner()


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "home" / "memory.db"
    res = runner.invoke(app, ["init", "--store", str(path), "--embedder", "hashing"])
    assert res.exit_code == 0, res.output
    return path


def run(*args: str) -> tuple[int, str]:
    res = runner.invoke(app, list(args))
    return res.exit_code, res.output


def test_remember_recall_show_forget_purge(store: Path) -> None:
    s = str(store)
    code, out = run(
        "remember",
        "Alice prefers tea over coffee",
        "--scope",
        "user:alice",
        "--kind",
        "preference",
        "--store",
        s,
        "--json",
    )
    assert code == 0, out
    kid = json.loads(out)["knowledge_id"]
    code, out = run(
        "recall", "what does alice drink", "--scope", "user:alice", "--store", s, "--json"
    )
    assert code == 0 and json.loads(out)["results"][0]["knowledge_id"] == kid
    code, out = run("show", kid, "--store", s, "--json")
    assert (
        json.loads(out)["amf"]["annotation"]["natural_language"] == "Alice prefers tea over coffee"
    )
    code, out = run("supersede", kid, "Alice prefers green tea", "--store", s, "--json")
    new = json.loads(out)["knowledge_id"]
    code, out = run("forget", new, "--reason", "she switched to coffee", "--store", s)
    assert code == 0 and "invalidated" in out
    code, out = run("purge", kid, "--yes", "--store", s)
    assert code == 0 and "tombstone" in out
    code, out = run("stats", "--store", s, "--json")
    data = json.loads(out)
    assert data["records"] == 2 and data["integrity"]["ok"] is True
    assert data["by_lifecycle"] == {"invalidated": 1, "purged": 1}


def test_export_import_between_stores(store: Path, tmp_path: Path) -> None:
    s = str(store)
    for text in ("one fact", "two facts", "three facts"):
        assert run("remember", text, "--store", s)[0] == 0
    export = tmp_path / "out.ndjson"
    code, out = run("export", str(export), "--store", s)
    assert code == 0 and "exported 3 records" in out
    other = tmp_path / "other" / "memory.db"
    code, out = run("import", str(export), "--store", str(other), "--embedder", "hashing", "--json")
    assert code == 0, out
    assert json.loads(out)["created"] == 3 and json.loads(out)["complete"]
    code, out = run("import", str(export), "--store", str(other), "--embedder", "hashing", "--json")
    assert json.loads(out)["already"] == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["show", "K-" + "0" * 64], "no record"),
        (["forget", "K-" + "0" * 64, "--reason", "x"], "no record"),
        (["remember", "x", "--type", "KT-RUMOUR"], "type"),
        (["remember", "x", "--confidence", "7"], "confidence: "),
        (["recall", "x", "-k", "0"], "k:"),
    ],
)
def test_errors_are_one_line_without_traceback(store: Path, args: list[str], message: str) -> None:
    code, out = run(*args, "--store", str(store))
    assert code != 0
    assert message in out
    assert "Traceback" not in out
    assert len(out.strip().splitlines()) == 1


def test_missing_store_and_corrupt_file(tmp_path: Path) -> None:
    code, out = run("recall", "x", "--store", str(tmp_path / "nope.db"))
    assert code == 1 and "amcp init" in out
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"garbage" * 1000)
    code, out = run("stats", "--store", str(bad))
    assert code == 1 and "not a readable amcp store" in out and "Traceback" not in out


def test_import_bad_file_names_the_line(store: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.ndjson"
    bad.write_text('{"amcp_export": 1}\n{oops\n')
    code, out = run("import", str(bad), "--store", str(store))
    assert code == 1 and "line 2" in out


def test_reindex_after_model_change(store: Path) -> None:
    s = str(store)
    run("remember", "reindex me", "--store", s)
    code, out = run("reindex", "--store", s, "--embedder", "hashing")
    assert code == 0 and "re-embedded 1" in out


def test_demo_runs(tmp_path: Path) -> None:
    code, out = run("demo", "--directory", str(tmp_path / "demo"), "--embedder", "hashing")
    assert code == 0, out
    assert "integrity ok" in out
