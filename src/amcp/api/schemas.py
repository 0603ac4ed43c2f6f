"""Pydantic models of the HTTP API: request validation and the OpenAPI document.

Pydantic stays here, at the edge; handlers turn these models into plain keyword arguments
for ``Memory`` and its typed results back into these models. Every string is checked to be
encodable as UTF-8 (JSON allows lone surrogates, SQLite and the canonical encoder do not),
and every collection and number has a bound, so no request can make a handler fail with
anything but a 4xx.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StrictBool

from amcp.amf.types import KnowledgeType, Lifecycle
from amcp.firewall.provenance import Origin

MAX_TEXT = 32_000  # characters of one memory: far above a note, far below a document dump
MAX_NAME = 512  # scopes, tags, kinds, subjects, ids
MAX_ITEMS = 64  # list-valued filters and fields
MAX_RECALL_K = 200  # Memory allows 1000; an HTTP page of 200 full records is plenty
MAX_OUTCOME_IDS = 256
MAX_BUDGET = 1_000_000
MAX_AMQL = 16_000


def utf8_text(value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text (no lone surrogates)") from None
    return value


Text = Annotated[str, AfterValidator(utf8_text), Field(min_length=1, max_length=MAX_TEXT)]
Name = Annotated[str, AfterValidator(utf8_text), Field(min_length=1, max_length=MAX_NAME)]
Names = Annotated[list[Name], Field(max_length=MAX_ITEMS)]
Timestamp = Annotated[str, AfterValidator(utf8_text), Field(min_length=1, max_length=64)]
Confidence = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]


class _In(BaseModel):
    # Unknown fields are refused, so a misspelt option is a 400 and not silently ignored.
    model_config = ConfigDict(extra="forbid")


def _one_or_many(value: object) -> object:
    """People write ``"scope": "team:x"``; accept it as ``["team:x"]``."""
    return [value] if isinstance(value, str) else value


Scopes = Annotated[
    list[Name], BeforeValidator(_one_or_many), Field(min_length=1, max_length=MAX_ITEMS)
]


Writer = Annotated[str, AfterValidator(utf8_text), Field(min_length=1, max_length=200)]
Signature = Annotated[str, AfterValidator(utf8_text), Field(min_length=1, max_length=300)]


class ProvenanceIn(_In):
    """Who wrote a memory and through which channel (docs/firewall.md). Without it an API
    write is the agent's, unverified: only a signature by a registered writer key makes a
    claim count."""

    origin: Origin
    writer: Writer | None = None
    signature: Signature | None = None


class RememberIn(_In):
    text: Text
    type: KnowledgeType = KnowledgeType.FACT
    # None: the writer's own scope (``Memory.own_scope``); "*" only when asked for.
    scope: Scopes | None = None
    tags: Names | None = None
    kind: Name | None = None
    subject: Name | None = None
    confidence: Confidence = 0.9
    sample_size: Annotated[int, Field(ge=1, le=10**9)] | None = None  # KT-PATTERN needs it
    context: Text | None = None
    ttl: Annotated[float, Field(ge=0, le=10 * 365 * 86400, allow_inf_nan=False)] | None = None
    session: Name | None = None
    sensitive: StrictBool = False
    provenance: ProvenanceIn | None = None


class SupersedeIn(_In):
    text: Text
    type: KnowledgeType | None = None
    scope: Scopes | None = None
    tags: Names | None = None
    kind: Name | None = None
    confidence: Confidence = 0.9
    sensitive: StrictBool = False


class InvalidateIn(_In):
    reason: Text


class PurgeIn(_In):
    reason: Text | None = None


class RecallIn(_In):
    query: Text
    k: Annotated[int, Field(ge=1, le=MAX_RECALL_K)] = 10
    scope: Names | None = None
    types: Annotated[list[KnowledgeType], Field(max_length=MAX_ITEMS)] | None = None
    tags: Names | None = None
    kinds: Names | None = None
    created_after: Timestamp | None = None
    created_before: Timestamp | None = None
    lifecycles: Annotated[list[Lifecycle], Field(min_length=1, max_length=8)] = [Lifecycle.ACTIVE]
    reveal: StrictBool = False


class QueryIn(_In):
    amql: Annotated[str, AfterValidator(utf8_text), Field(min_length=1, max_length=MAX_AMQL)]


class ContextIn(_In):
    task: Text
    budget_tokens: Annotated[int, Field(ge=1, le=MAX_BUDGET)] = 8000
    project: Name | None = None
    scopes: Names | None = None
    working_tokens: Annotated[int, Field(ge=0, le=MAX_BUDGET)] | None = None


class OutcomeIn(_In):
    knowledge_ids: Annotated[list[Name], Field(min_length=1, max_length=MAX_OUTCOME_IDS)]
    result: Literal["success", "failure", "neutral"]


# ---------------------------------------------------------------------------- responses


class ProblemOut(BaseModel):
    status: int = Field(description="AMCP status code (PROFILE §1)")
    error: str
    field: str | None = None


class NearDuplicate(BaseModel):
    knowledge_id: str
    cosine: float


class WriteOut(BaseModel):
    knowledge_id: str
    status: int = Field(description="201 created, 200 already stored, 204 state changed")
    created: bool
    hlc: int
    duplicate_of: str | None = None
    near_duplicates: list[NearDuplicate] = []
    held: str | None = Field(None, description="Why the memory firewall stored it as a draft")
    beside: str | None = Field(None, description="The trusted record a held update contradicts")


class TrustOut(BaseModel):
    """An item's provenance as the node verified it (never as the writer claimed it)."""

    origin: Origin
    verification: Literal["verified", "local", "unverified"]
    tier: int
    label: str = Field(description='What to show beside the item: "from a web page, unverified"')
    writer: str | None = None
    instruction: list[str] = []
    stuffed: bool = False


