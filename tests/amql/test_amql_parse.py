"""parse(): upstream examples, table-driven positive and negative cases, literals."""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError
from datetime import UTC, datetime
from pathlib import Path

import pytest

from amcp.amql import (
    AmqlSyntaxError,
    And,
    ClusterSubquery,
    Compare,
    CompareOp,
    Contains,
    Direction,
    Distill,
    Forget,
    FuncCall,
    In,
    Limit,
    LimitUnit,
    Not,
    Or,
    OrderItem,
    Recall,
    Remember,
    parse,
)
from amcp.errors import Status, ValidationError

# Vendored with its licence: tests/spec/README.md.
SPEC = Path(__file__).resolve().parents[1] / "spec" / "upstream" / "AMCP_v1.0.json"
KID = "K-" + "0123456789abcdef" * 4
GE, LE, LT, EQ, NE = CompareOp.GE, CompareOp.LE, CompareOp.LT, CompareOp.EQ, CompareOp.NE


def upstream_examples() -> dict[str, str]:
    with SPEC.open(encoding="utf-8") as f:
        examples: dict[str, str] = json.load(f)["L4_routing_scheduling"]["amql"]["examples"]
    return examples


@pytest.mark.parametrize("name", sorted(upstream_examples()) or ["<none>"])
def test_every_upstream_example_parses(name: str) -> None:
    stmt = parse(upstream_examples()[name])
    assert isinstance(stmt, Recall)
    assert stmt.where is not None


def test_upstream_examples_parse_to_the_expected_trees() -> None:
    ex = upstream_examples()
    assert parse(ex["semantic_search"]) == Recall(
        where=And((
            FuncCall("semantic_match", ("止损策略",)),
            In("type", ("KT-FACT", "KT-PITFALL")),
            Compare("confidence", CompareOp.GT, 0.8),
        )),
        limit=Limit(LimitUnit.TOKENS, 10000),
    )
    assert parse(ex["temporal_query"]) == Recall(
        where=And((
            Compare("project", CompareOp.EQ, "StepQuant"),
            Compare("created_after", CompareOp.EQ, datetime(2026, 1, 1, tzinfo=UTC)),
            Compare("decay_status", CompareOp.NE, "expired"),
        )),
        order_by=(OrderItem("access_recency", Direction.DESC),),
    )
    assert parse(ex["causal_query"]) == Recall(
        where=Or((
            Compare("caused_by", EQ, FuncCall("session_id", ("S-20260313-143022-abc123",))),
            Compare("referenced_by", EQ, FuncCall("qef_signal_id", ("QEF-001-20260313",))),
        ))
    )
    assert parse(ex["cluster_load"]) == Recall(
        where=Compare("cluster_id", CompareOp.EQ, ClusterSubquery(
            "cluster_id", "clusters", FuncCall("centroid_match", ("risk_management",)), 1)),
        limit=Limit(LimitUnit.TOKENS, 15000),
    )
    assert parse(ex["cross_project"]) == Recall(
        where=And((
            Compare("type", CompareOp.EQ, "KT-PITFALL"),
            Contains("tags", "api_integration"),
            Compare("project", CompareOp.NE, FuncCall("current_project")),
        )),
        order_by=(OrderItem("confidence", Direction.DESC),),
        limit=Limit(LimitUnit.ROWS, 20),
    )


def w(text: str) -> object:
    """The WHERE of ``RECALL * WHERE text``."""
    stmt = parse(f"RECALL * WHERE {text}")
    assert isinstance(stmt, Recall)
    return stmt.where


