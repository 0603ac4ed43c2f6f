"""Pruned BM25 ranking (``fts_rank.ranked``) gives exactly the plain query's page."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from amcp.keyring import Keyring
from amcp.memory import Memory
from amcp.retrieval.lexical import build_match
from amcp.store import fts_rank, termpeaks
from amcp.store.base import RecordFilter
from amcp.store.fts_rank import TermCounts
from amcp.store.sqlite import SQLiteStore
from amcp.store.tuning import Pruning, SQLiteTuning

COMMON = ["rate", "limit", "retry", "backoff", "pool"]
RARE = ["kafka", "redis", "nginx", "django", "spark", "airflow"]
FILLER = ["alpha", "beta", "gamma", "delta", "noted", "service", "ticket"]


# Prune on any table: the real thresholds only let it in from 20k rows.
EAGER = Pruning(min_rows=0, min_matches=0)


def _ranked(*args: object, **kw: object) -> list[tuple[int, float]] | None:
    return fts_rank.ranked(*args, worth=EAGER, **kw)  # type: ignore[arg-type]


def _memory(tmp_path: Path, pruning: Pruning = EAGER) -> Memory:
    """A Memory over a store that prunes by ``pruning``."""
    path = tmp_path / "m.db"
    store = SQLiteStore(path, Keyring(tmp_path / "keys"), tuning=SQLiteTuning(pruning=pruning))
    return Memory(path, embedder="hashing", store=store)


def _table(rows: int, seed: int = 3) -> sqlite3.Connection:
    """An FTS table shaped like the store's: terms and context columns, word pairs that go
    together (rate limit, retry backoff), repeated terms, short and long rows."""
    rng = random.Random(seed)
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE records_fts USING fts5(terms, context)")
    db.execute("CREATE VIRTUAL TABLE records_fts_vocab USING fts5vocab(records_fts, 'row')")
    data = []
    for i in range(rows):
        words = rng.sample(RARE, 2) + rng.sample(FILLER, rng.randint(0, 6))
        if rng.random() < 0.3:
            words += ["rate", "limit"]
        if rng.random() < 0.25:
            words += ["retry", "backoff"]
        if rng.random() < 0.2:
            words.append(rng.choice(COMMON))
        if rng.random() < 0.05:
            words += [rng.choice(RARE)] * rng.randint(2, 4)  # a term several times
        if rng.random() < 0.01:
            words += FILLER * 25  # a row past 127 tokens: a two-byte docsize varint
        rng.shuffle(words)
        context = " ".join(rng.sample(COMMON + RARE, 2)) if rng.random() < 0.3 else ""
        data.append((i + 1, " ".join(words), context))
    db.executemany("INSERT INTO records_fts(rowid, terms, context) VALUES (?,?,?)", data)
    db.commit()  # FTS5 writes its totals (which the bounds read) at commit
    return db


def _floor(db: sqlite3.Connection) -> int:
    """The reference for ``shortest_row``: every docsize blob decoded in Python."""
    return min(
        sum(fts_rank._varints(bytes(sz)))
        for (sz,) in db.execute("SELECT sz FROM records_fts_docsize")
    )


QUERIES = [
    ["kafka", "rate", "limit"],
    ["redis", "retry", "backoff"],
    ["nginx", "pool"],
    ["django", "rate", "limit", "retry"],
    ["spark", "airflow", "backoff", "pool", "limit"],
    ["rate", "limit"],
    ["kafka", "redis"],
]


@pytest.mark.parametrize("weight", [0.5, 1.0, 0.0])
def test_pruned_page_equals_plain_query(weight: float) -> None:
    db = _table(3000)
    floor = _floor(db)
    pruned = 0
    for terms in QUERIES:
        match = build_match(terms)
        for n in (1, 10, 50, 200, 800):
            plain = db.execute(fts_rank.PLAIN_SQL, [weight, match, n]).fetchall()
            for shortest in (floor, 0):
                got = _ranked(db, match, n, (1.0, weight), lambda _c, s=shortest: s)
                if got is not None:
                    pruned += 1
                    assert got == plain, (terms, n, shortest)  # same rows, scores, order
    assert pruned > 20  # the fixture does exercise the pruning, not only the fallback


def test_shortest_row_bounds_every_row() -> None:
    db = _table(500)
    exact = _floor(db)
    assert fts_rank.shortest_row(db, 0, 2) == min(exact, 128)
    assert fts_rank.shortest_row(db, 10**9, 2) == 1 << 30  # nothing after: no bound
    db.execute("INSERT INTO records_fts(rowid, terms, context) VALUES (9999, 'x', '')")
    assert fts_rank.shortest_row(db, 500, 2) == 1


def test_not_pruned_where_it_cannot_apply() -> None:
    db = _table(300)
    w = (1.0, 0.5)
    one = lambda _c: 0  # noqa: E731
    assert _ranked(db, '"kafka"', 10, w, one) is None  # one term: nothing to split
    assert _ranked(db, '"kafka" AND "rate"', 10, w, one) is None  # not a plain OR
    assert _ranked(db, '"kafka" OR "kafka"', 10, w, one) is None  # repeated term
    assert _ranked(db, '"kafka" OR "nosuchterm"', 10, w, one) is None  # unknown
    assert _ranked(db, '"kafka" OR "rate"', 10, (1.0, -1.0), one) is None
    assert _ranked(db, '"kafka" OR "rate"', 0, w, one) is None
    db.execute("INSERT INTO records_fts(rowid, terms, context) VALUES (9999, 'kafka', '')")
    assert db.in_transaction
    assert _ranked(db, '"kafka" OR "rate"', 10, w, one) is None  # totals lag


def test_or_terms_parses_only_plain_disjunctions() -> None:
    assert fts_rank.or_terms('"a" OR "b"') == ["a", "b"]
    assert fts_rank.or_terms('"say ""hi""" OR "b"') == ['say "hi"', "b"]
    for bad in ['"a" OR b', "a", '"a" NOT "b"', '"a"  OR "b"', '"a" OR "b" *', ""]:
        assert fts_rank.or_terms(bad) is None
    assert fts_rank.part_expr(["a", "b"], ["c"]) == '("a" AND "b") NOT ("c")'
    assert fts_rank.part_expr(["a"], []) == '"a"'


