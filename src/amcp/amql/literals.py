"""Decoding literal tokens: strings with escapes, numbers, dates.

Each decoder raises :class:`AmqlSyntaxError` at the token's position (or the exact
character, for a bad escape), never ``ValueError``, because ``parse`` promises nothing else.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

from lark import Token

from amcp.amql.errors import AmqlSyntaxError

# Integers are carried to MessagePack and SQL; keep them inside what both can hold.
_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1
# Python refuses int() of more than 4300 digits (ValueError); anything past 20 digits is out
# of range anyway, so refuse long digit strings before converting.
_MAX_INT_DIGITS = 21

_SIMPLE_ESCAPES = {
    '"': '"', "'": "'", "\\": "\\", "/": "/",
    "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
}
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")


def error_at(token: Token, reason: str, offset: int = 0) -> AmqlSyntaxError:
    """An error at ``token`` (or ``offset`` characters into it, across newlines)."""
    line = token.line or 1
    column = token.column or 1
    if offset:
        head = token.value[:offset]
        newlines = head.count("\n")
        if newlines:
            line += newlines
            column = offset - head.rfind("\n")
        else:
            column += offset
    return AmqlSyntaxError(reason, line=line, column=column)


def decode_string(token: Token) -> str:
    """The value of a single- or double-quoted STRING token (JSON escapes, plus \\')."""
    body = token.value[1:-1]
    if "\\" not in body:  # the common case: no work
        return str(body)
    out: list[str] = []
    i = 0
    n = len(body)
    while i < n:
        ch = body[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        esc = body[i + 1]  # the STRING regex guarantees a character after a backslash
        if esc in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[esc])
            i += 2
            continue
        if esc != "u":
            raise error_at(token, f"unknown escape '\\{esc}' in string", i + 1)
        code, i = _unicode_escape(token, body, i)
        out.append(code)
    return "".join(out)


def _unicode_escape(token: Token, body: str, i: int) -> tuple[str, int]:
    hex4 = body[i + 2 : i + 6]
    if not _HEX4.fullmatch(hex4):
        raise error_at(token, "\\u needs four hex digits", i + 1)
    code = int(hex4, 16)
    i += 6
    if 0xD800 <= code <= 0xDBFF:
        # A UTF-16 surrogate pair, as JSON writes characters outside the BMP.
        low = body[i + 2 : i + 6] if body[i : i + 2] == "\\u" else ""
        if _HEX4.fullmatch(low) and 0xDC00 <= int(low, 16) <= 0xDFFF:
            return chr(0x10000 + ((code - 0xD800) << 10) + (int(low, 16) - 0xDC00)), i + 6
    if 0xD800 <= code <= 0xDFFF:
        # A lone surrogate cannot be encoded as UTF-8 later (MessagePack, SQLite).
        raise error_at(token, "lone UTF-16 surrogate in \\u escape", i - 5)
    return chr(code), i


def decode_number(token: Token) -> int | float:
    text = str(token.value)
    if "." not in text and "e" not in text and "E" not in text:
        if len(text.lstrip("-")) > _MAX_INT_DIGITS:
            raise error_at(token, "integer out of range")
        value = int(text)
        if not _INT_MIN <= value <= _INT_MAX:
            raise error_at(token, "integer out of range")
        return value
    number = float(text)
    if not math.isfinite(number):
        raise error_at(token, "number out of range")
    return number


def decode_datetime(text: str) -> datetime | None:
    """An ISO-8601 date or date-time as an aware UTC datetime; ``None`` if not one.

    A date alone means midnight UTC; a time without an offset is taken as UTC, like
    ``meta.created_at`` (PROFILE §6).
    """
    if not 10 <= len(text) <= 40:  # fromisoformat accepts odd short forms like "2026"
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)
