"""The SQLite store's integrity check: ``store.audit``'s rules over this file's tables,
in one read snapshot under the store's lock. It reads the raw rows itself: the check must
not go through the read path it is checking.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from amcp.amf.ids import public_key_text
from amcp.keyring import Witness
from amcp.store import audit
from amcp.store.base import IntegrityReport
from amcp.store.chain import GENESIS, Head, walk_links
from amcp.store.rowseal import digest_of
from amcp.store.sqlite_census import census_of
from amcp.store.sqlite_rows import ROW_COLS

if TYPE_CHECKING:
    from amcp.store.sqlite_changes import ChangeLog
    from amcp.store.sqlite_verified import Verifier

_CHANGES_AFTER = (
    "SELECT seq, hlc, op, knowledge_id, details, hash FROM changes WHERE seq > ? ORDER BY seq"
)


@contextlib.contextmanager
def snapshot(db: sqlite3.Connection) -> Iterator[None]:
    """One read transaction: everything read inside sees the same committed state, even
    while another process commits (WAL). Inside a caller's transaction, that one."""
    if db.in_transaction:
        yield
        return
    db.execute("BEGIN")
    try:
        yield
    finally:
        db.execute("COMMIT")


def walk_chain(
    db: sqlite3.Connection, prev: str = GENESIS, seq_seen: int = 0
) -> tuple[str, int, list[str]]:
    """Recompute every link after ``seq_seen`` (whose hash is ``prev``): the last hash and
    seq reached, and what was wrong (empty if the walk reached the end)."""
    return walk_links(db.execute(_CHANGES_AFTER, (seq_seen,)), prev, seq_seen)


class _Reads:
    """``audit.AuditReads`` over the store file, inside the caller's snapshot."""

    def __init__(self, changes: ChangeLog) -> None:
        self._changes = changes
        self._db = changes.conn.db

    def changes_after(self, seq: int) -> Iterable[Sequence[Any]]:
        return self._db.execute(_CHANGES_AFTER, (seq,))

    def hash_at(self, seq: int) -> str | None:
        row = self._db.execute("SELECT hash FROM changes WHERE seq=?", (seq,)).fetchone()
        return str(row[0]) if row is not None else None

    def log_shape(self) -> tuple[int, int | None, int | None]:
        count, low, high = self._db.execute(
            "SELECT COUNT(*), MIN(seq), MAX(seq) FROM changes"
        ).fetchone()
        return int(count), low, high

    def meta(self, key: str) -> str | None:
        return self._changes.conn.get_meta(key)

    def signed_head(self) -> Head:
        return self._changes.signed_head()

    def seal_sum(self) -> tuple[int, int, int]:
        seals = [r[0] for r in self._db.execute("SELECT seal FROM records")]
        return len(seals), digest_of(seals), 0

    def census(self) -> dict[str, int]:
        return census_of(self._db)

    def latest_seqs(self) -> Mapping[str, int]:
        # An id whose latest change is ``evict`` has no row by design (sqlite_tiers.py):
        # SQLite takes the bare ``op`` from the row holding MAX(seq).
        return {kid: seq for kid, seq, op in self._db.execute(
            "SELECT knowledge_id, MAX(seq), op FROM changes GROUP BY knowledge_id"
        ) if op != "evict"}

    def record_rows(self) -> Iterable[Sequence[Any]]:
        return self._db.execute(f"SELECT {ROW_COLS} FROM records r")


def verify_store(
    changes: ChangeLog, verifier: Verifier, *, full: bool = False, since: Witness | None = None
) -> IntegrityReport:
    """The whole check (``store.audit``). ``since`` (not with ``full``): a prefix of the
    log an earlier walk found intact; the walk resumes after it when it can."""
    seen = changes.keyring.read_witnesses(changes.store_id, changes.witness_places())
    node_key = public_key_text(changes.keyring.signing_key.public_key())
    with changes.conn.lock, snapshot(changes.conn.db):
        return audit.audit(_Reads(changes), verifier, node_key=node_key, seen=seen,
                           full=full, since=since)


def verify_since_mark(changes: ChangeLog, verifier: Verifier) -> IntegrityReport:
    """``verify_store`` resuming after the last incremental check's mark
    (``audit.since_mark``)."""
    return audit.since_mark(changes.keyring, changes.store_id,
                            lambda since: verify_store(changes, verifier, since=since))
