"""ChatGPT data export: ``conversations.json`` (and ``memories.json``, see below).

``conversations.json`` is a list of conversations ``{title, create_time, update_time,
mapping: {node id: {id, message, parent, children}}, current_node, conversation_id}``;
a message is ``{id, author: {role}, create_time, content: {content_type, parts}}``. The
mapping is a tree (edits and regenerations branch it): the conversation as the user last
saw it is the path from ``current_node`` up to the root, which is what is read. Only text
parts are taken; images, code-interpreter output and browsing displays are skipped.
Times are epoch seconds (floats); a message without one takes its conversation's.

ChatGPT's saved memories are not in the export archive; users copy them from Settings →
Personalization → Manage memories. A ``memories.json`` holding a list of strings (or of
objects with ``content``/``text``/``memory`` and optional ``created_at``) is read as them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from amcp.errors import ValidationError
from amcp.portability.model import SourceItem
from amcp.portability.reader import SourceFile, load_json
from amcp.portability.sources.base import ReadContext, Source, head_text

MAX_DEPTH = 100_000  # nodes walked per conversation: a cyclic mapping must not hang us


def _sniff(src: SourceFile, head: bytes) -> bool:
    text = head_text(head)
    if src.basename == "memories.json" and text.startswith("["):
        return '"conversations_memory"' not in text  # that one is Claude's
    return text.startswith("[") and '"mapping"' in text and (
        '"current_node"' in text or '"create_time"' in text
    )


def _path(conv: Mapping[str, Any], where: str) -> list[Mapping[str, Any]]:
    mapping = conv.get("mapping")
    if not isinstance(mapping, dict):
        raise ValidationError(f"{where}.mapping", "must be an object")
    node_id = conv.get("current_node")
    if node_id is None:  # no current node: follow the first child from the root
        roots = [k for k, v in mapping.items() if isinstance(v, dict) and not v.get("parent")]
        chain: list[Mapping[str, Any]] = []
        nid = roots[0] if roots else None
        while nid is not None and nid in mapping and len(chain) < MAX_DEPTH:
            chain.append(mapping[nid])
            kids = mapping[nid].get("children") or []
            nid = kids[0] if kids else None
        return chain
    out: list[Mapping[str, Any]] = []
    while node_id is not None and len(out) < MAX_DEPTH:
        node = mapping.get(node_id)
        if not isinstance(node, dict):
            raise ValidationError(f"{where}.mapping", f"node {node_id!r} is missing")
        out.append(node)
        node_id = node.get("parent")
    return out[::-1]


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content") or {}
    parts = content.get("parts") if isinstance(content, dict) else None
    if isinstance(content, dict) and isinstance(content.get("text"), str) and not parts:
        return str(content["text"])
    return "\n".join(p for p in parts or [] if isinstance(p, str)).strip()


def _conversations(doc: Any, src: SourceFile, ctx: ReadContext) -> Iterator[SourceItem]:
    if not isinstance(doc, list):
        raise ValidationError(src.name, "not a ChatGPT conversations.json: expected a list")
    for c_n, conv in enumerate(doc):
        where = f"{src.name}: conversations[{c_n}]"
        if not isinstance(conv, dict):
            raise ValidationError(where, "a conversation must be an object")
        cid = str(conv.get("conversation_id") or conv.get("id") or c_n)
        when = conv.get("create_time") or ctx.file_time
        for node in _path(conv, where):
            msg = node.get("message")
            if not isinstance(msg, dict):
                continue
            role = (msg.get("author") or {}).get("role") or "unknown"
            text = _text(msg)
            if not text:
                continue
            when = msg.get("create_time") or when
            yield SourceItem(
                source="chatgpt", file=src.name,
                locator=f"conversations[{c_n}] message {msg.get('id')}",
                text=text, created_at=when, source_id=f"{cid}/{msg.get('id')}", role=str(role),
                conversation=f"chatgpt:{cid}", scope=ctx.scope(None), agent="chatgpt",
                meta={"title": conv.get("title")},
            )


def _memories(doc: Any, src: SourceFile, ctx: ReadContext) -> Iterator[SourceItem]:
    for n, entry in enumerate(doc):
        text = entry if isinstance(entry, str) else None
        when: object = ctx.file_time
        if isinstance(entry, dict):
            text = entry.get("content") or entry.get("text") or entry.get("memory")
            when = entry.get("created_at") or entry.get("create_time") or when
        if not isinstance(text, str):
            raise ValidationError(f"{src.name}: [{n}]", "a saved memory must be text")
        yield SourceItem(
            source="chatgpt", file=src.name, locator=f"memories[{n}]", text=text.strip(),
            created_at=when, scope=ctx.scope(None), agent="chatgpt",
            meta={"chatgpt": "memory"}, fallback_time=when == ctx.file_time,
        )


def _read(src: SourceFile, ctx: ReadContext) -> Iterator[SourceItem]:
    doc = load_json(src, ctx.options)
    if src.basename == "memories.json":
        if not isinstance(doc, list):
            raise ValidationError(src.name, "saved memories must be a JSON list")
        yield from _memories(doc, src, ctx)
    else:
        yield from _conversations(doc, src, ctx)


SOURCE = Source("chatgpt", "a ChatGPT data export (conversations.json, memories.json)",
                _sniff, _read)
