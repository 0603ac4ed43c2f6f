"""The store's integrity check: the change-log hash chain, its signed head (with the row
count and set digest), the witnesses outside the store, and — when the rows do not add up,
or in full mode — which records are damaged.

It takes the store's change log (connection, keyring, witnesses) and its ``Verifier``, and
reads the raw rows itself: the check must not go through the read path it is checking.

What is damage to the *log* (the store refuses to open: nothing it says can be trusted) and
what is damage to *records* (those records are quarantined, the rest is served):

- log: an altered, deleted or reordered change; a head that does not verify or does not end
  the log; another node's key; a witness that has seen a later head (rollback) or another
  history; a missing witness for a store that has been witnessed;
- records: a row whose seal does not verify (edited), a row the log does not know (forged
  insert), a row that is not its record's latest logged state (replayed from an older copy),
  a logged record with no row (deleted), a body that does not match its id, checksum,
  envelope or signature (full mode).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import msgpack

from amcp.amf.ids import public_key_text
from amcp.errors import AmcpError, StoreIntegrityError
from amcp.keyring import Witness
from amcp.store.base import IntegrityReport
from amcp.store.chain import GENESIS, Head, walk_links
from amcp.store.rowseal import DELETED, EDITED, STALE_ROW, UNLOGGED, digest_of
from amcp.store.sqlite_census import census_of, differences
from amcp.store.sqlite_rows import BODY, CHAIN_SEQ, FACTS, KID, ROW_COLS, ROWID, SEAL

if TYPE_CHECKING:
    from amcp.store.sqlite_changes import ChangeLog
    from amcp.store.sqlite_verified import Verifier


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
    rows = db.execute(
        "SELECT seq, hlc, op, knowledge_id, details, hash FROM changes WHERE seq > ? "
        "ORDER BY seq",
        (seq_seen,),
    )
    return walk_links(rows, prev, seq_seen)


def _resume_point(db: sqlite3.Connection, since: Witness | None) -> tuple[str, int]:
    """Where the walk may start: after ``since`` if the log still holds it and is still
    exactly seqs 1..max (a deleted or renumbered entry inside the prefix would otherwise go
    unwalked; one pass over the integer key: 18-29 ms at 100k, measured)."""
    if since is None or since.seq <= 0:
        return GENESIS, 0
    row = db.execute("SELECT hash FROM changes WHERE seq=?", (since.seq,)).fetchone()
    count, low, high = db.execute(
        "SELECT COUNT(*), MIN(seq), MAX(seq) FROM changes"
    ).fetchone()
    if low == 1 and count == high and row is not None and row[0] == since.head:
        return since.head, since.seq
    return GENESIS, 0


def _check_head(changes: ChangeLog, seq_seen: int, prev: str) -> tuple[Head | None, list[str]]:
    key_text = changes.conn.get_meta("node_key")
    if key_text != public_key_text(changes.keyring.signing_key.public_key()):
        return None, ["the store was signed by another node key"]
    try:
        head = changes.signed_head()
    except StoreIntegrityError as exc:
        return None, [str(exc)]
    if (head.seq, head.hash) != (seq_seen, prev):
        return head, ["the change log does not end at its signed head"]
    return head, []


def _check_witnesses(
    changes: ChangeLog, seen: Sequence[tuple[object, Witness | None]], seq_seen: int
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
        row = changes.conn.db.execute(
            "SELECT hash FROM changes WHERE seq=?", (witness.seq,)
        ).fetchone()
        expected = row[0] if row is not None else (GENESIS if witness.seq == 0 else None)
        if expected != witness.head:
            problems.append(f"the change log differs from the history witnessed in {where}")
    if changes.conn.get_meta("witnessed") and all(w is None for _d, w in seen):
        places = ", ".join(str(d) for d, _w in seen)
        problems.append(
            f"the witness of this store is missing from {places} (deleted, or the store was "
            "moved from another user or machine): a rollback cannot be ruled out; if the "
            "move was deliberate, run `amcp verify --rewitness`"
        )
    return problems


def find_damaged(
    db: sqlite3.Connection, verifier: Verifier, *, full: bool = False
) -> dict[str, str]:
    """Which records are damaged, and how (call inside a snapshot, the log verified): every
    row against its seal and against the log's latest entry for its id; every logged id
    against the rows. ``full``: every body against its id, checksum, envelope, signature."""
    latest = dict(
        db.execute("SELECT knowledge_id, MAX(seq) FROM changes GROUP BY knowledge_id")
    )
    damaged: dict[str, str] = {}
    seen: set[str] = set()
    for row in db.execute(f"SELECT {ROW_COLS} FROM records r"):
        kid = row[KID]
        seen.add(kid)
        if not verifier.sealer.check(row[ROWID], row[FACTS], row[BODY], row[SEAL]):
            damaged[kid] = EDITED
        elif kid not in latest:
            damaged[kid] = UNLOGGED
        elif row[CHAIN_SEQ] != latest[kid]:
            damaged[kid] = STALE_ROW
        elif full:
            problem = _body_problem(verifier, row)
            if problem:
                damaged[kid] = problem
    for kid in latest.keys() - seen:
        damaged[kid] = DELETED
    return damaged


def _body_problem(verifier: Verifier, row: Sequence[Any]) -> str | None:
    if row[BODY] is None:
        return None
    try:
        verifier.open_body(row, signature=True)
    except (ValueError, AmcpError, msgpack.UnpackException) as exc:
        return f"its body does not verify: {exc}"
    return None


def verify_store(
    changes: ChangeLog, verifier: Verifier, *, full: bool = False, since: Witness | None = None
) -> IntegrityReport:
    """The whole check (see the module docstring). ``since`` (not with ``full``): a prefix
    of the log an earlier walk found intact; the walk resumes after it when it can."""
    # Before the snapshot: see below.
    seen = changes.keyring.read_witnesses(changes.store_id, changes.witness_places())
    db = changes.conn.db
    with changes.conn.lock, snapshot(db):
        # A witness is written after its commit, so a witness read before the snapshot
        # never names a head the snapshot does not hold: no false rollback alarm while
        # another process writes.
        prev, start = _resume_point(db, since if not full else None)
        prev, seq_seen, problems = walk_chain(db, prev, start)
        head: Head | None = None
        if not problems:
            head, problems = _check_head(changes, seq_seen, prev)
        if not problems:
            problems = _check_witnesses(changes, seen, seq_seen)
        damaged: dict[str, str] = {}
        index_warnings: list[str] = []
        if not problems and head is not None:
            seals = [r[0] for r in db.execute("SELECT seal FROM records")]
            off = differences(dict(head.census), census_of(db))
            if full or off or len(seals) != head.rows or digest_of(seals) != head.digest:
                damaged = find_damaged(db, verifier, full=full)
                if not damaged and len(seals) == head.rows and off:
                    # No row is damaged, yet the index rows do not add up: some were added
                    # or deleted behind the node's back, and a record may be left out of
                    # searches. A warning, not a refusal: every served record is verified.
                    index_warnings = [
                        "the store's index rows differ from its signed counts ("
                        + "; ".join(off) + "): records may be missing from searches"
                    ]
                elif not damaged and not full:
                    problems.append("the record rows do not add up to the signed head")
    verifier.set_warnings(index_warnings)
    for kid, reason in damaged.items():
        verifier.quarantine_add(kid, reason)
    return IntegrityReport(
        ok=not problems, checked_changes=seq_seen, problems=tuple(problems),
        head=prev if not problems else "", walked=seq_seen - start,
        damaged=tuple(sorted(damaged.items())), mode="full" if full else "head",
    )


def verify_since_mark(changes: ChangeLog, verifier: Verifier) -> IntegrityReport:
    """``verify_store`` resuming after the last incremental check's mark (kept beside the
    witness), then moving the mark to what it walked.

    The check on open: at 100k changes the whole walk is ~5 s of CPU, paid by every CLI call
    that opens the store. Links appended since the mark (by this node, another process, or an
    edit of the file) are still walked. An edit inside the marked prefix that leaves the
    stored hashes alone is what this skips; ``amcp verify`` walks the whole log."""
    since = changes.keyring.read_verified(changes.store_id)
    report = verify_store(changes, verifier, since=since)
    if report.ok and report.checked_changes and (
        since is None or since.seq != report.checked_changes
    ):
        # A state directory we may not write to costs the next open a whole walk, no more.
        with contextlib.suppress(OSError):
            changes.keyring.write_verified(
                changes.store_id, Witness(report.checked_changes, report.head)
            )
    return report
