"""Splitting a WHERE into what a store can filter itself and what ``evaluate`` must decide.

Store-agnostic: it returns AST pieces. A store adapter translates the pushable conjuncts
into its own filter (SQL ``WHERE``) and runs :func:`amcp.amql.evaluate.evaluate` on the
residual ones for each candidate row. Both halves together must keep AMQL's two-valued
logic (see ``evaluate``'s module docstring) for missing fields.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from amcp.amql.ast import (
    And,
    ClusterSubquery,
    Compare,
    Contains,
    Expr,
    FuncCall,
    In,
    Not,
    Or,
    Scalar,
    Value,
)

# Fields held in the record itself (core, meta, causal) or in a plain per-record column
# the node keeps. Left out on purpose: decay_status and access_recency (computed at query
# time from the clock), referenced_by (a reverse lookup), and confidence, origin and the
# other trust fields (read through the firewall: the stored confidence is only what the
# writer stated, docs/firewall.md). A store passes its own set.
STORED_FIELDS: frozenset[str] = frozenset(
    {"type", "stated_confidence", "project", "project_scope", "tags", "subject", "predicate",
     "object", "created_at", "created_after", "created_before", "lifecycle", "caused_by",
     "cluster_id", "knowledge_id", "weight"}
)


@dataclass(frozen=True, slots=True)
class WhereSplit:
    """``where == And(*pushable, *residual)`` (as a set of conjuncts)."""

    pushable: tuple[Expr, ...]
    residual: tuple[Expr, ...]

    @property
    def residual_expr(self) -> Expr | None:
        """The residual conjuncts as one condition for ``evaluate`` (None: nothing left)."""
        return conjoin(self.residual)


def conjuncts(expr: Expr | None) -> tuple[Expr, ...]:
    """The top-level AND operands of ``expr`` (the parser already flattened nested ANDs)."""
    if expr is None:
        return ()
    if isinstance(expr, And):
        return expr.items
    return (expr,)


def conjoin(items: Collection[Expr]) -> Expr | None:
    """The inverse of :func:`conjuncts`."""
    parts = tuple(items)
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else And(parts)


def is_pushable(expr: Expr, columns: Collection[str] = STORED_FIELDS) -> bool:
    """Whether ``expr`` only compares stored ``columns`` with literals.

    Functions and subqueries are never pushable as such; :func:`bind` them to literals
    first (e.g. ``project != current_project()`` becomes ``project != 'StepQuant'``).
    """
    if isinstance(expr, And | Or):
        return all(is_pushable(item, columns) for item in expr.items)
    if isinstance(expr, Not):
        return is_pushable(expr.item, columns)
    if isinstance(expr, FuncCall):
        return False
    if isinstance(expr, Compare | Contains):
        if expr.field == "tags" and isinstance(expr.value, str) and expr.value.startswith(
                "trust:"):
            return False  # a trust filter: the firewall answers it, never the stored tags
        return expr.field in columns and not isinstance(expr.value, FuncCall | ClusterSubquery)
    return expr.field in columns


def split_where(expr: Expr | None, columns: Collection[str] = STORED_FIELDS) -> WhereSplit:
    """Classify each conjunct of ``expr`` as pushable or residual, keeping their order."""
    pushable: list[Expr] = []
    residual: list[Expr] = []
    for item in conjuncts(expr):
        (pushable if is_pushable(item, columns) else residual).append(item)
    return WhereSplit(tuple(pushable), tuple(residual))


Resolver = Callable[[FuncCall | ClusterSubquery], Value]


def bind(expr: Expr, resolve: Resolver) -> Expr:
    """Replace value functions and subqueries by what ``resolve`` returns for them.

    Predicate functions (semantic_match, ...) stay: they depend on the record. A resolver
    returning a list binds ``f = session_id('S-1')`` to ``f = ('K-a', 'K-b')``, which
    ``evaluate`` and a store read as "f shares an element with the list".
    """
    if isinstance(expr, And):
        return And(tuple(bind(item, resolve) for item in expr.items))
    if isinstance(expr, Or):
        return Or(tuple(bind(item, resolve) for item in expr.items))
    if isinstance(expr, Not):
        return Not(bind(expr.item, resolve))
    if isinstance(expr, Compare) and isinstance(expr.value, FuncCall | ClusterSubquery):
        return Compare(expr.field, expr.op, _literal(resolve(expr.value)))
    if isinstance(expr, Contains) and isinstance(expr.value, FuncCall):
        value = _literal(resolve(expr.value))
        if not isinstance(value, tuple):
            return Contains(expr.field, value)
        # CONTAINS any of several ids.
        if not value:
            return _never()
        if len(value) == 1:
            return Contains(expr.field, value[0])
        return Or(tuple(Contains(expr.field, v) for v in value))
    return expr


def _literal(value: Value) -> Scalar | tuple[Scalar, ...]:
    if isinstance(value, list | tuple):
        return tuple(value)
    if isinstance(value, FuncCall | ClusterSubquery):
        raise TypeError("a resolver must return a literal, not another function or subquery")
    return value


def _never() -> Expr:
    # An always-false condition that needs no field: an empty IN list.
    return In("knowledge_id", ())
