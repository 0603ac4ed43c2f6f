"""The store's integrity check, once for every adapter (store-agnostic).

The change-log hash chain, its signed head (with the row count, set digest and census),
the witnesses outside the store, and — when the rows do not add up, or in full mode —
which records are damaged. An adapter gives ``audit`` its reads inside one snapshot
(``AuditReads``: a few plain queries over its own tables, in its own SQL) and gets the
report; the rules live here, so both adapters refuse and quarantine exactly alike.

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
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import msgpack

from amcp.errors import AmcpError, StoreIntegrityError
from amcp.keyring import Keyring, Witness
from amcp.store.base import IntegrityReport
from amcp.store.chain import GENESIS, Head, walk_links
from amcp.store.rowseal import DELETED, EDITED, STALE_ROW, UNLOGGED
from amcp.store.sqlite_census import differences
from amcp.store.sqlite_rows import BODY, CHAIN_SEQ, FACTS, KID, ROWID, SEAL

if TYPE_CHECKING:
    from amcp.store.sqlite_verified import Verifier

Seen = Sequence[tuple[object, Witness | None]]  # (where, witness there) as keyring reads them


class AuditReads(Protocol):
    """What the check reads of a store, all inside one snapshot."""

    def changes_after(self, seq: int) -> Iterable[Sequence[Any]]:
        """``(seq, hlc, op, knowledge_id, details, hash)`` after ``seq``, in seq order."""
        ...

    def hash_at(self, seq: int) -> str | None: ...

    def log_shape(self) -> tuple[int, int | None, int | None]:
        """COUNT, MIN and MAX of the log's seqs."""
        ...

    def meta(self, key: str) -> str | None: ...

    def signed_head(self) -> Head:
        """The signed head as stored, verified (StoreIntegrityError if it does not)."""
        ...

    def seal_sum(self) -> tuple[int, int, int]:
        """(record rows, set digest of their seals, seals of a malformed length)."""
        ...

    def census(self) -> dict[str, int]: ...

    def latest_seqs(self) -> Mapping[str, int]:
        """Each logged knowledge id's newest seq."""
        ...

    def record_rows(self) -> Iterable[Sequence[Any]]:
        """Every record row as ``sqlite_rows.ROW_COLS`` lays it out."""
        ...


def audit(
    reads: AuditReads, verifier: Verifier, *, node_key: str, seen: Seen, full: bool = False,
    since: Witness | None = None,
) -> IntegrityReport:
    """The whole check over ``reads``; ``seen`` are the witnesses, read *before* the
    snapshot (a witness is written after its commit, so one read first never names a head
    the snapshot lacks: no false rollback alarm while another process writes). ``since``
    (not with ``full``): a prefix an earlier walk found intact, resumed after when it can.
    Damaged records are quarantined and index warnings set on ``verifier``."""
    prev, start = _resume_point(reads, since if not full else None)
    prev, seq_seen, problems = walk_links(reads.changes_after(start), prev, start)
    head: Head | None = None
    if not problems:
        head, problems = _check_head(reads, node_key, seq_seen, prev)
    if not problems:
        problems = _check_witnesses(reads, seen, seq_seen)
    damaged: dict[str, str] = {}
    warnings: list[str] = []
    if not problems and head is not None:
        damaged, warnings, problems = _check_rows(reads, verifier, head, full=full)
    verifier.set_warnings(warnings)
    for kid, reason in damaged.items():
        verifier.quarantine_add(kid, reason)
    return IntegrityReport(
        ok=not problems, checked_changes=seq_seen, problems=tuple(problems),
        head=prev if not problems else "", walked=seq_seen - start,
        damaged=tuple(sorted(damaged.items())), mode="full" if full else "head",
    )


