"""amcp.amql: the AMCP Memory Query Language (upstream L4 ``amql``).

``parse(text)`` turns RECALL / REMEMBER / FORGET / DISTILL text into a frozen, validated
AST (``amcp.amql.ast``) or raises :class:`AmqlSyntaxError` (400, with line:column and a
caret). ``evaluate(expr, view)`` decides a condition for one record; ``plan.split_where``
separates what a store can filter itself from what must be evaluated here. See docs/amql.md.
"""

from __future__ import annotations

from amcp.amql.ast import (
    And,
    ClusterSubquery,
    Compare,
    CompareOp,
    Contains,
    Direction,
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
    Remember,
    Scalar,
    Statement,
    Value,
)
from amcp.amql.errors import AmqlSyntaxError
from amcp.amql.parser import parse

__all__ = [
    "AmqlSyntaxError",
    "And",
    "ClusterSubquery",
    "Compare",
    "CompareOp",
    "Contains",
    "Direction",
    "Distill",
    "Expr",
    "Forget",
    "FuncCall",
    "In",
    "Limit",
    "LimitUnit",
    "Not",
    "Or",
    "OrderItem",
    "Recall",
    "Remember",
    "Scalar",
    "Statement",
    "Value",
    "parse",
]