POSITIVE_WHERE = [
    ("confidence >= 0.5", Compare("confidence", GE, 0.5)),
    ("weight <= -1", Compare("weight", LE, -1)),
    ("access_recency < 1e3", Compare("access_recency", LT, 1000.0)),
    ("subject = 'a.b.c'", Compare("subject", EQ, "a.b.c")),
    ('object != "x"', Compare("object", NE, "x")),
    ("predicate = REQUIRES", Compare("predicate", EQ, "REQUIRES")),
    ("lifecycle IN [active, 'draft']", In("lifecycle", ("active", "draft"))),
    ("type NOT IN [KT-FACT]", Not(In("type", ("KT-FACT",)))),
    ("type IN []", In("type", ())),
    ("tags CONTAINS 'x'", Contains("tags", "x")),
    ("subject CONTAINS 'OKX'", Contains("subject", "OKX")),
    ("caused_by CONTAINS session_id('S-1')",
     Contains("caused_by", FuncCall("session_id", ("S-1",)))),
    ("project_scope = '*'", Compare("project_scope", EQ, "*")),
    ("knowledge_id = null", Compare("knowledge_id", EQ, None)),
    ("cluster_id != NULL", Compare("cluster_id", NE, None)),
    ("created_before = '2026-03-13T14:30:22Z'",
     Compare("created_before", EQ, datetime(2026, 3, 13, 14, 30, 22, tzinfo=UTC))),
    ("created_at >= '2026-03-13T16:30:22+02:00'",
     Compare("created_at", GE, datetime(2026, 3, 13, 14, 30, 22, tzinfo=UTC))),
    ("semantic_match('x', 0.7)", FuncCall("semantic_match", ("x", 0.7))),
    ("centroid_match(\"risk\")", FuncCall("centroid_match", ("risk",))),
    ("NOT NOT weight > 1", Not(Not(Compare("weight", CompareOp.GT, 1)))),
    # precedence: NOT > AND > OR
    ("weight > 1 OR weight < 0 AND NOT tags CONTAINS 'a'",
     Or((Compare("weight", CompareOp.GT, 1),
         And((Compare("weight", LT, 0), Not(Contains("tags", "a"))))))),
    ("(weight > 1 OR weight < 0) AND type = KT-FACT",
     And((Or((Compare("weight", CompareOp.GT, 1), Compare("weight", LT, 0))),
          Compare("type", EQ, "KT-FACT")))),
    # nested ANDs flatten
    ("(weight > 1 AND weight < 2) AND (type = KT-FACT AND tags CONTAINS 'a')",
     And((Compare("weight", CompareOp.GT, 1), Compare("weight", LT, 2),
          Compare("type", EQ, "KT-FACT"), Contains("tags", "a")))),
    ("((((weight > 1))))", Compare("weight", CompareOp.GT, 1)),
    ("cluster_id = (SELECT cluster_id FROM clusters WHERE project = 'P' AND "
     "centroid_match('r', 0.6) LIMIT 3)",
     Compare("cluster_id", EQ, ClusterSubquery(
         "cluster_id", "clusters",
         And((Compare("project", EQ, "P"), FuncCall("centroid_match", ("r", 0.6)))), 3))),
    ("cluster_id = (select cluster_id from clusters)",
     Compare("cluster_id", EQ, ClusterSubquery("cluster_id", "clusters"))),
]


@pytest.mark.parametrize(("text", "expected"), POSITIVE_WHERE, ids=[t for t, _ in POSITIVE_WHERE])
def test_where_parses(text: str, expected: object) -> None:
    assert w(text) == expected


