"""BM25 over the postings table, scored exactly as SQLite's FTS5 ``bm25()`` scores.

The SQLite adapter ranks with FTS5 (``fts_rank``): for each query phrase, idf (with FTS5's
floor) times ``f·(k1+1) / (f + k1·(1 − b + b·D/avgdl))``, where ``f`` is the column-weighted
frequency (own text 1.0, context ``context_weight``), ``D`` the row's tokens in both columns
and ``avgdl`` the average over every lexical row. Here the same sum is one SQL aggregate over
the query terms' postings, with the same constants (``fts_rank.K1``, ``fts_rank.B``), the
same idf (``fts_rank.idf``) and the same pre-tokenised text (``amcp.retrieval.lexical``
writes it; this adapter splits it on whitespace, as FTS5's unicode61 does for such text),
so both adapters give the same scores and the same order (ties by rowid).

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
# per column as FTS5 weights it; ``q`` is the query's (term, idf) list.
_K1, _B = fts_rank.K1, fts_rank.B
_NORM = f"{_K1} * (1 - {_B} + {_B} * p.doclen / %s)"
_SCORE = (
    f"SUM(q.idf * (p.tf_own + %s * p.tf_ctx) * {_K1 + 1} "
    f"/ ((p.tf_own + %s * p.tf_ctx) + {_NORM}))"
)


def ranked_sql(
    match: Match, idf: list[float], context_weight: float, avgdl: float,
    where: tuple[str, list[Any]] | None, limit: int,
) -> tuple[str, list[Any]]:
    """The statement ranking ``match``'s postings, best first (ties by rowid), returning
    (rowid, knowledge_id, score) rows that pass ``where`` (a ``sqlfilter`` clause over
    ``records r``), and its parameters."""
    params: list[Any] = [context_weight, context_weight, avgdl or 1.0, match.terms, idf]
    having = ""
    if not match.plain:
        having = " HAVING " + " OR ".join(
            f"COUNT(DISTINCT p.term) FILTER (WHERE p.term = ANY(%s)) = {len(g)}"
            for g in match.groups
        )
        params.extend(match.groups)
    clause, more = where if where is not None else ("TRUE", [])
    sql = (
        f"SELECT s.rid, r.knowledge_id, s.score FROM (SELECT p.rid, {_SCORE} AS score "
        "FROM postings p JOIN unnest(%s::text[], %s::float8[]) AS q(term, idf) "
        f"ON p.term = q.term GROUP BY p.rid{having}) s "
        f"JOIN records r ON r.rowid = s.rid WHERE {clause} "
        "ORDER BY s.score DESC, s.rid LIMIT %s"
    )
    return sql, [*params, *more, limit]
