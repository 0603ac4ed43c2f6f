"""The official MCP memory server's ``memory.json`` / ``memory.jsonl``: a knowledge graph.

Each line is ``{"type": "entity", "name", "entityType", "observations": [...]}`` or
``{"type": "relation", "from", "to", "relationType"}`` (older files hold one object
``{"entities": [...], "relations": [...]}``). The graph is kept as triples:

* an entity → one record ``<name> is a <entityType>`` (subject = the entity);
* each observation → one record whose subject is the entity and whose text is the
  observation (its position is kept so the entity's list comes back in order);
* a relation → one record ``<from> <relationType> <to>`` with subject, relation and target.

The graph has no timestamps: records take the file's modification time (said in the
report). Ids: ``entity:<name>``, ``obs:<name>:<n>``, ``rel:<from>|<type>|<to>``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from amcp.errors import ValidationError
from amcp.portability.model import SourceItem
from amcp.portability.reader import SourceFile, iter_lines, json_line, load_json
from amcp.portability.sources.base import ReadContext, Source, head_text


def _sniff(src: SourceFile, head: bytes) -> bool:
    text = head_text(head)
    first = text.split("\n", 1)[0]
    if ('"type"' in first and '"entityType"' in first) or '"relationType"' in first:
        return True
    return text.startswith("{") and '"entities"' in text[:2000] and '"entityType"' in text


def _entity(obj: dict[str, Any], src: str, where: str, ctx: ReadContext) -> Iterator[SourceItem]:
    name, etype, obs = obj.get("name"), obj.get("entityType"), obj.get("observations", [])
    if not isinstance(name, str) or not name:
        raise ValidationError(f"{where}.name", "an entity needs a name")
    if not isinstance(etype, str):
        raise ValidationError(f"{where}.entityType", "must be text")
    if not isinstance(obs, list) or not all(isinstance(o, str) for o in obs):
        raise ValidationError(f"{where}.observations", "must be a list of strings")
    common: dict[str, Any] = {"source": "mcp-memory", "file": src, "created_at": ctx.file_time,
              "scope": ctx.scope(None), "agent": "mcp-memory", "fallback_time": True}
    yield SourceItem(
        locator=where.rsplit(": ", 1)[-1], text=f"{name} is a {etype}", source_id=f"entity:{name}",
        kind_hint="fact", subject=name, meta={"mcp": "entity", "name": name, "entityType": etype},
        **common,
    )
    for n, text in enumerate(obs):
        yield SourceItem(
            locator=f"{where.rsplit(': ', 1)[-1]}.observations[{n}]", text=text,
            source_id=f"obs:{name}:{n}", subject=name,
            meta={"mcp": "observation", "entity": name, "index": n}, **common,
        )


def _relation(obj: dict[str, Any], src: str, where: str, ctx: ReadContext) -> SourceItem:
    a, b, rel = obj.get("from"), obj.get("to"), obj.get("relationType")
    for key, val in (("from", a), ("to", b), ("relationType", rel)):
        if not isinstance(val, str) or not val:
            raise ValidationError(f"{where}.{key}", "a relation needs from, to and relationType")
    assert isinstance(a, str)
    assert isinstance(b, str)
    assert isinstance(rel, str)
    return SourceItem(
        source="mcp-memory", file=src, locator=where.rsplit(": ", 1)[-1], text=f"{a} {rel} {b}",
        created_at=ctx.file_time, source_id=f"rel:{a}|{rel}|{b}", kind_hint="fact",
        scope=ctx.scope(None), agent="mcp-memory", subject=a, relation=rel, target=b,
        meta={"mcp": "relation", "from": a, "to": b, "relationType": rel}, fallback_time=True,
    )


def _one(obj: dict[str, Any], src: str, where: str, ctx: ReadContext) -> Iterator[SourceItem]:
    kind = obj.get("type")
    if kind == "entity":
        yield from _entity(obj, src, where, ctx)
    elif kind == "relation":
        yield _relation(obj, src, where, ctx)
    else:
        raise ValidationError(
            where, f"not an MCP memory line: type is {kind!r}, expected 'entity' or 'relation'"
        )


def _read(src: SourceFile, ctx: ReadContext) -> Iterator[SourceItem]:
    if head_text(src.head(4096)).startswith("{") and '"entities"' in head_text(src.head(4096))[
        :200
    ]:
        doc = load_json(src, ctx.options)
        if isinstance(doc, dict) and "entities" in doc:
            for n, e in enumerate(doc.get("entities") or []):
                yield from _one({"type": "entity", **e}, src.name, f"{src.name}: entities[{n}]",
                                ctx)
            for n, r in enumerate(doc.get("relations") or []):
                yield from _one({"type": "relation", **r}, src.name,
                                f"{src.name}: relations[{n}]", ctx)
            return
    for lineno, text in iter_lines(src):
        where = f"{src.name}: line {lineno}"
        yield from _one(json_line(text, where), src.name, where, ctx)


SOURCE = Source("mcp-memory", "the MCP memory server's memory.json(l)", _sniff, _read)


def graph_line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))



