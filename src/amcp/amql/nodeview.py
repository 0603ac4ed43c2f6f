"""What a node answers for one record during a query: fields, functions, subqueries.

``QueryContext`` holds everything that is per query (clock, caches, the semantic scorer,
the cluster hooks); ``NodeView`` is the :class:`~amcp.amql.evaluate.RecordView` the
evaluator reads one record through. Record-independent results (``session_id(...)``, a
cluster subquery, the reverse ``caused_by`` map) are computed once, on first use, so a
query that never reaches them never pays for them.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from amcp.amf.types import KnowledgeType, Lifecycle
from amcp.amql.ast import ClusterSubquery, Scalar
from amcp.amql.evaluate import MappingView, evaluate
from amcp.errors import AmcpError, ValidationError
from amcp.evolution.decay import view
from amcp.evolution.signals import SUBJECT_PREFIX
from amcp.retrieval.lexical import match_query
from amcp.store.base import RecordFilter, StoredRecord
from amcp.store.links import indexes_session

if TYPE_CHECKING:
    from amcp.ports import MemoryReader

_DAY = 86_400.0
# access_recency halves every week without an access: "recently used" on an agent's scale.
RECENCY_HALF_LIFE_DAYS = 7.0
SCAN_PAGE = 500  # records decoded per store round trip
# Every lifecycle a query may ask for; purged tombstones have no content to match.
ALL_LIFECYCLES: tuple[Lifecycle, ...] = (
    Lifecycle.DRAFT, Lifecycle.ACTIVE, Lifecycle.SUPERSEDED, Lifecycle.INVALIDATED,
    Lifecycle.ARCHIVED,
)
_LEXICAL_POOL = 100_000  # semantic_match without an embedder: every FTS hit up to this many
CLUSTER_MODULE = "amcp.cse.gravity"


def list_view(memory: MemoryReader, flt: RecordFilter, *, limit: int,
              after: str | None = None) -> list[StoredRecord]:
    """Records as callers see them (sensitive ones redacted), one page in rowid order.

    ``Memory.list`` is being renamed ``list_records``; accept either while both exist.
    """
    fn = getattr(memory, "list_records", None) or getattr(memory, "list")  # noqa: B009
    page: list[StoredRecord] = fn(flt, limit=limit, after=after)
    return page


def scan_pages(memory: MemoryReader, flt: RecordFilter, *,
               page: int = SCAN_PAGE) -> Iterator[list[StoredRecord]]:
    """Every record matching ``flt``, in store (rowid) order, a page at a time.

    Paging with ``after`` re-runs the filtered query per page, and with a lifecycle in it
    SQLite walks the lifecycle index and sorts every match by rowid for each page of 500:
    quadratic (seconds at 10k records). Instead the matching rowids are read once (one
    indexed query, no bodies), then each page is fetched by id. A record whose lifecycle
    or expiry changed in between is dropped; one that started matching in between is not
    seen (the scan is of the store as it was when it started).
    """
    vectors = memory.store.capabilities.vectors  # the store's row keys, where it has them
    if vectors is None:
        after: str | None = None
        while True:
            found = list_view(memory, flt, limit=page, after=after)
            yield found
            if len(found) < page:
                return
            after = found[-1].knowledge_id
    rows = sorted(int(r) for r in vectors.rowids(flt))
    lifecycles = flt.lifecycles
    now = flt.now if flt.now is not None else time.time()  # as the store's own filter does
    for start in range(0, len(rows), page):
        chunk = rows[start:start + page]
        names = vectors.ids_for_rowids(chunk)
        ids = tuple(names[r] for r in chunk if r in names)
        # No lifecycle or expiry in SQL: with them SQLite prefers the lifecycle index over
        # the id lookups; both are checked here instead.
        by_id = RecordFilter(ids=ids, lifecycles=None, include_expired=True)
        found = list_view(memory, by_id, limit=len(ids))
        yield [
            i for i in found
            if (lifecycles is None or i.state.lifecycle in lifecycles) and (
                flt.include_expired or i.state.expires_at is None or i.state.expires_at > now
            )
        ]


def cluster_unavailable(what: str) -> ValidationError:
    return ValidationError(
        "amql", f"cluster functions not available ({what} needs {CLUSTER_MODULE})"
    )


def decay_status(item: StoredRecord, now: float) -> str:
    """fresh | decaying | expired: the evolution layer's decay model
    (``amcp.evolution.decay.view``), the same view node reads and context packs give. A
    record past its expiry time is expired whatever its model says."""
    state = item.state
    if state.expires_at is not None and state.expires_at <= now:
        return "expired"
    record = item.record
    if record is None:
        return "expired" if state.lifecycle is not Lifecycle.ACTIVE else "fresh"
    return view(record, state, now).status.value


def access_recency(item: StoredRecord, now: float) -> float:
    """1.0 just accessed (or stored), halving per week since; higher is more recent."""
    last = item.state.last_access or item.state.stored_at
    return float(0.5 ** (max(now - last, 0.0) / (RECENCY_HALF_LIFE_DAYS * _DAY)))


class SemanticScorer:
    """``semantic_match(text)`` scores: cosine to the record's vector, or an FTS hit.

    Active records are scored from the searcher's vector index; others (the index holds
    only active ones) are embedded on the fly from their text, except sensitive ones, whose
    secret text must not be embedded and which then have no score. Without an embedder a
    record scores 1.0 when the lexical index matches the text, else 0.0.
    """

    def __init__(self, memory: MemoryReader) -> None:
        self.memory = memory
        self._qvec: dict[str, np.ndarray] = {}
        self._scores: dict[str, dict[str, float | None]] = {}
        self._lexical: dict[str, frozenset[str]] = {}

    def _query_vector(self, text: str) -> np.ndarray:
        if text not in self._qvec:
            assert self.memory.embedder is not None
            self._qvec[text] = np.asarray(self.memory.embedder.embed_query(text))
        return self._qvec[text]

    def _lexical_hits(self, text: str) -> frozenset[str]:
        if text not in self._lexical:
            flt = RecordFilter(lifecycles=None, include_expired=True)
            lexical = self.memory.store.capabilities.lexical
            hits = (
                lexical.search_lexical(match_query(text), flt, _LEXICAL_POOL) if lexical else []
            )
            self._lexical[text] = frozenset(kid for kid, _ in hits)
        return self._lexical[text]

    def matching_active(self, text: str, threshold: float) -> dict[str, float]:
        """Every active record scoring >= threshold, from the index (no record decoded)."""
        if self.memory.embedder is None:
            return dict.fromkeys(self._lexical_hits(text), 1.0)
        vec = self._query_vector(text)
        k = 256
        while True:
            hits = self.memory.searcher.vector_search(vec, RecordFilter(include_expired=True), k)
            if len(hits) < k or hits[-1][1] < threshold:
                break
            k *= 4
        cache = self._scores.setdefault(text, {})
        out = {kid: _fix(s) for kid, s in hits if s >= threshold}
        cache.update(out)
        return out

    def prime(self, text: str, items: Sequence[StoredRecord]) -> None:
        """Score every record of a page in a few batched calls."""
        if self.memory.embedder is None:
            return
        cache = self._scores.setdefault(text, {})
        todo = [i for i in items if i.knowledge_id not in cache and i.record is not None]
        if not todo:
            return
        vec = self._query_vector(text)
        ids = tuple(i.knowledge_id for i in todo)
        flt = RecordFilter(ids=ids, lifecycles=None, include_expired=True)
        cache.update((kid, _fix(s)) for kid, s in self.memory.searcher.vector_search(
            vec, flt, len(ids)))
        rest = [i for i in todo if i.knowledge_id not in cache]
        plain = [i for i in rest if not i.state.sensitive and i.record is not None]
        for i in rest:
            cache.setdefault(i.knowledge_id, None)
        if plain:
            texts = [_embed_text(i) for i in plain]
            mat = np.asarray(self.memory.embedder.embed(texts))
            for i, row in zip(plain, mat @ vec, strict=True):
                cache[i.knowledge_id] = _fix(float(row))

    def score(self, item: StoredRecord, text: str) -> float | None:
        if self.memory.embedder is None:
            return 1.0 if item.knowledge_id in self._lexical_hits(text) else 0.0
        cache = self._scores.setdefault(text, {})
        if item.knowledge_id not in cache:
            self.prime(text, [item])
        return cache.get(item.knowledge_id)


def _fix(score: float) -> float:
    # Cosines of float32 vectors differ in the last bits between search paths (a whole-matrix
    # product, a filtered subset, the HNSW graph): rounded to 1e-6 they rank the same way
    # whichever path scored them, and equal scores fall back to the stable store order.
    return round(float(score), 6)


def _embed_text(item: StoredRecord) -> str:
    # The same text Memory embeds on write (record text plus the context hint).
    assert item.record is not None
    record = item.record
    text = record.text
    if record.annotation and record.annotation.context_hint:
        text = f"{text}\n{record.annotation.context_hint}"
    return text


@dataclass(frozen=True, slots=True)
class ClusterHooks:
    """The knowledge-cluster functions of ``amcp.cse.gravity``, when that module exists."""

    module: ModuleType

    def fn(self, name: str) -> Callable[..., Any]:
        f: object = getattr(self.module, name, None)
        if not callable(f):
            raise cluster_unavailable(f"{CLUSTER_MODULE}.{name}")
        return f


def load_cluster_hooks() -> ClusterHooks | None:
    try:
        return ClusterHooks(importlib.import_module(CLUSTER_MODULE))
    except ImportError:
        return None


class QueryContext:
    """Per-query state shared by every record view."""

    def __init__(
        self, memory: MemoryReader, *, now: float, scopes: tuple[str, ...] | None,
        project: str | None,
    ) -> None:
        self.memory = memory
        self.now = now
        self.scopes = scopes
        self.project = project
        self.scorer = SemanticScorer(memory)
        self._clusters: ClusterHooks | bool | None = False  # False: not looked up yet
        self._values: dict[tuple[str, tuple[Scalar, ...]], object] = {}
        self._subqueries: dict[ClusterSubquery, object] = {}
        self._referenced_by: dict[str, list[str]] | None = None
        self._cluster_of: dict[str, object] = {}

    # -- scanning -------------------------------------------------------------------

    def visible(self, **overrides: Any) -> RecordFilter:
        """Everything the caller may see (any lifecycle), narrowed by ``overrides``."""
        base: dict[str, Any] = {"scopes": self.scopes, "lifecycles": ALL_LIFECYCLES,
                                "now": self.now}
        base.update(overrides)
        return RecordFilter(**base)

    def scan(self, flt: RecordFilter) -> Iterator[StoredRecord]:
        for page in scan_pages(self.memory, flt):
            yield from page

    # -- clusters -------------------------------------------------------------------

    def clusters(self, what: str) -> ClusterHooks:
        if self._clusters is False:
            self._clusters = load_cluster_hooks()
        if not isinstance(self._clusters, ClusterHooks):
            raise cluster_unavailable(what)
        return self._clusters

    def cluster_of(self, item: StoredRecord) -> object:
        kid = item.knowledge_id
        if kid not in self._cluster_of:
            hooks = self.clusters("cluster_id")
            by_subject = getattr(hooks.module, "cluster_id_for", None)
            if callable(by_subject) and item.record is not None:
                # A cluster is a function of the subject: no second read of the record.
                self._cluster_of[kid] = by_subject(item.record.core.subject)
            else:
                self._cluster_of[kid] = hooks.fn("cluster_of")(self.memory, kid)
        return self._cluster_of[kid]

    def _cluster_ids(self, hooks: ClusterHooks) -> list[str]:
        listed = getattr(hooks.module, "cluster_ids", None)
        if callable(listed):
            return [str(c) for c in listed(self.memory)]
        # No listing in the cluster module: the clusters of the active records we may see.
        visible = self.visible(lifecycles=(Lifecycle.ACTIVE,))
        by_subject = getattr(hooks.module, "cluster_id_for", None)
        if callable(by_subject):  # a cluster is a function of the subject: no bodies read
            return sorted({str(by_subject(s)) for s in self.memory.store.subjects(visible)})
        found = {str(self.cluster_of(i)) for i in self.scan(visible) if i.record is not None}
        return sorted(found)

    def cluster_namespace(self, cluster_id: str) -> str | None:
        """The subject namespace a cluster id stands for, when the cluster module says
        (``namespace_of``); None for anything it does not accept."""
        hooks = self.clusters("cluster_id")
        namespace_of = getattr(hooks.module, "namespace_of", None)
        if not callable(namespace_of):
            return None
        try:
            return str(namespace_of(cluster_id))
        except AmcpError:
            return None

    def subquery(self, query: ClusterSubquery) -> object:
        """Cluster ids the subquery selects, best centroid match first when it asks for one."""
        if query in self._subqueries:
            return self._subqueries[query]
        hooks = self.clusters("a cluster subquery")
        ids = self._cluster_ids(hooks)
        chosen: list[str] = []
        scores: dict[str, float] = {}
        for cid in ids:
            def centroid(text: str, threshold: float | None = None, _cid: str = cid) -> float:
                score = float(hooks.fn("centroid_match")(self.memory, _cid, text))
                scores[_cid] = max(scores.get(_cid, 0.0), score)
                return score

            def project(_cid: str = cid) -> object:
                return hooks.fn("cluster_project")(self.memory, _cid)

            fields = _LazyFields({"cluster_id": lambda _cid=cid: _cid, "project": project})
            view = MappingView(fields, functions={"centroid_match": centroid})
            if query.where is None or evaluate(query.where, view):
                chosen.append(cid)
        chosen.sort(key=lambda c: -scores.get(c, 0.0))  # stable: listed order on ties
        result = chosen[: query.limit] if query.limit is not None else chosen
        self._subqueries[query] = result
        return result

    # -- value functions ------------------------------------------------------------

    def value(self, name: str, args: tuple[Scalar, ...]) -> object:
        key = (name, args)
        if key not in self._values:
            self._values[key] = self._compute_value(name, args)
        return self._values[key]

    def _compute_value(self, name: str, args: tuple[Scalar, ...]) -> object:
        if name == "current_project":
            if self.project is None:
                raise ValidationError(
                    "amql", "current_project() needs a project: pass project= or a scope"
                )
            return self.project
        wanted = str(args[0]) if args else ""
        if name == "session_id":
            # Memory.remember records a work session as evidence 'session:<id>'. The store's
            # link index names those records when it holds every form of ``wanted``
            # (amcp.store.links); the evidence check below stays, so the answer is exact.
            marks = {wanted, f"session:{wanted}"}
            flt = self.visible(sessions=(wanted,)) if indexes_session(wanted) else self.visible()
            return [i.knowledge_id for i in self.scan(flt)
                    if i.record is not None and marks & set(i.record.core.evidence or ())]
        if name == "qef_signal_id":
            # The node stores a signal under the subject ``qef.<signal_id>``
            # (evolution.signals); a subject prefix the store can narrow on.
            subject = SUBJECT_PREFIX + wanted
            flt = self.visible(types=(KnowledgeType.SIGNAL,))
            return [i.knowledge_id for i in self.scan(flt) if i.record is not None and (
                i.record.core.subject in (subject, wanted)
                or wanted in (i.record.core.evidence or ()))]
        raise ValidationError("amql", f"{name}() is not a value function")

    def referenced_by(self, kid: str) -> list[str] | None:
        if self._referenced_by is None:
            reverse: dict[str, list[str]] = {}
            for item in self.scan(self.visible()):
                causal = item.record.causal if item.record is not None else None
                for ref in (causal.caused_by or ()) if causal is not None else ():
                    reverse.setdefault(ref, []).append(item.knowledge_id)
            self._referenced_by = reverse
        return self._referenced_by.get(kid)

    def view(self, item: StoredRecord) -> NodeView:
        return NodeView(item, self)


class _LazyFields(dict[str, object]):
    """A mapping whose values are computed when read (cluster fields cost a call each)."""

    def get(self, key: str, default: object = None) -> object:
        f = super().get(key)
        return f() if callable(f) else default


def _optional_list(values: Sequence[str] | None) -> list[str] | None:
    return list(values) if values else None


_FIELD_GETTERS: dict[str, Callable[[StoredRecord, QueryContext], object]] = {
    "type": lambda i, _c: i.record.type.value if i.record else None,
    "confidence": lambda i, _c: i.record.core.confidence if i.record else None,
    "project": lambda i, _c: list(i.record.meta.project_scope) if i.record else None,
    "project_scope": lambda i, _c: list(i.record.meta.project_scope) if i.record else None,
    "tags": lambda i, _c: _optional_list(i.record.tags) if i.record else None,
    "subject": lambda i, _c: i.record.core.subject if i.record else None,
    "predicate": lambda i, _c: i.record.core.predicate.value if i.record else None,
    "object": lambda i, _c: i.record.core.object if i.record else None,
    "created_at": lambda i, _c: i.record.meta.created_at if i.record else None,
    "decay_status": lambda i, c: decay_status(i, c.now),
    "lifecycle": lambda i, _c: i.state.lifecycle.value,
    "caused_by": lambda i, _c: _optional_list(i.record.causal.caused_by)
    if i.record and i.record.causal else None,
    "referenced_by": lambda i, c: c.referenced_by(i.knowledge_id),
    "cluster_id": lambda i, c: c.cluster_of(i),
    "knowledge_id": lambda i, _c: i.knowledge_id,
    "access_recency": lambda i, c: access_recency(i, c.now),
    "weight": lambda i, _c: i.state.weight,
}


@dataclass(frozen=True, slots=True)
class NodeView:
    item: StoredRecord
    ctx: QueryContext

    def get(self, field: str) -> object:
        getter = _FIELD_GETTERS.get(field)
        return getter(self.item, self.ctx) if getter is not None else None

    def call(self, name: str, args: tuple[Scalar, ...]) -> object:
        if name == "semantic_match":
            return self.ctx.scorer.score(self.item, str(args[0]))
        if name == "centroid_match":
            cid = self.ctx.cluster_of(self.item)
            if cid is None:
                return None
            fn = self.ctx.clusters("centroid_match").fn("centroid_match")
            return float(fn(self.ctx.memory, cid, str(args[0])))
        return self.ctx.value(name, args)

    def subquery(self, query: ClusterSubquery) -> object:
        return self.ctx.subquery(query)
