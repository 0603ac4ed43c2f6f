"""AMF: the AMCP Memory Format record (L6)."""

from amcp.amf.canonical import canonical_packb
from amcp.amf.ids import (
    build_record,
    checksum_for,
    knowledge_id_for,
    parse_record,
    seal,
    verify_integrity,
)
from amcp.amf.record import (
    AMFRecord,
    Annotation,
    Causal,
    Core,
    DecayModel,
    Distribution,
    Integrity,
    Meta,
)
from amcp.amf.types import DecayType, KnowledgeType, Lifecycle, Predicate

__all__ = [
    "AMFRecord",
    "Annotation",
    "Causal",
    "Core",
    "DecayModel",
    "DecayType",
    "Distribution",
    "Integrity",
    "KnowledgeType",
    "Lifecycle",
    "Meta",
    "Predicate",
    "build_record",
    "canonical_packb",
    "checksum_for",
    "knowledge_id_for",
    "parse_record",
    "seal",
    "verify_integrity",
]
