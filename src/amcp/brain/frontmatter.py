"""Markdown files with a YAML front matter block: written deterministically, read leniently.

Written: ``---``, one ``key: value`` line per field in the order given, ``---``, the body.
Every value is JSON (strings double-quoted, lists and objects in flow style), which is
valid YAML — so any YAML reader (OKF consumers, people, GitHub's renderer) reads what we
wrote, and the bytes depend on nothing but the values. Characters YAML does not allow raw
inside a double-quoted scalar (C0/C1 controls, line and paragraph separators, BOM) are
escaped.

Read: with PyYAML's safe loader, so a person may write plain YAML (unquoted strings,
``tags: [a, b]``, block lists). YAML's implicit timestamps come back as the AMF string form.
A missing or malformed block is a ``FrontMatterError`` naming the file and the line.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

import yaml

from amcp.amf.timefmt import format_ts
from amcp.brain.errors import FrontMatterError

FENCE = "---"
_ESCAPE = re.compile("[\u0080-\u009f\u2028\u2029\ufeff]")


def scalar(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return _ESCAPE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def dump(fields: Mapping[str, Any], body: str) -> str:
    """A Markdown document: front matter with ``fields`` (None values left out), then body."""
    lines = [FENCE]
    for key, value in fields.items():
        if value is None:
            continue
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", key):
            raise ValueError(f"front matter key {key!r} is not a plain name")
        lines.append(f"{key}: {scalar(value)}")
    lines.append(FENCE)
    text = body if body.endswith("\n") or not body else body + "\n"
    return "\n".join(lines) + "\n" + text


def split(text: str, where: str = "file") -> tuple[str, str]:
    """(front matter source, body); FrontMatterError when there is no closed block."""
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    if not lines or lines[0].rstrip("\r") != FENCE:
        raise FrontMatterError(where, "does not start with a '---' front matter line")
    for n, line in enumerate(lines[1:], start=1):
        if line.rstrip("\r") == FENCE:
            return "\n".join(lines[1:n]), "\n".join(lines[n + 1:])
    raise FrontMatterError(where, "front matter is not closed by a '---' line")


def parse(text: str, where: str = "file") -> tuple[dict[str, Any], str]:
    """(fields, body) of a Markdown document with front matter."""
    head, body = split(text, where)
    try:
        loaded = yaml.safe_load(head) if head.strip() else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" (front matter line {mark.line + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise FrontMatterError(where, f"front matter is not valid YAML{line}: {problem}"
                               ) from None
    if not isinstance(loaded, dict):
        raise FrontMatterError(where, "front matter is not a mapping of key: value lines")
    fields = {str(k): _plain(v) for k, v in loaded.items()}
    return fields, body


def _plain(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return format_ts(value if value.tzinfo else value.replace(tzinfo=dt.UTC))
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def printable(text: str) -> bool:
    """No control characters other than tab/newline (what a body may carry as-is)."""
    return not any(unicodedata.category(c) == "Cc" and c not in "\t\n\r" for c in text)


__all__ = ["FENCE", "dump", "parse", "printable", "scalar", "split"]
