"""The PostgreSQL store under ``Memory``: two node processes' worth of ``Memory`` on one
database see each other's writes at once, vectors go through pgvector's HNSW index, and a
database where pgvector cannot be created gets one clear error."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import psycopg
import pytest
from tests.store.records import rec

from amcp.errors import StoreError
from amcp.keyring import Keyring
from amcp.memory import Memory
from amcp.store.postgres import PostgresStore

pytestmark = pytest.mark.postgres


def _memory(dsn: str, home: Path) -> Memory:
    return Memory(home / "memory.db", embedder="hashing",
                  store=PostgresStore(dsn, Keyring(home / "keys")))


def test_two_memories_on_one_database_see_each_other(postgres_db: str, tmp_path: Path) -> None:
    a, b = _memory(postgres_db, tmp_path), _memory(postgres_db, tmp_path)
    try:
        assert b.recall("kafka rebalance", scope="team:x").hits == ()
        kid = a.remember("Kafka consumers rebalance on broker restart", scope="team:x")
        hits = b.recall("kafka rebalance", scope="team:x").hits
        assert [h.knowledge_id for h in hits] == [kid.knowledge_id]
        pack = b.context("kafka rebalance", budget_tokens=4000, scopes=["team:x"])
        assert kid.knowledge_id in {i.knowledge_id for i in pack.items}
        a.invalidate(kid.knowledge_id, "wrong")
        assert b.recall("kafka rebalance", scope="team:x").hits == ()
        assert b.store.verify(full=True).ok
    finally:
        a.close()
        b.close()


def test_nearest_walks_the_hnsw_index(postgres_db: str, tmp_path: Path) -> None:
    store = PostgresStore(postgres_db, Keyring(tmp_path / "keys"), hnsw=True)
    try:
        rng = np.random.default_rng(7)
        vecs = rng.normal(size=(40, 16)).astype(np.float32)
        ids = [store.put(rec(f"vector {i}"), hlc=i + 1, vector=vecs[i]).rowid for i in range(40)]
        got = store.vectors.nearest(vecs[11] + 0.01, 3)
        assert got[0][0] == ids[11] and got[0][1] > 0.99
        with psycopg.connect(postgres_db) as db:
            db.execute("SET enable_seqscan = off")
            plan = "\n".join(r[0] for r in db.execute(
                "EXPLAIN SELECT rowid FROM vectors "
                "ORDER BY vec::vector(16) <=> %s::vector(16) LIMIT 3",
                (str(vecs[0].tolist()),)).fetchall())
        assert "vectors_hnsw" in plan
    finally:
        store.close()


def test_without_hnsw_nearest_is_an_exact_scan(postgres_db: str, tmp_path: Path) -> None:
    """By default no HNSW index is kept (recall builds its own): writes do not pay for it,
    and ``nearest`` still answers, exactly."""
    store = PostgresStore(postgres_db, Keyring(tmp_path / "keys"))
    try:
        rng = np.random.default_rng(8)
        vecs = rng.normal(size=(30, 16)).astype(np.float32)
        ids = [store.put(rec(f"vector {i}"), hlc=i + 1, vector=vecs[i]).rowid for i in range(30)]
        query = vecs[4] + 0.05
        sims = vecs @ query / (np.linalg.norm(vecs, axis=1) * np.linalg.norm(query))
        want = [ids[i] for i in np.argsort(-sims)[:5]]
        assert [r for r, _s in store.vectors.nearest(query, 5)] == want
        with psycopg.connect(postgres_db) as db:
            assert db.execute("SELECT to_regclass('vectors_hnsw')").fetchone() == (None,)
    finally:
        store.close()


def test_a_role_that_cannot_create_pgvector_gets_one_clear_error(
    postgres_dsn: str, tmp_path: Path
) -> None:
    name = "t_novector_" + tmp_path.name[-8:].replace("-", "_").lower()
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
        admin.execute("DROP ROLE IF EXISTS amcp_plain")
        admin.execute("CREATE ROLE amcp_plain LOGIN")
    dsn = urlunsplit(urlsplit(postgres_dsn)._replace(
        netloc=urlsplit(postgres_dsn).netloc.replace("postgres", "amcp_plain", 1),
        path="/" + name))
    try:
        with pytest.raises(StoreError, match="pgvector") as caught:
            PostgresStore(dsn, Keyring(tmp_path / "keys"))
        assert "CREATE EXTENSION vector" in str(caught.value)
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute("DROP ROLE IF EXISTS amcp_plain")
