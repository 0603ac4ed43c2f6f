"""The Store port's contract. Every adapter must pass all of it."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.store.records import rec

from amcp.amf.summary import RecordSummary
from amcp.amf.types import Lifecycle
from amcp.errors import ConflictError, GoneError, NotFoundError, ValidationError
from amcp.store import samecontent
from amcp.store.base import (
    AccessLog,
    ChangeOp,
    LexicalIndex,
    RecordFilter,
    Store,
    VectorSource,
)

Open = Callable[[], Store]


# The capabilities every adapter under test declares (the contract covers them too).
def lexical(s: Store) -> LexicalIndex:
    found = s.capabilities.lexical
    assert found is not None
    return found


def vectors(s: Store) -> VectorSource:
    found = s.capabilities.vectors
    assert found is not None
    return found


def access(s: Store) -> AccessLog:
    found = s.capabilities.access
    assert found is not None
    return found


def test_put_get_round_trip(open_store: Open) -> None:
    s = open_store()
    r = rec("the sky is blue", tags=["colour"])
    res = s.put(r, hlc=10, index_text="sky blue")
    assert res.created and res.knowledge_id == r.knowledge_id
    got = s.get(r.knowledge_id)
    assert got is not None and got.record == r
    assert got.state.lifecycle is Lifecycle.ACTIVE and got.state.hlc == 10


def test_identical_rewrite_is_idempotent(open_store: Open) -> None:
    s = open_store()
    r = rec("idempotent")
    s.put(r, hlc=1)
    again = s.put(r, hlc=2)
    assert not again.created and again.hlc == 1
    assert s.stats().records == 1 and s.stats().changes == 1


def test_same_id_other_content_is_409(open_store: Open) -> None:
    from dataclasses import replace

    s = open_store()
    r = rec("original")
    s.put(r, hlc=1)
    forged = replace(r, integrity=replace(r.integrity, checksum="sha256:" + "1" * 64))
    with pytest.raises(ConflictError):
        s.put(forged, hlc=2)
    got = s.get(r.knowledge_id)
    assert got is not None and got.record == r  # nothing lost


def test_lifecycle_changes_are_logged_in_hlc_order(open_store: Open) -> None:
    s = open_store()
    a, b = rec("a"), rec("b")
    s.put(a, hlc=5)
    s.put(b, hlc=6)
    s.set_state(
        a.knowledge_id,
        ChangeOp.SUPERSEDE,
        hlc=7,
        lifecycle=Lifecycle.SUPERSEDED,
        superseded_by=b.knowledge_id,
    )
    s.set_state(
        b.knowledge_id, ChangeOp.INVALIDATE, hlc=8, lifecycle=Lifecycle.INVALIDATED, reason="wrong"
    )
    ops = [(c.op, c.knowledge_id, c.hlc) for c in s.changes()]
    assert ops == [
        (ChangeOp.PUT, a.knowledge_id, 5),
        (ChangeOp.PUT, b.knowledge_id, 6),
        (ChangeOp.SUPERSEDE, a.knowledge_id, 7),
        (ChangeOp.INVALIDATE, b.knowledge_id, 8),
    ]
    assert [c.hlc for c in s.changes(since_hlc=6)] == [7, 8]
    assert len(s.changes(limit=2)) == 2
    st_a = s.get(a.knowledge_id)
    assert st_a is not None and st_a.state.superseded_by == b.knowledge_id
    st_b = s.get(b.knowledge_id)
    assert st_b is not None and st_b.state.reason == "wrong"
    assert s.max_hlc() == 8


def test_purge_leaves_a_tombstone_that_refuses_the_record(open_store: Open) -> None:
    s = open_store()
    r = rec("my phone number is 555-0100")
    s.put(r, hlc=1, index_text="phone number 555 0100", vector=np.ones(4, dtype=np.float32))
    s.purge(r.knowledge_id, hlc=2, reason="privacy")
    got = s.get(r.knowledge_id)
    assert got is not None and got.record is None and got.state.lifecycle is Lifecycle.PURGED
    assert lexical(s).search_lexical('"phone"', RecordFilter(lifecycles=None), 5) == []
    assert sum(len(ids) for ids, _ in vectors(s).iter_vectors()) == 0
    with pytest.raises(GoneError):
        s.put(r, hlc=3)
    with pytest.raises(GoneError):
        s.set_state(r.knowledge_id, ChangeOp.INVALIDATE, hlc=4, lifecycle=Lifecycle.INVALIDATED)
    assert s.verify(full=True).ok


def test_tombstone_for_unknown_id_blocks_later_arrival(open_store: Open) -> None:
    s = open_store()
    r = rec("will be purged elsewhere")
    assert s.put_tombstone(r.knowledge_id, hlc=1, reason="purged at hub")
    assert not s.put_tombstone(r.knowledge_id, hlc=2)
    with pytest.raises(GoneError):
        s.put(r, hlc=3)
    assert s.verify(full=True).ok


def test_get_many_in_the_order_asked(open_store: Open) -> None:
    s = open_store()
    recs = [rec(f"fact number {i}") for i in range(5)]
    for i, r in enumerate(recs):
        s.put(r, hlc=i + 1)
    s.purge(recs[1].knowledge_id, hlc=10)
    ids = [r.knowledge_id for r in recs]
    asked = [ids[3], "K-unknown", ids[0], ids[1], ids[3], ids[4]]
    got = s.get_many(asked)
    # Unknown ids are left out, duplicates kept, a tombstone comes back without content.
    assert [g.knowledge_id for g in got] == [ids[3], ids[0], ids[1], ids[3], ids[4]]
    assert [g.record for g in got] == [recs[3], recs[0], None, recs[3], recs[4]]
    assert s.get_many([]) == []


def test_unknown_ids(open_store: Open) -> None:
    s = open_store()
    assert s.get("K-" + "0" * 64) is None
    with pytest.raises(NotFoundError):
        s.set_state("K-" + "0" * 64, ChangeOp.INVALIDATE, hlc=1, lifecycle=Lifecycle.INVALIDATED)
    with pytest.raises(NotFoundError):
        s.purge("K-" + "0" * 64, hlc=1)


def test_filters(open_store: Open) -> None:
    s = open_store()
    a = rec("alpha", scope="user:alice", tags=["x", "y"], ts=1_600_000_000)
    b = rec("beta", scope="user:bob", tags=["x"], kind="preference", ts=1_700_000_000)
    g = rec("global", scope="*", ts=1_650_000_000)
    for i, r in enumerate((a, b, g)):
        s.put(r, hlc=i + 1, index_text=r.text)

    def ids(**kw: object) -> set[str]:
        return {x.knowledge_id for x in s.query(RecordFilter(**kw))}  # type: ignore[arg-type]

    assert ids(scopes=("user:alice",)) == {a.knowledge_id, g.knowledge_id}  # '*' is global
    assert ids(tags=("x", "y")) == {a.knowledge_id}
    assert ids(kinds=("preference",)) == {b.knowledge_id}
    assert ids(created_after="2021-01-01T00:00:00Z") == {b.knowledge_id, g.knowledge_id}
    assert ids(created_before="2021-01-01T00:00:00Z") == {a.knowledge_id}
    assert ids(subject_prefix="user.bob") == {b.knowledge_id}
    s.set_state(a.knowledge_id, ChangeOp.INVALIDATE, hlc=9, lifecycle=Lifecycle.INVALIDATED)
    assert a.knowledge_id not in ids()
    assert a.knowledge_id in ids(lifecycles=(Lifecycle.INVALIDATED,))
    assert s.count(RecordFilter(lifecycles=None)) == 3


def test_cursor_pagination_visits_each_record_once(open_store: Open) -> None:
    s = open_store()
    made = {s.put(rec(f"item {i}"), hlc=i + 1).knowledge_id for i in range(25)}
    seen: list[str] = []
    after = None
    while page := s.query(RecordFilter(), limit=7, after=after):
        seen.extend(x.knowledge_id for x in page)
        after = page[-1].knowledge_id
    assert len(seen) == 25 and set(seen) == made


def test_id_slices_partition_the_store(open_store: Open) -> None:
    """id_from <= id < id_before: slices cut at hex bounds cover every record exactly once,
    in every read that takes a filter (rows, summaries, states, counts), paged or not."""
    s = open_store()
    made = {s.put(rec(f"slice item {i}"), hlc=i + 1).knowledge_id for i in range(40)}
    cuts = [None, "K-4", "K-8", "K-c", None]
    seen: list[str] = []
    for lo, hi in itertools.pairwise(cuts):
        flt = RecordFilter(lifecycles=None, id_from=lo, id_before=hi)
        part = {x.knowledge_id for x in s.query(flt, limit=100)}
        assert all((lo is None or k >= lo) and (hi is None or k < hi) for k in part)
        paged: list[str] = []
        after = None
        while page := s.summaries(flt, limit=3, after=after):
            paged += [x.knowledge_id for x in page]
            after = page[-1].knowledge_id
        assert set(paged) == part and len(paged) == len(part)
        assert {x.knowledge_id for x in s.states(flt, limit=-1)} == part
        assert s.count(flt) == len(part)
        seen += paged
    assert sorted(seen) == sorted(made)
    assert flt.selective and not RecordFilter(lifecycles=None).selective
    # A real id as a bound: id_before leaves it out, id_from keeps it.
    kid = sorted(made)[17]
    below = RecordFilter(lifecycles=None, id_before=kid)
    above = RecordFilter(lifecycles=None, id_from=kid)
    assert kid not in {x.knowledge_id for x in s.query(below, limit=100)}
    assert kid in {x.knowledge_id for x in s.summaries(above, limit=100)}
    assert s.count(below) == 17 and s.count(above) == 23
    # an empty slice, and bounds that are not ids at all, are no error
    assert s.query(RecordFilter(lifecycles=None, id_from="K-8", id_before="K-8")) == []
    assert s.count(RecordFilter(lifecycles=None, id_from="zzz")) == 0
    assert s.count(RecordFilter(lifecycles=None, id_before="A")) == 0


def test_find_same_content_many_answers_like_one_by_one(
        open_store: Open, monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch dedup read: per record, the oldest active stored record with its content
    (content key: neither when nor by whom), in the order asked, repeats and misses kept."""
    s = open_store()
    a, b, c = rec("alpha fact"), rec("beta fact"), rec("gamma fact")
    for i, r in enumerate((a, b, c)):
        s.put(r, hlc=i + 1)
    later_a = rec("alpha fact", ts=1_800_000_000)  # same content, another id
    s.put(later_a, hlc=4)  # a second active copy: the first stored answers
    s.set_state(c.knowledge_id, ChangeOp.INVALIDATE, hlc=5, lifecycle=Lifecycle.INVALIDATED)
    asked = [rec("alpha fact", ts=1_900_000_000), rec("never stored"), rec("beta fact", ts=5),
             rec("gamma fact", ts=6), later_a]
    want = [a.knowledge_id, None, b.knowledge_id, None, a.knowledge_id]
    got = s.find_same_content_many(asked)
    assert [g.knowledge_id if g else None for g in got] == want
    assert [g.knowledge_id if (g := s.find_same_content(r)) else None for r in asked] == want
    assert s.find_same_content_many([]) == []
    # Across query chunks: a repeated key lands in two chunks and still answers.
    monkeypatch.setattr(samecontent, "CHUNK", 2)
    again = s.find_same_content_many([*asked, rec("beta fact", ts=9)])
    assert [g.knowledge_id if g else None for g in again] == [*want, b.knowledge_id]


