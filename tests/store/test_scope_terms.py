"""Per-scope term statistics (migration 6): kept exact by every write, for every adapter."""

from __future__ import annotations

import itertools
import sqlite3
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.store.records import rec

from amcp.amf.compose import compose_record
from amcp.amf.record import AMFRecord
from amcp.amf.types import Lifecycle
from amcp.errors import ConflictError
from amcp.keyring import Keyring
from amcp.store.base import ChangeOp, PutItem, RecordFilter, Store
from amcp.store.schema import MIGRATIONS, split_sql
from amcp.store.sqlite import SQLiteStore
from amcp.store.termstats import TermStats

Open = Callable[[], Store]
_STAMP = itertools.count(1)  # unique created_at across hypothesis examples (one store)
VOCAB = ["alpha", "beta", "gamma", "delta", "omega"]


def recount(s: Store, scope: str, terms: list[str]) -> TermStats:
    """The statistics from scratch: every active record of ``scope`` or '*', read back."""
    flt = RecordFilter(scopes=(scope,), include_expired=True)
    ids = [r.knowledge_id for r in s.query(flt, limit=10_000)]
    texts = s.capabilities.lexical.lexical_texts(ids)
    # A record under both ``scope`` and '*' counts twice, as the stored sums count it.
    weight = {
        r.knowledge_id: len({scope, "*"} & set(r.record.meta.project_scope))
        for r in s.query(flt, limit=10_000)
        if r.record is not None
    }
    freq: Counter[str] = Counter()
    docs = tokens = 0
    for kid, (own, ctx) in texts.items():
        words = own.split() + ctx.split()
        if not words:
            continue
        docs += weight[kid]
        tokens += weight[kid] * len(words)
        for term in set(words) & set(terms):
            freq[term] += weight[kid]
    return TermStats(dict(freq), docs, tokens)


def put(s: Store, text: str, scope: str = "project:a", *, context: str = "",
        hlc: int = 1, lifecycle: Lifecycle = Lifecycle.ACTIVE) -> str:
    return s.put(
        rec(text, scope=scope), hlc=hlc, index_text=text, index_context=context,
        lifecycle=lifecycle,
    ).knowledge_id


def test_writes_count_terms_per_scope(open_store: Open) -> None:
    s = open_store()
    put(s, "alpha beta beta", context="gamma alpha")
    put(s, "alpha delta")
    put(s, "beta", scope="project:b")
    put(s, "omega", scope="*")  # global: in every scope's view
    put(s, "gamma", lifecycle=Lifecycle.DRAFT)  # not active: not searched, not counted
    got = s.capabilities.lexical.scope_term_stats(["project:a"], VOCAB)
    assert got == TermStats({"alpha": 2, "beta": 1, "gamma": 1, "delta": 1, "omega": 1}, 3, 8)
    assert got.avg_len == pytest.approx(8 / 3)
    assert s.capabilities.lexical.scope_term_stats(["project:b"], VOCAB) == TermStats({"beta": 1, "omega": 1}, 2, 2)
    both = s.capabilities.lexical.scope_term_stats(["project:a", "project:b"], ["beta", "zzz"])
    assert both == TermStats({"beta": 2}, 4, 9)
    assert s.capabilities.lexical.scope_term_stats(["nowhere"], ["alpha", "omega"]) == TermStats({"omega": 1}, 1, 1)
    assert s.capabilities.lexical.scope_term_stats(["project:a"], []) == TermStats({}, 3, 8)


def test_identical_rewrite_and_text_less_records_count_nothing(open_store: Open) -> None:
    s = open_store()
    r = rec("alpha")
    s.put(r, hlc=1, index_text="alpha")
    s.put(r, hlc=2, index_text="alpha")  # idempotent: already stored
    s.put(rec("no lexical text"), hlc=3)
    assert s.capabilities.lexical.scope_term_stats(["project:x"], ["alpha"]) == TermStats({"alpha": 1}, 1, 1)


