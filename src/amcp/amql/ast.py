"""The AMQL syntax tree: frozen, slotted, hashable (except REMEMBER's free-form object).

Nodes check their own structural invariants in ``__post_init__`` so a tree built in code is
as trustworthy as one from :func:`amcp.amql.parse`; the parser checks the same things
earlier, with source positions, so these checks never fire for parsed text.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from types import MappingProxyType
from typing import Any, TypeAlias

from amcp.amql.errors import AmqlSyntaxError
from amcp.amql.schema import MAX_ROWS, MAX_TOKENS

# A literal. Dates are parsed into aware UTC datetimes where a field needs them.
Scalar: TypeAlias = str | int | float | bool | datetime | None


class CompareOp(Enum):
    EQ = "="
    NE = "!="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="


@dataclass(frozen=True, slots=True)
class FuncCall:
    """``name(args)``: a predicate in a condition, or a value right of an operator.

    AMQL itself computes neither: the caller supplies the result (``RecordView.call``).
    """

    name: str
    args: tuple[Scalar, ...] = ()


@dataclass(frozen=True, slots=True)
class ClusterSubquery:
    """``(SELECT cluster_id FROM clusters [WHERE cond] [LIMIT n])``; resolved by the caller."""

    column: str
    source: str
    where: Expr | None = None
    limit: int | None = None

    def __post_init__(self) -> None:
        if self.limit is not None and not 1 <= self.limit <= MAX_ROWS:
            raise AmqlSyntaxError(f"subquery LIMIT must be 1..{MAX_ROWS}")


# The right-hand side of a comparison.
Value: TypeAlias = Scalar | tuple[Scalar, ...] | FuncCall | ClusterSubquery


@dataclass(frozen=True, slots=True)
class Compare:
    field: str
    op: CompareOp
    value: Value


@dataclass(frozen=True, slots=True)
class In:
    """``field IN [v, ...]`` (``NOT IN`` parses as ``Not(In(...))``)."""

    field: str
    values: tuple[Scalar, ...]


@dataclass(frozen=True, slots=True)
class Contains:
    """``field CONTAINS v``: list membership, or substring for a string field."""

    field: str
    value: Scalar | FuncCall


@dataclass(frozen=True, slots=True)
class And:
    items: tuple[Expr, ...]

    def __post_init__(self) -> None:
        if len(self.items) < 2:
            raise AmqlSyntaxError("AND needs at least two operands")


@dataclass(frozen=True, slots=True)
class Or:
    items: tuple[Expr, ...]

    def __post_init__(self) -> None:
        if len(self.items) < 2:
            raise AmqlSyntaxError("OR needs at least two operands")


@dataclass(frozen=True, slots=True)
class Not:
    item: Expr


Expr: TypeAlias = And | Or | Not | Compare | In | Contains | FuncCall


class Direction(Enum):
    ASC = "ASC"
    DESC = "DESC"


@dataclass(frozen=True, slots=True)
class OrderItem:
    field: str
    direction: Direction = Direction.ASC


class LimitUnit(Enum):
    TOKENS = "tokens"
    ROWS = "rows"


@dataclass(frozen=True, slots=True)
class Limit:
    unit: LimitUnit
    value: int

    def __post_init__(self) -> None:
        cap = MAX_TOKENS if self.unit is LimitUnit.TOKENS else MAX_ROWS
        if isinstance(self.value, bool) or not 1 <= self.value <= cap:
            raise AmqlSyntaxError(f"LIMIT {self.unit.value}(N) needs 1 <= N <= {cap:,}")


@dataclass(frozen=True, slots=True)
class Recall:
    """``RECALL fields WHERE ... ORDER BY ... LIMIT ...``; ``fields=None`` is ``*``."""

    where: Expr | None = None
    order_by: tuple[OrderItem, ...] = ()
    limit: Limit | None = None
    fields: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Remember:
    """``REMEMBER {...}``: the object as written; AMF validation is the store's job.

    Kept out of the hash (free-form JSON is not hashable); exposed read-only.
    """

    amf: Mapping[str, Any] = field(hash=False)

    def __post_init__(self) -> None:
        if not isinstance(self.amf, MappingProxyType):
            object.__setattr__(self, "amf", MappingProxyType(dict(self.amf)))

    def to_dict(self) -> dict[str, Any]:
        """A deep, mutable copy of the object."""
        return copy.deepcopy(dict(self.amf))


@dataclass(frozen=True, slots=True)
class Forget:
    """``FORGET id [REASON r]`` or ``FORGET WHERE cond [REASON r]``: exactly one target."""

    knowledge_id: str | None = None
    where: Expr | None = None
    reason: str | None = None

    def __post_init__(self) -> None:
        if (self.knowledge_id is None) == (self.where is None):
            raise AmqlSyntaxError("FORGET needs exactly one of a knowledge_id or a WHERE")


@dataclass(frozen=True, slots=True)
class Distill:
    """``DISTILL FROM RECALL ... INTO KT-X [WITH confidence_threshold 0.8]``."""

    source: Recall
    into: str
    confidence_threshold: float | None = None

    def __post_init__(self) -> None:
        t = self.confidence_threshold
        if t is not None and not 0.0 <= t <= 1.0:
            raise AmqlSyntaxError("confidence_threshold must be within 0..1")


Statement: TypeAlias = Recall | Remember | Forget | Distill
