"""The best ``n`` BM25 matches of an OR query, exactly as FTS5 ranks them, without scoring
every match.

FTS5 has no top-k shortcut: ``ORDER BY bm25() LIMIT n`` computes bm25 for every matching
row (a docsize lookup and an instance walk each) and sorts. A query naming two or three
common words ("what do we know about kafka and rate limits?") matches 15k of 100k records,
and that scoring was most of recall's time. Yet the best matches are nearly always rows
holding *several* of the terms, a small set.

So the matches are split by which of the query terms a row holds (its *term set* S) and
each part is asked for separately, best parts first: ``"a" AND "b" NOT ("c")`` is exactly
the rows holding a and b but not c. FTS5 evaluates an AND by skipping through the
doclists, so a part costs about its own size, not the size of its terms' doclists. A part
is skipped once an upper bound on the score of any of its rows (from each term's idf, its
largest possible frequency and the shortest row in the table) is below the ``n``-th best
score already found: no row of it can make the page, nor tie into it.

Every part names every query term once, so FTS5 computes the same idf per term as for the
plain OR query; the terms a row lacks add exactly 0.0, and those it holds are summed in the
original order. So the scores are bit-identical to the plain query's and the page (ties by
rowid) is the same — ``tests/store/test_fts_rank.py`` checks that against the plain query.
When pruning cannot pay (one term, few matches, many terms, bounds too loose) the plain
query answers.
"""

from __future__ import annotations

import math
import re
import sqlite3
from collections.abc import Callable, Sequence
from itertools import combinations
from typing import NamedTuple

from amcp.store.tuning import Pruning

# FTS5's bm25() constants (fts5_aux.c); not configurable there either.
K1 = 1.2
B = 0.75

_QUOTED = r'"(?:[^"]|"")*"'
_OR_OF_TERMS = re.compile(rf"{_QUOTED}(?: OR {_QUOTED})*")
_TERM = re.compile(r'"((?:[^"]|"")*)"')

# When pruning is worth its extra statements: ``tuning.Pruning`` (min_rows, min_matches),
# passed in by the adapter.
# Term sets grow as 2^terms; the query side keeps at most 8 terms, most queries 2-4.
MAX_TERMS = 6
# Parts asked before giving up on pruning (the plain query then answers): each part is one
# statement, and one that must be asked is usually among the first few.
MAX_PARTS = 10
# Pruning gives up once its parts would score more than this share of the rows the plain
# query scores (so a query it cannot help costs at most this much more).
MAX_SPEND = 0.5
# A part is skipped only if its bound is below the n-th score by this relative margin, so
# float rounding in the bound can never skip a row that belongs on the page.
_MARGIN = 1e-9

# A scoped page is drawn from the scope's matches alone (``scoped_sql``) when the scopes
# hold at most this share of the store: each match then costs an index probe (about half a
# bm25) and only the scope's matches are scored, a loss only when the scope is most of it.
MAX_SCOPE_SHARE = 0.25

PLAIN_SQL = (
    "SELECT rowid, bm25(records_fts, 1.0, ?) AS score FROM records_fts "
    "WHERE records_fts MATCH ? ORDER BY score, rowid LIMIT ?"
)


def scoped_sql(scopes: int) -> str:
    """``PLAIN_SQL`` over the matches listed in any of ``scopes`` scopes (parameters:
    column weight, match, the scopes, limit): same scores, same order, ties by rowid.

    ``EXISTS`` keeps the scope check per match, after FTS5 found it: as ``rowid IN
    (SELECT ...)`` the planner drives FTS5 by the scope's rowids instead, one full-text
    query per row of the scope (seconds at 100k).
    """
    marks = ",".join("?" * scopes)
    return (
        "SELECT rowid, bm25(records_fts, 1.0, ?) AS score FROM records_fts "
        "WHERE records_fts MATCH ? AND EXISTS (SELECT 1 FROM record_scopes s "
        f"WHERE s.scope IN ({marks}) AND s.rid = records_fts.rowid) "
        "ORDER BY score, rowid LIMIT ?"
    )


