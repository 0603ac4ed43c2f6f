"""One memory as one Markdown file: front matter holding the AMF fields, body the text.

This is the git brain's file format (docs/brain.md has an example). The front matter is
what a person may change besides the text: ``type``, ``scope``, ``kind``, ``tags``,
``confidence``; the rest (id, subject, created_at/by, supersedes) is there to be read and
is ignored on the way back, because the store — not a file — decides ids and provenance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from amcp.amf.record import AMFRecord
from amcp.brain.entries import ID_CHARS, safe_name
from amcp.brain.errors import FrontMatterError
from amcp.brain.frontmatter import FENCE, dump, parse

MEMORIES = "memories"
EDITABLE = ("type", "scope", "kind", "tags", "confidence")


def path_for(record: AMFRecord) -> str:
    """``memories/<region>/<K-id12>.md`` (repository-relative, POSIX)."""
    return f"{MEMORIES}/{safe_name(record.meta.project_scope[0])}/" \
           f"{record.knowledge_id[:ID_CHARS]}.md"


def render(record: AMFRecord) -> str:
    causal = record.causal
    fields: dict[str, Any] = {
        "knowledge_id": record.knowledge_id,
        "type": record.type.value,
        "scope": list(record.meta.project_scope),
        "kind": record.kind,
        "tags": list(record.tags) or None,
        "confidence": record.core.confidence,
        "subject": record.core.subject,
        "predicate": record.core.predicate.value,
        "created_at": record.meta.created_at,
        "created_by": record.meta.created_by,
        "supersedes": causal.supersedes if causal else None,
    }
    return dump(fields, record.text.strip() + "\n")


@dataclass(frozen=True, slots=True)
class MemoryFile:
    """A memory file as read back: the id it names (if any), its text and editable fields."""

    knowledge_id: str | None
    text: str
    fields: dict[str, Any]

    def changes_from(self, record: AMFRecord) -> dict[str, Any]:
        """The editable fields whose value differs from ``record``'s."""
        now = {
            "type": record.type.value,
            "scope": list(record.meta.project_scope),
            "kind": record.kind,
            "tags": list(record.tags) or None,
            "confidence": record.core.confidence,
        }
        return {k: v for k, v in self.fields.items() if now.get(k) != v}


def read(text: str, where: str, *, plain: bool = False) -> MemoryFile:
    """Parse a memory file; FrontMatterError says what is wrong, naming ``where``.

    ``plain``: a file without any front matter is all text (a new file a person wrote);
    a file that starts a front matter block must still close it properly."""
    if plain and not text.lstrip("\ufeff").startswith(FENCE):
        fields: dict[str, Any] = {}
        body = text
    else:
        fields, body = parse(text, where)
    body = body.strip()
    if not body:
        raise FrontMatterError(where, "the memory text (the body after the front matter) "
                               "is empty; delete the file to forget the memory")
    kid = fields.get("knowledge_id")
    if kid is not None and not isinstance(kid, str):
        raise FrontMatterError(where, "knowledge_id must be a string")
    editable: dict[str, Any] = {}
    for key in EDITABLE:
        if key not in fields or fields[key] is None:
            continue
        value = fields[key]
        if key == "scope":
            value = [value] if isinstance(value, str) else value
            if not (isinstance(value, list) and value and all(isinstance(s, str) and s
                                                              for s in value)):
                raise FrontMatterError(where, "scope must be a scope or a list of scopes")
        elif key == "tags":
            if not (isinstance(value, list) and all(isinstance(t, str) and t for t in value)):
                raise FrontMatterError(where, "tags must be a list of words")
            value = value or None
        elif key == "confidence":
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise FrontMatterError(where, "confidence must be a number from 0 to 1")
            value = float(value)
        elif not isinstance(value, str):
            raise FrontMatterError(where, f"{key} must be a string")
        editable[key] = value
    return MemoryFile(kid, body, editable)


__all__ = ["EDITABLE", "MEMORIES", "MemoryFile", "path_for", "read", "render"]
