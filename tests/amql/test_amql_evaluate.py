"""evaluate(): truth tables over the operators, missing fields, lists, dates, callbacks."""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import product
from typing import Any

import pytest

from amcp.amql import (
    And,
    ClusterSubquery,
    Compare,
    CompareOp,
    Direction,
    Expr,
    In,
    Not,
    Or,
    OrderItem,
    Recall,
    parse,
)
from amcp.amql.errors import AmqlEvaluationError
from amcp.amql.evaluate import MappingView, evaluate, sort_records
from amcp.errors import AmcpError

T = Compare("weight", CompareOp.EQ, 1)  # true on RECORD
F = Compare("weight", CompareOp.EQ, 2)  # false on RECORD

RECORD: dict[str, Any] = {
    "type": "KT-PITFALL",
    "confidence": 0.9,
    "weight": 1,
    "access_recency": 0.25,
    "subject": "OKX.API.TP_SL",
    "predicate": "REQUIRES",
    "object": "attachAlgoOrds",
    "project": "StepQuant",
    "project_scope": ["StepQuant", "*"],
    "tags": ["api_integration", "okx"],
    "caused_by": ["K-a", "K-b"],
    "referenced_by": [],
    "created_at": datetime(2026, 3, 13, 14, 30, tzinfo=UTC),
    "lifecycle": "active",
    "cluster_id": "C-risk",
}


def view(record: dict[str, Any] | None = None, score: object = 0.7, **fns: Any) -> MappingView:
    functions = {
        "semantic_match": lambda text, *threshold: score,
        "centroid_match": lambda text, *threshold: text == "risk",
        "current_project": lambda: "Other",
        "session_id": lambda sid: ["K-b", "K-z"],
        "qef_signal_id": lambda qid: "K-q",
        **fns,
    }
    return MappingView(RECORD if record is None else record, functions,
                       clusters=lambda q: ["C-risk", "C-ops"])


def where(text: str) -> Expr:
    stmt = parse(f"RECALL * WHERE {text}")
    assert isinstance(stmt, Recall)
    assert stmt.where is not None
    return stmt.where


@pytest.mark.parametrize(("a", "b"), list(product([True, False], repeat=2)))
def test_boolean_truth_tables(a: bool, b: bool) -> None:
    x, y = (T if a else F), (T if b else F)
    v = view()
    assert evaluate(And((x, y)), v) is (a and b)
    assert evaluate(Or((x, y)), v) is (a or b)
    assert evaluate(Not(x), v) is (not a)
    assert evaluate(Not(And((x, y))), v) is evaluate(Or((Not(x), Not(y))), v)  # De Morgan


CASES = [
    # numbers: all six operators
    ("confidence > 0.8", True), ("confidence >= 0.9", True), ("confidence < 0.9", False),
    ("confidence <= 0.9", True), ("confidence = 0.9", True), ("confidence != 0.9", False),
    ("weight = 1.0", True), ("weight IN [0, 1]", True), ("weight NOT IN [0, 2]", True),
    # strings and enums
    ("type = KT-PITFALL", True), ("type = 'KT-FACT'", False), ("type != KT-FACT", True),
    ("type IN [KT-FACT, KT-PITFALL]", True), ("type NOT IN [KT-FACT, KT-PITFALL]", False),
    ("subject CONTAINS 'API'", True), ("subject CONTAINS 'api'", False),
    ("predicate = REQUIRES", True), ("lifecycle IN [archived]", False),
    # lists: = / IN share an element, CONTAINS is membership
    ("tags CONTAINS 'okx'", True), ("tags CONTAINS 'ok'", False), ("tags = 'okx'", True),
    ("tags != 'okx'", False), ("tags IN ['x', 'api_integration']", True),
    ("project_scope = '*'", True), ("referenced_by = 'K-a'", False),
    ("referenced_by != 'K-a'", True),
    # missing fields: equal only null; != true; ordering false
    ("decay_status != 'expired'", True), ("decay_status = 'expired'", False),
    ("decay_status = null", True), ("decay_status != null", False),
    ("knowledge_id IN ['K-1']", False), ("knowledge_id NOT IN ['K-1']", True),
    ("object != null", True), ("weight = null", False),
    # dates
    ("created_after = '2026-01-01'", True), ("created_after = '2026-03-13T14:30:00Z'", False),
    ("created_before = '2026-03-14'", True), ("created_before = '2026-03-13'", False),
    ("created_at >= '2026-03-13T15:30:00+01:00'", True),
    ("created_at > '2026-03-13T14:30Z'", False),
    ("created_at = '2026-03-13T14:30:00Z'", True), ("created_at != '2026-03-13T14:30:00Z'", False),
    # value functions and the subquery
    ("project != current_project()", True), ("project = current_project()", False),
    ("caused_by = session_id('S-1')", True), ("caused_by CONTAINS session_id('S-1')", True),
    ("caused_by = qef_signal_id('Q-1')", False),
    ("cluster_id = (SELECT cluster_id FROM clusters WHERE centroid_match('risk') LIMIT 2)", True),
    ("cluster_id != (SELECT cluster_id FROM clusters)", False),
    # predicate functions: a score passes at the threshold (default 0.35, calibrated)
    ("semantic_match('x')", True), ("semantic_match('x', 0.7)", True),
    ("semantic_match('x', 0.71)", False), ("NOT semantic_match('x', 0.9)", True),
]


