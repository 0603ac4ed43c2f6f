"""The PostgreSQL store's integrity check: ``store.audit``'s rules over this database's
tables, in one REPEATABLE READ snapshot — the same checks as the SQLite adapter's.

Several processes write one database: the witnesses are read *before* the snapshot, and a
witness is written after its commit, so a witness read first never names a change the
snapshot lacks. A log that a peer process extended past a witness passes (the witness's
seq is at or below the log's end and its hash is the log's hash there).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from amcp.amf.ids import public_key_text
from amcp.errors import StoreIntegrityError
from amcp.keyring import Keyring, Witness
from amcp.store import audit
from amcp.store import sqlite_census as census
from amcp.store.base import IntegrityReport
from amcp.store.chain import Head
from amcp.store.postgres.changes import ChangeLog
from amcp.store.postgres.database import Connection, Database, get_meta
from amcp.store.postgres.verified import RowVerifier
from amcp.store.rowseal import MODULUS
from amcp.store.sqlite_rows import ROW_COLS

_WITNESS_TRIES = 5
_LEXICAL_TABLE = "lexical"  # one row per indexed record, as records_fts_docsize in SQLite


class _Reads:
    """``audit.AuditReads`` over one snapshot connection."""

    def __init__(self, conn: Connection, log: ChangeLog) -> None:
        self._conn = conn
        self._log = log

    def changes_after(self, seq: int) -> Iterable[Sequence[Any]]:
        return self._conn.execute(
            "SELECT seq, hlc, op, knowledge_id, details, hash FROM changes WHERE seq > %s "
            "ORDER BY seq", (seq,),
        )

    def hash_at(self, seq: int) -> str | None:
        row = self._conn.execute("SELECT hash FROM changes WHERE seq=%s", (seq,)).fetchone()
        return str(row[0]) if row is not None else None

    def log_shape(self) -> tuple[int, int | None, int | None]:
        row = self._conn.execute("SELECT COUNT(*), MIN(seq), MAX(seq) FROM changes").fetchone()
        assert row is not None
        return int(row[0]), row[1], row[2]

    def meta(self, key: str) -> str | None:
        return get_meta(self._conn, key)

    def signed_head(self) -> Head:
        return self._log.signed_head(self._conn)

    def seal_sum(self) -> tuple[int, int, int]:
        return seal_sum_of(self._conn)

    def census(self) -> dict[str, int]:
        return census.census_of(self._conn, lexical_table=_LEXICAL_TABLE)

    def latest_seqs(self) -> Mapping[str, int]:
        return {
            str(k): int(s) for k, s in self._conn.execute(
                "SELECT knowledge_id, MAX(seq) FROM changes GROUP BY knowledge_id"
            )
        }

    def record_rows(self) -> Iterable[Sequence[Any]]:
        return self._conn.execute(f"SELECT {ROW_COLS} FROM records r")


class Verifier:
    """``verify`` of one store, over its parts."""

    def __init__(self, db: Database, log: ChangeLog, keyring: Keyring, rows: RowVerifier) -> None:
        self._db = db
        self._log = log
        self._keyring = keyring
        self._rows = rows

    def since_mark(self) -> IntegrityReport:
        """The check on open: resume the walk after the last intact walk's mark."""
        return audit.since_mark(self._keyring, self._log.store_id,
                                lambda since: self.verify(since=since))

    def verify(self, *, full: bool = False, since: Witness | None = None) -> IntegrityReport:
        seen = self._witnesses()
        node_key = public_key_text(self._keyring.signing_key.public_key())
        with self._db.snapshot() as conn:
            return audit.audit(_Reads(conn, self._log), self._rows, node_key=node_key,
                               seen=seen, full=full, since=since)

    def _witnesses(self) -> list[tuple[Path, Witness | None]]:
        """Every witness. A peer process may be overwriting one in place as it is read (a
        fixed-width write, but not atomic against a read): a malformed read is tried again
        before it counts, so a peer's commit is never mistaken for tampering."""
        places = self._log.witness_places()
        for attempt in range(_WITNESS_TRIES):
            try:
                return self._keyring.read_witnesses(self._log.store_id, places)
            except StoreIntegrityError:
                if attempt == _WITNESS_TRIES - 1:
                    raise
                time.sleep(0.01)
        raise AssertionError("unreachable")


# The set digest summed by the server (rowseal.digest_of: the sum of the seals as 256-bit
# big-endian integers, mod 2**256). PostgreSQL 18 casts bytea to an integer directly, so
# each 32-byte seal is cut into five words of at most 8 bytes, each cast and its column
# summed exactly (numeric), combined here: two function calls a word where the hex text
# route took five (``'x' || encode(...)``, ``::bit(32)``, ``::bigint``), and five words
# instead of eight. A cast of fewer than 8 bytes reads them as an unsigned integer; an
# 8-byte cast is two's complement, so only the top word may come back negative, and its
# term, a multiple of 2**192, is off by a multiple of 2**256 then: nothing modulo 2**256.
# The scan is the primary key's (migration 5 includes the seal): an index-only scan.
_WORDS = ((1, 8), (9, 7), (16, 7), (23, 7), (30, 3))  # (first byte, length), 1-based
_SHIFTS = tuple(8 * (32 - (first + length - 1)) for first, length in _WORDS)
assert sum(length for _first, length in _WORDS) == 32  # the words tile the seal
_WORD_SUMS = ", ".join(
    f"SUM(substring(seal from {first} for {length})::bigint) FILTER (WHERE length(seal) = 32)"
    for first, length in _WORDS
)
_SEAL_SUM = (
    "SELECT COUNT(*), COUNT(*) FILTER (WHERE seal IS NOT NULL AND length(seal) <> 32), "
    f"{_WORD_SUMS} FROM records"
)


def seal_sum_of(conn: Connection) -> tuple[int, int, int]:
    """(rows, set digest of their seals, seals not 32 bytes long). A seal of another length
    never verifies; counting them makes the caller look for the damaged rows."""
    row = conn.execute(_SEAL_SUM).fetchone()
    assert row is not None
    words = row[2:]
    digest = sum(int(w or 0) << shift for w, shift in zip(words, _SHIFTS, strict=True))
    return int(row[0]), digest % MODULUS, int(row[1])