def test_one_record_in_two_scopes_counts_in_each(open_store: Open) -> None:
    s = open_store()
    shared = compose_record("alpha", scope=["project:a", "project:b"], created_at=1_700_000_000)
    s.put_many([PutItem(shared, 1, index_text="alpha"), PutItem(rec("beta"), 2, index_text="beta")])
    assert s.capabilities.lexical.scope_term_stats(["project:a"], ["alpha"]) == TermStats({"alpha": 1}, 1, 1)
    assert s.capabilities.lexical.scope_term_stats(["project:b"], ["alpha"]) == TermStats({"alpha": 1}, 1, 1)
    # Asked for both, it is counted in each (documented: a slight overcount of the union).
    assert s.capabilities.lexical.scope_term_stats(["project:a", "project:b"], ["alpha"]).doc_freq == {"alpha": 2}
    s.set_state(shared.knowledge_id, ChangeOp.INVALIDATE, hlc=3, lifecycle=Lifecycle.INVALIDATED)
    assert s.capabilities.lexical.scope_term_stats(["project:a", "project:b"], ["alpha"]) == TermStats({}, 0, 0)


@pytest.mark.parametrize(
    ("op", "lifecycle"),
    [
        (ChangeOp.SUPERSEDE, Lifecycle.SUPERSEDED),
        (ChangeOp.INVALIDATE, Lifecycle.INVALIDATED),
        (ChangeOp.ARCHIVE, Lifecycle.ARCHIVED),
    ],
)
def test_leaving_the_active_set_uncounts_and_returning_recounts(
    open_store: Open, op: ChangeOp, lifecycle: Lifecycle
) -> None:
    s = open_store()
    keep = put(s, "alpha beta", hlc=1)
    gone = put(s, "alpha gamma", context="gamma", hlc=2)
    s.set_state(gone, op, hlc=3, lifecycle=lifecycle, reason="r")
    assert s.capabilities.lexical.scope_term_stats(["project:a"], VOCAB) == TermStats({"alpha": 1, "beta": 1}, 1, 2)
    s.set_state(gone, op, hlc=4, lifecycle=lifecycle, reason="again")  # no second uncount
    assert s.capabilities.lexical.scope_term_stats(["project:a"], VOCAB).docs == 1
    s.set_state(gone, ChangeOp.PUT, hlc=5, lifecycle=Lifecycle.ACTIVE)
    want = TermStats({"alpha": 2, "beta": 1, "gamma": 1}, 2, 5)
    assert s.capabilities.lexical.scope_term_stats(["project:a"], VOCAB) == want
    assert keep


def test_purge_uncounts_once(open_store: Open) -> None:
    s = open_store()
    put(s, "alpha", hlc=1)
    active = put(s, "alpha beta", hlc=2)
    superseded = put(s, "alpha gamma", hlc=3)
    s.set_state(superseded, ChangeOp.SUPERSEDE, hlc=4, lifecycle=Lifecycle.SUPERSEDED)
    s.purge(active, hlc=5)
    s.purge(superseded, hlc=6)  # already out of the counts
    s.purge(superseded, hlc=7)  # a tombstone purged again
    assert s.put_tombstone(put(s, "delta", hlc=8), hlc=9)
    assert s.capabilities.lexical.scope_term_stats(["project:a"], VOCAB) == TermStats({"alpha": 1}, 1, 1)
    s.purge(s.query(RecordFilter(), limit=1)[0].knowledge_id, hlc=10)
    empty = s.capabilities.lexical.scope_term_stats(["project:a"], VOCAB)
    assert empty == TermStats({}, 0, 0) and empty.avg_len == 0.0


def test_a_failed_write_leaves_the_counts_alone(open_store: Open) -> None:
    s = open_store()
    r = rec("alpha")
    s.put(r, hlc=1, index_text="alpha")
    from dataclasses import replace

    forged = replace(r, integrity=replace(r.integrity, checksum="sha256:" + "1" * 64))
    with pytest.raises(ConflictError):
        s.put_many([PutItem(rec("beta"), 2, index_text="beta"), PutItem(forged, 3)])
    with pytest.raises(RuntimeError), s.atomic():
        s.set_state(r.knowledge_id, ChangeOp.INVALIDATE, hlc=4, lifecycle=Lifecycle.INVALIDATED)
        raise RuntimeError("abort")
    assert s.capabilities.lexical.scope_term_stats(["project:x"], ["alpha", "beta"]) == TermStats({"alpha": 1}, 1, 1)


