"""The batch dedup read on SQLite: its query plan, and a tampered first copy."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.store.records import rec

from amcp.keyring import Keyring
from amcp.store import samecontent
from amcp.store.sqlite import SQLiteStore


def test_sqlite_takes_the_content_key_index(tmp_path: Path) -> None:
    """Without statistics SQLite chose the lifecycle index from four keys on and walked every
    active record for each write batch; ``+lifecycle`` keeps it on the content-key index."""
    store = SQLiteStore(tmp_path / "m.db", Keyring(tmp_path / "keys"))
    try:
        for keys in (1, 4, 16, samecontent.CHUNK):
            sql = samecontent.select_sql(keys, sqlite=True)
            with sqlite3.connect(tmp_path / "m.db") as db:
                plan = " ".join(str(r[-1]) for r in db.execute(
                    "EXPLAIN QUERY PLAN " + sql, ["k"] * keys))
            assert "records_content" in plan and "records_lifecycle" not in plan, plan
    finally:
        store.close()


def test_a_tampered_oldest_copy_is_passed_over(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "m.db", Keyring(tmp_path / "keys"))
    try:
        first, second = rec("the same fact"), rec("the same fact", ts=1_800_000_000)
        store.put(first, hlc=1)
        store.put(second, hlc=2)
        with sqlite3.connect(tmp_path / "m.db") as db:  # edited outside amcp
            db.execute("UPDATE records SET weight = 0.99 WHERE knowledge_id=?",
                       (first.knowledge_id,))
        got = store.find_same_content_many([rec("the same fact", ts=5), rec("other")])
        assert got[0] is not None and got[0].knowledge_id == second.knowledge_id
        assert got[1] is None
        assert first.knowledge_id in store.quarantined()
    finally:
        store.close()
