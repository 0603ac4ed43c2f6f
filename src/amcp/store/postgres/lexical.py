"""The PostgreSQL store's lexical index: postings kept in every write's transaction, BM25 as
SQLite's FTS5 scores it (``bm25``), and the per-scope term statistics of scope-local BM25
(``amcp.store.termstats``: the same counts, the same deltas, written with PostgreSQL SQL).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from amcp.store import sqlite_census as census
from amcp.store import termstats
from amcp.store.base import RecordFilter
from amcp.store.postgres import bm25
from amcp.store.postgres.changes import HeadDelta
from amcp.store.postgres.database import Connection, Database
from amcp.store.sqlfilter import where_clause
from amcp.store.termstats import TermStats


def postings_of(rowid: int, terms: str, context: str) -> tuple[int, list[tuple[Any, ...]]]:
    """A row's token count and its postings ``(term, rid, tf_own, tf_ctx, doclen)``."""
    own, ctx = terms.split(), context.split()
    length = len(own) + len(ctx)
    tf_own, tf_ctx = Counter(own), Counter(ctx)
    return length, [
        (term, rowid, tf_own.get(term, 0), tf_ctx.get(term, 0), length)
        for term in dict.fromkeys([*own, *ctx])
    ]


class LexicalIndex:
    """Writes and reads of ``lexical``, ``postings`` and the scope statistics."""

    def __init__(self, db: Database, delta: HeadDelta) -> None:
        self._db = db
        self._delta = delta

    # -- writes (inside the write transaction) --------------------------------------------

    def add(self, conn: Connection, rows: Sequence[tuple[int, str, str]]) -> None:
        """Index ``(rowid, own terms, context)`` rows (new records)."""
        if not rows:
            return
        lengths: list[int] = []
        postings: list[tuple[Any, ...]] = []
        for rowid, terms, context in rows:
            length, more = postings_of(rowid, terms, context)
            lengths.append(length)
            postings.extend(more)
        conn.execute(
            "INSERT INTO lexical(rowid, terms, context, tokens) "
            "SELECT * FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::int[])",
            ([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], lengths),
        )
        if postings:
            conn.execute(
                "INSERT INTO postings(term, rid, tf_own, tf_ctx, doclen) "
                "SELECT * FROM unnest(%s::text[], %s::bigint[], %s::int[], %s::int[], %s::int[])",
                tuple(list(col) for col in zip(*postings, strict=True)),
            )
        conn.execute(
            "UPDATE lexical_totals SET docs = docs + %s, tokens = tokens + %s WHERE id = 1",
            (len(rows), sum(lengths)),
        )
        self._delta.count(census.LEXICAL, len(rows))

    def drop(self, conn: Connection, rowid: int) -> None:
        """Remove a purged record's lexical row and postings."""
        gone = conn.execute(
            "DELETE FROM lexical WHERE rowid = %s RETURNING tokens", (rowid,)
        ).fetchone()
        conn.execute("DELETE FROM postings WHERE rid = %s", (rowid,))
        if gone is not None:
            conn.execute(
                "UPDATE lexical_totals SET docs = docs - 1, tokens = tokens - %s WHERE id = 1",
                (int(gone[0]),),
            )
            self._delta.count(census.LEXICAL, -1)

    @staticmethod
    def apply(conn: Connection, deltas: termstats.Deltas) -> None:
        """Write per-scope count changes (``termstats.Deltas``); rows at zero go."""
        changed = [(s, t, n) for (s, t), n in deltas.terms.items() if n]
        if changed:
            conn.execute(
                "INSERT INTO scope_terms(scope, term, docs) SELECT * FROM "
                "unnest(%s::text[], %s::text[], %s::int[]) ON CONFLICT (scope, term) "
                "DO UPDATE SET docs = scope_terms.docs + excluded.docs",
                ([c[0] for c in changed], [c[1] for c in changed], [c[2] for c in changed]),
            )
            gone = [(s, t) for s, t, n in changed if n < 0]
            if gone:
                conn.execute(
                    "DELETE FROM scope_terms WHERE (scope, term) IN (SELECT * FROM "
                    "unnest(%s::text[], %s::text[])) AND docs <= 0",
                    ([g[0] for g in gone], [g[1] for g in gone]),
                )
        sizes = [(s, d, n) for s, (d, n) in deltas.sizes.items() if d or n]
        if sizes:
            conn.execute(
                "INSERT INTO scope_sizes(scope, docs, tokens) SELECT * FROM "
                "unnest(%s::text[], %s::int[], %s::bigint[]) ON CONFLICT (scope) DO UPDATE "
                "SET docs = scope_sizes.docs + excluded.docs, "
                "tokens = scope_sizes.tokens + excluded.tokens",
                ([z[0] for z in sizes], [z[1] for z in sizes], [z[2] for z in sizes]),
            )
            shrunk = [z[0] for z in sizes if z[1] < 0]
            if shrunk:
                conn.execute("DELETE FROM scope_sizes WHERE scope = ANY(%s) AND docs <= 0",
                             (shrunk,))
        deltas.terms.clear()
        deltas.sizes.clear()

    def count_rows(self, conn: Connection, rowids: Sequence[int], sign: int) -> None:
        """Count (or uncount) records as stored now, for lifecycle changes and purge."""
        if not rowids:
            return
        ids = [int(r) for r in rowids]
        scopes: dict[int, list[str]] = {}
        for rid, scope in conn.execute(
            "SELECT rid, scope FROM record_scopes WHERE rid = ANY(%s)", (ids,)
        ):
            scopes.setdefault(int(rid), []).append(scope)
        deltas = termstats.Deltas()
        for rid, terms, context in conn.execute(
            "SELECT rowid, terms, context FROM lexical WHERE rowid = ANY(%s)", (ids,)
        ):
            if int(rid) in scopes:
                deltas.add(scopes[int(rid)], terms or "", context or "", sign)
        self.apply(conn, deltas)

    # -- reads ----------------------------------------------------------------------------

    def search_lexical(
        self, terms: str, flt: RecordFilter, k: int, *, context_weight: float = 1.0
    ) -> list[tuple[str, float]]:
        """The ``k`` best BM25 matches passing ``flt``, best first (ties by rowid), with
        FTS5's scores (higher is better, as every scorer here)."""
        match = bm25.parse(terms)
        if not match.terms or k < 1:
            return []
        with self._db.read() as conn:
            freq = self._doc_freq(conn, match.terms)
            if not freq:
                return []
            docs, tokens = self._totals(conn)
            idf = bm25.idfs(match.terms, freq, docs)
            sql, params = bm25.ranked_sql(
                match, idf, context_weight, tokens / docs if docs else 1.0,
                where_clause(flt, dialect="postgres"), k,
            )
            rows = conn.execute(sql, params).fetchall()
        return [(str(kid), float(score)) for _rid, kid, score in rows]

    @staticmethod
    def _doc_freq(conn: Connection, terms: Sequence[str]) -> dict[str, int]:
        rows = conn.execute(
            "SELECT term, COUNT(*) FROM postings WHERE term = ANY(%s) GROUP BY term",
            (list(dict.fromkeys(terms)),),
        ).fetchall()
        return {str(t): int(n) for t, n in rows}

    @staticmethod
    def _totals(conn: Connection) -> tuple[int, int]:
        row = conn.execute("SELECT docs, tokens FROM lexical_totals WHERE id = 1").fetchone()
        return (int(row[0]), int(row[1])) if row else (0, 0)

    def term_doc_freq(self, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        """Documents containing each term, and (as the SQLite adapter counts it) the largest
        lexical rowid as the index's size."""
        if not terms:
            return {}, 0
        with self._db.read() as conn:
            freq = self._doc_freq(conn, terms)
            top = conn.execute("SELECT MAX(rowid) FROM lexical").fetchone()
        return freq, int(top[0] or 0) if top else 0

    def scope_term_stats(self, scopes: Sequence[str], terms: Sequence[str]) -> TermStats:
        with self._db.read() as conn:
            return termstats.read(
                lambda sql, p: conn.execute(sql.replace("?", "%s"), list(p)).fetchall(),
                scopes, terms,
            )

    def lexical_texts(self, knowledge_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        rows = self._columns(knowledge_ids, "f.terms, f.context")
        return {kid: (terms or "", context or "") for kid, terms, context in rows}

    def own_terms(self, knowledge_ids: Sequence[str]) -> dict[str, str]:
        return dict(self._columns(knowledge_ids, "f.terms"))

    def _columns(self, knowledge_ids: Sequence[str], columns: str) -> list[Any]:
        """``columns`` is one of this class's literals, never caller text."""
        if not knowledge_ids:
            return []
        with self._db.read() as conn:
            return conn.execute(
                f"SELECT r.knowledge_id, {columns} FROM records r JOIN lexical f "
                "ON f.rowid = r.rowid WHERE r.knowledge_id = ANY(%s)",
                (list(knowledge_ids),),
            ).fetchall()