_OPS = st.lists(
    st.tuples(
        st.sampled_from(["put", "supersede", "invalidate", "activate", "purge"]),
        st.lists(st.sampled_from(VOCAB), min_size=0, max_size=4),
        st.sampled_from(["project:a", "project:b", "*"]),
        st.integers(0, 30),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS)
def test_counts_equal_a_recount_after_any_history(
    open_store: Open, ops: list[tuple[str, list[str], str, int]]
) -> None:
    s = open_store()
    ids: list[str] = []
    for hlc, (op, words, scope, pick) in enumerate(ops, start=1):
        if op == "put" or not ids:
            r = rec(" ".join(words) or "empty", scope=scope, ts=1_700_000_000 + next(_STAMP))
            s.put(r, hlc=hlc, index_text=" ".join(words), index_context=" ".join(words[:1]))
            ids.append(r.knowledge_id)
            continue
        kid = ids[pick % len(ids)]
        found = s.get(kid)
        assert found is not None
        if found.state.lifecycle is Lifecycle.PURGED:
            continue
        if op == "purge":
            s.purge(kid, hlc=hlc)
        else:
            lifecycle = {
                "supersede": Lifecycle.SUPERSEDED,
                "invalidate": Lifecycle.INVALIDATED,
                "activate": Lifecycle.ACTIVE,
            }[op]
            s.set_state(kid, ChangeOp.INVALIDATE, hlc=hlc, lifecycle=lifecycle)
    for scope in ("project:a", "project:b"):
        assert s.capabilities.lexical.scope_term_stats([scope], VOCAB) == recount(s, scope, VOCAB)
    for found in s.query(RecordFilter(lifecycles=None), limit=10_000):
        s.purge(found.knowledge_id, hlc=10_000)
    assert s.capabilities.lexical.scope_term_stats(["project:a", "project:b"], VOCAB) == TermStats({}, 0, 0)


def _at_version_5(path: Path) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("DROP TABLE scope_terms")
    db.execute("DROP TABLE scope_sizes")
    db.execute("DROP TABLE term_peaks")  # migrations 7 and 8 rerun after 6
    db.execute("DROP TABLE record_links")
    db.execute("PRAGMA user_version=5")
    db.close()


def _records(n: int) -> list[AMFRecord]:
    return [rec(f"{VOCAB[i % 5]} {VOCAB[(i * 3) % 5]} note {i}") for i in range(n)]


def test_migration_6_backfills_an_existing_store(tmp_path: Path) -> None:
    keyring = Keyring(tmp_path / "keys")
    s = SQLiteStore(tmp_path / "m.db", keyring)
    records = _records(12)
    for i, r in enumerate(records):
        s.put(r, hlc=i + 1, index_text=r.text, index_context="ctx" if i % 2 else "")
    s.set_state(records[0].knowledge_id, ChangeOp.INVALIDATE, hlc=50,
                lifecycle=Lifecycle.INVALIDATED)
    s.purge(records[1].knowledge_id, hlc=51)
    want = s.capabilities.lexical.scope_term_stats(["project:x"], [*VOCAB, "ctx", "note"])
    s.close()
    _at_version_5(tmp_path / "m.db")
    s = SQLiteStore(tmp_path / "m.db", keyring)
    assert s.capabilities.lexical.scope_term_stats(["project:x"], [*VOCAB, "ctx", "note"]) == want
    assert want == recount(s, "project:x", [*VOCAB, "ctx", "note"]) and want.docs == 10
    s.close()


def test_an_interrupted_backfill_leaves_version_5(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keyring = Keyring(tmp_path / "keys")
    s = SQLiteStore(tmp_path / "m.db", keyring)
    s.put(rec("alpha"), hlc=1, index_text="alpha")
    s.close()
    _at_version_5(tmp_path / "m.db")
    from amcp.store import schema

    def boom(db: sqlite3.Connection) -> None:
        db.execute("INSERT INTO scope_sizes VALUES ('x', 1, 1)")
        raise KeyboardInterrupt

    monkeypatch.setitem(schema.BACKFILLS, 6, boom)
    with pytest.raises(KeyboardInterrupt):
        SQLiteStore(tmp_path / "m.db", keyring)
    db = sqlite3.connect(tmp_path / "m.db")
    assert db.execute("PRAGMA user_version").fetchone()[0] == 5
    assert not db.execute("SELECT name FROM sqlite_master WHERE name='scope_sizes'").fetchall()
    db.close()
    monkeypatch.undo()
    s = SQLiteStore(tmp_path / "m.db", keyring)
    assert s.capabilities.lexical.scope_term_stats(["project:x"], ["alpha"]) == TermStats({"alpha": 1}, 1, 1)
    s.close()


def test_migration_6_sql_is_plain_statements() -> None:
    assert [s.split("(")[0].strip() for s in split_sql(MIGRATIONS[5])] == [
        "CREATE TABLE scope_terms",
        "CREATE TABLE scope_sizes",
    ]
