"""Claude data export: ``conversations.json``, ``projects.json`` (and ``memories.json``).

``conversations.json``: a list of ``{uuid, name, created_at, updated_at, chat_messages:
[{uuid, sender: human|assistant, text, content: [{type: text, text}], created_at}]}``
(ISO times with a zone). Messages go through the capture engine.

``projects.json``: a list of ``{uuid, name, description, prompt_template, created_at,
docs: [{uuid, filename, content, created_at}]}``. A project's instructions
(``prompt_template``) are a standing preference of the user for that project, its
description and each knowledge document a fact, all in scope ``project:<name>``.

``memories.json`` (newer exports): ``[{"conversations_memory": text, "project_memories":
{project uuid: text}}]``: each paragraph of a memory text is one item.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from amcp.errors import ValidationError
from amcp.portability.model import SourceItem
from amcp.portability.reader import SourceFile, load_json
from amcp.portability.sources.base import ReadContext, Source, head_text

MAX_DOC_CHARS = 200_000  # one project document; AMF caps a record at 1 MiB


def _sniff(src: SourceFile, head: bytes) -> bool:
    text = head_text(head)
    if not text.startswith("["):
        return False
    return '"chat_messages"' in text or '"prompt_template"' in text or (
        '"conversations_memory"' in text
    )


def _message_text(msg: Mapping[str, Any]) -> str:
    blocks = msg.get("content")
    if isinstance(blocks, list):
        texts = [b.get("text") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
        joined = "\n".join(t for t in texts if isinstance(t, str)).strip()
        if joined:
            return joined
    text = msg.get("text")
    return text.strip() if isinstance(text, str) else ""


def _conversations(doc: list[Any], src: SourceFile, ctx: ReadContext) -> Iterator[SourceItem]:
    for c_n, conv in enumerate(doc):
        where = f"{src.name}: [{c_n}]"
        if not isinstance(conv, dict) or not isinstance(conv.get("chat_messages"), list):
            raise ValidationError(where, "a Claude conversation needs chat_messages")
        cid = str(conv.get("uuid") or c_n)
        for m_n, msg in enumerate(conv["chat_messages"]):
            if not isinstance(msg, dict):
                raise ValidationError(f"{where}.chat_messages[{m_n}]", "not an object")
            text = _message_text(msg)
            if not text:
                continue
            yield SourceItem(
                source="claude", file=src.name, locator=f"[{c_n}].chat_messages[{m_n}]",
                text=text, created_at=msg.get("created_at") or conv.get("created_at"),
                source_id=f"{cid}/{msg.get('uuid') or m_n}", role=str(msg.get("sender")),
                conversation=f"claude:{cid}", scope=ctx.scope(None), agent="claude",
                meta={"title": conv.get("name")},
            )


def _projects(doc: list[Any], src: SourceFile, ctx: ReadContext) -> Iterator[SourceItem]:
    for p_n, proj in enumerate(doc):
        where = f"[{p_n}]"
        if not isinstance(proj, dict):
            raise ValidationError(f"{src.name}: {where}", "a project must be an object")
        name = str(proj.get("name") or proj.get("uuid") or p_n)
        base: dict[str, Any] = {"source": "claude", "file": src.name,
                                "scope": ctx.scope(f"project:{name}"),
                "agent": "claude"}
        when = proj.get("created_at") or ctx.file_time
        pid = str(proj.get("uuid") or p_n)
        for key, hint in (("prompt_template", "preference"), ("description", "fact")):
            text = proj.get(key)
            if isinstance(text, str) and text.strip():
                yield SourceItem(locator=f"{where}.{key}", text=text.strip(), created_at=when,
                                 source_id=f"{pid}/{key}", kind_hint=hint,
                                 meta={"claude": key, "project": name}, **base)
        for d_n, d in enumerate(proj.get("docs") or []):
            content = d.get("content") if isinstance(d, dict) else None
            if isinstance(content, str) and content.strip():
                yield SourceItem(
                    locator=f"{where}.docs[{d_n}]", text=content.strip()[:MAX_DOC_CHARS],
                    created_at=d.get("created_at") or when, kind_hint="fact",
                    source_id=f"{pid}/doc/{d.get('uuid') or d_n}",
                    meta={"claude": "doc", "filename": d.get("filename"), "project": name},
                    **base,
                )


def _memories(doc: list[Any], src: SourceFile, ctx: ReadContext) -> Iterator[SourceItem]:
    for n, entry in enumerate(doc):
        if not isinstance(entry, dict):
            raise ValidationError(f"{src.name}: [{n}]", "a memory entry must be an object")
        texts = [("conversations", entry.get("conversations_memory"))]
        texts += list((entry.get("project_memories") or {}).items())
        for label, text in texts:
            if not isinstance(text, str):
                continue
            for p_n, para in enumerate(p.strip() for p in text.split("\n\n")):
                if para:
                    yield SourceItem(
                        source="claude", file=src.name, locator=f"[{n}].{label} ¶{p_n}",
                        text=para.lstrip("-* ").strip(), created_at=ctx.file_time,
                        scope=ctx.scope(None), agent="claude", fallback_time=True,
                        meta={"claude": "memory", "of": label},
                    )


def _read(src: SourceFile, ctx: ReadContext) -> Iterator[SourceItem]:
    doc = load_json(src, ctx.options)
    if not isinstance(doc, list):
        raise ValidationError(src.name, "not a Claude export file: expected a JSON list")
    first = next((d for d in doc if isinstance(d, dict)), {})
    if "chat_messages" in first:
        yield from _conversations(doc, src, ctx)
    elif "conversations_memory" in first or src.basename == "memories.json":
        yield from _memories(doc, src, ctx)
    else:
        yield from _projects(doc, src, ctx)


SOURCE = Source("claude", "a Claude data export (conversations, projects, memories)",
                _sniff, _read)
