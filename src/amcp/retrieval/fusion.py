"""Fusing lexical and vector rankings, then a rerank on relevance, recency and type.

Reciprocal-rank fusion (Cormack et al., 2009) needs no score calibration between BM25 and
cosine, which differ in scale per query. The rerank adds small, bounded priors so that they
reorder near-ties but never lift an irrelevant record over a relevant one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from amcp.amf.types import KnowledgeType

RRF_K = 60

# How much each type is worth when relevance ties: pitfalls and facts first (upstream
# CORE_PRINCIPLES), signals and passing context last.
TYPE_PRIOR: dict[KnowledgeType, float] = {
    KnowledgeType.PITFALL: 1.0,
    KnowledgeType.FACT: 0.9,
    KnowledgeType.PRINCIPLE: 0.85,
    KnowledgeType.DECISION: 0.8,
    KnowledgeType.PATTERN: 0.7,
    KnowledgeType.CONTEXT: 0.6,
    KnowledgeType.SIGNAL: 0.5,
}


class Candidate(NamedTuple):
    """A NamedTuple, not a dataclass: the hooks' lexical path imports this module, and
    ``import dataclasses`` would cost each hook process more than its query."""

    knowledge_id: str
    fused: float
    lexical_rank: int | None
    vector_rank: int | None
    vector_score: float | None


def rrf(
    lexical: Sequence[str],
    vector: Sequence[tuple[str, float]],
    *,
    lexical_weight: float = 1.0,
    vector_weight: float = 1.0,
    k: int = RRF_K,
) -> list[Candidate]:
    lex_rank = {kid: i for i, kid in enumerate(lexical)}
    vec_rank = {kid: i for i, (kid, _s) in enumerate(vector)}
    vec_score = dict(vector)
    out = []
    for kid in dict.fromkeys([*lexical, *(k for k, _s in vector)]):
        score = 0.0
        if kid in lex_rank:
            score += lexical_weight / (k + lex_rank[kid] + 1)
        if kid in vec_rank:
            score += vector_weight / (k + vec_rank[kid] + 1)
        out.append(Candidate(kid, score, lex_rank.get(kid), vec_rank.get(kid), vec_score.get(kid)))
    out.sort(key=lambda c: (-c.fused, c.knowledge_id))
    return out


def coverage(terms: Sequence[str], record_terms: str) -> float:
    """Share of ``terms`` among a record's own index terms (its ``index_text``, not context).

    Used for the query's *common* terms (``lexical.common_terms``): a name that occurs in half
    the records ("What did Caroline research?") is worthless to BM25, yet among candidates
    that are otherwise alike the ones that say "Caroline" are the better answers.
    """
    if not terms:
        return 0.0
    own = set(record_terms.split())
    return sum(1 for t in terms if t in own) / len(terms)


def boost_coverage(
    fused: Sequence[Candidate], shares: dict[str, float], weight: float
) -> list[Candidate]:
    """Scale each fused score by ``1 + weight * share`` and re-sort (ties by id, as ``rrf``)."""
    out = [
        c._replace(fused=c.fused * (1.0 + weight * shares.get(c.knowledge_id, 0.0))) for c in fused
    ]
    out.sort(key=lambda c: (-c.fused, c.knowledge_id))
    return out


class Priors(NamedTuple):
    """The rerank's bounded priors for one record: each the signed share it adds to the
    factor the fused score is multiplied by (the web inspector's score breakdown)."""

    recency: float
    type: float
    trust: float

    @property
    def factor(self) -> float:
        return 1.0 + self.recency + self.type + self.trust


def priors(
    *,
    age_days: float,
    ktype: KnowledgeType,
    weight: float,
    recency_half_life_days: float = 180.0,
    prior_strength: float = 0.08,
) -> Priors:
    recency = math.exp(-math.log(2) * max(age_days, 0.0) / recency_half_life_days)
    return Priors(
        prior_strength * (recency - 0.5),
        prior_strength * (TYPE_PRIOR.get(ktype, 0.6) - 0.75),
        prior_strength * (weight - 0.5),
    )


def rerank_score(
    fused: float,
    *,
    age_days: float,
    ktype: KnowledgeType,
    weight: float,
    recency_half_life_days: float = 180.0,
    prior_strength: float = 0.08,
) -> float:
    """Scale the fused score by bounded priors (at most ±``prior_strength`` each)."""
    p = priors(
        age_days=age_days, ktype=ktype, weight=weight,
        recency_half_life_days=recency_half_life_days, prior_strength=prior_strength,
    )
    return fused * p.factor
