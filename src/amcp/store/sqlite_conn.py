"""What the SQLite adapter's parts share: one connection, its lock, and the freshness of
what was read through it.

``SQLiteStore`` opens one ``SQLiteConn`` and hands it to each of its parts (the change log,
the verifying reads, the lexical index, the vectors, the feed, the access statistics, the
raw bodies): none of them reaches into another for the connection.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from amcp.store.walwatch import WalWatch

_FILE_MODE = 0o600  # store files hold memories: readable by their owner only
_DIR_MODE = 0o700
_ROWIDS_KEEP = 65536  # knowledge id -> row id pairs kept (~150 bytes each)


class SQLiteConn:
    """The connection, the re-entrant lock every part takes around it, and the commit
    stamp read caches are keyed by (``fresh``)."""

    def __init__(self, path: Path, db: sqlite3.Connection) -> None:
        self.path = path
        self.db = db
        self.lock = threading.RLock()
        # Set once the store has written (the -shm file and its header exist by then).
        self.wal_watch: WalWatch | None = None
        self._seen: tuple[object, int] = (None, -1)
        self._epoch = 0  # moves when ``fresh`` sees a commit
        self._generation = 0  # ``generation()``: also moves inside our own transactions

    def fresh(self) -> int | None:
        """The epoch the read caches belong to, or None when they may not be used; call
        locked. A cache filled at another epoch is stale: something was committed since.
        A commit by another connection or process moves the wal-index header
        (``walwatch``; else ``PRAGMA data_version``), a write of this one moves
        ``total_changes``. Inside our own transaction nothing may be cached: what it reads
        may still be rolled back."""
        db = self.db
        if db.in_transaction:
            return None
        watch = self.wal_watch
        seen = (
            watch.stamp() if watch is not None
            else db.execute("PRAGMA data_version").fetchone()[0]
        )
        stamp = (seen, db.total_changes)
        if stamp != self._seen:
            self._seen = stamp
            self._epoch += 1
            self._generation += 1
        return self._epoch

    def generation(self) -> int:
        """Moves with every commit, ours or another process's (``fresh``). Inside our own
        transaction it moves on every call: what is read there may still be rolled back,
        so nothing read there can be cached for later."""
        with self.lock:
            if self.fresh() is None:
                self._generation += 1
            return self._generation

    def get_meta(self, key: str) -> str | None:
        with self.lock:
            row = self.db.execute("SELECT value FROM store_meta WHERE key=?", (key,)).fetchone()
        return str(row[0]) if row else None

    def upsert_meta(self, key: str, value: str) -> None:
        """Write one meta value; inside the caller's write transaction."""
        self.db.execute(
            "INSERT INTO store_meta(key, value) VALUES (?,?) "
            "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
            (key, value),
        )

    def close(self) -> None:
        with self.lock:
            if self.wal_watch is not None:
                self.wal_watch.close()
            self.db.close()


class RowidMemo(dict[str, int]):
    """Row ids of knowledge ids read lately, bounded: the vectors' lookups learn them and
    ``raw_bodies`` reads by them (a rowid lookup walks one B-tree; a knowledge-id one walks
    the id index and then the table). A hint only: a row is used only if it still holds
    the id."""

    def learn(self, pairs: Iterable[tuple[int, str]]) -> None:
        if len(self) >= _ROWIDS_KEEP:
            self.clear()
        for rowid, kid in pairs:
            self[kid] = int(rowid)


def open_db(
    path: Path, timeout_s: float, *, quick_check: bool
) -> tuple[sqlite3.Connection, str, str]:
    """Connect, switch to WAL and synchronous=NORMAL: the connection, the journal mode it
    ended in and the integrity answer (``PRAGMA quick_check``'s, or "ok" unchecked).
    Raises sqlite3.DatabaseError for a file that is not a database; the caller says so."""
    from amcp.store.owner import check_ours

    if not path.parent.is_dir():
        path.parent.mkdir(parents=True, exist_ok=True, mode=_DIR_MODE)
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=timeout_s)
    db.execute("PRAGMA foreign_keys=ON")
    check_ours(db, path)  # before the first write: WAL, migrations
    mode = _wal_mode(db, timeout_s)
    # NORMAL in WAL mode survives a killed process (only power loss can lose the last
    # transactions), which is the guarantee the import/ack path promises.
    db.execute("PRAGMA synchronous=NORMAL")
    # quick_check is O(file size) (~70 ms at 10k records): part of the full check on open;
    # a reader that opted out (a per-prompt hook) still gets "not a database" from the
    # first statement and every row's seal checked when it is read.
    ok = (
        db.execute("PRAGMA quick_check").fetchone()[0]
        if quick_check
        else db.execute("PRAGMA schema_version").fetchone() and "ok"
    )
    return db, mode, str(ok)


def restrict(path: Path) -> None:
    """0600 for the store file and its WAL and shared-memory files (those SQLite creates with
    the process umask, 0644 by default), where the file system lets us."""
    for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        with contextlib.suppress(OSError):
            if name.exists() and name.stat().st_mode & 0o077:
                name.chmod(_FILE_MODE)


def _wal_mode(db: sqlite3.Connection, timeout_s: float) -> str:
    """Switch to WAL. Switching a brand-new file needs an exclusive lock, and SQLite does
    not wait on its busy handler for that: several processes creating one store at once
    got "database is locked" here. So the switch is retried until ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return str(db.execute("PRAGMA journal_mode=WAL").fetchone()[0])
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)
