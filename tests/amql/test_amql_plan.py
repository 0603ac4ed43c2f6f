"""split_where / bind: the store-agnostic half of the planner."""

from __future__ import annotations

import pytest

from amcp.amql import (
    ClusterSubquery,
    Compare,
    CompareOp,
    Contains,
    Expr,
    FuncCall,
    In,
    Not,
    Or,
    Recall,
    Value,
    parse,
)
from amcp.amql.evaluate import MappingView, evaluate
from amcp.amql.plan import STORED_FIELDS, bind, conjoin, conjuncts, is_pushable, split_where


def where(text: str) -> Expr:
    stmt = parse(f"RECALL * WHERE {text}")
    assert isinstance(stmt, Recall)
    assert stmt.where is not None
    return stmt.where


def test_split_keeps_order_and_separates_functions() -> None:
    split = split_where(where(
        "semantic_match('x') AND type IN [KT-FACT] AND stated_confidence > 0.8 AND "
        "project != current_project() AND (weight > 1 OR tags CONTAINS 'a') AND "
        "(weight > 1 OR semantic_match('y')) AND NOT lifecycle = archived AND "
        "access_recency > 0.5"
    ))
    assert split.pushable == (
        In("type", ("KT-FACT",)),
        Compare("stated_confidence", CompareOp.GT, 0.8),
        Or((Compare("weight", CompareOp.GT, 1), Contains("tags", "a"))),
        Not(Compare("lifecycle", CompareOp.EQ, "archived")),
    )
    assert split.residual == (
        FuncCall("semantic_match", ("x",)),
        Compare("project", CompareOp.NE, FuncCall("current_project")),
        Or((Compare("weight", CompareOp.GT, 1), FuncCall("semantic_match", ("y",)))),
        Compare("access_recency", CompareOp.GT, 0.5),  # computed at query time
    )


@pytest.mark.parametrize(
    ("text", "pushable"),
    [
        ("stated_confidence > 0.5", True),
        ("confidence > 0.5", False),  # read capped by verified provenance (firewall)
        ("tags CONTAINS 'trust:verified'", False),
        ("tags CONTAINS 'misc'", True),
        ("decay_status != 'expired'", False),
        ("referenced_by = 'K-a'", False),
        ("cluster_id = (SELECT cluster_id FROM clusters)", False),
        ("caused_by CONTAINS session_id('S')", False),
        ("NOT (type = KT-FACT OR weight < 0)", True),
    ],
)
def test_is_pushable(text: str, pushable: bool) -> None:
    assert is_pushable(where(text)) is pushable


def test_columns_are_the_callers() -> None:
    e = where("decay_status != 'expired' AND confidence > 0.5")
    split = split_where(e, columns=STORED_FIELDS | {"decay_status", "confidence"})
    assert split.residual == ()
    assert split_where(e, columns=()).pushable == ()


def test_conjuncts_round_trip() -> None:
    assert conjuncts(None) == ()
    e = where("weight > 1 AND weight < 5 AND type = KT-FACT")
    assert conjoin(conjuncts(e)) == e
    assert conjoin([]) is None
    assert conjoin([where("weight > 1")]) == where("weight > 1")
    assert split_where(where("weight > 1")).residual_expr is None
    assert split_where(None).pushable == ()


def test_bind_resolves_values_and_makes_them_pushable() -> None:
    def resolve(x: FuncCall | ClusterSubquery) -> Value:
        if isinstance(x, ClusterSubquery):
            return ("C1", "C2")
        return {"current_project": "StepQuant", "session_id": ("K-a", "K-b")}[x.name]  # type: ignore[return-value]

    e = where(
        "project != current_project() AND cluster_id = (SELECT cluster_id FROM clusters) AND "
        "(caused_by CONTAINS session_id('S-1') OR semantic_match('x'))"
    )
    bound = bind(e, resolve)
    split = split_where(bound)
    assert split.pushable == (
        Compare("project", CompareOp.NE, "StepQuant"),
        Compare("cluster_id", CompareOp.EQ, ("C1", "C2")),
    )
    assert split.residual == (
        Or((Or((Contains("caused_by", "K-a"), Contains("caused_by", "K-b"))),
            FuncCall("semantic_match", ("x",)))),
    )
    # Binding does not change the meaning.
    record = {"project": "Other", "cluster_id": "C2", "caused_by": ["K-b"]}
    v = MappingView(record, {"current_project": lambda: "StepQuant",
                             "session_id": lambda s: ["K-a", "K-b"],
                             "semantic_match": lambda *a: False},
                    clusters=lambda q: ["C1", "C2"])
    assert evaluate(e, v) is evaluate(bound, v) is True


def test_bind_contains_with_one_or_no_resolved_value() -> None:
    e = where("caused_by CONTAINS session_id('S')")
    assert bind(e, lambda x: ["K-a"]) == Contains("caused_by", "K-a")
    never = bind(e, lambda x: [])
    assert not evaluate(never, MappingView({"caused_by": ["K-a"], "knowledge_id": "K-x"}))
