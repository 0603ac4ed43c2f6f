"""The client's offline queue: writes that could not be delivered, kept in a small SQLite file.

Only idempotent requests are queued — MEMORY_WRITE (content-addressed: a replayed write is
answered 200 "already stored") and MEMORY_INVALIDATE (invalidating twice is 204 twice) — so
replaying after a reconnect can never store anything twice. Entries replay in the order
they were queued.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import msgpack

from amcp.wire import MsgType

QUEUEABLE = frozenset({MsgType.MEMORY_WRITE, MsgType.MEMORY_INVALIDATE})

_SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    msg_type INTEGER NOT NULL,
    payload BLOB NOT NULL,
    queued_at REAL NOT NULL
)
"""


class OfflineQueue:
    """A FIFO of (msg_type, payload) that survives restarts. Single-process use."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")  # a queued write must survive a crash
        self._db.execute(_SCHEMA)

    def put(self, msg_type: MsgType, payload: dict[str, Any]) -> int:
        if msg_type not in QUEUEABLE:
            raise ValueError(f"{msg_type.name} is not idempotent and cannot be queued")
        cur = self._db.execute(
            "INSERT INTO outbox(msg_type, payload, queued_at) VALUES (?, ?, ?)",
            (int(msg_type), msgpack.packb(payload, use_bin_type=True), time.time()),
        )
        assert cur.lastrowid is not None
        return cur.lastrowid

    def peek(self, limit: int = 100) -> list[tuple[int, MsgType, dict[str, Any]]]:
        rows = self._db.execute(
            "SELECT id, msg_type, payload FROM outbox ORDER BY id LIMIT ?", (limit,)
        ).fetchall()
        return [(i, MsgType(t), msgpack.unpackb(p, raw=False)) for i, t, p in rows]

    def remove(self, entry_id: int) -> None:
        self._db.execute("DELETE FROM outbox WHERE id=?", (entry_id,))

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM outbox").fetchone()[0])

    def close(self) -> None:
        self._db.close()
