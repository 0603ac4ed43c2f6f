"""The change log of ``SQLiteStore`` as written: its transactions, appending hash-chained
entries, signing and witnessing the head (see ``chain.py`` for the hashes).

Every write is one transaction (``atomic`` nests, like sqlite-utils), and the outermost
commit signs the head when anything moved it: the log, the rows' set digest (``rowseal``)
or the census (``sqlite_census``). The log as read is ``sqlite_feed``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from amcp.amf.canonical import canonical_packb
from amcp.amf.ids import public_key_text
from amcp.errors import StoreError
from amcp.keyring import Keyring, Witness
from amcp.store.base import ChangeOp
from amcp.store.chain import (
    EMPTY_HEAD,
    GENESIS,
    Head,
    link_hash,
    sign_head,
    trusted_head,
)
from amcp.store.headtext import MAC_PURPOSE
from amcp.store.rowseal import MODULUS, as_int
from amcp.store.sqlite_conn import SQLiteConn

log = logging.getLogger(__name__)


class ChangeLog:
    """The write side of the log: transactions, appends, the signed head, witnesses."""

    def __init__(self, conn: SQLiteConn, keyring: Keyring) -> None:
        self.conn = conn
        self.keyring = keyring
        self.store_id = ""  # set by ``ensure_store_id`` when the store opens
        self._depth = 0
        # Set by every append; the outermost commit signs and witnesses the head when it is.
        self._dirty_head = False
        # Rows added and the change of the rows' set digest in the open transaction
        # (rowseal): the outermost commit adds them to the signed head.
        self._head_delta = (0, 0)
        # The census counts (``sqlite_census``) moved by the open transaction.
        self._census_delta: dict[str, int] = {}

    # ------------------------------------------------------------------ transactions

    @contextmanager
    def atomic(self) -> Iterator[None]:
        conn = self.conn
        db = conn.db
        with conn.lock:
            outermost = self._depth == 0
            try:
                if outermost:
                    db.execute("BEGIN IMMEDIATE")
                else:
                    db.execute(f"SAVEPOINT sp{self._depth}")
            except sqlite3.OperationalError as exc:
                raise StoreError(f"store is locked by another writer ({exc})") from exc
            self._depth += 1
            # What a rolled-back savepoint must give back.
            delta, census = self._head_delta, dict(self._census_delta)
            try:
                yield
            except BaseException:
                self._depth -= 1
                if outermost:
                    self._rollback()
                else:
                    db.execute(f"ROLLBACK TO sp{self._depth}")
                    db.execute(f"RELEASE sp{self._depth}")
                    self._head_delta, self._census_delta = delta, census
                raise
            self._depth -= 1
            if not outermost:
                db.execute(f"RELEASE sp{self._depth}")
                return
            self._commit()

    def _commit(self) -> None:
        """Sign the head and COMMIT; on any failure roll back, so the connection is never
        left inside BEGIN IMMEDIATE (where the next write would report "locked")."""
        dirty = self._dirty_head
        try:
            if dirty:
                self._sign_head()
            self.conn.db.execute("COMMIT")
        except BaseException as exc:
            self._rollback()
            if isinstance(exc, sqlite3.Error):
                raise StoreError(f"the write was not committed: {exc}") from exc
            raise
        if dirty:
            self._dirty_head = False
            self._write_witness()

    def _rollback(self) -> None:
        self.forget_deltas()
        db = self.conn.db
        if db.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")

    def forget_deltas(self) -> None:
        """Drop what the open transaction would add to the head (a rollback, or a writer
        that stored a whole new head itself: the seal backfill)."""
        self._dirty_head = False
        self._head_delta = (0, 0)
        self._census_delta = {}

    # ------------------------------------------------------------------ appends

    def last_change(self) -> tuple[int, str]:
        row = self.conn.db.execute(
            "SELECT seq, hash FROM changes ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        return (row[0], row[1]) if row else (0, GENESIS)

    def append(self, op: ChangeOp, knowledge_id: str, hlc: int, details: dict[str, Any]) -> int:
        """Append one change (inside a write transaction); its seq."""
        seq, prev = self.last_change()
        seq += 1
        blob = canonical_packb(details)
        digest = link_hash(prev, seq, hlc, op.value, knowledge_id, details)
        self.conn.db.execute(
            "INSERT INTO changes(seq, hlc, op, knowledge_id, details, hash) VALUES (?,?,?,?,?,?)",
            (seq, hlc, op.value, knowledge_id, blob, digest),
        )
        self._dirty_head = True
        return seq

    def moved(self) -> None:
        """Say the head this transaction commits must be signed again (changes appended in
        bulk, or only the census moved)."""
        self._dirty_head = True

    def resealed(self, old: bytes | None, new: bytes | None, rows: int = 0) -> None:
        """Account for one row's seal changing from ``old`` to ``new`` (None: no row), in
        the head this transaction will sign."""
        count, digest = self._head_delta
        self._head_delta = (count + rows, (digest + as_int(new) - as_int(old)) % MODULUS)

    def count(self, key: str, n: int = 1) -> None:
        """Move one census count of the head this transaction will sign."""
        if n:
            self._census_delta[key] = self._census_delta.get(key, 0) + n

    # ------------------------------------------------------------------ the signed head

    def signed_head(self) -> Head:
        """The head as last signed (verified), read inside the caller's snapshot; the empty
        head for a store that has none yet. StoreIntegrityError if it does not verify."""
        return trusted_head(
            self.keyring.signing_key.public_key(), self.store_id, self.conn.get_meta("chain_head")
        )

    def _sign_head(self) -> None:
        """Sign the new head: the last change, and the signed row count and digest moved by
        what this transaction did. Called inside the outermost transaction, so the previous
        head it builds on is the one this transaction's snapshot holds (writers serialise)."""
        seq, chain = self.last_change()
        rows, digest = self._head_delta
        head = self.signed_head().moved(seq, chain, rows, digest, self._census_delta)
        # Still inside the outermost transaction (depth already unwound): write directly.
        self.store_head(head)
        self.remember_places()
        self._head_delta = (0, 0)
        self._census_delta = {}

    def store_head(self, head: Head) -> None:
        """Write ``head`` signed and MAC'd (``headtext``); inside a write transaction."""
        mac_key = self.keyring.derive(MAC_PURPOSE)
        self.conn.upsert_meta(
            "chain_head", sign_head(self.keyring.signing_key, mac_key, self.store_id, head)
        )

    def ensure_store_id(self) -> str:
        """The store's id, created with its first signed head and witness under the write
        lock: of several processes creating one store, the first makes them, the others
        read them (a check before the lock is only a shortcut)."""
        existing = self.conn.get_meta("store_id")
        if existing:
            self.store_id = existing
            return existing
        with self.atomic():
            existing = self.conn.get_meta("store_id")
            if existing:
                self.store_id = existing
                return existing
            self.store_id = uuid.uuid4().hex
            self.conn.upsert_meta("store_id", self.store_id)
            self.conn.upsert_meta(
                "node_key", public_key_text(self.keyring.signing_key.public_key())
            )
            self.store_head(EMPTY_HEAD)
            # The empty head is witnessed before the commit that says it is, so no reader
            # ever finds a store that claims a witness which does not exist yet.
            self.keyring.write_witness(self.store_id, Witness(0, GENESIS))
            self.remember_places()
            self.conn.upsert_meta("witnessed", "1")
        return self.store_id

    # ------------------------------------------------------------------ witnesses

    def witness_places(self) -> list[Path]:
        """Where this store's head is witnessed: the keyring's directories and every one
        the store remembers having been witnessed in (``store_meta.witness_places``).

        A process started with another environment (an agent that spawns ``amcp mcp`` with
        a trimmed one, so another XDG state directory) still finds the witness. The list is
        unsigned, and safe so: a rollback is caught when *any* place has seen a later head,
        and the keyring's own places are always read, so removing or adding entries cannot
        hide a witness; at worst a removed entry makes the witness look missing (refused)."""
        text = self.conn.get_meta("witness_places")
        try:
            remembered = [Path(p) for p in json.loads(text)] if text else []
        except (ValueError, TypeError):
            remembered = []
        return self.keyring.places(remembered)

    def remember_places(self) -> None:
        """Add the keyring's witness directories to the remembered ones; call inside a
        write transaction (``_sign_head`` does)."""
        places = [str(p) for p in self.witness_places()]
        if self.conn.get_meta("witness_places") != json.dumps(places):
            self.conn.upsert_meta("witness_places", json.dumps(places))

    def _write_witness(self) -> None:
        """Tell the witnesses about the committed head. Never fails the write it follows:
        the write is committed, and a witness that lags only weakens rollback detection for
        the latest commits (docs/store.md)."""
        try:
            seq, head = self.last_change()
            self.keyring.write_witness(self.store_id, Witness(seq, head), self.witness_places())
        except (OSError, sqlite3.Error) as exc:
            log.warning("could not update the witness of store %s: %s", self.store_id, exc)

    def rewitness(self) -> None:
        """Witness the current head in this keyring's places (``amcp verify --rewitness``,
        after a deliberate move to another machine or user)."""
        with self.atomic():
            self.remember_places()
        seq, head = self.last_change()
        self.keyring.write_witness(self.store_id, Witness(seq, head), self.witness_places())
