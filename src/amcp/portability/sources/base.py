"""What every source reader shares: the read context, the ``Source`` record a reader
registers with, and small helpers (``amcp.portability.sources`` lists the readers)."""

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


def head_text(head: bytes) -> str:
    return head.decode("utf-8", "replace").lstrip("\ufeff").lstrip()
