"""The server-side set digest (``verify.seal_sum_of``) is ``rowseal.digest_of`` exactly.

PostgreSQL casts an 8-byte bytea to a *signed* bigint and a shorter one to an unsigned
value; the sum must come out as the Python sum of unsigned 256-bit seals modulo 2**256
whatever bits are set, for every word boundary, and odd seals must be counted, not summed.
"""

from __future__ import annotations

import random
from pathlib import Path

import psycopg
import pytest

from amcp.keyring import Keyring
from amcp.memory import Memory
from amcp.store.postgres import PostgresStore
from amcp.store.postgres.verify import seal_sum_of
from amcp.store.rowseal import digest_of

pytestmark = pytest.mark.postgres


def _edge_seals() -> list[bytes | None]:
    """Seals that set the sign bit of every 8-byte window and every word boundary."""
    seals: list[bytes | None] = [b"\xff" * 32, b"\x00" * 32, b"\x80" + b"\x00" * 31]
    for at in range(32):  # one high bit in each byte, alone and over a full row of ones
        one = bytearray(32)
        one[at] = 0x80
        seals.append(bytes(one))
        full = bytearray(b"\xff" * 32)
        full[at] = 0x7F
        seals.append(bytes(full))
    rng = random.Random(16)
    seals += [rng.randbytes(32) for _ in range(500)]
    seals.append(None)  # a missing seal counts as 0 (and fails its own check)
    return seals


def test_the_server_sum_is_the_python_digest(postgres_db: str) -> None:
    seals = _edge_seals()
    odd = [b"\xff" * 31, b"\x01" * 33, b""]
    with psycopg.connect(postgres_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE records (rowid bigint PRIMARY KEY, seal bytea)")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO records VALUES (%s, %s)",
                            list(enumerate(seals + odd)))
        rows, digest, bad = seal_sum_of(conn)
    assert rows == len(seals) + len(odd)
    assert digest == digest_of(seals)  # the odd seals are counted, never summed
    assert bad == len(odd)


def test_the_sum_of_many_top_words_wraps_exactly(postgres_db: str) -> None:
    """Thousands of negative top words: their sum leaves bigint's range (numeric)."""
    seals: list[bytes | None] = [b"\xff" * 32] * 3000 + [b"\x7f" + b"\xff" * 31] * 3000
    with psycopg.connect(postgres_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE records (rowid bigint PRIMARY KEY, seal bytea)")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO records VALUES (%s, %s)", list(enumerate(seals)))
        assert seal_sum_of(conn) == (len(seals), digest_of(seals), 0)


def test_a_store_verifies_and_its_check_reads_the_primary_key(
    postgres_db: str, tmp_path: Path
) -> None:
    """A real store's seals sum to its signed head, and the sum is planned as an
    index-only scan of the primary key once the visibility map is set (migration 5)."""
    home = tmp_path / "home"
    store = PostgresStore(postgres_db, Keyring(home / "keys"))
    with Memory(home / "memory.db", embedder="hashing", store=store) as mem:
        mem.remember_many({"text": f"note {i} about the deploy window {i * 7}"}
                          for i in range(60))
        assert mem.store.verify().ok
    with psycopg.connect(postgres_db, autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE) records")
        conn.execute("SET enable_seqscan = off")  # a 60-row table is cheaper to scan whole
        plan = "\n".join(r[0] for r in conn.execute(
            "EXPLAIN SELECT COUNT(*), SUM(substring(seal from 1 for 8)::bigint) FROM records"))
    assert "Index Only Scan using records_pkey" in plan
    reopened = PostgresStore(postgres_db, Keyring(home / "keys"))
    try:
        assert reopened.verify(full=True).ok
    finally:
        reopened.close()
