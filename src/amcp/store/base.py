"""The storage port: what every backend (SQLite, PostgreSQL, ...) provides to ``Memory``.

A store keeps AMF records immutable. What changes over a record's life is its *state*
(lifecycle, superseded_by, access statistics, learned weight), never its content — except
for purge, which wipes content and leaves a tombstone. Every state change is appended to a
change log ordered by HLC; sync, audit and export read that log.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from amcp.amf.record import AMFRecord
from amcp.amf.summary import RecordSummary
from amcp.amf.types import KnowledgeType, Lifecycle
from amcp.errors import CacheMissError, StoreError
from amcp.store.termstats import TermStats

if TYPE_CHECKING:
    import numpy as np  # annotations only: importing numpy costs ~0.3 s, hooks avoid it


class ChangeOp(StrEnum):
    PUT = "put"
    SUPERSEDE = "supersede"
    INVALIDATE = "invalidate"
    ARCHIVE = "archive"
    PURGE = "purge"
    # A learned weight changed (outcomes, decay rounds): weight orders what an agent is
    # shown, so it is node-side state the signed log vouches for (PROFILE §6).
    WEIGHT = "weight"
    # The memory firewall held a new record as a draft (the reason is logged), and a user
    # released one (draft -> active): docs/firewall.md.
    HOLD = "hold"
    CONFIRM = "confirm"
    # Tier 0 dropped the record's body and kept a pointer: a peer of a higher tier holds
    # it (docs/replication.md, "Tiers"). This node's own cache decision: never replicated.
    EVICT = "evict"


@dataclass(frozen=True, slots=True)
class RecordState:
    lifecycle: Lifecycle
    hlc: int
    superseded_by: str | None = None
    reason: str | None = None
    expires_at: float | None = None
    sensitive: bool = False
    weight: float = 0.5
    access_count: int = 0
    last_access: float | None = None
    stored_at: float = 0.0


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """A record as the store holds it. ``record`` is None only for a purged tombstone."""

    knowledge_id: str
    state: RecordState
    record: AMFRecord | None


@dataclass(frozen=True, slots=True)
class SummaryRow:
    """A record's state and its verified summary (``amf.summary``): what
    ``Store.summaries`` reads. ``summary`` is None for a purged tombstone and for a
    sensitive record (its body is encrypted and shown redacted: read it through ``get``)."""

    knowledge_id: str
    state: RecordState
    summary: RecordSummary | None


@dataclass(frozen=True, slots=True)
class StateRow:
    """A record's node state without its body: what ranking needs, read without decoding."""

    knowledge_id: str
    type: KnowledgeType
    state: RecordState
    created_at: str | None = None  # meta.created_at, for recency without decoding the body


@dataclass(frozen=True, slots=True)
class Change:
    seq: int
    hlc: int
    op: ChangeOp
    knowledge_id: str
    # op details that sync needs: checksum for put, reason, superseded_by ... never content,
    # so that purge never has to rewrite history.
    details: dict[str, Any]
    hash: str


@dataclass(frozen=True, slots=True)
class PutResult:
    knowledge_id: str
    created: bool  # False: an identical record was already stored (idempotent re-write)
    hlc: int
    rowid: int | None = None  # the record's row (vector index key) when the store has one


@dataclass(frozen=True, slots=True)
class PutItem:
    """One record for ``Store.put_many``: ``put``'s arguments as a value."""

    record: AMFRecord
    hlc: int
    vector: np.ndarray | None = None
    index_text: str | None = None
    index_context: str | None = None
    sensitive: bool = False
    expires_at: float | None = None
    lifecycle: Lifecycle = Lifecycle.ACTIVE


