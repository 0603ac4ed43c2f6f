"""Server-side prepared statements (``Database``, ``PREPARE_AFTER``) inside pipelined write
transactions. psycopg forgets all its prepared statements when it reads a ROLLBACK, DROP
or ALTER result; in pipeline mode a statement it prepared after such a statement was
queued, but before its result was read, stayed named but was gone ("prepared statement
_pg3_38 does not exist"). The store rolls savepoints back and runs DDL outside pipeline
mode. Here every statement is prepared at its first use, the case most exposed to it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from tests.store.records import rec

from amcp.keyring import Keyring
from amcp.store.base import RecordFilter
from amcp.store.postgres import PostgresStore, database

pytestmark = pytest.mark.postgres


class _Boom(Exception):
    pass


@pytest.fixture
def eager(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(database, "PREPARE_AFTER", 0)


def _open(dsn: str, tmp_path: Path, **kw: bool) -> PostgresStore:
    return PostgresStore(dsn, Keyring(tmp_path / "keys"), **kw)


@pytest.fixture
def store(eager: None, postgres_db: str, tmp_path: Path) -> Iterator[PostgresStore]:
    s = _open(postgres_db, tmp_path)
    yield s
    s.close()


def test_rolled_back_savepoints_keep_the_prepared_statements(store: PostgresStore) -> None:
    hlc = 0
    for n in range(8):
        with store.atomic():
            hlc += 1
            store.put(rec(f"kept {n}"), hlc=hlc, index_text=f"kept {n}")
            with pytest.raises(_Boom), store.atomic():
                hlc += 1
                store.put(rec(f"rolled back {n}"), hlc=hlc, index_text=f"gone {n}")
                raise _Boom
            hlc += 1
            store.put(rec(f"after {n}"), hlc=hlc, index_text=f"after {n}")
    assert store.count(RecordFilter()) == 16
    assert store.get(rec("rolled back 3").knowledge_id) is None
    report = store.verify(full=True)
    assert report.ok, report


def test_the_hnsw_index_built_inside_a_write(eager: None, postgres_db: str,
                                            tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    with _open(postgres_db, tmp_path, hnsw=True) as s:
        for i in range(12):  # the first put creates the index (DDL) inside its write
            s.put(rec(f"vector {i}"), hlc=i + 1, vector=rng.standard_normal(8).astype("f4"))
        assert len(s.vectors.nearest(rng.standard_normal(8).astype("f4"), 3)) == 3
        assert s.verify(full=True).ok


def test_prepare_off(postgres_db: str, tmp_path: Path) -> None:
    """For a transaction-pooling proxy that cannot keep prepared statements."""
    with _open(postgres_db, tmp_path, prepare=False) as s:
        for i in range(8):
            s.put(rec(f"unprepared {i}"), hlc=i + 1, index_text=f"unprepared {i}")
        assert s.count(RecordFilter()) == 8
        with s._db.read() as conn:
            assert conn.prepare_threshold is None