def test_varints_and_idf() -> None:
    assert fts_rank._varints(b"\x86\x8d\x20\x05") == [100_000, 5]
    assert fts_rank._varints(b"\x7f\x81\x00") == [127, 128]
    assert fts_rank.idf(100, 99) == 1e-6  # bm25's floor for terms in most rows
    assert fts_rank.term_bound(2.0, 0.0, 10, 10.0) == 0.0


def test_store_lexical_search_unchanged_and_floor_follows_writes(tmp_path: Path) -> None:
    with _memory(tmp_path) as mem:
        mem.remember_many(
            {"text": f"{RARE[i % 6]} needs rate limits and retry backoff tweak {i}"}
            for i in range(300)
        )
        store = mem.store
        assert isinstance(store, SQLiteStore)
        flt = RecordFilter()
        match = build_match(["kafka", "rate", "limit"])

        def plain(k: int) -> list[tuple[str, float]]:
            rows = store.conn.db.execute(
                "SELECT r.knowledge_id, bm25(records_fts, 1.0, 0.5) AS score FROM records_fts"
                " JOIN records r ON r.rowid = records_fts.rowid WHERE records_fts MATCH ?"
                " ORDER BY score, r.rowid LIMIT ?",
                [match, k],
            ).fetchall()
            return [(kid, -s) for kid, s in rows]

        for k in (5, 50):
            assert store.capabilities.lexical.search_lexical(match, flt, k, context_weight=0.5) == plain(k)
        before = store.lexical._fts_floor[1]
        mem.remember("kafka")  # a shorter row than any before: the cached floor must drop
        assert store.capabilities.lexical.search_lexical(match, flt, 50, context_weight=0.5) == plain(50)
        assert store.lexical._fts_floor[1] < before


def test_term_counts_follow_writes_through_the_kept_lookup(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder=None) as mem:
        store = mem.store
        assert isinstance(store, SQLiteStore)
        first = mem.remember("kafka needs rate limits")
        assert store.capabilities.lexical.term_doc_freq(["kafka", "rate"])[0] == {"kafka": 1, "rate": 1}
        assert store.capabilities.lexical.term_doc_freq(["kafka", "rate"])[0] == {"kafka": 1, "rate": 1}  # kept
        mem.remember("kafka again, and nginx")
        assert store.capabilities.lexical.term_doc_freq(["kafka", "nginx"])[0] == {"kafka": 2, "nginx": 1}
        mem.purge(first.knowledge_id, "gone")
        assert store.capabilities.lexical.term_doc_freq(["kafka", "rate"])[0] == {"kafka": 1}


