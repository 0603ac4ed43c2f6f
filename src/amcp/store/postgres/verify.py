"""The PostgreSQL store's integrity check: the same checks as ``sqlite_verify``, in one
REPEATABLE READ snapshot — the hash chain, the signed head (row count, set digest, census),
the witnesses outside the database, and when the rows do not add up (or in full mode)
which records are damaged. See ``sqlite_verify`` for what refuses the open (damage to the
log) and what quarantines records (damage to rows).

Several processes write one database: the witnesses are read *before* the snapshot, and a
witness is written after its commit, so a witness read first never names a change the
snapshot lacks. A log that a peer process extended past a witness passes (the witness's
seq is at or below the log's end and its hash is the log's hash there).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgpack

from amcp.amf.ids import public_key_text
from amcp.errors import AmcpError, StoreIntegrityError
from amcp.keyring import Keyring, Witness
from amcp.store import sqlite_census as census
from amcp.store.base import IntegrityReport
from amcp.store.chain import GENESIS, Head, walk_links
from amcp.store.postgres.changes import ChangeLog
from amcp.store.postgres.database import Connection, Database, get_meta
from amcp.store.postgres.verified import RowVerifier
from amcp.store.rowseal import DELETED, EDITED, MODULUS, STALE_ROW, UNLOGGED, Sealer
from amcp.store.sqlite_rows import BODY, CHAIN_SEQ, FACTS, KID, ROW_COLS, ROWID, SEAL

_WITNESS_TRIES = 5
_INDEX_TABLES = (
    (census.SCOPES, "record_scopes"), (census.TAGS, "record_tags"),
    (census.LEXICAL, "lexical"), (census.VECTORS, "vectors"),
)


def census_of(conn: Connection) -> dict[str, int]:
    """The census counts as the tables hold them now."""
    counts = {
        census.LIFECYCLE + str(lc): int(n)
        for lc, n in conn.execute("SELECT lifecycle, COUNT(*) FROM records GROUP BY lifecycle")
    }
    row = conn.execute("SELECT COUNT(*) FROM records WHERE expires_at IS NOT NULL").fetchone()
    counts[census.EXPIRING] = int(row[0]) if row else 0
    for key, table in _INDEX_TABLES:
        row = conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()
        counts[key] = int(row[0]) if row else 0
    return {k: v for k, v in counts.items() if v}


class Verifier:
    """``verify`` of one store, over its parts."""

    def __init__(
        self, db: Database, log: ChangeLog, keyring: Keyring, sealer: Sealer, rows: RowVerifier
    ) -> None:
        self._db = db
        self._log = log
        self._keyring = keyring
        self._sealer = sealer
        self._rows = rows

    def since_mark(self) -> IntegrityReport:
        """The check on open: resume the walk after the last intact walk's mark."""
        store_id = self._log.store_id
        since = self._keyring.read_verified(store_id)
        report = self.verify(since=since)
        if report.ok and report.checked_changes and (
            since is None or since.seq != report.checked_changes
        ):
            with contextlib.suppress(OSError):
                self._keyring.write_verified(
                    store_id, Witness(report.checked_changes, report.head)
                )
        return report

    def verify(self, *, full: bool = False, since: Witness | None = None) -> IntegrityReport:
        seen = self._witnesses()
        damaged: dict[str, str] = {}
        warnings: list[str] = []
        with self._db.snapshot() as conn:
            prev, start = _resume_point(conn, since if not full else None)
            prev, seq_seen, problems = _walk(conn, prev, start)
            head: Head | None = None
            if not problems:
                head, problems = self._check_head(conn, seq_seen, prev)
            if not problems:
                problems = _check_witnesses(conn, seen, seq_seen)
            if not problems and head is not None:
                damaged, warnings, problems = self._check_rows(conn, head, full=full)
        self._rows.set_warnings(tuple(warnings))
        for kid, reason in damaged.items():
            self._rows.quarantine(kid, reason)
        return IntegrityReport(
            ok=not problems, checked_changes=seq_seen, problems=tuple(problems),
            head=prev if not problems else "", walked=seq_seen - start,
            damaged=tuple(sorted(damaged.items())), mode="full" if full else "head",
        )

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

    def _check_head(self, conn: Connection, seq: int, prev: str) -> tuple[Head | None, list[str]]:
        if get_meta(conn, "node_key") != public_key_text(self._keyring.signing_key.public_key()):
            return None, ["the store was signed by another node key"]
        try:
            head = self._log.signed_head(conn)
        except StoreIntegrityError as exc:
            return None, [str(exc)]
        if (head.seq, head.hash) != (seq, prev):
            return head, ["the change log does not end at its signed head"]
        return head, []

    def _check_rows(
        self, conn: Connection, head: Head, *, full: bool
    ) -> tuple[dict[str, str], list[str], list[str]]:
        """(damaged records, index warnings, problems) against the signed head."""
        rows, digest, odd = _seal_sum(conn)
        off = census.differences(dict(head.census), census_of(conn))
        if not (full or off or odd or rows != head.rows or digest != head.digest):
            return {}, [], []
        damaged = self._find_damaged(conn, full=full)
        if damaged:
            return damaged, [], []
        if rows == head.rows and off:
            return {}, [
                "the store's index rows differ from its signed counts ("
                + "; ".join(off) + "): records may be missing from searches"
            ], []
        if not full:
            return {}, [], ["the record rows do not add up to the signed head"]
        return {}, [], []

    def _find_damaged(self, conn: Connection, *, full: bool) -> dict[str, str]:
        latest = {
            str(k): int(s)
            for k, s in conn.execute(
                "SELECT knowledge_id, MAX(seq) FROM changes GROUP BY knowledge_id"
            )
        }
        damaged: dict[str, str] = {}
        seen: set[str] = set()
        for row in conn.execute(f"SELECT {ROW_COLS} FROM records r"):
            kid = row[KID]
            seen.add(kid)
            if not self._sealer.check(row[ROWID], row[FACTS], row[BODY], row[SEAL]):
                damaged[kid] = EDITED
            elif kid not in latest:
                damaged[kid] = UNLOGGED
            elif row[CHAIN_SEQ] != latest[kid]:
                damaged[kid] = STALE_ROW
            elif full:
                problem = self._body_problem(row)
                if problem:
                    damaged[kid] = problem
        for kid in latest.keys() - seen:
            damaged[kid] = DELETED
        return damaged

    def _body_problem(self, row: Sequence[Any]) -> str | None:
        if row[BODY] is None:
            return None
        try:
            self._rows.open_body(row, signature=True)
        except (ValueError, AmcpError, msgpack.UnpackException) as exc:
            return f"its body does not verify: {exc}"
        return None