class TermCounts(NamedTuple):
    """What the bound needs of one term: FTS5's document and instance counts, and its
    largest count in one row per column (``amcp.store.termpeaks``; -1: not known)."""

    docs: int
    instances: int
    peak_own: int = -1
    peak_ctx: int = -1

    def most(self, weights: tuple[float, float]) -> float:
        """Largest weighted frequency the term can have in one row. Without ceilings, one
        row holds at most every instance the other holders do not."""
        most = (self.instances - self.docs + 1) * max(weights)
        if self.peak_own >= 0:
            most = min(most, self.peak_own * weights[0] + self.peak_ctx * weights[1])
        return most


def or_terms(match: str) -> list[str] | None:
    """The terms of a MATCH expression that is a plain OR of quoted terms (as
    ``lexical.build_match`` writes it), or None for any other expression."""
    if not _OR_OF_TERMS.fullmatch(match):
        return None
    return [t.replace('""', '"') for t in _TERM.findall(match)]


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def part_expr(held: Sequence[str], lacked: Sequence[str]) -> str:
    """FTS5 expression for rows holding every term of ``held`` and none of ``lacked``."""
    expr = " AND ".join(_quote(t) for t in held)
    if lacked:
        expr = f"({expr}) NOT ({' OR '.join(_quote(t) for t in lacked)})"
    return expr


def _varints(blob: bytes) -> list[int]:
    """SQLite varints (big-endian 7-bit groups; a ninth byte carries 8 bits), as FTS5
    stores its totals."""
    out: list[int] = []
    i = 0
    while i < len(blob):
        value = 0
        for j in range(9):
            byte = blob[i]
            i += 1
            if j == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if byte < 0x80:
                break
        out.append(value)
    return out


def term_bound(idf: float, max_freq: float, shortest: int, avgdl: float) -> float:
    """Largest share of bm25 one term can give a row: bm25's term factor grows with the
    frequency and shrinks with the row's length, so take the most and the shortest."""
    if max_freq <= 0:
        return 0.0
    norm = K1 * (1 - B + B * shortest / avgdl) if avgdl > 0 else K1 * (1 - B)
    return idf * max_freq * (K1 + 1) / (max_freq + norm)


def idf(rows: int, hits: int) -> float:
    """bm25()'s idf, floor included (fts5_aux.c)."""
    value = math.log((rows - hits + 0.5) / (hits + 0.5))
    return value if value > 0.0 else 1e-6


def shortest_row(db: sqlite3.Connection, after_rowid: int, columns: int) -> int:
    """A lower bound on the token count of the FTS rows after ``after_rowid`` (2**30 if
    there are none).

    Each docsize row is one varint per column. Rows whose every count fits one byte (under
    128 tokens a column) are summed in SQL — ``instr`` of a byte in the 0..127 table is its
    value plus one — so 100k rows cost one statement, not a Python loop. A longer row holds
    at least 128 tokens, so 128 bounds it.
    """
    table = bytes(range(128))
    cols = " + ".join(f"instr(:t, substr(sz, {c + 1}, 1))" for c in range(columns))
    row = db.execute(
        f"SELECT MIN({cols}) - {columns}, MAX(length(sz) > {columns}) "
        "FROM records_fts_docsize WHERE id > :after",
        {"t": table, "after": after_rowid},
    ).fetchone()
    least, any_long = row if row else (None, None)
    bound = 1 << 30
    if least is not None:
        bound = min(bound, int(least))
    if any_long:
        bound = min(bound, 128)
    return max(bound, 0)


def _vocab(db: sqlite3.Connection) -> Callable[[Sequence[str]], dict[str, TermCounts]]:
    def lookup(terms: Sequence[str]) -> dict[str, TermCounts]:
        marks = ",".join("?" * len(terms))
        rows = db.execute(
            f"SELECT term, doc, cnt FROM records_fts_vocab WHERE term IN ({marks})", list(terms)
        ).fetchall()
        return {t: TermCounts(int(d), int(c)) for t, d, c in rows}

    return lookup


class _Collection(NamedTuple):
    """What pruning needs to know of the table and the query's terms."""

    terms: tuple[str, ...]
    rows: int
    columns: int
    avgdl: float
    stats: dict[str, TermCounts]