def test_ttl_hides_expired(open_store: Open) -> None:
    s = open_store()
    r = rec("short lived")
    s.put(r, hlc=1, expires_at=100.0)
    assert s.query(RecordFilter(now=50.0))
    assert not s.query(RecordFilter(now=150.0))
    assert s.due_for_expiry(150.0) == [r.knowledge_id]


def test_lexical_search_ranks_and_filters(open_store: Open) -> None:
    s = open_store()
    a = rec("postgres connection pooling with pgbouncer")
    b = rec("redis cache eviction policy", scope="project:y")
    s.put(a, hlc=1, index_text=a.text)
    s.put(b, hlc=2, index_text=b.text)
    hits = lexical(s).search_lexical('"pgbouncer" OR "cache"', RecordFilter(), 10)
    assert {h[0] for h in hits} == {a.knowledge_id, b.knowledge_id}
    hits = lexical(s).search_lexical('"cache"', RecordFilter(scopes=("project:x",)), 10)
    assert hits == []


def test_vectors_and_access_stats(open_store: Open) -> None:
    s = open_store()
    r = rec("vectorised")
    v = np.arange(4, dtype=np.float32)
    s.put(r, hlc=1, vector=v)
    ((ids, mat),) = list(vectors(s).iter_vectors())
    assert mat.shape == (1, 4) and np.allclose(mat[0], v)
    assert vectors(s).ids_for_rowids([int(ids[0])]) == {int(ids[0]): r.knowledge_id}
    access(s).touch([r.knowledge_id], 1_000_000.0)
    access(s).touch([r.knowledge_id], 1_000_100.0)
    got = s.get(r.knowledge_id)
    assert got is not None and got.state.access_count == 2 and got.state.last_access == 1_000_100.0
    assert access(s).access_count_since(r.knowledge_id, 999_000.0) == 2
    s.set_weight(r.knowledge_id, 0.8)
    got = s.get(r.knowledge_id)
    assert got is not None and got.state.weight == 0.8


