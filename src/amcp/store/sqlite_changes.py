"""The change log of ``SQLiteStore``: appending hash-chained entries, signing and witnessing
the head, and reading the feed sync consumes (a mixin; see ``chain.py`` for the hashes)."""

from __future__ import annotations

import sqlite3
import threading
from typing import Any

import msgpack

from amcp.amf.canonical import canonical_packb
from amcp.keyring import Keyring, Witness
from amcp.store.base import Change, ChangeOp
from amcp.store.chain import GENESIS, link_hash, sign_head


class ChangeLog:
    _db: sqlite3.Connection
    _lock: threading.RLock
    keyring: Keyring
    store_id: str
    # Set by every append; the outermost commit signs and witnesses the head when it is.
    _dirty_head: bool

    def _upsert_meta(self, key: str, value: str) -> None:  # provided by SQLiteStore
        raise NotImplementedError

    def _last_change(self) -> tuple[int, str]:
        row = self._db.execute("SELECT seq, hash FROM changes ORDER BY seq DESC LIMIT 1").fetchone()
        return (row[0], row[1]) if row else (0, GENESIS)

    def _append_change(
        self, op: ChangeOp, knowledge_id: str, hlc: int, details: dict[str, Any]
    ) -> int:
        seq, prev = self._last_change()
        seq += 1
        blob = canonical_packb(details)
        digest = link_hash(prev, seq, hlc, op.value, knowledge_id, details)
        self._db.execute(
            "INSERT INTO changes(seq, hlc, op, knowledge_id, details, hash) VALUES (?,?,?,?,?,?)",
            (seq, hlc, op.value, knowledge_id, blob, digest),
        )
        self._dirty_head = True
        return seq

    def _sign_head(self) -> None:
        seq, head = self._last_change()
        sig = sign_head(self.keyring.signing_key, self.store_id, seq, head)
        # Still inside the outermost transaction (depth already unwound): write directly.
        self._upsert_meta("chain_head", f"{seq} {head} {sig}")

    def _write_witness(self) -> None:
        seq, head = self._last_change()
        self.keyring.write_witness(self.store_id, Witness(seq, head))

    def changes(self, since_hlc: int = 0, limit: int = 1000) -> list[Change]:
        with self._lock:
            rows = self._db.execute(
                "SELECT seq, hlc, op, knowledge_id, details, hash FROM changes "
                "WHERE hlc > ? ORDER BY hlc, seq LIMIT ?",
                (since_hlc, limit),
            ).fetchall()
        return [
            Change(seq, hlc, ChangeOp(op), kid, msgpack.unpackb(d, raw=False), h)
            for seq, hlc, op, kid, d, h in rows
        ]

    def changes_of(self, knowledge_id: str, limit: int = 200) -> list[Change]:
        """The log entries naming one record, oldest first (the ``changes_kid`` index):
        what the web inspector shows as the entries that vouch for a record."""
        with self._lock:
            rows = self._db.execute(
                "SELECT seq, hlc, op, knowledge_id, details, hash FROM changes "
                "WHERE knowledge_id=? ORDER BY seq LIMIT ?",
                (knowledge_id, limit),
            ).fetchall()
        return [
            Change(seq, hlc, ChangeOp(op), kid, msgpack.unpackb(d, raw=False), h)
            for seq, hlc, op, kid, d, h in rows
        ]

    def max_hlc(self) -> int:
        with self._lock:
            row = self._db.execute("SELECT MAX(hlc) FROM changes").fetchone()
        return int(row[0] or 0)
