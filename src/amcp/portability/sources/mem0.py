"""mem0: ``Memory.get_all()`` / export JSON, and a local mem0 directory.

get_all (v1.1+) is ``{"results": [item, ...]}`` (older versions: a bare list; the platform
export: ``{"memories": [...]}``); an item is ``{id, memory, hash, metadata, created_at,
updated_at, user_id, agent_id, run_id, actor_id, role, ...}``. Scope: ``user:<user_id>``,
else ``agent:<agent_id>``, else ``run:<run_id>``; everything else is kept in ``meta`` so
the mem0 exporter gives the item back unchanged.

A local directory holds ``history.db`` (mem0's SQLite history: ADD/UPDATE/DELETE events)
and the vector store. Its FAISS store keeps the payloads in a JSON docstore beside the
index, which is read; the vectors themselves come from another model and are discarded.
A Qdrant local store keeps payloads pickled, which an importer must not unpickle, so there
the history database alone gives the memories (scope from ``--scope``).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from amcp.errors import ValidationError
from amcp.portability.model import SourceItem
from amcp.portability.reader import SourceFile, cell, connect_ro, is_sqlite, load_json
from amcp.portability.sources.base import ReadContext, Source, head_text

PROMOTED = ("user_id", "agent_id", "run_id", "actor_id", "role")
_CORE = {"id", "memory", "hash", "metadata", "created_at", "updated_at", *PROMOTED}


def scope_of(item: Mapping[str, Any]) -> str | None:
    for key, prefix in (("user_id", "user"), ("agent_id", "agent"), ("run_id", "run")):
        if item.get(key):
            return f"{prefix}:{item[key]}"
    return None


def _items(doc: Any, name: str) -> list[Any]:
    if isinstance(doc, list):
        return doc
    if isinstance(doc, dict):
        for key in ("results", "memories"):
            if isinstance(doc.get(key), list):
                return list(doc[key])
    raise ValidationError(name, "not a mem0 export: expected {'results': [...]} or a list")


def _sniff(src: SourceFile, head: bytes) -> bool:
    text = head_text(head)
    if re.match(r'\{\s*"(?:results|memories)"\s*:\s*\[', text):
        return '"memory"' in text or text.rstrip().endswith("[]}")
    return text.startswith("[") and '"memory"' in text and (
        '"hash"' in text or '"user_id"' in text
    )


def item_from(obj: Any, src: str, where: str, ctx: ReadContext) -> SourceItem:
    if not isinstance(obj, dict):
        raise ValidationError(where, "a mem0 memory must be an object")
    text = obj.get("memory")
    if not isinstance(text, str):
        raise ValidationError(f"{where}.memory", "missing or not text")
    meta = dict(obj.get("metadata") or {})
    category = meta.get("category") or (obj.get("categories") or [None])[0]
    keep = {k: v for k, v in obj.items() if k != "memory"}
    return SourceItem(
        source="mem0", file=src, locator=where.rsplit(": ", 1)[-1], text=text,
        created_at=obj.get("created_at") or ctx.file_time, source_id=obj.get("id"),
        kind_hint=category if isinstance(category, str) else None,
        scope=ctx.scope(scope_of(obj)), agent=obj.get("agent_id") or "mem0",
        meta=keep, fallback_time=not obj.get("created_at"),
    )


def _read(src: SourceFile, ctx: ReadContext) -> Iterator[SourceItem]:
    doc = load_json(src, ctx.options)
    for n, obj in enumerate(_items(doc, src.name)):
        yield item_from(obj, src.name, f"{src.name}: results[{n}]", ctx)


SOURCE = Source("mem0", "mem0 get_all()/export JSON", _sniff, _read)


# ------------------------------------------------------------------ local directory


def _sniff_local(src: SourceFile, head: bytes) -> bool:
    if src.basename != "history.db" or not is_sqlite(head):
        return False
    return src.path is not None


def _read_local(src: SourceFile, ctx: ReadContext) -> Iterator[SourceItem]:
    assert src.path is not None
    history = _history(src.path)
    docstores = sorted(src.path.parent.glob("**/*.json"))
    payloads: dict[str, dict[str, Any]] = {}
    for path in docstores:
        with contextlib.suppress(ValueError, OSError):
            doc = json.loads(path.read_text("utf-8"))
            if isinstance(doc, dict) and isinstance(doc.get("docstore"), dict):
                payloads.update(doc["docstore"])
    for n, (mid, (text, created, updated, events)) in enumerate(history.items()):
        payload = payloads.get(mid)
        if payload is None and text is None:
            continue  # deleted in mem0: its last event is DELETE
        obj: dict[str, Any] = {"id": mid, "memory": text, "created_at": created,
                               "updated_at": updated}
        if payload is not None:
            obj["memory"] = payload.get("data", text)
            obj["hash"] = payload.get("hash")
            obj.update({k: payload[k] for k in PROMOTED if k in payload})
            extra = {k: v for k, v in payload.items()
                     if k not in _CORE and k not in {"data", "text_lemmatized"}}
            if extra:
                obj["metadata"] = extra
        item = item_from(obj, src.name, f"{src.name}: memory {mid}", ctx)
        yield SourceItem(**{**_fields(item), "vector_model": "mem0 vector store",
                            "locator": f"history row {n + 1} ({events} events)"})


def _fields(item: SourceItem) -> dict[str, Any]:
    return {f: getattr(item, f) for f in item.__dataclass_fields__}


def _history(path: Path) -> dict[str, tuple[str | None, str, str, int]]:
    """memory id → (current text or None when deleted, created, updated, event count)."""
    out: dict[str, tuple[str | None, str, str, int]] = {}
    with contextlib.closing(connect_ro(path)) as db:
        try:
            rows = db.execute(
                "SELECT memory_id, new_memory, event, created_at, updated_at, is_deleted "
                "FROM history ORDER BY COALESCE(updated_at, created_at), rowid"
            ).fetchall()
        except Exception as exc:
            raise ValidationError(str(path), f"not a mem0 history database ({exc})") from exc
    for n, row in enumerate(rows, start=1):
        where = f"{path}: history row {n}"
        mid, text, event, created, updated, deleted = (cell(v, where) for v in row)
        prev = out.get(str(mid))
        first = prev[1] if prev else str(created)
        count = (prev[3] if prev else 0) + 1
        gone = str(event).upper() == "DELETE" or bool(deleted)
        out[str(mid)] = (None if gone else str(text), first, str(updated or created), count)
    return out


LOCAL = Source("mem0-local", "a local mem0 directory (history.db + vector store)",
               _sniff_local, _read_local)
