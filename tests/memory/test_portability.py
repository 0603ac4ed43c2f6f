from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from amcp.errors import ValidationError
from amcp.memory import Memory


def _fill(mem: Memory) -> dict[str, str]:
    ids = {
        "keep": mem.remember(
            "Alice likes green tea", scope="user:alice", kind="preference"
        ).knowledge_id,
        "old": mem.remember("standup is at 9:30", scope="team:x").knowledge_id,
        "wrong": mem.remember("the CI runs on Jenkins", scope="team:x").knowledge_id,
        "gone": mem.remember("Bob's home address is 1 Main St", scope="user:bob").knowledge_id,
    }
    ids["new"] = mem.supersede(ids["old"], "standup is at 10:00").knowledge_id
    mem.invalidate(ids["wrong"], "moved to GitHub Actions")
    mem.purge(ids["gone"], "privacy")
    return ids


def test_export_import_round_trip_loses_nothing(mem: Memory, tmp_path: Path) -> None:
    ids = _fill(mem)
    buf = io.StringIO()
    rep = mem.export(buf)
    assert (rep.records, rep.tombstones) == (4, 1)
    with Memory(tmp_path / "b" / "m.db", embedder="hashing") as other:
        imp = other.import_(io.StringIO(buf.getvalue()))
        assert imp.complete and (imp.created, imp.tombstones) == (4, 1)
        for key in ("keep", "old", "wrong", "new"):
            assert other.get(ids[key]).record == mem.get(ids[key]).record
            assert other.get(ids[key]).state.lifecycle == mem.get(ids[key]).state.lifecycle
        assert other.get(ids["old"]).state.superseded_by == ids["new"]
        assert other.get(ids["wrong"]).state.reason == "moved to GitHub Actions"
        again = other.import_(io.StringIO(buf.getvalue()))
        assert (again.created, again.already) == (0, 4)
        assert other.stats().records == 5
        assert other.store.verify(full=True).ok
        out2 = io.StringIO()
        other.export(out2)
        strip = lambda t: [ln for ln in t.splitlines() if "amcp_export" not in ln]  # noqa: E731
        assert strip(out2.getvalue()) == strip(buf.getvalue())


def test_purged_records_never_come_back(mem: Memory, tmp_path: Path) -> None:
    r = mem.remember("secret plan", scope="team:x")
    buf = io.StringIO()
    mem.export(buf)  # an old export that still has the record
    mem.purge(r.knowledge_id)
    imp = mem.import_(io.StringIO(buf.getvalue()))
    assert imp.refused_purged == 1 and imp.created == 0
    assert mem.recall("secret plan").hits == ()


def test_tombstone_in_file_purges_local_copy(mem: Memory, tmp_path: Path) -> None:
    with Memory(tmp_path / "b" / "m.db", embedder="hashing") as other:
        r = other.remember("phone 555-0199", scope="user:c")
        mem.remember(
            "phone 555-0199",
            scope="user:c",
            created_at=other.get(r.knowledge_id).record.meta.created_at,  # type: ignore[union-attr]
            created_by=other.node_uri,
        )
        other.purge(r.knowledge_id)
        buf = io.StringIO()
        other.export(buf)
    mem.import_(io.StringIO(buf.getvalue()))
    assert mem.store.get(r.knowledge_id).record is None  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["{not json"], "line 1: not JSON"),
        (["[1,2]"], "line 1: each line must be a JSON object"),
        ([b"\xff\xfe{}"], "line 1: invalid UTF-8"),
        (['{"amcp_export": 99}'], "not supported"),
        (['{"amf": {"type": "KT-FACT"}}'], "line 1"),
    ],
)
def test_bad_import_lines_are_named(mem: Memory, lines: list[object], message: str) -> None:
    mem.remember("already here")
    with pytest.raises(ValidationError, match=message):
        mem.import_(lines)  # type: ignore[arg-type]
    assert mem.stats().records == 1


def test_truncated_export_is_reported_incomplete(mem: Memory, tmp_path: Path) -> None:
    _fill(mem)
    buf = io.StringIO()
    mem.export(buf)
    lines = buf.getvalue().splitlines(keepends=True)[:-1]
    with Memory(tmp_path / "c" / "m.db", embedder="hashing") as other:
        assert not other.import_(lines).complete


KILL_SCRIPT = textwrap.dedent(
    """
    import sys
    from amcp.memory import Memory
    def tick(rep):
        print(rep.created, flush=True)
    with Memory(sys.argv[1], embedder="hashing") as m, open(sys.argv[2], "rb") as fh:
        m.import_(fh, batch=50, progress=tick)
    """
)


@pytest.mark.slow
def test_sigkill_mid_import_keeps_every_acknowledged_record(mem: Memory, tmp_path: Path) -> None:
    for i in range(1500):
        mem.remember(f"fact {i}: the value of parameter p{i} is {i * 7}", scope="bulk")
    export = tmp_path / "big.ndjson"
    with export.open("w") as fh:
        mem.export(fh)
    target = tmp_path / "t" / "m.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", KILL_SCRIPT, str(target), str(export)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    acked = 0
    for line in proc.stdout:
        acked = int(line)
        if acked >= 300:
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=30)
    proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    with Memory(target, embedder="hashing") as m:  # integrity check on open passes
        assert m.store.verify(full=True).ok
        n = m.stats().records
        assert acked <= n < 1500
        with export.open("rb") as fh:
            rep = m.import_(fh)
        assert rep.complete
        assert m.stats().records == 1500
        assert rep.created == 1500 - n and rep.already == n


def test_portable_round_trip(mem: Memory) -> None:
    from amcp.amf.portable import from_portable, to_portable

    p = {
        "id": "mem0-123",
        "type": "task",
        "content": "finish the migration by Friday",
        "scope": "project:y",
        "source_agent": "mem0",
        "created_at": "2024-05-08T15:56:00+02:00",
        "ttl": 86400,
        "tags": ["todo"],
        "meta": {"priority": "high"},
    }
    rec = from_portable(p)
    out = mem.put(rec)
    assert to_portable(mem.get(out.knowledge_id).record) == p  # type: ignore[arg-type]
    assert json.loads(json.dumps(p)) == p
