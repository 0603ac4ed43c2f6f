"""The read-by-id caches (``RecordReads._row_by_id``, ``access_count_since``) never serve
what a commit changed: this connection's own writes, another connection's (another
process is the same to SQLite), and uncommitted writes inside our own transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from amcp.amf.types import Lifecycle
from amcp.errors import GoneError
from amcp.memory import Memory
from amcp.store.base import ChangeOp
from amcp.store.walwatch import WalWatch


@pytest.fixture(params=["wal-index", "pragma"])
def pair(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[Memory, Memory]]:
    """Two Memories on one file: two connections, as a node and a CLI process would be;
    ``a`` watches for others' commits through the wal-index header, or (the fallback when
    that header cannot be read) through ``PRAGMA data_version``."""
    a = Memory(tmp_path / "m.db", embedder="hashing")
    b = Memory(tmp_path / "m.db", embedder="hashing")
    assert a.store.conn.wal_watch is not None  # a WAL store of this process: the header reads
    if request.param == "pragma":
        a.store.conn.wal_watch.close()
        a.store.conn.wal_watch = None
    yield a, b
    b.close()
    a.close()


def _lifecycle(mem: Memory, kid: str) -> Lifecycle | None:
    got = mem.store.get(kid)
    return None if got is None else got.state.lifecycle


def test_a_row_read_again_comes_from_the_cache_and_equals_the_table(
    pair: tuple[Memory, Memory],
) -> None:
    a, _ = pair
    kid = a.remember("the build uses ninja", scope="p").knowledge_id
    first = a.store.get(kid)
    assert kid in a.store._reads._hot_rows  # the cache under test
    again = a.store.get(kid)
    assert first is not None and again is not None
    assert again.record == first.record and again.state == first.state
    assert a.store.get_many([kid]) == [again]
    assert a.store.get("K-nope") is None and a.store.get_many(["K-nope"]) == []


def test_another_connections_forget_and_purge_are_seen_at_once(
    pair: tuple[Memory, Memory],
) -> None:
    a, b = pair
    kid = a.remember("deploys happen on fridays", scope="p").knowledge_id
    assert _lifecycle(a, kid) is Lifecycle.ACTIVE  # cached in a
    b.invalidate(kid, reason="wrong")
    assert _lifecycle(a, kid) is Lifecycle.INVALIDATED
    b.purge(kid, reason="privacy")
    gone = a.store.get(kid)
    assert gone is not None and gone.record is None  # the content is not served from a cache
    with pytest.raises(GoneError):
        a.get(kid)


def test_own_writes_are_seen_at_once_inside_and_after_a_transaction(
    pair: tuple[Memory, Memory],
) -> None:
    a, _ = pair
    kid = a.remember("tabs, not spaces", scope="p").knowledge_id
    assert _lifecycle(a, kid) is Lifecycle.ACTIVE
    store = a.store
    with store.atomic():
        store.set_state(kid, ChangeOp.ARCHIVE, hlc=a.clock.send(), lifecycle=Lifecycle.ARCHIVED)
        assert _lifecycle(a, kid) is Lifecycle.ARCHIVED  # uncommitted, our own
    assert _lifecycle(a, kid) is Lifecycle.ARCHIVED
    store.set_weight(kid, 0.25)
    got = store.get(kid)
    assert got is not None and got.state.weight == 0.25


def test_a_rolled_back_write_is_not_served(pair: tuple[Memory, Memory]) -> None:
    a, _ = pair
    kid = a.remember("the cache is warm", scope="p").knowledge_id
    store = a.store
    before = store.get(kid)
    assert before is not None and before.state.weight != 0.125
    with pytest.raises(RuntimeError), store.atomic():
        store.set_weight(kid, 0.125)
        raise RuntimeError("abort")
    got = store.get(kid)
    assert got is not None and got.state.weight == before.state.weight


def test_window_counts_follow_own_flushes_and_other_connections_at_once(
    pair: tuple[Memory, Memory],
) -> None:
    a, b = pair
    kid = a.remember("read me often", scope="p").knowledge_id
    a.read([kid])
    assert a.store.capabilities.access.access_count_since(kid, 0.0) == 1
    assert a.store.access._stored_counts  # the stored window is remembered
    a.store.capabilities.access.flush_access()  # buffered -> stored: the remembered stored count is dropped
    assert a.store.capabilities.access.access_count_since(kid, 0.0) == 1
    a.read([kid])
    assert a.store.capabilities.access.access_count_since(kid, 0.0) == 2
    # Another process's counts: its flush is a commit, seen by the next read.
    b.read([kid])
    b.store.capabilities.access.flush_access()
    assert a.store.capabilities.access.access_count_since(kid, 0.0) == 3
    b.read([kid])
    b.store.capabilities.access.flush_access()
    assert a.store.capabilities.access.access_count_since(kid, 0.0) == 4


def test_the_wal_index_header_moves_with_every_commit_of_any_connection(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory(path, embedder="hashing") as a, Memory(path, embedder="hashing") as b:
        watch = WalWatch.open(path)
        assert watch is not None
        try:
            before = watch.stamp()
            a.store.get_meta("store_id")  # reads commit nothing
            assert watch.stamp() == before
            b.remember("a commit by another connection", scope="p")
            after = watch.stamp()
            assert after != before
            # A checkpoint that empties the WAL, then a commit that restarts it.
            with sqlite3.connect(path) as c:
                c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            b.remember("the first commit of a restarted WAL", scope="p")
            assert watch.stamp() != after
        finally:
            watch.close()


def test_no_watcher_without_a_readable_header(tmp_path: Path) -> None:
    assert WalWatch.open(tmp_path / "absent.db") is None
    (tmp_path / "junk.db-shm").write_bytes(b"\x00" * 200)  # never initialised
    assert WalWatch.open(tmp_path / "junk.db") is None
    (tmp_path / "short.db-shm").write_bytes(b"\x01" * 20)
    assert WalWatch.open(tmp_path / "short.db") is None
