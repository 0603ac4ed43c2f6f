"""The typed vocabulary every importer speaks: source items, kinds, decisions, options.

An importer turns a file into ``SourceItem``s and knows nothing about the store; the shared
core (``plan``, ``write``, ``verify``) turns items into decisions and records. One item is
one thing the source tool held (a mem0 memory, an MCP observation, a chat turn), so counts
reconcile item by item: every item ends as kept, transformed, merged or dropped.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from amcp.amf.types import KnowledgeType


class Kind(StrEnum):
    """What an item is, after classification (docs/portability.md, "Classification")."""

    PREFERENCE = "preference"
    FACT = "fact"
    TASK = "task"
    EVENT = "event"
    LOG = "log"


# Kind → AMF type and confidence. Preferences follow the portable rule (KT-PRINCIPLE);
# logs are low-weight KT-CONTEXT: they decay in days and rank below everything else.
KIND_TYPE: dict[Kind, tuple[KnowledgeType, float]] = {
    Kind.PREFERENCE: (KnowledgeType.PRINCIPLE, 0.9),
    Kind.FACT: (KnowledgeType.FACT, 0.9),
    Kind.TASK: (KnowledgeType.CONTEXT, 0.8),
    Kind.EVENT: (KnowledgeType.CONTEXT, 0.8),
    Kind.LOG: (KnowledgeType.CONTEXT, 0.2),
}


class Decision(StrEnum):
    KEEP = "keep"  # stored as the source had it
    TRANSFORM = "transform"  # stored, changed on the way (reasons say how)
    MERGE = "merge"  # a duplicate of another item or of a stored record
    DROP = "drop"  # not stored (reasons say why)


@dataclass(frozen=True, slots=True)
class SourceItem:
    """One item read from another tool, before any decision.

    ``locator`` names the item inside ``file`` (``line 12``, ``results[3]``) for errors and
    samples; ``source_id`` is the tool's own id when it has one (upserts key on it);
    ``meta`` is what the exporters need to give the item back to its tool unchanged.
    """

    source: str
    file: str
    locator: str
    text: str
    created_at: object = None
    source_id: str | None = None
    kind_hint: str | None = None
    scope: str | None = None
    agent: str | None = None
    tags: tuple[str, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)
    role: str | None = None  # set for conversation turns: they go through capture
    conversation: str | None = None
    vector_model: str | None = None  # the item came with a vector from this model
    subject: str | None = None  # a graph triple's subject (MCP memory)
    relation: str | None = None
    target: str | None = None
    fallback_time: bool = False  # created_at is the file's time: the source had none

    @property
    def where(self) -> str:
        return f"{self.file}: {self.locator}"

    @property
    def text_hash(self) -> str:
        """What verification point 2 compares: the text as stored (edges trimmed)."""
        return content_hash(self.text.strip())

    @property
    def key(self) -> str:
        """Identity across runs: the tool's id, else what the item says and where it is."""
        if self.source_id:
            return f"{self.source}:{self.source_id}"
        return f"{self.source}:{self.conversation or ''}:{self.text_hash[:32]}"


def content_hash(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class ImportOptions:
    kind: str = "auto"  # a source name, or auto
    scope: str | None = None  # put everything here instead of the mapped scopes
    assume_tz: str | None = None  # zone for naive local times ("UTC", "Europe/Paris")
    day_first: bool = False  # 03/04/2024 is 3 April (else US order, 4 March)
    drop_logs: bool = False
    mapping: Mapping[str, str] = field(default_factory=dict)  # generic tables: field=column
    table: str | None = None  # generic SQLite: which table
    batch: int = 256
    max_json_bytes: int = 512 * 1024 * 1024  # a single JSON document is parsed whole
    max_archive_bytes: int = 4 * 1024 * 1024 * 1024
    max_archive_ratio: int = 200  # a member that inflates more than this is a zip bomb
    capture_conversations: bool = True
    samples: int = 3  # samples kept per decision in the report
    # Pass one's decisions for up to this many items are kept for pass two, which then writes
    # exactly what the report counted instead of reading and deciding every file a second
    # time (about a tenth of an import's CPU). A bigger import is read again, so memory
    # stays bounded (a decided item with its records is a few kB); 0: always read again.
    keep_planned: int = 20_000
    # Embed the next batch in a worker thread while this one is stored. Off by default: it
    # only pays where the model leaves cores idle; on this 2-core machine, where MiniLM
    # already uses both, it measured no faster (bench/portability.py runs both).
    prefetch: bool = False


@dataclass(frozen=True, slots=True)
class RecordSpec:
    """One record to write, fully decided (the writer only composes and stores it)."""

    text: str
    kind: Kind
    scope: str
    created_at: str
    agent: str
    source_key: str
    source_hash: str  # of the source item's text: verification point 2 checks it
    sensitive: bool = False
    tags: tuple[str, ...] = ()
    subject: str | None = None
    predicate: str | None = None
    object: str | None = None
    x_kind: str | None = None  # the capture engine's finer kind, when it decided
    confidence: float | None = None
    amf_type: KnowledgeType | None = None  # set when the capture engine chose it
    supersedes: str | None = None  # knowledge id of the older version (upsert)
    extensions: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Planned:
    """An item after its decision, with the records it becomes (none when dropped or
    merged, several when a conversation turn yields several captures)."""

    item: SourceItem
    decision: Decision
    reasons: tuple[str, ...]
    kind: Kind | None = None
    created_at: str | None = None
    records: tuple[RecordSpec, ...] = ()
    merged_into: str | None = None  # the source key or knowledge id it merged into
