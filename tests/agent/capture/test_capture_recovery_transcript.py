"""R5 recovery plans, R6 Found/NotFound, and the JSONL transcript reader."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from amcp.agent.capture import (
    CaptureEngine,
    Category,
    Found,
    NotFound,
    TranscriptError,
    parse_lines,
    read_transcript,
    recovery_plan,
    resolve_recall,
)


def test_recovery_plan_lists_snapshot_high_importance_and_profile() -> None:
    plan = recovery_plan("How should we index the orders table for the migration?")
    purposes = [q.purpose for q in plan.queries]
    assert purposes[:3] == ["profile", "topic_snapshot", "high_importance"]
    assert not plan.trivial and "migration" in plan.keywords
    high = plan.queries[2]
    assert high.min_importance == 4


def test_recovery_plan_targets_asked_category_zh() -> None:
    plan = recovery_plan("我的数据库密码是什么？")
    cred = [q for q in plan.queries if q.purpose == f"category:{Category.CREDENTIAL.value}"]
    assert cred and cred[0].include_sensitive and plan.lang == "zh"


def test_trivial_turn_only_recalls_profile() -> None:
    plan = recovery_plan("ok thanks")
    assert plan.trivial and [q.purpose for q in plan.queries] == ["profile"]


@dataclass(frozen=True)
class Hit:
    text: str
    relevance: float | None


def test_resolve_recall_found_and_not_found() -> None:
    found = resolve_recall("my name", [Hit("a", 0.2), Hit("b", 0.9), Hit("c", 0.5)], threshold=0.4)
    assert isinstance(found, Found) and [h.relevance for h in found.hits] == [0.9, 0.5]
    nf = resolve_recall("what is my dog's name?", [Hit("a", 0.1)], threshold=0.4)
    assert isinstance(nf, NotFound) and nf.best_score == 0.1 and "won't guess" in nf.answer
    empty = resolve_recall("我的狗叫什么？", [])
    assert isinstance(empty, NotFound) and empty.best_score is None and "没有" in empty.answer


def test_reader_accepts_plain_and_claude_code_lines(tmp_path: Path) -> None:
    lines = [
        {"role": "user", "content": "I prefer tabs over spaces."},
        {"type": "summary", "summary": "earlier session"},
        {"type": "user", "message": {"role": "user", "content": [
            {"type": "text", "text": "My name is Priya Raman."}]}},
        {"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "x", "content": "I prefer spaces"}]}},
        {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "text", "text": "Noted."}, {"type": "tool_use", "name": "Bash", "input": {}}]}},
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n", "utf-8")
    turns = list(read_transcript(path))
    assert [(t.role, t.content, t.index) for t in turns] == [
        ("user", "I prefer tabs over spaces.", 0),
        ("user", "My name is Priya Raman.", 1),
        ("assistant", "Noted.", 2),
    ]
    cats = [o.category for o in CaptureEngine().process_transcript(turns) if hasattr(o, "category")]
    assert cats == [Category.PREFERENCE, Category.IDENTITY]


@pytest.mark.parametrize(("lines", "lineno", "needle"), [
    (['{"role": "user", "content": "hi"}', "{not json"], 2, "invalid JSON"),
    (["[1, 2]"], 1, "JSON object"),
    (['{"role": "user"}'], 1, "content"),
    (['{"content": "hi"}'], 1, "role"),
    (['', '{"role": "user", "content": 5}'], 2, "string or a list"),
    (['{"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": 3}]}}'], 1,
     "text"),
])
def test_reader_names_the_bad_line(lines: list[str], lineno: int, needle: str) -> None:
    with pytest.raises(TranscriptError) as err:
        list(parse_lines(lines))
    assert err.value.line == lineno
    assert f"line {lineno}" in str(err.value) and needle in str(err.value)


def test_reader_rejects_non_utf8(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"role": "user", "content": "ok"}\n{"role": "user", "content": "\xff"}\n')
    with pytest.raises(TranscriptError) as err:
        list(read_transcript(path))
    assert err.value.line == 2


@pytest.mark.model
def test_a_correct_hit_is_found_with_the_packaged_model(tmp_path: Path) -> None:
    """Issue 20: a correct hit with fused score 0.21 came back as NotFound (the 0.35
    threshold was compared with the rank-fused score, not with a relevance)."""
    from amcp.memory import Memory

    with Memory(tmp_path / "m.db", witness_dirs=[tmp_path / "w"]) as mem:
        kid = mem.remember("Alice prefers tabs over spaces in Python code", scope="u").knowledge_id
        mem.remember("The payments service deploys every Thursday", scope="u")
        hits = mem.recall("what indentation does Alice like?", scope="u").hits
        assert hits[0].score < 0.35  # a rank score: it says "first", not "relevant"
        found = resolve_recall("what indentation does Alice like?", hits)
        assert isinstance(found, Found) and found.best.knowledge_id == kid  # type: ignore[attr-defined]
        nothing = resolve_recall("how tall is Mount Kilimanjaro?",
                                 mem.recall("how tall is Mount Kilimanjaro?", scope="u").hits)
        assert isinstance(nothing, NotFound)
