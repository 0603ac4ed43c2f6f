"""The PostgreSQL store's lexical index: postings kept in every write's transaction, BM25 as
SQLite's FTS5 scores it (``bm25``), and the per-scope term statistics of scope-local BM25
(``amcp.store.termstats``: the same counts, the same deltas, written with PostgreSQL SQL).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from functools import partial
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


_LENGTH_STEPS = 3  # shorter-rows-first statements before ranking every length
_CACHED_TERMS_MAX = 50_000  # term_stats rows kept for one generation before starting over

# One ranking statement (``bm25.ranked_sql``): rows of at most ``max_len`` tokens (None:
# every length) scoring at least ``floor`` (None: any); (rowid, knowledge_id, score) rows.
Ranked = Callable[[int | None, float | None], list[Any]]


def _page(rows: list[Any]) -> list[tuple[str, float]]:
    return [(str(kid), float(score)) for _rid, kid, score in rows]


class _Stats:
    """The index-wide statistics read as of one generation: ``term_stats`` rows (None: no
    row holds the term), ``lexical_totals`` and the largest lexical rowid. A recall reads
    each of them twice (the term pruning's document counts, then BM25's idf, bounds and
    average length) and they only move with a commit: one round trip each saved per
    recall, more when questions share terms. Filled with what was read after the
    generation was taken, so nothing in it is older than its generation."""

    __slots__ = ("generation", "terms", "top", "totals")

    def __init__(self, generation: int) -> None:
        self.generation = generation
        self.terms: dict[str, bm25.TermStats | None] = {}
        self.totals: tuple[int, int] | None = None
        self.top: int | None = None


class LexicalIndex:
    """Writes and reads of ``lexical``, ``postings`` and the scope statistics."""

    def __init__(
        self, db: Database, delta: HeadDelta, *, min_matches: int = 2_000,
        generation: Callable[[], int] | None = None,
    ) -> None:
        """``generation``: the store's (``Store.generation``), which keys the statistics
        read by recall (``_Stats``); None reads them every time."""
        self._db = db
        self._delta = delta
        # Below this many matches in all, ranking every one costs a few milliseconds and
        # pruning's extra statement would not pay.
        self._min_matches = min_matches
        self._generation = generation
        self._cache = _Stats(-1)

    # -- writes (inside the write transaction) --------------------------------------------
    # The arrays are bound in binary (``%b``): psycopg builds a text array element by
    # element in Python, quoting and escaping each, about twice the client CPU of the
    # binary form (a 240-posting batch: 0.94 against 0.44 ms), and the server's
    # array_recv does less than array_in's parsing.

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
            "SELECT * FROM unnest(%b::bigint[], %b::text[], %b::text[], %b::int[])",
            ([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], lengths),
        )
        if postings:
            conn.execute(
                "INSERT INTO postings(term, rid, tf_own, tf_ctx, doclen) "
                "SELECT * FROM unnest(%b::text[], %b::bigint[], %b::int[], %b::int[], %b::int[])",
                tuple(list(col) for col in zip(*postings, strict=True)),
            )
        conn.execute(
            "UPDATE lexical_totals SET docs = docs + %s, tokens = tokens + %s WHERE id = 1",
            (len(rows), sum(lengths)),
        )
        self._count_terms(conn, postings)
        self._delta.count(census.LEXICAL, len(rows))

    @staticmethod
    def _count_terms(conn: Connection, postings: Sequence[tuple[Any, ...]]) -> None:
        """Add new postings to ``term_stats``: one upsert per batch (rows in term order, a
        fixed lock order even though writers already hold the store's lock)."""
        if not postings:
            return
        seen: dict[str, list[int]] = {}
        for term, _rid, own, ctx, length in postings:
            got = seen.get(term)
            if got is None:
                seen[term] = [1, own, ctx, length]
            else:
                got[0] += 1
                got[1], got[2], got[3] = max(got[1], own), max(got[2], ctx), min(got[3], length)
        terms = sorted(seen)
        conn.execute(
            "INSERT INTO term_stats(term, docs, max_own, max_ctx, min_len) SELECT * FROM "
            "unnest(%b::text[], %b::bigint[], %b::int[], %b::int[], %b::int[]) "
            "ON CONFLICT (term) DO UPDATE SET docs = term_stats.docs + excluded.docs, "
            "max_own = GREATEST(term_stats.max_own, excluded.max_own), "
            "max_ctx = GREATEST(term_stats.max_ctx, excluded.max_ctx), "
            "min_len = LEAST(term_stats.min_len, excluded.min_len)",
            (terms, *([seen[t][i] for t in terms] for i in range(4))),
        )

    def drop(self, conn: Connection, rowid: int) -> None:
        """Remove a purged record's lexical row and postings."""
        gone = conn.execute(
            "DELETE FROM lexical WHERE rowid = %s RETURNING tokens", (rowid,)
        ).fetchone()
        conn.execute(
            "UPDATE term_stats SET docs = docs - 1 WHERE term IN "
            "(SELECT term FROM postings WHERE rid = %s)", (rowid,),
        )
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
                "unnest(%b::text[], %b::text[], %b::int[]) ON CONFLICT (scope, term) "
                "DO UPDATE SET docs = scope_terms.docs + excluded.docs",
                ([c[0] for c in changed], [c[1] for c in changed], [c[2] for c in changed]),
            )
            gone = [(s, t) for s, t, n in changed if n < 0]
            if gone:
                conn.execute(
                    "DELETE FROM scope_terms WHERE (scope, term) IN (SELECT * FROM "
                    "unnest(%b::text[], %b::text[])) AND docs <= 0",
                    ([g[0] for g in gone], [g[1] for g in gone]),
                )
        sizes = [(s, d, n) for s, (d, n) in deltas.sizes.items() if d or n]
        if sizes:
            conn.execute(
                "INSERT INTO scope_sizes(scope, docs, tokens) SELECT * FROM "
                "unnest(%b::text[], %b::int[], %b::bigint[]) ON CONFLICT (scope) DO UPDATE "
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
        cache = self._stats_now()
        with self._db.read() as conn:
            stats = self._term_stats(conn, cache, match.terms)
            if not stats:
                return []
            docs, tokens = self._totals(conn, cache)
            avgdl = tokens / docs if docs else 1.0
            idf = bm25.idfs(match.terms, {t: s.docs for t, s in stats.items()}, docs)
            where = where_clause(flt, dialect="postgres")

            def ranked(conn: Connection, max_len: int | None, floor: float | None) -> list[Any]:
                sql, params = bm25.ranked_sql(match, idf, context_weight, avgdl, where, k,
                                              max_len, floor)
                return conn.execute(sql, params).fetchall()

            if not self._prunes(stats, context_weight):
                return _page(ranked(conn, None, None))
        # Several statements, so one snapshot: a commit between them could otherwise drop a
        # row of the first one's top k (a purge, a lifecycle change) while the later ones
        # keep only rows reaching its k-th score — a short page. The bounds are read in
        # that snapshot too (``term_stats`` is kept by every write): the cached ones may
        # predate a peer's commit whose notification is still on its way, and a bound must
        # hold for every row the statements see (``term_stats`` moves in the same
        # transactions as the postings, so a term's row read here is exact for them). A
        # term no row holds any more keeps its cached row: it has no postings here, so that
        # bound costs nothing, and the steps need a length for every term they rank. A
        # term new since the cache has idf 0 in these statements and no bound is needed.
        # idf and avgdl stay as read: the bounds and the statements use the same ones.
        with self._db.snapshot() as conn:
            fresh = self._term_stats(conn, _Stats(-1), match.terms)
            bounds = {term: fresh.get(term, cached) for term, cached in stats.items()}
            rows = self._pruned(match, idf, bounds, context_weight, avgdl, k,
                                partial(ranked, conn))
        return _page(rows)

    def _prunes(self, stats: dict[str, bm25.TermStats], context_weight: float) -> bool:
        """Whether ranking the rows that can reach the page can pay, and be exact: enough
        matches in all (``prune_from``), and no negative context weight (the bounds take a
        larger frequency to score more)."""
        return context_weight >= 0 and sum(s.docs for s in stats.values()) >= self._min_matches

    def _pruned(
        self, match: bm25.Match, idf: list[float], stats: dict[str, bm25.TermStats],
        context_weight: float, avgdl: float, k: int,
        ranked: Ranked,
    ) -> list[Any]:
        """The page, ranking only the rows that can reach it where that can pay (enough
        matches in all): shorter rows first (``bm25``, "Length steps").

        The first statement ranks the rows up to the length at which a row can first hold
        every term (at least half-way from the shortest row to the average); while fewer
        than ``k`` pass, the next goes twice as far from the shortest. Once ``k`` pass,
        their k-th score bounds the page's from below: ``length_needed`` says how long a
        row can be and still reach it. If no longer row can, that is the page; if it is far
        off, one step more may raise the k-th score and bring it closer; then one last
        statement ranks the rows up to it. Every statement after a k-th score keeps only
        the rows reaching it (``floor``), so only those are sorted and looked up."""
        lengths = [s.min_len for s in stats.values()]
        shortest = min(lengths)
        length = max(*lengths, shortest + max(1, round((avgdl - shortest) / 2)))
        kth: float | None = None
        need: int | None = None
        for _step in range(_LENGTH_STEPS):
            rows = ranked(length, kth)
            further = shortest + 2 * (length - shortest)
            if len(rows) >= k:
                refining = kth is not None
                kth = float(rows[k - 1][2])
                need = bm25.length_needed(match, idf, stats, context_weight, avgdl, kth,
                                          length)
                if need == length:
                    return rows
                if refining or (need is not None and need <= further):
                    break
            length = further
        return ranked(need, kth)

    def _stats_now(self) -> _Stats:
        """The statistics cache of the store's current generation (a fresh, unshared one
        without a generation source, or inside this thread's write transaction, where
        ``generation`` moves on every call)."""
        if self._generation is None:
            return _Stats(-1)
        now = self._generation()  # taken before anything is read under it
        cache = self._cache
        if cache.generation != now or len(cache.terms) > _CACHED_TERMS_MAX:
            cache = self._cache = _Stats(now)
        return cache

    @staticmethod
    def _term_stats(
        conn: Connection, cache: _Stats, terms: Sequence[str]
    ) -> dict[str, bm25.TermStats]:
        """``term_stats`` of the terms held by some row; only those not cached are read."""
        known = cache.terms
        wanted = list(dict.fromkeys(terms))
        missing = [t for t in wanted if t not in known]
        if missing:
            rows = conn.execute(
                "SELECT term, docs, max_own, max_ctx, min_len FROM term_stats "
                "WHERE term = ANY(%s) AND docs > 0",
                (missing,),
            ).fetchall()
            found = {str(r[0]): bm25.TermStats(int(r[1]), int(r[2]), int(r[3]), int(r[4]))
                     for r in rows}
            for term in missing:
                known[term] = found.get(term)
        return {t: got for t in wanted if (got := known[t]) is not None}

    @staticmethod
    def _totals(conn: Connection, cache: _Stats) -> tuple[int, int]:
        if cache.totals is None:
            row = conn.execute("SELECT docs, tokens FROM lexical_totals WHERE id = 1").fetchone()
            cache.totals = (int(row[0]), int(row[1])) if row else (0, 0)
        return cache.totals

    def term_doc_freq(self, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        """Documents containing each term, and (as the SQLite adapter counts it) the largest
        lexical rowid as the index's size."""
        if not terms:
            return {}, 0
        cache = self._stats_now()
        with self._db.read() as conn:
            freq = {t: s.docs for t, s in self._term_stats(conn, cache, terms).items()}
            if cache.top is None:
                top = conn.execute("SELECT MAX(rowid) FROM lexical").fetchone()
                cache.top = int(top[0] or 0) if top else 0
        return freq, cache.top

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
