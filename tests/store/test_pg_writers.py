"""Many writers on one PostgreSQL store: several real processes append at once.

What must hold (issue 16, item 3): no acknowledged write is lost, the hash chain and the
signed head stay valid, no process sees a false tamper alarm when it opens the store while
the others append, and every open store hears the others' commits (LISTEN/NOTIFY moves its
generation).
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
from tests.store.records import rec

from amcp.amf.types import Lifecycle
from amcp.keyring import Keyring
from amcp.store.base import ChangeOp, RecordFilter
from amcp.store.postgres import PostgresStore

pytestmark = pytest.mark.postgres

WRITERS = 4
RECORDS = 25


def _writer(dsn: str, keys: str, worker: int, out: multiprocessing.Queue[object]) -> None:
    """One process: puts, a lifecycle change and a weight per few records, and an open of
    a second store (the check on open) in the middle of everyone's writes."""
    try:
        store = PostgresStore(dsn, Keyring(Path(keys)))
        acked: list[str] = []
        ops = 0
        for j in range(RECORDS):
            r = rec(f"writer {worker} wrote record {j} about kafka", scope=f"team:{worker}",
                    ts=1_700_000_000 + worker * 1000 + j)
            store.put(r, hlc=store.max_hlc() + 1, index_text=f"writer{worker} record{j} kafka")
            acked.append(r.knowledge_id)
            ops += 1
            if j % 5 == 4:
                store.set_state(acked[-2], ChangeOp.INVALIDATE, hlc=store.max_hlc() + 1,
                                lifecycle=Lifecycle.INVALIDATED, reason="superseded")
                store.set_weight(acked[-1], 0.75)
                ops += 2
            if j == RECORDS // 2:
                PostgresStore(dsn, Keyring(Path(keys))).close()  # verifies on open
        store.close()
        out.put((worker, acked, ops))
    except BaseException as exc:
        out.put((worker, f"{type(exc).__name__}: {exc}", 0))


def test_writers_in_several_processes_lose_nothing(postgres_db: str, tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    watcher = PostgresStore(postgres_db, Keyring(keys))  # creates the store, then listens
    before = watcher.generation()
    ctx = multiprocessing.get_context("spawn")  # a forked pool or listener thread is unsafe
    out: multiprocessing.Queue[object] = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(postgres_db, str(keys), w, out))
             for w in range(WRITERS)]
    for p in procs:
        p.start()
    results = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    failed = [r for r in results if isinstance(r[1], str)]  # type: ignore[index]
    assert not failed, failed
    acked = [kid for r in results for kid in r[1]]  # type: ignore[index]
    ops = sum(int(r[2]) for r in results)  # type: ignore[index]
    assert len(acked) == WRITERS * RECORDS

    assert watcher.commits.wait(before, 5.0) > before  # the peers' NOTIFYs arrived
    report = watcher.verify(full=True)
    assert report.ok and not report.damaged, report
    assert report.checked_changes == ops
    found = {s.knowledge_id for s in watcher.get_many(acked)}
    assert found == set(acked)  # no acknowledged write lost
    assert watcher.count(RecordFilter(lifecycles=None)) == len(acked)
    seqs = [c.hlc for c in watcher.changes(limit=10_000)]
    assert len(seqs) == ops
    watcher.close()
    again = PostgresStore(postgres_db, Keyring(keys))  # a fresh open: no false alarm either
    assert again.verify().ok and not again.quarantined()
    again.close()


def test_a_commit_wakes_another_store(postgres_db: str, tmp_path: Path) -> None:
    keys = Keyring(tmp_path / "keys")
    a = PostgresStore(postgres_db, keys)
    b = PostgresStore(postgres_db, keys)
    try:
        seen = b.generation()
        a.put(rec("a commit b must hear about"), hlc=1)
        assert b.commits.wait(seen, 5.0) > seen
        assert b.get(rec("a commit b must hear about").knowledge_id) is not None
        moved = b.generation()
        a.set_weight(rec("a commit b must hear about").knowledge_id, 0.9)  # weights too
        assert b.commits.wait(moved, 5.0) > moved
    finally:
        a.close()
        b.close()