class StateOut(BaseModel):
    lifecycle: Lifecycle
    reason: str | None = None
    superseded_by: str | None = None
    sensitive: bool = False
    weight: float
    access_count: int
    last_access: float | None = None
    expires_at: float | None = None


class ItemOut(BaseModel):
    knowledge_id: str
    amf: dict[str, Any] | None = Field(description="The AMF record; null for a purged tombstone")
    state: StateOut


class HitOut(ItemOut):
    trust: TrustOut | None = None
    score: float
    lexical_rank: int | None = None
    vector_rank: int | None = None


class DraftsOut(BaseModel):
    """Records the memory firewall holds (``state.reason`` says why)."""

    items: list[ItemOut]


class RejectIn(_In):
    reason: Text | None = None


class ListOut(BaseModel):
    items: list[ItemOut]
    next_after: str | None = Field(
        None, description="Pass as ?after= for the next page; null on the last page"
    )


class EvictedOut(BaseModel):
    """A record evicted from tier 0 that matches the query: its pointer in the local index
    (docs/replication.md, "Tiers"); a node with its holder online fetches it on a read."""

    knowledge_id: str
    type: str
    subject: str
    text: str  # the first 200 characters of its statement
    scopes: list[str]
    tags: list[str]
    checksum: str
    lifecycle: str
    tier: int
    where: str
    size: int
    evicted_at: float


class RecallOut(BaseModel):
    query: str
    took_ms: float
    results: list[HitOut]
    evicted: list[EvictedOut] = []


class QueryOut(BaseModel):
    """Upstream ``query_response_format``."""

    results: list[dict[str, Any]]
    total_tokens: int
    cache_hits: int
    network_fetches: int
    query_time_ms: float
    truncated: bool


class ContextOut(BaseModel):
    confirmation: str
    pack: dict[str, Any] = Field(description="The cold-boot pack (PROFILE §7)")


class WeightOut(BaseModel):
    knowledge_id: str
    weight: float
    confidence: float
    previous: float


class OutcomeOut(BaseModel):
    result: str
    updates: list[WeightOut]


class ImportOut(BaseModel):
    created: int
    already: int
    tombstones: int
    refused_purged: int
    state_changes: int
    complete: bool
    errors: list[str]


class HealthOut(BaseModel):
    status: Literal["ok"]
    records: int
    embedding_model: str | None
    auth: bool
    # Replication totals when the node replicates (docs/replication.md): counters only,
    # no peer addresses, since /v1/health needs no token.
    sync: dict[str, int] | None = None


__all__ = [
    "ContextIn",
    "ContextOut",
    "HealthOut",
    "HitOut",
    "ImportOut",
    "InvalidateIn",
    "ItemOut",
    "ListOut",
    "OutcomeIn",
    "OutcomeOut",
    "ProblemOut",
    "PurgeIn",
    "QueryIn",
    "QueryOut",
    "RecallIn",
    "RecallOut",
    "RememberIn",
    "StateOut",
    "SupersedeIn",
    "WeightOut",
    "WriteOut",
    "utf8_text",
]
