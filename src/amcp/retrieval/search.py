"""Hybrid recall: BM25 over FTS5 + vector similarity, fused by RRF, reranked.

The vector index is derived state. The store's vector table is the source of truth (written
in the same transaction as each record), and the index is rebuilt from it on open — so a
crash can never leave the index describing records that do not exist, or miss ones that do.
Only *active* records live in the index; invalidation, supersession and purge remove them.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from amcp.amf.timefmt import parse_ts
from amcp.amf.types import Lifecycle
from amcp.retrieval.fusion import Candidate, rerank_score, rrf
from amcp.retrieval.lexical_recall import LEXICAL_DEFAULTS as _LEX
from amcp.retrieval.lexical_recall import LexicalHits, LexicalTuning, lexical_hits, with_coverage
from amcp.store.base import RecordFilter, Store, StoredRecord, VectorSource, vectors_of
from amcp.store.termstats import MAX_SCOPES, TermStats

if TYPE_CHECKING:  # numpy and the vector index load only when vectors are used
    import numpy as np

    from amcp.retrieval.embedders import Embedder
    from amcp.retrieval.vectors import VectorIndex

_TRIVIAL = RecordFilter()
log = logging.getLogger(__name__)
# What the worker hands back: the query vector, the in-process index's hits (rowids) when
# it searched it, and the store's own hits (knowledge ids) when it asked the store.
_Ahead = tuple["np.ndarray", list[tuple[int, float]] | None, list[tuple[str, float]] | None]


def _unfiltered(flt: RecordFilter) -> bool:
    """The index holds every live vector: only lifecycle 'active' alone needs no filter."""
    return not flt.selective and flt.lifecycles in (None, (Lifecycle.ACTIVE,))


@dataclass(frozen=True, slots=True)
class Hit:
    item: StoredRecord
    score: float
    lexical_rank: int | None
    vector_rank: int | None
    vector_score: float | None

    @property
    def knowledge_id(self) -> str:
        return self.item.knowledge_id

    @property
    def relevance(self) -> float | None:
        """How much the record is about the query: its cosine to the query when the vector
        search ranked it (None otherwise). ``score`` orders hits; this one can be compared
        with a threshold (``amcp.agent.capture.resolve_recall``, AMQL ``semantic_match``)."""
        return self.vector_score


@dataclass(frozen=True, slots=True)
class SearchTuning:
    """The knobs of hybrid recall: the lexical ones (``LexicalTuning``, documented there,
    shared with the hooks' fast reader) and the vector side's weight."""

    candidates: int = _LEX.candidates
    rrf_k: int = _LEX.rrf_k
    lexical_weight: float = _LEX.lexical_weight
    vector_weight: float = 1.0
    max_term_share: float = _LEX.max_term_share
    context_weight: float = _LEX.context_weight
    coverage_weight: float = _LEX.coverage_weight
    scope_depth: int = _LEX.scope_depth

    @property
    def lexical(self) -> LexicalTuning:
        return LexicalTuning(
            self.candidates, self.rrf_k, self.lexical_weight, self.max_term_share,
            self.context_weight, self.coverage_weight, self.scope_depth,
        )

    def __post_init__(self) -> None:
        for name in ("candidates", "rrf_k", "scope_depth"):
            if getattr(self, name) < 1:
                raise ValueError(f"SearchTuning.{name} must be at least 1")
        for name in ("lexical_weight", "vector_weight", "context_weight", "coverage_weight"):
            if getattr(self, name) < 0:
                raise ValueError(f"SearchTuning.{name} must not be negative")


# Replaying more changes than this share of the index costs more than a rebuild from the
# vector table (both are linear, the replay per change, the rebuild per vector).
_REPLAY_MAX_SHARE = 0.25
# close() rewrites the snapshot only this far behind (well under the replay limit above, so
# an open never has to rebuild because closes skipped the save).
SAVE_MIN_CHANGES = 500
SAVE_MIN_SHARE = 0.05


def _ann_threshold() -> int | None:
    from amcp.retrieval.vectors import ANN_THRESHOLD  # numpy: only once vectors are used

    return ANN_THRESHOLD


@dataclass(frozen=True, slots=True)
class IndexPolicy:
    """When the vector index grows an ANN graph (``ann_threshold`` vectors; None: never)
    and when ``close`` rewrites its snapshot (``save_min_changes`` changes behind, or
    ``save_min_share`` of the index if more). The defaults are measured (docs/retrieval.md);
    tests lower them to take those paths on small stores."""

    ann_threshold: int | None = field(default_factory=_ann_threshold)
    save_min_changes: int = SAVE_MIN_CHANGES
    save_min_share: float = SAVE_MIN_SHARE
# Largest second probe of a filtered vector search: an HNSW walk with efSearch this large
# costs about what gathering the permitted rowids does at 100k records.
_PROBE_MAX = 2_000


class HybridSearcher:
    def __init__(
        self,
        store: Store,
        embedder: Embedder | None,
        tuning: SearchTuning | None = None,
        *,
        snapshot: Path | None = None,
        index_policy: IndexPolicy | None = None,
    ) -> None:
        self.store = store
        caps = store.capabilities
        # What the store offers: no lexical index means vector-only recall; no vectors (or
        # no embedder) means lexical-only; no change feed means the index is rebuilt on
        # open and never snapshotted.
        self.lexical = caps.lexical
        self.vectors = caps.vectors
        # A store that searches its vectors itself (pgvector HNSW) is asked instead of the
        # in-process index, which is then never built.
        self.nearest = caps.vector_search if caps.vectors is not None else None
        self.feed = caps.feed
        self.embedder = embedder if caps.vectors is not None else None
        self.tuning = tuning or SearchTuning()
        # None: IndexPolicy() once an index is needed (its default reads the vector module,
        # which loads numpy; a searcher without vectors never does). Set before the first
        # search to take effect (the index is built then).
        self.index_policy = index_policy
        self.index: VectorIndex | None = None
        # The derived vector index persists next to the store once it has an ANN graph
        # (rebuilding a 100k graph takes minutes of CPU); see ``_load_snapshot``.
        self.snapshot = snapshot if self.feed is not None else None
        self._seen = (0, "")  # the change-log head the index reflects
        # The store's generation when the index last matched the log: while it has not
        # moved, no commit happened and the catch-up skips its read of the log's head (a
        # round trip per recall on PostgreSQL).
        self._current_at: int | None = None
        self._saved: tuple[int, str] | None = None  # the head of the snapshot on disk
        self._ts_cache: dict[str, float] = {}
        # One long-lived worker embeds the query while this thread runs the lexical search
        # (see ``_vector_ahead``); held while its one job is queued or running.
        self._pool: ThreadPoolExecutor | None = None
        self._pool_pid = 0  # a forked child has the pool object but not its thread
        self._pool_busy = threading.Lock()

    # -- index maintenance ------------------------------------------------------------

    def _ensure_index(self) -> VectorIndex | None:
        if self.embedder is None or self.nearest is not None:
            return None
        if self.index is None:
            feed = self.feed
            head = feed.change_head() if feed is not None else (0, "")
            index = self._load_snapshot()
            if index is None:
                index = self._build_index()
                self._seen = head
            self.index = index
            if self.snapshot is not None:
                index.on_ann_ready = self.save
        self._catch_up()
        return self.index

    def _policy(self) -> IndexPolicy:
        if self.index_policy is None:
            self.index_policy = IndexPolicy()
        return self.index_policy

    def _build_index(self) -> VectorIndex:
        import numpy as np

        from amcp.retrieval import vectors

        assert self.embedder is not None
        index = vectors.VectorIndex(self.embedder.dim, ann_threshold=self._policy().ann_threshold)
        source = self._vectors()
        live = source.rowids(RecordFilter(include_expired=True))
        live_set = set(live.tolist())
        for ids, mat in source.iter_vectors():
            keep = np.fromiter((i in live_set for i in ids.tolist()), dtype=bool, count=len(ids))
            if keep.any():
                index.add(ids[keep], mat[keep])
        return index

    def _tag(self) -> str:
        assert self.embedder is not None
        assert self.feed is not None
        return f"{self.feed.store_id} {self.embedder.model_id}"

    def _load_snapshot(self) -> VectorIndex | None:
        """The saved index, if it was taken of this store and model at a change that is
        still in this store's hash-chained log (a restored older copy or a rewritten log
        fails that), caught up to now by ``_catch_up``."""
        if self.snapshot is None or not self.snapshot.exists():
            return None
        from amcp.retrieval import vectors

        assert self.embedder is not None
        assert self.feed is not None
        found = vectors.VectorIndex.load_tagged(
            self.snapshot, self.embedder.dim, ann_threshold=self._policy().ann_threshold
        )
        if found is None:
            return None
        index, seq, tag = found
        base, _, chain_hash = tag.rpartition(" ")
        if base != self._tag() or self.feed.change_hash(seq) != chain_hash:
            return None
        self._seen = self._saved = (seq, chain_hash)
        return index

    def _catch_up(self) -> None:
        """Apply changes this index has not seen — written by another process, or by this
        one through a path that does not call ``added``/``removed`` — so the index stays
        what a rebuild from the store would give. Nothing is read while the store's
        generation stands still, one indexed read when it moved but the log did not."""
        feed = self.feed
        index = self.index
        if feed is None or index is None:
            return
        generation = self.store.generation()  # before the head: a later commit moves it
        if generation == self._current_at:
            return
        with feed.quiescent():  # one catch-up at a time, and no writer in between
            head = feed.change_head()
            if head == self._seen:
                self._current_at = generation
                return
            if head[0] - self._seen[0] > max(1_000, len(index) * _REPLAY_MAX_SHARE):
                self.index = self._build_index()
                if self.snapshot is not None:
                    self.index.on_ann_ready = self.save
                self._seen = head
                return
            import numpy as np

            rows = feed.changed_vectors(self._seen[0], head[0])
            keep = [(r, v) for r, active, v in rows if active and v is not None]
            drop = [r for r, active, v in rows if not (active and v is not None)]
            if keep:
                index.add(
                    np.array([r for r, _v in keep], dtype=np.int64),
                    np.frombuffer(b"".join(v for _r, v in keep), np.float32).reshape(
                        len(keep), -1
                    ),
                )
            if drop:
                index.remove(np.asarray(drop, dtype=np.int64))
            self._seen = head
            self._current_at = generation

    def save(self, *, min_changes: int = 0) -> bool:
        """Snapshot the vector index next to the store if it has an ANN graph the snapshot
        on disk lacks (and, with ``min_changes``, only once the snapshot on disk is at least
        that many changes behind). Safe from any thread; True if written."""
        from amcp.retrieval.vectors import write_snapshot

        feed = self.feed
        index = self.index
        if feed is None or self.snapshot is None or index is None or not index.ann_ready:
            return False
        with feed.quiescent() as idle:
            if not idle:
                return False  # uncommitted changes in this thread: nothing to derive from
            self._catch_up()
            if self._saved == self._seen or self.index is not index:
                return False
            if self._saved is not None and self._seen[0] - self._saved[0] < min_changes:
                return False  # the next open replays those few changes from the log instead
            seen = self._seen
            parts = index.snapshot(seen[0], tag=f"{self._tag()} {seen[1]}")
        write_snapshot(self.snapshot, parts)
        self._saved = seen
        return True

    def added(self, rowid: int, vector: np.ndarray) -> None:
        if self.index is not None:
            import numpy as np

            self.index.add(np.array([rowid], dtype=np.int64), vector.reshape(1, -1))

    def removed(self, rowid: int | None) -> None:
        if self.index is not None and rowid is not None:
            import numpy as np

            self.index.remove(np.array([rowid], dtype=np.int64))

    def rowid_of(self, knowledge_id: str) -> int | None:
        """The record's vector row key, if the store keeps vectors and has one."""
        return self.vectors.rowid_of(knowledge_id) if self.vectors is not None else None

    def drop(self, knowledge_id: str) -> None:
        """Take a record that left the active set out of the vector index."""
        if self.index is not None:
            self.removed(self.rowid_of(knowledge_id))

    def reset(self) -> None:
        self.index = None
        self._current_at = None

    def close(self) -> None:
        """Persist the index if it was built here, or if the snapshot on disk is far behind:
        the snapshot is ~3 KiB per vector (320 MB at 100k), so rewriting it because one CLI
        call added a record would cost more than replaying the log on the next open."""
        index = self.index
        behind = 0
        if index:
            policy = self._policy()
            behind = max(policy.save_min_changes, int(len(index) * policy.save_min_share))
        try:
            self.save(min_changes=behind)
        except Exception:  # a failed snapshot costs a rebuild on the next open, nothing else
            log.exception("saving the vector index snapshot failed")
        if self.index is not None:
            self.index.on_ann_ready = None  # a build still running must not touch a closed store
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    # -- search -----------------------------------------------------------------------

    def vector_search(
        self, vector: np.ndarray, flt: RecordFilter, k: int
    ) -> list[tuple[str, float]]:
        if self.nearest is not None:
            return self.nearest.nearest_ids(vector, k, flt)
        index = self._ensure_index()
        if index is None or len(index) == 0:
            return []
        if _unfiltered(flt):
            hits = index.search(vector, k)
        else:
            hits = self._filtered_vector_search(index, vector, flt, k)
        return self._named(hits)

    def _named(self, hits: list[tuple[int, float]]) -> list[tuple[str, float]]:
        names = self._vectors().ids_for_rowids([r for r, _ in hits])
        return [(names[r], s) for r, s in hits if r in names]

    def _vectors(self) -> VectorSource:
        return vectors_of(self.store)

    def _filtered_vector_search(
        self, index: VectorIndex, vector: np.ndarray, flt: RecordFilter, k: int
    ) -> list[tuple[int, float]]:
        """Over-fetch and post-filter in SQL: cheap when the filter is broad. A scope is
        often an eighth of the store, which the first probe (4k) misses, so a second probe
        is sized from the share that passed; only a narrow filter (under ~1/40 passing)
        gathers every permitted rowid (a SQL scan of the filter) for a restricted search."""
        n = len(index)
        size = min(n, k * 4)
        for _attempt in range(2):
            probe = index.search(vector, size)
            allowed = self._filter_rowids([r for r, _ in probe], flt)
            hits = [(r, s) for r, s in probe if r in allowed][:k]
            if len(hits) >= k or len(probe) >= n:
                return hits
            share = max(len(allowed), 1) / max(len(probe), 1)
            size = min(n, int(k / share * 1.5) + k)
            if size > _PROBE_MAX:
                break
        rowids = self._vectors().rowids(flt)
        return index.search(vector, k, allowed=rowids) if len(rowids) else []

    def _filter_rowids(self, rowids: Sequence[int], flt: RecordFilter) -> set[int]:
        return set(self._vectors().filter_rowids(rowids, flt)) if rowids else set()

    def lexical_search(self, query: str, flt: RecordFilter, k: int) -> list[tuple[str, float]]:
        """BM25 over the query's informative terms (see ``prune_terms``)."""
        return self._lexical(query, flt, k).hits

    def _lexical(self, query: str, flt: RecordFilter, k: int) -> LexicalHits:
        """``lexical_recall.lexical_hits`` over the store's lexical index (none: no hits)."""
        if self.lexical is None:
            return LexicalHits([], [], {})
        return lexical_hits(self.lexical, query, flt, k, self.tuning.lexical,
                            lambda terms: self._scope_stats(flt, terms))

    def _scope_stats(self, flt: RecordFilter, terms: Sequence[str]) -> TermStats | None:
        """The scope's own term statistics when ``flt`` is a recall over a few scopes'
        active records (what the per-scope counts describe); None: use the whole store's."""
        if (
            self.lexical is None
            or not terms
            or flt.scopes is None
            or not 0 < len(flt.scopes) <= MAX_SCOPES
            or flt.lifecycles != (Lifecycle.ACTIVE,)
        ):
            return None
        return self.lexical.scope_term_stats(flt.scopes, terms)

    def _vector_ahead(self, query: str, flt: RecordFilter, k: int) -> Future[_Ahead] | None:
        """Start the vector side of a recall on the searcher's worker thread, or None to run
        it inline after the lexical search.

        The worker embeds the query when the embedder runs outside the GIL
        (``overlap_query``: a MiniLM query is ~7-14 ms of onnxruntime) and, when the filter
        needs no SQL, also searches the index (numpy and faiss release the GIL too: ~3 ms
        exact at 10k, the ANN at 100k). Meanwhile this thread runs the lexical search
        (SQLite releases the GIL while stepping), so both sides run on the two cores at
        once instead of one after the other. An embedder that holds the GIL (hashing, a
        few hundred microseconds) embeds here first and hands only the index search over.
        One worker, not one per recall: concurrent recalls gain nothing from more threads
        than cores, and a recall that finds the worker busy runs inline exactly as before.
        The index is caught up here, on the caller's thread: that reads the store."""
        embedder = self.embedder
        if embedder is None:
            return None
        overlap = bool(getattr(embedder, "overlap_query", False))
        index = self._ensure_index() if _unfiltered(flt) else None
        searchable = index is not None and len(index) > 0
        asks = self.nearest is not None  # the store's search, on the worker's connection
        if not overlap and not searchable and not asks:
            return None  # nothing here runs outside the GIL
        if self._pool_pid not in (0, os.getpid()):
            # A forked child: the parent's worker (and a job it held the lock for) is not
            # here, so neither is that lock's holder.
            self._pool, self._pool_pid, self._pool_busy = None, 0, threading.Lock()
        if not self._pool_busy.acquire(blocking=False):
            return None
        try:
            if self._pool is None or self._pool_pid != os.getpid():
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="amcp-recall-vector")
                self._pool_pid = os.getpid()
            qvec = None if overlap else embedder.embed_query(query)
            return self._pool.submit(
                self._vector_release, embedder, query, qvec, index if searchable else None, k,
                flt if asks else None,
            )
        except BaseException:
            self._pool_busy.release()
            raise

    def _vector_release(
        self,
        embedder: Embedder,
        query: str,
        qvec: np.ndarray | None,
        index: VectorIndex | None,
        k: int,
        ask: RecordFilter | None = None,
    ) -> _Ahead:
        """``ask``: the filter to ask the store's own search with (psycopg waits for the
        server outside the GIL, so it overlaps the lexical statements as the index did)."""
        try:
            vec = embedder.embed_query(query) if qvec is None else qvec
            hits = index.search(vec, k) if index is not None else None
            asked = (self.nearest.nearest_ids(vec, k, ask)
                     if ask is not None and self.nearest is not None else None)
            return vec, hits, asked
        finally:
            self._pool_busy.release()

    def search(
        self, query: str, flt: RecordFilter, k: int, *, now: float | None = None
    ) -> list[Hit]:
        t = self.tuning
        pool = max(t.candidates, k)
        ahead = self._vector_ahead(query, flt, pool)
        found = self._lexical(query, flt, pool)
        lexical = [kid for kid, _ in found.hits]
        vector: list[tuple[str, float]] = []
        if ahead is not None:
            qvec, searched, asked = ahead.result()
            if asked is not None:
                vector = asked
            elif searched is not None:
                vector = self._named(searched)
            else:
                vector = self.vector_search(qvec, flt, pool)
        elif self.embedder is not None:
            vector = self.vector_search(self.embedder.embed_query(query), flt, pool)
        fused = rrf(
            lexical, vector, lexical_weight=t.lexical_weight, vector_weight=t.vector_weight,
            k=t.rrf_k,
        )
        if self.lexical is not None:
            fused = with_coverage(fused, found, self.lexical, t.lexical)
        return self._rerank(fused[:pool], k, now if now is not None else time.time(), flt)

    def _created_ts(self, created_at: str) -> float:
        # created_at never changes for a record; parsing ISO text is a visible share of
        # the rerank's per-candidate cost.
        ts = self._ts_cache.get(created_at)
        if ts is None:
            if len(self._ts_cache) > 100_000:
                self._ts_cache.clear()
            ts = self._ts_cache[created_at] = parse_ts(created_at).timestamp()
        return ts

    def _rerank(
        self, fused: list[Candidate], k: int, now: float, flt: RecordFilter
    ) -> list[Hit]:
        """Score candidates from their state rows (no body decoding), then decode only the
        k winners: decoding verifies checksums, which is the costly part of a read.

        The state rows are asked for with the caller's whole filter: the store re-checks
        every candidate against it from verified state (``amcp.store.admit``), so a record
        an index row let in by mistake or by tampering drops out here, and so does one that
        expired or changed lifecycle since the index was searched."""
        if not fused:
            return []
        rows = {
            r.knowledge_id: r
            for r in self.store.states(
                replace(flt, ids=tuple(c.knowledge_id for c in fused), now=now),
                limit=len(fused),
            )
        }
        scored: list[tuple[float, Candidate]] = []
        for cand in fused:
            row = rows.get(cand.knowledge_id)
            if row is None or row.created_at is None:
                continue  # purged meanwhile: a tombstone has no content to rank
            created = self._created_ts(row.created_at)
            score = rerank_score(
                cand.fused, age_days=(now - created) / 86_400, ktype=row.type,
                weight=row.state.weight,
            )
            scored.append((score, cand))
        scored.sort(key=lambda sc: (-sc[0], sc[1].knowledge_id))
        top = scored[:k]
        items = {s.knowledge_id: s for s in self.store.get_many([c.knowledge_id for _s, c in top])}
        return [
            Hit(items[c.knowledge_id], score, c.lexical_rank, c.vector_rank, c.vector_score)
            for score, c in top
            if c.knowledge_id in items and items[c.knowledge_id].record is not None
        ]


