"""AMQL on the wire: which statement each message accepts, and REMEMBER composed by the node.

REMEMBER is composed here rather than by the planner because the node must add the work
session to ``core.evidence`` (``session:S-…``), and it may only do so for records it
composes itself: ``core`` is covered by the knowledge_id and the checksum, so a client's
signed AMF is never altered. A REMEMBER carrying a complete record (with ``knowledge_id``)
is stored exactly as given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from amcp.amf.record import AMFRecord, DecayModel
from amcp.amql import Forget, Remember, parse
from amcp.errors import AmcpError, Status, ValidationError
from amcp.memory import Memory

_REMEMBER_KEYS = frozenset(
    {"amf_version", "type", "core", "meta", "annotation", "causal", "vendor_extensions"}
)


def expect(text: Any, keyword: str, where: str) -> None:
    """A cheap check of the statement kind before any parsing or planning."""
    if not isinstance(text, str) or not text.strip():
        raise ValidationError(where, f"must be an AMQL {keyword} statement")
    first = text.lstrip().split(None, 1)[0].upper()
    if first != keyword:
        raise ValidationError(where, f"must be an AMQL {keyword} statement, not {first}")


def run_query(memory: Memory, text: str, scopes: Sequence[str] | None) -> dict[str, Any]:
    """``Memory.query`` → the upstream query_response_format dict."""
    try:
        result = memory.query(text, scopes=scopes)
    except (ImportError, NotImplementedError) as exc:
        raise AmcpError(
            f"the AMQL planner is unavailable: {exc}", status=Status.UNAVAILABLE
        ) from exc
    response = result.to_response()
    if not isinstance(response, dict):  # pragma: no cover - the planner's contract
        raise AmcpError("the AMQL planner returned no response map")
    return response


def parse_forget(text: Any) -> Forget:
    expect(text, "FORGET", "amql")
    statement = parse(text)
    assert isinstance(statement, Forget)
    return statement


def compose_remember(
    memory: Memory, text: Any, *, created_by: str, work_session: str | None
) -> AMFRecord | dict[str, Any]:
    """The record a ``REMEMBER {…}`` asks for: composed and signed by this node, or, when
    the object is already a complete AMF record, that record unchanged (as a dict)."""
    expect(text, "REMEMBER", "amql")
    statement = parse(text)
    assert isinstance(statement, Remember)
    obj = statement.to_dict()
    if "knowledge_id" in obj:
        return obj
    unknown = set(obj) - _REMEMBER_KEYS
    if unknown:
        raise ValidationError("REMEMBER", f"unknown fields {sorted(unknown)}")
    core, meta = _map(obj, "core"), _map(obj, "meta")
    ann, causal = _map(obj, "annotation"), _map(obj, "causal")
    ext = dict(_map(obj, "vendor_extensions"))
    scope = meta.get("project_scope", ["*"])
    decay = meta.get("decay_model")
    return memory.compose(
        ann.get("natural_language"),
        type=obj.get("type", "KT-FACT"),
        scope=scope,
        subject=core.get("subject"),
        predicate=core.get("predicate", "EQUALS"),
        object=core.get("object"),
        confidence=core.get("confidence", 0.9),
        condition=core.get("condition"),
        evidence=core.get("evidence"),
        sample_size=core.get("sample_size"),
        tags=ann.get("tags"),
        context=ann.get("context_hint"),
        kind=ext.pop("x-kind", None),
        language=meta.get("language"),
        decay=DecayModel.from_dict(decay) if isinstance(decay, Mapping) else None,
        created_by=created_by,
        caused_by=causal.get("caused_by"),
        supersedes=causal.get("supersedes"),
        session=work_session,
        extensions=ext or None,
    )


def _map(obj: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = obj.get(key) or {}
    if not isinstance(value, Mapping):
        raise ValidationError(key, "must be an object")
    return dict(value)
