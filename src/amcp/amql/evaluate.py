"""Deciding a condition for one record, in memory: the "evaluate the rest" half of a plan.

AMQL computes no similarity and knows no sessions: the caller's view supplies field values
and answers function calls and cluster subqueries. The logic is two-valued: a missing field
(``None``) equals only ``null``, so ``f != 'x'`` is true for a record without ``f`` and
``f > 1`` is false. A store that pushes conditions into SQL must reproduce that (``IS NOT``,
``COALESCE``), or leave the condition residual.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, TypeGuard, TypeVar

from amcp.amql.ast import (
    And,
    ClusterSubquery,
    Compare,
    CompareOp,
    Contains,
    Direction,
    Expr,
    FuncCall,
    In,
    Not,
    Or,
    OrderItem,
    Scalar,
)
from amcp.amql.errors import AmqlEvaluationError
from amcp.amql.literals import decode_datetime
from amcp.amql.schema import DEFAULT_MATCH_THRESHOLD, FIELDS, Kind


class RecordView(Protocol):
    """What the evaluator needs from one record and its surroundings."""

    def get(self, field: str) -> object:
        """The field's value: str, float, list[str], datetime (created_at); None if absent."""

    def call(self, name: str, args: tuple[Scalar, ...]) -> object:
        """A function's result: bool or a score for predicates, a value (or list) otherwise."""

    def subquery(self, query: ClusterSubquery) -> object:
        """The cluster ids the subquery selects (a list, or one id)."""


@dataclass(frozen=True, slots=True)
class MappingView:
    """A :class:`RecordView` over a mapping, with functions given as callables.

    ``functions[name](*args)`` computes ``name(args)``; ``clusters(query)`` resolves a
    subquery. Both are looked up per call, so callers memoise record-independent results
    (``current_project()``, a subquery) themselves; AST nodes are hashable for that.
    """

    fields: Mapping[str, object]
    functions: Mapping[str, Callable[..., object]] = field(default_factory=dict)
    clusters: Callable[[ClusterSubquery], object] | None = None

    def get(self, field: str) -> object:
        return self.fields.get(field)

    def call(self, name: str, args: tuple[Scalar, ...]) -> object:
        fn = self.functions.get(name)
        if fn is None:
            raise AmqlEvaluationError(f"amql: this view cannot compute {name}()")
        return fn(*args)

    def subquery(self, query: ClusterSubquery) -> object:
        if self.clusters is None:
            raise AmqlEvaluationError("amql: this view cannot resolve cluster subqueries")
        return self.clusters(query)


def evaluate(expr: Expr, view: RecordView) -> bool:
    """Whether the record behind ``view`` satisfies ``expr``.

    Recursion depth is bounded by the parser's nesting cap (``schema.MAX_DEPTH``).
    """
    if isinstance(expr, And):
        return all(evaluate(item, view) for item in expr.items)
    if isinstance(expr, Or):
        return any(evaluate(item, view) for item in expr.items)
    if isinstance(expr, Not):
        return not evaluate(expr.item, view)
    if isinstance(expr, FuncCall):
        return _predicate(expr, view)
    if isinstance(expr, Compare):
        return _compare(expr, view)
    if isinstance(expr, In):
        actual = _field_value(view, expr.field)
        return any(_equals(actual, v) for v in expr.values)
    return _contains(expr, view)


def _predicate(call: FuncCall, view: RecordView) -> bool:
    result = view.call(call.name, call.args)
    if isinstance(result, bool):
        return result
    if isinstance(result, int | float):
        threshold = call.args[1] if len(call.args) > 1 else DEFAULT_MATCH_THRESHOLD
        return isinstance(threshold, int | float) and result >= threshold
    return False  # None: the caller could not score this record


def _resolve(value: object, view: RecordView) -> object:
    if isinstance(value, FuncCall):
        return _normalise(view.call(value.name, value.args))
    if isinstance(value, ClusterSubquery):
        return _normalise(view.subquery(value))
    return value


