"""What each inspector page shows, as typed values built from ``Memory`` calls only.

The same calls and the same scope rules as the HTTP API (``amcp.api.http``): records of
scopes the caller may not read are left out of lists and answer 404 by id, a purged
record answers 410 to an unrestricted caller and 404 to a restricted one. Nothing here
renders HTML; ``routes`` hands these values to the templates, which escape every string.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from amcp.amf.ids import verify_integrity
from amcp.amf.record import AMFRecord
from amcp.amf.timefmt import parse_ts
from amcp.amf.types import KnowledgeType, Lifecycle
from amcp.errors import AmcpError, GoneError, NotFoundError, ValidationError
from amcp.evolution.decay import DAY, NEUTRAL_WEIGHT, decay_model_of, time_factor, trust
from amcp.memory import Memory
from amcp.retrieval.fusion import priors
from amcp.retrieval.search import Hit
from amcp.session.policy import Mode
from amcp.store.base import Change, RecordFilter, StoredRecord
from amcp.web.access import Caller

T = TypeVar("T")
Locked = Callable[..., Any]

SNIPPET = 280  # characters of a record's text in a result row; the record page shows all
LINEAGE_MAX = 50  # versions followed each way from the record shown
ALL_LIFECYCLES = tuple(Lifecycle)


# ---------------------------------------------------------------------------- search


@dataclass(frozen=True, slots=True)
class SearchForm:
    q: str = ""
    scope: str = ""
    type: str = ""
    origin: str = ""
    lifecycle: str = "active"
    after: str = ""
    before: str = ""
    k: int = 20

    @property
    def scopes(self) -> list[str]:
        return [x.strip() for x in self.scope.split(",") if x.strip()]

    @property
    def created_after(self) -> str | None:
        return _day(self.after, "T00:00:00Z")

    @property
    def created_before(self) -> str | None:
        return _day(self.before, "T23:59:59.999Z")


def _day(value: str, clock: str) -> str | None:
    """A date input's ``YYYY-MM-DD`` as a UTC instant (a whole day, both ends included);
    a full timestamp passes through for Memory to validate."""
    value = value.strip()
    if not value:
        return None
    return value + clock if len(value) == 10 and "T" not in value else value


@dataclass(frozen=True, slots=True)
class Breakdown:
    """Why a hit scored what it did: the fusion's parts and the rerank's priors."""

    lexical_rank: int | None
    lexical: float
    vector_rank: int | None
    vector: float
    cosine: float | None
    coverage: float  # the common-term boost, as a factor (1 = none)
    recency: float
    trust: float
    type: float
    score: float


@dataclass(frozen=True, slots=True)
class Row:
    knowledge_id: str
    type: str
    text: str
    scopes: tuple[str, ...]
    created_at: str
    created_by: str
    lifecycle: str
    weight: float
    hlc: int  # the state's clock: forms send it back so a stale edit is a conflict
    breakdown: Breakdown | None = None


@dataclass(frozen=True, slots=True)
class SearchPage:
    form: SearchForm
    rows: tuple[Row, ...]
    took_ms: float
    searched: bool  # False: no query, the rows are the newest records
    error: str | None = None


def row_of(item: StoredRecord, breakdown: Breakdown | None = None) -> Row:
    rec = item.record
    assert rec is not None
    text = rec.text
    return Row(
        item.knowledge_id, rec.type.value,
        text if len(text) <= SNIPPET else text[:SNIPPET] + "…",
        rec.meta.project_scope, rec.meta.created_at, rec.meta.created_by,
        item.state.lifecycle.value, item.state.weight, item.state.hlc, breakdown,
    )


def breakdown(memory: Memory, hit: Hit, now: float) -> Breakdown:
    t = memory.searcher.tuning
    # The RRF parts exactly as amcp.retrieval.fusion.rrf adds them.
    lex = 0.0 if hit.lexical_rank is None else t.lexical_weight / (t.rrf_k + hit.lexical_rank + 1)
    vec = 0.0 if hit.vector_rank is None else t.vector_weight / (t.rrf_k + hit.vector_rank + 1)
    rec = hit.item.record
    assert rec is not None
    age = (now - parse_ts(rec.meta.created_at).timestamp()) / DAY
    p = priors(age_days=age, ktype=rec.type, weight=hit.item.state.weight)
    base = (lex + vec) * p.factor
    return Breakdown(
        hit.lexical_rank, lex, hit.vector_rank, vec, hit.vector_score,
        hit.score / base if base > 0 else 1.0, p.recency, p.trust, p.type, hit.score,
    )


def _lifecycles(form: SearchForm) -> tuple[Lifecycle, ...] | None:
    if form.lifecycle in ("", "any"):
        return None
    try:
        return (Lifecycle(form.lifecycle),)
    except ValueError:
        raise ValidationError("lifecycle", f"unknown lifecycle {form.lifecycle!r}") from None


def _types(form: SearchForm) -> list[KnowledgeType] | None:
    if not form.type:
        return None
    try:
        return [KnowledgeType(form.type)]
    except ValueError:
        raise ValidationError("type", f"unknown type {form.type!r}") from None


def search(memory: Memory, locked: Locked, who: Caller, form: SearchForm) -> SearchPage:
    """Recall for ``form.q`` (or the newest records when it is empty), filtered."""
    if form.scopes:
        who.check_read(form.scopes)
    started = time.perf_counter()
    scopes = form.scopes or who.exact_read_scopes()
    if not form.q.strip():
        flt = RecordFilter(
            scopes=tuple(scopes) if scopes else None, types=_opt(_types(form)),
            lifecycles=_lifecycles(form),
            created_after=form.created_after, created_before=form.created_before,
        )
        items = _top(memory, locked, flt, form.k)
        rows = [row_of(i) for i in _visible(who, items) if _origin_ok(i, form)]
        return SearchPage(form, tuple(rows), (time.perf_counter() - started) * 1000, False)
    # Inspecting is not using: touch=False keeps access statistics (and so ranking) as is.
    result = locked(
        memory.recall, form.q, k=form.k, scope=scopes, types=_types(form),
        created_after=form.created_after, created_before=form.created_before,
        lifecycles=_lifecycles(form), touch=False,
    )
    now = time.time()
    hits = [h for h in result.hits if h.item.record is not None
            and who.readable(h.item.record.meta.project_scope) and _origin_ok(h.item, form)]
    rows = [row_of(h.item, breakdown(memory, h, now)) for h in hits]
    return SearchPage(form, tuple(rows), (time.perf_counter() - started) * 1000, True)


def _top(memory: Memory, locked: Locked, flt: RecordFilter, k: int) -> list[StoredRecord]:
    """The first page without a query: the filter's records by learned weight, then newest
    (the pointer tier's order, which an index serves: ~2 ms at 100k records, where the
    store's id order had to sort every active record, ~0.6 s)."""
    ids = [r.knowledge_id for r in locked(memory.store.states, flt, limit=k, ranked=True)]
    if not ids:
        return []
    got = locked(memory.list_records, RecordFilter(ids=tuple(ids), lifecycles=None),
                 limit=len(ids))
    rank = {kid: i for i, kid in enumerate(ids)}
    return sorted(got, key=lambda it: rank.get(it.knowledge_id, len(rank)))


def _opt(values: Sequence[T] | None) -> tuple[T, ...] | None:
    return tuple(values) if values else None


def _origin_ok(item: StoredRecord, form: SearchForm) -> bool:
    """``origin``: which node or agent wrote it (meta.created_by), matched as a substring;
    the store has no index for it, so it filters the page of results."""
    origin = form.origin.strip().lower()
    return not origin or (item.record is not None and origin in item.record.meta.created_by.lower())


def _visible(who: Caller, items: Sequence[StoredRecord]) -> list[StoredRecord]:
    return [i for i in items if i.record is not None and who.readable(i.record.meta.project_scope)]


# ---------------------------------------------------------------------------- record


@dataclass(frozen=True, slots=True)
class Verification:
    ok: bool
    signed: bool
    by_this_node: bool
    detail: str


@dataclass(frozen=True, slots=True)
class Version:
    """One step of a record's lineage (oldest first on the page)."""

    knowledge_id: str
    created_at: str
    lifecycle: str
    reason: str | None
    text: str
    current: bool


@dataclass(frozen=True, slots=True)
class Point:
    day: float  # days since the record was created
    value: float


@dataclass(frozen=True, slots=True)
class RecordPage:
    item: StoredRecord
    record: AMFRecord
    amf: dict[str, Any]
    verification: Verification
    lineage: tuple[Version, ...]
    changes: tuple[Change, ...]
    curve: tuple[Point, ...]
    weights: tuple[Point, ...]  # learned weight after each logged change (x: its order)
    age_days: float
    writable: bool
    evidence: tuple[str, ...] = field(default_factory=tuple)


def visible(memory: Memory, locked: Locked, who: Caller, knowledge_id: str) -> StoredRecord:
    """The record as the API's ``GET /v1/memories/{id}`` would show it (redacted when
    sensitive), without counting an access; 404/410 as the API answers them."""
    found = locked(
        memory.list_records, RecordFilter(ids=(knowledge_id,), lifecycles=None), limit=1
    )
    restricted = who.patterns(Mode.READ) is not None
    if not found:
        raise NotFoundError(f"no record {knowledge_id}")
    item: StoredRecord = found[0]
    if item.record is None:
        if restricted:
            raise NotFoundError(f"no record {knowledge_id}")
        raise GoneError(f"{knowledge_id} was purged ({item.state.reason or 'no reason given'})")
    if not who.readable(item.record.meta.project_scope):
        raise NotFoundError(f"no record {knowledge_id}")
    return item


def verification(memory: Memory, record: AMFRecord) -> Verification:
    try:
        verify_integrity(record)
    except AmcpError as exc:
        return Verification(False, record.integrity.signature is not None, False, exc.message)
    from amcp.amf.ids import public_key_text

    mine = public_key_text(memory.keyring.signing_key.public_key())
    signed = record.integrity.signature is not None
    by_us = signed and record.integrity.public_key == mine
    detail = ("id and checksum match the content; "
              + ("the Ed25519 signature verifies" if signed else "unsigned"))
    return Verification(True, signed, by_us, detail)


def lineage(memory: Memory, locked: Locked, who: Caller, item: StoredRecord) -> list[Version]:
    """Older versions (causal.supersedes) and newer ones (state.superseded_by), oldest
    first; versions of scopes the caller may not read are left out."""
    def version(it: StoredRecord, current: bool) -> Version:
        rec = it.record
        return Version(it.knowledge_id, rec.meta.created_at if rec else "",
                       it.state.lifecycle.value, it.state.reason,
                       rec.text[:SNIPPET] if rec else "(purged)", current)

    def fetch(kid: str) -> StoredRecord | None:
        got = locked(memory.list_records, RecordFilter(ids=(kid,), lifecycles=None), limit=1)
        return got[0] if got else None

    older: list[Version] = []
    rec = item.record
    prev = rec.causal.supersedes if rec is not None and rec.causal else None
    while prev and len(older) < LINEAGE_MAX:
        it = fetch(prev)
        if it is None or (it.record is not None and not who.readable(it.record.meta.project_scope)):
            break
        older.append(version(it, False))
        prev = it.record.causal.supersedes if it.record is not None and it.record.causal else None
    newer: list[Version] = []
    nxt = item.state.superseded_by
    while nxt and len(newer) < LINEAGE_MAX:
        it = fetch(nxt)
        if it is None or (it.record is not None and not who.readable(it.record.meta.project_scope)):
            break
        newer.append(version(it, False))
        nxt = it.state.superseded_by
    return [*reversed(older), version(item, True), *newer]


def confidence_curve(record: AMFRecord, weight: float, now: float, points: int = 48) -> list[Point]:
    """The record's effective confidence from its creation to a while past now: its decay
    model times the learned trust weight as it stands now (``weight_history`` has the
    weight's own past)."""
    model = decay_model_of(record)
    age = max((now - parse_ts(record.meta.created_at).timestamp()) / DAY, 0.0)
    span = max(age * 1.5, (model.half_life_days or 30.0) * 2.0, 1.0)
    conf = record.core.confidence
    return [
        Point(d, trust(conf * time_factor(model, d), weight))
        for d in (span * i / (points - 1) for i in range(points))
    ]


def weight_history(changes: Sequence[Change]) -> list[Point]:
    """The learned weight as the signed log records it: the neutral 0.5 at the write, then
    the value of each ``weight`` entry (outcome rounds, decay), in log order. Each entry
    carries the record's state clock, not the time of the round, so x is the round."""
    points = [Point(0.0, NEUTRAL_WEIGHT)]
    for c in changes:
        if c.op.value == "weight" and isinstance(c.details.get("weight"), int | float):
            points.append(Point(float(len(points)), float(c.details["weight"])))
    return points if len(points) > 1 else []


def record_page(memory: Memory, locked: Locked, who: Caller, knowledge_id: str) -> RecordPage:
    item = visible(memory, locked, who, knowledge_id)
    rec = item.record
    assert rec is not None
    feed = memory.store.capabilities.feed
    changes: list[Change] = locked(feed.changes_of, knowledge_id) if feed is not None else []
    now = time.time()
    try:
        who.check_write(rec.meta.project_scope)
        writable = True
    except AmcpError:
        writable = False
    return RecordPage(
        item, rec, rec.to_dict(), verification(memory, rec),
        tuple(lineage(memory, locked, who, item)), tuple(changes),
        tuple(confidence_curve(rec, item.state.weight, now)), tuple(weight_history(changes)),
        max((now - parse_ts(rec.meta.created_at).timestamp()) / DAY, 0.0), writable,
        tuple(rec.core.evidence or ()),
    )


__all__ = [
    "Breakdown",
    "Point",
    "RecordPage",
    "Row",
    "SearchForm",
    "SearchPage",
    "Verification",
    "Version",
    "breakdown",
    "confidence_curve",
    "lineage",
    "record_page",
    "row_of",
    "search",
    "visible",
]
