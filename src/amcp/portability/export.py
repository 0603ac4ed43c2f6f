"""Leaving: a store written out in another tool's format (``amcp export --to …``).

* ``amcp`` — the lossless NDJSON export (``ndjson.py``): states, tombstones, digests;
* ``portable`` — JSON Lines of portable records (docs/amf.md);
* ``mem0`` — ``{"results": [...]}`` as mem0's ``get_all`` returns it;
* ``mcp-memory`` — the MCP memory server's ``memory.jsonl`` (entities and relations);
* ``markdown`` — a directory of basic-memory notes, one per scope.

Active records only (the other tools have no superseded/invalidated states). Records that
came from a tool go back with what the import kept of them (``x-meta``), so a round trip
returns the tool's own items; other records are mapped by the rules in each function.
Sensitive records are left out unless ``include_sensitive``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from amcp.amf.portable import to_portable
from amcp.amf.record import AMFRecord, thaw
from amcp.errors import ValidationError
from amcp.ndjson import export_ndjson
from amcp.store.base import RecordFilter

if TYPE_CHECKING:  # Memory calls into this package: no import cycle at run time
    from amcp.memory import Memory

FORMATS = ("amcp", "portable", "mem0", "mcp-memory", "markdown")


@dataclass(frozen=True, slots=True)
class Exported:
    records: int
    tombstones: int = 0
    skipped_sensitive: int = 0


def export_to(
    memory: Memory, dest: Path | TextIO, to: str, *, scopes: Sequence[str] | None = None,
    include_sensitive: bool = False,
) -> Exported:
    if to not in FORMATS:
        raise ValidationError("--to", f"unknown format {to!r}; one of {', '.join(FORMATS)}")
    if to == "markdown":
        if not isinstance(dest, Path):
            raise ValidationError("--to", "markdown export writes a directory: give its path")
        return _markdown(memory, dest, scopes, include_sensitive)
    if isinstance(dest, Path):
        tmp = dest.with_name(dest.name + ".partial")
        with tmp.open("w", encoding="utf-8") as fh:
            rep = export_to(memory, fh, to, scopes=scopes, include_sensitive=include_sensitive)
        tmp.replace(dest)  # a killed export never leaves a file that looks complete
        return rep
    if to == "amcp":
        if scopes:
            raise ValidationError(
                "--scope", "the amcp export is the whole store; use --to portable"
            )
        r = export_ndjson(memory, dest, include_sensitive=include_sensitive)
        return Exported(r.records, r.tombstones, r.skipped_sensitive)
    writer = {"portable": _portable, "mem0": _mem0, "mcp-memory": _mcp}[to]
    return writer(memory, dest, scopes, include_sensitive)


def records(
    memory: Memory, scopes: Sequence[str] | None, include_sensitive: bool, skipped: list[int]
) -> Iterator[AMFRecord]:
    flt = RecordFilter(scopes=tuple(scopes) if scopes else None)
    after: str | None = None
    while page := memory.list_records(flt, limit=500, after=after, reveal=include_sensitive):
        for row in page:
            after = row.knowledge_id
            if row.record is None:
                continue
            if row.state.sensitive and not include_sensitive:
                skipped[0] += 1
                continue
            yield row.record
    # list_records pages by knowledge id; callers that need time order sort themselves


def _meta(rec: AMFRecord) -> dict[str, Any]:
    raw = rec.vendor_extensions.get("x-meta")
    return dict(thaw(raw)) if raw else {}


def _line(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"


def _portable(memory: Memory, out: TextIO, scopes: Sequence[str] | None, sens: bool) -> Exported:
    skipped = [0]
    n = 0
    for rec in sorted(records(memory, scopes, sens, skipped), key=lambda r: r.meta.created_at):
        p = to_portable(rec)
        ext = rec.vendor_extensions
        if ext.get("x-source") == "portable":
            meta = _meta(rec)
            p.update({k: meta[k] for k in ("type", "ttl", "meta", "id") if k in meta})
            if "x-created-at" in ext:
                p["created_at"] = ext["x-created-at"]
        elif "x-source-id" in ext:
            p["id"] = ext["x-source-id"]
        p["tags"] = [t for t in p.get("tags", []) if t != "imported" and not t.startswith("from:")]
        if not p["tags"]:
            del p["tags"]
        out.write(_line(p))
        n += 1
    return Exported(n, skipped_sensitive=skipped[0])


def _mem0_item(rec: AMFRecord) -> dict[str, Any]:
    ext = rec.vendor_extensions
    if ext.get("x-source") == "mem0":
        item = _meta(rec)
        item["memory"] = rec.text
        return item
    scope = rec.meta.project_scope[0]
    prefix, _, name = scope.partition(":")
    item = {"id": ext.get("x-source-id") or rec.knowledge_id, "memory": rec.text,
            "hash": hashlib.md5(rec.text.encode(), usedforsecurity=False).hexdigest(),
            "metadata": {"amcp_id": rec.knowledge_id, "kind": rec.kind, "type": rec.type.value},
            "created_at": rec.meta.created_at, "updated_at": rec.meta.created_at}
    key = {"user": "user_id", "agent": "agent_id", "run": "run_id"}.get(prefix)
    item[key or "user_id"] = name if key else scope
    return item


def _mem0(memory: Memory, out: TextIO, scopes: Sequence[str] | None, sens: bool) -> Exported:
    skipped = [0]
    items = [_mem0_item(r) for r in sorted(records(memory, scopes, sens, skipped),
                                           key=lambda r: r.meta.created_at)]
    json.dump({"results": items}, out, ensure_ascii=False, indent=2)
    out.write("\n")
    return Exported(len(items), skipped_sensitive=skipped[0])


def _mcp(memory: Memory, out: TextIO, scopes: Sequence[str] | None, sens: bool) -> Exported:
    skipped = [0]
    entities: dict[str, dict[str, Any]] = {}
    observations: dict[str, list[tuple[int, str]]] = {}
    relations: list[dict[str, str]] = []
    n = 0
    for rec in sorted(records(memory, scopes, sens, skipped), key=lambda r: r.meta.created_at):
        n += 1
        meta = _meta(rec) if rec.vendor_extensions.get("x-source") == "mcp-memory" else {}
        kind = meta.get("mcp")
        if kind == "entity":
            entities[meta["name"]] = {"name": meta["name"], "entityType": meta["entityType"]}
        elif kind == "observation":
            observations.setdefault(meta["entity"], []).append((int(meta["index"]), rec.text))
        elif kind == "relation":
            relations.append({"from": meta["from"], "to": meta["to"],
                              "relationType": meta["relationType"]})
        else:  # an amcp record: an observation of an entity named after its scope
            name = rec.meta.project_scope[0]
            entities.setdefault(name, {"name": name, "entityType": "scope"})
            observations.setdefault(name, []).append((1 << 30, rec.text))
    for name in observations:
        entities.setdefault(name, {"name": name, "entityType": "entity"})
    for name, ent in entities.items():
        obs = [t for _i, t in sorted(observations.get(name, []), key=lambda o: o[0])]
        out.write(_line({"type": "entity", **ent, "observations": obs}))
    for rel in relations:
        out.write(_line({"type": "relation", **rel}))
    return Exported(n, skipped_sensitive=skipped[0])


def _markdown(memory: Memory, root: Path, scopes: Sequence[str] | None, sens: bool) -> Exported:
    skipped = [0]
    notes: dict[str, list[AMFRecord]] = {}
    for rec in records(memory, scopes, sens, skipped):
        notes.setdefault(rec.meta.project_scope[0], []).append(rec)
    root.mkdir(parents=True, exist_ok=True)
    n = 0
    for scope, recs in sorted(notes.items()):
        recs.sort(key=lambda r: r.meta.created_at)
        slug = "".join(c if c.isalnum() or c in "-_" else "-" for c in scope).strip("-") or "all"
        lines = ["---", f"title: {scope}", "type: note", f"permalink: {slug}", "---", "",
                 f"# {scope}", "", "## Observations"]
        rels = []
        for rec in recs:
            rel = rec.vendor_extensions.get("x-relation")
            if isinstance(rel, dict) and rel.get("type") and rel.get("to"):
                rels.append(f"- {rel['type']} [[{rel['to']}]]")
            else:
                lines.append(f"- [{rec.kind or 'note'}] {' '.join(rec.text.split())}")
            n += 1
        if rels:
            lines += ["", "## Relations", *rels]
        (root / f"{slug}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return Exported(n, skipped_sensitive=skipped[0])
