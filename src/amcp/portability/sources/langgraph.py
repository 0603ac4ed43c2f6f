"""LangGraph stores: the ``store`` table of ``SqliteStore`` / ``PostgresStore``.

Table (``langgraph/store/sqlite/base.py``): ``store(prefix, key, value JSON, created_at,
updated_at, expires_at, ttl_minutes)``; ``prefix`` is the namespace joined with ``.``.
An item's text is its value's ``content``/``text``/``memory``/``data`` string, else the
value as JSON; a ``kind``/``type``/``category`` string in the value is the kind hint.
Scope ``lg:<prefix>``, as amcp's own LangGraph store adapter maps namespaces. Times are
SQLite ``CURRENT_TIMESTAMP`` (UTC). Checkpoint tables (``checkpoints``, ``writes``) hold
serialised graph state, not memories, and are not read.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from amcp.errors import ValidationError
from amcp.portability.model import SourceItem
from amcp.portability.reader import SourceFile, cell, connect_ro, is_sqlite, sqlite_tables
from amcp.portability.sources.agents_sdk import utc_sqlite_time
from amcp.portability.sources.base import ReadContext, Source

TEXT_KEYS = ("content", "text", "memory", "data", "value")
KIND_KEYS = ("kind", "type", "category")


def _sniff(src: SourceFile, head: bytes) -> bool:
    if not is_sqlite(head):
        return False
    with src.local_path() as path:
        tables = sqlite_tables(path)
    return {"prefix", "key", "value"} <= set(tables.get("store", []))


def value_text(value: Any) -> str:
    if isinstance(value, dict):
        for key in TEXT_KEYS:
            if isinstance(value.get(key), str) and value[key].strip():
                return str(value[key]).strip()
    if isinstance(value, str):
        return value.strip()
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _read(src: SourceFile, ctx: ReadContext) -> Iterator[SourceItem]:
    with src.local_path() as path, contextlib.closing(connect_ro(path)) as db:
        rows = db.execute(
            "SELECT prefix, key, value, created_at, updated_at FROM store "
            "ORDER BY created_at, prefix, key"
        )
        for n, row in enumerate(rows, start=1):
            where = f"{src.name}: store row {n}"
            prefix, key, raw, created, updated = (cell(v, where) for v in row)
            try:
                value = json.loads(str(raw))
            except json.JSONDecodeError as exc:
                raise ValidationError(where, f"value is not JSON ({exc.msg})") from exc
            hint = next((value[k] for k in KIND_KEYS
                         if isinstance(value, dict) and isinstance(value.get(k), str)), None)
            tags = value.get("tags") if isinstance(value, dict) else None
            yield SourceItem(
                source="langgraph", file=src.name, locator=f"store {prefix}/{key}",
                text=value_text(value), created_at=utc_sqlite_time(created),
                source_id=f"{prefix}/{key}", kind_hint=hint, scope=ctx.scope(f"lg:{prefix}"),
                agent="langgraph",
                tags=tuple(t for t in tags if isinstance(t, str)) if isinstance(tags, list) else (),
                meta={"namespace": str(prefix).split("."), "key": key, "value": value,
                      "updated_at": updated},
            )


SOURCE = Source("langgraph", "a LangGraph store table (SqliteStore)", _sniff, _read)
