"""The one-line forms of a record an agent sees first: its pointer and its summary (tiers 1
and 2 of ``tiers``). A leaf, so the pack's entries can build their pointer lines without
importing the module that orders a whole pack."""

from __future__ import annotations

from amcp.amf.record import AMFRecord

POINTER_ID_CHARS = 14  # "K-" + 12 hex: unique enough to read, the full id is one call away
POINTER_TEXT = 80
SUMMARY_TEXT = 200


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def pointer(record: AMFRecord, weight: float) -> str:
    return pointer_line(
        record.knowledge_id, record.type.value, record.meta.project_scope[0], weight, record.text
    )


def pointer_line(knowledge_id: str, ktype: str, scope: str, weight: float, text: str) -> str:
    """``pointer`` from its parts (the CSE holds them without building the record)."""
    head = knowledge_id[:POINTER_ID_CHARS]
    return f"{head} [{ktype} · {scope} · {weight:.2f}] {_one_line(text, POINTER_TEXT)}"


def summary(record: AMFRecord) -> str:
    text = " ".join(record.text.split())
    for stop in (". ", "。", "! ", "? ", "\n"):
        cut = text.find(stop)
        if 0 < cut < SUMMARY_TEXT:
            text = text[: cut + 1]
            break
    return _one_line(text, SUMMARY_TEXT)


__all__ = ["POINTER_ID_CHARS", "POINTER_TEXT", "SUMMARY_TEXT", "pointer", "pointer_line",
           "summary"]
