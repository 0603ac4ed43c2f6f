"""The one AMQL error: a 400 that points at the offending line and column, like a compiler."""

from __future__ import annotations

import unicodedata

from amcp.errors import AmcpError, ValidationError

# The excerpt shown under the message: enough to recognise the spot, bounded so a 256 KiB
# one-line REMEMBER cannot turn into a 256 KiB error message.
_EXCERPT_BEFORE = 60
_EXCERPT_AFTER = 40


class AmqlSyntaxError(ValidationError):
    """A query that does not parse or does not validate (unknown field, bad limit, ...).

    ``reason`` is the bare problem, ``line``/``column`` are 1-based (column counts code
    points) or ``None`` when the error was not raised against source text (an AST built in
    code). ``str(err)`` is the full compiler-style message with the source line and a caret.
    """

    def __init__(
        self,
        reason: str,
        *,
        line: int | None = None,
        column: int | None = None,
        source: str | None = None,
    ) -> None:
        self.reason = reason
        self.line = line
        self.column = column
        if line is None or column is None:
            message = f"amql: {reason}"
        elif source is None:
            message = f"amql:{line}:{column}: {reason}"
        else:
            message = f"amql:{line}:{column}: {reason}\n{_excerpt(source, line, column)}"
        # ValidationError would prefix "field: "; the compiler-style "amql:L:C:" replaces it.
        super().__init__("", message)
        self.field = "amql"


def _width(text: str) -> int:
    # East-Asian wide characters take two terminal cells; the caret must still line up
    # under the column when the query contains CJK text (the upstream examples do).
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _printable(text: str) -> str:
    # Tabs and control characters would shift or garble the caret line.
    return "".join(ch if ch.isprintable() else " " for ch in text)


def _excerpt(source: str, line: int, column: int) -> str:
    lines = source.split("\n")  # lark counts lines by "\n" only; so must we
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    index = max(column - 1, 0)
    start = max(index - _EXCERPT_BEFORE, 0)
    end = min(index + _EXCERPT_AFTER, len(text))
    prefix = "..." if start > 0 else ""
    suffix = "..." if end < len(text) else ""
    shown = _printable(text[start:end])
    pad = len(prefix) + _width(shown[: index - start])
    return f"  {prefix}{shown}{suffix}\n  {' ' * pad}^"


class AmqlEvaluationError(AmcpError):
    """The caller's view cannot decide a valid query (e.g. no callback for a function).

    A server-side gap, not the query's fault, hence 500 rather than 400.
    """
