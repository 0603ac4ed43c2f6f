"""SQLite-specific behaviour: migrations, corruption, tampering, locking."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from tests.store.records import rec

from amcp.errors import StoreError, StoreIntegrityError
from amcp.keyring import Keyring
from amcp.store.base import RecordFilter
from amcp.store.schema import BACKFILLS, MIGRATIONS, SCHEMA_VERSION, split_sql
from amcp.store.sqlite import SQLiteStore


def open_at(tmp: Path, **kw: object) -> SQLiteStore:
    return SQLiteStore(tmp / "memory.db", Keyring(tmp / "keys"), **kw)  # type: ignore[arg-type]


def raw(tmp: Path) -> sqlite3.Connection:
    return sqlite3.connect(tmp / "memory.db", isolation_level=None)


@pytest.mark.parametrize("start", range(SCHEMA_VERSION))
def test_each_migration_upgrades_a_store_left_at_the_previous_version(
    tmp_path: Path, start: int
) -> None:
    db = raw(tmp_path)
    for number in range(start):
        for stmt in split_sql(MIGRATIONS[number]):
            db.execute(stmt)
        if number + 1 in BACKFILLS:  # as migrate() runs it, after the migration's SQL
            BACKFILLS[number + 1](db)
        db.execute(f"PRAGMA user_version={number + 1}")
    db.close()
    s = open_at(tmp_path)
    assert raw(tmp_path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    r = rec("after migration")
    s.put(r, hlc=1)
    s.capabilities.access.touch([r.knowledge_id], 1e9)  # access_daily exists (migration 2)
    assert s.stats().schema_version == SCHEMA_VERSION
    s.close()


def test_store_from_a_newer_amcp_is_refused(tmp_path: Path) -> None:
    open_at(tmp_path).close()
    raw(tmp_path).execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    with pytest.raises(StoreError, match="upgrade amcp"):
        open_at(tmp_path)


def test_garbage_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "memory.db").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not a readable amcp store"):
        open_at(tmp_path)


def test_truncated_database_is_refused_without_touching_it(tmp_path: Path) -> None:
    s = open_at(tmp_path)
    for i in range(200):
        s.put(rec(f"fact number {i} " + "x" * 200), hlc=i + 1, index_text=f"fact {i}")
    s.close()
    path = tmp_path / "memory.db"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    before = path.read_bytes()
    with pytest.raises(StoreError):
        open_at(tmp_path)
    assert path.read_bytes() == before


def _store_with_three(tmp: Path) -> list[str]:
    s = open_at(tmp)
    ids = [s.put(rec(f"record {i}"), hlc=i + 1).knowledge_id for i in range(3)]
    s.close()
    return ids


def test_edited_record_body_is_refused_on_read(tmp_path: Path) -> None:
    ids = _store_with_three(tmp_path)
    db = raw(tmp_path)
    body = db.execute("SELECT body FROM records WHERE knowledge_id=?", (ids[1],)).fetchone()[0]
    db.execute(
        "UPDATE records SET body=? WHERE knowledge_id=?",
        (body.replace(b"record 1", b"record 9"), ids[1]),
    )
    db.close()
    s = open_at(tmp_path)  # the chain is intact; the record is not
    assert s.get(ids[1]) is None  # quarantined, not served, and no other read fails
    assert ids[1] in s.quarantined()
    assert s.get(ids[0]) is not None
    report = s.verify(full=True)
    assert report.ok  # the log is intact: damage to one record is not damage to the store
    assert [kid for kid, _why in report.damaged] == [ids[1]]
    s.close()


def test_edited_record_body_is_left_out_of_summaries(tmp_path: Path) -> None:
    ids = _store_with_three(tmp_path)
    db = raw(tmp_path)
    body = db.execute("SELECT body FROM records WHERE knowledge_id=?", (ids[1],)).fetchone()[0]
    db.execute("UPDATE records SET body=? WHERE knowledge_id=?",
               (body.replace(b"record 1", b"record 9"), ids[1]))
    db.close()
    s = open_at(tmp_path)
    got = s.summaries(RecordFilter(), limit=2)
    assert [r.knowledge_id for r in got] == [ids[0], ids[2]]  # the page is not cut short
    assert ids[1] in s.quarantined()
    s.close()


@pytest.mark.parametrize(
    "attack",
    [
        "DELETE FROM changes WHERE seq=2",
        "UPDATE changes SET hlc=hlc+1 WHERE seq=1",
        "UPDATE changes SET seq=seq+10 WHERE seq=1",
        "UPDATE store_meta SET value='1 ' || substr(value, 3) WHERE key='chain_head'",
        "DELETE FROM changes WHERE seq=3",  # rollback of the last write: caught by the witness
    ],
)
def test_tampered_change_log_is_refused_on_open(tmp_path: Path, attack: str) -> None:
    _store_with_three(tmp_path)
    raw(tmp_path).execute(attack)
    with pytest.raises(StoreIntegrityError, match="integrity check"):
        open_at(tmp_path)


def test_rollback_to_an_old_copy_is_detected_by_the_witness(tmp_path: Path) -> None:
    s = open_at(tmp_path)
    s.put(rec("one"), hlc=1)
    s.close()
    shutil.copy(tmp_path / "memory.db", tmp_path / "old.db")
    s = open_at(tmp_path)
    s.put(rec("two"), hlc=2)
    s.close()
    for suffix in ("-wal", "-shm"):
        (tmp_path / f"memory.db{suffix}").unlink(missing_ok=True)
    shutil.copy(tmp_path / "old.db", tmp_path / "memory.db")
    with pytest.raises(StoreIntegrityError, match="rolled back"):
        open_at(tmp_path)


def test_store_signed_by_another_node_key_is_refused(tmp_path: Path) -> None:
    _store_with_three(tmp_path)
    with pytest.raises(StoreIntegrityError, match="another node key"):
        SQLiteStore(tmp_path / "memory.db", Keyring(tmp_path / "other-keys"))


def test_second_writer_gets_a_clear_lock_error(tmp_path: Path) -> None:
    s = open_at(tmp_path)
    s.put(rec("first"), hlc=1)
    other = open_at(tmp_path, lock_timeout_s=0.2)
    with s.atomic():
        s.put(rec("holding the lock"), hlc=2)
        with pytest.raises(StoreError, match="locked by another writer"):
            other.put(rec("blocked"), hlc=3)
    other.put(rec("after release"), hlc=4)
    assert s.stats().records == 3
    s.close()
    other.close()


def test_key_files_are_private(tmp_path: Path) -> None:
    s = open_at(tmp_path)
    s.put(rec("x"), hlc=1)
    s.close()
    key = tmp_path / "keys" / "node.ed25519.pem"
    assert key.stat().st_mode & 0o077 == 0


def test_open_walks_only_the_links_after_the_last_verified_open(tmp_path: Path) -> None:
    s = open_at(tmp_path)
    for i in range(5):
        s.put(rec(f"record {i}"), hlc=i + 1)
    s.close()
    s = open_at(tmp_path)  # walks all 5 and marks them
    assert s.verify(incremental=True).walked == 0
    s.put(rec("record 5"), hlc=6)
    again = s.verify(incremental=True)
    assert (again.ok, again.walked, again.checked_changes) == (True, 1, 6)
    assert s.verify().walked == 6  # without the mark: the whole log, as `amcp verify`
    s.close()


@pytest.mark.parametrize(
    "attack",
    [
        "DELETE FROM changes WHERE seq=2",
        "UPDATE changes SET seq=seq+10 WHERE seq=1",
        "UPDATE changes SET hlc=hlc+1 WHERE seq=4",  # after the mark: walked
        "UPDATE changes SET hash='00' WHERE seq=3",  # the marked entry itself: a whole walk
    ],
)
def test_tampering_is_still_refused_on_open_after_a_verified_open(
    tmp_path: Path, attack: str
) -> None:
    _store_with_three(tmp_path)
    open_at(tmp_path).close()  # marks 1..3 verified
    s = open_at(tmp_path)
    s.put(rec("four"), hlc=4)
    s.close()
    db = raw(tmp_path)
    for stmt in attack.split("; "):
        db.execute(stmt)
    db.close()
    with pytest.raises(StoreIntegrityError, match="integrity check"):
        open_at(tmp_path)


@pytest.mark.parametrize(
    "attack",
    ["UPDATE changes SET hlc=hlc+1 WHERE seq=1", "UPDATE changes SET hash='00' WHERE seq=1"],
)
def test_an_edit_inside_the_verified_prefix_is_left_to_the_full_walk(
    tmp_path: Path, attack: str
) -> None:
    """What the incremental open gives up, and where it is caught: an entry before the
    mark edited in place (the marked entry itself unchanged)."""
    _store_with_three(tmp_path)
    open_at(tmp_path).close()
    raw(tmp_path).execute(attack)
    s = open_at(tmp_path)
    report = s.verify()
    assert not report.ok
    assert "change 1" in report.problems[0] or "change 2" in report.problems[0]
    s.close()


@pytest.mark.parametrize("content", ["", "garbage", "3 "])
def test_an_unreadable_verified_mark_means_a_whole_walk(tmp_path: Path, content: str) -> None:
    """The mark only saves work: a write cut short must not make the store unopenable."""
    _store_with_three(tmp_path)
    s = open_at(tmp_path)  # marks 1..3
    store_id = s.store_id
    s.close()
    mark = s.keyring.witness_dirs[0] / f"{store_id}.verified"
    assert mark.exists()
    mark.write_text(content)
    s = open_at(tmp_path)
    assert s.verify(incremental=True).walked == 0  # the open walked all 3 and wrote it again
    s.close()