def test_keywords_are_case_insensitive_and_a_semicolon_may_end_the_query() -> None:
    a = parse("recall * where type = KT-FACT and not weight > 1 order by weight desc "
              "limit rows(5);")
    b = parse("RECALL * WHERE type = KT-FACT AND NOT weight > 1 ORDER BY weight DESC "
              "LIMIT rows(5)")
    assert a == b


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("RECALL *", Recall()),
        ("RECALL", Recall()),
        ("RECALL subject, object", Recall(fields=("subject", "object"))),
        ("RECALL core, meta LIMIT 7",
         Recall(fields=("core", "meta"), limit=Limit(LimitUnit.ROWS, 7))),
        ("RECALL * ORDER BY confidence, created_at DESC, type ASC",
         Recall(order_by=(OrderItem("confidence"), OrderItem("created_at", Direction.DESC),
                          OrderItem("type")))),
        ("RECALL * LIMIT tokens(10000000)", Recall(limit=Limit(LimitUnit.TOKENS, 10_000_000))),
        ("RECALL * LIMIT ROWS(10000)", Recall(limit=Limit(LimitUnit.ROWS, 10_000))),
        (f"FORGET {KID}", Forget(knowledge_id=KID)),
        (f"FORGET '{KID}' REASON 'superseded by \\'v2\\''",
         Forget(knowledge_id=KID, reason="superseded by 'v2'")),
        ("FORGET WHERE lifecycle = archived AND weight < 0.1 REASON \"cleanup\"",
         Forget(where=And((Compare("lifecycle", EQ, "archived"), Compare("weight", LT, 0.1))),
                reason="cleanup")),
        ("DISTILL FROM RECALL * WHERE type = KT-PITFALL INTO KT-PRINCIPLE",
         Distill(Recall(where=Compare("type", EQ, "KT-PITFALL")), "KT-PRINCIPLE")),
        ("DISTILL FROM (RECALL * WHERE type = KT-PITFALL LIMIT rows(50)) INTO 'KT-PRINCIPLE' "
         "WITH confidence_threshold = 0.8",
         Distill(Recall(where=Compare("type", EQ, "KT-PITFALL"), limit=Limit(LimitUnit.ROWS, 50)),
                 "KT-PRINCIPLE", 0.8)),
        ("DISTILL FROM RECALL * ORDER BY weight DESC INTO KT-PATTERN WITH 1",
         Distill(Recall(order_by=(OrderItem("weight", Direction.DESC),)), "KT-PATTERN", 1.0)),
        ("DISTILL FROM RECALL * INTO KT-PRINCIPLE WITH confidence_threshold 0.75",
         Distill(Recall(), "KT-PRINCIPLE", 0.75)),
    ],
)
def test_statements_parse(text: str, expected: object) -> None:
    assert parse(text) == expected


def test_remember_takes_a_json_like_object() -> None:
    stmt = parse(
        "REMEMBER {\"type\": 'KT-FACT', core: {\"subject\": \"OKX.API.TP_SL\", "
        "'predicate': 'REQUIRES', \"object\": \"attachAlgoOrds\", \"confidence\": 0.95, "
        "\"evidence\": [\"S-1\", 'it\\'s \\\"quoted\\\"', \"\\u6b62\\ud83d\\ude00\\n\"]}, "
        "\"meta\": {\"project_scope\": [\"*\"], \"n\": -2, \"ok\": true, \"none\": null, "
        "\"empty\": {}, \"list\": []}}"
    )
    assert isinstance(stmt, Remember)
    assert stmt.to_dict() == {
        "type": "KT-FACT",
        "core": {
            "subject": "OKX.API.TP_SL", "predicate": "REQUIRES", "object": "attachAlgoOrds",
            "confidence": 0.95, "evidence": ["S-1", "it's \"quoted\"", "止😀\n"],
        },
        "meta": {"project_scope": ["*"], "n": -2, "ok": True, "none": None, "empty": {},
                 "list": []},
    }
    with pytest.raises(TypeError):
        stmt.amf["type"] = "KT-PITFALL"  # type: ignore[index]


def test_sql_in_a_string_literal_stays_a_literal() -> None:
    assert w('subject = "x\'; DROP TABLE records; --"') == Compare(
        "subject", EQ, "x'; DROP TABLE records; --"
    )
    assert w("object = 'a\" OR 1=1; -- ) RECALL *'") == Compare(
        "object", EQ, 'a" OR 1=1; -- ) RECALL *'
    )
    assert w("semantic_match('\\'); FORGET WHERE weight > 0; --')") == FuncCall(
        "semantic_match", ("'); FORGET WHERE weight > 0; --",)
    )


