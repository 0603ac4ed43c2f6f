"""amcp's portable records (docs/amf.md): ``{id, type, content, scope, source_agent,
created_at, ttl, tags, meta}``, as a JSON list or one per line.

Upserted by ``id``: importing a record whose id is already stored with other content
supersedes the stored version instead of leaving two active copies; the same content
again is "already stored". ``type`` (fact, task, preference, skill, interaction) is the
kind hint; unknown fields are refused, naming the field and the line.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from amcp.amf.portable import PORTABLE_FIELDS
from amcp.errors import ValidationError
from amcp.portability.model import SourceItem
from amcp.portability.reader import SourceFile, iter_lines, json_line, load_json
from amcp.portability.sources.base import ReadContext, Source, head_text


def _sniff(src: SourceFile, head: bytes) -> bool:
    text = head_text(head)
    return '"content"' in text and '"type"' in text and (
        '"source_agent"' in text or '"created_at"' in text
    ) and '"chat_messages"' not in text and '"mapping"' not in text


def item(obj: Any, src: SourceFile, locator: str, ctx: ReadContext) -> SourceItem:
    where = f"{src.name}: {locator}"
    if not isinstance(obj, dict):
        raise ValidationError(where, "a portable record must be an object")
    extra = sorted(set(obj) - PORTABLE_FIELDS)
    if extra:
        raise ValidationError(f"{where}.{extra[0]}", "unknown portable field")
    content = obj.get("content")
    if not isinstance(content, str) or not content.strip():
        raise ValidationError(f"{where}.content", "must be non-empty text")
    kind = obj.get("type")
    if not isinstance(kind, str) or not kind:
        raise ValidationError(f"{where}.type", "is required (fact, task, preference, ...)")
    tags = obj.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise ValidationError(f"{where}.tags", "must be a list of strings")
    return SourceItem(
        source="portable", file=src.name, locator=locator, text=content.strip(),
        created_at=obj.get("created_at") if obj.get("created_at") is not None else ctx.file_time,
        source_id=str(obj["id"]) if obj.get("id") is not None else None, kind_hint=kind,
        scope=ctx.scope(obj.get("scope")), agent=obj.get("source_agent") or "portable",
        tags=tuple(tags), meta={k: obj[k] for k in ("type", "ttl", "meta", "id") if k in obj},
        fallback_time=obj.get("created_at") is None,
    )


def _read(src: SourceFile, ctx: ReadContext) -> Iterator[SourceItem]:
    if Path(src.name).suffix.lower() == ".json" or head_text(src.head(64)).startswith("["):
        doc = load_json(src, ctx.options)
        if not isinstance(doc, list):
            raise ValidationError(src.name, "expected a list of portable records")
        for n, obj in enumerate(doc):
            yield item(obj, src, f"[{n}]", ctx)
        return
    for lineno, text in iter_lines(src):
        yield item(json_line(text, f"{src.name}: line {lineno}"), src, f"line {lineno}", ctx)


SOURCE = Source("portable", "amcp portable records (docs/amf.md)", _sniff, _read)
