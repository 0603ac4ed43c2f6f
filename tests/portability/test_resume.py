"""Atomic batches and resumable imports; the CLI's reports and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.portability.kit import FIXTURES, run, texts
from typer.testing import CliRunner

from amcp.cli.app import app
from amcp.memory import Memory
from amcp.portability import write


def _rows(tmp_path: Path, n: int) -> Path:
    f = tmp_path / "t.jsonl"
    f.write_text("".join(json.dumps({"text": f"fact number {i}", "created_at": 1709647500 + i})
                         + "\n" for i in range(n)))
    return f


def test_killed_import_resumes_without_duplicates(
    mem: Memory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = _rows(tmp_path, 50)
    real = write._commit
    calls = {"n": 0}

    def dies_on_third(memory: Memory, specs: list[write.RecordSpec],
                      records: list[object], *rest: object) -> list[write.Written]:
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt  # as a killed process would stop
        return real(memory, specs, records, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(write, "_commit", dies_on_third)
    with pytest.raises(KeyboardInterrupt):
        run(mem, f, batch=10)
    assert mem.stats().records == 20  # two whole batches, nothing of the third
    monkeypatch.setattr(write, "_commit", real)
    res = run(mem, f, batch=10)
    assert res.ok and res.created == 30 and res.health.decisions["merge"] == 20
    assert sorted(texts(mem)) == sorted(f"fact number {i}" for i in range(50))


def test_a_failing_batch_commits_nothing(
    mem: Memory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = tmp_path / "p.jsonl"
    f.write_text('{"id": "a", "type": "fact", "content": "v1", "created_at": 1}\n')
    run(mem, f)
    f.write_text('{"id": "a", "type": "fact", "content": "v2", "created_at": 2}\n'
                 '{"id": "b", "type": "fact", "content": "other", "created_at": 3}\n')

    def broken(*_a: object, **_k: object) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(mem.store, "set_state", broken)  # the supersession fails mid-batch
    with pytest.raises(RuntimeError):
        run(mem, f)
    assert texts(mem) == ["v1"]  # neither v2 nor "other" from the same batch


def test_cli_dry_run_writes_reports_and_nothing_else(tmp_path: Path) -> None:
    store = tmp_path / "s" / "m.db"
    rep = tmp_path / "reports" / "health"
    res = CliRunner().invoke(app, ["import", str(FIXTURES / "mem0_get_all.json"), "--dry-run",
                                   "--report", str(rep), "--store", str(store), "-e", "hashing"])
    assert res.exit_code == 0, res.output
    assert "# Import health report" in res.output
    data = json.loads(rep.with_suffix(".json").read_text())
    assert data["health"]["items"] == 5 and data["verification"] is None
    assert "| `user:alice` | 3 |" in rep.with_suffix(".md").read_text()
    with Memory(store, embedder="hashing") as m:
        assert m.stats().records == 0


def test_cli_import_verifies_and_exports(tmp_path: Path) -> None:
    store = tmp_path / "s" / "m.db"
    runner = CliRunner()
    res = runner.invoke(app, ["import", str(FIXTURES / "mcp_memory.jsonl"), "--store",
                              str(store), "-e", "hashing", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["ok"] and out["created"] == 9
    assert [c["ok"] for c in out["verification"]["checks"]] == [True] * 5
    for fmt, name in (("portable", "p.jsonl"), ("mem0", "m.json"), ("mcp-memory", "g.jsonl"),
                      ("markdown", "md"), ("amcp", "a.ndjson")):
        res = runner.invoke(app, ["export", str(tmp_path / name), "--to", fmt, "--store",
                                  str(store), "-e", "hashing"])
        assert res.exit_code == 0, res.output
        assert "exported 9 records" in res.output
    res = runner.invoke(app, ["import", str(tmp_path / "a.ndjson"), "--store",
                              str(tmp_path / "t" / "m.db"), "-e", "hashing"])
    assert res.exit_code == 0 and "created 9" in res.output


def test_cli_bad_input_exits_non_zero(tmp_path: Path) -> None:
    f = tmp_path / "x.jsonl"
    f.write_text('{"text": "a", "created_at": "2024-01-01 10:00"}\n')
    res = CliRunner().invoke(app, ["import", str(f), "--store", str(tmp_path / "m.db"),
                                   "-e", "hashing"])
    assert res.exit_code == 1
    assert "x.jsonl: line 1: created_at" in res.output and "--assume-tz" in res.output


@pytest.mark.parametrize("keep", [0, 5, 20_000])
def test_pass_two_writes_the_same_whether_pass_one_was_kept_or_read_again(
    mem: Memory, tmp_path: Path, keep: int
) -> None:
    # 30 items: kept whole (20,000), over the bound so read again (5), never kept (0).
    f = _rows(tmp_path, 30)
    res = run(mem, f, batch=7, keep_planned=keep)
    assert res.ok and res.created == 30 and res.health.items == 30
    assert sorted(texts(mem)) == sorted(f"fact number {i}" for i in range(30))