def _collection(
    db: sqlite3.Connection,
    match: str,
    n: int,
    weights: tuple[float, float],
    vocab: Callable[[Sequence[str]], dict[str, TermCounts]] | None,
    worth: Pruning,
) -> _Collection | None:
    """The table's totals and the terms' counts, or None where pruning cannot be exact or
    is not worth it."""
    terms = or_terms(match)
    if terms is None or not 2 <= len(terms) <= MAX_TERMS or len(set(terms)) != len(terms):
        return None
    if min(weights) < 0 or n < 1:
        return None  # negative column weights break the bound's monotonicity
    if db.in_transaction:
        return None  # FTS5 writes its row totals at commit: in a transaction they lag
    blob = db.execute("SELECT block FROM records_fts_data WHERE id = 1").fetchone()
    totals = _varints(bytes(blob[0])) if blob else []
    if len(totals) < 2 or totals[0] < worth.min_rows:
        return None
    stats = (vocab or _vocab(db))(terms)
    if len(stats) != len(terms):  # a term FTS5 would tokenise differently: not ours to bound
        return None
    if sum(c.docs for c in stats.values()) < worth.min_matches:
        return None
    rows = totals[0]
    return _Collection(tuple(terms), rows, len(totals) - 1, sum(totals[1:]) / rows, stats)


def _parts(
    col: _Collection, weights: tuple[float, float], floor: int
) -> list[tuple[float, tuple[str, ...]]]:
    """Every subset of the terms with its score bound, best bound first; ties keep the
    larger sets first (cheaper AND parts), each in the query's term order."""
    bound = {
        t: term_bound(idf(col.rows, c.docs), c.most(weights), floor, col.avgdl)
        for t, c in col.stats.items()
    }
    parts = [
        (sum(bound[t] for t in held), held)
        for size in range(len(col.terms), 0, -1)
        for held in combinations(col.terms, size)
    ]
    parts.sort(key=lambda p: -p[0])
    return parts


def ranked(
    db: sqlite3.Connection,
    match: str,
    n: int,
    weights: tuple[float, float],
    shortest: Callable[[int], int],
    vocab: Callable[[Sequence[str]], dict[str, TermCounts]] | None = None,
    worth: Pruning | None = None,
) -> list[tuple[int, float]] | None:
    """The best ``n`` ``(rowid, bm25)`` of ``match`` (bm25 lower-is-better, ties by rowid),
    exactly as ``PLAIN_SQL`` gives them, or None where pruning is not worth it (the caller
    then runs ``PLAIN_SQL``). ``shortest(columns)`` bounds the rows' token counts from below
    (``shortest_row`` over the table, cached by the caller; 0 is always safe);
    ``vocab(terms)`` gives each known term's counts (without ceilings by default);
    ``worth``: from what size pruning pays (``Pruning()`` by default)."""
    col = _collection(db, match, n, weights, vocab, worth or Pruning())
    if col is None:
        return None
    rows, stats, terms = col.rows, col.stats, col.terms
    # What scoring costs, in rows scored. The plain query scores every match; a part about
    # its own rows, guessed as if terms occurred independently, scaled by how far the first
    # part (every term) outgrew that guess (query terms go together: "rate limits"), and
    # at most its rarest term's count. A one-term part walks that term's whole doclist.
    # Pruning gives up (the plain query answers) before its parts would cost MAX_SPEND of
    # the plain query, so a query it cannot help costs little more than before.
    share = {t: min(c.docs / rows, 1.0) for t, c in stats.items()}
    budget = MAX_SPEND * rows * (1.0 - math.prod(1.0 - p for p in share.values()))
    together = 1.0
    spent = 0.0
    found: list[tuple[int, float]] = []
    for asked, (top, held) in enumerate(_parts(col, weights, shortest(col.columns))):
        if len(found) >= n:
            nth = -found[n - 1][1]  # the n-th best score, as a positive number
            if top * (1 + _MARGIN) + _MARGIN < nth:
                return found[:n]  # this part and every later one are out of reach
        lacked = [t for t in terms if t not in held]
        guess = rows * math.prod(share[t] for t in held)
        guess *= math.prod(1.0 - share[t] for t in lacked)
        if len(held) == 1:
            cost = float(stats[held[0]].docs)
        else:
            cost = min(guess * together, *(stats[t].docs for t in held))
        spent += cost
        if asked == MAX_PARTS or (asked and spent > budget):
            return None
        got = db.execute(PLAIN_SQL, [weights[1], part_expr(held, lacked), n]).fetchall()
        if asked == 0:
            together = max(1.0, len(got) / max(guess, 1.0))
        if got:
            found = sorted([*found, *got], key=lambda r: (r[1], r[0]))[:n]
    return found[:n]
