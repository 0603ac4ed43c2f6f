"""The change log of ``SQLiteStore`` as read: sync's feed (``changes``) and the
``ChangeFeed`` capability a derived index (the vector index) follows by sequence."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import msgpack

from amcp.store.base import Change, ChangeOp
from amcp.store.sqlite_conn import SQLiteConn


class SQLiteFeed:
    """Reads of the ``changes`` table, each under the connection's lock."""

    def __init__(self, conn: SQLiteConn, store_id: str) -> None:
        self._db = conn.db
        self._lock = conn.lock
        self.store_id = store_id

    def changes(self, since_hlc: int = 0, limit: int = 1000) -> list[Change]:
        return self._read("hlc > ? ORDER BY hlc, seq", since_hlc, limit)

    def changes_of(self, knowledge_id: str, limit: int = 200) -> list[Change]:
        """The log entries naming one record, oldest first (the ``changes_kid`` index):
        what the web inspector shows as the entries that vouch for a record."""
        return self._read("knowledge_id=? ORDER BY seq", knowledge_id, limit)

    def _read(self, where: str, key: object, limit: int) -> list[Change]:
        """``where`` is one of this class's literals, never caller text."""
        with self._lock:
            rows = self._db.execute(
                f"SELECT seq, hlc, op, knowledge_id, details, hash FROM changes WHERE {where} "
                "LIMIT ?",
                (key, limit),
            ).fetchall()
        return [
            Change(seq, hlc, ChangeOp(op), kid, msgpack.unpackb(d, raw=False), h)
            for seq, hlc, op, kid, d, h in rows
        ]

    def max_hlc(self) -> int:
        with self._lock:
            row = self._db.execute("SELECT MAX(hlc) FROM changes").fetchone()
        return int(row[0] or 0)

    def change_head(self) -> tuple[int, str]:
        """Sequence number and chain hash of the newest change ((0, "") for none)."""
        with self._lock:
            row = self._db.execute(
                "SELECT seq, hash FROM changes ORDER BY seq DESC LIMIT 1"
            ).fetchone()
        return (int(row[0]), str(row[1])) if row else (0, "")

    def change_hash(self, seq: int) -> str | None:
        with self._lock:
            row = self._db.execute(
                "SELECT hash FROM changes WHERE seq=?", (seq,)
            ).fetchone()
        return str(row[0]) if row else None

    def changed_vectors(
        self, after_seq: int, upto_seq: int
    ) -> list[tuple[int, bool, bytes | None]]:
        """``(rowid, active, vector)`` of every record changed in ``(after_seq, upto_seq]``,
        as it stands now: what a vector index must upsert (active with a vector) or drop."""
        with self._lock:
            rows = self._db.execute(
                "SELECT r.rowid, r.lifecycle = 'active', v.vec FROM "
                "(SELECT DISTINCT knowledge_id FROM changes WHERE seq > ? AND seq <= ?) c "
                "JOIN records r ON r.knowledge_id = c.knowledge_id "
                "LEFT JOIN vectors v ON v.rowid = r.rowid",
                (after_seq, upto_seq),
            ).fetchall()
        return [(int(r), bool(a), v) for r, a, v in rows]

    @contextmanager
    def quiescent(self) -> Iterator[bool]:
        """Hold off this store's writers; yields False if a transaction is open in this
        thread (its changes are not committed, so nothing may be derived from them)."""
        with self._lock:
            yield not self._db.in_transaction