def test_ast_nodes_are_frozen_and_hashable() -> None:
    stmt = parse("RECALL * WHERE type IN [KT-FACT] AND cluster_id = "
                 "(SELECT cluster_id FROM clusters WHERE centroid_match('x')) LIMIT 5")
    assert hash(stmt) == hash(parse(str_roundtrip := "RECALL * WHERE type IN [KT-FACT] AND "
                                    "cluster_id = (SELECT cluster_id FROM clusters WHERE "
                                    "centroid_match('x')) LIMIT 5"))
    assert str_roundtrip
    with pytest.raises(FrozenInstanceError):
        stmt.limit = None  # type: ignore[misc]
    assert hash(parse("REMEMBER {\"a\": [1]}")) is not None  # the object is out of the hash


NEGATIVE = [
    # (query, fragment of the reason, line, column)
    ("RECALL * WHERE colour = 'red'", "unknown field 'colour'", 1, 16),
    ("RECALL * WHERE similar('x')", "unknown function 'similar'", 1, 16),
    ("RECALL * WHERE caused_by = bogus('a')", "unknown function 'bogus'", 1, 28),
    ("RECALL * WHERE current_project()", "gives a value", 1, 16),
    ("RECALL * WHERE project = semantic_match('x')", "is a condition, not a value", 1, 26),
    ("RECALL * WHERE semantic_match()", "takes 1 or 2 argument(s), got 0", 1, 16),
    ("RECALL * WHERE semantic_match('')", "non-empty string", 1, 31),
    ("RECALL * WHERE semantic_match('x', 1.5)", "threshold", 1, 36),
    ("RECALL * WHERE semantic_match(3)", "non-empty string", 1, 31),
    ("RECALL * WHERE current_project('x') = project", "unexpected", 1, 37),
    ("RECALL * WHERE project = current_project('x')", "takes 0 argument(s)", 1, 26),
    ("RECALL * WHERE session_id(['a']) ", "gives a value", 1, 16),
    ("RECALL * WHERE type = KT-FOO", "'KT-FOO' is not a type", 1, 23),
    ("RECALL * WHERE lifecycle IN [active, gone]", "'gone' is not a lifecycle", 1, 38),
    ("RECALL * WHERE predicate = 'requires'", "is not a predicate", 1, 28),
    ("RECALL * WHERE confidence > 'high'", "confidence is a number", 1, 29),
    ("RECALL * WHERE confidence = true", "confidence is a number", 1, 29),
    ("RECALL * WHERE subject > 'a'", "takes = and !=", 1, 24),
    ("RECALL * WHERE tags < 'a'", "takes = and !=", 1, 21),
    ("RECALL * WHERE tags = ['a']", "use tags IN [...]", 1, 23),
    ("RECALL * WHERE type CONTAINS 'K'", "CONTAINS needs a list or text field", 1, 21),
    ("RECALL * WHERE tags CONTAINS null", "not null", 1, 30),
    ("RECALL * WHERE weight > null", "null only compares", 1, 25),
    ("RECALL * WHERE created_after > '2026-01-01'", "write created_after = 'YYYY-MM-DD'", 1, 30),
    ("RECALL * WHERE created_after = 'yesterday'", "ISO-8601 date", 1, 32),
    ("RECALL * WHERE created_at IN ['2026-01-01']", "cannot be used with IN", 1, 27),
    ("RECALL * WHERE type IN [[KT-FACT]]", "single value", 1, 25),
    ("RECALL * WHERE tags IN [session_id('S')]", "functions cannot appear", 1, 25),
    ("RECALL * WHERE weight > (SELECT cluster_id FROM clusters)", "subquery", 1, 25),
    ("RECALL * WHERE cluster_id = (SELECT project FROM clusters)", "SELECT cluster_id", 1, 37),
    ("RECALL * WHERE cluster_id = (SELECT cluster_id FROM records)", "FROM clusters", 1, 53),
    ("RECALL * WHERE cluster_id = (SELECT cluster_id FROM clusters WHERE weight > 1)",
     "'weight' is not a field of clusters", 1, 68),
    ("RECALL * WHERE cluster_id = (SELECT cluster_id FROM clusters LIMIT 0)",
     "subquery LIMIT", 1, 68),
    ("RECALL * WHERE cluster_id = (SELECT cluster_id FROM clusters WHERE cluster_id = "
     "(SELECT cluster_id FROM clusters))", "subqueries do not nest", 1, 68),
    ("RECALL * WHERE subject = '\ud800'", "lone UTF-16 surrogate", 1, 27),
    ("RECALL *\nWHERE subject = 'a\udc00'", "lone UTF-16 surrogate", 2, 19),
    ("RECALL * LIMIT tokens(0)",
     "LIMIT tokens(N) needs a whole number from 1 to 10,000,000", 1, 23),
    ("RECALL * LIMIT tokens(-5)", "LIMIT tokens(N)", 1, 23),
    ("RECALL * LIMIT tokens(10000001)", "LIMIT tokens(N)", 1, 23),
    ("RECALL * LIMIT rows(10001)", "1 to 10,000", 1, 21),
    ("RECALL * LIMIT rows(2.5)", "whole number", 1, 21),
    ("RECALL * LIMIT 0", "LIMIT needs", 1, 16),
    ("RECALL * LIMIT bytes(10)", "tokens(N) or rows(N)", 1, 16),
    ("RECALL * LIMIT rows(99999999999999999999999999)", "integer out of range", 1, 21),
    ("RECALL * ORDER BY tags", "no order", 1, 19),
    ("RECALL * ORDER BY colour", "unknown field 'colour'", 1, 19),
    ("RECALL * ORDER BY weight, weight DESC", "twice", 1, 27),
    ("RECALL colour", "unknown field 'colour' in RECALL", 1, 8),
    ("RECALL subject, subject", "listed twice", 1, 17),
    ("RECALL * WHERE", "unexpected end of query", 1, 15),
    ("RECALL * WHERE (weight > 1", "unexpected end of query", 1, 27),
    ("RECALL * WHERE weight > 1)", "unexpected ')'", 1, 26),
    ("RECALL * WHERE weight >> 1", "unexpected '>'", 1, 24),
    ("RECALL * WHERE weight = 1 AND", "unexpected end of query", 1, 30),
    ("RECALL * WHERE subject = 'abc", "unterminated string", 1, 26),
    ("RECALL * WHERE subject = 'a\\qb'", "unknown escape '\\q'", 1, 28),
    ("RECALL * WHERE subject = '\\u12'", "four hex digits", 1, 27),
    ("RECALL * WHERE subject = '\\ud800'", "lone UTF-16 surrogate", 1, 27),
    ("RECALL * WHERE weight = 1e999", "number out of range", 1, 25),
    ("RECALL * WHERE weight = 1; RECALL *", "unexpected 'RECALL'", 1, 28),
    ("RECALL * WHERE weight = 1 -- comment", "unexpected character '-'", 1, 27),
    ("SELECT * FROM records", "unexpected 'SELECT'", 1, 1),
    ("DROP TABLE records", "unexpected 'DROP'", 1, 1),
    ("REMEMBER", "unexpected end of query", 1, 9),
    ("REMEMBER {\"a\": 1, \"a\": 2}", "duplicate key 'a'", 1, 19),
    ("REMEMBER {\"a\": KT-FACT}", "unexpected character '-'", 1, 18),
    ("REMEMBER {\"a\": yes}", "bare word 'yes'", 1, 16),
    ("REMEMBER [1, 2]", "unexpected '['", 1, 10),
    ("FORGET K-123", "knowledge_id 'K-' + 64", 1, 8),
    ("FORGET 'nope' REASON 'x'", "knowledge_id", 1, 8),
    ("FORGET WHERE", "unexpected end of query", 1, 13),
    (f"FORGET {KID} REASON stale", "unexpected 'stale'", 1, 82),
    ("DISTILL FROM RECALL * INTO KT-NOPE", "DISTILL INTO needs a knowledge type", 1, 28),
    ("DISTILL FROM RECALL * INTO KT-PRINCIPLE WITH 1.2", "within 0..1", 1, 46),
    ("DISTILL FROM RECALL * INTO KT-PRINCIPLE WITH threshold 0.5", "confidence_threshold", 1, 46),
    ("DISTILL RECALL *", "unexpected 'RECALL'", 1, 9),
    ("   ", "empty query", None, None),
    ("", "empty query", None, None),
]


