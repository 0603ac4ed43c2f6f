"""REMEMBER, FORGET and DISTILL: the write statements, each through ``Memory``'s gate.

Scopes: a caller restricted to ``scopes`` may write only records whose every
``project_scope`` entry is one of its scopes (so global ``'*'`` knowledge only when ``'*'``
is among them) — seeing global knowledge does not entitle a project to rewrite it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from amcp.amf.record import AMFRecord, Core, DecayModel
from amcp.amf.types import Lifecycle
from amcp.amql.ast import Forget, Recall, Remember
from amcp.amql.nodeview import QueryContext, list_view
from amcp.amql.planner import QueryResult, execute_recall, plan_recall
from amcp.errors import ForbiddenError, NotFoundError, Status, ValidationError

if TYPE_CHECKING:
    from amcp.ports import MemoryWriter

DEFAULT_FORGET_REASON = "forgotten via AMQL"
_PARTIAL_TOP = frozenset({"amf_version", "type", "core", "meta", "annotation", "causal",
                          "vendor_extensions"})


def writable(record_scopes: Sequence[str], scopes: Sequence[str] | None) -> bool:
    return scopes is None or all(s in scopes for s in record_scopes)


def check_writable(record_scopes: Sequence[str], scopes: Sequence[str] | None,
                    what: str) -> None:
    if not writable(record_scopes, scopes):
        raise ForbiddenError(
            f"{what}: project_scope {list(record_scopes)} is outside the caller's scopes "
            f"{list(scopes or ())}"
        )


def _section(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = obj.get(key) or {}
    if not isinstance(value, Mapping):
        raise ValidationError(key, "must be an object")
    return value


def compose_partial(
    memory: MemoryWriter,
    obj: Mapping[str, Any],
    *,
    created_by: str | None = None,
    session: str | None = None,
) -> AMFRecord:
    """A record from a partial AMF object (no id, checksum or created_by): the node fills
    those in, exactly as ``Memory.remember`` does."""
    extra = sorted(set(obj) - _PARTIAL_TOP)
    if extra:
        raise ValidationError(extra[0], "not accepted in a partial REMEMBER object (send a "
                              "complete record with knowledge_id and integrity instead)")
    if obj.get("amf_version", "1.0") != "1.0":
        raise ValidationError("amf_version", "only '1.0' is supported")
    core, meta = _section(obj, "core"), _section(obj, "meta")
    ann, causal = _section(obj, "annotation"), _section(obj, "causal")
    unknown = sorted(set(core) - Core.FIELDS)
    if unknown:
        raise ValidationError(f"core.{unknown[0]}", "unknown field")
    for key in sorted(set(meta) - {"created_at", "created_by", "project_scope", "language",
                                   "decay_model"}):
        raise ValidationError(f"meta.{key}", "unknown field")
    for key in sorted(set(ann) - {"natural_language", "tags", "context_hint"}):
        raise ValidationError(f"annotation.{key}", "unknown field")
    for key in sorted(set(causal) - {"caused_by"}):
        raise ValidationError(f"causal.{key}", "not accepted here (supersede through the API)")
    decay = meta.get("decay_model")
    if decay is not None and not isinstance(decay, Mapping):
        raise ValidationError("meta.decay_model", "must be an object")
    ext = obj.get("vendor_extensions")
    if ext is not None and not isinstance(ext, Mapping):
        raise ValidationError("vendor_extensions", "must be an object")
    scope = meta.get("project_scope", ["*"])
    return memory.compose(
        ann.get("natural_language"),
        type=obj.get("type", "KT-FACT"),
        scope=scope if isinstance(scope, list | tuple) else [scope],
        subject=core.get("subject"),
        predicate=core.get("predicate", "EQUALS"),
        object=core.get("object"),
        confidence=core.get("confidence", 0.9),
        condition=core.get("condition"),
        evidence=core.get("evidence"),
        sample_size=core.get("sample_size"),
        tags=ann.get("tags"),
        context=ann.get("context_hint"),
        created_at=meta.get("created_at"),
        created_by=created_by or meta.get("created_by"),
        language=meta.get("language"),
        decay=DecayModel.from_dict(decay) if decay is not None else None,
        caused_by=causal.get("caused_by"),
        session=session,
        extensions=ext,
    )


def run_remember(memory: MemoryWriter, stmt: Remember, scopes: Sequence[str] | None) -> QueryResult:
    obj = stmt.to_dict()
    if "knowledge_id" in obj or "integrity" in obj:
        record = AMFRecord.from_dict(obj)  # shape first (400), then the full gate in put
        check_writable(record.meta.project_scope, scopes, "REMEMBER")
        outcome = memory.put(obj)
    else:
        record = compose_partial(memory, obj)
        check_writable(record.meta.project_scope, scopes, "REMEMBER")
        outcome = memory.put(record)
    return QueryResult("REMEMBER", written=(outcome.knowledge_id,), status=outcome.status)


def run_forget(memory: MemoryWriter, stmt: Forget, ctx: QueryContext) -> QueryResult:
    reason = stmt.reason.strip() if stmt.reason and stmt.reason.strip() else (
        DEFAULT_FORGET_REASON)
    if stmt.knowledge_id is not None:
        kid = stmt.knowledge_id
        found = list_view(memory, ctx.visible(ids=(kid,)), limit=1)
        if not found or found[0].record is None:
            raise NotFoundError(f"no record {kid}")  # also when out of scope: no leak
        item = found[0]
        assert item.record is not None
        check_writable(item.record.meta.project_scope, ctx.scopes, "FORGET")
        if item.state.lifecycle is Lifecycle.INVALIDATED:
            return QueryResult("FORGET", status=Status.NO_CONTENT)
        memory.invalidate(kid, reason)
        return QueryResult("FORGET", invalidated=(kid,), status=Status.NO_CONTENT)
    assert stmt.where is not None
    plan = plan_recall(Recall(where=stmt.where), scopes=ctx.scopes, project=ctx.project)
    matched = execute_recall(memory, plan, ctx, touch=False)
    targets = [r for r in matched.records
               if r.record is not None and r.state.lifecycle is not Lifecycle.INVALIDATED]
    for r in targets:
        assert r.record is not None
        check_writable(r.record.meta.project_scope, ctx.scopes, f"FORGET {r.knowledge_id}")
    try:
        with memory.atomic():  # all or nothing
            for r in targets:
                memory.invalidate(r.knowledge_id, reason)
    except BaseException:
        memory.searcher.reset()  # the derived index may have dropped rolled-back rows
        raise
    return QueryResult("FORGET", invalidated=tuple(r.knowledge_id for r in targets),
                       truncated=matched.truncated, status=Status.NO_CONTENT)


