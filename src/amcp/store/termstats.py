"""Per-scope term statistics for scope-local BM25 (schema migration 6).

FTS5's ``bm25()`` scores with the statistics of the whole table: how many documents there
are, how many contain each term, how long they are on average. A recall filtered to one
scope (a project, a user, one conversation) is a search over that scope's records, and
should be scored with *its* statistics: a name in half of one project's records says
nothing about which of them answers, even if no other project ever mentions it — and a
word that is everywhere in other projects can still single out the one record here that
uses it. So each store keeps, per scope, the document frequency of every term and the
scope's document and token counts, in the same transaction as the write that changes them.

What is counted: *active* records with lexical text (an FTS row), once per scope they list
(``meta.project_scope``, '*' included as a scope of its own). A term is counted when it
occurs in either FTS column (own text or context), as FTS5 counts it; lengths are tokens in
both columns, as FTS5's document length. Tokens are the whitespace-split FTS text, which
``amcp.retrieval.lexical`` wrote pre-tokenised — the write path, the migration's backfill
and the query-time scorer read the same tokens. Supersede, invalidate, archive (TTL) and
purge take a record out of its scopes' counts; anything that makes one active again puts
it back.

Stdlib only: the hooks' read-only path (``amcp.store.fastread``) reads these tables too.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any

# A recall filtered to more scopes than this is scored with the whole store's statistics:
# each scope costs one index probe per query term, and a query over many scopes is close to
# a query over the store.
MAX_SCOPES = 16
GLOBAL_SCOPE = "*"  # visible in every scope (see sqlfilter.where_clause)

class TermStats(NamedTuple):
    """The collection statistics BM25 needs. A NamedTuple: the hooks import this module."""

    doc_freq: dict[str, int]  # documents containing each term (absent: none)
    docs: int
    tokens: int

    @property
    def avg_len(self) -> float:
        return self.tokens / self.docs if self.docs else 0.0


def doc_terms(terms: str, context: str) -> tuple[set[str], int]:
    """The distinct terms of one FTS row and its length in tokens (both columns)."""
    own, ctx = terms.split(), context.split()
    return {*own, *ctx}, len(own) + len(ctx)


class Deltas:
    """Changes to the per-scope counts, summed in memory and written with one statement per
    table (a batch of writes touches the same common terms many times)."""

    __slots__ = ("sizes", "terms")

    def __init__(self) -> None:
        self.terms: Counter[tuple[str, str]] = Counter()
        self.sizes: dict[str, list[int]] = {}

    def add(self, scopes: Iterable[str], terms: str, context: str, sign: int) -> None:
        """Count (sign +1) or uncount (-1) one record's FTS text in each of its scopes."""
        distinct, length = doc_terms(terms, context)
        if not distinct:
            return  # no lexical text: FTS5 holds no row for it either
        for scope in set(scopes):
            size = self.sizes.setdefault(scope, [0, 0])
            size[0] += sign
            size[1] += sign * length
            for term in distinct:
                self.terms[scope, term] += sign

    def apply(self, db: sqlite3.Connection) -> None:
        """Write the changes; rows that fall to zero are deleted. Call inside the write's
        transaction."""
        changed = [(s, t, n) for (s, t), n in self.terms.items() if n]
        db.executemany(
            "INSERT INTO scope_terms(scope, term, docs) VALUES (?,?,?) ON CONFLICT(scope, term)"
            " DO UPDATE SET docs = docs + excluded.docs",
            changed,
        )
        db.executemany(
            "DELETE FROM scope_terms WHERE scope=? AND term=? AND docs<=0",
            [(s, t) for s, t, n in changed if n < 0],
        )
        sizes = [(s, d, n) for s, (d, n) in self.sizes.items() if d or n]
        db.executemany(
            "INSERT INTO scope_sizes(scope, docs, tokens) VALUES (?,?,?) ON CONFLICT(scope)"
            " DO UPDATE SET docs = docs + excluded.docs, tokens = tokens + excluded.tokens",
            sizes,
        )
        db.executemany(
            "DELETE FROM scope_sizes WHERE scope=? AND docs<=0",
            [(s,) for s, d, _n in sizes if d < 0],
        )
        self.terms.clear()
        self.sizes.clear()


def count_rows(db: sqlite3.Connection, rowids: Sequence[int], sign: int) -> None:
    """Count (or uncount) the records ``rowids`` as they are stored now (their FTS text and
    scopes): for lifecycle changes and purge, which read what the write had counted."""
    if not rowids:
        return
    deltas = Deltas()
    for start in range(0, len(rowids), 500):  # below SQLite's bound-parameter limit
        chunk = [int(r) for r in rowids[start : start + 500]]
        marks = ",".join("?" * len(chunk))
        scopes: dict[int, list[str]] = {}
        for rid, scope in db.execute(
            f"SELECT rid, scope FROM record_scopes WHERE rid IN ({marks})", chunk
        ):
            scopes.setdefault(rid, []).append(scope)
        for rid, terms, context in db.execute(
            f"SELECT rowid, terms, context FROM records_fts WHERE rowid IN ({marks})", chunk
        ):
            if rid in scopes:
                deltas.add(scopes[rid], terms or "", context or "", sign)
    deltas.apply(db)


def backfill(db: sqlite3.Connection) -> None:
    """Migration 6 for a store written before it: count every active record. Runs inside
    the migration's transaction, so a crash leaves the store at version 5 (redone on the
    next open), never at 6 with empty counts."""
    rows = [r for (r,) in db.execute("SELECT rowid FROM records WHERE lifecycle='active'")]
    count_rows(db, rows, +1)


def read(
    query: Callable[[str, Sequence[Any]], list[Any]], scopes: Sequence[str], terms: Sequence[str]
) -> TermStats:
    """The summed statistics of ``scopes`` plus '*' for ``terms``.

    A record listed under two of the scopes is counted in both: its own scope's view of the
    record, and the sum is then a slight overcount of the union (the document total is
    overcounted the same way, so shares stay close). ``query(sql, params)`` runs one
    statement and returns its rows (a connection's or a read-only reader's).
    """
    wanted = list(dict.fromkeys([*scopes, GLOBAL_SCOPE]))
    scope_marks = ",".join("?" * len(wanted))
    size = query(
        f"SELECT COALESCE(SUM(docs), 0), COALESCE(SUM(tokens), 0) FROM scope_sizes"
        f" WHERE scope IN ({scope_marks})",
        wanted,
    )[0]
    freq: dict[str, int] = {}
    if terms:
        rows = query(
            f"SELECT term, SUM(docs) FROM scope_terms WHERE scope IN ({scope_marks})"
            f" AND term IN ({','.join('?' * len(terms))}) GROUP BY term",
            [*wanted, *terms],
        )
        freq = {str(t): int(n) for t, n in rows if n}
    return TermStats(freq, int(size[0]), int(size[1]))