@pytest.mark.parametrize(("text", "fragment", "line", "column"), NEGATIVE,
                         ids=[n[0][:60] for n in NEGATIVE])
def test_rejected_with_a_located_reason(
    text: str, fragment: str, line: int | None, column: int | None
) -> None:
    with pytest.raises(AmqlSyntaxError) as info:
        parse(text)
    err = info.value
    assert fragment in err.reason
    assert (err.line, err.column) == (line, column)
    assert err.status == Status.BAD_REQUEST
    assert isinstance(err, ValidationError)


def test_nesting_is_capped_not_a_recursion_error() -> None:
    with pytest.raises(AmqlSyntaxError, match="nested more than 48 levels"):
        parse("RECALL * WHERE " + "NOT " * 10_000 + "weight > 1")
    with pytest.raises(AmqlSyntaxError, match="nested more than 48 levels"):
        parse("REMEMBER " + '{"a":' * 5_000 + "1" + "}" * 5_000)
    with pytest.raises(AmqlSyntaxError, match="nested more than 48 levels"):
        parse("REMEMBER {\"a\": " + "[" * 5_000 + "]" * 5_000 + "}")
    # Redundant parentheses add no tree depth: accepted however many.
    assert w("(" * 5_000 + "weight > 1" + ")" * 5_000) == Compare("weight", CompareOp.GT, 1)
    assert parse("RECALL * WHERE " + "NOT " * 40 + "weight > 1") is not None


