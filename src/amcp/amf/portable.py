"""Mapping between AMF and the portable record other memory tools use.

Portable record: ``{id, type, content, scope, source_agent, created_at, ttl, tags, meta}``
with ``type`` one of fact | task | preference | skill | interaction.

The rule (docs/amf.md):
- kind → AMF type: fact→KT-FACT, preference→KT-PRINCIPLE, skill→KT-PRINCIPLE,
  task→KT-CONTEXT, interaction→KT-CONTEXT; any other kind → KT-CONTEXT.
- content is self-contained text, so it becomes ``annotation.natural_language``; the triple is
  ``subject = <scope as a dotted namespace>.<kind>``, ``predicate = EQUALS``,
  ``object = content``. The object carries the whole content (not a prefix) because the
  knowledge id hashes the core: two memories sharing a prefix must not share an id.
- scope → ``meta.project_scope``; source_agent → ``meta.created_by``; tags → annotation.tags.
- Everything AMF has no field for survives in ``vendor_extensions``: ``x-kind``, ``x-id``,
  ``x-ttl``, ``x-meta``, and ``x-created-at`` when the timestamp had to be normalised, so
  ``to_portable(from_portable(p)) == p``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from amcp.amf.ids import build_record
from amcp.amf.record import AMFRecord, Annotation, Core, Meta, thaw
from amcp.amf.timefmt import normalise_timestamp
from amcp.amf.types import KnowledgeType, Predicate
from amcp.errors import ValidationError

KIND_TO_TYPE: dict[str, KnowledgeType] = {
    "fact": KnowledgeType.FACT,
    "preference": KnowledgeType.PRINCIPLE,
    "skill": KnowledgeType.PRINCIPLE,
    "task": KnowledgeType.CONTEXT,
    "interaction": KnowledgeType.CONTEXT,
}
PORTABLE_FIELDS = frozenset(
    {"id", "type", "content", "scope", "source_agent", "created_at", "ttl", "tags", "meta"}
)
_NS_BAD = re.compile(r"[^A-Za-z0-9_\-]+")


def scope_namespace(scope: str) -> str:
    """``user:alice`` → ``user.alice``: a dotted subject namespace (upstream core.subject)."""
    parts = [p for p in _NS_BAD.sub(".", scope).split(".") if p]
    return ".".join(parts) or "global"


def subject_for(scope: str, kind: str) -> str:
    return f"{scope_namespace(scope)}.{scope_namespace(kind)}"


def from_portable(p: Mapping[str, Any], *, confidence: float = 0.9) -> AMFRecord:
    if not isinstance(p, Mapping):
        raise ValidationError("", "a portable record must be an object")
    extra = set(p) - PORTABLE_FIELDS
    if extra:
        raise ValidationError(sorted(extra)[0], "unknown portable field")
    kind = p.get("type")
    if not isinstance(kind, str) or not kind:
        raise ValidationError("type", "is required (fact, task, preference, skill, interaction)")
    content = p.get("content")
    if not isinstance(content, str) or not content.strip():
        raise ValidationError("content", "must be non-empty text")
    scope = p.get("scope") or "*"
    if not isinstance(scope, str):
        raise ValidationError("scope", "must be a string")
    agent = p.get("source_agent") or "unknown-agent"
    if not isinstance(agent, str):
        raise ValidationError("source_agent", "must be a string")
    raw_ts = p.get("created_at")
    if raw_ts is None:
        raise ValidationError("created_at", "is required")
    created_at = normalise_timestamp(raw_ts, "created_at")
    tags = p.get("tags")
    if tags is not None and (
        not isinstance(tags, list) or not all(isinstance(t, str) and t for t in tags)
    ):
        raise ValidationError("tags", "must be a list of non-empty strings")
    ttl = p.get("ttl")
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int | float) or ttl < 0):
        raise ValidationError("ttl", "must be a non-negative number of seconds")
    meta = p.get("meta")
    if meta is not None and not isinstance(meta, Mapping):
        raise ValidationError("meta", "must be an object")
    ext: dict[str, Any] = {"x-kind": kind}
    if p.get("id") is not None:
        ext["x-id"] = p["id"]
    if ttl is not None:
        ext["x-ttl"] = ttl
    if meta:
        ext["x-meta"] = dict(meta)
    if raw_ts != created_at:
        ext["x-created-at"] = raw_ts
    return build_record(
        type=KIND_TO_TYPE.get(kind, KnowledgeType.CONTEXT),
        core=Core(
            subject=subject_for(scope, kind),
            predicate=Predicate.EQUALS,
            object=content,
            confidence=confidence,
        ),
        meta=Meta(created_at=created_at, created_by=agent, project_scope=(scope,)),
        annotation=Annotation(natural_language=content, tags=tuple(tags) if tags else None),
        vendor_extensions=ext,
    )


def to_portable(record: AMFRecord) -> dict[str, Any]:
    ext = record.vendor_extensions
    kind = ext.get("x-kind") or _type_to_kind(record.type)
    out: dict[str, Any] = {
        "id": ext.get("x-id", record.knowledge_id),
        "type": kind,
        "content": record.text,
        "scope": record.meta.project_scope[0],
        "source_agent": record.meta.created_by,
        "created_at": ext.get("x-created-at", record.meta.created_at),
    }
    if "x-ttl" in ext:
        out["ttl"] = ext["x-ttl"]
    if record.tags:
        out["tags"] = list(record.tags)
    if "x-meta" in ext:
        out["meta"] = thaw(ext["x-meta"])
    return out


def _type_to_kind(ktype: KnowledgeType) -> str:
    return {
        KnowledgeType.FACT: "fact",
        KnowledgeType.PRINCIPLE: "preference",
        KnowledgeType.CONTEXT: "interaction",
    }.get(ktype, "fact")
