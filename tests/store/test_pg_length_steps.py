"""Length steps (``bm25.length_needed``, ``LexicalIndex._pruned``): ranking the shorter rows
first, then only the rows that can still reach the page, gives exactly the page of ranking
every match — over rows of very different lengths and frequencies, plain ORs and groups,
filtered and not — and the bound it stops on is the least length that is safe."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.store.records import rec
from tests.store.test_pg_bm25 import _lexical, _same_page, pages_agree

from amcp.keyring import Keyring
from amcp.retrieval.lexical import build_match, index_terms, query_terms
from amcp.store import fts_rank
from amcp.store.base import PutItem, RecordFilter
from amcp.store.postgres import PostgresStore, bm25
from amcp.store.sqlite import SQLiteStore

WORDS = ["kafka", "rate", "limit", "deploy", "cache", "broker", "api", "login", "pool",
         "ttl", "partition", "customer"]
FILLER = [f"filler{i}" for i in range(40)]
QUERIES = ["kafka rate limit", "cache ttl broker", "login api pool deploy", "kafka",
           "customer partition kafka kafka"]
GROUPS = ['"kafka rate" OR cache', "kafka limit", '"api login" OR "pool ttl" OR broker']


def _corpus(n: int) -> list[PutItem]:
    """Rows from 1 to ~80 tokens: a few query words (some repeated) in filler, so short rows
    and long rows both hold every term and frequencies go up to 6."""
    rng = random.Random(11)
    items = []
    for i in range(n):
        words = [rng.choice(WORDS[: rng.randint(1, len(WORDS))]) for _ in range(rng.randint(1, 6))]
        words += [rng.choice(WORDS[:3])] * rng.choice([0, 0, 0, 2, 5])
        words += rng.sample(FILLER, rng.choice([0, 0, 3, 10, 30])) * rng.choice([1, 1, 2])
        rng.shuffle(words)
        text = " ".join(words)
        context = " ".join(rng.sample(WORDS, 2)) if i % 3 == 0 else ""
        items.append(PutItem(rec(f"{text} n{i}", scope=f"team:{i % 4}", ts=1_700_000_000 + i),
                             hlc=i + 1, index_text=index_terms(text),
                             index_context=index_terms(context) if context else ""))
    return items


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory, postgres_dsn: str) -> Any:
    """One corpus in SQLite and in PostgreSQL, the latter opened twice: pruning from the
    first match on, and never."""
    import uuid
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    tmp = tmp_path_factory.mktemp("lengths")
    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    dsn = urlunsplit(urlsplit(postgres_dsn)._replace(path="/" + name))
    items = _corpus(900)
    lite = SQLiteStore(tmp / "lite" / "memory.db", Keyring(tmp / "lite" / "keys"))
    pruned = PostgresStore(dsn, Keyring(tmp / "pg" / "keys"), prune_from=0)
    full = PostgresStore(dsn, Keyring(tmp / "pg" / "keys"), prune_from=10**9)
    lite.put_many(items)
    pruned.put_many(items)
    yield lite, pruned, full
    for s in (lite, pruned, full):
        s.close()
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


FILTERS = [RecordFilter(), RecordFilter(scopes=("team:1",))]


@pytest.mark.postgres
@pytest.mark.parametrize("query", QUERIES)
def test_length_steps_give_the_full_page(stores: Any, query: str) -> None:
    match = build_match(query_terms(query))
    for flt in FILTERS:
        for k in (1, 5, 20, 60):
            for weight in (1.0, 0.5, 0.0):
                pages_agree(stores, match, flt, k, weight)


@pytest.mark.postgres
@pytest.mark.parametrize("match", GROUPS)
def test_length_steps_with_groups(stores: Any, match: str) -> None:
    """Groups (every word of one in a row) are ranked in length steps too: a row's postings
    all carry its length, so a length cut keeps or drops the row whole."""
    _lite, pruned, full = stores
    for flt in FILTERS:
        for k in (1, 10, 40):
            want = _lexical(full).search_lexical(match, flt, k)
            got = _lexical(pruned).search_lexical(match, flt, k)
            assert want, match
            _same_page(got, want, (match, flt, k))


def _spy_statements(
    monkeypatch: pytest.MonkeyPatch, before_second: Callable[[], object] | None = None
) -> list[tuple[int | None, float | None]]:
    """The (length cut, floor) of every ranking statement a search builds, in order;
    ``before_second()`` runs once the first statement has run, before the second is sent."""
    calls: list[tuple[int | None, float | None]] = []
    real = bm25.ranked_sql

    def spy(*args: Any, **kw: Any) -> Any:
        calls.append((args[6] if len(args) > 6 else kw.get("max_len"),
                      args[7] if len(args) > 7 else kw.get("floor")))
        if len(calls) == 2 and before_second is not None:
            before_second()
        return real(*args, **kw)

    monkeypatch.setattr(bm25, "ranked_sql", spy)
    return calls


@pytest.mark.postgres
def test_the_first_statement_ranks_only_shorter_rows(
    stores: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What makes it pay: the first statement is bounded by length, and the page is still
    the full one."""
    _lite, pruned, full = stores
    seen = _spy_statements(monkeypatch)
    match = build_match(query_terms("kafka rate limit"))
    got = _lexical(pruned).search_lexical(match, RecordFilter(), 5)
    assert seen and seen[0][0] is not None and seen[0][0] < 80
    monkeypatch.undo()
    _same_page(got, _lexical(full).search_lexical(match, RecordFilter(), 5), "first step")


