"""Lexical analysis shared by indexing and querying (FTS5/BM25, tsvector later).

FTS5's unicode61 tokenizer treats a run of CJK characters as one token, which makes Chinese
text unsearchable by word. We pre-tokenise in Python instead: lowercase, strip accents, split
Latin words, light English stemming, and turn CJK runs into overlapping character bigrams (plus
the unigram for single characters) — the standard trick for CJK without a dictionary.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping, Sequence

from amcp.store import fts_rank

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# Compiled on first use through re's cache, not at import: its big character ranges cost
# ~1-2 ms to compile, which a prompt hook (a new process, ASCII text mostly) need not pay.
_CJK = r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+"

# Query-side stop words only: indexing keeps everything so phrase-y facts stay findable.
STOP = frozenset(
    """
    a an and are as at be been but by can could did do does doing for from had has have he
    her hers him his how i if in into is it its me my myself no not of on or our ours she
    so than that the their them then there these they this those to too very was we were
    what when where which while who whom why will with would you your yours about after
    again all am any because before being both each few further here just more most nor
    once only other own same should some such up down out over under until off also ever
    something anything
    """.split()  # noqa: SIM905 - a word list reads better as text
)


def _stem(word: str) -> str:
    """Tiny suffix stripper: enough to match 'adopting'/'adopted'/'adopts' on 'adopt'."""
    if len(word) <= 4 or not word.isascii():
        return word
    for suffix in ("ingly", "edly", "ings", "ing", "ies", "ied", "ed", "es", "ly", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            stem = word[: -len(suffix)]
            if suffix in ("ies", "ied"):
                stem += "y"
            return stem
    return word


def _fold(text: str) -> str:
    """Lowercase, accents stripped. ASCII text has no accents to strip and NFKD leaves it
    as it is, so it skips the per-character pass (most stored text: about a third of
    ``tokens`` on a typical note, 31-36 against 19-20 µs)."""
    if text.isascii():
        return text.lower()
    text = unicodedata.normalize("NFKD", text.lower())
    return "".join(c for c in text if not unicodedata.combining(c))


def tokens(text: str, *, drop_stop: bool = False) -> list[str]:
    out: list[str] = []
    for chunk in _WORD.findall(_fold(text)):
        start = 0
        for m in () if chunk.isascii() else re.finditer(_CJK, chunk):
            out.extend(_latin(chunk[start : m.start()], drop_stop))
            run = m.group()
            if len(run) == 1:
                out.append(run)
            else:
                out.extend(run[i : i + 2] for i in range(len(run) - 1))
            start = m.end()
        out.extend(_latin(chunk[start:], drop_stop))
    return out


def _latin(word: str, drop_stop: bool) -> list[str]:
    if not word or (drop_stop and word in STOP):
        return []
    return [_stem(word)]


def index_terms(text: str) -> str:
    """The string stored in the FTS column."""
    return " ".join(tokens(text))


def query_terms(text: str, *, max_terms: int = 32) -> list[str]:
    """The distinct terms of a query, stop words dropped (kept if nothing else is left)."""
    seen = list(dict.fromkeys(tokens(text, drop_stop=True)))
    if not seen:  # a query of only stop words still deserves an answer
        seen = list(dict.fromkeys(tokens(text)))
    return seen[:max_terms]


def build_match(terms: Sequence[str]) -> str:
    """An FTS5 MATCH expression: OR of the terms, each quoted.

    Quoting makes every term a literal string, so user text can never be read as FTS5 syntax
    (NEAR, column filters, '*').
    """
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


def match_query(text: str, *, max_terms: int = 32) -> str:
    return build_match(query_terms(text, max_terms=max_terms))


def prune_terms(
    terms: Sequence[str],
    doc_freq: dict[str, int],
    total: int,
    *,
    max_share: float = 0.2,
    keep: int = 8,
) -> list[str]:
    """Keep the rarest ``keep`` terms and drop those found in more than ``max_share`` of the
    documents (but never all: the two rarest stay). Terms absent from the index match nothing
    and are dropped. Common terms dominate BM25's cost and barely move its ranking."""
    present = sorted((doc_freq[t], t) for t in terms if doc_freq.get(t))
    if not present:
        return []
    limit = max(total * max_share, 1.0)
    rare = [t for df, t in present if df <= limit]
    chosen = rare if len(rare) >= 2 else [t for _df, t in present[:2]]
    return chosen[:keep]


def common_terms(terms: Sequence[str], doc_freq: dict[str, int], kept: Sequence[str]) -> list[str]:
    """Query terms the index knows but BM25 was not asked about (``prune_terms`` left them
    out as too common, or past its cap). They cannot rank — BM25 gives a term in half the
    records no weight — but they still say what the query is about: see ``coverage``."""
    chosen = set(kept)
    return [t for t in terms if doc_freq.get(t) and t not in chosen]


# FTS5's bm25() constants, shared with the store's pruned ranking, so a re-scored ranking
# is FTS5's own under other collection statistics.
BM25_K1, BM25_B = fts_rank.K1, fts_rank.B


def bm25_scores(
    terms: Sequence[str],
    texts: Mapping[str, tuple[str, str]],
    doc_freq: Mapping[str, int],
    docs: int,
    avg_len: float,
    *,
    context_weight: float = 1.0,
) -> dict[str, float]:
    """FTS5's ``bm25(records_fts, 1.0, context_weight)`` of each record in ``texts`` (its
    own terms and its context, as indexed), with the collection statistics given instead of
    the whole table's — a scope's (``amcp.store.termstats``). Higher is better.

    Same formula as FTS5: IDF ``log((N - n + 0.5) / (n + 0.5))`` (floored at 1e-6, as FTS5
    does for terms in over half the documents), term frequency weighted per column, document
    length in tokens over both columns against the average.
    """
    idf: dict[str, float] = {}
    for term in dict.fromkeys(terms):
        n = doc_freq.get(term, 0)
        value = math.log((docs - n + 0.5) / (n + 0.5)) if docs > 0 else 0.0
        idf[term] = value if value > 0 else 1e-6
    out: dict[str, float] = {}
    for key, (own_text, context) in texts.items():
        own, ctx = own_text.split(), context.split()
        length = len(own) + len(ctx)
        norm = BM25_K1 * (1 - BM25_B + BM25_B * length / avg_len) if avg_len > 0 else BM25_K1
        score = 0.0
        for term, weight in idf.items():
            freq = own.count(term) + context_weight * ctx.count(term)
            if freq:
                score += weight * freq * (BM25_K1 + 1) / (freq + norm)
        out[key] = score
    return out


def rescore(
    hits: Sequence[tuple[str, float]], scores: Mapping[str, float]
) -> list[tuple[str, float]]:
    """``hits`` re-ranked by ``scores`` (those without one dropped); ties keep their order
    in ``hits`` (FTS5's: score, then rowid), so equal statistics give FTS5's ranking."""
    kept = [(kid, scores[kid]) for kid, _s in hits if kid in scores]
    return sorted(kept, key=lambda hit: -hit[1])
