"""The compiler-style message: ``amql:LINE:COL: reason``, the source line, a caret."""

from __future__ import annotations

import pytest

from amcp.amql import AmqlSyntaxError, parse


def message(text: str) -> str:
    with pytest.raises(AmqlSyntaxError) as info:
        parse(text)
    return str(info.value)


def test_single_line_message_has_position_line_and_caret() -> None:
    assert message("RECALL * WHERE colour = 'red'") == (
        "amql:1:16: unknown field 'colour' (known: access_recency, caused_by, cluster_id, "
        "confidence, created_after, created_at, created_before, decay_status, knowledge_id, "
        "lifecycle, object, origin, predicate, project, project_scope, referenced_by, "
        "stated_confidence, subject, tags, trust_tier, type, verification, weight)\n"
        "  RECALL * WHERE colour = 'red'\n"
        "                 ^"
    )


def test_multi_line_query_shows_the_offending_line() -> None:
    text = "RECALL *\nWHERE type = KT-FACT\n  AND weight >> 2\nLIMIT rows(5)"
    lines = message(text).split("\n")
    assert lines[0].startswith("amql:3:15: unexpected '>'; expected ")
    assert lines[1] == "    AND weight >> 2"
    assert lines[2] == "  " + " " * 14 + "^"  # column 15, under the second '>'


def test_caret_accounts_for_wide_characters() -> None:
    lines = message("RECALL * WHERE semantic_match('止损策略') AND colour = 1").split("\n")
    assert lines[0].startswith("amql:1:43: unknown field 'colour'")
    # Four CJK characters take eight cells: the caret sits under 'c' on a terminal.
    assert lines[2] == " " * (2 + 42 + 4) + "^"


def test_tabs_and_control_characters_do_not_shift_the_caret() -> None:
    lines = message("RECALL\t*\tWHERE\tcolour = 1").split("\n")
    assert lines[0].startswith("amql:1:16:")
    assert lines[1] == "  RECALL * WHERE colour = 1"
    assert lines[2] == "  " + " " * 15 + "^"


def test_long_lines_are_cut_around_the_column() -> None:
    text = "RECALL * WHERE " + "weight > 1 AND " * 500 + "colour = 1"
    msg = message(text)
    first, excerpt, caret = msg.split("\n")
    assert first.startswith(f"amql:1:{len(text) - len('colour = 1') + 1}: unknown field")
    assert excerpt.startswith("  ...")
    assert len(excerpt) < 120
    assert excerpt[caret.index("^"):].startswith("colour")


def test_end_of_query_points_past_the_last_character() -> None:
    lines = message("RECALL * WHERE weight >   \n\n").split("\n")
    assert lines[0].startswith("amql:1:24: unexpected end of query")
    assert lines[2] == "  " + " " * 23 + "^"


def test_errors_in_a_string_point_inside_it_across_lines() -> None:
    err = None
    try:
        parse("RECALL * WHERE subject = 'line one\nline \\x two'")
    except AmqlSyntaxError as exc:
        err = exc
    assert err is not None
    assert (err.line, err.column) == (2, 6)
    assert str(err).split("\n")[1:] == ["  line \\x two'", "       ^"]