def test_term_counts_are_kept_across_queries_until_the_index_changes(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder=None) as mem:
        store = mem.store
        assert isinstance(store, SQLiteStore)
        mem.remember("kafka needs rate limits")
        mem.remember("nginx needs rate limits too")
        asked: list[str] = []
        store.conn.db.set_trace_callback(
            lambda sql: asked.append(sql) if "records_fts_vocab" in sql else None
        )
        assert store.capabilities.lexical.term_doc_freq(["kafka", "rate"])[0] == {"kafka": 1, "rate": 2}
        assert store.capabilities.lexical.term_doc_freq(["nginx", "rate", "absent"])[0] == {"nginx": 1, "rate": 2}
        assert len(asked) == 2
        # Every term seen since the last write is answered without FTS5, absent ones too.
        assert store.capabilities.lexical.term_doc_freq(["rate", "kafka", "nginx", "absent"])[0] == {
            "rate": 2, "kafka": 1, "nginx": 1,
        }
        assert len(asked) == 2
        mem.remember("absent no more, kafka")  # the index moved: every count is re-read
        assert store.capabilities.lexical.term_doc_freq(["kafka", "absent"])[0] == {"kafka": 2, "absent": 1}
        assert len(asked) == 3
        with store.atomic():  # inside a transaction nothing kept is trusted or kept
            assert store.capabilities.lexical.term_doc_freq(["kafka"])[0] == {"kafka": 2}
            assert store.capabilities.lexical.term_doc_freq(["kafka"])[0] == {"kafka": 2}
        assert len(asked) == 5
        store.conn.db.set_trace_callback(None)


def test_term_counts_kept_are_bounded(tmp_path: Path) -> None:
    with _memory(tmp_path, Pruning(vocab_keep=3)) as mem:
        store = mem.store
        assert isinstance(store, SQLiteStore)
        mem.remember("alpha beta gamma delta")
        for terms in (["alpha", "beta"], ["gamma", "delta"], ["alpha", "delta"]):
            assert store.capabilities.lexical.term_doc_freq(terms)[0] == dict.fromkeys(terms, 1)
            assert len(store.lexical._vocab_kept[1]) <= 3


def _with_ceilings(db: sqlite3.Connection) -> Callable[[Sequence[str]], dict[str, TermCounts]]:
    """The table's counts plus the ceilings ``termpeaks`` keeps (computed over its rows)."""
    peaks = termpeaks.count(db.execute("SELECT terms, context FROM records_fts")).top
    plain = fts_rank._vocab(db)
    return lambda terms: {
        t: TermCounts(c.docs, c.instances, *peaks.get(t, (-1, -1)))
        for t, c in plain(terms).items()
    }


@pytest.mark.parametrize("weight", [0.5, 1.0, 0.0])
def test_ceilings_keep_the_page_exact_and_skip_more(weight: float) -> None:
    db = _table(3000)
    floor = _floor(db)
    vocabs = {"without": None, "with": _with_ceilings(db)}
    asked = dict.fromkeys(["plain", *vocabs], 0)
    who = ["plain"]

    def count(sql: str) -> None:
        if "ORDER BY score" in sql:  # one statement per part (or the plain query)
            asked[who[0]] += 1

    db.set_trace_callback(count)
    for terms in QUERIES:
        match = build_match(terms)
        for n in (1, 10, 50, 200):
            who[0] = "plain"
            plain = db.execute(fts_rank.PLAIN_SQL, [weight, match, n]).fetchall()
            for name, vocab in vocabs.items():
                who[0] = name
                got = _ranked(db, match, n, (1.0, weight), lambda _c: floor, vocab)
                if got is not None:
                    assert got == plain, (terms, n, name)  # same rows, scores, order
    db.set_trace_callback(None)
    assert asked["with"] < asked["without"]  # tighter bounds: fewer parts asked


def test_term_counts_most() -> None:
    assert TermCounts(10, 40).most((1.0, 0.5)) == 31  # every other instance in one row
    assert TermCounts(10, 40, 2, 1).most((1.0, 0.5)) == 2.5
    assert TermCounts(10, 12, 9, 9).most((1.0, 1.0)) == 3  # the cheaper bound wins
