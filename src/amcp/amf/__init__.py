"""AMF: the AMCP Memory Format record (L6).

The names below load on first use (PEP 562), so importing one light submodule — say
``amcp.amf.types`` or ``amcp.amf.canonical`` — does not also load the record classes,
the id/checksum code and their imports. Per-prompt hooks count these milliseconds.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

    from amcp.amf.canonical import canonical_packb
    from amcp.amf.ids import (
        build_record,
        checksum_for,
        envelope_for,
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

_WHERE = {
    "canonical_packb": "canonical",
    **dict.fromkeys(("build_record", "checksum_for", "envelope_for", "knowledge_id_for",
                     "parse_record", "seal", "verify_integrity"), "ids"),
    **dict.fromkeys(("AMFRecord", "Annotation", "Causal", "Core", "DecayModel",
                     "Distribution", "Integrity", "Meta"), "record"),
    **dict.fromkeys(("DecayType", "KnowledgeType", "Lifecycle", "Predicate"), "types"),
}

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
    "envelope_for",
    "knowledge_id_for",
    "parse_record",
    "seal",
    "verify_integrity",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'amcp.amf' has no attribute {name!r}")
    return getattr(import_module(f"amcp.amf.{module}"), name)
