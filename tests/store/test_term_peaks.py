"""Per-term frequency ceilings (``amcp.store.termpeaks``): always at least what FTS5 itself
counts in any row, kept through writes, purge and the migration's backfill."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amcp.errors import AmcpError
from amcp.memory import Memory
from amcp.store import termpeaks
from amcp.store.base import RecordFilter
from amcp.store.sqlite import SQLiteStore

# Repeats in one row, the context column, CJK, accents, a ligature, digits, underscores,
# a letter newer than Unicode 6.1 (U+1E900, Adlam), symbols.
TEXTS = [
    "kafka kafka kafka needs rate limits",
    "rate limits rate limits for redis",
    "日本語のテキスト and kafka",
    "naïve café résumé kafka",
    "ﬁle ﬂow office 2024 v2 x_y_z",
    "abc\U0001e900def kafka abc",
    "emoji 🚀 rocket ✓ done",
    "redis",
]


def _fts_truth(db: sqlite3.Connection) -> dict[str, tuple[int, int]]:
    """The largest count of each term in one row, per column, as FTS5 itself tokenised."""
    db.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.inst USING fts5vocab(main, records_fts, instance)"
    )
    truth: dict[str, list[int]] = {}
    for term, col, n in db.execute(
        "SELECT term, col, MAX(n) FROM (SELECT term, doc, col, COUNT(*) AS n FROM temp.inst"
        " GROUP BY term, doc, col) GROUP BY term, col"
    ):
        truth.setdefault(term, [0, 0])[0 if col == "terms" else 1] = n
    return {t: (own, ctx) for t, (own, ctx) in truth.items()}


def _assert_bounds(store: SQLiteStore) -> None:
    db = store.conn.db
    truth = _fts_truth(db)
    ceilings = termpeaks.read(db, list(truth))
    for term, (own, ctx) in truth.items():
        if term in ceilings:  # a term without a ceiling makes the bound fall back
            assert ceilings[term][0] >= own and ceilings[term][1] >= ctx, term


def test_ceilings_bound_every_row_fts5_counts(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder=None) as mem:
        for text in TEXTS:
            mem.remember(text)
        store = mem.store
        assert isinstance(store, SQLiteStore)
        _assert_bounds(store)
        ceilings = termpeaks.read(store.conn.db, ["kafka", "rate", "redis", "absent"])
        slack = termpeaks.read(store.conn.db, [termpeaks.SLACK])  # never asked as a term
        assert "absent" not in ceilings and slack == {}
        rows = store.conn.db.execute("SELECT term, own, ctx FROM term_peaks")
        raw = {t: (o, c) for t, o, c in rows}
        assert raw["kafka"][0] == 3 and raw["rate"][0] == 2
        assert raw[termpeaks.SLACK][0] > 0  # the CJK and other non-ASCII text
        assert ceilings["kafka"][0] == 3 + raw[termpeaks.SLACK][0]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.text(min_size=1, max_size=40), min_size=1, max_size=8))
def test_ceilings_bound_fts5_for_any_text(tmp_path: Path, texts: list[str]) -> None:
    path = tmp_path / f"h{abs(hash(tuple(texts)))}.db"
    with Memory(path, embedder=None) as mem:
        for text in texts:
            try:
                mem.remember(text + " kafka kafka kafka")
            except AmcpError:  # refused input (e.g. invalid text) is not the point here
                continue
        store = mem.store
        assert isinstance(store, SQLiteStore)
        _assert_bounds(store)
        if mem.store.count(RecordFilter()):  # something was stored: its ceilings are known
            assert termpeaks.read(store.conn.db, ["kafka"])["kafka"][0] >= 3


def test_a_purged_record_leaves_no_term_behind(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder=None) as mem:
        secret = mem.remember("zanzibarcode is the vault word, kafka kafka")
        mem.remember("kafka notes")
        store = mem.store
        assert isinstance(store, SQLiteStore)

        def terms() -> set[str]:
            return {t for (t,) in store.conn.db.execute("SELECT term FROM term_peaks")}

        assert {"zanzibarcode", "kafka", "vault"} <= terms()
        mem.purge(secret.knowledge_id, "erasure request")
        assert "zanzibarcode" not in terms() and "vault" not in terms()
        assert termpeaks.read(store.conn.db, ["kafka"])["kafka"][0] >= 1  # still a bound
        _assert_bounds(store)
        mem.remember("vault vault vault vault")  # starts afresh: exact, no row held it
        assert termpeaks.read(store.conn.db, ["vault"])["vault"][0] >= 4


def test_migration_7_backfills_an_existing_store(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory(path, embedder=None) as mem:
        for text in TEXTS:
            mem.remember(text, context="kafka context kafka")
    db = sqlite3.connect(path, isolation_level=None)
    want = sorted(db.execute("SELECT term, own, ctx FROM term_peaks"))
    db.execute("DROP TABLE term_peaks")
    db.execute("DROP TABLE record_links")  # migration 8 reruns after 7
    db.execute("PRAGMA user_version=6")
    db.close()
    with Memory(path, embedder=None) as mem:
        store = mem.store
        assert isinstance(store, SQLiteStore)
        assert sorted(store.conn.db.execute("SELECT term, own, ctx FROM term_peaks")) == want
        assert ("kafka", 3, 2) in want
        _assert_bounds(store)
