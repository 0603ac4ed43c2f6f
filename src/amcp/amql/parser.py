"""``parse(text) -> Statement``: the one entry point from query text to a validated AST.

The contract a node relies on: for *any* string, ``parse`` returns a statement or raises
:class:`AmqlSyntaxError` (a 400 with line:column and a caret), nothing else. Lark's own
errors are translated here, at the boundary.
"""

from __future__ import annotations

import functools
import threading
from importlib import resources
from typing import cast

from lark import Lark, Token
from lark.exceptions import (
    LarkError,
    UnexpectedCharacters,
    UnexpectedEOF,
    UnexpectedInput,
    UnexpectedToken,
)
from lark.lexer import PatternStr

from amcp.amql.ast import Statement
from amcp.amql.build import AstBuilder
from amcp.amql.errors import AmqlSyntaxError
from amcp.amql.schema import MAX_QUERY_CHARS

# How the "expected ..." part of a message names the grammar's regex terminals.
_DESCRIBE = {
    "IDENT": "a name",
    "SYMBOL": "a word such as KT-FACT",
    "NUMBER": "a number",
    "STRING": "a quoted string",
    "CMP": "a comparison (= != < <= > >=)",
    "$END": "end of query",
}
_MAX_EXPECTED_SHOWN = 10

_lock = threading.Lock()


@functools.cache
def _lark() -> Lark:
    """Build the LALR parser once per process (about 30 ms), on first use, not at import."""
    grammar = resources.files("amcp.amql").joinpath("grammar.lark").read_text("utf-8")
    return Lark(
        grammar,
        parser="lalr",
        lexer="contextual",
        transformer=AstBuilder(),  # runs during the parse: no tree, no recursion
        propagate_positions=False,
        maybe_placeholders=True,
    )


def parser() -> Lark:
    # functools.cache alone could build twice under a thread race; harmless but wasteful.
    with _lock:
        return _lark()


@functools.cache
def _terminal_names() -> dict[str, str]:
    names = dict(_DESCRIBE)
    for term in parser().terminals:
        if isinstance(term.pattern, PatternStr) and term.name not in names:
            value = term.pattern.value
            names[term.name] = value.upper() if value.isalpha() else f"'{value}'"
    return names


def parse(text: str) -> Statement:
    """Parse and validate one AMQL statement (an optional trailing ``;`` is allowed)."""
    if not isinstance(text, str):
        raise AmqlSyntaxError(f"an AMQL query is a string, not {type(text).__name__}")
    if len(text) > MAX_QUERY_CHARS:
        raise AmqlSyntaxError(f"query longer than {MAX_QUERY_CHARS:,} characters")
    if not text.strip():
        raise AmqlSyntaxError("empty query: expected RECALL, REMEMBER, FORGET or DISTILL")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        # A lone surrogate would parse, then fail later when the value is stored or sent.
        line = text.count("\n", 0, exc.start) + 1
        column = exc.start - (text.rfind("\n", 0, exc.start) + 1) + 1
        raise AmqlSyntaxError("invalid character (lone UTF-16 surrogate)",
                              line=line, column=column, source=text) from None
    try:
        result = cast(Statement, parser().parse(text))  # the embedded transformer's output
    except AmqlSyntaxError as exc:
        raise AmqlSyntaxError(exc.reason, line=exc.line, column=exc.column, source=text) from None
    except UnexpectedInput as exc:
        raise _translate(exc, text) from None
    except LarkError as exc:  # any other lark failure is still the query's fault: a 400
        raise AmqlSyntaxError(f"cannot parse query: {exc}") from None
    return result


def _translate(exc: UnexpectedInput, text: str) -> AmqlSyntaxError:
    line, column = exc.line, exc.column
    if isinstance(exc, UnexpectedCharacters):
        pos: object = exc.pos_in_stream  # lark types it as None; it is an int here
        char = text[pos] if isinstance(pos, int) and 0 <= pos < len(text) else ""
        if char in ("'", '"'):
            reason = f"unterminated string: no closing {char}"
        else:
            reason = f"unexpected character {char!r}"
        return AmqlSyntaxError(reason, line=line, column=column, source=text)
    token = exc.token if isinstance(exc, UnexpectedToken) else None
    if isinstance(exc, UnexpectedEOF) or token is None or token.type == "$END":
        line, column = _end_position(text)
        reason = "unexpected end of query"
    else:
        reason = f"unexpected {_show(token)}"
    expected = sorted(getattr(exc, "expected", None) or ())
    if expected:
        names = _terminal_names()
        shown = sorted({names.get(t, t) for t in expected})
        more = len(shown) - _MAX_EXPECTED_SHOWN
        listed = ", ".join(shown[:_MAX_EXPECTED_SHOWN]) + (f" (+{more} more)" if more > 0 else "")
        reason += f"; expected {listed}"
    if not line or not column or line < 1 or column < 1:
        line, column = _end_position(text)
    return AmqlSyntaxError(reason, line=line, column=column, source=text)


def _show(token: Token) -> str:
    value = str(token.value)
    if len(value) > 40:
        value = value[:37] + "..."
    return repr(value)


def _end_position(text: str) -> tuple[int, int]:
    # Point just past the last non-blank character: where the missing piece belongs.
    body = text.rstrip()
    line = body.count("\n") + 1
    column = len(body) - (body.rfind("\n") + 1) + 1
    return line, column