@pytest.mark.parametrize(("text", "expected"), CASES, ids=[c for c, _ in CASES])
def test_condition_truth(text: str, expected: bool) -> None:
    assert evaluate(where(text), view()) is expected


def test_created_at_may_come_as_a_string_or_naive_datetime() -> None:
    for created in ("2026-03-13T14:30:00Z", datetime(2026, 3, 13, 14, 30)):
        v = view({"created_at": created})
        assert evaluate(where("created_after = '2026-03-13'"), v)
        assert evaluate(where("created_at = '2026-03-13T14:30:00Z'"), v)
    assert not evaluate(where("created_after = '2020-01-01'"), view({"created_at": "junk"}))
    assert not evaluate(where("created_before = '2030-01-01'"), view({}))


@pytest.mark.parametrize(
    ("score", "expected"),
    [(True, True), (False, False), (0.35, True), (0.34, False), (1, True), (None, False),
     ("high", False)],
)
def test_predicate_callback_may_return_bool_or_score(score: object, expected: bool) -> None:
    assert evaluate(where("semantic_match('x')"), view(score=score)) is expected


def test_a_view_with_wrong_types_gives_false_not_an_exception() -> None:
    odd = {"confidence": "0.9", "weight": True, "tags": "okx", "created_at": 5}
    v = view(odd)
    assert not evaluate(where("confidence > 0.5"), v)
    assert not evaluate(where("weight = 1"), v)  # True is not 1 in a query
    assert evaluate(where("tags CONTAINS 'ok'"), v)  # a string field: substring
    assert not evaluate(where("created_at > '2020-01-01'"), v)


def test_missing_callbacks_are_a_server_error() -> None:
    bare = MappingView({"project": "P"})
    with pytest.raises(AmqlEvaluationError, match="current_project") as info:
        evaluate(where("project = current_project()"), bare)
    assert isinstance(info.value, AmcpError)
    assert info.value.status == 500
    with pytest.raises(AmqlEvaluationError, match="subqueries"):
        evaluate(Compare("cluster_id", CompareOp.EQ, ClusterSubquery("cluster_id", "clusters")),
                 bare)


def test_short_circuit_skips_callbacks() -> None:
    calls: list[str] = []
    v = view(semantic_match=lambda *a: calls.append("x") or True)
    assert not evaluate(where("weight = 2 AND semantic_match('x')"), v)
    assert evaluate(where("weight = 1 OR semantic_match('x')"), v)
    assert calls == []


def test_bound_with_not_equal_built_in_code() -> None:
    bound = Compare("created_after", CompareOp.NE, datetime(2026, 1, 1, tzinfo=UTC))
    assert not evaluate(bound, view())
    assert evaluate(bound, view({}))


def test_in_with_empty_list_is_false() -> None:
    assert not evaluate(In("type", ()), view())


def test_sort_records_orders_by_keys_with_missing_last() -> None:
    rows = [
        {"id": 1, "confidence": 0.5, "created_at": "2026-01-02T00:00:00Z"},
        {"id": 2, "confidence": 0.9},
        {"id": 3, "confidence": 0.5, "created_at": datetime(2026, 1, 3, tzinfo=UTC)},
        {"id": 4},
        {"id": 5, "confidence": 0.9, "created_at": "2026-01-01T00:00:00Z"},
    ]

    def get(r: dict[str, Any], f: str) -> object:
        return r.get(f)

    desc = sort_records(rows, (OrderItem("confidence", Direction.DESC),
                               OrderItem("created_at", Direction.DESC)), get)
    assert [r["id"] for r in desc] == [5, 2, 3, 1, 4]
    asc = sort_records(rows, (OrderItem("confidence"), OrderItem("created_at")), get)
    assert [r["id"] for r in asc] == [1, 3, 5, 2, 4]
    mixed = [{"id": 1, "subject": "b"}, {"id": 2, "subject": 3}, {"id": 3, "subject": "a"}]
    assert [r["id"] for r in sort_records(mixed, (OrderItem("subject"),), get)] == [2, 3, 1]
    assert sort_records(rows, (), get) == rows
