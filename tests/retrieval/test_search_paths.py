"""The recall fast paths give what the plain paths give: FTS-first lexical ranking, the
vector index snapshot beside the store, and the index following the change log."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from amcp.memory import Memory
from amcp.retrieval import search, vectors
from amcp.retrieval.lexical import build_match
from amcp.store.base import RecordFilter
from amcp.store.sqlite import SQLiteStore

TOPICS = ["postgres", "redis", "kafka", "nginx", "docker", "react"]


def _fill(mem: Memory, n: int, start: int = 0) -> list[str]:
    out = mem.remember_many(
        {
            "text": f"{TOPICS[i % 6]} needs connection pooling tweak {i} for service {i % 17}",
            "scope": f"team:{i % 3}",
        }
        for i in range(start, start + n)
    )
    return [o.knowledge_id for o in out]


def _joined(store: SQLiteStore, terms: str, flt: RecordFilter, k: int) -> list[tuple[str, float]]:
    """The reference: every match joined and filtered, then ranked (the slow plan)."""
    from amcp.store.sqlfilter import where_clause

    where, params = where_clause(flt)
    rows = store.conn.db.execute(
        "SELECT r.knowledge_id, bm25(records_fts, 1.0, 0.5) AS score FROM records_fts "
        "JOIN records r ON r.rowid = records_fts.rowid "
        f"WHERE records_fts MATCH ? AND {where} ORDER BY score, r.rowid LIMIT ?",
        [terms, *params, k],
    ).fetchall()
    return [(kid, -s) for kid, s in rows]


def test_lexical_fast_path_equals_join(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder="hashing") as mem:
        ids = _fill(mem, 400)
        store = mem.store
        assert isinstance(store, SQLiteStore)
        terms = build_match(["postgr", "pool"])
        flt = RecordFilter(now=1e12 / 1000)
        for k in (1, 10, 50):
            assert store.capabilities.lexical.search_lexical(terms, flt, k, context_weight=0.5) == _joined(
                store, terms, flt, k
            )
        # The best matches invalidated: the head of the page comes up short and the rest of
        # the page is checked; the result must not change.
        top = [kid for kid, _s in store.capabilities.lexical.search_lexical(terms, flt, 30, context_weight=0.5)]
        for kid in top:
            mem.invalidate(kid, "stale")
        for k in (1, 10, 50):
            got = store.capabilities.lexical.search_lexical(terms, flt, k, context_weight=0.5)
            assert got == _joined(store, terms, flt, k)
            assert len(got) == k and not set(top) & {kid for kid, _s in got}
        # Most of the best matches invalidated: the probe comes up short and the joined
        # query answers; the result must not change.
        for kid in ids[:360]:
            if kid in top:
                continue
            mem.invalidate(kid, "stale")
        for k in (10, 50):
            got = store.capabilities.lexical.search_lexical(terms, flt, k, context_weight=0.5)
            assert got == _joined(store, terms, flt, k)
            assert not set(ids[:360]) & {kid for kid, _s in got}
        scoped = RecordFilter(scopes=("team:1",))
        assert store.capabilities.lexical.search_lexical(terms, scoped, 10, context_weight=0.5) == _joined(
            store, terms, scoped, 10
        )
        assert store.capabilities.lexical.search_lexical('"nosuchterm"', flt, 10) == []


def _ranking_pages(store: SQLiteStore) -> list[tuple[str | None, int]]:
    """Every BM25 page the store asks FTS5 for from now on: (the scope list it is drawn from,
    or None for the store-wide page; the LIMIT), read from the statements SQLite runs."""
    pages: list[tuple[str | None, int]] = []
    scoped = re.compile(r"WHERE s\.scope IN \(([^)]*)\) AND s\.rid = records_fts\.rowid")

    def seen(sql: str) -> None:
        if "FROM records_fts WHERE records_fts MATCH" in sql and "ORDER BY score" in sql:
            m = scoped.search(sql)
            pages.append((m[1] if m else None, int(sql.rsplit("LIMIT", 1)[1])))

    store.conn.db.set_trace_callback(seen)
    return pages


def test_broad_lexical_page_is_shallow_until_too_few_pass(tmp_path: Path) -> None:
    """A broad filter asks the ranking for the head it checks first (k + k/2 + 8 rows) and
    for the full probe only when too few of that head pass."""
    with Memory(tmp_path / "m.db", embedder="hashing") as mem:
        _fill(mem, 400)
        store = mem.store
        assert isinstance(store, SQLiteStore)
        terms, flt = build_match(["postgr", "pool"]), RecordFilter(now=1e9)
        pages = _ranking_pages(store)
        first = store.capabilities.lexical.search_lexical(terms, flt, 10)
        assert [n for _s, n in pages] == [10 + 5 + 8] and len(first) == 10
        for kid, _s in store.capabilities.lexical.search_lexical(terms, flt, 20):
            mem.invalidate(kid, "stale")
        pages.clear()
        got = store.capabilities.lexical.search_lexical(terms, flt, 10)
        assert [n for _s, n in pages] == [23, 200]
        store.conn.db.set_trace_callback(None)
        assert got == _joined(store, terms, flt, 10)


def test_scoped_lexical_page_from_the_scope_equals_join(tmp_path: Path) -> None:
    """A scope with a small share of the store draws its page from its own matches; the
    hits are the joined query's, with other conditions too, and a large scope (or many)
    keeps the store-wide page."""
    from amcp.amf.types import KnowledgeType
    from amcp.keyring import Keyring
    from amcp.store.tuning import Pruning, SQLiteTuning

    path = tmp_path / "m.db"  # the scope-drawn path is for 20k+ rows; let it in here
    eager = SQLiteStore(path, Keyring(tmp_path / "keys"),
                        tuning=SQLiteTuning(pruning=Pruning(min_rows=0)))
    with Memory(path, embedder="hashing", store=eager) as mem:
        out = mem.remember_many(
            {
                "text": f"{TOPICS[i % 6]} needs connection pooling tweak {i} for service {i % 17}",
                "scope": "*" if i % 25 == 0 else ("big" if i % 2 else f"team:{i % 9}"),
                "type": "KT-FACT" if i % 3 else "KT-PITFALL",
            }
            for i in range(900)
        )
        for o in out[:200:3]:
            mem.invalidate(o.knowledge_id, "stale")
        store = mem.store
        assert isinstance(store, SQLiteStore)
        pages = _ranking_pages(store)
        flts = [
            RecordFilter(scopes=("team:2",), now=1e9),
            RecordFilter(scopes=("team:4", "team:6"), now=1e9),
            RecordFilter(scopes=("team:2",), types=(KnowledgeType.PITFALL,), now=1e9),
            RecordFilter(scopes=("big",), now=1e9),
            RecordFilter(scopes=("nobody",), now=1e9),
        ]
        for terms in (build_match(["postgr", "pool"]), build_match(["redi", "servic", "3"])):
            for flt in flts:
                for k in (1, 10, 50, 200):
                    assert store.capabilities.lexical.search_lexical(terms, flt, k, context_weight=0.5) == _joined(
                        store, terms, flt, k
                    ), (terms, flt, k)
        store.conn.db.set_trace_callback(None)
        drawn = [scopes for scopes, _n in pages]
        assert drawn[0] == "'team:2','*'"
        assert not any(s and "'big'" in s for s in drawn)  # half the store: the plain page
        assert None in drawn
        assert store.capabilities.lexical.search_lexical('"nosuchterm"', flts[0], 10) == []


@pytest.fixture
def small_ann() -> None:
    pytest.importorskip("faiss")


SMALL_ANN = search.IndexPolicy(ann_threshold=200)  # the graph from 200 vectors, not 20k


def _open(path: Path, policy: search.IndexPolicy = SMALL_ANN) -> Memory:
    """A Memory whose searcher builds its ANN graph (and saves its snapshot) by ``policy``:
    set before the first search, which builds the index."""
    mem = Memory(path, embedder="hashing")
    mem.searcher.index_policy = policy
    return mem


def _ann(mem: Memory) -> vectors.VectorIndex:
    mem.recall("postgres pooling", touch=False)
    index = mem.searcher.index
    assert index is not None
    assert index.wait_for_ann(120)
    return index


@pytest.mark.usefixtures("small_ann")
def test_snapshot_saved_and_reused(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    snap = tmp_path / "m.db.vectors"
    with _open(path) as mem:
        _fill(mem, 300)
        _ann(mem)
        assert snap.exists()  # written when the graph came into use
        before = [h.knowledge_id for h in mem.recall("redis pooling tweak 7", touch=False).hits]
    with _open(path) as mem:
        mem.recall("warm", touch=False)
        index = mem.searcher.index
        assert index is not None
        assert index.ann_ready  # loaded with its graph: no rebuild
        assert [h.knowledge_id for h in mem.recall("redis pooling tweak 7", touch=False).hits] == (
            before
        )
        added = _fill(mem, 5, start=1000)
        gone = before[0]
        mem.invalidate(gone, "wrong")
    # Closed after a few changes: the snapshot is not rewritten (it is ~3 KiB a vector);
    # the next open replays those changes from the log and gets the same index.
    mtime = snap.stat().st_mtime_ns
    with _open(path) as mem:
        mem.recall("warm", touch=False)
        assert snap.stat().st_mtime_ns == mtime
        assert mem.searcher._saved != mem.searcher._seen
        index = mem.searcher.index
        assert index is not None
        ids = set(index.ids().tolist())
        assert {mem.store.capabilities.vectors.rowid_of(k) for k in added} <= ids
        assert mem.store.capabilities.vectors.rowid_of(gone) not in ids
        # Far enough behind (the threshold lowered to what this test writes): saved on close.
        mem.searcher.index_policy = search.IndexPolicy(
            ann_threshold=200, save_min_changes=5, save_min_share=0.0)
        again = _fill(mem, 5, start=2000)
    with _open(path) as mem:
        mem.recall("warm", touch=False)
        assert mem.searcher._saved == mem.searcher._seen  # loaded at the head: no replay
        index = mem.searcher.index
        assert index is not None
        assert {mem.store.capabilities.vectors.rowid_of(k) for k in again} <= set(index.ids().tolist())


@pytest.mark.usefixtures("small_ann")
def test_index_follows_another_writer(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    reader = _open(path)
    writer = _open(path)
    try:
        _fill(writer, 250)
        _ann(reader)
        new = writer.remember("zanzibar lighthouse keeper notes", scope="team:9").knowledge_id
        hits = reader.searcher.vector_search(
            writer.embedder.embed_query("zanzibar lighthouse keeper notes"),  # type: ignore[union-attr]
            RecordFilter(),
            1,
        )
        assert hits[0][0] == new
        writer.invalidate(new, "gone")
        assert new not in {h.knowledge_id for h in reader.recall("zanzibar lighthouse").hits}
    finally:
        writer.close()
        reader.close()


@pytest.mark.usefixtures("small_ann")
def test_snapshot_of_another_history_is_ignored(tmp_path: Path) -> None:
    a, b = tmp_path / "a" / "m.db", tmp_path / "b" / "m.db"
    with _open(a) as mem:
        _fill(mem, 300)
        _ann(mem)
    with _open(b) as mem:
        _fill(mem, 250, start=5000)
    shutil.copy(a.with_name("m.db.vectors"), b.with_name("m.db.vectors"))
    with _open(b) as mem:
        mem.recall("warm", touch=False)
        index = mem.searcher.index
        assert index is not None
        assert len(index) == 250  # rebuilt from this store, not the foreign snapshot
        assert mem.searcher._saved is None
    # A corrupt snapshot is a rebuild too.
    snap = a.with_name("m.db.vectors")
    snap.write_bytes(snap.read_bytes()[:-40])
    with _open(a) as mem:
        mem.recall("warm", touch=False)
        assert mem.searcher.index is not None
        assert len(mem.searcher.index) == 300


@pytest.mark.parametrize("scope", ["team:0", "team:7", "team:nobody"])
def test_filtered_vector_search_is_exact_top_k(tmp_path: Path, scope: str) -> None:
    """Broad (1/8), second-probe and empty filters all give the exact filtered top-k."""
    import numpy as np

    with Memory(tmp_path / "m.db", embedder="hashing") as mem:
        mem.remember_many(
            {"text": f"{TOPICS[i % 6]} pooling note {i}", "scope": f"team:{i % 8}"}
            for i in range(800)
        )
        mem.remember("x", scope="team:7")
        assert mem.embedder is not None
        q = mem.embedder.embed_query("redis pooling note 12")
        flt = RecordFilter(scopes=(scope,))
        got = mem.searcher.vector_search(q, flt, 20)
        index = mem.searcher.index
        assert index is not None
        allowed = mem.store.capabilities.vectors.rowids(flt)
        want = index.search(q, 20, allowed=allowed) if len(allowed) else []
        # The same scores in the same order (ids may swap within float noise: the full
        # mat-vec and a gathered one sum in different orders), all inside the filter.
        assert np.allclose([s for _k, s in got], [s for _r, s in want], atol=1e-5)
        permitted = set(mem.store.capabilities.vectors.ids_for_rowids(allowed.tolist()).values())
        assert {kid for kid, _s in got} <= permitted
        # A caller's own id restriction is kept, not replaced by the probe's ids.
        some = tuple(kid for kid, _s in got[:3])
        only = mem.searcher.vector_search(q, RecordFilter(scopes=(scope,), ids=some), 20)
        assert {kid for kid, _s in only} == set(some)


def test_vector_search_honours_subject_and_event_filters(tmp_path: Path) -> None:
    # Filters the index cannot answer itself (subjects, events) must not be skipped as
    # "trivial": only records with that subject / invalidation event come back.
    with Memory(tmp_path / "m.db", embedder="hashing") as mem:
        for i in range(30):
            mem.remember(f"connection pool note {i}", scope="p", subject=f"Db.Pool.n{i}")
        want = mem.remember("connection pool note special", scope="p",
                             subject="Db.Pool.special").knowledge_id
        vec = mem.embedder.embed_query("connection pool note")  # type: ignore[union-attr]
        hits = mem.searcher.vector_search(vec, RecordFilter(subjects=("Db.Pool.special",)), 5)
        assert [kid for kid, _s in hits] == [want]
        assert mem.searcher.vector_search(vec, RecordFilter(events=("schema_change",)), 5) == []
    assert RecordFilter().selective is False
    assert RecordFilter(lifecycles=None, include_expired=True).selective is False
    assert RecordFilter(subjects=("x",)).selective and RecordFilter(events=("e",)).selective


class _ThreadedHashing:
    """The hashing embedder, declaring itself safe to run beside the lexical search and
    recording the threads its query embeddings ran on (and failing on demand)."""

    overlap_query = True

    def __init__(self) -> None:
        from amcp.retrieval.embedders import HashingEmbedder

        self._inner = HashingEmbedder()
        self.model_id, self.dim = self._inner.model_id, self._inner.dim
        self.threads: list[str] = []
        self.fail = False

    def embed(self, texts: list[str]) -> object:
        return self._inner.embed(texts)

    def embed_query(self, text: str) -> object:
        import threading

        self.threads.append(threading.current_thread().name)
        if self.fail:
            raise RuntimeError("embedding failed")
        return self._inner.embed_query(text)


def test_query_embedding_overlapped_gives_the_sequential_result(tmp_path: Path) -> None:
    import threading

    emb = _ThreadedHashing()
    with Memory(tmp_path / "m.db", embedder=emb) as mem:  # type: ignore[arg-type]
        _fill(mem, 300)
        queries = ["kafka pooling", "redis service 3", "docker tweak 17", "no such words"]
        flts = [RecordFilter(), RecordFilter(scopes=("team:1",))]
        overlapped = [
            [(h.knowledge_id, h.score) for h in mem.searcher.search(q, f, 10, now=2e9)]
            for q in queries for f in flts
        ]
        assert set(emb.threads) == {"amcp-recall-vector_0"}  # one long-lived worker
        emb.overlap_query = False  # type: ignore[misc]
        emb.threads.clear()
        sequential = [
            [(h.knowledge_id, h.score) for h in mem.searcher.search(q, f, 10, now=2e9)]
            for q in queries for f in flts
        ]
        assert set(emb.threads) == {threading.current_thread().name}
        assert overlapped == sequential
        assert any(overlapped)
        # An embedding error reaches the caller, and the worker is free again after it.
        emb.overlap_query = True  # type: ignore[misc]
        emb.fail = True
        with pytest.raises(RuntimeError, match="embedding failed"):
            mem.searcher.search("kafka", RecordFilter(), 5)
        emb.fail = False
        emb.threads.clear()
        assert mem.searcher.search("kafka", RecordFilter(), 5)
        assert emb.threads == ["amcp-recall-vector_0"]
    assert mem.searcher._pool is None  # close() shut the worker down


def test_query_embedding_inline_when_the_worker_is_busy(tmp_path: Path) -> None:
    import threading

    emb = _ThreadedHashing()
    with Memory(tmp_path / "m.db", embedder=emb) as mem:  # type: ignore[arg-type]
        _fill(mem, 50)
        with mem.searcher._pool_busy:  # another recall's embedding holds the worker
            assert mem.searcher.search("kafka", RecordFilter(), 5)
        assert emb.threads == [threading.current_thread().name]


def test_index_search_runs_on_the_worker_for_an_embedder_holding_the_gil(
    tmp_path: Path,
) -> None:
    """An embedder that holds the GIL embeds on the caller's thread; the index search (numpy,
    outside the GIL) still overlaps the lexical search when the filter needs no SQL, and
    the hits are those of the inline path (worker busy)."""
    import threading

    emb = _ThreadedHashing()
    emb.overlap_query = False  # type: ignore[misc]
    with Memory(tmp_path / "m.db", embedder=emb) as mem:  # type: ignore[arg-type]
        _fill(mem, 300)
        index = mem.searcher._ensure_index()
        assert index is not None
        searched: list[str] = []
        plain = index.search

        def search(*args: object, **kwargs: object) -> object:
            searched.append(threading.current_thread().name)
            return plain(*args, **kwargs)  # type: ignore[arg-type]

        index.search = search  # type: ignore[method-assign]
        flts = [RecordFilter(), RecordFilter(scopes=("team:1",))]
        ahead = [
            [(h.knowledge_id, h.score) for h in mem.searcher.search(q, f, 10, now=2e9)]
            for q in ("kafka pooling", "redis service 3") for f in flts
        ]
        me = threading.current_thread().name
        assert set(emb.threads) == {me}
        # Unfiltered: the worker searched; scoped: the filtered search ran here.
        assert searched == ["amcp-recall-vector_0", me] * 2
        with mem.searcher._pool_busy:
            inline = [
                [(h.knowledge_id, h.score) for h in mem.searcher.search(q, f, 10, now=2e9)]
                for q in ("kafka pooling", "redis service 3") for f in flts
            ]
        assert ahead == inline
        assert any(ahead)


def test_filter_rowids_matches_the_where_clause(tmp_path: Path) -> None:
    """Scope and tag keys are checked before the records: same rowids, same order."""
    from amcp.amf.types import Lifecycle

    with Memory(tmp_path / "m.db", embedder="hashing") as mem:
        ids = mem.remember_many(
            {
                "text": f"{TOPICS[i % 6]} note {i}",
                "scope": f"team:{i % 3}" if i % 10 else "*",
                "tags": [TOPICS[i % 4]] + (["hot"] if i % 5 == 0 else []),
            }
            for i in range(120)
        )
        for out in ids[:20]:
            mem.invalidate(out.knowledge_id, "stale")
        store = mem.store
        assert isinstance(store, SQLiteStore)
        every = store.capabilities.vectors.rowids(RecordFilter(lifecycles=None, include_expired=True)).tolist()
        page = [*every[::-1], 10**9]  # a page in some order, and a rowid that is not there
        active = (Lifecycle.ACTIVE,)
        for flt in (
            RecordFilter(),
            RecordFilter(scopes=("team:1",), lifecycles=active),
            RecordFilter(scopes=("team:0", "team:2")),
            RecordFilter(tags=("kafka",)),
            RecordFilter(scopes=("team:1",), tags=("redis", "hot")),
            RecordFilter(scopes=("nobody",)),
            RecordFilter(lifecycles=(Lifecycle.INVALIDATED,), tags=("postgres",)),
        ):
            allowed = set(store.capabilities.vectors.rowids(flt).tolist())
            expected = [r for r in page if r in allowed]
            assert store.capabilities.vectors.filter_rowids(page, flt) == expected
            named = store.capabilities.vectors.named_rowids(page, flt)
            assert list(named) == expected
            assert named == {r: store.capabilities.vectors.ids_for_rowids([r])[r] for r in expected}
        assert store.capabilities.vectors.filter_rowids([], RecordFilter()) == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_query_embedding_after_fork(tmp_path: Path) -> None:
    """A child forked after a recall has the pool object but not its thread: it starts its
    own worker instead of waiting forever on a queue nobody reads."""
    emb = _ThreadedHashing()
    with Memory(tmp_path / "m.db", embedder=emb) as mem:  # type: ignore[arg-type]
        _fill(mem, 30)
        assert mem.searcher.search("kafka", RecordFilter(), 5)
        pid = os.fork()
        if pid == 0:  # the child: exit status says whether the recall came back
            code = 1
            try:
                code = 0 if mem.searcher.search("kafka", RecordFilter(), 5) else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