def test_nested_atomic_rolls_back_everything(open_store: Open) -> None:
    s = open_store()
    with pytest.raises(RuntimeError), s.atomic():
        s.put(rec("one"), hlc=1)
        with s.atomic():
            s.put(rec("two"), hlc=2)
        raise RuntimeError("boom")
    assert s.stats().records == 0 and s.changes() == []
    assert s.verify().ok


def test_inner_savepoint_rollback_keeps_outer(open_store: Open) -> None:
    s = open_store()
    with s.atomic():
        s.put(rec("kept"), hlc=1)
        with pytest.raises(RuntimeError), s.atomic():
            s.put(rec("dropped"), hlc=2)
            raise RuntimeError("inner")
    assert s.stats().records == 1 and s.verify().ok


def test_state_survives_reopen(open_store: Open) -> None:
    s = open_store()
    r = rec("durable")
    s.put(r, hlc=3)
    s.close()
    s2 = open_store()
    got = s2.get(r.knowledge_id)
    assert got is not None and got.record == r and s2.verify(full=True).ok


def test_summaries_are_query_as_verified_summaries(open_store: Open) -> None:
    """``summaries``: query's rows, order and pages, each summary equal to what the full
    verified read gives; none for a sensitive record or a tombstone; body filters refused."""
    s = open_store()
    plain_ = [rec(f"summary {i}", tags=["t"] if i % 2 else None,
                  kind="preference" if i % 3 else "fact") for i in range(5)]
    for i, r in enumerate(plain_):
        s.put(r, hlc=i + 1, index_text=r.text)
    secret, gone = rec("a secret"), rec("purged later")
    s.put(secret, hlc=10, sensitive=True)
    s.put(gone, hlc=11)
    s.purge(gone.knowledge_id, hlc=12)
    s.set_state(plain_[0].knowledge_id, ChangeOp.INVALIDATE, hlc=13,
                lifecycle=Lifecycle.INVALIDATED, reason="wrong")
    every = RecordFilter(lifecycles=None, include_expired=True)

    def check(store: Store) -> None:
        rows = store.summaries(every, limit=100)
        assert [r.knowledge_id for r in rows] == [
            r.knowledge_id for r in store.query(every, limit=100)]
        by_id = {r.knowledge_id: r for r in rows}
        assert by_id[secret.knowledge_id].summary is None  # encrypted: read it with get
        assert by_id[gone.knowledge_id].summary is None
        assert by_id[gone.knowledge_id].state.lifecycle is Lifecycle.PURGED
        for r in plain_:
            got = store.get(r.knowledge_id)
            assert got is not None and got.record is not None
            assert by_id[r.knowledge_id].summary == RecordSummary.of_record(got.record)
            assert by_id[r.knowledge_id].state == got.state
        assert by_id[plain_[1].knowledge_id].summary.text == "summary 1"  # type: ignore[union-attr]
        # Paging with ``after`` visits each row once, in the same order.
        seen, after = [], None
        while page := store.summaries(every, limit=2, after=after):
            seen += [r.knowledge_id for r in page]
            after = page[-1].knowledge_id
        assert seen == [r.knowledge_id for r in rows]
        active = store.summaries(RecordFilter(), limit=100)
        assert plain_[0].knowledge_id not in {r.knowledge_id for r in active}

    check(s)  # summaries of records this store has just written (and decoded)
    s.close()
    s = open_store()
    check(s)  # reopened: every body decoded and re-hashed afresh
    with pytest.raises(ValidationError):
        s.summaries(RecordFilter(tags=("t",)))
    assert s.count(RecordFilter(lifecycles=None)) == 7 and s.verify(full=True).ok


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.tuples(
            st.text(min_size=1, max_size=40).filter(lambda t: t.strip() != ""),
            st.sampled_from(["fact", "preference", "task"]),
            st.sampled_from(["user:a", "team:x", "*"]),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_round_trip_property(open_store: Open, items: list[tuple[str, str, str]]) -> None:
    s = open_store()
    for i, (text, kind, scope) in enumerate(items):
        r = rec(text, scope=scope, kind=kind, ts=1_700_000_000 + i)
        try:
            s.put(r, hlc=s.max_hlc() + 1, index_text=text)
        except GoneError:
            continue
        got = s.get(r.knowledge_id)
        assert got is not None and got.record == r
    assert s.verify(full=True).ok


def test_put_many_matches_put_one_by_one(open_store: Open) -> None:
    from amcp.store.base import PutItem

    s = open_store()
    kept = rec("stored before the batch")
    s.put(kept, hlc=1)
    batch = [rec(f"bulk {i}", tags=[f"t{i % 2}"]) for i in range(5)]
    vec = np.ones(4, dtype=np.float32) / 2
    items = [
        PutItem(r, hlc=10 + i, vector=vec, index_text=f"bulk{i} word", index_context="ctx")
        for i, r in enumerate(batch)
    ]
    # An identical re-write inside the batch and of an already stored record: no new rows.
    items.insert(2, PutItem(kept, hlc=50))
    items.append(PutItem(batch[0], hlc=51))
    results = s.put_many(items)
    assert [r.created for r in results] == [True, True, False, True, True, True, False]
    assert results[2].hlc == 1 and results[-1].hlc == 10
    assert results[-1].rowid == results[0].rowid
    for r, res in zip(batch, [results[i] for i in (0, 1, 3, 4, 5)], strict=True):
        got = s.get(r.knowledge_id)
        assert got is not None and got.record == r and got.state.hlc == res.hlc
        assert res.rowid == vectors(s).rowid_of(r.knowledge_id)
    assert s.stats().records == 6 and s.stats().changes == 6
    assert s.count(RecordFilter(tags=("t1",))) == 2
    assert {kid for kid, _ in lexical(s).search_lexical("bulk3", RecordFilter(), 5)} == {
        batch[3].knowledge_id
    }
    assert sum(len(ids) for ids, _v in vectors(s).iter_vectors()) == 5
    assert s.verify(full=True).ok  # the chain links exactly as sequential puts would
    assert s.put_many([]) == []


def test_put_many_is_all_or_nothing(open_store: Open) -> None:
    from dataclasses import replace

    from amcp.store.base import PutItem

    s = open_store()
    gone, clash = rec("purged"), rec("clash")
    s.put(gone, hlc=1)
    s.purge(gone.knowledge_id, hlc=2)
    s.put(clash, hlc=3)
    forged = replace(clash, integrity=replace(clash.integrity, checksum="sha256:" + "2" * 64))
    for bad, error in ((gone, GoneError), (forged, ConflictError)):
        with pytest.raises(error):
            s.put_many([PutItem(rec("fine"), hlc=10), PutItem(bad, hlc=11)])
        assert s.get(rec("fine").knowledge_id) is None  # the good item rolled back too
    assert s.stats().changes == 3 and s.verify().ok


def test_link_filters_and_subjects(open_store: Open) -> None:
    """``caused_by`` / ``sessions`` filters and ``subjects`` (what AMQL pushes down)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from amcp.amf.compose import compose_record

    key = Ed25519PrivateKey.generate()
    s = open_store()
    root = rec("the root cause", scope="project:x")
    session = "S-20260313-143022-abc123"
    a = compose_record("caused by the root", key=key, scope=["project:x"], subject="app.a",
                       caused_by=[root.knowledge_id], evidence=[f"session:{session}"])
    b = compose_record("also caused by it", key=key, scope=["project:x"], subject="app.b",
                       caused_by=[root.knowledge_id, a.knowledge_id], evidence=[session])
    c = compose_record("unrelated", key=key, scope=["project:y"], subject="other",
                       evidence=["session:not-a-node-id"])
    for i, r in enumerate((root, a, b, c)):
        s.put(r, hlc=i + 1)

    def ids(**kw: object) -> set[str]:
        return {x.knowledge_id for x in s.query(RecordFilter(**kw))}  # type: ignore[arg-type]

    assert ids(caused_by=(root.knowledge_id,)) == {a.knowledge_id, b.knowledge_id}
    assert ids(caused_by=(a.knowledge_id, "K-none")) == {b.knowledge_id}
    assert ids(sessions=(session,)) == {a.knowledge_id, b.knowledge_id}
    assert ids(sessions=("not-a-node-id",)) == {c.knowledge_id}  # 'session:' form, any id
    assert ids(caused_by=(root.knowledge_id,), scopes=("project:y",)) == set()
    assert s.subjects(RecordFilter(scopes=("project:x",))) == sorted(
        {root.core.subject, "app.a", "app.b"}
    )
    s.purge(a.knowledge_id, hlc=9)
    assert ids(sessions=(session,), lifecycles=None) == {b.knowledge_id}