@dataclass(frozen=True, slots=True)
class RecordFilter:
    """Filters every backend must push into its own query language."""

    scopes: tuple[str, ...] | None = None  # record matches if any of its scopes is listed
    types: tuple[KnowledgeType, ...] | None = None
    kinds: tuple[str, ...] | None = None
    tags: tuple[str, ...] | None = None  # record must carry every tag listed
    lifecycles: tuple[Lifecycle, ...] | None = (Lifecycle.ACTIVE,)
    created_after: str | None = None
    created_before: str | None = None
    subject_prefix: str | None = None
    ids: tuple[str, ...] | None = None
    # A slice of the id space, id_from <= knowledge_id < id_before (either end open). Ids
    # are content hashes ("K-" + hex), so hex bounds cut a store into even parts: how a
    # cold brain compile splits its read over processes (amcp.brain.parts).
    id_from: str | None = None
    id_before: str | None = None
    subjects: tuple[str, ...] | None = None  # core.subject is exactly one of these
    events: tuple[str, ...] | None = None  # decay_model.invalidation_events names any of these
    caused_by: tuple[str, ...] | None = None  # causal.caused_by holds any of these ids
    sessions: tuple[str, ...] | None = None  # evidence names any of these (links.session_of)
    include_expired: bool = False
    now: float | None = None  # for TTL: records with expires_at <= now are hidden

    @property
    def selective(self) -> bool:
        """True when the filter names records by anything beyond lifecycle and expiry —
        the conditions an index over every live record cannot answer by itself."""
        return not (
            self.scopes is None
            and self.types is None
            and self.kinds is None
            and self.tags is None
            and self.created_after is None
            and self.created_before is None
            and self.subject_prefix is None
            and self.ids is None
            and self.id_from is None
            and self.id_before is None
            and self.subjects is None
            and self.events is None
            and self.caused_by is None
            and self.sessions is None
        )


@dataclass(frozen=True, slots=True)
class StoreStats:
    records: int
    by_lifecycle: dict[str, int]
    by_type: dict[str, int]
    vectors: int
    changes: int
    bytes: int
    embedding_model: str | None
    embedding_dim: int | None
    schema_version: int
    scopes: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class IntegrityReport:
    ok: bool
    checked_changes: int  # the log's length as checked (its last seq)
    problems: tuple[str, ...]
    head: str = ""  # the chain hash at ``checked_changes`` when ok
    walked: int = 0  # links recomputed: all of them, or those after a verified mark
    # Records found damaged (quarantined), with why: damage to records, not to the log, so
    # ``ok`` can still be True — the rest of the store is served.
    damaged: tuple[tuple[str, str], ...] = ()
    # "head": chain (from the mark), signed head, row count and digest, witnesses;
    # "full": all of that over the whole log, plus every row and body.
    mode: str = "head"


