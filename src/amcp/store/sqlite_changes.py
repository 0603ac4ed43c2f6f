"""The change log of ``SQLiteStore``: appending hash-chained entries, signing and witnessing
the head, and reading the feed sync consumes (a mixin; see ``chain.py`` for the hashes)."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from pathlib import Path
from typing import Any

import msgpack

from amcp.amf.canonical import canonical_packb
from amcp.errors import StoreIntegrityError
from amcp.keyring import Keyring, Witness
from amcp.store.base import Change, ChangeOp
from amcp.store.chain import EMPTY_HEAD, GENESIS, Head, link_hash, read_head, sign_head
from amcp.store.headtext import MAC_PURPOSE
from amcp.store.rowseal import MODULUS, as_int

log = logging.getLogger(__name__)


class ChangeLog:
    _db: sqlite3.Connection
    _lock: threading.RLock
    keyring: Keyring
    store_id: str
    # Set by every append; the outermost commit signs and witnesses the head when it is.
    _dirty_head: bool
    # Rows added and the change of the rows' set digest in the open transaction (rowseal):
    # the outermost commit adds them to the signed head.
    _head_delta: tuple[int, int]
    # The census counts (``sqlite_census``) moved by the open transaction.
    _census_delta: dict[str, int]

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

    def _resealed(self, old: bytes | None, new: bytes | None, rows: int = 0) -> None:
        """Account for one row's seal changing from ``old`` to ``new`` (None: no row), in
        the head this transaction will sign."""
        count, digest = self._head_delta
        self._head_delta = (count + rows, (digest + as_int(new) - as_int(old)) % MODULUS)

    def _count(self, key: str, n: int = 1) -> None:
        """Move one census count of the head this transaction will sign."""
        if n:
            self._census_delta[key] = self._census_delta.get(key, 0) + n

    def signed_head(self) -> Head:
        """The head as last signed (verified), read inside the caller's snapshot; the empty
        head for a store that has none yet. StoreIntegrityError if it does not verify."""
        text = self.get_meta("chain_head")
        if text is None:
            return EMPTY_HEAD
        try:
            return read_head(self.keyring.signing_key.public_key(), self.store_id, text)
        except ValueError as exc:
            raise StoreIntegrityError(f"{exc}: the change log cannot be trusted") from exc

    def get_meta(self, key: str) -> str | None:  # provided by SQLiteStore
        raise NotImplementedError

    def _sign_head(self) -> None:
        """Sign the new head: the last change, and the signed row count and digest moved by
        what this transaction did. Called inside the outermost transaction, so the previous
        head it builds on is the one this transaction's snapshot holds (writers serialise)."""
        seq, chain = self._last_change()
        rows, digest = self._head_delta
        head = self.signed_head().moved(seq, chain, rows, digest, self._census_delta)
        # Still inside the outermost transaction (depth already unwound): write directly.
        self._store_head(head)
        self._remember_places()
        self._head_delta = (0, 0)
        self._census_delta = {}

    def _store_head(self, head: Head) -> None:
        """Write ``head`` signed and MAC'd (``headtext``); inside a write transaction."""
        mac_key = self.keyring.derive(MAC_PURPOSE)
        self._upsert_meta("chain_head",
                          sign_head(self.keyring.signing_key, mac_key, self.store_id, head))

    def witness_places(self) -> list[Path]:
        """Where this store's head is witnessed: the keyring's directories and every one
        the store remembers having been witnessed in (``store_meta.witness_places``).

        A process started with another environment (an agent that spawns ``amcp mcp`` with
        a trimmed one, so another XDG state directory) still finds the witness. The list is
        unsigned, and safe so: a rollback is caught when *any* place has seen a later head,
        and the keyring's own places are always read, so removing or adding entries cannot
        hide a witness; at worst a removed entry makes the witness look missing (refused)."""
        text = self.get_meta("witness_places")
        try:
            remembered = [Path(p) for p in json.loads(text)] if text else []
        except (ValueError, TypeError):
            remembered = []
        return self.keyring.places(remembered)

    def _remember_places(self) -> None:
        """Add the keyring's witness directories to the remembered ones; call inside a
        write transaction (``_sign_head`` does)."""
        places = [str(p) for p in self.witness_places()]
        if self.get_meta("witness_places") != json.dumps(places):
            self._upsert_meta("witness_places", json.dumps(places))

    def _write_witness(self) -> None:
        """Tell the witnesses about the committed head. Never fails the write it follows:
        the write is committed, and a witness that lags only weakens rollback detection for
        the latest commits (docs/store.md)."""
        try:
            seq, head = self._last_change()
            self.keyring.write_witness(self.store_id, Witness(seq, head), self.witness_places())
        except (OSError, sqlite3.Error) as exc:
            log.warning("could not update the witness of store %s: %s", self.store_id, exc)

    def changes(self, since_hlc: int = 0, limit: int = 1000) -> list[Change]:
        return self._read_changes("hlc > ? ORDER BY hlc, seq", since_hlc, limit)

    def changes_of(self, knowledge_id: str, limit: int = 200) -> list[Change]:
        """The log entries naming one record, oldest first (the ``changes_kid`` index):
        what the web inspector shows as the entries that vouch for a record."""
        return self._read_changes("knowledge_id=? ORDER BY seq", knowledge_id, limit)

    def _read_changes(self, where: str, key: object, limit: int) -> list[Change]:
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
