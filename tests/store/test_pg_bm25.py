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


# -- pruned ranking (length steps) --------------------------------------------------------

WORDS = ["kafka", "rate", "limit", "deploy", "thursday", "cache", "broker", "api", "login",
         "pool", "tabs", "escalation", "ttl", "partition", "customer", "minute"]
PRUNE_QUERIES = [
    "kafka rate limit", "cache ttl broker", "login api minute deploy", "tabs kafka",
    "escalation customer partition pool thursday", "kafka kafka rate", "zebra kafka",
]


def _corpus(n: int) -> list[PutItem]:
    import random

    rng = random.Random(5)
    items = []
    for i in range(n):
        # Zipf-like: the first words are in most rows, the last in few (common and rare terms).
        words = [WORDS[min(int(rng.paretovariate(0.7)) - 1, len(WORDS) - 1)]
                 for _ in range(rng.randint(2, 14))]
        text = " ".join(words)
        items.append(PutItem(rec(f"{text} {i}", scope=f"team:{i % 3}", ts=1_700_000_000 + i),
                             hlc=i + 1, index_text=index_terms(text),
                             index_context=index_terms(WORDS[i % len(WORDS)]) if i % 4 else ""))
    return items


def pages_agree(
    stores: tuple[Store, Store, Store], match: str, flt: RecordFilter, k: int, weight: float
) -> None:
    """SQLite's page and the pruned PostgreSQL store's are the page of the PostgreSQL store
    that ranks every match (``stores``: SQLite, pruned, ranking every match)."""
    lite, pruned, full = stores
    want = _lexical(full).search_lexical(match, flt, k, context_weight=weight)
    got = _lexical(pruned).search_lexical(match, flt, k, context_weight=weight)
    lit = _lexical(lite).search_lexical(match, flt, k, context_weight=weight)
    assert want, match
    why = (match, flt, k, weight)
    _same_page(got, want, why)
    _same_page(lit, want, why)


def _same_page(a: list[tuple[str, float]], b: list[tuple[str, float]], why: object) -> None:
    """The same page up to rows whose scores tie: the sums agree only to rounding (summed in
    another order, by another engine), so two rows of equal text may swap places or trade
    the last place of the page; every other row is in both, with the same score."""
    assert [s for _i, s in a] == pytest.approx([s for _i, s in b], rel=1e-9), why
    scores_a, scores_b = dict(a), dict(b)
    for kid in scores_a.keys() & scores_b.keys():
        assert scores_a[kid] == pytest.approx(scores_b[kid], rel=1e-9), why
    last = b[-1][1]
    for kid in scores_a.keys() ^ scores_b.keys():  # only ties at the page's cut
        assert scores_a.get(kid, scores_b.get(kid)) == pytest.approx(last, rel=1e-9), why
    for i, ((ka, sa), (kb, _sb)) in enumerate(zip(a, b, strict=True)):
        if ka != kb:  # only rows of equal score swap
            assert any(s == pytest.approx(sa, rel=1e-9) for k2, s in b if k2 == ka) or \
                sa == pytest.approx(last, rel=1e-9), (why, i)


def test_pruned_page_is_the_full_ranking(postgres_db: str, tmp_path: Path) -> None:
    """Ranking only the rows that can reach the page gives the page of ranking every match,
    scores included, also filtered, and scores as SQLite's FTS5 page."""
    items = _corpus(600)
    lite = SQLiteStore(tmp_path / "lite" / "memory.db", Keyring(tmp_path / "lite" / "keys"))
    pruned = PostgresStore(postgres_db, Keyring(tmp_path / "pg" / "keys"), prune_from=0)
    full = PostgresStore(postgres_db, Keyring(tmp_path / "pg" / "keys"), prune_from=10**9)
    try:
        lite.put_many(items)
        pruned.put_many(items)
        for query in PRUNE_QUERIES:
            match = build_match(query_terms(query))
            for flt in (RecordFilter(), RecordFilter(scopes=("team:1",))):
                for k in (1, 5, 20):
                    for weight in (1.0, 0.5, 0.0):
                        pages_agree((lite, pruned, full), match, flt, k, weight)
    finally:
        lite.close()
        pruned.close()
        full.close()


def test_term_stats_follow_writes(postgres_db: str, tmp_path: Path) -> None:
    """term_stats holds each term's rows, ceilings and shortest row; a purge lowers the
    count (the ceilings stay: still ceilings)."""
    import psycopg

    store = PostgresStore(postgres_db, Keyring(tmp_path / "keys"))
    try:
        items = [PutItem(rec(t, ts=1_700_000_000 + i), hlc=i + 1, index_text=index_terms(t),
                         index_context="") for i, t in enumerate(
                             ["kafka kafka kafka broker", "kafka rate", "rate limit api"])]
        store.put_many(items)
        lex = store.lexical
        with psycopg.connect(postgres_db) as conn:
            stats = conn.execute("SELECT term, docs, max_own, max_ctx, min_len FROM term_stats "
                                 "WHERE term IN ('kafka', 'rate') ORDER BY term").fetchall()
        assert stats == [("kafka", 2, 3, 0, 2), ("rate", 2, 1, 0, 2)]
        assert lex.term_doc_freq(["kafka", "zebra"])[0] == {"kafka": 2}
        store.purge(items[1].record.knowledge_id, hlc=10)
        assert lex.term_doc_freq(["kafka", "rate", "limit"])[0] == {
            "kafka": 1, "rate": 1, "limit": 1}
    finally:
        store.close()
