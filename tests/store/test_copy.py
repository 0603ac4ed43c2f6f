"""``amcp store copy`` between SQLite stores (the PostgreSQL pairs: test_postgres_ops.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.store.copy_kit import EVERYTHING, populate, snapshot
from typer.testing import CliRunner

from amcp.cli.app import app
from amcp.keyring import Keyring
from amcp.memory import Memory
from amcp.store.copy import COPIED_FROM, copy_store
from amcp.store.sqlite import SQLiteStore

runner = CliRunner()


@pytest.fixture
def source(tmp_path: Path) -> tuple[Path, object]:
    path = tmp_path / "a" / "memory.db"
    with Memory(path, embedder="hashing") as mem:
        made = populate(mem)
    return path, made


def test_copy_reproduces_every_record_and_state(source: tuple[Path, object],
                                                tmp_path: Path) -> None:
    path, made = source
    dest = tmp_path / "b" / "memory.db"
    res = runner.invoke(app, ["store", "copy", str(path), f"sqlite://{dest}", "--json"])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output)
    assert rep["ok"] is True, rep["checks"]
    assert rep["tombstones"] == 1 and rep["weights"] == 2
    assert rep["folded"] >= 1  # the purged record's put is carried by its tombstone
    with Memory(path, embedder="hashing") as a, Memory(dest, embedder="hashing") as b:
        assert snapshot(a.store) == snapshot(b.store)
        assert a.stats().vectors == b.stats().vectors > 0
        # the destination signs its own chain, and names the source head it was made from
        assert b.store.get_meta("node_key") != a.store.get_meta("node_key")
        link = json.loads(b.store.get_meta(COPIED_FROM) or "{}")
        report = a.store.verify()
        assert (link["seq"], link["head"]) == (report.checked_changes, report.head)
        assert link["store_id"] == a.store.get_meta("store_id")
        hits = b.recall("which bay fires at 1007 degrees", k=1, scope="project:kiln")
        assert "bay 7" in hits.records[0].text
        assert b.get(made.secret).record is not None  # type: ignore[attr-defined]


def test_a_nonempty_destination_is_refused(source: tuple[Path, object], tmp_path: Path) -> None:
    path, _ = source
    dest = tmp_path / "b.db"
    with Memory(dest, embedder="hashing") as mem:
        mem.remember("already here")
    before = snapshot(SQLiteStore(dest, Keyring(tmp_path / "keys")))
    res = runner.invoke(app, ["store", "copy", str(path), str(dest)])
    assert res.exit_code == 1
    assert "not empty" in res.output and res.output.count("\n") == 1
    with Memory(dest, embedder="hashing") as mem:
        assert snapshot(mem.store) == before
    res = runner.invoke(app, ["store", "copy", str(path), str(dest), "--into-nonempty",
                              "--json"])
    rep = json.loads(res.output)
    assert rep["records"] > 40


def test_missing_source_and_same_store(tmp_path: Path) -> None:
    res = runner.invoke(app, ["store", "copy", str(tmp_path / "none.db"), str(tmp_path / "b")])
    assert res.exit_code == 1 and "no store at" in res.output
    assert not (tmp_path / "b").exists()
    with Memory(tmp_path / "a.db", embedder=None):
        pass
    res = runner.invoke(app, ["store", "copy", str(tmp_path / "a.db"),
                              f"sqlite://{tmp_path}/a.db"])
    assert res.exit_code == 1 and "both the source and the destination" in res.output


def test_a_failing_copy_leaves_the_destination_as_it_was(source: tuple[Path, object],
                                                        tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    path, _ = source
    a = SQLiteStore(path, Keyring(path.parent / "keys"))
    b = SQLiteStore(tmp_path / "b.db", Keyring(tmp_path / "keys"))
    calls = 0
    real = b.set_state

    def breaks(*args: object, **kw: object) -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise OSError("disk full")
        real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(b, "set_state", breaks)
    with pytest.raises(OSError, match="disk full"):
        copy_store(a, b, source="a", destination="b")
    assert b.count(EVERYTHING) == 0 and b.max_hlc() == 0
    assert b.verify(full=True).ok
    a.close()
    b.close()

