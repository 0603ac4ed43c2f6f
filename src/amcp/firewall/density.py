"""Term-density outliers: a text built from the words a query uses, repeated.

Keyword stuffing buys lexical rank (each repeat adds to BM25 until it saturates) and drags
an embedding toward the topic. Honest memories rarely repeat content words: on LoCoMo's
5,882 turns none of those with 12+ content tokens has a repeat share above 0.30; the
stuffed entries of agent-memory-integrity's retrieval-hijack family are at 0.38–0.56.
"""

from __future__ import annotations

from collections import Counter

MIN_TOKENS = 12  # a short sentence may say a word twice without being stuffed
MAX_REPEAT_SHARE = 0.30


def repeat_share(text: str) -> float:
    """1 − distinct/total over the text's content tokens (stop words dropped, stemmed, the
    same tokens the lexical index holds); 0.0 for texts under ``MIN_TOKENS``."""
    from amcp.retrieval.lexical import tokens

    toks = tokens(text, drop_stop=True)
    if len(toks) < MIN_TOKENS:
        return 0.0
    return 1.0 - len(Counter(toks)) / len(toks)


def stuffed(text: str) -> bool:
    return repeat_share(text) > MAX_REPEAT_SHARE


def near_duplicate_key(text: str) -> frozenset[str]:
    """What two texts must share to be collapsed in one answer (their content-token set)."""
    from amcp.retrieval.lexical import tokens

    return frozenset(tokens(text, drop_stop=True))


MIN_COLLAPSED = 4  # "thanks!" said twice is two turns, not a flood


def similar(a: frozenset[str], b: frozenset[str], threshold: float = 0.9) -> bool:
    if min(len(a), len(b)) < MIN_COLLAPSED:
        return False
    return len(a & b) / len(a | b) >= threshold


__all__ = ["MAX_REPEAT_SHARE", "near_duplicate_key", "repeat_share", "similar", "stuffed"]