def test_size_caps() -> None:
    with pytest.raises(AmqlSyntaxError, match="longer than"):
        parse("RECALL * WHERE subject = '" + "x" * 300_000 + "'")
    with pytest.raises(AmqlSyntaxError, match="at most 1000 values"):
        parse("RECALL * WHERE tags IN [" + ", ".join(["'a'"] * 1001) + "]")
    with pytest.raises(AmqlSyntaxError, match="at most 8 keys"):
        parse("RECALL * ORDER BY " + ", ".join(["weight"] * 9))


def test_a_non_string_is_a_syntax_error() -> None:
    with pytest.raises(AmqlSyntaxError, match="is a string, not bytes"):
        parse(b"RECALL *")  # type: ignore[arg-type]


def test_nodes_built_in_code_are_validated_too() -> None:
    with pytest.raises(AmqlSyntaxError):
        Limit(LimitUnit.ROWS, 0)
    with pytest.raises(AmqlSyntaxError):
        Limit(LimitUnit.TOKENS, 10_000_001)
    with pytest.raises(AmqlSyntaxError):
        And((Compare("weight", EQ, 1),))
    with pytest.raises(AmqlSyntaxError):
        Forget()
    with pytest.raises(AmqlSyntaxError):
        Forget(knowledge_id=KID, where=Compare("weight", EQ, 1))
    with pytest.raises(AmqlSyntaxError):
        Distill(Recall(), "KT-PRINCIPLE", 2.0)
    err = AmqlSyntaxError("bare")
    assert str(err) == "amql: bare"
    assert (err.line, err.column) == (None, None)


DOCS = Path(__file__).parents[2] / "docs" / "amql.md"


def test_examples_in_the_docs_parse() -> None:
    text = DOCS.read_text(encoding="utf-8").split("## Examples", 1)[1]
    lines = [ln for ln in text.splitlines()
             if ln.split(" ", 1)[0] in ("RECALL", "REMEMBER", "FORGET", "DISTILL")]
    assert len(lines) >= 10
    for line in lines:
        parse(line.replace("K-3fa9…(64 hex)", KID))
