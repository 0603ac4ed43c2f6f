"""RecordFilter → a parameterised SQL WHERE clause over ``records r``.

Only placeholders carry values; the SQL text is assembled from fixed fragments, so no
caller-supplied string ever becomes SQL.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from amcp.store.base import RecordFilter
from amcp.store.links import CAUSE, SESSION


class _Where:
    """The clause being built: fixed SQL fragments, and the values their placeholders take."""

    def __init__(self, dialect: str) -> None:
        self.mark = "%s" if dialect == "postgres" else "?"
        self.parts: list[str] = ["1=1"]
        self.params: list[Any] = []

    def add(self, sql: str, *params: Any) -> None:
        self.parts.append(sql)
        self.params.extend(params)

    def marks(self, n: int) -> str:
        return ",".join([self.mark] * n)

    def among(self, column: str, values: Sequence[Any]) -> None:
        """``column IN (...)`` over ``values`` (a non-empty sequence)."""
        self.add(f"{column} IN ({self.marks(len(values))})", *values)


def where_clause(flt: RecordFilter, *, dialect: str = "sqlite") -> tuple[str, list[Any]]:
    """``dialect``: "sqlite" (``?`` placeholders, SQLite planner hints) or "postgres"
    (``%s`` placeholders, as psycopg takes them); the tables are the same in both."""
    w = _Where(dialect)
    _columns(w, flt, sqlite=dialect == "sqlite")
    _indexes(w, flt)
    if not flt.include_expired:
        w.add(f"(r.expires_at IS NULL OR r.expires_at > {w.mark})",
              flt.now if flt.now is not None else time.time())
    return " AND ".join(w.parts), w.params


def _columns(w: _Where, flt: RecordFilter, *, sqlite: bool) -> None:
    """Conditions on the records table's own columns (``sqlite``: with SQLite's planner
    hints)."""
    hint_ids = sqlite and flt.ids is not None
    if flt.lifecycles is not None:
        # With ids named, a unary + keeps SQLite off the lifecycle index: it would walk every
        # active record (~0.7 s at 100k) instead of looking the ids up (a recall's rerank).
        w.among("+r.lifecycle" if hint_ids else "r.lifecycle",
                [lc.value for lc in flt.lifecycles])
    if flt.types is not None:
        w.among("r.type", [t.value for t in flt.types])
    if flt.kinds is not None:
        w.among("r.kind", flt.kinds)
    if flt.created_after is not None:
        w.add(f"r.created_at >= {w.mark}", flt.created_after)
    if flt.created_before is not None:
        w.add(f"r.created_at < {w.mark}", flt.created_before)
    if flt.subject_prefix is not None:
        # substr comparison instead of LIKE: no wildcard characters to escape.
        w.add(f"substr(r.subject, 1, {w.mark}) = {w.mark}",
              len(flt.subject_prefix), flt.subject_prefix)
    if flt.ids is not None:
        w.among("r.knowledge_id", flt.ids)
    # An id slice is walked in rowid order like every listing; a unary + keeps SQLite on that
    # walk (on the id index it sorted the whole slice into a temp b-tree for every page).
    slice_column = "+r.knowledge_id" if sqlite else "r.knowledge_id"
    if flt.id_from is not None:
        w.add(f"{slice_column} >= {w.mark}", flt.id_from)
    if flt.id_before is not None:
        w.add(f"{slice_column} < {w.mark}", flt.id_before)
    if flt.subjects is not None:
        w.among("r.subject", flt.subjects)


def _indexes(w: _Where, flt: RecordFilter) -> None:
    """Conditions answered by the side tables (scopes, tags, events, links)."""
    if flt.scopes is not None:
        # '*' marks global knowledge (upstream meta.project_scope): visible in every scope.
        scopes = (*flt.scopes, "*")
        w.add("r.rowid IN (SELECT s.rid FROM record_scopes s "
              f"WHERE s.scope IN ({w.marks(len(scopes))}))", *scopes)
    for tag in flt.tags or ():
        w.add(f"r.rowid IN (SELECT t.rid FROM record_tags t WHERE t.tag = {w.mark})", tag)
    if flt.events is not None:
        w.add("r.rowid IN (SELECT e.rid FROM record_events e "
              f"WHERE e.event IN ({w.marks(len(flt.events))}))", *flt.events)
    for kind, refs in ((CAUSE, flt.caused_by), (SESSION, flt.sessions)):
        if refs is not None:
            w.add("r.rowid IN (SELECT l.rid FROM record_links l "
                  f"WHERE l.kind = {w.mark} AND l.ref IN ({w.marks(len(refs))}))", kind, *refs)
