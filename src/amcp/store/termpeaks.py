"""Per-term frequency ceilings for pruned BM25 (schema migration 7).

``fts_rank`` skips a group of matches once no row of it can beat the page's n-th score. The
bound it uses needs, for each term, the largest weighted frequency the term can have in
one row. FTS5 only tells it the term's documents and instances, so without this table it
must assume one row holds every instance the other rows do not (``instances - docs + 1``):
for a term in 5k rows with a few repeats that is dozens, which puts the bound of a row
holding one query term above real rows holding two, and nothing is ever skipped. The true
ceiling of most terms is 1 or 2.

So every FTS row written records, per term, its count in each column, and ``term_peaks``
keeps the largest count seen per term and column. Only ever raised: a row deleted later
leaves a ceiling that is still an upper bound, which is all the pruning needs. It is
written in the same transaction as the FTS row, so a rollback takes both back.

The counts come from the whitespace-split FTS text (``amcp.retrieval.lexical`` stores it
pre-tokenised). An ASCII letters-and-digits piece is exactly one FTS5 token, itself
(``unicode61`` splits ASCII only at non-alphanumerics, and the text is lower-case). Any
other piece FTS5 may split further, under Unicode 6.1 tables Python does not share, into
tokens we cannot name, so pieces like it count toward the row's *slack*: its length, at
least the number of tokens FTS5 can make of it. The largest slack per column is kept in the
row for the empty term (no token is empty), and ``read`` adds it to every ceiling: an
ASCII-only store gets exact ceilings, a store with other scripts a looser but still valid
bound. Terms never seen as an ASCII piece have no ceiling (the caller falls back).

Stdlib only, like the other store modules on the hooks' path.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

SLACK = ""  # the term_peaks row holding the largest slack per column
UPSERT = (
    "INSERT INTO term_peaks(term, own, ctx) VALUES (?,?,?) ON CONFLICT(term) DO UPDATE SET"
    " own = max(own, excluded.own), ctx = max(ctx, excluded.ctx)"
)


def _column(text: str) -> tuple[dict[str, int], int]:
    """Counts of the exactly known pieces of one FTS column, and its slack."""
    counts: dict[str, int] = {}
    slack = 0
    for piece in text.split():
        if piece.isascii() and piece.isalnum():
            counts[piece] = counts.get(piece, 0) + 1
        else:
            slack += len(piece)
    return counts, slack


class Peaks:
    """Ceilings of a batch of FTS rows, kept in memory and written with one statement."""

    __slots__ = ("top",)

    def __init__(self) -> None:
        self.top: dict[str, list[int]] = {}

    def _raise(self, term: str, col: int, count: int) -> None:
        cur = self.top.get(term)
        if cur is None:
            cur = self.top[term] = [0, 0]
        cur[col] = max(cur[col], count)

    def add(self, terms: str, context: str) -> None:
        """Count one FTS row (its own-text and context columns)."""
        for col, text in enumerate((terms, context)):
            if not text:
                continue
            counts, slack = _column(text)
            for term, count in counts.items():
                self._raise(term, col, count)
            if slack:
                self._raise(SLACK, col, slack)

    def apply(self, db: sqlite3.Connection) -> None:
        """Raise the stored ceilings; call inside the write's transaction."""
        if self.top:
            db.executemany(UPSERT, [(t, own, ctx) for t, (own, ctx) in self.top.items()])
            self.top.clear()


def count(rows: Iterable[tuple[str | None, str | None]]) -> Peaks:
    peaks = Peaks()
    for terms, context in rows:
        peaks.add(terms or "", context or "")
    return peaks


def backfill(db: sqlite3.Connection) -> None:
    """Migration 7 for a store written before it: every FTS row, in the migration's
    transaction (a crash leaves the store at version 6 and the next open redoes it)."""
    count(db.execute("SELECT terms, context FROM records_fts")).apply(db)


def forget_gone(db: sqlite3.Connection, terms: str | None, context: str | None) -> None:
    """After a purge deleted an FTS row: drop the ceilings of its terms that no FTS row
    holds any more, so a purged record leaves no word of its content behind here. A term
    other rows still hold keeps its ceiling: it is no secret (those rows show it) and a
    ceiling that may now be too high is still a bound. Dropping one is always safe (no
    ceiling: the caller falls back), and a term written again later starts afresh, which
    is exact because no row held it. Call in the purge's transaction, after the delete
    (FTS5 reads its own uncommitted changes)."""
    gone = [
        t
        for t in {*_column(terms or "")[0], *_column(context or "")[0]}
        if not db.execute("SELECT doc FROM records_fts_vocab WHERE term=?", (t,)).fetchone()
    ]
    db.executemany("DELETE FROM term_peaks WHERE term=?", [(t,) for t in gone])


def read(db: sqlite3.Connection, terms: Sequence[str]) -> dict[str, tuple[int, int]]:
    """``(own, context)`` ceiling of each of ``terms`` that has one, slack included."""
    if not terms:
        return {}
    wanted = list(dict.fromkeys(terms))
    marks = ",".join("?" * (len(wanted) + 1))
    rows = {
        term: (own, ctx)
        for term, own, ctx in db.execute(
            f"SELECT term, own, ctx FROM term_peaks WHERE term IN ({marks})", [SLACK, *wanted]
        )
    }
    slack_own, slack_ctx = rows.pop(SLACK, (0, 0))
    return {t: (own + slack_own, ctx + slack_ctx) for t, (own, ctx) in rows.items()}
