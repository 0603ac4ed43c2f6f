"""From parse-tree reductions to the AST, validating as it goes.

The transformer runs inside the LALR parser (lark's embedded transformer), so each callback
fires once per reduction, bottom-up, without recursion however deep the input nests, and
still holds the tokens with their positions: every validation error points at the exact
field, value, function or keyword. Intermediate results travel wrapped (``_Lit``, ``_E``,
``_Call``) with a position and a nesting depth; the wrappers never leave this module.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from lark import Token, Transformer

from amcp.amql import ast
from amcp.amql.errors import AmqlSyntaxError
from amcp.amql.literals import decode_datetime, decode_number, decode_string, error_at
from amcp.amql.schema import (
    CLUSTER_FIELDS,
    FIELDS,
    FUNCTIONS,
    KNOWLEDGE_TYPES,
    MAX_DEPTH,
    MAX_LIST_ITEMS,
    MAX_ORDER_ITEMS,
    MAX_ROWS,
    MAX_TOKENS,
    ORDERABLE,
    PROJECTABLE,
    SUBQUERY_COLUMN,
    SUBQUERY_SOURCE,
    FieldSpec,
    FuncRole,
    Kind,
)

_KNOWLEDGE_ID = re.compile(r"K-[0-9a-f]{64}")
_ORDERING = frozenset({ast.CompareOp.LT, ast.CompareOp.LE, ast.CompareOp.GT, ast.CompareOp.GE})
_ANY_FIELD = {**CLUSTER_FIELDS, **FIELDS}


def _names(names: Iterable[object]) -> str:
    return ", ".join(sorted(str(n) for n in names))


class _Lit:
    """A literal (or list, or subquery) with where it started and how deep it nests."""

    __slots__ = ("depth", "items", "token", "value")

    def __init__(
        self, value: Any, token: Token, depth: int = 0, items: tuple[_Lit, ...] = ()
    ) -> None:
        self.value = value
        self.token = token
        self.depth = depth
        self.items = items  # the elements of a list literal, for per-element errors


class _Call:
    __slots__ = ("args", "name", "token")

    def __init__(self, token: Token, args: tuple[_Lit | _Call, ...]) -> None:
        self.token = token
        self.name = str(token.value)
        self.args = args


class _E:
    """An expression with its first token, depth, and the field tokens it names directly."""

    __slots__ = ("depth", "expr", "fields", "token")

    def __init__(
        self, expr: ast.Expr, token: Token, depth: int, fields: tuple[Token, ...]
    ) -> None:
        self.expr = expr
        self.token = token
        self.depth = depth
        self.fields = fields


class _Tagged:
    """An optional clause, tagged so ``recall`` can tell which ones are present."""

    __slots__ = ("tag", "value")

    def __init__(self, tag: str, value: Any) -> None:
        self.tag = tag
        self.value = value


class AstBuilder(Transformer[Token, ast.Statement]):
    """The lark callbacks; stateless, so one instance serves every parse and thread.

    Errors carry line and column only; ``parse`` adds the source excerpt.
    """

    def __init__(self) -> None:
        super().__init__(visit_tokens=False)

    def _err(self, token: Token, reason: str) -> AmqlSyntaxError:
        return error_at(token, reason)

    def _deep(self, token: Token, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise self._err(token, f"nested more than {MAX_DEPTH} levels deep")

    # -- statements ---------------------------------------------------------------------

    def start(self, c: list[Any]) -> ast.Statement:
        stmt: ast.Statement = c[0]
        return stmt

    def recall(self, c: list[Any]) -> ast.Recall:
        parts = {t.tag: t.value for t in c[1:]}
        return ast.Recall(
            where=parts.get("where"),
            order_by=parts.get("order_by", ()),
            limit=parts.get("limit"),
            fields=parts.get("fields"),
        )

    def projection(self, c: list[Token]) -> _Tagged:
        if c[0].type == "STAR":
            return _Tagged("fields", None)
        seen: set[str] = set()
        for tok in c:
            if tok.value not in PROJECTABLE:
                raise self._err(tok, f"unknown field {tok.value!r} in RECALL "
                                     f"(known: *, {_names(PROJECTABLE)})")
            if tok.value in seen:
                raise self._err(tok, f"field {tok.value!r} listed twice")
            seen.add(tok.value)
        return _Tagged("fields", tuple(str(t.value) for t in c))

    def where(self, c: list[_E]) -> _Tagged:
        return _Tagged("where", self._record_expr(c[0]))

    def order_by(self, c: list[tuple[Token, ast.OrderItem]]) -> _Tagged:
        if len(c) > MAX_ORDER_ITEMS:
            raise self._err(c[MAX_ORDER_ITEMS][0], f"ORDER BY takes at most {MAX_ORDER_ITEMS} keys")
        seen: set[str] = set()
        for tok, item in c:
            if item.field in seen:
                raise self._err(tok, f"ORDER BY names {item.field!r} twice")
            seen.add(item.field)
        return _Tagged("order_by", tuple(item for _, item in c))

    def order_item(self, c: list[Token]) -> tuple[Token, ast.OrderItem]:
        tok = c[0]
        if tok.value not in ORDERABLE:
            known = FIELDS.get(tok.value)
            why = (f"{tok.value!r} holds a list or a bound and has no order" if known
                   else f"unknown field {tok.value!r}")
            raise self._err(tok, f"{why}; ORDER BY takes one of: {_names(ORDERABLE)}")
        desc = len(c) > 1 and c[1].type == "DESC"
        direction = ast.Direction.DESC if desc else ast.Direction.ASC
        return tok, ast.OrderItem(str(tok.value), direction)

    def limit(self, c: list[Token]) -> _Tagged:
        _, unit_tok, num = c
        unit_name = unit_tok.value.lower()
        if unit_name not in ("tokens", "rows"):
            raise self._err(unit_tok, f"LIMIT takes tokens(N) or rows(N), not {unit_tok.value}(N)")
        unit = ast.LimitUnit(unit_name)
        cap = MAX_TOKENS if unit is ast.LimitUnit.TOKENS else MAX_ROWS
        return _Tagged("limit", ast.Limit(unit, self._count(num, f"LIMIT {unit_name}(N)", cap)))

    def bare_limit(self, c: list[Token]) -> _Tagged:
        # `LIMIT 20` is read as rows(20), as SQL readers expect.
        return _Tagged("limit", ast.Limit(ast.LimitUnit.ROWS, self._count(c[1], "LIMIT", MAX_ROWS)))

    def _count(self, tok: Token, what: str, cap: int) -> int:
        value = decode_number(tok)
        if not isinstance(value, int) or not 1 <= value <= cap:
            raise self._err(tok, f"{what} needs a whole number from 1 to {cap:,}, got {tok.value}")
        return value

    def remember(self, c: list[Any]) -> ast.Remember:
        return ast.Remember(c[1].value)

    def forget(self, c: list[Any]) -> ast.Forget:
        tok: Token = c[1]
        kid = decode_string(tok) if tok.type == "STRING" else str(tok.value)
        if not _KNOWLEDGE_ID.fullmatch(kid):
            raise self._err(tok, "FORGET needs a knowledge_id 'K-' + 64 lowercase hex digits, "
                                 "or WHERE <condition>")
        return ast.Forget(knowledge_id=kid, reason=c[2].value if len(c) > 2 else None)

    def forget_where(self, c: list[Any]) -> ast.Forget:
        where = self._record_expr(c[1])
        return ast.Forget(where=where, reason=c[2].value if len(c) > 2 else None)

    def reason(self, c: list[Token]) -> _Tagged:
        return _Tagged("reason", decode_string(c[0]))

    def distill(self, c: list[Any]) -> ast.Distill:
        source: ast.Recall = c[1]
        into_tok: Token = c[2]
        into = decode_string(into_tok) if into_tok.type == "STRING" else into_tok.value
        if into not in KNOWLEDGE_TYPES:
            raise self._err(into_tok, f"DISTILL INTO needs a knowledge type "
                                      f"({_names(KNOWLEDGE_TYPES)}), got {into!r}")
        threshold = c[3] if len(c) > 3 else None
        return ast.Distill(source, str(into), threshold)

    def threshold(self, c: list[Token]) -> float:
        if len(c) > 2 and c[1].value != "confidence_threshold":
            raise self._err(c[1], f"DISTILL ... WITH takes confidence_threshold, not {c[1].value}")
        num = c[-1]
        value = decode_number(num)
        if not 0 <= value <= 1:
            raise self._err(num, "confidence_threshold must be within 0..1")
        return float(value)

    # -- JSON (REMEMBER) ----------------------------------------------------------------

    def object(self, c: list[Any]) -> _Lit:
        brace: Token = c[0]
        out: dict[str, Any] = {}
        depth = 1
        for pair in c[1:]:
            if pair is None:  # `{}`: lark's placeholder for the empty optional
                continue
            key_tok, lit = pair
            key = decode_string(key_tok) if key_tok.type == "STRING" else key_tok.value
            if key in out:
                raise self._err(key_tok, f"duplicate key {key!r}")
            out[str(key)] = lit.value
            depth = max(depth, lit.depth + 1)
        self._deep(brace, depth)
        return _Lit(out, brace, depth)

    def pair(self, c: list[Any]) -> tuple[Token, _Lit]:
        return c[0], c[1]

    def json_list(self, c: list[Any]) -> _Lit:
        items = [x for x in c[1:] if x is not None]
        depth = 1 + max((x.depth for x in items), default=0)
        self._deep(c[0], depth)
        return _Lit([x.value for x in items], c[0], depth)

    def json_word(self, c: list[Token]) -> _Lit:
        word = c[0].value
        if word not in ("true", "false", "null"):
            raise self._err(c[0], f"bare word {word!r} in an object: quote it as a string")
        return _Lit({"true": True, "false": False, "null": None}[word], c[0])

    # -- values -------------------------------------------------------------------------

    def string(self, c: list[Token]) -> _Lit:
        return _Lit(decode_string(c[0]), c[0])

    def number(self, c: list[Token]) -> _Lit:
        return _Lit(decode_number(c[0]), c[0])

    def word(self, c: list[Token]) -> _Lit:
        # Bare words are enum constants (KT-FACT, active); true/false/null in any case are
        # the literals.
        tok = c[0]
        lowered = tok.value.lower()
        if lowered in ("true", "false", "null"):
            return _Lit({"true": True, "false": False, "null": None}[lowered], tok)
        return _Lit(str(tok.value), tok)

    def value_list(self, c: list[Any]) -> _Lit:
        items = tuple(x for x in c[1:] if x is not None)
        if len(items) > MAX_LIST_ITEMS:
            raise self._err(c[0], f"a list holds at most {MAX_LIST_ITEMS} values")
        return _Lit(None, c[0], 1 + max((_depth(x) for x in items), default=0), items)

    def call(self, c: list[Any]) -> _Call:
        return _Call(c[0], tuple(x for x in c[1:] if x is not None))

    def value_call(self, c: list[_Call]) -> _Call:
        return c[0]

    def subquery_value(self, c: list[Any]) -> _Lit:
        sub: ast.ClusterSubquery
        sub, depth = c[1]
        self._deep(c[0], depth + 1)
        return _Lit(sub, c[0], depth + 1)

    def subquery(self, c: list[Any]) -> tuple[ast.ClusterSubquery, int]:
        _, col, src, *rest = c
        if src.value != SUBQUERY_SOURCE:
            raise self._err(src, f"subqueries read FROM {SUBQUERY_SOURCE}, not {src.value}")
        if col.value != SUBQUERY_COLUMN:
            raise self._err(col, f"subqueries SELECT {SUBQUERY_COLUMN}, not {col.value}")
        where: _E | None = None
        limit: int | None = None
        for part in rest:
            if isinstance(part, _E):
                where = part
            elif isinstance(part, Token) and part.type == "NUMBER":
                limit = self._count(part, "subquery LIMIT", MAX_ROWS)
        if where is not None:
            if _has_subquery(where.expr):
                raise self._err(where.token, "subqueries do not nest")
            for tok in where.fields:
                if tok.value not in CLUSTER_FIELDS:
                    raise self._err(tok, f"{tok.value!r} is not a field of {SUBQUERY_SOURCE} "
                                         f"(fields: {_names(CLUSTER_FIELDS)})")
        sub = ast.ClusterSubquery(str(col.value), str(src.value),
                                  where.expr if where else None, limit)
        return sub, where.depth if where else 0

    # -- conditions ---------------------------------------------------------------------

    def _record_expr(self, e: _E) -> ast.Expr:
        # Field names were checked against record and cluster fields together (the callback
        # cannot know yet whether it sits in a subquery); a record condition must not name a
        # cluster-only field. Today the cluster fields are a subset, so this is a guard.
        for tok in e.fields:
            if tok.value not in FIELDS:
                raise self._err(tok, f"unknown field {tok.value!r}")
        return e.expr

    def negate(self, c: list[Any]) -> _E:
        inner: _E = c[1]
        self._deep(c[0], inner.depth + 1)
        return _E(ast.Not(inner.expr), c[0], inner.depth + 1, inner.fields)

    def and_expr(self, c: list[_E]) -> _E:
        return self._junction(c, ast.And)

    def or_expr(self, c: list[_E]) -> _E:
        return self._junction(c, ast.Or)

    def _junction(self, c: list[_E], node: type[ast.And] | type[ast.Or]) -> _E:
        items: list[ast.Expr] = []
        for e in c:
            # (a AND b) AND c is flattened: same meaning, shallower tree, simpler planning.
            if isinstance(e.expr, node):
                items.extend(e.expr.items)
            else:
                items.append(e.expr)
        depth = 1 + max(e.depth for e in c)
        self._deep(c[0].token, depth)
        fields = tuple(tok for e in c for tok in e.fields)
        return _E(node(tuple(items)), c[0].token, depth, fields)

    def predicate_call(self, c: list[_Call]) -> _E:
        call = self._func(c[0], FuncRole.PREDICATE)
        return _E(call, c[0].token, 1, ())

    def comparison(self, c: list[Any]) -> _E:
        ftok, op_tok, val = c
        spec = self._field(ftok)
        op = ast.CompareOp(op_tok.value)
        value = self._compare_value(spec, ftok, op, op_tok, val)
        depth = 1 + _depth(val)
        self._deep(ftok, depth)
        return _E(ast.Compare(spec.name, op, value), ftok, depth, (ftok,))

    def in_list(self, c: list[Any]) -> _E:
        ftok, in_tok, lst = c
        spec = self._field(ftok)
        if spec.kind in (Kind.DATETIME, Kind.BOUND):
            raise self._err(in_tok, f"{spec.name} cannot be used with IN; compare it instead")
        values = tuple(self._scalar(spec, item, in_tok) for item in lst.items)
        return _E(ast.In(spec.name, values), ftok, 2, (ftok,))

    def not_in_list(self, c: list[Any]) -> _E:
        e = self.in_list([c[0], c[2], c[3]])
        return _E(ast.Not(e.expr), e.token, 3, e.fields)

    def contains(self, c: list[Any]) -> _E:
        ftok, kw, val = c
        spec = self._field(ftok)
        if spec.kind not in (Kind.LIST, Kind.STRING):
            raise self._err(kw, f"CONTAINS needs a list or text field; {spec.name} is "
                                f"{spec.kind.value}")
        value: ast.Scalar | ast.FuncCall
        if isinstance(val, _Call):
            value = self._func(val, FuncRole.VALUE)
        else:
            value = self._scalar(spec, val, kw)
            if value is None:
                raise self._err(val.token, "CONTAINS needs a value, not null")
        return _E(ast.Contains(spec.name, value), ftok, 2, (ftok,))

    # -- validation helpers -------------------------------------------------------------

    def _field(self, tok: Token) -> FieldSpec:
        spec = _ANY_FIELD.get(tok.value)
        if spec is None:
            raise self._err(tok, f"unknown field {tok.value!r} (known: {_names(FIELDS)})")
        return spec

    def _func(self, call: _Call, role: FuncRole) -> ast.FuncCall:
        spec = FUNCTIONS.get(call.name)
        if spec is None:
            raise self._err(call.token, f"unknown function {call.name!r} "
                                        f"(known: {_names(FUNCTIONS)})")
        if spec.role is not role:
            why = ("is a condition, not a value" if role is FuncRole.VALUE
                   else "gives a value; compare a field with it, e.g. caused_by = "
                        f"{call.name}(...)")
            raise self._err(call.token, f"{call.name}() {why}")
        n = len(call.args)
        if not spec.min_args <= n <= spec.max_args:
            want = (str(spec.min_args) if spec.min_args == spec.max_args
                    else f"{spec.min_args} or {spec.max_args}")
            raise self._err(call.token, f"{call.name}() takes {want} argument(s), got {n}")
        args: list[ast.Scalar] = []
        for i, arg in enumerate(call.args):
            if isinstance(arg, _Call) or arg.items or not isinstance(arg.value, str | int | float):
                raise self._err(_tok(arg), f"argument {i + 1} of {call.name}() must be "
                                           "a string or a number")
            args.append(arg.value)
        self._check_args(call, spec.role, args)
        return ast.FuncCall(call.name, tuple(args))

    def _check_args(self, call: _Call, role: FuncRole, args: list[ast.Scalar]) -> None:
        if args and (not isinstance(args[0], str) or not args[0].strip()):
            raise self._err(_tok(call.args[0]), f"{call.name}() needs a non-empty string")
        if role is FuncRole.PREDICATE and len(args) == 2:
            t = args[1]
            if isinstance(t, bool) or not isinstance(t, int | float) or not 0 <= t <= 1:
                raise self._err(_tok(call.args[1]), "a match threshold is a number within 0..1")

    def _compare_value(
        self, spec: FieldSpec, ftok: Token, op: ast.CompareOp, op_tok: Token, val: Any
    ) -> ast.Value:
        if spec.kind is Kind.BOUND and op is not ast.CompareOp.EQ:
            raise self._err(op_tok, f"write {spec.name} = 'YYYY-MM-DD' "
                                    f"(or compare created_at with {op.value})")
        if op in _ORDERING and spec.kind not in (Kind.NUMBER, Kind.DATETIME):
            also = "IN" if spec.kind is Kind.ENUM else "IN, CONTAINS"
            raise self._err(op_tok, f"{spec.name} is {spec.kind.value}: it takes = and != "
                                    f"(and {also}), not {op.value}")
        if isinstance(val, _Call):
            if spec.kind in (Kind.DATETIME, Kind.BOUND):
                raise self._err(val.token, f"{spec.name} is compared with a date literal")
            return self._func(val, FuncRole.VALUE)
        if isinstance(val.value, ast.ClusterSubquery):
            if op not in (ast.CompareOp.EQ, ast.CompareOp.NE) or spec.kind is not Kind.STRING:
                raise self._err(val.token, "a subquery can only be compared with = or != "
                                           "to a text field such as cluster_id")
            sub: ast.ClusterSubquery = val.value
            return sub
        if val.token.type == "LSQB":
            raise self._err(val.token, f"use {spec.name} IN [...] to compare with a list")
        if val.value is None and op in _ORDERING:
            raise self._err(val.token, "null only compares with = or !=")
        return self._scalar(spec, val, op_tok)

    def _scalar(self, spec: FieldSpec, lit: _Lit | _Call, at: Token) -> ast.Scalar:
        """Check one literal against a field's kind; dates become datetimes."""
        if isinstance(lit, _Call):
            raise self._err(lit.token, "functions cannot appear inside a list")
        if lit.token.type in ("LSQB", "LPAR"):
            raise self._err(lit.token, "expected a single value here")
        value = lit.value
        if value is None:
            if spec.kind is Kind.BOUND:
                raise self._err(lit.token, f"{spec.name} needs a date, not null")
            return None
        kind = spec.kind
        if kind is Kind.NUMBER:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise self._err(lit.token, f"{spec.name} is a number; got {lit.token.value}")
            return value
        if not isinstance(value, str):
            raise self._err(lit.token, f"{spec.name} needs a string; got {lit.token.value}")
        if kind in (Kind.DATETIME, Kind.BOUND):
            when: datetime | None = decode_datetime(value)
            if when is None:
                raise self._err(lit.token, f"{spec.name} needs an ISO-8601 date such as "
                                           f"'2026-01-01' or '2026-01-01T12:00:00Z'")
            return when
        if kind is Kind.ENUM and value not in spec.values:
            raise self._err(lit.token, f"{value!r} is not a {spec.name} "
                                       f"(one of: {_names(spec.values)})")
        return value


def _has_subquery(expr: ast.Expr) -> bool:
    # Depth is already capped (MAX_DEPTH), so the recursion is bounded.
    if isinstance(expr, ast.And | ast.Or):
        return any(_has_subquery(e) for e in expr.items)
    if isinstance(expr, ast.Not):
        return _has_subquery(expr.item)
    return isinstance(expr, ast.Compare) and isinstance(expr.value, ast.ClusterSubquery)


def _depth(x: _Lit | _Call) -> int:
    return 1 if isinstance(x, _Call) else x.depth


def _tok(x: _Lit | _Call) -> Token:
    return x.token
