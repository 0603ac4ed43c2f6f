"""RecordFilter → a parameterised SQL WHERE clause over ``records r``.

Only placeholders carry values; the SQL text is assembled from fixed fragments, so no
caller-supplied string ever becomes SQL.
"""

from __future__ import annotations

import time
from typing import Any

from amcp.store.base import RecordFilter
from amcp.store.links import CAUSE, SESSION


def where_clause(flt: RecordFilter, *, dialect: str = "sqlite") -> tuple[str, list[Any]]:
    """``dialect``: "sqlite" (``?`` placeholders, SQLite planner hints) or "postgres"
    (``%s`` placeholders, as psycopg takes them); the tables are the same in both."""
    mark = "%s" if dialect == "postgres" else "?"

    def _marks(n: int) -> str:
        return ",".join([mark] * n)

    parts: list[str] = ["1=1"]
    params: list[Any] = []
    if flt.lifecycles is not None:
        # With ids named, a unary + keeps SQLite off the lifecycle index: it would walk every
        # active record (~0.7 s at 100k) instead of looking the ids up (a recall's rerank).
        hint = flt.ids is not None and dialect == "sqlite"
        column = "+r.lifecycle" if hint else "r.lifecycle"
        parts.append(f"{column} IN ({_marks(len(flt.lifecycles))})")
        params.extend(lc.value for lc in flt.lifecycles)
    if flt.types is not None:
        parts.append(f"r.type IN ({_marks(len(flt.types))})")
        params.extend(t.value for t in flt.types)
    if flt.kinds is not None:
        parts.append(f"r.kind IN ({_marks(len(flt.kinds))})")
        params.extend(flt.kinds)
    if flt.scopes is not None:
        # '*' marks global knowledge (upstream meta.project_scope): visible in every scope.
        scopes = (*flt.scopes, "*")
        parts.append(
            "r.rowid IN (SELECT s.rid FROM record_scopes s "
            f"WHERE s.scope IN ({_marks(len(scopes))}))"
        )
        params.extend(scopes)
    for tag in flt.tags or ():
        parts.append(f"r.rowid IN (SELECT t.rid FROM record_tags t WHERE t.tag = {mark})")
        params.append(tag)
    if flt.created_after is not None:
        parts.append(f"r.created_at >= {mark}")
        params.append(flt.created_after)
    if flt.created_before is not None:
        parts.append(f"r.created_at < {mark}")
        params.append(flt.created_before)
    if flt.subject_prefix is not None:
        # substr comparison instead of LIKE: no wildcard characters to escape.
        parts.append(f"substr(r.subject, 1, {mark}) = {mark}")
        params.extend([len(flt.subject_prefix), flt.subject_prefix])
    if flt.ids is not None:
        parts.append(f"r.knowledge_id IN ({_marks(len(flt.ids))})")
        params.extend(flt.ids)
    if flt.subjects is not None:
        parts.append(f"r.subject IN ({_marks(len(flt.subjects))})")
        params.extend(flt.subjects)
    if flt.events is not None:
        parts.append(
            "r.rowid IN (SELECT e.rid FROM record_events e "
            f"WHERE e.event IN ({_marks(len(flt.events))}))"
        )
        params.extend(flt.events)
    for kind, refs in ((CAUSE, flt.caused_by), (SESSION, flt.sessions)):
        if refs is not None:
            parts.append(
                "r.rowid IN (SELECT l.rid FROM record_links l "
                f"WHERE l.kind = {mark} AND l.ref IN ({_marks(len(refs))}))"
            )
            params.extend([kind, *refs])
    if not flt.include_expired:
        parts.append(f"(r.expires_at IS NULL OR r.expires_at > {mark})")
        params.append(flt.now if flt.now is not None else time.time())
    return " AND ".join(parts), params
