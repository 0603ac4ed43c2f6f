"""The parse contract under random input: a Statement or AmqlSyntaxError, nothing else."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from amcp.amql import AmqlSyntaxError, Recall, Statement, parse
from amcp.amql.evaluate import MappingView, evaluate

FUZZ = settings(max_examples=200, deadline=None)


def parse_or_syntax_error(text: str) -> Statement | None:
    error: AmqlSyntaxError | None = None
    try:
        return parse(text)
    except AmqlSyntaxError as err:
        error = err
    # The error must be well-formed too: a position inside the text, or none at all.
    assert error.reason
    if error.line is not None:
        assert 1 <= error.line <= text.count("\n") + 1
        assert error.column is not None
        assert error.column >= 1
    assert str(error).startswith("amql:")
    return None


@FUZZ
@given(st.text(max_size=300))
def test_arbitrary_text(text: str) -> None:
    parse_or_syntax_error(text)


@FUZZ
@given(st.text(alphabet=st.characters(exclude_categories=()), max_size=100))
def test_arbitrary_text_with_surrogates(text: str) -> None:
    parse_or_syntax_error("RECALL * WHERE subject = '" + text + "'")


@FUZZ
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=200).map("RECALL * WHERE ".__add__))
def test_arbitrary_text_after_a_valid_prefix(text: str) -> None:
    parse_or_syntax_error(text)


# Pieces of real queries, glued in random order: exercises every parser state and most
# validation paths, far more than uniform text does.
TOKENS = [
    "RECALL", "REMEMBER", "FORGET", "DISTILL", "FROM", "INTO", "WITH", "REASON", "WHERE",
    "ORDER", "BY", "ASC", "DESC", "LIMIT", "AND", "OR", "NOT", "IN", "CONTAINS", "SELECT",
    "tokens", "rows", "(", ")", "[", "]", "{", "}", ",", ":", ";", "*", "=", "!=", "<", "<=",
    ">", ">=", "type", "confidence", "project", "project_scope", "tags", "subject",
    "predicate", "object", "created_after", "created_before", "created_at", "decay_status",
    "lifecycle", "caused_by", "referenced_by", "cluster_id", "knowledge_id",
    "access_recency", "weight", "clusters", "semantic_match", "session_id", "qef_signal_id",
    "current_project", "centroid_match", "confidence_threshold", "KT-FACT", "KT-PRINCIPLE",
    "KT-NOPE", "active", "true", "false", "null", "0", "1", "-1", "0.5", "1e999", "20",
    "10000001", "99999999999999999999999", "'x'", '"y"', "'2026-01-01'", "'\\u00e9'",
    "'\\ud800'", "'\\q'", "'unterminated", '"', "'", "\\", "--", "#", "colour", "K-" + "a" * 64,
    "'止损'", "\t", "\n", " ",
]


@FUZZ
@given(st.lists(st.sampled_from(TOKENS), max_size=40))
def test_grammar_shaped_token_soup(tokens: list[str]) -> None:
    parse_or_syntax_error(" ".join(tokens))


@FUZZ
@given(st.lists(st.sampled_from(TOKENS), max_size=30))
def test_token_soup_after_where(tokens: list[str]) -> None:
    parse_or_syntax_error("RECALL * WHERE " + " ".join(tokens))


# Valid conditions, built from the grammar: they must parse, and evaluating them against
# any record must give a bool.
LEAVES = st.sampled_from([
    "confidence > 0.5", "weight <= 2", "access_recency >= 0", "type = KT-FACT",
    "type IN [KT-FACT, KT-PITFALL]", "lifecycle != archived", "tags CONTAINS 'a'",
    "subject CONTAINS 'OKX'", "project = current_project()", "project_scope = '*'",
    "caused_by = session_id('S-1')", "referenced_by = qef_signal_id('Q-1')",
    "created_after = '2026-01-01'", "created_before = '2027-01-01T00:00:00Z'",
    "created_at < '2026-06-01'", "semantic_match('x')", "semantic_match('x', 0.2)",
    "decay_status != 'expired'", "knowledge_id = null", "predicate NOT IN [CAUSES]",
    "cluster_id = (SELECT cluster_id FROM clusters WHERE centroid_match('r') LIMIT 1)",
])


def conditions() -> st.SearchStrategy[str]:
    return st.recursive(
        LEAVES,
        lambda inner: st.one_of(
            st.tuples(inner, inner).map(lambda ab: f"{ab[0]} AND {ab[1]}"),
            st.tuples(inner, inner).map(lambda ab: f"({ab[0]}) OR ({ab[1]})"),
            inner.map(lambda a: f"NOT ({a})"),
        ),
        max_leaves=12,
    )


RECORDS = st.fixed_dictionaries(
    {},
    optional={
        "confidence": st.one_of(st.floats(0, 1), st.none(), st.text(max_size=3)),
        "weight": st.floats(allow_nan=True),
        "type": st.sampled_from(["KT-FACT", "KT-PITFALL", "KT-PATTERN"]),
        "tags": st.lists(st.sampled_from(["a", "b"]), max_size=3),
        "subject": st.text(max_size=10),
        "project": st.sampled_from(["P", "Q"]),
        "project_scope": st.lists(st.sampled_from(["*", "P"]), max_size=2),
        "caused_by": st.lists(st.sampled_from(["K-1", "K-2"]), max_size=2),
        "created_at": st.one_of(
            st.datetimes(min_value=datetime(2025, 1, 1), max_value=datetime(2028, 1, 1),
                         timezones=st.just(UTC)),
            st.sampled_from(["2026-03-01T00:00:00Z", "garbage", ""]),
        ),
        "lifecycle": st.sampled_from(["active", "archived"]),
        "cluster_id": st.sampled_from(["C1", "C2"]),
    },
)


@settings(max_examples=150, deadline=None)
@given(conditions(), RECORDS, st.floats(0, 1) | st.booleans() | st.none())
def test_generated_valid_conditions_parse_and_evaluate(
    cond: str, record: dict[str, object], score: float | bool | None
) -> None:
    stmt = parse(f"RECALL * WHERE {cond} LIMIT rows(10)")
    assert isinstance(stmt, Recall)
    assert stmt.where is not None
    view = MappingView(
        record,
        functions={
            "semantic_match": lambda *a: score,
            "current_project": lambda: "P",
            "session_id": lambda s: ["K-1"],
            "qef_signal_id": lambda s: "K-2",
        },
        clusters=lambda q: ["C1"],
    )
    assert evaluate(stmt.where, view) in (True, False)
