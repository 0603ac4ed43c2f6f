"""Access counts are buffered (one write transaction per second, not per read) but every read
of the same store sees them, they survive close, and a purge drops them."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from amcp.keyring import Keyring
from amcp.memory import Memory
from amcp.store import sqlite as sqlite_mod
from amcp.store.sqlite import SQLiteStore
from amcp.store.tuning import AccessFlush, SQLiteTuning


def _on_disk(path: Path, kid: str) -> tuple[int, int]:
    with sqlite3.connect(path) as db:
        count = db.execute(
            "SELECT access_count FROM records WHERE knowledge_id=?", (kid,)
        ).fetchone()[0]
        daily = db.execute(
            "SELECT COALESCE(SUM(a.count),0) FROM access_daily a JOIN records r "
            "ON r.rowid=a.rid WHERE r.knowledge_id=?", (kid,)
        ).fetchone()[0]
    return int(count), int(daily)


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def tuned(tmp_path: Path, **flush: object) -> Memory:
    """A Memory whose store flushes access counts by ``AccessFlush(**flush)``."""
    path = tmp_path / "m.db"
    store = SQLiteStore(path, Keyring(tmp_path / "keys"),
                        tuning=SQLiteTuning(access=AccessFlush(**flush)))  # type: ignore[arg-type]
    return Memory(path, embedder="hashing", store=store)


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    m = Memory(tmp_path / "m.db", embedder="hashing")
    yield m
    m.close()


def test_buffered_counts_are_visible_to_every_read(mem: Memory, tmp_path: Path) -> None:
    kid = mem.remember("the build uses ninja", scope="p").knowledge_id
    for _ in range(3):
        mem.read([kid])
    assert _on_disk(tmp_path / "m.db", kid) == (0, 0)  # not written yet
    got = mem.store.get(kid)
    assert got is not None and got.state.access_count == 3
    assert got.state.last_access is not None
    assert mem.store.capabilities.access.access_count_since(kid, 0.0) == 3
    [row] = [r for r in mem.store.states(sqlite_mod.RecordFilter()) if r.knowledge_id == kid]
    assert row.state.access_count == 3
    [(_, state, _, _)] = mem.store.capabilities.bodies.raw_bodies([kid])
    assert state.access_count == 3


def test_close_writes_them(tmp_path: Path) -> None:
    m = Memory(tmp_path / "m.db", embedder="hashing")
    kid = m.remember("tabs, not spaces", scope="p").knowledge_id
    m.read([kid])
    m.read([kid])
    m.close()
    assert _on_disk(tmp_path / "m.db", kid) == (2, 2)
    again = Memory(tmp_path / "m.db", embedder="hashing")
    try:
        got = again.store.get(kid)
        assert got is not None and got.state.access_count == 2
        assert again.store.capabilities.access.access_count_since(kid, 0.0) == 2
    finally:
        again.close()


def test_flush_by_count_and_by_age(tmp_path: Path) -> None:
    clock = Clock()
    mem = tuned(tmp_path, after_n=3, clock=clock)
    kids = [mem.remember(f"fact number {i}", scope="p").knowledge_id for i in range(3)]
    mem.read(kids[:2])
    assert _on_disk(tmp_path / "m.db", kids[0]) == (0, 0)
    mem.read(kids[2:])  # the third distinct record reaches the threshold
    assert _on_disk(tmp_path / "m.db", kids[0]) == (1, 1)
    assert _on_disk(tmp_path / "m.db", kids[2]) == (1, 1)
    mem.read(kids[:1])  # one pending, for less than a second: stays buffered
    assert _on_disk(tmp_path / "m.db", kids[0]) == (1, 1)
    clock.now += 1.0
    mem.read(kids[1:2])  # the buffer is a second old now
    assert _on_disk(tmp_path / "m.db", kids[0]) == (2, 2)
    got = mem.store.get(kids[0])
    assert got is not None and got.state.access_count == 2  # not double counted
    mem.close()


def test_purge_drops_buffered_counts(mem: Memory, tmp_path: Path) -> None:
    kid = mem.remember("a secret that must go", scope="p").knowledge_id
    mem.read([kid])
    mem.purge(kid, reason="gdpr")
    mem.store.capabilities.access.flush_access()
    assert _on_disk(tmp_path / "m.db", kid)[1] == 0


def test_a_locked_store_keeps_the_counts(mem: Memory, tmp_path: Path) -> None:
    kid = mem.remember("retry me", scope="p").knowledge_id
    mem.read([kid])
    other = sqlite3.connect(tmp_path / "m.db", timeout=0.05, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another writer holds the lock
    mem.store.conn.db.execute("PRAGMA busy_timeout=50")
    try:
        with pytest.raises(sqlite_mod.StoreError):
            mem.store.capabilities.access.flush_access()
        mem.read([kid])  # still visible, and merged with the newer access
        got = mem.store.get(kid)
        assert got is not None and got.state.access_count == 2
    finally:
        other.execute("ROLLBACK")
        other.close()
    mem.store.capabilities.access.flush_access()
    assert _on_disk(tmp_path / "m.db", kid) == (2, 2)


def _wait_on_disk(path: Path, kid: str, want: tuple[int, int]) -> tuple[int, int]:
    """Poll until the background flusher has written ``want`` (or give up after 20 s)."""
    import time

    deadline = time.monotonic() + 20
    got = _on_disk(path, kid)
    while got != want and time.monotonic() < deadline:
        time.sleep(0.01)
        got = _on_disk(path, kid)
    return got


def test_background_flusher_writes_due_counts(tmp_path: Path) -> None:
    mem = tuned(tmp_path, after_n=3)
    kids = [mem.remember(f"fact number {i}", scope="p").knowledge_id for i in range(3)]
    mem.flush_in_background()
    first = mem.store.access._flusher
    mem.flush_in_background()  # idempotent: one thread
    assert first is not None and mem.store.access._flusher is first
    mem.read(kids)  # due: the flusher writes them, not this read
    assert _wait_on_disk(tmp_path / "m.db", kids[2], (1, 1)) == (1, 1)
    for kid in kids:  # what readers see never double counts while it runs
        got = mem.store.get(kid)
        assert got is not None and got.state.access_count == 1
    mem.read(kids[:1])
    mem.close()  # stops the flusher first, then writes what is left
    assert _on_disk(tmp_path / "m.db", kids[0]) == (2, 2)
    assert mem.store.access._flusher is None  # joined


def test_a_reader_flushes_inline_when_the_flusher_is_far_behind(tmp_path: Path) -> None:
    mem = tuned(tmp_path, after_n=2, inline_n=3)
    kids = [mem.remember(f"fact number {i}", scope="p").knowledge_id for i in range(3)]
    mem.flush_in_background()
    with mem.store.conn.lock:  # hold the flusher off: it needs the store's lock to write
        mem.read(kids)  # three pending: past the inline bound, so this read writes them
        assert _on_disk(tmp_path / "m.db", kids[0]) == (1, 1)
    mem.close()


def test_raw_bodies_reuses_no_stale_state(mem: Memory) -> None:
    """``raw_bodies`` reuses a row's state only for identical columns: a buffered access, its
    flush, a weight change or an invalidation each show up in the next read."""
    kid = mem.remember("the build uses ninja", scope="p").knowledge_id
    [(_, first, _, _)] = mem.store.capabilities.bodies.raw_bodies([kid])
    [(_, again, _, _)] = mem.store.capabilities.bodies.raw_bodies([kid])
    assert again == first and again.access_count == 0
    mem.read([kid])
    [(_, buffered, _, _)] = mem.store.capabilities.bodies.raw_bodies([kid])
    assert buffered.access_count == 1
    mem.store.capabilities.access.flush_access()
    [(_, flushed, _, _)] = mem.store.capabilities.bodies.raw_bodies([kid])
    assert flushed.access_count == 1 and flushed.last_access == buffered.last_access
    mem.store.set_weight(kid, 0.9)
    [(_, weighted, _, _)] = mem.store.capabilities.bodies.raw_bodies([kid])
    assert weighted.weight == 0.9 and weighted.access_count == 1
    mem.invalidate(kid, reason="wrong")
    [(_, gone, _, _)] = mem.store.capabilities.bodies.raw_bodies([kid])
    assert gone.lifecycle is not first.lifecycle


def test_raw_bodies_by_remembered_rowid_is_checked_against_the_id(mem: Memory) -> None:
    """Ids read before are looked up by row id; a remembered row id that does not hold the
    id (or no row at all) falls back to the knowledge-id lookup, never to another record."""
    a = mem.remember("the build uses ninja", scope="p").knowledge_id
    b = mem.remember("tabs, not spaces", scope="p").knowledge_id
    first = sorted(mem.store.capabilities.bodies.raw_bodies([a, b]))  # learns both row ids
    known = mem.store.vectors._memo
    assert set(known) >= {a, b}
    assert sorted(mem.store.capabilities.bodies.raw_bodies([b, a, b])) == first
    known[a], known[b] = known[b], 10**9  # a points at b's row, b at no row
    assert [r[0] for r in mem.store.capabilities.bodies.raw_bodies([a])] == [a]
    assert sorted(mem.store.capabilities.bodies.raw_bodies([a, b])) == first
    assert mem.store.capabilities.bodies.raw_bodies(["K-" + "0" * 64]) == []
