"""What the layers under ``Memory`` may ask of it: the facade's narrow interfaces.

AMQL, the context engine, evolution, the NDJSON bundle and the sync feed are called by
``Memory`` (``Memory.query`` → ``amql.run.run_query(self, …)``) and work through parts
of it — its store port, searcher, clock and write path. Typing their parameter as ``Memory``
made every one of them import the facade that imports them (issue 15: "cycles through the
facade"). They take these protocols instead; ``Memory`` satisfies them structurally, and
nothing here imports ``amcp.memory``.

``MemoryReader`` is what a read needs; ``MemoryWriter`` adds the write path (every rule of
``memory_writes`` still applies to writes made through it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from amcp.amf.record import AMFRecord
from amcp.amf.types import KnowledgeType, Lifecycle
from amcp.clock import HLC
from amcp.memory_writes import WriteOutcome
from amcp.retrieval.search import Hit, HybridSearcher
from amcp.store.base import RecordFilter, Store, StoredRecord

if TYPE_CHECKING:
    from amcp.firewall import Trust
    from amcp.retrieval.embedders import Embedder


@dataclass(frozen=True, slots=True)
class RecallResult:
    """``Memory.recall``'s answer: the hits in rank order and how long it took."""

    query: str
    hits: tuple[Hit, ...]
    took_ms: float
    # Each hit's provenance as the firewall verified it (origin, verification, label).
    trust: Mapping[str, Trust] = field(default_factory=dict)

    @property
    def records(self) -> list[AMFRecord]:
        return [h.item.record for h in self.hits if h.item.record is not None]


class MemoryReader(Protocol):
    """The read side of ``Memory`` that lower layers use."""

    @property
    def path(self) -> Path: ...
    @property
    def store(self) -> Store: ...
    @property
    def searcher(self) -> HybridSearcher: ...
    @property
    def embedder(self) -> Embedder | None: ...
    @property
    def clock(self) -> HLC: ...
    @property
    def node_uri(self) -> str: ...

    def get(self, knowledge_id: str) -> StoredRecord: ...

    def read(self, ids: Sequence[str], *, reveal: bool = False) -> list[StoredRecord]: ...

    def touch(self, knowledge_ids: Sequence[str], when: float) -> None:
        """Count an access of each record (served to a caller), where the store keeps them."""
        ...

    def list_records(
        self, flt: RecordFilter | None = None, *, limit: int = 100, after: str | None = None,
        reveal: bool = False,
    ) -> list[StoredRecord]: ...

    def recall(
        self,
        query: str,
        *,
        k: int = 10,
        scope: str | Sequence[str] | None = None,
        types: Sequence[KnowledgeType | str] | None = None,
        tags: Sequence[str] | None = None,
        kinds: Sequence[str] | None = None,
        created_after: Any = None,
        created_before: Any = None,
        lifecycles: Sequence[Lifecycle | str] | None = (Lifecycle.ACTIVE,),
        reveal: bool = False,
        touch: bool = True,
    ) -> RecallResult: ...

    def export(self, out: TextIO, *, include_sensitive: bool = False) -> Any: ...


class MemoryWriter(MemoryReader, Protocol):
    """``MemoryReader`` plus the write path."""

    def atomic(self) -> AbstractContextManager[None]: ...

    def compose(self, text: str | None = None, **fields: Any) -> AMFRecord: ...

    def remember(
        self, text: str | None = None, *, sensitive: bool = False, **fields: Any
    ) -> WriteOutcome: ...

    def supersede(
        self, old_id: str, text: str | None = None, *, sensitive: bool = False, **fields: Any
    ) -> WriteOutcome: ...

    def invalidate(self, knowledge_id: str, reason: str) -> WriteOutcome: ...

    def purge(self, knowledge_id: str, reason: str | None = None) -> WriteOutcome: ...

    def put(
        self, record: AMFRecord | Mapping[str, Any], *, sensitive: bool = False,
        lifecycle: Lifecycle = Lifecycle.ACTIVE, dedup: bool = True,
    ) -> WriteOutcome: ...

    def put_many(
        self, records: Sequence[tuple[AMFRecord, bool]], *,
        lifecycle: Lifecycle = Lifecycle.ACTIVE, dedup: bool = True, sealed_here: bool = False,
    ) -> list[WriteOutcome]: ...

    def import_(
        self, source: Iterable[str | bytes], *, batch: int = 256, progress: Any = None
    ) -> Any: ...


__all__ = ["MemoryReader", "MemoryWriter", "RecallResult"]
