"""OpenAI Agents SDK ``SQLiteSession`` databases.

Tables (``agents/memory/sqlite_session.py``): ``agent_sessions(session_id, created_at,
updated_at)`` and ``agent_messages(id, session_id, message_data JSON, created_at)``. Each
message is a Responses input item: ``{"role", "content"}`` messages are conversation
turns for the capture engine; tool calls and their outputs (``function_call``,
``function_call_output``, ...) are logs. ``created_at`` is SQLite's ``CURRENT_TIMESTAMP``,
which is UTC by definition, so its naive text is read as UTC. Scope
``agents:<session_id>``, as amcp's own Agents SDK session adapter uses.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from amcp.agent.adapters.agents_session import session_scope
from amcp.errors import ValidationError
from amcp.portability.model import SourceItem
from amcp.portability.reader import SourceFile, cell, connect_ro, is_sqlite, sqlite_tables
from amcp.portability.sources.base import ReadContext, Source


def _sniff(src: SourceFile, head: bytes) -> bool:
    if not is_sqlite(head):
        return False
    with src.local_path() as path:
        tables = sqlite_tables(path)
    return "agent_messages" in tables and "message_data" in tables["agent_messages"]


def item_text(item: dict[str, Any]) -> str:
    """A message's text; a tool item's arguments/output, else the item as JSON."""
    content = item.get("content")
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        parts = [b.get("text") for b in content if isinstance(b, dict)]
        return "\n".join(p for p in parts if isinstance(p, str)).strip()
    for key in ("output", "arguments"):
        if isinstance(item.get(key), str):
            return f"{item.get('type')} {item.get('name') or ''} {item[key]}".strip()
    return json.dumps(item, ensure_ascii=False, sort_keys=True)


def utc_sqlite_time(value: object) -> object:
    """SQLite CURRENT_TIMESTAMP text ('2025-01-01 12:00:00') is UTC: say so."""
    if isinstance(value, str) and len(value) == 19 and value[10] == " ":
        return value + "Z"
    return value


def _read(src: SourceFile, ctx: ReadContext) -> Iterator[SourceItem]:
    with src.local_path() as path, contextlib.closing(connect_ro(path)) as db:
        rows = db.execute(
            "SELECT id, session_id, message_data, created_at FROM agent_messages "
            "ORDER BY session_id, id"
        )
        for row in rows:
            where = f"{src.name}: agent_messages id {row[0]}"
            mid, sid, data, created = (cell(v, where) for v in row)
            try:
                item: Any = json.loads(str(data))
            except json.JSONDecodeError as exc:
                raise ValidationError(where, f"message_data is not JSON ({exc.msg})") from exc
            if not isinstance(item, dict):
                raise ValidationError(where, "message_data must be a JSON object")
            role = item.get("role") or ("tool" if item.get("type") else "unknown")
            yield SourceItem(
                source="agents-sdk", file=src.name, locator=f"agent_messages id {mid}",
                text=item_text(item), created_at=utc_sqlite_time(created),
                source_id=f"{sid}/{mid}", role=str(role), conversation=f"agents:{sid}",
                scope=ctx.scope(session_scope(str(sid))), agent="openai-agents",
                meta={"item_type": item.get("type")},
            )


SOURCE = Source("agents-sdk", "an OpenAI Agents SDK SQLiteSession database", _sniff, _read)
