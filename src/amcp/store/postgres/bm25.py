"""BM25 over the postings table, scored exactly as SQLite's FTS5 ``bm25()`` scores.

The SQLite adapter ranks with FTS5 (``fts_rank``): for each query phrase, idf (with FTS5's
floor) times ``f·(k1+1) / (f + k1·(1 − b + b·D/avgdl))``, where ``f`` is the column-weighted
frequency (own text 1.0, context ``context_weight``), ``D`` the row's tokens in both columns
and ``avgdl`` the average over every lexical row. Here the same sum is one SQL aggregate over
the query terms' postings, with the same constants (``fts_rank.K1``, ``fts_rank.B``), the
same idf (``fts_rank.idf``) and the same pre-tokenised text (``amcp.retrieval.lexical``
writes it; this adapter splits it on whitespace, as FTS5's unicode61 does for such text),
so both adapters give the same scores and the same order (ties by rowid).

Ranking every row that holds a query term is what cost recall its time: a question naming
common words matches thousands of rows at 100k and hundreds of thousands of postings at 1M.
So rows are ranked shorter first (``length_bound``, ``length_needed``; the postings are
keyed by ``(term, doclen, rid)``): BM25 gives a longer row less for the same frequency, so
once the shorter rows' k-th score is known, every row too long to reach it is left out,
and rows below that score are dropped before the sort (``ranked_sql``'s ``floor``). The
page is the same as ranking every match (``tests/store/test_pg_bm25.py`` and
``test_pg_length_steps.py`` check it against the plain statement and SQLite).

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
    where: tuple[str, list[Any]] | None, limit: int, max_len: int | None = None,
    floor: float | None = None,
) -> tuple[str, list[Any]]:
    """The statement ranking ``match``'s postings, best first (ties by rowid), returning
    (rowid, knowledge_id, score) rows that pass ``where`` (a ``sqlfilter`` clause over
    ``records r``), and its parameters.

    The scores come from the postings alone (index-only scans of the covering primary key);
    the rows are then looked up in ``records`` in score order, so the filter is checked on
    the best rows until ``limit`` pass, not on every match (a wide row each). With
    ``max_len``, only rows of at most that many tokens (a range of the postings' key,
    ``(term, doclen, rid)``): every posting of a row carries the row's length, so a row is
    scored whole or not at all, and ``length_needed`` says when the rows left out cannot
    reach the page. With ``floor``, rows scoring below it are dropped before the sort (a
    k-th score already seen: the page's is at least that, so none of them is on it);
    PostgreSQL applies the condition as the grouping's HAVING."""
    # Parameters in the statement's order: the score's, the query terms', the length cut's,
    # the groups', the floor's, the filter's, the limit.
    params: list[Any] = [context_weight, context_weight, avgdl or 1.0, match.terms, idf]
    short = ""
    if max_len is not None:
        short = " AND p.doclen <= %s"
        params.append(max_len)
    having = ""
    if not match.plain:
        having = " HAVING " + " OR ".join(
            f"COUNT(DISTINCT p.term) FILTER (WHERE p.term = ANY(%s)) = {len(g)}"
            for g in match.groups
        )
        params.extend(match.groups)
    above = ""
    if floor is not None:  # lowered by the margin: a row tying the floor survives rounding
        above = "s.score >= %s AND "
        params.append(floor - abs(floor) * _MARGIN - _MARGIN)
    clause, more = where if where is not None else ("TRUE", [])
    sql = (
        f"SELECT s.rid, r.knowledge_id, s.score FROM (SELECT p.rid, {_SCORE} AS score "
        "FROM postings p JOIN unnest(%s::text[], %s::float8[]) AS q(term, idf) "
        f"ON p.term = q.term{short} GROUP BY p.rid{having} "
        "ORDER BY score DESC, p.rid) s "
        f"JOIN records r ON r.rowid = s.rid WHERE {above}{clause} "
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


# A row is only left out if its bound is below the k-th score by this relative margin, so
# float rounding (the bound here, the sum in SQL) never drops a row that belongs on the page
# or ties into it (as ``fts_rank``).
_MARGIN = 1e-9


# Length steps. A row's score is at most the sum, over the query terms, of each term's most
# at the row's length (``fts_rank.term_bound``: BM25's term factor shrinks as the row grows,
# for b > 0). So once the rows of at most ``L`` tokens are ranked and the page's k-th score
# is known, every longer row is out of the page when that sum at ``L + 1`` is below it.
_LONGEST = 1 << 24  # no row is this long: past it, rank every length


def length_bound(
    match: Match, idf: list[float], stats: dict[str, TermStats], context_weight: float,
    avgdl: float, longer_than: int,
) -> float:
    """The most a row of more than ``longer_than`` tokens can score."""
    total = 0.0
    for term, weight in zip(match.terms, idf, strict=True):
        got = stats.get(term)
        if got is not None:
            most = got.max_own + context_weight * got.max_ctx
            total += fts_rank.term_bound(weight, most, max(got.min_len, longer_than + 1),
                                         avgdl)
    return total


def length_needed(
    match: Match, idf: list[float], stats: dict[str, TermStats], context_weight: float,
    avgdl: float, kth: float, ranked_to: int,
) -> int | None:
    """The least length ``L`` (at least ``ranked_to``) such that no row longer than ``L``
    can reach ``kth`` (the k-th score of the rows up to ``ranked_to`` tokens, so at most the
    page's k-th); None when no such length is in sight (every length must be ranked)."""

    def out(length: int) -> bool:
        bound = length_bound(match, idf, stats, context_weight, avgdl, length)
        return bound * (1 + _MARGIN) + _MARGIN < kth

    if out(ranked_to):
        return ranked_to
    low, high = ranked_to, max(2 * ranked_to, 1)
    while not out(high):  # doubling, then halving the gap: ~2·log2(L) bounds in Python
        if high >= _LONGEST:
            return None
        low, high = high, min(2 * high, _LONGEST)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if out(mid) else (mid, high)
    return high
