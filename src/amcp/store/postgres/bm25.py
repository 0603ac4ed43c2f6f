"""BM25 over the postings table, scored exactly as SQLite's FTS5 ``bm25()`` scores.

The SQLite adapter ranks with FTS5 (``fts_rank``): for each query phrase, idf (with FTS5's
floor) times ``f·(k1+1) / (f + k1·(1 − b + b·D/avgdl))``, where ``f`` is the column-weighted
frequency (own text 1.0, context ``context_weight``), ``D`` the row's tokens in both columns
and ``avgdl`` the average over every lexical row. Here the same sum is one SQL aggregate over
the query terms' postings, with the same constants (``fts_rank.K1``, ``fts_rank.B``), the
same idf (``fts_rank.idf``) and the same pre-tokenised text (``amcp.retrieval.lexical``
writes it; this adapter splits it on whitespace, as FTS5's unicode61 does for such text),
so both adapters give the same scores and the same order (ties by rowid).

Ranking every row that holds a query term is what cost recall its time at 100k: a question
naming a common word matches thousands of rows. So a plain OR is ranked max-score style
(``essential``): the rows holding the highest-bound term are ranked first, and their k-th
score says which terms are *essential* — those without which a row cannot reach it, since
each term's share of a score is bounded (``bounds``, from ``term_stats``). Only rows holding
an essential term are scored then, so the common, low-idf terms' matches are never summed,
sorted or looked up. The page is the same as ranking every
match (``tests/store/test_pg_bm25.py`` checks it against the plain statement and SQLite).

Match expressions are the ones the node writes (``lexical.build_match``: quoted terms joined
by OR); a bare word is a term too, and a group of several words (``a b`` or ``"a b"``) must
all be in a row, as FTS5's implicit AND (a phrase is approximated by its words).
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from amcp.store import fts_rank

_GROUP_SPLIT = re.compile(r"\s+OR\s+")
_QUOTED = re.compile(r'"((?:[^"]|"")*)"')
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


class Match(NamedTuple):
    """A parsed match: its terms in query order (repeats kept: FTS5 scores each phrase),
    and the groups of which a row must hold every term of at least one."""

    terms: list[str]
    groups: list[list[str]]

    @property
    def plain(self) -> bool:
        """Every group is one term: an OR of terms, no HAVING needed."""
        return all(len(g) == 1 for g in self.groups)


def parse(match: str) -> Match:
    terms: list[str] = []
    groups: list[list[str]] = []
    for part in _GROUP_SPLIT.split(match.strip()):
        words: list[str] = []
        rest = _QUOTED.sub(lambda m: " " + m.group(1).replace('""', '"') + " ", part)
        words = [w.lower() for w in _WORD.findall(rest)]
        if words:
            groups.append(list(dict.fromkeys(words)))
            terms.extend(words)
    return Match(terms, groups)


def idfs(terms: list[str], doc_freq: dict[str, int], rows: int) -> list[float]:
    """FTS5's idf of each term (a term in no row: it adds nothing, as there)."""
    return [fts_rank.idf(rows, doc_freq[t]) if doc_freq.get(t) else 0.0 for t in terms]


# The per-row sum (parameters: context weight twice, avgdl), each posting's frequency weighted
# per column as FTS5 weights it; ``q`` is the query's (term, idf) list. Every constant is a
# float8 (a bare 0.75 is numeric in PostgreSQL, and numeric arithmetic per posting was most
# of the aggregate's time).
_K1, _B = fts_rank.K1, fts_rank.B
_NORM = f"{_K1}::float8 * (1 - {_B}::float8 + {_B}::float8 * p.doclen / %s::float8)"
_SCORE = (
    f"SUM(q.idf * (p.tf_own + %s::float8 * p.tf_ctx) * {_K1 + 1}::float8 "
    f"/ ((p.tf_own + %s::float8 * p.tf_ctx) + {_NORM}))"
)


def ranked_sql(
    match: Match, idf: list[float], context_weight: float, avgdl: float,
    where: tuple[str, list[Any]] | None, limit: int, among: list[str] | None = None,
) -> tuple[str, list[Any]]:
    """The statement ranking ``match``'s postings, best first (ties by rowid), returning
    (rowid, knowledge_id, score) rows that pass ``where`` (a ``sqlfilter`` clause over
    ``records r``), and its parameters.

    The scores come from the postings alone (index-only scans of the covering primary key);
    the rows are then looked up in ``records`` in score order, so the filter is checked on
    the best rows until ``limit`` pass, not on every match (a wide row each). With
    ``among`` (plain matches only), only rows holding one of those terms are scored:
    ``essential`` says when that cannot change the page."""
    params: list[Any] = [context_weight, context_weight, avgdl or 1.0, match.terms, idf]
    having = ""
    if not match.plain:
        having = " HAVING " + " OR ".join(
            f"COUNT(DISTINCT p.term) FILTER (WHERE p.term = ANY(%s)) = {len(g)}"
            for g in match.groups
        )
        params.extend(match.groups)
    holding = ""
    if among is not None:
        assert match.plain
        holding = " WHERE p.rid IN (SELECT rid FROM postings WHERE term = ANY(%s))"
        params.append(among)
    clause, more = where if where is not None else ("TRUE", [])
    sql = (
        f"SELECT s.rid, r.knowledge_id, s.score FROM (SELECT p.rid, {_SCORE} AS score "
        "FROM postings p JOIN unnest(%s::text[], %s::float8[]) AS q(term, idf) "
        f"ON p.term = q.term{holding} GROUP BY p.rid{having} "
        "ORDER BY score DESC, p.rid) s "
        f"JOIN records r ON r.rowid = s.rid WHERE {clause} "
        "ORDER BY s.score DESC, s.rid LIMIT %s"
    )
    return sql, [*params, *more, limit]


class TermStats(NamedTuple):
    """One term's row of ``term_stats``: rows holding it, its largest frequency in one row
    per column, and the shortest row holding it."""

    docs: int
    max_own: int
    max_ctx: int
    min_len: int


# A term set is only left out if its bound is below the k-th score by this relative margin,
# so float rounding (the bound here, the sum in SQL) never drops a row that belongs on the
# page or ties into it (as ``fts_rank``).
_MARGIN = 1e-9


def bounds(
    match: Match, idf: list[float], stats: dict[str, TermStats], context_weight: float,
    avgdl: float,
) -> dict[str, float]:
    """Each distinct term's largest possible share of one row's score (a repeated query
    term counts each time, as it is scored): its idf, its largest weighted frequency and
    the shortest row holding it in BM25's term factor."""
    out: dict[str, float] = {}
    for term, weight in zip(match.terms, idf, strict=True):
        got = stats.get(term)
        if got is None:
            continue
        most = got.max_own + context_weight * got.max_ctx
        out[term] = out.get(term, 0.0) + fts_rank.term_bound(weight, most, got.min_len, avgdl)
    return out


def essential(bound: dict[str, float], kth: float) -> list[str] | None:
    """The fewest highest-bound terms such that a row holding none of them cannot reach
    ``kth`` (the k-th best score of some rows already ranked, so at most the page's k-th):
    a row's score is at most the sum of the bounds of the terms it holds. None: every
    term is needed (nothing to leave out)."""
    order = sorted(bound, key=lambda t: -bound[t])
    rest = sum(bound.values())
    for n, term in enumerate(order[:-1], start=1):
        rest -= bound[term]
        if rest * (1 + _MARGIN) + _MARGIN < kth:
            return order[:n]
    return None
