"""The SQLiteStore's lexical index (the ``LexicalIndex`` capability): BM25 over FTS5, the
ranking pruned where that pays (``fts_rank``), the page filtered by rowid (``SQLiteVectors``),
and the term statistics recall weighs terms by."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from amcp.errors import StoreError
from amcp.store import fts_rank, termpeaks, termstats
from amcp.store.base import RecordFilter
from amcp.store.sqlfilter import where_clause
from amcp.store.sqlite_conn import SQLiteConn
from amcp.store.sqlite_rows import in_marks
from amcp.store.sqlite_vectors import SQLiteVectors
from amcp.store.termstats import TermStats
from amcp.store.tuning import Pruning

# Distinct terms whose FTS statistics are kept between recalls (see ``_term_stats``).
_ABSENT = fts_rank.TermCounts(0, 0)


def _head(k: int) -> int:
    """How much of a lexical page a broad filter's check looks at first (``_passing``)."""
    return k + k // 2 + 8


class SQLiteLexical:
    """BM25 search and term statistics over ``records_fts``."""

    def __init__(self, conn: SQLiteConn, rows: SQLiteVectors,
                 pruning: Pruning | None = None) -> None:
        self._worth = pruning or Pruning()
        self._db = conn.db
        self._lock = conn.lock
        self._rows = rows
        # (largest FTS rowid scanned, fewest tokens in a row up to it): FTS rows are only
        # ever added with rowids above every existing one, or deleted, so the scan is
        # incremental.
        self._fts_floor: tuple[int, int] = (0, 1 << 30)
        # The last term statistics looked up, and the index state they were taken at.
        self._vocab_kept: tuple[object, dict[str, fts_rank.TermCounts]] = (None, {})

    def search_lexical(
        self, terms: str, flt: RecordFilter, k: int, *, context_weight: float = 1.0
    ) -> list[tuple[str, float]]:
        """The ``k`` best BM25 matches passing ``flt``, best first (ties by rowid).

        The matches are ranked by FTS5 alone and only the top page is checked against the
        filter (``filter_rowids``): joining every match costs twice the ranking itself (a
        row lookup and the WHERE clause per match, and a scope's whole rowid list). If too
        few of the page pass, the joined query answers instead; the result is identical.
        """
        if not terms.strip():
            return []
        where, params = where_clause(flt)
        try:
            with self._lock:
                scopes = self._narrow_scopes(flt)
                # A selective filter (a scope is often an eighth of the store) needs a
                # deeper page, unless the page itself is drawn from the scopes' rows only.
                only_scopes = scopes is not None and not replace(flt, scopes=None).selective
                probe = max(4 * k, 200) if not flt.selective or only_scopes else max(16 * k, 800)
                ranked: list[tuple[int, float]] | None = None
                if scopes is not None:
                    ranked = self._db.execute(
                        fts_rank.scoped_sql(len(scopes)), [context_weight, terms, *scopes, probe]
                    ).fetchall()
                elif not flt.selective:
                    # A broad filter passes nearly every match: the first page is only as
                    # deep as the head ``_passing`` checks first, and the full probe runs
                    # only if too few of it pass. The pruned ranking stops sooner the fewer
                    # rows it must place (at 100k: 200 -> 83 rows took a paired-word query's
                    # 19 ms to 7); a page that is a prefix of the deeper one gives the same hits.
                    head = _head(k)
                    ranked = self._ranked(terms, head, context_weight)
                    hits = self._passing(ranked, flt, k)
                    if len(hits) >= k or len(ranked) < head:
                        names = self._rows.ids_for_rowids([r for r, _s in hits])
                        return [(names[r], s) for r, s in hits]
                    ranked = self._ranked(terms, probe, context_weight)
                else:
                    # A selective filter's deep page (800) is out of the pruning's reach:
                    # most of it comes from rows holding a single term, which it cannot skip.
                    ranked = self._db.execute(
                        fts_rank.PLAIN_SQL, [context_weight, terms, probe]
                    ).fetchall()
                hits = self._passing(ranked, flt, k, broad=only_scopes)
                if len(hits) >= k or len(ranked) < probe:
                    names = self._rows.ids_for_rowids([r for r, _s in hits])
                    return [(names[r], s) for r, s in hits]
            sql = (
                "SELECT r.knowledge_id, bm25(records_fts, 1.0, ?) AS score FROM records_fts "
                "JOIN records r ON r.rowid = records_fts.rowid "
                f"WHERE records_fts MATCH ? AND {where} ORDER BY score, r.rowid LIMIT ?"
            )
            with self._lock:
                rows = self._db.execute(sql, [context_weight, terms, *params, k]).fetchall()
        except sqlite3.OperationalError as exc:
            raise StoreError(f"lexical search failed: {exc}") from exc
        # bm25() is lower-is-better; flip the sign so every scorer is higher-is-better.
        return [(kid, -score) for kid, score in rows]

    def _passing(
        self, ranked: list[tuple[int, float]], flt: RecordFilter, k: int, *, broad: bool = False
    ) -> list[tuple[int, float]]:
        """The first ``k`` of ``ranked`` (rowid, bm25) whose records pass ``flt``, as
        (rowid, higher-is-better score); call locked. A broad filter (active, unexpired)
        passes nearly every match, so the head of the page is checked first and the rest
        only if too few of it pass: the check is a row lookup per rowid, over a third of a
        10k-record recall's lexical time when the whole 200-row page was checked. ``broad``:
        the page was drawn from the filter's scopes already, and the rest of it is broad."""
        head = len(ranked) if flt.selective and not broad else _head(k)
        passed = set(self._rows.filter_rowids([r for r, _s in ranked[:head]], flt))
        hits = [(r, -s) for r, s in ranked[:head] if r in passed][:k]
        if len(hits) < k and head < len(ranked):
            passed.update(self._rows.filter_rowids([r for r, _s in ranked[head:]], flt))
            hits = [(r, -s) for r, s in ranked if r in passed][:k]
        return hits

    def _ranked(self, terms: str, n: int, context_weight: float) -> list[tuple[int, float]]:
        """The best ``n`` (rowid, bm25) of ``terms``, pruned where that pays; call locked."""
        ranked = fts_rank.ranked(
            self._db, terms, n, (1.0, context_weight), self._shortest_fts_row, self._term_stats,
            self._worth,
        )
        if ranked is None:
            ranked = self._db.execute(fts_rank.PLAIN_SQL, [context_weight, terms, n]).fetchall()
        return ranked

    def _narrow_scopes(self, flt: RecordFilter) -> list[str] | None:
        """The scopes (with '*') to draw a lexical page from, when they hold a small share of
        the store; call locked.

        Ranking every match and filtering the page scores ~11k rows for a common query at
        100k; ranking only the matches in the scope (one (scope, rid) probe per match, see
        ``fts_rank.scoped_sql``) scores an eighth of them: 27-35 -> 16-25 ms CPU for an
        eighth of the store. The probe costs about half a bm25 per match, so for a scope
        that is most of the store it is a loss; the share comes from the per-scope counts
        (active records) over the largest FTS rowid (every row), one small read each.
        """
        if flt.scopes is None:
            return None
        scopes = [*dict.fromkeys([*flt.scopes, termstats.GLOBAL_SCOPE])]
        if len(scopes) > termstats.MAX_SCOPES + 1:
            return None
        rows = self._db.execute("SELECT MAX(rowid) FROM records_fts").fetchone()[0] or 0
        if rows < self._worth.min_rows:
            return None  # a small table: ranking every match costs a few milliseconds
        docs = self._db.execute(
            "SELECT COALESCE(SUM(docs), 0) FROM scope_sizes "
            f"WHERE scope IN ({in_marks(len(scopes))})",
            scopes,
        ).fetchone()[0]
        return scopes if docs <= rows * fts_rank.MAX_SCOPE_SHARE else None

    def _shortest_fts_row(self, columns: int) -> int:
        """A lower bound on every FTS row's token count (for ``fts_rank``); call locked."""
        upto, least = self._fts_floor
        top = self._db.execute("SELECT MAX(id) FROM records_fts_docsize").fetchone()[0] or 0
        if top > upto:
            least = min(least, fts_rank.shortest_row(self._db, upto, columns))
            if not self._db.in_transaction:  # rows a rollback may take back are not cached
                self._fts_floor = (top, least)
        return least

    def term_doc_freq(self, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        """Documents containing each term, and (approximately) how many documents there are.

        The total is the largest FTS rowid: O(1), and only purges (rare) make it overcount.
        """
        if not terms:
            return {}, 0
        with self._lock:
            stats = self._term_stats(terms)
            total = self._db.execute("SELECT MAX(rowid) FROM records_fts").fetchone()[0]
        return {t: c.docs for t, c in stats.items()}, int(total or 0)

    def _term_stats(self, terms: Sequence[str]) -> dict[str, fts_rank.TermCounts]:
        """Documents, instances and per-row ceilings of each known term; call locked.

        FTS5 counts them by walking each term's doclist (a millisecond for a common term at
        100k), and a recall asks twice (``term_doc_freq``, then ``fts_rank``). The words
        that make a term common ("need", "service") are also the ones most queries share,
        so every term looked up is kept (up to ``Pruning.vocab_keep``) while the index is
        unchanged: its row totals and largest rowid say so, and both move with every
        committed insert or delete. In a transaction nothing is kept or reused."""
        stamp = None
        kept: dict[str, fts_rank.TermCounts] = {}
        if not self._db.in_transaction:
            stamp = (
                self._db.execute("SELECT block FROM records_fts_data WHERE id = 1").fetchone(),
                self._db.execute("SELECT MAX(id) FROM records_fts_docsize").fetchone(),
            )
            kept_stamp, kept = self._vocab_kept
            if stamp != kept_stamp:
                kept = {}
        missing = [t for t in dict.fromkeys(terms) if t not in kept]
        found: dict[str, fts_rank.TermCounts] = {}
        if missing:
            peaks = termpeaks.read(self._db, missing)
            found = {
                t: fts_rank.TermCounts(int(d), int(c), *peaks.get(t, (-1, -1)))
                for t, d, c in self._db.execute(
                    f"SELECT term, doc, cnt FROM records_fts_vocab WHERE term IN "
                    f"({in_marks(len(missing))})",
                    missing,
                ).fetchall()
            }
        if stamp is None:
            return found
        if len(kept) + len(missing) > self._worth.vocab_keep:
            kept = {}
        for t in missing:  # absent terms kept with no documents: known absent
            kept[t] = found.get(t, _ABSENT)
        self._vocab_kept = (stamp, kept)
        return {t: kept[t] for t in terms if kept[t].docs}

    def scope_term_stats(self, scopes: Sequence[str], terms: Sequence[str]) -> TermStats:
        """Active records of ``scopes`` (plus '*'): how many contain each of ``terms``, how
        many there are and their total length — see ``amcp.store.termstats``."""
        with self._lock:
            return termstats.read(lambda sql, p: self._db.execute(sql, p).fetchall(), scopes, terms)

    def lexical_texts(self, knowledge_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        """Both FTS columns (own terms, context) of each given record that has them."""
        rows = self._fts_columns(knowledge_ids, "f.terms, f.context")
        return {kid: (terms or "", context or "") for kid, terms, context in rows}

    def own_terms(self, knowledge_ids: Sequence[str]) -> dict[str, str]:
        return dict(self._fts_columns(knowledge_ids, "f.terms"))

    def _fts_columns(self, knowledge_ids: Sequence[str], columns: str) -> list[Any]:
        """``(knowledge_id, *columns)`` rows of the given records' FTS entries; ``columns``
        is one of this module's literals, never caller text."""
        if not knowledge_ids:
            return []
        marks = in_marks(len(knowledge_ids))
        with self._lock:
            return self._db.execute(
                f"SELECT r.knowledge_id, {columns} FROM records r JOIN records_fts f "
                f"ON f.rowid = r.rowid WHERE r.knowledge_id IN ({marks})",
                list(knowledge_ids),
            ).fetchall()
