"""The PostgreSQL lexical index ranks exactly as SQLite's FTS5 ``bm25()``: same scores (to
float rounding), same order, ties by rowid — over the same records written the same way."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.store.records import rec

from amcp.amf.types import Lifecycle
from amcp.keyring import Keyring
from amcp.retrieval.lexical import build_match, index_terms, query_terms
from amcp.store.base import ChangeOp, LexicalIndex, PutItem, RecordFilter, Store
from amcp.store.postgres import PostgresStore
from amcp.store.postgres.bm25 import parse
from amcp.store.sqlite import SQLiteStore

pytestmark = pytest.mark.postgres

TEXTS = [
    "Kafka consumers rebalance when a broker restarts",
    "The rate limit on the public API is 100 requests per minute",
    "Kafka topics are partitioned by customer id; rate limits apply per partition",
    "Deploys happen on Thursday after the kafka upgrade",
    "Alice prefers tabs; Bob prefers spaces in Python code",
    "Postgres connection pooling with pgbouncer keeps the API fast",
    "Rate limits: the login endpoint allows five attempts per minute",
    "Customer escalations go to the on-call engineer",
    "Kafka kafka kafka: the word repeated, a short row",
    "The cache eviction policy is LRU with a 10 minute TTL",
]
QUERIES = [
    "what do we know about kafka and rate limits?",
    "kafka",
    "api rate limit per minute",
    "who prefers tabs",
    "pgbouncer connection pool",
    "nothing matches zebra",
]


def _fill(store: Store) -> None:
    items = []
    for i, text in enumerate(TEXTS):
        scope = "team:a" if i % 2 else "team:b"
        context = index_terms(TEXTS[i - 1]) if i else ""
        items.append(PutItem(rec(text, scope=scope, ts=1_700_000_000 + i), hlc=i + 1,
                             index_text=index_terms(text), index_context=context))
    store.put_many(items)
    # A record leaves the active set: both indexes keep its row (as FTS5 does).
    store.set_state(items[3].record.knowledge_id, ChangeOp.INVALIDATE, hlc=50,
                    lifecycle=Lifecycle.INVALIDATED)


def _lexical(store: Store) -> LexicalIndex:
    found = store.capabilities.lexical
    assert found is not None
    return found


@pytest.fixture
def both(postgres_db: str, tmp_path: Path) -> tuple[Store, Store]:
    lite = SQLiteStore(tmp_path / "lite" / "memory.db", Keyring(tmp_path / "lite" / "keys"))
    pg = PostgresStore(postgres_db, Keyring(tmp_path / "pg" / "keys"))
    _fill(lite)
    _fill(pg)
    yield lite, pg  # type: ignore[misc]
    lite.close()
    pg.close()


@pytest.mark.parametrize("context_weight", [1.0, 0.5, 0.0])
@pytest.mark.parametrize("query", QUERIES)
def test_same_scores_and_order(
    both: tuple[Store, Store], query: str, context_weight: float
) -> None:
    lite, pg = both
    match = build_match(query_terms(query))
    for flt in (RecordFilter(), RecordFilter(scopes=("team:a",)), RecordFilter(lifecycles=None)):
        a = _lexical(lite).search_lexical(match, flt, 10, context_weight=context_weight)
        b = _lexical(pg).search_lexical(match, flt, 10, context_weight=context_weight)
        assert [k for k, _s in a] == [k for k, _s in b], (query, flt)
        for (_k, sa), (_k2, sb) in zip(a, b, strict=True):
            assert sb == pytest.approx(sa, rel=1e-9, abs=1e-12)


def test_same_statistics(both: tuple[Store, Store]) -> None:
    lite, pg = both
    terms = query_terms("kafka rate limits api zebra")
    assert _lexical(lite).term_doc_freq(terms) == _lexical(pg).term_doc_freq(terms)
    assert _lexical(lite).scope_term_stats(["team:a"], terms) == \
        _lexical(pg).scope_term_stats(["team:a"], terms)
    ids = [rec(t, scope="team:a" if i % 2 else "team:b", ts=1_700_000_000 + i).knowledge_id
           for i, t in enumerate(TEXTS)]
    assert _lexical(lite).lexical_texts(ids) == _lexical(pg).lexical_texts(ids)


def test_match_forms() -> None:
    assert parse('"kafka" OR "rate"').terms == ["kafka", "rate"]
    assert parse("bulk3").groups == [["bulk3"]]
    assert parse('"a b" OR c').groups == [["a", "b"], ["c"]]
    assert not parse('"a b" OR c').plain
    assert parse("").terms == []
