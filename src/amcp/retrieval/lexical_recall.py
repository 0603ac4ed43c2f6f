"""The lexical side of recall, defined once: ``HybridSearcher`` runs it over a store's
``LexicalIndex``, and the coding-agent hooks' read-only ``FastReader`` runs the same steps
over its own narrow reads of the SQLite file, so both give the same answers by
construction rather than by a test that keeps two copies in step.

The steps: the query's terms, the document frequencies to prune them by (the scopes' own
statistics for a scoped recall, else the whole index's), BM25 over what is left (re-scored
with the scopes' statistics when there are some), and after fusion a boost for candidates
whose own text covers the query's too-common terms.

Light on purpose: stdlib ``typing`` and the pure ranking modules only — a hook is a new
process per prompt, and this module is on its start-up path. The filter a backend searches
with is the backend's own type (``RecordFilter`` for a store, scopes and a clock for the
fast reader); this module only passes it through.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple, Protocol, TypeVar

from amcp.retrieval.fusion import Candidate, boost_coverage, coverage
from amcp.retrieval.lexical import (
    bm25_scores,
    build_match,
    common_terms,
    prune_terms,
    query_terms,
    rescore,
)

if TYPE_CHECKING:
    from amcp.store.termstats import TermStats

F_contra = TypeVar("F_contra", contravariant=True)
F = TypeVar("F")


class LexicalTuning(NamedTuple):
    """The lexical and fusion knobs of recall; ``SearchTuning`` takes its defaults from
    ``LEXICAL_DEFAULTS``. Chosen on LoCoMo (bench/recall_locomo.py)."""

    candidates: int = 50  # per ranker, before fusion
    rrf_k: int = 10  # LoCoMo: 10 beat 20 by ~1 R@10, 60 by ~3 (rank-1 agreement matters more)
    lexical_weight: float = 1.25  # LoCoMo: words beat meaning slightly on conversational memory
    max_term_share: float = 0.2  # query terms in more of the records than this are dropped
    context_weight: float = 0.5  # BM25 weight of context words vs the record's own (LoCoMo-tuned)
    # Fused score x (1 + this x share of the query's too-common terms in the record's own
    # text): LoCoMo +1.3 R@10, +2.1 R@5 on conversations 0-4, +1.5 / +2.5 on 5-9.
    coverage_weight: float = 0.4
    # A scoped recall re-scores this many of the index's best matches with the scope's own
    # term statistics (the index ranks with the whole store's) and keeps the best
    # ``candidates``. LoCoMo dev (conversations 0-4): 50 → 76.8 R@10, 100 → 77.2, 200 → 77.0.
    scope_depth: int = 100


LEXICAL_DEFAULTS = LexicalTuning()


class LexicalReads(Protocol[F_contra]):
    """What the pipeline reads of a lexical index (a subset of ``store.base.LexicalIndex``,
    generic in the backend's filter type)."""

    def term_doc_freq(self, terms: Sequence[str]) -> tuple[dict[str, int], int]: ...

    def search_lexical(
        self, terms: str, flt: F_contra, k: int, *, context_weight: float = 1.0
    ) -> list[tuple[str, float]]: ...

    def lexical_texts(self, knowledge_ids: Sequence[str]) -> dict[str, tuple[str, str]]: ...

    def own_terms(self, knowledge_ids: Sequence[str]) -> dict[str, str]: ...


class LexicalHits(NamedTuple):
    hits: list[tuple[str, float]]  # best first
    common: list[str]  # the query's terms pruned as too common (for ``with_coverage``)
    own: dict[str, str]  # own terms of the records a scoped re-scoring already read


def lexical_hits(
    index: LexicalReads[F],
    query: str,
    flt: F,
    k: int,
    tuning: LexicalTuning,
    scope_stats: Callable[[Sequence[str]], TermStats | None],
) -> LexicalHits:
    """BM25 over the query's informative terms (``prune_terms``). ``scope_stats`` gives
    the statistics of the scopes the recall is limited to, or None to rank with the whole
    index's."""
    terms = query_terms(query)
    local = scope_stats(terms) if terms else None
    doc_freq, total = (local.doc_freq, local.docs) if local else index.term_doc_freq(terms)
    kept = prune_terms(terms, doc_freq, total, max_share=tuning.max_term_share)
    common = common_terms(terms, doc_freq, kept)
    if not kept:
        return LexicalHits([], common, {})
    depth = k if local is None else max(k, tuning.scope_depth)
    hits = index.search_lexical(build_match(kept), flt, depth,
                                context_weight=tuning.context_weight)
    if local is None or not hits:
        return LexicalHits(hits, common, {})
    texts = index.lexical_texts([kid for kid, _s in hits])
    scores = bm25_scores(kept, texts, local.doc_freq, local.docs, local.avg_len,
                         context_weight=tuning.context_weight)
    own = {kid: own for kid, (own, _context) in texts.items()}
    return LexicalHits(rescore(hits, scores)[:k], common, own)


def with_coverage(
    fused: list[Candidate], found: LexicalHits, index: LexicalReads[F], tuning: LexicalTuning
) -> list[Candidate]:
    """``fused`` with candidates whose own text covers the query's common terms lifted;
    texts the scoped re-scoring read are not read again."""
    if not (found.common and tuning.coverage_weight and fused):
        return fused
    ids = [c.knowledge_id for c in fused]
    own = {kid: found.own[kid] for kid in ids if kid in found.own}
    own.update(index.own_terms([kid for kid in ids if kid not in own]))
    shares = {kid: coverage(found.common, terms) for kid, terms in own.items()}
    return boost_coverage(fused, shares, tuning.coverage_weight)


__all__ = ["LEXICAL_DEFAULTS", "LexicalHits", "LexicalReads", "LexicalTuning", "lexical_hits",
           "with_coverage"]
