"""Pipelined write transactions (``Database.transaction(pipelined=True)``): a statement that
fails on the server after it was only queued still fails the whole write, nothing of it is
stored, the signed head does not move, and the store goes on.

The failure is a real one: a trigger the test installs on ``postings`` raises, as a full
disk or a broken index would, after the client-side checks have passed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psycopg
import pytest
from tests.store.records import rec

from amcp.errors import StoreError
from amcp.keyring import Keyring
from amcp.store.base import RecordFilter
from amcp.store.postgres import PostgresStore

pytestmark = pytest.mark.postgres

FAIL = """
CREATE FUNCTION amcp_test_fail() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.term = 'poison' THEN RAISE EXCEPTION 'postings refused by the test'; END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER amcp_test_fail BEFORE INSERT ON postings
  FOR EACH ROW EXECUTE FUNCTION amcp_test_fail();
"""


@pytest.fixture
def store(postgres_db: str, tmp_path: Path) -> Iterator[PostgresStore]:
    s = PostgresStore(postgres_db, Keyring(tmp_path / "keys"))
    with psycopg.connect(postgres_db, autocommit=True) as conn:
        conn.execute(FAIL)
    yield s
    s.close()


def _state(store: PostgresStore) -> tuple[int, tuple[int, str]]:
    return store.count(RecordFilter(lifecycles=None)), store._log.change_head()


def test_a_queued_insert_that_fails_fails_the_write(store: PostgresStore) -> None:
    store.put(rec("a good record"), hlc=1, index_text="good record")
    before = _state(store)
    with pytest.raises(StoreError, match="postings refused by the test"):
        store.put(rec("a poisoned record"), hlc=2, index_text="poison record")
    assert _state(store) == before
    assert store.get(rec("a poisoned record").knowledge_id) is None
    store.put(rec("after the failure"), hlc=3, index_text="after failure")  # goes on
    report = store.verify(full=True)
    assert report.ok and not report.damaged, report
    assert report.checked_changes == 2


def test_a_failure_inside_an_outer_transaction_rolls_all_of_it_back(
    store: PostgresStore,
) -> None:
    """The queued failure cannot be caught by a savepoint (it is only seen at COMMIT):
    the whole transaction fails, so nothing of it is half-stored."""
    before = _state(store)
    with pytest.raises(StoreError, match="postings refused by the test"), store.atomic():
        store.put(rec("first of the transaction"), hlc=1, index_text="first")
        store.put(rec("poison in the middle"), hlc=2, index_text="poison")
        store.set_weight(rec("first of the transaction").knowledge_id, 0.5)
    assert _state(store) == before
    assert store.get(rec("first of the transaction").knowledge_id) is None
    again = store.verify(full=True)
    assert again.ok and not again.damaged, again


def test_purge_after_a_pipelined_put_counts_what_it_removed(store: PostgresStore) -> None:
    """``purge`` reads its DELETEs' row counts, so it leaves pipeline mode first: the
    census the head signs stays exact within one transaction holding both."""
    r = rec("put then purged in one transaction", tags=["a", "b"])
    with store.atomic():
        store.put(r, hlc=1, index_text="put purged", vector=np.ones(4, dtype=np.float32))
        store.purge(r.knowledge_id, hlc=2, reason="test")
    report = store.verify(full=True)
    assert report.ok and not report.damaged, report
