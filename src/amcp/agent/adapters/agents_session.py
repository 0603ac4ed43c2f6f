"""An OpenAI Agents SDK ``Session`` over ``Memory``: a run's conversation history lives in
an amcp store, where it is also searchable memory (``Memory.recall`` finds past turns).

Mapping: the session ↔ scope ``agents:<session_id>``; each input item ↔ one KT-CONTEXT
record (``x-kind`` ``interaction``, tag ``agents-session``) whose text is the item's
readable content (so recall indexes it), with the item itself kept losslessly as JSON in
``vendor_extensions["x-item"]`` and its position in ``x-seq``. The sequence number is also
in the subject, so two identical items ("ok") stay two records instead of being
deduplicated. ``pop_item`` and ``clear_session`` invalidate (AMF never deletes).

Implements the SDK's ``Session`` protocol (``session_id``, ``session_settings``,
``get_items``, ``add_items``, ``pop_item``, ``clear_session``); the blocking ``Memory``
calls run in a worker thread.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from amcp.store.base import RecordFilter

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory.session_settings import SessionSettings

    from amcp.memory import Memory
    from amcp.store.base import StoredRecord

TAG = "agents-session"
KIND = "interaction"
MAX_ITEMS = 100_000  # one session's history read back at most (bounded list)
TEXT_LIMIT = 4000  # chars of an item indexed for recall; the full item is in x-item


def session_scope(session_id: str) -> str:
    return "agents:" + re.sub(r"[^A-Za-z0-9._:-]+", "-", session_id)


def item_text(item: Mapping[str, Any]) -> str:
    """Readable text of a Responses input item (message text, tool output, or JSON)."""
    parts: list[str] = []
    content = item.get("content")
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, list):
        for block in content:
            if isinstance(block, Mapping):
                for key in ("text", "refusal"):
                    if isinstance(block.get(key), str):
                        parts.append(block[key])
    for key in ("output", "arguments"):
        if isinstance(item.get(key), str):
            parts.append(item[key])
    text = " ".join(parts).strip()
    role = item.get("role") or item.get("type") or "item"
    body = text or json.dumps(item, ensure_ascii=False, sort_keys=True)
    return f"{role}: {body}"[:TEXT_LIMIT]


class AmcpSession:
    """``agents`` ``Session`` protocol over an amcp ``Memory`` (owned by the caller)."""

    session_settings: SessionSettings | None = None

    def __init__(self, session_id: str, memory: Memory) -> None:
        self.session_id = session_id
        self.memory = memory
        self.scope = session_scope(session_id)
        self._lock = threading.Lock()  # Memory is shared state; calls arrive on threads

    # ------------------------------------------------------------------ blocking core

    def _records(self) -> list[StoredRecord]:
        rows = self.memory.list_records(
            RecordFilter(scopes=(self.scope,), tags=(TAG,), kinds=(KIND,)), limit=MAX_ITEMS
        )
        live = [r for r in rows if r.record is not None
                and self.scope in r.record.meta.project_scope]
        return sorted(live, key=_seq)

    def _get(self, limit: int | None) -> list[TResponseInputItem]:
        records = self._records()
        if limit is not None:
            records = records[-limit:] if limit > 0 else []
        return [_item_of(r) for r in records]

    def _add(self, items: Sequence[TResponseInputItem]) -> None:
        if not items:
            return
        with self._lock:
            existing = self._records()
            start = _seq(existing[-1]) + 1 if existing else 0
            batch = []
            for n, item in enumerate(items):
                seq = start + n
                encoded = json.dumps(item, ensure_ascii=False, sort_keys=True)
                batch.append({
                    "text": item_text(item), "type": "KT-CONTEXT", "scope": self.scope,
                    "kind": KIND, "tags": [TAG], "session": self.session_id,
                    "subject": f"Agents.Session.item{seq}", "object": encoded,
                    "extensions": {"x-item": encoded, "x-seq": seq},
                })
            self.memory.remember_many(batch)

    def _pop(self) -> TResponseInputItem | None:
        with self._lock:
            records = self._records()
            if not records:
                return None
            last = records[-1]
            self.memory.invalidate(last.knowledge_id, "popped from the agents session")
            return _item_of(last)

    def _clear(self) -> None:
        with self._lock:
            for r in self._records():
                self.memory.invalidate(r.knowledge_id, "agents session cleared")

    # ------------------------------------------------------------------ Session protocol

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        return await asyncio.to_thread(self._get, limit)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        await asyncio.to_thread(self._add, list(items))

    async def pop_item(self) -> TResponseInputItem | None:
        return await asyncio.to_thread(self._pop)

    async def clear_session(self) -> None:
        await asyncio.to_thread(self._clear)


def _seq(r: StoredRecord) -> int:
    assert r.record is not None
    seq = r.record.vendor_extensions.get("x-seq")
    return seq if isinstance(seq, int) else 0


def _item_of(r: StoredRecord) -> TResponseInputItem:
    assert r.record is not None
    item: TResponseInputItem = json.loads(str(r.record.vendor_extensions["x-item"]))
    return item


__all__ = ["AmcpSession", "item_text", "session_scope"]
