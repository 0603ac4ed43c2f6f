"""Parts of an AMF record read from its mapping form (stored bytes, a wire payload, an
import line) without building the record — each defined once.

``statement``: the human-readable text, the annotation if it has one, else the triple
(``AMFRecord.text`` uses it on the typed record; the hooks' fast reader and the node
client's lines use ``text_of`` on the mapping, so every reader shows the same words).
``redacted_statement``: what a sensitive record shows in place of its text (``redact`` on
the typed record, the fast reader on the mapping).
``scopes_of``: the record's ``meta.project_scope`` (the HTTP import's and the node's
scope checks on records they have not parsed yet).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def statement(natural_language: str | None, subject: object, predicate: object,
              obj: object) -> str:
    if natural_language:
        return natural_language
    return f"{subject} {predicate} {obj}"


REDACTED = "[redacted]"


def redacted_statement(subject: object, vendor_extensions: Mapping[str, Any] | None) -> str:
    """A sensitive record's shown text: its subject and the writer's display hint
    (``x-redacted-display``), never its object."""
    hint = (vendor_extensions or {}).get("x-redacted-display")
    shown = hint if isinstance(hint, str) and hint else REDACTED
    return f"{subject}: {shown}"


def text_of(amf: Mapping[str, Any]) -> str:
    """``statement`` of an AMF record in its mapping form (missing parts read as empty)."""
    ann = amf.get("annotation")
    core = amf.get("core")
    said = ann.get("natural_language") if isinstance(ann, Mapping) else None
    if not isinstance(core, Mapping):
        core = {}
    return statement(said if isinstance(said, str) else None, core.get("subject", ""),
                     core.get("predicate", ""), core.get("object", ""))


def scopes_of(amf: Mapping[str, Any]) -> list[str]:
    """``meta.project_scope`` as given (strings only; none when it is missing or malformed:
    the record's own validation reports that)."""
    meta = amf.get("meta")
    scopes = meta.get("project_scope") if isinstance(meta, Mapping) else None
    return [s for s in scopes if isinstance(s, str)] if isinstance(scopes, list) else []


__all__ = ["scopes_of", "statement", "text_of"]