def _compare(expr: Compare, view: RecordView) -> bool:
    spec = FIELDS.get(expr.field)
    value = _resolve(expr.value, view)
    if spec is not None and spec.kind is Kind.BOUND:
        created = _as_datetime(view.get("created_at"))
        if created is None or not isinstance(value, datetime):
            return expr.op is CompareOp.NE
        inside = created > value if expr.field == "created_after" else created < value
        # The parser only admits "=", but a tree built in code may say "!=".
        return not inside if expr.op is CompareOp.NE else inside
    actual = _field_value(view, expr.field)
    if expr.op is CompareOp.EQ:
        return _equals(actual, value)
    if expr.op is CompareOp.NE:
        return not _equals(actual, value)
    return _order(actual, value, expr.op)


def _contains(expr: Contains, view: RecordView) -> bool:
    actual = _field_value(view, expr.field)
    value = _resolve(expr.value, view)
    if isinstance(actual, str):
        return isinstance(value, str) and value in actual
    if isinstance(actual, list | tuple | set | frozenset):
        if isinstance(value, list | tuple):  # a function may resolve to several ids
            return any(_same(a, v) for a in actual for v in value)
        return any(_same(a, value) for a in actual)
    return False


def _field_value(view: RecordView, name: str) -> object:
    value = view.get(name)
    spec = FIELDS.get(name)
    if spec is not None and spec.kind is Kind.DATETIME:
        return _as_datetime(value)
    return _normalise(value)


def _normalise(value: object) -> object:
    if isinstance(value, datetime):
        return _as_datetime(value)
    return value


def _as_datetime(value: object) -> datetime | None:
    if isinstance(value, str):
        return decode_datetime(value)
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value
    return None


def _is_many(value: object) -> TypeGuard[Collection[object]]:
    return isinstance(value, list | tuple | set | frozenset)


def _equals(actual: object, value: object) -> bool:
    """``=``: scalars equal; a list on either side means "shares an element"."""
    if value is None:
        return actual is None
    if actual is None:
        return False
    if _is_many(actual):
        if _is_many(value):
            return any(_same(a, v) for a in actual for v in value)
        return any(_same(a, value) for a in actual)
    if _is_many(value):
        return any(_same(actual, v) for v in value)
    return _same(actual, value)


def _same(a: object, b: object) -> bool:
    # True == 1 in Python; in a query they are different things.
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if isinstance(a, datetime) or isinstance(b, datetime):
        da, db = _as_datetime(a), _as_datetime(b)
        return da is not None and da == db
    return a == b


def _order(actual: object, value: object, op: CompareOp) -> bool:
    a: Any = actual
    b: Any = value
    numbers = _is_number(a) and _is_number(b)
    dates = isinstance(a, datetime) and isinstance(b, datetime)
    if not (numbers or dates):
        return False  # missing, or a view that returned the wrong type: no match
    if op is CompareOp.LT:
        return bool(a < b)
    if op is CompareOp.LE:
        return bool(a <= b)
    if op is CompareOp.GT:
        return bool(a > b)
    return bool(a >= b)


def _is_number(x: object) -> TypeGuard[int | float]:
    return isinstance(x, int | float) and not isinstance(x, bool)


T = TypeVar("T")


def sort_records(
    records: Iterable[T],
    order_by: Sequence[OrderItem],
    get: Callable[[T, str], object],
) -> list[T]:
    """``ORDER BY`` in memory: stable, missing values last in either direction.

    Sorts once per key from the last to the first, relying on sort stability, so ties on
    the first key keep the order of the second.
    """
    out = list(records)
    for item in reversed(order_by):
        spec = FIELDS.get(item.field)
        dated = spec is not None and spec.kind is Kind.DATETIME
        present: list[tuple[tuple[int, Any], T]] = []
        missing: list[T] = []
        for r in out:
            key = _sort_key(get(r, item.field), dated=dated)
            if key is None:
                missing.append(r)
            else:
                present.append((key, r))
        present.sort(key=lambda kr: kr[0], reverse=item.direction is Direction.DESC)
        out = [r for _, r in present] + missing
    return out


def _sort_key(value: object, *, dated: bool) -> tuple[int, Any] | None:
    # Rank by type first so a view mixing types cannot make sorting raise TypeError.
    if dated:
        value = _as_datetime(value)
    if value is None:
        return None
    if _is_number(value):
        return (0, float(value))
    if isinstance(value, datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return (1, aware.timestamp())
    if isinstance(value, str):
        return (2, value)
    return (3, repr(value))
