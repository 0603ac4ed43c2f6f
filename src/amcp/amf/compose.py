"""Composing a record from keyword fields: the one place ``remember`` builds AMF."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import wraps
from typing import TYPE_CHECKING, Any, ParamSpec

from amcp.amf.ids import build_record
from amcp.amf.portable import subject_for
from amcp.amf.record import (
    MAX_RECORD_BYTES,
    AMFRecord,
    Annotation,
    Causal,
    Core,
    DecayModel,
    Meta,
)
from amcp.amf.timefmt import normalise_timestamp, utc_now
from amcp.amf.types import KnowledgeType, Predicate
from amcp.errors import ValidationError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


def enum_value(enum: Any, value: Any, field_name: str) -> Any:
    """``enum(value)`` or a 400 naming the field and the allowed values."""
    try:
        return enum(value)
    except ValueError as exc:
        allowed = ", ".join(m.value for m in enum)
        raise ValidationError(field_name, f"{value!r} is not one of {allowed}") from exc


# A record is at most MAX_RECORD_BYTES and a text-only memory carries its text twice
# (core.object and annotation.natural_language); the rest of the record is far below 24 KB.
MAX_TEXT_BYTES = (MAX_RECORD_BYTES - 24 * 1024) // 2
MAX_TEXT_CHARS = MAX_TEXT_BYTES // 4  # below this many characters no text can be too long

# AMF paths compose_record fills from its keyword arguments, and those arguments' names.
_KEYWORD_OF = {
    "core.object": "text",
    "annotation.natural_language": "text",
    "core.subject": "subject",
    "core.predicate": "predicate",
    "core.confidence": "confidence",
    "core.condition": "condition",
    "core.evidence": "evidence",
    "core.sample_size": "sample_size",
    "meta.project_scope": "scope",
    "meta.created_by": "created_by",
    "meta.language": "language",
    "annotation.tags": "tags",
    "annotation.context_hint": "context",
    "causal.caused_by": "caused_by",
    "causal.supersedes": "supersedes",
}


P = ParamSpec("P")


def _keyword_errors(fn: Callable[P, AMFRecord]) -> Callable[P, AMFRecord]:
    """compose_record's callers named keyword arguments (text, confidence, tags), not AMF
    paths: a validation error names *theirs* ("text: longer than ...", not "core.object")."""

    @wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> AMFRecord:
        try:
            return fn(*args, **kwargs)
        except ValidationError as exc:
            said = _KEYWORD_OF.get(exc.field, exc.field)
            if exc.field == "core.object" and kwargs.get("object") is not None:
                said = "object"
            if said == exc.field:
                raise
            raise ValidationError(said, exc.problem) from None

    return wrapper


def _check_text(text: str | None, obj: str | None) -> None:
    if text is None and obj is None:
        raise ValidationError("text", "give the memory's text (or core.object)")
    if text is not None and not isinstance(text, str):
        raise ValidationError("text", f"must be a string, not {text.__class__.__name__}")
    if text is not None and len(text) > MAX_TEXT_CHARS and len(text.encode()) > MAX_TEXT_BYTES:
        raise ValidationError(
            "text",
            f"{len(text.encode()):,} bytes is too long for one memory (at most "
            f"{MAX_TEXT_BYTES:,}: a record is at most 1 MiB and holds its text twice, as its "
            "triple's object and its annotation); store it in parts",
        )


def _extensions(extensions: Mapping[str, Any] | None, kind: str | None,
                ttl: float | None) -> dict[str, Any]:
    """The vendor extensions, with ``x-kind`` and ``x-ttl`` from their own arguments."""
    ext: dict[str, Any] = dict(extensions or {})
    if kind:
        ext["x-kind"] = kind
    if ttl is not None:
        if isinstance(ttl, bool) or not isinstance(ttl, int | float) or ttl < 0:
            raise ValidationError("ttl", "must be a non-negative number of seconds")
        ext["x-ttl"] = ttl
    return ext


def _core(text: str | None, subject: str, predicate: Predicate | str, object: str | None, *,
          confidence: float, condition: str | None, evidence: Sequence[str] | None,
          session: str | None, sample_size: int | None) -> Core:
    ev = list(evidence or [])
    if session:
        ev.append(session if session.startswith("session:") else f"session:{session}")
    return Core.from_dict(
        {
            "subject": subject,
            "predicate": enum_value(Predicate, predicate, "core.predicate").value,
            "object": object if object is not None else text,
            "confidence": confidence,
            "condition": condition,
            "evidence": ev or None,
            "sample_size": sample_size,
        }
    )


def _meta(created_at: Any, created_by: str | None, scopes: tuple[str, ...],
          language: str | None, decay: DecayModel | None) -> Meta:
    return Meta.from_dict(
        {
            "created_at": normalise_timestamp(created_at, "created_at")
            if created_at is not None
            else utc_now(),
            "created_by": created_by or "amcp://db.amcp.local",
            "project_scope": list(scopes),
            "language": language,
            "decay_model": decay.to_dict() if decay else None,
        }
    )


@_keyword_errors
def compose_record(
    text: str | None = None,
    *,
    type: KnowledgeType | str = KnowledgeType.FACT,
    scope: str | Sequence[str] = "*",
    subject: str | None = None,
    predicate: Predicate | str = Predicate.EQUALS,
    object: str | None = None,
    confidence: float = 0.9,
    condition: str | None = None,
    evidence: Sequence[str] | None = None,
    tags: Sequence[str] | None = None,
    kind: str | None = None,
    context: str | None = None,
    created_at: Any = None,
    created_by: str | None = None,
    caused_by: Sequence[str] | None = None,
    supersedes: str | None = None,
    sample_size: int | None = None,
    decay: DecayModel | None = None,
    language: str | None = None,
    ttl: float | None = None,
    session: str | None = None,
    extensions: Mapping[str, Any] | None = None,
    key: Ed25519PrivateKey | None = None,
) -> AMFRecord:
    """Validate fields and build a sealed record (signed when ``key`` is given).

    Without ``subject``/``object`` the triple is derived from the text by the portable rule
    (``amcp.amf.portable``): subject = scope namespace + kind, predicate EQUALS, object =
    the text. ``session`` adds ``session:S-…`` evidence; ``ttl`` is kept in
    ``vendor_extensions["x-ttl"]`` and ``kind`` in ``x-kind``.
    """
    scopes = (scope,) if isinstance(scope, str) else tuple(scope)
    if not scopes:
        raise ValidationError("scope", "at least one scope is required ('*' = global)")
    _check_text(text, object)
    ktype = enum_value(KnowledgeType, type, "type")
    ext = _extensions(extensions, kind, ttl)
    return build_record(
        type=ktype,
        core=_core(text, subject or subject_for(scopes[0], kind or "note"), predicate, object,
                   confidence=confidence, condition=condition, evidence=evidence,
                   session=session, sample_size=sample_size),
        meta=_meta(created_at, created_by, scopes, language, decay),
        annotation=Annotation.from_dict(
            {"natural_language": text, "tags": list(tags) if tags else None,
             "context_hint": context}
        ),
        causal=Causal(caused_by=tuple(caused_by) if caused_by else None, supersedes=supersedes)
        if caused_by or supersedes
        else None,
        vendor_extensions=ext,
        key=key,
    )
