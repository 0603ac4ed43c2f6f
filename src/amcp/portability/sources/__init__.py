"""One module per other tool. Each exposes a ``SOURCE``: a name, a sniff and a reader.

A reader yields ``SourceItem``s in the source's own order and raises ``ValidationError``
naming the file and line or item for anything it cannot read; it never touches the store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from amcp.amf.timefmt import format_ts
from amcp.portability.model import ImportOptions, SourceItem
from amcp.portability.reader import SourceFile


@dataclass(frozen=True, slots=True)
class ReadContext:
    options: ImportOptions
    file_time: str  # the file's mtime: the time of items whose source has none

    @classmethod
    def for_file(cls, src: SourceFile, options: ImportOptions) -> ReadContext:
        mtime = src.path.stat().st_mtime if src.path is not None else 0.0
        return cls(options, format_ts(datetime.fromtimestamp(mtime, tz=UTC)))

    def scope(self, mapped: str | None) -> str:
        return self.options.scope or mapped or "*"


Sniff = Callable[[SourceFile, bytes], bool]
Read = Callable[[SourceFile, ReadContext], Iterator[SourceItem]]


@dataclass(frozen=True, slots=True)
class Source:
    name: str
    help: str
    sniff: Sniff
    read: Read


def registry() -> dict[str, Source]:
    # Imported here so each source module stays independent of the others.
    from amcp.portability.sources import (
        agents_sdk,
        basic_memory,
        chatgpt,
        claude,
        generic,
        langgraph,
        letta,
        mcp_memory,
        mem0,
        portable,
    )

    # Order matters for auto-detection: specific shapes before the generic table reader.
    found = (
        mem0.SOURCE, mem0.LOCAL, mcp_memory.SOURCE, letta.SOURCE, chatgpt.SOURCE,
        claude.SOURCE, basic_memory.SOURCE, agents_sdk.SOURCE, langgraph.SOURCE,
        portable.SOURCE, generic.SOURCE,
    )
    return {s.name: s for s in found}


def head_text(head: bytes) -> str:
    return head.decode("utf-8", "replace").lstrip("\ufeff").lstrip()