# The set digest summed by the server: each 32-byte seal as eight big-endian 32-bit words,
# each word's column summed exactly (numeric), combined here. At a million rows this moves
# eight numbers instead of 32 MB of seals to Python.
_WORD_SUMS = ", ".join(
    f"SUM(('x' || encode(substring(seal from {4 * i + 1} for 4), 'hex'))::bit(32)::bigint) "
    "FILTER (WHERE length(seal) = 32)"
    for i in range(8)
)
_SEAL_SUM = (
    "SELECT COUNT(*), COUNT(*) FILTER (WHERE seal IS NOT NULL AND length(seal) <> 32), "
    f"{_WORD_SUMS} FROM records"
)


def _seal_sum(conn: Connection) -> tuple[int, int, int]:
    """(rows, set digest of their seals, seals not 32 bytes long). A seal of another length
    never verifies; counting them makes the caller look for the damaged rows."""
    row = conn.execute(_SEAL_SUM).fetchone()
    assert row is not None
    words = row[2:]
    digest = sum(int(w or 0) << (32 * (7 - i)) for i, w in enumerate(words)) % MODULUS
    return int(row[0]), digest, int(row[1])


def _walk(conn: Connection, prev: str, seq_seen: int) -> tuple[str, int, list[str]]:
    cur = conn.execute(
        "SELECT seq, hlc, op, knowledge_id, details, hash FROM changes WHERE seq > %s "
        "ORDER BY seq",
        (seq_seen,),
    )
    return walk_links(cur, prev, seq_seen)


def _resume_point(conn: Connection, since: Witness | None) -> tuple[str, int]:
    """After ``since`` if the log still holds it and is still exactly seqs 1..max."""
    if since is None or since.seq <= 0:
        return GENESIS, 0
    row = conn.execute("SELECT hash FROM changes WHERE seq=%s", (since.seq,)).fetchone()
    stats = conn.execute("SELECT COUNT(*), MIN(seq), MAX(seq) FROM changes").fetchone()
    if stats is not None:
        count, low, high = stats
        if low == 1 and count == high and row is not None and row[0] == since.head:
            return since.head, since.seq
    return GENESIS, 0


def _check_witnesses(
    conn: Connection, seen: Sequence[tuple[object, Witness | None]], seq_seen: int
) -> list[str]:
    problems: list[str] = []
    for where, witness in seen:
        if witness is None:
            continue
        if witness.seq > seq_seen:
            problems.append(
                f"the store was rolled back: the witness in {where} has seen change "
                f"{witness.seq}, the log ends at {seq_seen}"
            )
            continue
        row = conn.execute("SELECT hash FROM changes WHERE seq=%s", (witness.seq,)).fetchone()
        expected = row[0] if row is not None else (GENESIS if witness.seq == 0 else None)
        if expected != witness.head:
            problems.append(f"the change log differs from the history witnessed in {where}")
    if get_meta(conn, "witnessed") and all(w is None for _d, w in seen):
        places = ", ".join(str(d) for d, _w in seen)
        problems.append(
            f"the witness of this store is missing from {places} (deleted, or the store was "
            "moved from another user or machine): a rollback cannot be ruled out; if the "
            "move was deliberate, run `amcp verify --rewitness`"
        )
    return problems
