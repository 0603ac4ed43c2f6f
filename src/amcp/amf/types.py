"""The closed vocabularies of AMF (upstream L6 amf_schema, L5 knowledge_lifecycle)."""

from __future__ import annotations

from enum import StrEnum


class KnowledgeType(StrEnum):
    FACT = "KT-FACT"
    PATTERN = "KT-PATTERN"
    CONTEXT = "KT-CONTEXT"
    DECISION = "KT-DECISION"
    PITFALL = "KT-PITFALL"
    PRINCIPLE = "KT-PRINCIPLE"
    SIGNAL = "KT-SIGNAL"


class Predicate(StrEnum):
    REQUIRES = "REQUIRES"
    CAUSES = "CAUSES"
    EQUALS = "EQUALS"
    IMPLIES = "IMPLIES"
    CONFLICTS_WITH = "CONFLICTS_WITH"
    SUPERSEDES = "SUPERSEDES"
    CORRELATES_WITH = "CORRELATES_WITH"
    OPTIMIZED_BY = "OPTIMIZED_BY"
    VERIFIED_BY = "VERIFIED_BY"
    INVALIDATED_BY = "INVALIDATED_BY"


class Lifecycle(StrEnum):
    DRAFT = "draft"
    ACTIVE = "active"
    SUPERSEDED = "superseded"
    INVALIDATED = "invalidated"
    ARCHIVED = "archived"
    # Not an upstream lifecycle state: the node's marker for a privacy-erased tombstone.
    PURGED = "purged"


class DecayType(StrEnum):
    NONE = "none"
    LINEAR = "linear"
    EXPONENTIAL = "exponential"
    EVENT_TRIGGERED = "event_triggered"


class Locality(StrEnum):
    LOCAL = "local"
    EDGE = "edge"
    CLOUD = "cloud"
    FEDERATED = "federated"


class SyncPriority(StrEnum):
    IMMEDIATE = "immediate"
    EVENTUAL = "eventual"
    MANUAL = "manual"


class AccessTier(StrEnum):
    HOT = "hot"
    WARM = "warm"
    COLD = "cold"


# Upstream per-type decay defaults (L6 knowledge_types[*].decay).
DEFAULT_DECAY: dict[KnowledgeType, tuple[DecayType, float | None]] = {
    KnowledgeType.FACT: (DecayType.NONE, None),
    KnowledgeType.PATTERN: (DecayType.EXPONENTIAL, 30.0),
    KnowledgeType.CONTEXT: (DecayType.EXPONENTIAL, 7.0),
    KnowledgeType.DECISION: (DecayType.EXPONENTIAL, 90.0),
    KnowledgeType.PITFALL: (DecayType.NONE, None),
    KnowledgeType.PRINCIPLE: (DecayType.EXPONENTIAL, 365.0),
    KnowledgeType.SIGNAL: (DecayType.EVENT_TRIGGERED, None),
}

CONFIDENCE_FLOOR: dict[KnowledgeType, float] = {
    KnowledgeType.FACT: 0.9,
    KnowledgeType.PATTERN: 0.6,
    KnowledgeType.CONTEXT: 0.5,
    KnowledgeType.DECISION: 0.7,
    KnowledgeType.PITFALL: 0.95,
    KnowledgeType.PRINCIPLE: 0.8,
    KnowledgeType.SIGNAL: 0.0,
}
