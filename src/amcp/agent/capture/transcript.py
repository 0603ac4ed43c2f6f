"""Turn coercion and a JSONL transcript reader.

Two line shapes are accepted: a plain turn `{"role": ..., "content": ...}` and a
Claude-Code transcript entry `{"type": "user", "message": {"role": ..., "content": ...}}`.
`content` may be a string or a list of blocks; only `text` blocks are the speaker's own
words (a `tool_result` inside a "user" message is tool output, not the user talking).
Bookkeeping lines without a message (summaries, system events) are skipped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from amcp.agent.capture.model import Turn
from amcp.errors import ValidationError

MAX_LINE_BYTES = 8 * 1024 * 1024  # a longer line is almost surely not a transcript turn


class TranscriptError(ValidationError):
    """A transcript line is malformed; `line` is 1-based."""

    def __init__(self, line: int, problem: str) -> None:
        super().__init__(f"line {line}", problem)
        self.line = line


def flatten_content(content: Any) -> str | None:
    """Text of a message's content; None when it holds no text at all."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, Mapping):
                if block.get("type") == "text":
                    text = block.get("text")
                    if not isinstance(text, str):
                        raise ValidationError("content", "text block without a string 'text'")
                    parts.append(text)
            else:
                raise ValidationError("content", f"block of type {type(block).__name__}")
        return "\n".join(parts) if parts else None
    kind = type(content).__name__
    raise ValidationError("content", f"must be a string or a list of blocks, not {kind}")


def coerce_turn(turn: Turn | Mapping[str, Any], *, index: int) -> Turn:
    """A `Turn` from a Turn or a `{role, content}` mapping (content may be blocks)."""
    if isinstance(turn, Turn):
        return turn if turn.index >= index else Turn(turn.role, turn.content, index)
    if not isinstance(turn, Mapping):
        raise ValidationError("turn", f"expected a mapping, got {type(turn).__name__}")
    role = turn.get("role")
    if not isinstance(role, str) or not role:
        raise ValidationError("role", "missing or not a string")
    if "content" not in turn:
        raise ValidationError("content", "missing")
    text = flatten_content(turn["content"])
    return Turn(role, text or "", index)


def _entry_turn(obj: Mapping[str, Any], index: int) -> Turn | None:
    message = obj.get("message")
    if isinstance(message, Mapping):  # Claude Code: {"type": "user", "message": {...}}
        role = message.get("role", obj.get("type"))
        if not isinstance(role, str) or not role:
            raise ValidationError("message.role", "missing or not a string")
        if "content" not in message:
            raise ValidationError("message.content", "missing")
        text = flatten_content(message["content"])
        return None if text is None else Turn(role, text, index)
    if "role" in obj or "content" in obj:
        return coerce_turn(obj, index=index)
    return None  # bookkeeping line (summary, system event, file snapshot)


def parse_lines(lines: Iterable[str | bytes]) -> Iterator[Turn]:
    """Turns from JSONL lines; raises `TranscriptError` naming the first bad line."""
    index = 0
    for lineno, raw in enumerate(lines, start=1):
        if len(raw) > MAX_LINE_BYTES:
            raise TranscriptError(lineno, f"line longer than {MAX_LINE_BYTES} bytes")
        try:
            line = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        except UnicodeDecodeError as exc:
            raise TranscriptError(lineno, f"not UTF-8: {exc.reason}") from None
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TranscriptError(lineno, f"invalid JSON: {exc.msg} (column {exc.colno})") from None
        if not isinstance(obj, dict):
            raise TranscriptError(lineno, f"expected a JSON object, got {type(obj).__name__}")
        try:
            turn = _entry_turn(obj, index)
        except ValidationError as exc:
            raise TranscriptError(lineno, exc.message) from None
        if turn is not None:
            index += 1
            yield turn


def read_transcript(path: str | Path) -> Iterator[Turn]:
    """Stream the turns of a JSONL transcript file (bounded memory: one line at a time)."""
    with Path(path).open("rb") as fh:
        yield from parse_lines(fh)
