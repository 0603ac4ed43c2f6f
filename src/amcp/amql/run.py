"""Running one AMQL statement: RECALL through the planner, the writes through ``writes``
and ``distill``. The dispatcher sits above all three, so none of them imports another's
caller (issue 15: no module cycles)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from amcp.amql.ast import Distill, Forget, Recall, Remember, Statement
from amcp.amql.distill import run_distill
from amcp.amql.nodeview import QueryContext
from amcp.amql.parser import parse
from amcp.amql.planner import QueryResult, execute_recall, plan_recall
from amcp.amql.writes import run_forget, run_remember

if TYPE_CHECKING:
    from amcp.ports import MemoryWriter


def run_query(
    memory: MemoryWriter, amql: str | Statement, *, scopes: Sequence[str] | None = None,
    project: str | None = None, touch: bool = True, now: float | None = None,
) -> QueryResult:
    """Run one AMQL statement against ``memory``, seeing only ``scopes`` (and global '*')."""
    t0 = time.perf_counter()
    stmt = parse(amql) if isinstance(amql, str) else amql
    parse_ms = (time.perf_counter() - t0) * 1000
    scope_t = tuple(scopes) if scopes is not None else None
    if project is None and scope_t:
        project = next((s for s in scope_t if s != "*"), None)
    ctx = QueryContext(memory, now=time.time() if now is None else now, scopes=scope_t,
                       project=project)
    if isinstance(stmt, Recall):
        t1 = time.perf_counter()
        plan = plan_recall(stmt, scopes=scope_t, project=project)
        plan_ms = (time.perf_counter() - t1) * 1000
        result = execute_recall(memory, plan, ctx, touch=touch)
        return replace(result, parse_ms=parse_ms, plan_ms=plan_ms)
    t1 = time.perf_counter()
    if isinstance(stmt, Remember):
        result = run_remember(memory, stmt, scope_t)
    elif isinstance(stmt, Forget):
        result = run_forget(memory, stmt, ctx)
    else:
        assert isinstance(stmt, Distill)
        result = run_distill(memory, stmt, scope_t)
    return replace(result, parse_ms=parse_ms, exec_ms=(time.perf_counter() - t1) * 1000)


__all__ = ["run_query"]
