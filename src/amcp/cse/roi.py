"""Memory ROI (upstream L4 memory_roi_formula).

    ROI = relevance × confidence × recency_factor / token_cost
    recency_factor = 1 / (1 + decay_rate × days_since_access)
    token_cost = ceil(bytes of the serialized AMF / 4)

- relevance: cosine similarity of the task and the record, clamped to [0, 1].
- confidence: ``core.confidence`` moved by the learned trust weight
  (``amcp.evolution.decay.trust``; identity at the default weight). The time-decay factor is
  *not* applied here: recency already discounts time, and counting it twice would bury
  slow-decaying knowledge.
- days_since_access: since the last recorded access, else since creation. Building a pack
  reads without touching, so the same store and clock always give the same pack.
- decay_rate: upstream fixes KT-FACT and KT-PITFALL (no decay, recency 1), KT-CONTEXT 0.1
  and KT-PATTERN 0.01. It leaves the rest open; we follow the half-lives (DECISION 90 d,
  PRINCIPLE 365 d) with 0.005 and 0.001, and give KT-SIGNAL 0 because an open signal must
  not fade from view (its decay is event-triggered, not timed).
"""

from __future__ import annotations

import math

from amcp.amf.types import KnowledgeType

BYTES_PER_TOKEN = 4

DECAY_RATE: dict[KnowledgeType, float] = {
    KnowledgeType.FACT: 0.0,
    KnowledgeType.PITFALL: 0.0,
    KnowledgeType.CONTEXT: 0.1,
    KnowledgeType.PATTERN: 0.01,
    KnowledgeType.DECISION: 0.005,
    KnowledgeType.PRINCIPLE: 0.001,
    KnowledgeType.SIGNAL: 0.0,
}
ROI_DIGITS = 9  # ROI is rounded so float noise in the last bits cannot change a digest


def token_cost(nbytes: int) -> int:
    return max(1, math.ceil(nbytes / BYTES_PER_TOKEN))


def recency_factor(ktype: KnowledgeType, days_since_access: float) -> float:
    return 1.0 / (1.0 + DECAY_RATE[ktype] * max(0.0, days_since_access))


def roi(relevance: float, confidence: float, recency: float, tokens: int) -> float:
    rel = min(1.0, max(0.0, relevance))
    return round(rel * confidence * recency / max(1, tokens), ROI_DIGITS)


__all__ = ["BYTES_PER_TOKEN", "DECAY_RATE", "ROI_DIGITS", "recency_factor", "roi", "token_cost"]
