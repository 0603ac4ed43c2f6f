"""DISTILL (upstream AMQL): select records with a RECALL, then distil them into one principle.

The selection is AMQL's (parse, plan, execute the RECALL within the caller's scopes, drop
sensitive records and those below the confidence threshold); the grouping and the written
principle are evolution's (``amcp.evolution.distill.distill_records``), which takes the
selected records and this layer's scope rule as a parameter: evolution never imports AMQL.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING

from amcp.amf.types import KnowledgeType
from amcp.amql.ast import Distill, Recall
from amcp.amql.nodeview import QueryContext, trusted_confidence
from amcp.amql.parser import parse
from amcp.amql.planner import QueryResult, execute_recall, plan_recall
from amcp.amql.writes import check_writable
from amcp.errors import NotFoundError, ValidationError
from amcp.evolution.distill import GROUP_SIMILARITY, Distiller, distill_records

if TYPE_CHECKING:
    from amcp.memory_writes import WriteOutcome
    from amcp.ports import MemoryWriter


def _source(from_amql: str | Recall | Distill) -> tuple[Recall, Distill | None]:
    stmt = parse(from_amql) if isinstance(from_amql, str) else from_amql
    if isinstance(stmt, Distill):
        return stmt.source, stmt
    if not isinstance(stmt, Recall):
        raise ValidationError("from", "DISTILL selects its sources with a RECALL statement")
    return stmt, None


def distill(
    memory: MemoryWriter,
    from_amql: str | Recall | Distill,
    *,
    into: str | KnowledgeType = KnowledgeType.PRINCIPLE,
    confidence_threshold: float = 0.0,
    distiller: Distiller | None = None,
    scopes: Sequence[str] | None = None,
    similarity: float = GROUP_SIMILARITY,
) -> WriteOutcome:
    """Write one ``into`` record distilled from the largest related group of the RECALL."""
    recall, whole = _source(from_amql)
    if whole is not None and whole.confidence_threshold is not None:
        confidence_threshold = max(confidence_threshold, whole.confidence_threshold)
    try:
        target = KnowledgeType(whole.into if whole is not None else into)
    except ValueError as exc:
        raise ValidationError("into", f"{into!r} is not a knowledge type") from exc
    if isinstance(confidence_threshold, bool) or not 0.0 <= confidence_threshold <= 1.0:
        raise ValidationError("confidence_threshold", "must be within 0..1")
    scope_t = tuple(scopes) if scopes is not None else None
    ctx = QueryContext(memory, now=time.time(), scopes=scope_t,
                       project=next((s for s in scope_t or () if s != "*"), None))
    found = execute_recall(memory, plan_recall(recall, scopes=scope_t, project=ctx.project),
                           ctx, touch=False)
    records = [r.record for r in found.records if r.record is not None
               and not r.state.sensitive  # a principle must not repeat a secret
               # the trusted confidence: a self-raised one does not clear the threshold
               and (trusted_confidence(r, ctx) or 0.0) >= confidence_threshold]
    if not records:
        raise NotFoundError(
            f"nothing to distill: the RECALL selected {len(found.records)} record(s), none "
            f"readable with confidence >= {confidence_threshold}"
        )
    return distill_records(memory, records, into=target, distiller=distiller,
                           similarity=similarity,
                           check_scope=partial(_check_scope, scopes=scope_t))


def run_distill(memory: MemoryWriter, stmt: Distill, scopes: Sequence[str] | None) -> QueryResult:
    outcome = distill(memory, stmt.source, into=stmt.into,
                      confidence_threshold=stmt.confidence_threshold or 0.0, scopes=scopes)
    return QueryResult("DISTILL", written=(outcome.knowledge_id,), status=outcome.status)


def _check_scope(scope: list[str], *, scopes: Sequence[str] | None) -> None:
    check_writable(scope, scopes, "DISTILL")


__all__ = ["distill", "run_distill"]
