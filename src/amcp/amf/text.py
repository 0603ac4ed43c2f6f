"""A record's human-readable statement, once: the annotation if it has one, else the triple.

``AMFRecord.text`` uses it on the typed record; the hooks' fast reader and the node
client's lines use ``text_of`` on the AMF mapping (stored bytes, a wire payload), so every
reader shows the same words for the same record.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def statement(natural_language: str | None, subject: object, predicate: object,
              obj: object) -> str:
    if natural_language:
        return natural_language
    return f"{subject} {predicate} {obj}"


def text_of(amf: Mapping[str, Any]) -> str:
    """``statement`` of an AMF record in its mapping form (missing parts read as empty)."""
    ann = amf.get("annotation")
    core = amf.get("core")
    said = ann.get("natural_language") if isinstance(ann, Mapping) else None
    if not isinstance(core, Mapping):
        core = {}
    return statement(said if isinstance(said, str) else None, core.get("subject", ""),
                     core.get("predicate", ""), core.get("object", ""))


__all__ = ["statement", "text_of"]