@pytest.mark.postgres
def test_every_kind_of_step_is_taken(stores: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pages above come through every path of ``_pruned``, not through one that ranks
    every row: a page from the first statement alone, a last statement bounded by a length
    and a k-th score, one bounded by a k-th score only (no length in sight), and every
    length when too few rows pass; and no statement before the last ranks every length."""
    _lite, pruned, _full = stores
    calls = _spy_statements(monkeypatch)
    shapes: set[str] = set()
    for query in QUERIES + GROUPS:
        match = query if query in GROUPS else build_match(query_terms(query))
        for flt in FILTERS:
            for k in (1, 5, 20, 60, 400):  # 400: more than pass the filter
                calls.clear()
                _lexical(pruned).search_lexical(match, flt, k)
                last_len, last_floor = calls[-1]
                if len(calls) == 1:
                    assert last_len is not None and last_floor is None, (query, flt, k)
                    shapes.add("first")
                elif last_floor is not None:
                    shapes.add("length and floor" if last_len is not None else "floor")
                else:
                    assert last_len is None and len(calls) == 4, (query, flt, k, calls)
                    shapes.add("every length")
                assert all(length is not None for length, _f in calls[:-1]), calls
    assert shapes == {"first", "length and floor", "floor", "every length"}


@pytest.fixture
def peers(postgres_db: str, tmp_path: Any) -> Any:
    """A store pruning from the first match on, and a second one on the same database: a
    peer process that commits while the first one reads."""
    keys = Keyring(tmp_path / "keys")
    mine = PostgresStore(postgres_db, keys, prune_from=0)
    mine.put_many(_corpus(400))
    peer = PostgresStore(postgres_db, keys)
    yield mine, peer
    peer.close()
    mine.close()


@pytest.mark.postgres
def test_a_commit_between_the_steps_does_not_shorten_the_page(
    peers: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The steps read one snapshot: a peer that purges a row of the first statement's top k
    before the next one runs leaves the page as it was when the search began. Read as
    separate statements, the later ones would keep only rows reaching the first one's k-th
    score, and the purged row would leave the page one short."""
    mine, peer = peers
    match, k = build_match(query_terms("kafka rate limit")), 10
    before = _lexical(mine).search_lexical(match, RecordFilter(), k)
    assert len(before) == k
    calls = _spy_statements(monkeypatch, lambda: peer.purge(before[0][0], hlc=10**9))
    got = _lexical(mine).search_lexical(match, RecordFilter(), k)
    assert len(calls) >= 2, "the search ran in one statement: nothing to race"
    _same_page(got, before, "as of the first statement")
    monkeypatch.undo()
    after = _lexical(mine).search_lexical(match, RecordFilter(), k)
    assert len(after) == k and before[0][0] not in dict(after)


@pytest.mark.postgres
def test_bounds_hold_for_a_commit_not_yet_notified(
    peers: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A peer stores a long row repeating a term far more often than any row before it, and
    this store's cached statistics (its notification not here yet) say no row that long
    can make the page. The bounds are read again in the search's snapshot, so the row is
    ranked: the page is the one of ranking every match with the same statistics."""
    mine, peer = peers
    lexical = _lexical(mine)
    match, k = build_match(query_terms("kafka")), 5
    lexical.search_lexical(match, RecordFilter(), k)  # fills the statistics cache
    stale = lexical._stats_now()
    monkeypatch.setattr(lexical, "_stats_now", lambda: stale)
    text = " ".join(["kafka"] * 60 + FILLER[:30])
    late = rec(f"{text} late", scope="team:0", ts=1_800_000_000)
    peer.put_many([PutItem(late, hlc=10**9, index_text=index_terms(text))])
    got = lexical.search_lexical(match, RecordFilter(), k)
    monkeypatch.setattr(lexical, "_min_matches", 10**9)  # every match, same statistics
    want = lexical.search_lexical(match, RecordFilter(), k)
    assert late.knowledge_id in dict(want)
    _same_page(got, want, "a peer's row the cache has not seen")


def _match_stats() -> tuple[bm25.Match, list[float], dict[str, bm25.TermStats]]:
    match = bm25.parse('"kafka" OR "rate" OR "kafka"')
    stats = {"kafka": bm25.TermStats(300, 4, 2, 3), "rate": bm25.TermStats(900, 1, 0, 7)}
    idf = bm25.idfs(match.terms, {t: s.docs for t, s in stats.items()}, 10_000)
    return match, idf, stats


@given(kth=st.floats(min_value=0.01, max_value=40.0), ranked_to=st.integers(1, 500))
def test_length_needed_is_the_least_safe_length(kth: float, ranked_to: int) -> None:
    match, idf, stats = _match_stats()
    need = bm25.length_needed(match, idf, stats, 0.5, 20.0, kth, ranked_to)
    if need is None:  # no length in sight leaves every longer row out
        assert bm25.length_bound(match, idf, stats, 0.5, 20.0, 1 << 24) >= kth * (1 - 1e-9)
        return
    assert need >= ranked_to
    assert bm25.length_bound(match, idf, stats, 0.5, 20.0, need) < kth
    if need > ranked_to:
        assert bm25.length_bound(match, idf, stats, 0.5, 20.0, need - 1) >= kth * (1 - 1e-9)


def test_length_bound_is_each_terms_most_beyond_the_length() -> None:
    match, idf, stats = _match_stats()
    # Beyond 10 tokens: kafka (twice in the query) at most 4 + 0.5*2 at 11 tokens, rate 1 at 11.
    want = (2 * fts_rank.term_bound(idf[0], 5.0, 11, 20.0)
            + fts_rank.term_bound(idf[1], 1.0, 11, 20.0))
    assert bm25.length_bound(match, idf, stats, 0.5, 20.0, 10) == pytest.approx(want)
    # Below a term's shortest row its own shortest bounds it.
    assert bm25.length_bound(match, idf, stats, 0.5, 20.0, 1) == pytest.approx(
        2 * fts_rank.term_bound(idf[0], 5.0, 3, 20.0) + fts_rank.term_bound(idf[1], 1.0, 7, 20.0))


def test_sql_bounds_rows_by_length() -> None:
    match = bm25.parse('"kafka" OR "rate"')
    sql, params = bm25.ranked_sql(match, [1.0, 2.0], 1.0, 10.0, None, 5, 12, 3.0)
    assert "p.doclen <= %s" in sql and "s.score >= %s" in sql
    assert sql.count("%s") == len(params)
    assert params[5] == 12 and params[-1] == 5
    assert params[-2] == pytest.approx(3.0) and params[-2] < 3.0  # the margin keeps ties


@pytest.mark.postgres
def test_postings_are_keyed_by_length(stores: Any) -> None:
    """The migrated schema's key, as the length range scans need it."""
    _lite, pruned, _full = stores
    with pruned._db.read() as conn:
        key = conn.execute(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = 'postings'::regclass AND contype = 'p'"
        ).fetchone()
    assert key is not None and key[0] == "PRIMARY KEY (term, doclen, rid) INCLUDE (tf_own, tf_ctx)"
