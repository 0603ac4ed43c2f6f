from __future__ import annotations

from amcp.amf.portable import from_portable
from amcp.amf.record import AMFRecord


def rec(
    content: str,
    scope: str = "project:x",
    kind: str = "fact",
    ts: int = 1_700_000_000,
    tags: list[str] | None = None,
) -> AMFRecord:
    return from_portable(
        {
            "type": kind,
            "content": content,
            "scope": scope,
            "created_at": ts,
            "source_agent": "tester",
            "tags": tags,
        }
    )
