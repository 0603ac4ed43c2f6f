"""The PostgreSQL store's change log: hash-chained appends, the signed head and its
witnesses, and the feed readers consume (``chain.py`` has the hashes, ``headtext.py`` the
head's text; both are shared with the SQLite adapter).

What one write transaction moves in the head it signs at commit — rows added, the change of
the rows' set digest (``rowseal``), census counts — is kept in a ``HeadDelta``, which a
rolled-back savepoint restores. Appends happen under the store's advisory lock
(``locks``), so the previous link and the previous head read here are the newest committed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import msgpack

from amcp.amf.canonical import canonical_packb
from amcp.errors import StoreError
from amcp.keyring import Keyring, Witness
from amcp.store.base import Change, ChangeOp
from amcp.store.chain import (
    GENESIS,
    Head,
    link_hash,
    sign_head,
    trusted_head,
)
from amcp.store.headtext import MAC_PURPOSE
from amcp.store.postgres.database import Connection, Database, get_meta, insert_rows, put_meta
from amcp.store.rowseal import MODULUS, as_int

log = logging.getLogger(__name__)

# The head of a (multi-row) insert of changes (``database.insert_rows``).
INSERT_CHANGE = "INSERT INTO changes(seq, hlc, op, knowledge_id, details, hash) VALUES "


# What a write transaction reads first, in the round trip of BEGIN and the lock: the log's
# last (seq, hash), the largest row id, the signed head and the remembered witness places.
TIP_SQL = (
    "SELECT (SELECT seq FROM changes ORDER BY seq DESC LIMIT 1), "
    "(SELECT hash FROM changes ORDER BY seq DESC LIMIT 1), "
    "(SELECT MAX(rowid) FROM records), "
    "(SELECT value FROM store_meta WHERE key = 'chain_head'), "
    "(SELECT value FROM store_meta WHERE key = 'witness_places')"
)

_Tip = tuple[int, str, int]  # last seq, its hash, the largest row id
_Mark = tuple[bool, int, int, dict[str, int], _Tip | None]


class HeadDelta:
    """The open write transaction's view of the log: its tip (last seq and hash, largest
    row id) as it moves, and what it moves in the signed head (rows, set digest, census).
    A rolled-back savepoint restores all of it (``mark``/``restore``).

    The tip is read lazily (``begin`` takes a function that fetches ``TIP_SQL``'s row): a
    pipelined transaction queues BEGIN, the lock and that query, and they travel with its
    first read (``put_many``'s id check), one round trip for all of it."""

    __slots__ = (
        "_fetch",
        "_head_text",
        "_places_text",
        "_start",
        "_tip",
        "census",
        "digest",
        "dirty",
        "rows",
    )

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.dirty = False
        self.rows = 0
        self.digest = 0
        self.census: dict[str, int] = {}
        self._fetch: Callable[[], Sequence[Any] | None] | None = None
        self._start: _Tip = (0, GENESIS, 0)
        self._tip: _Tip = self._start
        self._head_text: str | None = None
        self._places_text: str | None = None

    def begin(self, fetch: Callable[[], Sequence[Any] | None]) -> None:
        """Start from ``TIP_SQL``'s row, which ``fetch`` returns when first needed."""
        self.reset()
        self._fetch = fetch

    def _resolved(self) -> None:
        fetch, self._fetch = self._fetch, None
        if fetch is None:
            return
        row = fetch()
        if row is not None:
            seq, digest, top, self._head_text, self._places_text = row
            last = (int(seq), str(digest)) if seq is not None else (0, GENESIS)
            self._start = self._tip = (*last, int(top or 0))

    @property
    def tip(self) -> _Tip:
        """(last seq, its hash, largest row id) as this transaction has moved them."""
        self._resolved()
        return self._tip

    @tip.setter
    def tip(self, value: _Tip) -> None:
        self._resolved()
        self._tip = value

    @property
    def seq(self) -> int:
        return self.tip[0]

    @property
    def hash(self) -> str:
        return self.tip[1]

    @property
    def head_text(self) -> str | None:
        """The signed head as it stood when this transaction took the lock."""
        self._resolved()
        return self._head_text

    @property
    def places_text(self) -> str | None:
        self._resolved()
        return self._places_text

    def mark(self) -> _Mark:
        """What ``restore`` goes back to; does not fetch the tip (a savepoint opened before
        it was read restores it to the tip as read)."""
        tip = None if self._fetch is not None else self._tip
        return (self.dirty, self.rows, self.digest, dict(self.census), tip)

    def restore(self, mark: _Mark) -> None:
        self.dirty, self.rows, self.digest, census, tip = mark
        self.census = dict(census)
        if self._fetch is None:
            self._tip = self._start if tip is None else tip

    def resealed(self, old: bytes | None, new: bytes | None, rows: int = 0) -> None:
        """One row's seal changed from ``old`` to ``new`` (None: no row)."""
        self.rows += rows
        self.digest = (self.digest + as_int(new) - as_int(old)) % MODULUS
        self.dirty = True

    def count(self, key: str, n: int = 1) -> None:
        if n:
            self.census[key] = self.census.get(key, 0) + n
            self.dirty = True

    def next_rowid(self) -> int:
        seq, digest, top = self.tip
        self._tip = (seq, digest, top + 1)
        return top + 1


class ChangeLog:
    """Appends, the signed head, witnesses and the change feed of one store."""

    def __init__(self, db: Database, keyring: Keyring) -> None:
        self._db = db
        self.keyring = keyring
        self.store_id = ""  # set once the store's id is known (PostgresStore)
        self.delta = HeadDelta()

    # -- appends (inside the write transaction) -------------------------------------------

    @staticmethod
    def last(conn: Connection) -> tuple[int, str]:
        row = conn.execute("SELECT seq, hash FROM changes ORDER BY seq DESC LIMIT 1").fetchone()
        return (int(row[0]), str(row[1])) if row else (0, GENESIS)

    def append(
        self, conn: Connection, op: ChangeOp, knowledge_id: str, hlc: int, details: dict[str, Any]
    ) -> int:
        d = self.delta
        last, prev, top = d.tip
        seq = last + 1
        digest = link_hash(prev, seq, hlc, op.value, knowledge_id, details)
        insert_rows(conn, INSERT_CHANGE,
                    [(seq, hlc, op.value, knowledge_id, canonical_packb(details), digest)])
        d.tip, d.dirty = (seq, digest, top), True
        return seq

    def signed_head(self, conn: Connection) -> Head:
        """The head as last signed (verified); the empty head for a store without one."""
        return self._head_of(get_meta(conn, "chain_head"))

    def sign(self, conn: Connection) -> tuple[int, str, list[Path]]:
        """Sign the head this transaction moved (call last inside the outermost one), from
        the tip it read under the lock; what to witness after the commit."""
        d = self.delta
        head = self._head_of(d.head_text).moved(d.seq, d.hash, d.rows, d.digest, d.census)
        self.store_head(conn, head)
        places = self.keyring.places(_remembered(d.places_text))
        text = json.dumps([str(p) for p in places])
        if text != d.places_text:
            put_meta(conn, "witness_places", text)
        return d.seq, d.hash, places

    def _head_of(self, text: str | None) -> Head:
        return trusted_head(self.keyring.signing_key.public_key(), self.store_id, text)

    def store_head(self, conn: Connection, head: Head) -> None:
        mac_key = self.keyring.derive(MAC_PURPOSE)
        put_meta(conn, "chain_head",
                 sign_head(self.keyring.signing_key, mac_key, self.store_id, head))

    # -- witnesses ------------------------------------------------------------------------

    def witness_places(self, conn: Connection | None = None) -> list[Path]:
        """The keyring's witness directories and those the store remembers (see
        ``sqlite_changes.ChangeLog.witness_places`` for why an unsigned list is safe)."""
        if conn is None:
            with self._db.read() as c:
                text = get_meta(c, "witness_places")
        else:
            text = get_meta(conn, "witness_places")
        return self.keyring.places(_remembered(text))

    def remember_places(self, conn: Connection) -> None:
        places = json.dumps([str(p) for p in self.witness_places(conn)])
        if get_meta(conn, "witness_places") != places:
            put_meta(conn, "witness_places", places)

    def write_witness(self, seq: int, head: str, places: list[Path] | None = None) -> None:
        """Tell the witnesses about a committed head; never fails the write it follows.
        Another process may have committed (and witnessed) a later head meanwhile: a
        witness is only moved forward, so it never lags behind what this process saw."""
        try:
            places = places if places is not None else self.witness_places()
            seen = self.keyring.read_witnesses(self.store_id, places)
            if any(w is not None and w.seq >= seq for _p, w in seen):
                return  # a peer process committed and witnessed a later head already
            self.keyring.write_witness(self.store_id, Witness(seq, head), places)
        except (OSError, StoreError) as exc:
            log.warning("could not update the witness of store %s: %s", self.store_id, exc)

    # -- the feed -------------------------------------------------------------------------

    def changes(self, since_hlc: int = 0, limit: int = 1000) -> list[Change]:
        return self._read("hlc > %s ORDER BY hlc, seq", since_hlc, limit)

    def changes_of(self, knowledge_id: str, limit: int = 200) -> list[Change]:
        return self._read("knowledge_id = %s ORDER BY seq", knowledge_id, limit)

    def _read(self, where: str, key: object, limit: int) -> list[Change]:
        """``where`` is one of this class's literals, never caller text."""
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT seq, hlc, op, knowledge_id, details, hash FROM changes WHERE {where} "
                "LIMIT %s",
                (key, limit),
            ).fetchall()
        return [
            Change(int(seq), int(hlc), ChangeOp(op), kid, msgpack.unpackb(d, raw=False), h)
            for seq, hlc, op, kid, d, h in rows
        ]

    def max_hlc(self) -> int:
        with self._db.read() as conn:
            row = conn.execute("SELECT MAX(hlc) FROM changes").fetchone()
        return int(row[0] or 0) if row else 0

    def change_head(self) -> tuple[int, str]:
        """Sequence number and chain hash of the newest change ((0, "") for none)."""
        with self._db.read() as conn:
            seq, digest = self.last(conn)
        return (seq, digest) if seq else (0, "")

    def change_hash(self, seq: int) -> str | None:
        with self._db.read() as conn:
            row = conn.execute("SELECT hash FROM changes WHERE seq=%s", (seq,)).fetchone()
        return str(row[0]) if row else None

    def changed_vectors(
        self, after_seq: int, upto_seq: int
    ) -> list[tuple[int, bool, bytes | None]]:
        """``(rowid, active, vector)`` of every record changed in ``(after_seq, upto_seq]``,
        as it stands now (float32 bytes, as the SQLite adapter hands them out)."""
        import numpy as np

        with self._db.read() as conn, conn.cursor(binary=True) as cur:
            rows = cur.execute(
                "SELECT r.rowid, r.lifecycle = 'active', v.vec FROM "
                "(SELECT DISTINCT knowledge_id FROM changes WHERE seq > %s AND seq <= %s) c "
                "JOIN records r ON r.knowledge_id = c.knowledge_id "
                "LEFT JOIN vectors v ON v.rowid = r.rowid",
                (after_seq, upto_seq),
            ).fetchall()
        return [
            (int(r), bool(a), None if v is None else v.to_numpy().astype(np.float32).tobytes())
            for r, a, v in rows
        ]

    def quiescent(self) -> AbstractContextManager[bool]:
        """Held while no write of this process runs (writers of other processes go on:
        what is derived from the feed reads by seq, so a later commit is only newer)."""
        return self._db.quiet()

    def write_changes(self, conn: Connection, rows: Sequence[tuple[Any, ...]]) -> None:
        """Insert pre-chained changes (``put_many``'s batch)."""
        if rows:
            insert_rows(conn, INSERT_CHANGE, rows)
            self.delta.dirty = True


def _remembered(text: str | None) -> list[Path]:
    try:
        return [Path(p) for p in json.loads(text)] if text else []
    except (ValueError, TypeError):
        return []
