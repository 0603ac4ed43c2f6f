"""The AMQL planner on a real store: pushdown, brute-force equivalence, limits, scopes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from amcp.amf.types import Lifecycle
from amcp.amql import AmqlSyntaxError, Recall, parse
from amcp.amql.evaluate import evaluate, sort_records
from amcp.amql.nodeview import ALL_LIFECYCLES, QueryContext, list_view
from amcp.amql.planner import plan_recall, token_cost
from amcp.amql.pushdown import mentions
from amcp.amql.run import run_query
from amcp.errors import ForbiddenError, NotFoundError, ValidationError
from amcp.memory import Memory
from amcp.store.base import RecordFilter, StoredRecord

NOW = 1_900_000_000.0  # fixed query clock: access_recency and decay_status are reproducible


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Memory, dict[str, str]]]:
    m = Memory(tmp_path_factory.mktemp("planner") / "m.db", embedder="hashing")
    ids: dict[str, str] = {}
    types = ["KT-FACT", "KT-PITFALL", "KT-DECISION", "KT-CONTEXT"]
    spaces = ["OKX.API", "Python.Division", "StepQuant.Parameter"]
    scopes = ["A", "B", "*"]
    for i in range(48):
        out = m.remember(
            f"record {i} about {'stop loss orders' if i % 3 == 0 else 'division results'}",
            type=types[i % 4], scope=scopes[i % 3], subject=f"{spaces[i % 3]}.item{i % 5}",
            tags=["api_integration"] if i % 4 == 0 else ["misc", f"t{i % 2}"],
            confidence=round(0.5 + (i % 10) / 20, 2),
            created_at=f"2026-0{1 + i % 6}-1{i % 10}T0{i % 9}:00:00Z",
            session="S-1" if i % 7 == 0 else None,
        )
        ids[f"r{i}"] = out.knowledge_id
    ids["child"] = m.remember("derived from two records", scope="A", subject="OKX.API.child",
                              caused_by=[ids["r0"], ids["r3"]]).knowledge_id
    m.invalidate(ids["r5"], "wrong")
    m.invalidate(ids["r9"], "wrong too")
    yield m, ids
    m.close()


def brute(m: Memory, text: str, scopes: tuple[str, ...] | None = None) -> list[str]:
    """The reference: every visible record through the evaluator, no pushdown at all."""
    stmt = parse(text)
    assert isinstance(stmt, Recall)
    ctx = QueryContext(m, now=NOW, scopes=scopes, project=None)
    lifecycles = ALL_LIFECYCLES if mentions(stmt.where, "lifecycle") else (Lifecycle.ACTIVE,)
    everything = list_view(m, RecordFilter(scopes=scopes, lifecycles=lifecycles, now=NOW),
                           limit=100_000)
    keep = [r for r in everything
            if stmt.where is None or evaluate(stmt.where, ctx.view(r))]
    if stmt.order_by:
        keep = sort_records(keep, stmt.order_by, lambda r, f: ctx.view(r).get(f))
    elif mentions_semantic(text):
        probe = text.split("semantic_match('")[1].split("'", maxsplit=1)[0]
        keep.sort(key=lambda r: -(ctx.scorer.score(r, probe) or 0.0))
    if stmt.limit is not None:
        keep = keep[: stmt.limit.value]
    return [r.knowledge_id for r in keep]


def mentions_semantic(text: str) -> bool:
    # Relevance order applies when semantic_match is a top-level conjunct.
    return ("WHERE semantic_match(" in text and " OR " not in text) or (
        "AND semantic_match(" in text)


def ids_of(records: tuple[StoredRecord, ...]) -> list[str]:
    return [r.knowledge_id for r in records]


QUERIES = [
    "RECALL *",
    "RECALL * WHERE type = KT-PITFALL",
    "RECALL * WHERE type IN [KT-FACT, KT-DECISION] AND confidence > 0.7",
    "RECALL * WHERE type != KT-FACT AND NOT type IN [KT-CONTEXT]",
    "RECALL * WHERE tags CONTAINS 'api_integration' ORDER BY confidence DESC LIMIT rows(5)",
    "RECALL * WHERE tags = 'misc' AND tags CONTAINS 't1'",
    "RECALL * WHERE tags IN ['t0', 'api_integration'] ORDER BY created_at ASC",
    "RECALL * WHERE project = 'A' ORDER BY created_at DESC",
    "RECALL * WHERE project_scope CONTAINS '*' AND confidence <= 0.6",
    "RECALL * WHERE project != 'B'",
    "RECALL * WHERE subject = 'OKX.API.item0' OR subject = 'Python.Division.item1'",
    "RECALL * WHERE subject IN ['OKX.API.item0', 'OKX.API.item3'] ORDER BY weight DESC",
    "RECALL * WHERE subject CONTAINS 'Division' AND created_at >= '2026-03-01'",
    "RECALL * WHERE created_after = '2026-02-10' AND created_before = '2026-05-01T00:00:00Z'",
    "RECALL * WHERE created_at = '2026-01-10T00:00:00Z'",
    "RECALL * WHERE created_at > '2026-04-11T03:00:00Z' ORDER BY created_at ASC",
    "RECALL * WHERE lifecycle = invalidated",
    "RECALL * WHERE lifecycle NOT IN [archived] AND type = KT-DECISION",
    "RECALL * WHERE lifecycle != active ORDER BY confidence ASC",
    "RECALL * WHERE decay_status != 'expired' ORDER BY access_recency DESC LIMIT rows(7)",
    "RECALL * WHERE caused_by CONTAINS 'nothing'",
    "RECALL * WHERE (type = KT-FACT OR confidence > 0.9) AND NOT tags CONTAINS 'misc'",
    "RECALL * WHERE type IN [] OR knowledge_id = 'K-none'",
    "RECALL * WHERE predicate = EQUALS AND object CONTAINS 'stop loss' LIMIT 4",
    "RECALL * WHERE semantic_match('stop loss orders', 0.3) AND type IN [KT-FACT, KT-PITFALL]",
    "RECALL * WHERE semantic_match('division results', 0.2) OR type = KT-CONTEXT",
    "RECALL * WHERE lifecycle IN [active, invalidated] AND semantic_match('stop loss', 0.2)",
    "RECALL * WHERE caused_by = session_id('S-1') OR knowledge_id IN ['K-x']",
]


@pytest.mark.parametrize("text", QUERIES)
@pytest.mark.parametrize("scopes", [None, ("A",), ("B", "*")])
def test_results_equal_brute_force(world: tuple[Memory, dict[str, str]], text: str,
                                   scopes: tuple[str, ...] | None) -> None:
    m, _ = world
    got = run_query(m, text, scopes=scopes, touch=False, now=NOW)
    assert ids_of(got.records) == brute(m, text, scopes)


def test_referenced_by_is_rewritten_to_ids(world: tuple[Memory, dict[str, str]]) -> None:
    m, ids = world
    text = f"RECALL * WHERE referenced_by = '{ids['child']}'"
    got = run_query(m, text, touch=False, now=NOW)
    assert set(ids_of(got.records)) == {ids["r0"], ids["r3"]}
    assert ids_of(got.records) == brute(m, text)
    assert "executed with:" in got.explain and "ids=" in got.explain.split("executed with:")[1]


def test_pushdown_puts_columns_in_the_store_filter() -> None:
    stmt = parse(
        "RECALL * WHERE type IN [KT-FACT, KT-PITFALL] AND tags CONTAINS 'x' AND "
        "subject = \"a'b\" AND knowledge_id IN ['K-1', 'K-2'] AND project = 'P' AND "
        "created_after = '2026-01-01' AND confidence > 0.8 AND semantic_match('q')"
    )
    assert isinstance(stmt, Recall)
    plan = plan_recall(stmt, scopes=("P", "Q"))
    flt = plan.pushdown.flt
    assert [t.value for t in flt.types or ()] == ["KT-FACT", "KT-PITFALL"]
    assert flt.tags == ("x",)
    assert flt.subjects == ("a'b",)
    assert flt.ids == ("K-1", "K-2")
    assert flt.scopes == ("P",)
    assert flt.created_after == "2025-12-31T23:59:59Z"
    assert flt.lifecycles == (Lifecycle.ACTIVE,)
    assert len(plan.pushdown.exact) == 4
    assert len(plan.pushdown.prefilter) == 2  # project (globals pass) and the date bound
    assert [str(e) for e in plan.pushdown.residual] == [
        "Compare(field='confidence', op=<CompareOp.GT: '>'>, value=0.8)"]
    assert plan.probes and plan.probes[0].text == "q" and plan.probes[0].threshold == 0.35
    text = plan.explain()
    assert "pushed exact" in text and "vector index probe" in text and "residual" in text


def test_contradictions_skip_the_store() -> None:
    stmt = parse("RECALL * WHERE type = KT-FACT AND type = KT-PITFALL")
    assert isinstance(stmt, Recall)
    assert plan_recall(stmt).pushdown.empty


def test_lifecycle_default_is_active_unless_asked() -> None:
    for text, expected in [("RECALL *", (Lifecycle.ACTIVE,)),
                           ("RECALL * WHERE lifecycle != archived",
                            tuple(lc for lc in ALL_LIFECYCLES if lc is not Lifecycle.ARCHIVED))]:
        stmt = parse(text)
        assert isinstance(stmt, Recall)
        assert plan_recall(stmt).pushdown.flt.lifecycles == expected


def test_tokens_limit_is_a_prefix_of_the_order(world: tuple[Memory, dict[str, str]]) -> None:
    m, _ = world
    full = run_query(m, "RECALL * ORDER BY confidence DESC", touch=False, now=NOW)
    costs = [token_cost(r) for r in full.results]
    budget = costs[0] + costs[1] + costs[2] // 2  # room for two and a half
    got = run_query(m, f"RECALL * ORDER BY confidence DESC LIMIT tokens({budget})",
                    touch=False, now=NOW)
    assert ids_of(got.records) == ids_of(full.records)[:2]
    assert got.total_tokens == costs[0] + costs[1] <= budget
    assert got.truncated
    assert not full.truncated


def test_rows_limit_and_truncated(world: tuple[Memory, dict[str, str]]) -> None:
    m, _ = world
    everything = run_query(m, "RECALL *", touch=False, now=NOW)
    one = run_query(m, "RECALL * LIMIT rows(1)", touch=False, now=NOW)
    assert ids_of(one.records) == ids_of(everything.records)[:1] and one.truncated
    exact = run_query(m, f"RECALL * LIMIT rows({len(everything.records)})", touch=False, now=NOW)
    assert not exact.truncated


@pytest.mark.parametrize("text", [
    "RECALL * LIMIT tokens(0)", "RECALL * LIMIT rows(-1)", "RECALL * LIMIT rows(100000)",
    "RECALL * LIMIT tokens(99999999999)", "RECALL * WHERE colour = 'red'",
    "RECALL * WHERE no_such_fn('x')", "RECALL * LIMIT rows(1.5)",
])
def test_bad_input_is_a_400(world: tuple[Memory, dict[str, str]], text: str) -> None:
    m, _ = world
    with pytest.raises(AmqlSyntaxError) as err:
        run_query(m, text)
    assert err.value.status == 400


def test_projection_and_response_shape(world: tuple[Memory, dict[str, str]]) -> None:
    m, _ = world
    got = run_query(m, "RECALL subject, confidence, core WHERE type = KT-PITFALL LIMIT 2",
                    touch=False, now=NOW)
    resp = got.to_response()
    assert list(resp) == ["results", "total_tokens", "cache_hits", "network_fetches",
                          "query_time_ms", "truncated"]
    assert resp["cache_hits"] == 2 and resp["network_fetches"] == 0
    first = resp["results"][0]
    assert set(first) == {"knowledge_id", "subject", "confidence", "core"}
    assert resp["total_tokens"] == sum(token_cost(r) for r in resp["results"])


def test_scopes_restrict_reads_and_writes(world: tuple[Memory, dict[str, str]]) -> None:
    m, ids = world
    got = run_query(m, "RECALL *", scopes=["A"], touch=False, now=NOW)
    assert got.records
    for r in got.records:
        assert r.record is not None
        assert set(r.record.meta.project_scope) & {"A", "*"}
    hidden = ids["r1"]  # scope B
    with pytest.raises(NotFoundError):
        run_query(m, f"FORGET {hidden} REASON 'x'", scopes=["A"])
    with pytest.raises(ForbiddenError):
        run_query(m, "REMEMBER {type: 'KT-FACT', core: {subject: 'X.y.z', object: 'o', "
                     "confidence: 0.9}, meta: {project_scope: ['B']}}", scopes=["A"])
    with pytest.raises(ForbiddenError):  # global knowledge is visible, not writable, to A
        run_query(m, f"FORGET {ids['r2']} REASON 'x'", scopes=["A"])


def test_injection_literals_stay_literals(tmp_path: Path) -> None:
    m = Memory(tmp_path / "m.db", embedder="hashing")
    evil = "x'; DROP TABLE records; --"
    m.remember("a record", subject="Safe.subject")
    before = m.stats().records
    assert run_query(m, 'RECALL * WHERE subject = "x\'; DROP TABLE records; --"').records == ()
    assert run_query(m, "RECALL * WHERE object CONTAINS '\\'); DELETE FROM records; --'"
                     " OR tags CONTAINS '\" OR 1=1 --'").records == ()
    written = run_query(m, 'REMEMBER {core: {subject: "x\'; DROP TABLE records; --", '
                           'object: "Robert\'); DROP TABLE students;--", confidence: 0.9}}')
    found = run_query(m, 'RECALL * WHERE subject = "x\'; DROP TABLE records; --"')
    assert ids_of(found.records) == list(written.written)
    assert found.records[0].record is not None
    assert found.records[0].record.core.subject == evil
    assert m.stats().records == before + 1
    assert m.store.verify(full=True).ok
    m.close()


def test_remember_and_forget_statements(tmp_path: Path) -> None:
    m = Memory(tmp_path / "m.db", embedder="hashing")
    a = run_query(m, "REMEMBER {type: 'KT-PITFALL', core: {subject: 'OKX.API.tp', "
                     "predicate: 'REQUIRES', object: 'attachAlgoOrds', confidence: 0.97}, "
                     "annotation: {tags: ['api']}, meta: {project_scope: ['P']}}")
    assert a.status == 201 and len(a.written) == 1
    full = m.get(a.written[0]).record
    assert full is not None
    again = run_query(m, "REMEMBER " + _json(full.to_dict()))
    assert again.written == a.written and again.status == 200
    with pytest.raises(ValidationError):
        run_query(m, "REMEMBER {core: {subject: 'a.b', object: 'o', confidence: 2}}")
    with pytest.raises(ValidationError):
        run_query(m, "REMEMBER {colour: 'red'}")
    gone = run_query(m, "FORGET WHERE tags CONTAINS 'api' REASON 'API v2'")
    assert gone.invalidated == a.written and gone.status == 204
    assert m.get(a.written[0]).state.reason == "API v2"
    assert run_query(m, "FORGET WHERE tags CONTAINS 'api'").invalidated == ()
    m.close()


def _json(obj: object) -> str:
    import json

    return json.dumps(obj)


def test_cluster_fields(world: tuple[Memory, dict[str, str]]) -> None:
    m, _ = world
    try:
        from amcp.cse.gravity import cluster_id_for
    except ImportError:
        for text in ["RECALL * WHERE cluster_id = 'c1'", "RECALL * WHERE centroid_match('risk')"]:
            with pytest.raises(ValidationError, match="cluster functions not available") as err:
                run_query(m, text, touch=False)
            assert err.value.status == 400
        return
    cid = cluster_id_for("OKX.API.item0")
    text = f"RECALL * WHERE cluster_id = '{cid}'"
    got = run_query(m, text, touch=False, now=NOW)
    assert got.records and ids_of(got.records) == brute(m, text)
    assert "subject_prefix='OKX.API'" in got.explain  # a cluster is a subject namespace
    sub = ("RECALL * WHERE cluster_id = (SELECT cluster_id FROM clusters WHERE "
           "centroid_match('stop loss orders') LIMIT 1)")
    assert ids_of(run_query(m, sub, touch=False, now=NOW).records) == brute(m, sub)
    load = run_query(m, sub + " LIMIT tokens(15000)", touch=False, now=NOW)
    clusters = {cluster_id_for(r.record.core.subject) for r in load.records
                if r.record is not None}
    assert load.records and len(clusters) == 1


def test_current_project_from_scopes(world: tuple[Memory, dict[str, str]]) -> None:
    m, _ = world
    text = ("RECALL * WHERE type = KT-FACT AND tags CONTAINS 'api_integration' AND "
            "project != current_project() ORDER BY confidence DESC LIMIT rows(20)")
    got = run_query(m, text, scopes=["A", "*"], touch=False, now=NOW)
    for r in got.records:
        assert r.record is not None and "A" not in r.record.meta.project_scope
    with pytest.raises(ValidationError, match="current_project"):
        run_query(m, text, touch=False)


def test_recall_touches_what_it_returns(tmp_path: Path) -> None:
    m = Memory(tmp_path / "m.db", embedder="hashing")
    kid = m.remember("touch me").knowledge_id
    assert m.get(kid).state.access_count == 0
    run_query(m, "RECALL *")
    assert m.get(kid).state.access_count == 1
    m.close()


def test_project_outside_the_callers_scopes(tmp_path: Path) -> None:
    """A record visible through scope p that also carries project q matches `project = q`
    for a caller who sees only p, alone and inside an OR the store narrows."""
    m = Memory(tmp_path / "m.db", embedder=None)
    try:
        both = m.remember("shared between p and q", scope=["p", "q"]).knowledge_id
        m.remember("only in q", scope="q")
        m.remember("only in p", scope="p")
        for text in ("RECALL * WHERE project = 'q'",
                     "RECALL * WHERE project = 'q' OR type = KT-DECISION",
                     "RECALL * WHERE project IN ['p', 'q'] AND type = KT-FACT"):
            got = ids_of(run_query(m, text, scopes=("p",), touch=False).records)
            assert got == brute(m, text, scopes=("p",)), text
            assert both in got, text
    finally:
        m.close()
