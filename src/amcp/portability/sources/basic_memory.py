"""basic-memory: a directory of Markdown notes with front matter, observations, relations.

A note (as basic-memory's own parser, ``basic_memory/markdown/plugins.py``, reads it)::

    ---
    title: Coffee Brewing
    type: note
    permalink: coffee-brewing
    tags: [coffee]
    ---
    Prose …
    ## Observations
    - [method] Pour over gives more clarity #brewing (after testing)
    ## Relations
    - relates_to [[Coffee Origins]]

Mapping: each observation → one item (its ``[category]`` is the kind hint, its
``#tags`` and ``(context)`` kept); each relation → a triple item (subject = the note's
title, relation, target; a ``[[link]]`` inside prose is a ``links_to`` relation); the
prose → one fact item for the note. Scope: ``--scope`` or ``*``. Times: front-matter
``created``/``date``, else the file's mtime.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from amcp.errors import ValidationError
from amcp.portability.model import SourceItem
from amcp.portability.reader import SourceFile, decode
from amcp.portability.sources.base import ReadContext, Source, head_text

MAX_NOTE = 8 * 1024 * 1024
_OBS = re.compile(r"^\[([^\[\]()]+)\]\s+(.+)")
_TIMECODE = re.compile(r"^\d{1,3}:\d{2}(?::\d{2})?(?:[.,]\d{1,3})?$")
_REL = re.compile(r"""^(?P<label>[^\s\[\]"']+|"[^"]+"|'[^']+')\s+\[\[(?P<target>[^\]]+)\]\]""")
_LINK = re.compile(r"\[\[([^\]]+)\]\]")


def _sniff(src: SourceFile, head: bytes) -> bool:
    if Path(src.name).suffix.lower() != ".md":
        return False
    text = head_text(head)
    return text.startswith("---") or "## Observations" in text or "[[" in text


def front_matter(text: str, where: str) -> tuple[dict[str, Any], str]:
    """The YAML subset basic-memory writes: ``key: value``, ``key: [a, b]``, ``- item``."""
    if not text.startswith("---"):
        return {}, text
    end = text.find("\n---", 3)
    if end < 0:
        raise ValidationError(where, "front matter opened with --- is never closed")
    meta: dict[str, Any] = {}
    last: str | None = None
    for line in text[3:end].splitlines():
        if not line.strip():
            continue
        if line.lstrip().startswith("- ") and last is not None:
            cur = meta.get(last)
            meta[last] = [*(cur if isinstance(cur, list) else []), _scalar(line.strip()[2:])]
            continue
        key, sep, value = line.partition(":")
        if not sep:
            shown = line.strip()[:40]
            raise ValidationError(where, f"front matter line {shown!r} is not key: value")
        last = key.strip()
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            meta[last] = [_scalar(v) for v in value[1:-1].split(",") if v.strip()]
        else:
            meta[last] = _scalar(value) if value else []
    return meta, text[end + 4 :]


def _scalar(value: str) -> str:
    return value.strip().strip("'\"")


def _observation(line: str) -> dict[str, Any] | None:
    m = _OBS.match(line)
    category = m.group(1).strip() if m else ""
    # "[ ]", "[x]", "[-]", "[/]": task checkboxes; "[00:01:02]": transcript timecodes
    if not m or len(category) <= 1 or _TIMECODE.match(category):
        return None
    content, context = m.group(2).strip(), None
    if content.endswith(")") and (start := content.rfind("(")) > 0:
        content, context = content[:start].strip(), content[start + 1 : -1].strip()
    tags = [p[1:] for p in content.split() if p.startswith("#") and len(p) > 1]
    return {"category": m.group(1).strip(), "content": content, "tags": tags,
            "context": context}


def _read(src: SourceFile, ctx: ReadContext) -> Iterator[SourceItem]:
    if src.size > MAX_NOTE:
        raise ValidationError(src.name, f"a note over {MAX_NOTE} bytes is not a note")
    with src.opener() as fh:
        text = decode(fh.read(MAX_NOTE + 1), src.name).replace("\r\n", "\n")
    meta, body = front_matter(text, src.name)
    title = str(meta.get("title") or Path(src.name).stem)
    permalink = str(meta.get("permalink") or Path(src.name).stem)
    when = meta.get("created") or meta.get("date") or ctx.file_time
    base: dict[str, Any] = {"source": "basic-memory", "file": src.name, "created_at": when,
            "scope": ctx.scope(None), "agent": "basic-memory",
            "subject": title, "fallback_time": when == ctx.file_time}
    note_tags = tuple(str(t) for t in meta.get("tags") or [] if t)
    prose: list[str] = []
    n_obs = 0
    for lineno, raw in enumerate(body.splitlines(), start=1):
        line = raw.strip()
        item = line[2:].strip() if line.startswith(("- ", "* ")) else None
        obs = _observation(item) if item else None
        rel = _REL.match(item) if item and not obs else None
        if obs:
            yield SourceItem(
                locator=f"observation {n_obs} (body line {lineno})", text=obs["content"],
                source_id=f"{permalink}/obs/{n_obs}", kind_hint=obs["category"],
                tags=(*note_tags, *obs["tags"]), meta={"basic_memory": "observation", **obs},
                **base,
            )
            n_obs += 1
        elif rel:
            label, target = rel.group("label").strip("'\""), rel.group("target")
            yield _relation(base, permalink, title, label, target, lineno)
        elif line and not line.startswith("#"):
            prose.append(line)
            for target in _LINK.findall(line):
                yield _relation(base, permalink, title, "links_to", target, lineno)
    if prose:
        yield SourceItem(
            locator="note body", text=f"{title}: " + " ".join(prose), source_id=f"{permalink}/note",
            kind_hint="fact", tags=note_tags,
            meta={"basic_memory": "note", "front_matter": meta}, **base,
        )


def _relation(
    base: dict[str, Any], permalink: str, title: str, label: str, target: str, lineno: int
) -> SourceItem:
    return SourceItem(
        locator=f"relation (body line {lineno})", text=f"{title} {label} {target}",
        source_id=f"{permalink}/rel/{label}/{target}", kind_hint="fact", relation=label,
        target=target, meta={"basic_memory": "relation"}, **base,
    )


SOURCE = Source("basic-memory", "basic-memory Markdown notes", _sniff, _read)
