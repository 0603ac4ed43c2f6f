"""AMQL onto a ``Memory``: parse → plan → execute, and the upstream response shape.

Planning is pure (no store access, so it costs microseconds): value functions that need no
store (``current_project()``) are bound, then :mod:`amcp.amql.pushdown` folds each WHERE
conjunct into a ``RecordFilter``. Execution first *refines* the plan with what needs the
store — a top-level ``semantic_match`` becomes the set of ids the vector index scores above
the threshold, ``referenced_by = X`` becomes ``knowledge_id IN caused_by(X)`` — then pages
through the candidates, evaluates the rest, sorts, and cuts at the LIMIT.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from amcp.amf.canonical import canonical_packb
from amcp.amf.types import Lifecycle
from amcp.amql.ast import (
    And,
    ClusterSubquery,
    Compare,
    CompareOp,
    Contains,
    Distill,
    Expr,
    Forget,
    FuncCall,
    In,
    Limit,
    LimitUnit,
    Not,
    Or,
    OrderItem,
    Recall,
)
from amcp.amql.evaluate import evaluate, sort_records
from amcp.amql.nodeview import ALL_LIFECYCLES, QueryContext, scan_pages
from amcp.amql.parser import parse
from amcp.amql.plan import conjuncts
from amcp.amql.pushdown import Pushdown, describe, mentions, push, strings
from amcp.amql.schema import DEFAULT_MATCH_THRESHOLD, MAX_ROWS
from amcp.errors import Status, ValidationError
from amcp.store.base import RecordFilter, StoredRecord

if TYPE_CHECKING:
    from amcp.ports import MemoryWriter


def token_cost(obj: object) -> int:
    """PROFILE §7: ceil(bytes of the canonical-MessagePack serialised AMF / 4)."""
    return math.ceil(len(canonical_packb(obj)) / 4)


@dataclass(frozen=True, slots=True)
class SemanticProbe:
    """A top-level ``semantic_match(text[, threshold])`` answered by the vector index."""

    text: str
    threshold: float


@dataclass(frozen=True, slots=True)
class RecallPlan:
    recall: Recall
    where: Expr | None  # after binding record-independent values
    pushdown: Pushdown
    probes: tuple[SemanticProbe, ...]  # index-answered conjuncts (kept out of the recheck)
    order_by: tuple[OrderItem, ...]
    limit: Limit | None
    rank: SemanticProbe | None = None  # the first top-level semantic_match, probed or not

    @property
    def semantic_order(self) -> SemanticProbe | None:
        """Without ORDER BY, a semantic RECALL returns the best matches first."""
        return self.rank if not self.order_by else None

    def explain(self) -> str:
        p = self.pushdown
        lines = [f"store filter: {describe(p.flt)}"]
        if p.empty:
            lines.append("empty: the pushed conditions contradict each other; no store query")
        lines += [f"  pushed exact: {_show(e)}" for e in p.exact]
        lines += [f"  pushed as prefilter, rechecked: {_show(e)}" for e in p.prefilter]
        lines += [f"  vector index probe: semantic_match({s.text!r}) >= {s.threshold}"
                  for s in self.probes]
        lines += [f"  residual (evaluated per record): {_show(e)}" for e in p.residual]
        order = ", ".join(f"{o.field} {o.direction.value}" for o in self.order_by)
        if order:
            lines.append(f"order: {order} (in memory)")
        elif self.semantic_order is not None:
            lines.append("order: semantic score DESC, then store order")
        else:
            lines.append("order: store order")
        lim = self.limit
        lines.append(f"limit: {lim.unit.value}({lim.value})" if lim is not None
                     else f"limit: rows({MAX_ROWS}) (default cap)")
        return "\n".join(lines)


def _show(expr: Expr) -> str:
    return repr(expr)


@dataclass(frozen=True, slots=True)
class QueryResult:
    """The answer to one statement; ``to_response()`` is upstream ``query_response_format``."""

    statement: str  # RECALL | REMEMBER | FORGET | DISTILL
    records: tuple[StoredRecord, ...] = ()
    results: tuple[dict[str, Any], ...] = ()  # what is sent: AMF dicts, projected if asked
    total_tokens: int = 0
    truncated: bool = False
    written: tuple[str, ...] = ()
    invalidated: tuple[str, ...] = ()
    status: Status = Status.OK
    parse_ms: float = 0.0
    plan_ms: float = 0.0
    exec_ms: float = 0.0
    explain: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def query_time_ms(self) -> float:
        return self.parse_ms + self.plan_ms + self.exec_ms

    def to_response(self) -> dict[str, Any]:
        # Everything this node returns is read from its own store: a local hit each.
        return {
            "results": [dict(r) for r in self.results],
            "total_tokens": self.total_tokens,
            "cache_hits": len(self.results),
            "network_fetches": 0,
            "query_time_ms": round(self.query_time_ms, 3),
            "truncated": self.truncated,
        }


# ---------------------------------------------------------------------------- planning


def plan_recall(
    recall: Recall, *, scopes: Sequence[str] | None = None, project: str | None = None
) -> RecallPlan:
    """Plan a RECALL without touching the store."""
    where = recall.where
    if where is not None:
        where = _bind_static(where, project)
    # Only active records unless the query asks about lifecycles itself.
    lifecycles = ALL_LIFECYCLES if mentions(where, "lifecycle") else (Lifecycle.ACTIVE,)
    base = RecordFilter(scopes=tuple(scopes) if scopes is not None else None,
                        lifecycles=lifecycles)
    items = conjuncts(where)
    probes: list[SemanticProbe] = []
    rest: list[Expr] = []
    for item in items:
        probe = _probe(item)
        if probe is not None:
            probes.append(probe)
        else:
            rest.append(item)
    pushed = push(tuple(rest), base)
    rank = probes[0] if probes else None
    if probes and set(pushed.flt.lifecycles or ALL_LIFECYCLES) - {Lifecycle.ACTIVE}:
        # The vector index holds active records only: score the others one by one.
        pushed = replace(pushed, residual=(*pushed.residual, *(_as_call(p) for p in probes)))
        probes = []
    return RecallPlan(recall, where, pushed, tuple(probes), recall.order_by, recall.limit,
                      rank)


def _probe(item: Expr) -> SemanticProbe | None:
    if not isinstance(item, FuncCall) or item.name != "semantic_match":
        return None
    text = item.args[0]
    threshold = item.args[1] if len(item.args) > 1 else DEFAULT_MATCH_THRESHOLD
    if not isinstance(text, str) or isinstance(threshold, bool) or not isinstance(
        threshold, int | float
    ):
        return None
    return SemanticProbe(text, float(threshold))


def _as_call(probe: SemanticProbe) -> FuncCall:
    return FuncCall("semantic_match", (probe.text, probe.threshold))


def _bind_static(expr: Expr, project: str | None) -> Expr:
    """Replace ``current_project()`` (the one value needing no store) by its value.

    ``plan.bind`` wants every function resolved; the others (session_id, subqueries, ...)
    are left for the record view, which computes them once, lazily, during execution.
    """
    if isinstance(expr, And):
        return And(tuple(_bind_static(e, project) for e in expr.items))
    if isinstance(expr, Or):
        return Or(tuple(_bind_static(e, project) for e in expr.items))
    if isinstance(expr, Not):
        return Not(_bind_static(expr.item, project))
    value = expr.value if isinstance(expr, Compare | Contains) else None
    if not (isinstance(value, FuncCall) and value.name == "current_project"):
        return expr
    if project is None:
        raise ValidationError(
            "amql", "current_project() needs a project: pass project= or a scope"
        )
    if isinstance(expr, Compare):
        return Compare(expr.field, expr.op, project)
    assert isinstance(expr, Contains)
    return Contains(expr.field, project)


# ---------------------------------------------------------------------------- execution


def _rewrite_referenced_by(expr: Expr, ctx: QueryContext) -> Expr:
    """``referenced_by = X`` ⇔ ``knowledge_id IN ∪ caused_by(X)``: no reverse scan needed."""
    if isinstance(expr, And):
        return And(tuple(_rewrite_referenced_by(e, ctx) for e in expr.items))
    if isinstance(expr, Or):
        return Or(tuple(_rewrite_referenced_by(e, ctx) for e in expr.items))
    if isinstance(expr, Not):
        return Not(_rewrite_referenced_by(expr.item, ctx))
    if expr_field(expr) != "referenced_by":
        return expr
    if isinstance(expr, Compare) and expr.op is CompareOp.EQ:
        raw: object = expr.value
    elif isinstance(expr, In):
        raw = expr.values
    elif isinstance(expr, Contains):
        raw = expr.value
    else:
        return expr
    if isinstance(raw, FuncCall):
        raw = ctx.value(raw.name, raw.args)
    values = strings(raw)
    if values is None:
        return expr
    cited: dict[str, None] = {}
    flt = ctx.visible(ids=values)
    for item in ctx.scan(flt):
        causal = item.record.causal if item.record is not None else None
        for ref in (causal.caused_by or ()) if causal is not None else ():
            cited[ref] = None
    return In("knowledge_id", tuple(cited))


def expr_field(expr: Expr) -> str | None:
    return expr.field if isinstance(expr, Compare | In | Contains) else None


# An OR whose branches the store can each answer is narrowed to the union of their ids
# (then rechecked in memory); above this many ids the IN list costs more than the scan.
MAX_UNION_IDS = 5_000


def _resolve_caused_by(expr: Expr, ctx: QueryContext) -> Expr:
    """``caused_by = f(…)`` ⇔ ``caused_by IN <f's ids>``: a literal the store can filter on
    (``record_links``) instead of a call the evaluator makes per record."""
    if isinstance(expr, And | Or):
        return type(expr)(tuple(_resolve_caused_by(e, ctx) for e in expr.items))
    if isinstance(expr, Not):
        return Not(_resolve_caused_by(expr.item, ctx))
    if expr_field(expr) != "caused_by" or not isinstance(expr, Compare | Contains):
        return expr
    if isinstance(expr, Compare) and expr.op is not CompareOp.EQ:
        return expr
    if not isinstance(expr.value, FuncCall):
        return expr
    values = strings(ctx.value(expr.value.name, expr.value.args))
    if values is None or len(values) > MAX_UNION_IDS:
        return expr  # not ids, or too long an IN list for one statement: per record instead
    return In("caused_by", values)


def _union_of_branches(pushed: Pushdown, base: RecordFilter, ctx: QueryContext) -> Pushdown:
    """Narrow ``pushed`` by each residual OR whose every branch the store can answer: the
    records that pass some branch are within the union of the branches' own store answers.
    The OR stays in the recheck; only the candidate set shrinks."""
    flt, empty = pushed.flt, pushed.empty
    for item in pushed.residual:
        if not isinstance(item, Or) or empty:
            continue
        branches = [push((b,), base) for b in item.items]
        # Each branch's store answer must hold every record passing it (exact, or a
        # superset to be rechecked): the OR itself is evaluated again on the union.
        if any(b.residual for b in branches):
            continue
        ids: set[str] = set()
        for b in branches:
            if b.empty:
                continue
            rows = ctx.memory.store.states(b.flt, limit=MAX_UNION_IDS + 1)
            ids.update(r.knowledge_id for r in rows)
            if len(ids) > MAX_UNION_IDS:
                break
        if len(ids) > MAX_UNION_IDS:
            continue
        if flt.ids is not None:
            ids &= set(flt.ids)
        flt = replace(flt, ids=tuple(sorted(ids)))
        empty = empty or not ids
    return replace(pushed, flt=flt, empty=empty)


def _narrow_to_cluster(pushed: Pushdown, ctx: QueryContext) -> Pushdown:
    """``cluster_id = X``, X a cluster id or a subquery naming one: a cluster is a subject
    namespace, so the store narrows to subjects starting with it — a superset (``ns``,
    ``ns.…`` and ``nsfoo…``), so the condition stays in the recheck. A subquery naming no
    cluster matches nothing; one naming several is left to the scan."""
    for item in pushed.residual:
        if not (isinstance(item, Compare) and item.field == "cluster_id"
                and item.op is CompareOp.EQ):
            continue
        value = ctx.subquery(item.value) if isinstance(item.value, ClusterSubquery) else item.value
        ids = strings(value)
        if ids is None:
            continue
        if not ids:
            return replace(pushed, empty=True)
        if len(ids) > 1 or pushed.flt.subject_prefix is not None:
            continue
        namespace = ctx.cluster_namespace(ids[0])
        if namespace is not None:
            return replace(pushed, flt=replace(pushed.flt, subject_prefix=namespace))
    return pushed


def _refine(plan: RecallPlan, ctx: QueryContext) -> Pushdown:
    """The store-dependent half of planning, run at the start of execution."""
    pushed = plan.pushdown
    base = RecordFilter(scopes=ctx.scopes, lifecycles=_base_lifecycles(plan))
    # A residual caused_by is a call to resolve (or a second any-of set: re-pushing it
    # changes nothing).
    if any(mentions(e, "referenced_by") or mentions(e, "caused_by") for e in pushed.residual):
        items = tuple(
            _resolve_caused_by(_rewrite_referenced_by(e, ctx), ctx)
            for e in (*pushed.exact, *pushed.prefilter, *pushed.residual)
        )
        # Re-push everything: the rewritten conjuncts may now be pushable (ids, causes).
        pushed = push(items, base)
    if any(isinstance(e, Or) for e in pushed.residual):
        pushed = _union_of_branches(pushed, base, ctx)
    if any(expr_field(e) == "cluster_id" for e in pushed.residual):
        pushed = _narrow_to_cluster(pushed, ctx)
    for probe in plan.probes:
        found = ctx.scorer.matching_active(probe.text, probe.threshold)
        ids = set(found) if pushed.flt.ids is None else set(found) & set(pushed.flt.ids)
        pushed = replace(pushed, flt=replace(pushed.flt, ids=tuple(sorted(ids))),
                         empty=pushed.empty or not ids)
    return pushed


def _base_lifecycles(plan: RecallPlan) -> tuple[Lifecycle, ...]:
    return ALL_LIFECYCLES if mentions(plan.where, "lifecycle") else (Lifecycle.ACTIVE,)


@dataclass(slots=True)
class _Collected:
    records: list[StoredRecord]
    more: bool  # matches exist beyond what was collected


def _candidates(ctx: QueryContext, pushed: Pushdown, plan: RecallPlan,
                stop_after: int | None) -> _Collected:
    out: list[StoredRecord] = []
    if pushed.empty:
        return _Collected(out, more=False)
    recheck = pushed.recheck
    semantic_texts = _semantic_texts(recheck)
    # Residual conditions are evaluated only on what the store filter let through, a page
    # at a time, and reading stops as soon as an unsorted query has its rows.
    for page in scan_pages(ctx.memory, pushed.flt):
        for text in semantic_texts:
            ctx.scorer.prime(text, page)
        for item in page:
            if item.record is None:
                continue
            if recheck is None or evaluate(recheck, ctx.view(item)):
                out.append(item)
                if stop_after is not None and len(out) > stop_after:
                    return _Collected(out[:stop_after], more=True)
    return _Collected(out, more=False)


def _semantic_texts(expr: Expr | None) -> list[str]:
    if expr is None:
        return []
    if isinstance(expr, And | Or):
        return [t for e in expr.items for t in _semantic_texts(e)]
    if isinstance(expr, Not):
        return _semantic_texts(expr.item)
    if isinstance(expr, FuncCall) and expr.name == "semantic_match" and expr.args:
        return [str(expr.args[0])]
    return []


def project_fields(item: StoredRecord, fields: tuple[str, ...] | None,
                   ctx: QueryContext) -> dict[str, Any]:
    """The AMF as sent; with a projection, only the named sections/fields (+ the id)."""
    assert item.record is not None
    amf = item.record.to_dict()
    if fields is None:
        return amf
    out: dict[str, Any] = {"knowledge_id": item.knowledge_id}
    view = ctx.view(item)
    for name in fields:
        if name in amf:
            out[name] = amf[name]
        else:
            value = view.get(name)
            if value is not None:
                out[name] = value
    return out


def execute_recall(
    memory: MemoryWriter, plan: RecallPlan, ctx: QueryContext, *, touch: bool = True,
    cap: int = MAX_ROWS,
) -> QueryResult:
    started = time.perf_counter()
    pushed = _refine(plan, ctx)
    limit = plan.limit
    in_store_order = not plan.order_by and plan.semantic_order is None
    stop_after: int | None = None
    if in_store_order:
        # No sort needed: stop reading once the page is full (one extra tells 'truncated').
        stop_after = limit.value if limit is not None and limit.unit is LimitUnit.ROWS else cap
        if limit is not None and limit.unit is LimitUnit.TOKENS:
            stop_after = cap
    collected = _candidates(ctx, pushed, plan, stop_after)
    rows = collected.records
    if plan.order_by:
        rows = sort_records(rows, plan.order_by, lambda r, f: ctx.view(r).get(f))
    elif plan.semantic_order is not None:
        text = plan.semantic_order.text
        rows.sort(key=lambda r: -(ctx.scorer.score(r, text) or 0.0))  # stable: store order
    truncated = collected.more
    row_cap = limit.value if limit is not None and limit.unit is LimitUnit.ROWS else cap
    if len(rows) > row_cap:
        rows, truncated = rows[:row_cap], True
    results: list[dict[str, Any]] = []
    kept: list[StoredRecord] = []
    total = 0
    budget = limit.value if limit is not None and limit.unit is LimitUnit.TOKENS else None
    for item in rows:
        shown = project_fields(item, plan.recall.fields, ctx)
        cost = token_cost(shown)
        if budget is not None and total + cost > budget:
            # Prefix semantics: the order is the caller's, so never skip ahead to fill.
            truncated = True
            break
        total += cost
        results.append(shown)
        kept.append(item)
    if touch and kept:
        memory.touch([r.knowledge_id for r in kept], ctx.now)
    return QueryResult(
        "RECALL", records=tuple(kept), results=tuple(results), total_tokens=total,
        truncated=truncated, exec_ms=(time.perf_counter() - started) * 1000,
        explain=plan.explain() + f"\nexecuted with: {describe(pushed.flt)}",
    )




def explain(amql: str, *, scopes: Sequence[str] | None = None,
            project: str | None = None) -> str:
    """The static plan of a RECALL (or of a DISTILL's / FORGET's selection) as text."""
    stmt = parse(amql)
    if isinstance(stmt, Distill):
        stmt = stmt.source
    elif isinstance(stmt, Forget):
        stmt = Recall(where=stmt.where if stmt.where is not None else
                      Compare("knowledge_id", CompareOp.EQ, stmt.knowledge_id))
    if not isinstance(stmt, Recall):
        return "REMEMBER: validate the object, then Memory.put (no plan)"
    return plan_recall(stmt, scopes=scopes, project=project).explain()
