"""Recall over pgvector's HNSW index (``PostgresStore(hnsw=True)``): the store searches its
vectors itself (``Capabilities.vector_search``) and no in-process index is built."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import psycopg
import pytest

from amcp.keyring import Keyring
from amcp.memory import Memory
from amcp.store.base import RecordFilter, vectors_of
from amcp.store.postgres import PostgresStore

pytestmark = pytest.mark.postgres

_TOPICS = ["deploy window", "coffee order", "bank branch", "standup time", "office city"]


def _open(dsn: str, home: Path, *, hnsw: bool) -> Memory:
    store = PostgresStore(dsn, Keyring(home / "keys"), hnsw=hnsw)
    return Memory(home / "memory.db", embedder="hashing", store=store)


def _fill(mem: Memory) -> dict[str, str]:
    ids = {}
    for n in range(60):
        topic = _TOPICS[n % len(_TOPICS)]
        got = mem.remember(f"note {n}: the {topic} is item {n}", scope=f"team:{n % 3}")
        ids[f"{n}"] = got.knowledge_id
    return ids


def _exact(mem: Memory, vec: np.ndarray) -> dict[str, float]:
    """Every record's cosine to ``vec``, by a numpy scan of every stored vector."""
    source = vectors_of(mem.store)
    pairs = {int(r): float(v @ vec) / float(np.linalg.norm(v) * np.linalg.norm(vec))
             for ids, mat in source.iter_vectors() for r, v in zip(ids, mat, strict=True)}
    names = source.ids_for_rowids(list(pairs))
    return {names[r]: s for r, s in pairs.items()}


def _assert_exact(found: list[tuple[str, float]], exact: dict[str, float], k: int) -> None:
    """``found`` is a best-first top ``k`` of ``exact`` (ties in any order)."""
    assert len(found) == k
    assert [s for _kid, s in found] == pytest.approx(sorted(exact.values(), reverse=True)[:k],
                                                     abs=1e-5)
    for kid, score in found:
        assert exact[kid] == pytest.approx(score, abs=1e-5)


def _plan(dsn: str, dim: int) -> str:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET enable_seqscan = off")
        return "\n".join(r[0] for r in conn.execute(
            f"EXPLAIN SELECT rowid FROM vectors ORDER BY vec::vector({dim}) <=> "
            f"(SELECT vec::vector({dim}) FROM vectors LIMIT 1) LIMIT 5"))


def test_recall_asks_the_database_and_builds_no_index(postgres_db: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    with _open(postgres_db, home, hnsw=True) as mem:
        ids = _fill(mem)
        dim = mem.embedder.dim
        assert mem.store.capabilities.vector_search is not None
        hits = mem.recall("the coffee order", k=5, touch=False).hits
        assert hits and all("coffee" in (h.item.record.text if h.item.record else "")
                            for h in hits[:3])
        assert any(h.vector_rank is not None for h in hits)  # the vector side answered
        assert mem.searcher.index is None  # never built from iter_vectors
        # The walk's answer is the exact ranking's (60 rows: the graph misses none).
        vec = mem.embedder.embed_query("note 7: the standup time is item 7")
        found = mem.searcher.vector_search(vec, RecordFilter(), 5)
        _assert_exact(found, _exact(mem, vec), 5)
        assert found[0][0] in ids.values()
    assert "vectors_hnsw" in _plan(postgres_db, dim)


def test_a_filter_still_gets_k_rows(postgres_db: str, tmp_path: Path) -> None:
    """A scope holding a third of the rows: the walk widens until k of them pass."""
    home = tmp_path / "home"
    with _open(postgres_db, home, hnsw=True) as mem:
        ids = _fill(mem)
        vec = mem.embedder.embed_query("the bank branch")
        scoped = mem.searcher.vector_search(vec, RecordFilter(scopes=("team:1",)), 15)
        assert len(scoped) == 15
        allowed = {ids[str(n)] for n in range(60) if n % 3 == 1}
        assert {kid for kid, _s in scoped} <= allowed
        hits = mem.recall("the bank branch", k=5, scope="team:2", touch=False).hits
        assert hits and {h.knowledge_id for h in hits} <= {ids[str(n)] for n in range(60)
                                                           if n % 3 == 2}


def test_an_existing_store_gets_its_index_built_once(postgres_db: str, tmp_path: Path) -> None:
    """A store loaded without the index (a bulk load) builds it afterwards, once."""
    home = tmp_path / "home"
    with _open(postgres_db, home, hnsw=False) as mem:
        ids = _fill(mem)
        dim = mem.embedder.dim
        assert mem.store.capabilities.vector_search is None
    assert "vectors_hnsw" not in _plan(postgres_db, dim)
    with _open(postgres_db, home, hnsw=True) as mem:
        vectors = mem.store.capabilities.vectors
        assert isinstance(mem.store, PostgresStore)
        mem.store.vectors.build_index(mem.embedder.dim, memory_mb=64)
        mem.store.vectors.build_index(mem.embedder.dim)  # there already: nothing to do
        assert vectors is not None
        vec = mem.embedder.embed_query("note 12: the bank branch is item 12")
        _assert_exact(mem.searcher.vector_search(vec, RecordFilter(), 4), _exact(mem, vec), 4)
        assert len(ids) == 60
        assert mem.store.verify(full=True).ok
    assert "vectors_hnsw" in _plan(postgres_db, dim)
