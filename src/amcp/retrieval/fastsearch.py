"""Lexical recall for the coding-agent hooks: ``Memory.recall(query, k=k, scope=scopes)``
without an embedder, over the hooks' read-only ``store.fastread.FastReader`` — the same
pipeline (``lexical_recall``), fusion (``fusion.rrf``) and rerank (``fusion.rerank_score``)
as ``HybridSearcher``, with the reader's verified reads underneath.

Light imports only: a hook is a new process per prompt (docs/hooks.md has its budget).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from amcp.amf.timefmt import parse_ts
from amcp.amf.types import KnowledgeType
from amcp.retrieval.fusion import rerank_score, rrf
from amcp.retrieval.lexical_recall import LEXICAL_DEFAULTS, lexical_hits, with_coverage

if TYPE_CHECKING:
    from amcp.store.fastread import FastReader, FastRecord

_DAY = 86_400.0


def fast_search(reader: FastReader, query: str, scopes: Sequence[str], k: int, *,
                now: float | None = None) -> list[FastRecord]:
    """The ``k`` best active records in ``scopes`` (plus ``*``; all when empty) for
    ``query``, each verified by the reader as it is handed out."""
    t = LEXICAL_DEFAULTS
    now = time.time() if now is None else now
    pool = max(t.candidates, k)
    found = lexical_hits(reader, query, (scopes, now), pool, t,
                         lambda terms: reader.scope_stats(scopes, terms))
    fused = rrf([kid for kid, _s in found.hits], [], lexical_weight=t.lexical_weight,
                k=t.rrf_k)
    fused = with_coverage(fused, found, reader, t)
    scored: list[tuple[float, str]] = []
    for cand in fused:
        ktype, weight, created = reader.candidate(cand.knowledge_id)
        if created is None:
            continue
        age = (now - parse_ts(created).timestamp()) / _DAY
        score = rerank_score(cand.fused, age_days=age, ktype=KnowledgeType(ktype),
                             weight=weight)
        scored.append((score, cand.knowledge_id))
    scored.sort(key=lambda sc: (-sc[0], sc[1]))
    return reader.records([kid for _s, kid in scored[:k]], scopes, now)


__all__ = ["fast_search"]