def since_mark(
    keyring: Keyring, store_id: str, check: Callable[[Witness | None], IntegrityReport]
) -> IntegrityReport:
    """``check`` resuming after the last incremental check's mark (kept beside the
    witness), then moving the mark to what it walked.

    The check on open: at 100k changes the whole walk is ~5 s of CPU, paid by every CLI call
    that opens the store. Links appended since the mark (by this node, another process, or an
    edit of the file) are still walked. An edit inside the marked prefix that leaves the
    stored hashes alone is what this skips; ``amcp verify`` walks the whole log."""
    since = keyring.read_verified(store_id)
    report = check(since)
    if report.ok and report.checked_changes and (
        since is None or since.seq != report.checked_changes
    ):
        # A state directory we may not write to costs the next open a whole walk, no more.
        with contextlib.suppress(OSError):
            keyring.write_verified(store_id, Witness(report.checked_changes, report.head))
    return report


def _resume_point(reads: AuditReads, since: Witness | None) -> tuple[str, int]:
    """Where the walk may start: after ``since`` if the log still holds it and is still
    exactly seqs 1..max (a deleted or renumbered entry inside the prefix would otherwise go
    unwalked; one pass over the integer key: 18-29 ms at 100k, measured on SQLite)."""
    if since is None or since.seq <= 0:
        return GENESIS, 0
    count, low, high = reads.log_shape()
    if low == 1 and count == high and reads.hash_at(since.seq) == since.head:
        return since.head, since.seq
    return GENESIS, 0


def _check_head(
    reads: AuditReads, node_key: str, seq_seen: int, prev: str
) -> tuple[Head | None, list[str]]:
    if reads.meta("node_key") != node_key:
        return None, ["the store was signed by another node key"]
    try:
        head = reads.signed_head()
    except StoreIntegrityError as exc:
        return None, [str(exc)]
    if (head.seq, head.hash) != (seq_seen, prev):
        return head, ["the change log does not end at its signed head"]
    return head, []


def _check_witnesses(reads: AuditReads, seen: Seen, seq_seen: int) -> list[str]:
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
        found = reads.hash_at(witness.seq)
        expected = found if found is not None else (GENESIS if witness.seq == 0 else None)
        if expected != witness.head:
            problems.append(f"the change log differs from the history witnessed in {where}")
    if reads.meta("witnessed") and all(w is None for _d, w in seen):
        places = ", ".join(str(d) for d, _w in seen)
        problems.append(
            f"the witness of this store is missing from {places} (deleted, or the store was "
            "moved from another user or machine): a rollback cannot be ruled out; if the "
            "move was deliberate, run `amcp verify --rewitness`"
        )
    return problems


def _check_rows(
    reads: AuditReads, verifier: Verifier, head: Head, *, full: bool
) -> tuple[dict[str, str], list[str], list[str]]:
    """(damaged records, index warnings, problems) against the signed head."""
    rows, digest, odd = reads.seal_sum()
    off = differences(dict(head.census), reads.census())
    if not (full or off or odd or rows != head.rows or digest != head.digest):
        return {}, [], []
    damaged = find_damaged(reads, verifier, full=full)
    if damaged:
        return damaged, [], []
    if rows == head.rows and off:
        # No row is damaged, yet the index rows do not add up: some were added or deleted
        # behind the node's back, and a record may be left out of searches. A warning, not
        # a refusal: every served record is verified.
        return {}, [
            "the store's index rows differ from its signed counts ("
            + "; ".join(off) + "): records may be missing from searches"
        ], []
    if not full:
        return {}, [], ["the record rows do not add up to the signed head"]
    return {}, [], []


def find_damaged(reads: AuditReads, verifier: Verifier, *, full: bool = False) -> dict[str, str]:
    """Which records are damaged, and how (inside the snapshot, the log verified): every
    row against its seal and against the log's latest entry for its id; every logged id
    against the rows. ``full``: every body against its id, checksum, envelope, signature."""
    latest = dict(reads.latest_seqs())
    damaged: dict[str, str] = {}
    seen: set[str] = set()
    for row in reads.record_rows():
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


__all__ = ["AuditReads", "Seen", "audit", "find_damaged", "since_mark"]
