"""A verified summary of a stored record: the parts a reader of many records takes from
each, without building the whole ``AMFRecord``.

A brain compile (or any listing of every record) shows a record's type, text, scopes, tags,
kind, provenance, confidence, decay model and supersede link. Building the full record for
that parses and freezes every section and then walks it back into a dict to hash it: about
half of a first read's cost at 100k records. ``open_summary`` instead

* re-hashes the decoded document itself (``ids.verify_document``: knowledge id, checksum
  and envelope, against the values the caller's row holds) — the same check as
  ``verify_integrity`` on the parsed record, over exactly the mapping it then reads;
* parses only ``core``, ``meta``, ``causal`` and ``annotation`` with the record's own section
  parsers (``Core.from_dict`` …: the same validation), and ``type`` and ``x-kind`` as
  ``AMFRecord.from_dict`` reads them.

``distribution``, ``integrity`` (beyond the hashes compared) and the other vendor extensions
are not parsed: no summary field comes from them. The summary has the record's attribute
names for what it holds (``type``, ``core``, ``meta``, ``causal``, ``kind``, ``text``,
``tags``), so the functions that read those (decay model, AMP kind, filters) take either.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from amcp.amf.ids import verify_document
from amcp.amf.record import AMF_VERSION, AMFRecord, Annotation, Causal, Core, Meta, Stated
from amcp.amf.types import KnowledgeType
from amcp.errors import ValidationError


@dataclass(frozen=True, slots=True)
class RecordSummary(Stated):
    knowledge_id: str
    type: KnowledgeType
    core: Core
    meta: Meta
    causal: Causal | None = None
    annotation: Annotation | None = None
    kind: str | None = None  # vendor_extensions["x-kind"] when it is a string

    @classmethod
    def of_record(cls, record: AMFRecord) -> RecordSummary:
        """The summary of a record already parsed and verified."""
        return cls(record.knowledge_id, record.type, record.core, record.meta, record.causal,
                   record.annotation, record.kind)


def _section(doc: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    value = doc.get(key)
    if value is not None and not isinstance(value, Mapping):
        raise ValidationError(key, "must be an object")
    return value


def summary_of(doc: Any) -> RecordSummary:
    """The summary of a decoded record document, its shape checked (no hashes)."""
    if not isinstance(doc, dict):
        raise ValidationError("", "an AMF record must be an object")
    if doc.get("amf_version") != AMF_VERSION:
        raise ValidationError("amf_version", f"{doc.get('amf_version')!r} is not supported")
    value = doc.get("type")
    try:
        ktype = KnowledgeType(value if isinstance(value, str) else "")
    except ValueError as exc:
        raise ValidationError("type", f"{value!r} is not a knowledge type") from exc
    core, meta = _section(doc, "core"), _section(doc, "meta")
    if core is None or meta is None:
        raise ValidationError("core" if core is None else "meta", "is required")
    causal, ann = _section(doc, "causal"), _section(doc, "annotation")
    ext = _section(doc, "vendor_extensions") or {}
    kind = ext.get("x-kind")
    return RecordSummary(
        knowledge_id=str(doc.get("knowledge_id")),
        type=ktype,
        core=Core.from_dict(core),
        meta=Meta.from_dict(meta),
        causal=Causal.from_dict(causal) if causal is not None else None,
        annotation=Annotation.from_dict(ann) if ann is not None else None,
        kind=kind if isinstance(kind, str) else None,
    )


def open_summary(
    doc: Any, knowledge_id: str, checksum: str | None, envelope: str | None
) -> RecordSummary:
    """The verified summary of ``doc``, a stored record decoded: its shape checked, then
    its id, checksum and envelope recomputed from it and compared with the row's
    ``knowledge_id``, ``checksum`` and ``envelope``. Raises ``ValidationError`` (shape) or
    ``IntegrityError`` (hashes)."""
    summary = summary_of(doc)
    verify_document(doc, knowledge_id, checksum, envelope)
    return summary


__all__ = ["RecordSummary", "open_summary", "summary_of"]
