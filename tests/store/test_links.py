"""record_links (migration 8): causal links and work-session marks, and the AMQL queries
that use them (caused_by pushdown, session_id(), an OR narrowed to its branches' union).
Every answer is checked against the in-memory evaluation it replaces."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from amcp.amf.types import Lifecycle
from amcp.amql.run import run_query
from amcp.memory import Memory
from amcp.store.base import RecordFilter
from amcp.store.links import indexes_session, links_of, session_of
from amcp.store.sqlite import SQLiteStore

S1, S2 = "S-20260313-143022-abc123", "S-20260314-090000-00ff00"


def _fill(mem: Memory) -> dict[str, list[str]]:
    """Roots, then records citing them, some in a work session, one sensitive."""
    roots = [mem.remember(f"root decision {i}", scope="p").knowledge_id for i in range(4)]
    kids: dict[str, list[str]] = {"roots": roots, "children": [], "s1": [], "s2": []}
    for i in range(24):
        cited = [roots[i % 4]] + ([roots[(i + 1) % 4]] if i % 3 == 0 else [])
        evidence = [f"session:{S1}"] if i % 4 == 0 else [S2] if i % 4 == 1 else ["a web page"]
        out = mem.remember(
            f"follow-up {i} on the deploy", scope="p", caused_by=cited, evidence=evidence,
            sensitive=i == 5,
        )
        kids["children"].append(out.knowledge_id)
        if i % 4 == 0:
            kids["s1"].append(out.knowledge_id)
        elif i % 4 == 1:
            kids["s2"].append(out.knowledge_id)
    return kids


def _by_scan(mem: Memory, keep: object) -> set[str]:
    every = mem.store.query(RecordFilter(lifecycles=None, include_expired=True), limit=10_000)
    return {s.knowledge_id for s in every if s.record is not None and keep(s.record)}  # type: ignore[operator]


def _ids(mem: Memory, flt: RecordFilter) -> set[str]:
    return {s.knowledge_id for s in mem.store.query(flt, limit=10_000)}


def test_session_marks_and_shapes() -> None:
    assert session_of(f"session:{S1}") == S1
    assert session_of(S2) == S2
    assert session_of("session:") is None and session_of("a web page") is None
    assert session_of("S-2026-bad") is None and session_of(42) is None
    assert indexes_session(S1) and not indexes_session("my-session")


def test_filters_match_the_records_own_fields(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder=None) as mem:
        kids = _fill(mem)
        root = kids["roots"][1]
        want = _by_scan(mem, lambda r: r.causal is not None and root in (r.causal.caused_by or ()))
        assert want and _ids(mem, RecordFilter(caused_by=(root,))) == want
        two = kids["roots"][:2]
        want2 = _by_scan(mem, lambda r: r.causal is not None
                         and set(two) & set(r.causal.caused_by or ()))
        assert _ids(mem, RecordFilter(caused_by=tuple(two))) == want2
        assert _ids(mem, RecordFilter(sessions=(S1,))) == set(kids["s1"])
        assert _ids(mem, RecordFilter(sessions=(S2,))) == set(kids["s2"])
        assert _ids(mem, RecordFilter(sessions=(S1, S2), caused_by=(root,))) == (
            set(kids["s1"] + kids["s2"]) & want
        )
        assert RecordFilter(sessions=(S1,)).selective
        # The sensitive record's links are indexed (ids only): it is found like the others.
        assert kids["children"][5] in _ids(mem, RecordFilter(sessions=(S2,)))


def test_purge_drops_the_links(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder=None) as mem:
        kids = _fill(mem)
        gone = kids["s1"][0]
        mem.purge(gone)
        store = mem.store
        assert isinstance(store, SQLiteStore)
        rid = store.capabilities.vectors.rowid_of(gone)
        assert not store.conn.db.execute("SELECT 1 FROM record_links WHERE rid=?", (rid,)).fetchall()
        assert gone not in _ids(mem, RecordFilter(sessions=(S1,), lifecycles=None))


def _links(path: Path) -> list[tuple[int, str, str]]:
    db = sqlite3.connect(path)
    try:
        return sorted(db.execute("SELECT rid, kind, ref FROM record_links"))
    finally:
        db.close()


@pytest.mark.parametrize("how", ["from version 7", "interrupted backfill"])
def test_an_existing_store_is_backfilled(tmp_path: Path, how: str) -> None:
    path = tmp_path / "m.db"
    with Memory(path, embedder=None) as mem:
        _fill(mem)
        store = mem.store
        assert isinstance(store, SQLiteStore)
        expected = sorted(
            (store.capabilities.vectors.rowid_of(s.knowledge_id), kind, ref)
            for s in store.query(RecordFilter(lifecycles=None), limit=10_000)
            if s.record is not None
            for kind, ref in links_of(s.record)
        )
    assert _links(path) == expected and expected
    db = sqlite3.connect(path, isolation_level=None)
    if how == "from version 7":
        db.execute("DROP TABLE record_links")
        db.execute("PRAGMA user_version=7")
    else:  # the table exists, empty, and the marker says the backfill never finished
        db.execute("DELETE FROM record_links")
        db.execute("INSERT INTO store_meta(key, value) VALUES ('backfill.links', 'pending')")
    db.close()
    with Memory(path, embedder=None) as mem:
        assert mem.store.get_meta("backfill.links") is None
    assert _links(path) == expected


def test_amql_caused_by_session_and_or_match_the_evaluator(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder=None) as mem:
        kids = _fill(mem)
        root = kids["roots"][2]
        # A record caused by a session's records: the causal query of the upstream examples.
        late = mem.remember("postmortem of the deploy", scope="p",
                            caused_by=[kids["s1"][1]]).knowledge_id
        active = Lifecycle.ACTIVE

        def ids(text: str) -> set[str]:
            return {r.knowledge_id for r in run_query(mem, text, scopes=("p",)).records}

        def scan(keep: object) -> set[str]:
            return {k for k in _by_scan(mem, keep)
                    if mem.store.get(k).state.lifecycle is active}  # type: ignore[union-attr]

        result = run_query(mem, f"RECALL * WHERE caused_by = '{root}'", scopes=("p",))
        assert "caused_by=" in result.explain
        assert {r.knowledge_id for r in result.records} == scan(
            lambda r: r.causal is not None and root in (r.causal.caused_by or ()))
        assert ids(f"RECALL * WHERE caused_by = session_id('{S1}')") == {late}
        # Not in the index's shape: answered by the scan, same semantics.
        assert ids("RECALL * WHERE caused_by = session_id('my-session')") == set()
        query = (f"RECALL * WHERE caused_by = '{root}' OR type = KT-PITFALL "
                 f"OR knowledge_id = '{kids['roots'][0]}'")
        assert "ids=" in run_query(mem, query, scopes=("p",)).explain  # narrowed to the union
        either = ids(query)
        assert either == scan(lambda r: (r.causal is not None
                                         and root in (r.causal.caused_by or ()))
                              or r.type.value == "KT-PITFALL"
                              or r.knowledge_id == kids["roots"][0])
        # A branch the store cannot answer exactly (confidence): the OR is evaluated in memory.
        mixed = ids(f"RECALL * WHERE caused_by = '{root}' OR confidence > 0.95")
        assert mixed == scan(lambda r: (r.causal is not None
                                        and root in (r.causal.caused_by or ()))
                             or r.core.confidence > 0.95)
        # Two caused_by conditions ANDed: the second is evaluated in memory.
        both = ids(f"RECALL * WHERE caused_by = '{kids['roots'][0]}' "
                   f"AND caused_by = '{kids['roots'][1]}'")
        assert both == scan(lambda r: r.causal is not None and {
            kids["roots"][0], kids["roots"][1]} <= set(r.causal.caused_by or ()))
        assert both


def test_cluster_queries_read_only_the_namespace(tmp_path: Path) -> None:
    """``cluster_id = C-ns`` narrows the store to subjects starting with ``ns`` (a superset:
    ``nsx…`` and deeper namespaces come back too) and the recheck keeps the exact members;
    the cluster listing behind a subquery comes from ``Store.subjects``, not a scan."""
    from amcp.cse.gravity import cluster_id_for

    subjects = ["risk.stops.a", "risk.stops.b", "risk.stopsx.c", "risk.stops.deep.d",
                "risk.stops", "other.thing.e"]
    with Memory(tmp_path / "m.db", embedder="hashing") as mem:
        made = {subj: mem.remember(f"note about {subj}", scope="p", subject=subj).knowledge_id
                for subj in subjects}
        store = mem.store
        assert store.subjects(RecordFilter(scopes=("p",))) == sorted(subjects)
        result = run_query(mem, "RECALL * WHERE cluster_id = 'C-risk.stops'", scopes=("p",))
        assert "subject_prefix='risk.stops'" in result.explain
        assert {r.knowledge_id for r in result.records} == {
            kid for subj, kid in made.items() if cluster_id_for(subj) == "C-risk.stops"
        } == {made["risk.stops.a"], made["risk.stops.b"]}
        none = run_query(mem, "RECALL * WHERE cluster_id = 'not-a-cluster'", scopes=("p",))
        assert none.records == ()
        sub = run_query(mem, "RECALL * WHERE cluster_id = (SELECT cluster_id FROM clusters "
                             "WHERE centroid_match('note about other.thing.e') LIMIT 1)",
                        scopes=("p",))
        assert {r.knowledge_id for r in sub.records} == {made["other.thing.e"]}


def test_an_unreadable_body_does_not_stop_the_backfill(tmp_path: Path) -> None:
    """A body that no longer decodes is refused when read and reported by verify(full); the
    upgrade must not make the whole store unopenable because of it."""
    path = tmp_path / "m.db"
    with Memory(path, embedder=None) as mem:
        kids = _fill(mem)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("DROP TABLE record_links")
    db.execute("PRAGMA user_version=7")
    db.execute("UPDATE records SET body=X'c0' WHERE knowledge_id=?", (kids["s1"][0],))
    db.close()
    with Memory(path, embedder=None) as mem:
        assert mem.store.get_meta("backfill.links") is None
        assert _ids(mem, RecordFilter(sessions=(S1,))) == set(kids["s1"][1:])
        report = mem.store.verify(full=True)
        assert [kid for kid, _why in report.damaged] == [kids["s1"][0]]