class LexicalIndex(Protocol):
    """Capability: a BM25 index over each record's own text and its context."""

    def search_lexical(
        self, terms: str, flt: RecordFilter, k: int, *, context_weight: float = 1.0
    ) -> list[tuple[str, float]]:
        """BM25 over the record's own terms and (weighted by ``context_weight``) its context."""
        ...

    def term_doc_freq(self, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        """The whole lexical index's document frequency of each term, and its size."""
        ...

    def scope_term_stats(self, scopes: Sequence[str], terms: Sequence[str]) -> TermStats:
        """The same for the *active* records of ``scopes`` (plus '*'), with their token
        count: the statistics of scope-local BM25 (``amcp.store.termstats``), kept in the
        transaction of every write, lifecycle change and purge."""
        ...

    def lexical_texts(self, knowledge_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        """The lexical index's (own terms, context) of each given record that has any."""
        ...

    def own_terms(self, knowledge_ids: Sequence[str]) -> dict[str, str]:
        """The lexical index's own-text terms (not context) of each given record that has any."""
        ...


class VectorSource(Protocol):
    """Capability: stored vectors keyed by a stable integer row key (the "rowid"), which
    the in-process vector index (``amcp.retrieval.vectors``) is built from."""

    def rowid_of(self, knowledge_id: str) -> int | None: ...

    def rowids(self, flt: RecordFilter) -> np.ndarray:
        """Row keys of every record passing ``flt`` (int64)."""
        ...

    def filter_rowids(self, rowids: Sequence[int], flt: RecordFilter) -> list[int]:
        """Those of ``rowids`` whose record passes ``flt``, in the order given."""
        ...

    def named_rowids(self, rowids: Sequence[int], flt: RecordFilter) -> dict[int, str]:
        """``filter_rowids`` with each passing row's knowledge id."""
        ...

    def ids_for_rowids(self, rowids: Sequence[int]) -> dict[int, str]: ...

    def iter_vectors(self, after_rowid: int = 0) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(row keys, matrix) batches of every stored vector after ``after_rowid``."""
        ...

    def set_vector(self, knowledge_id: str, vector: np.ndarray) -> None: ...

    def clear_vectors(self) -> None: ...

    def iter_index_texts(self) -> Iterator[tuple[str, str]]:
        """(knowledge id, indexed text) of every indexed record: what re-embedding reads."""
        ...


class VectorSearch(Protocol):
    """Capability: nearest-vector search by the store itself (an index kept in the
    database, PostgreSQL's pgvector HNSW). Recall asks it instead of building the
    in-process index from every stored vector, which at a million vectors is minutes of
    CPU and gigabytes per process."""

    def nearest_ids(
        self, vector: np.ndarray, k: int, flt: RecordFilter
    ) -> list[tuple[str, float]]:
        """Up to ``k`` (knowledge id, cosine similarity) pairs of records passing ``flt``,
        best first; approximate where the index is."""
        ...


class ChangeFeed(Protocol):
    """Capability: the change log read by sequence, which keeps a derived index (the
    vector index, its snapshot) in step with the store without rebuilding it."""

    store_id: str

    def change_head(self) -> tuple[int, str]:
        """The newest change's (seq, chain hash)."""
        ...

    def change_hash(self, seq: int) -> str | None: ...

    def changed_vectors(
        self, after_seq: int, upto_seq: int
    ) -> list[tuple[int, bool, bytes | None]]:
        """(rowid, still active, vector bytes) of records changed in ``(after, upto]``."""
        ...

    def changes_of(self, knowledge_id: str, limit: int = 200) -> list[Change]:
        """The change-log entries naming one record, oldest first."""
        ...

    def quiescent(self) -> AbstractContextManager[bool]:
        """Held while no write of this store runs; yields whether the store is idle."""
        ...


class AccessLog(Protocol):
    """Capability: access statistics (how often and when records were served), buffered
    by the store and written in the background by long-running servers."""

    def touch(self, knowledge_ids: Sequence[str], when: float) -> None: ...

    def access_count_since(self, knowledge_id: str, since: float) -> int: ...

    def flush_in_background(self) -> None: ...


class RawBodies(Protocol):
    """Capability: sealed rows read in bulk without decoding their bodies, for a reader
    that parses (and checks) the bytes itself (the context packer's cache)."""

    def raw_bodies(
        self, knowledge_ids: Sequence[str], flt: RecordFilter | None = None
    ) -> list[tuple[str, RecordState, bytes | None, str | None]]:
        """``(id, state, stored AMF bytes, row checksum)`` of each sealed row found; an
        encrypted body or a tombstone comes back as None."""
        ...


@dataclass(frozen=True, slots=True)
class Pointer:
    """What tier 0 keeps of an evicted record (upstream local_index_spec): enough to route a
    read, to say in recall that the record exists, and to verify it when it comes back.
    ``checksum``, ``envelope``, ``type``, ``scopes``, ``lifecycle`` and ``superseded_by`` are
    the signed ``evict`` change's details; ``subject``, ``tags`` and ``text`` help recall
    only (they are not vouched for; a fetched copy is checked against the checksum)."""

    knowledge_id: str
    type: KnowledgeType
    scopes: tuple[str, ...]
    checksum: str
    envelope: str | None
    lifecycle: Lifecycle
    superseded_by: str | None
    reason: str | None
    subject: str
    tags: tuple[str, ...]
    size: int  # bytes of the canonical AMF the eviction freed
    holder: str  # where it lives: the peer (endpoint) that confirmed holding it
    tier: int  # that peer's tier
    evicted_at: float
    hlc: int  # the HLC of the ``evict`` change that vouches for the pointer
    # A peer changed the record's state since: sync brings it back whole (not a digest
    # line, not a duplicate); reads still find the pointer and fetch it back.
    stale: bool = False
    text: str = ""  # the first 1,000 characters of its statement, for recall over pointers
    # The record's causal facts, so the conflict rule (PROFILE §10) can rank an evicted
    # claimant and walk a chain through evicted ancestors as if they were here. A pointer
    # logged before they were kept has ``causal_known`` False.
    causal_known: bool = False
    supersedes: str | None = None
    caused_by: tuple[str, ...] = ()
    causal_hlc: str | None = None
    evidence: int = 0  # len(core.evidence)


@dataclass(frozen=True, slots=True)
class TierUsage:
    """Tier 0's size: records and body bytes held here, and the pointers kept."""

    records: int
    bytes: int
    evicted: int
    evicted_bytes: int


class TierIndex(Protocol):
    """Capability: tier-0 eviction with a local index of pointers (docs/replication.md,
    "Tiers"). ``evict`` and ``release`` are writes: call them inside ``Memory.atomic()``."""

    def evict(self, knowledge_id: str, *, hlc: int, holder: str, tier: int) -> Pointer:
        """Drop the record's body and derived rows, keep its pointer, log ``evict``."""
        ...

    def release(self, knowledge_id: str, *, hlc: int, why: str) -> bool:
        """Mark a pointer stale (the record changed elsewhere: sync brings it back whole)."""
        ...

    def restate(self, knowledge_id: str, *, hlc: int, lifecycle: Lifecycle,
                superseded_by: str | None, reason: str | None) -> bool:
        """Record an evicted record's new state on its pointer (the conflict rule decided it
        here): put back when the record is fetched. False: no such pointer, or no change."""
        ...

    def pointer(self, knowledge_id: str) -> Pointer | None:
        """The verified pointer of an evicted record, or None."""
        ...

    def pointers(self, knowledge_ids: Sequence[str]) -> dict[str, Pointer]: ...

    def find_pointers(self, terms: Sequence[str], *, limit: int = 20) -> list[Pointer]:
        """Pointers whose subject, tags or text hold at least half the terms, best first."""
        ...

    def iter_pointers(self) -> Iterator[Pointer]: ...

    def usage(self) -> TierUsage: ...

    def sizes(self, knowledge_ids: Sequence[str]) -> dict[str, int]:
        """Stored body bytes of each given record."""
        ...


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a backend offers beyond the core port, declared by the backend and wired by the
    composition root (``Memory``); a missing one is ``None`` and its feature is off (no
    lexical index: vector-only recall; no vectors: lexical-only), never probed for."""

    lexical: LexicalIndex | None = None
    vectors: VectorSource | None = None
    feed: ChangeFeed | None = None
    access: AccessLog | None = None
    bodies: RawBodies | None = None
    tiers: TierIndex | None = None
    vector_search: VectorSearch | None = None


def pointer_of(store: Store, knowledge_id: str) -> Pointer | None:
    """The evicted record's pointer, when the store keeps a tier index and has one."""
    tiers = store.capabilities.tiers
    return tiers.pointer(knowledge_id) if tiers is not None else None


def cache_miss(pointer: Pointer) -> CacheMissError:
    """Upstream CACHE_MISS for an evicted record no holder was reached for (or asked)."""
    return CacheMissError(
        f"{pointer.knowledge_id} is evicted from tier 0; it lives at {pointer.holder} (tier "
        f"{pointer.tier}): a node with that peer online fetches it back",
        pointer={"knowledge_id": pointer.knowledge_id, "where": pointer.holder,
                 "tier": pointer.tier, "subject": pointer.subject})


def vectors_of(store: Store) -> VectorSource:
    """The store's vector source, for code that only runs when vectors exist (a searcher
    with an embedder has an index built from them); a backend without one is an error."""
    vectors = store.capabilities.vectors
    if vectors is None:
        raise StoreError(f"{type(store).__name__} keeps no vectors")
    return vectors


class Store(Protocol):
    """The core port every backend implements: records, their state, the signed change
    log, integrity and meta. Adapters: ``amcp.store.sqlite.SQLiteStore`` (default) and
    ``amcp.store.postgres.PostgresStore``. Indexes and statistics a backend may or may not
    have are its ``capabilities`` (docs/store.md)."""

    @property
    def capabilities(self) -> Capabilities:
        """The optional parts this backend offers, for the composition root to wire."""
        ...

    def generation(self) -> int:
        """A number that changes with every commit to the store, by this process or any
        other (weights and access flushes included): what every cache of store reads is
        keyed by, so no writer has to remember to invalidate anything."""
        ...

    def atomic(self) -> AbstractContextManager[None]:
        """A transaction that nests: the outermost commits, an exception rolls all back."""
        ...

    def put(
        self,
        record: AMFRecord,
        *,
        hlc: int,
        vector: np.ndarray | None = None,
        index_text: str | None = None,
        index_context: str | None = None,
        sensitive: bool = False,
        expires_at: float | None = None,
        lifecycle: Lifecycle = Lifecycle.ACTIVE,
    ) -> PutResult: ...

    def put_many(self, items: Sequence[PutItem]) -> list[PutResult]:
        """``put`` each item in order, in one transaction; same results and errors (a
        conflict or purged id fails the whole batch). The bulk path of imports and ingest."""
        ...

    def get(self, knowledge_id: str) -> StoredRecord | None: ...

    def get_many(self, knowledge_ids: Sequence[str]) -> list[StoredRecord]: ...

    def set_state(
        self,
        knowledge_id: str,
        op: ChangeOp,
        *,
        hlc: int,
        lifecycle: Lifecycle,
        reason: str | None = None,
        superseded_by: str | None = None,
    ) -> None: ...

    def purge(self, knowledge_id: str, *, hlc: int, reason: str | None = None) -> None: ...

    def put_tombstone(self, knowledge_id: str, *, hlc: int, reason: str | None = None) -> bool: ...

    def find_same_content(self, record: AMFRecord) -> StoredRecord | None:
        """A live (active) record saying exactly what ``record`` says (its content key),
        if any: the oldest that verifies among the first four active copies."""
        ...

    def find_same_content_many(self, records: Sequence[AMFRecord]) -> list[StoredRecord | None]:
        """``find_same_content`` of each record, in order, in one read per few hundred (a
        write batch's dedup; ``store/samecontent.py``)."""
        ...

    def due_for_expiry(self, now: float, limit: int = 1000) -> list[str]: ...

    def ids_with_prefix(self, prefix: str, limit: int) -> list[str]:
        """Up to ``limit`` stored knowledge ids (any lifecycle) starting with ``prefix``,
        sorted: what ``amcp.refs.resolve_ref`` turns a typed prefix into an id with."""
        ...

    def query(
        self, flt: RecordFilter, *, limit: int = 100, after: str | None = None
    ) -> list[StoredRecord]: ...

    def summaries(
        self, flt: RecordFilter, *, limit: int = 100, after: str | None = None
    ) -> list[SummaryRow]:
        """``query``'s records, in its order and pages, as verified summaries: each row's
        seal checked and its body's id, checksum and envelope recomputed as for ``query``,
        but only the sections a ``RecordSummary`` holds parsed (a listing of every record,
        the brain compile, skips building whole records). Row conditions only: a filter on
        what only a body answers (tags, events, causes, sessions) is refused
        (``ValidationError``); ask ``query``."""
        ...

    def count(self, flt: RecordFilter) -> int: ...

    def subjects(self, flt: RecordFilter, *, limit: int | None = None) -> list[str]:
        """Distinct ``core.subject`` of the records passing ``flt``, sorted; all unless
        ``limit``."""
        ...

    def states(
        self, flt: RecordFilter, *, limit: int = 100, ranked: bool = False
    ) -> list[StateRow]:
        """State rows matching ``flt`` without reading bodies; ``ranked`` orders them by
        weight (high first), then newest created_at, then knowledge_id — else by rowid.
        A negative ``limit`` means all of them."""
        ...

    def set_weight(self, knowledge_id: str, weight: float) -> None: ...

    def changes(self, since_hlc: int = 0, limit: int = 1000) -> list[Change]: ...

    def max_hlc(self) -> int: ...

    def get_meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None: ...

    def verify(self, *, full: bool = False) -> IntegrityReport: ...

    def integrity_warnings(self) -> tuple[str, ...]:
        """Findings about the store as a whole that refuse nothing (index rows that do not
        add up to the signed census), said with every answer."""
        ...

    def quarantined(self) -> dict[str, str]:
        """Records that failed verification (knowledge id → why), left out of every
        answer; the rest of the store is served."""
        ...

    def stats(self) -> StoreStats: ...

    def close(self) -> None: ...
