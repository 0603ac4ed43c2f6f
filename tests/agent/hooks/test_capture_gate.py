"""The prompt hook's capture gate: its copies equal the engine's patterns, it never says
"no" where the engine would capture, and the hook spawns no capture for a plain question."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.agent.hooks.kit import config, git_project, payload, seed

from amcp.agent.capture import CaptureConfig, CaptureEngine, credentials, rules, text
from amcp.agent.hooks import capture_gate, claude_code
from amcp.agent.hooks.capture_gate import may_capture


def captures(prompt: str) -> list[Any]:
    """What the detached capture's engine finds in one user prompt (as for_backend sets)."""
    engine = CaptureEngine(CaptureConfig(snapshots=False, checkpoint_every=0))
    return engine.process({"role": "user", "content": prompt})


def test_the_copied_patterns_are_the_engines() -> None:
    assert capture_gate.CREDENTIAL_HINTS == credentials._HINT
    assert capture_gate.QUOTE_CHARS == text._QUOTE_CHARS
    assert text._SENTENCE_END.pattern == capture_gate.SENTENCE_END
    assert text._SENTENCE_END.flags & ~re.UNICODE == 0
    for ours, theirs in ((capture_gate.EN_POLITE, rules._EN_POLITE),
                         (capture_gate.EN_QUESTION_START, rules._EN_QUESTION_START)):
        assert ours == theirs.pattern
        assert theirs.flags & ~re.UNICODE == re.IGNORECASE
    assert CaptureConfig().max_turn_chars >= capture_gate.MAX_GATED_CHARS


QUESTIONS = [
    "why does the planner depend on the cache when the index changes?",
    "How do I run the tests",
    "What's the difference between the two stores? Which one is faster?",
    "is the lexical index rebuilt on migrate?\nand the vectors?",
    "where is the node started",
]
MAYBE = [
    "From now on, always use pytest -q.",
    "I prefer tabs over spaces",
    "why is it slow? I decided to move the cache to redis.",
    "Can you always run ruff before committing?",
    "my password is Hunter2-xyz",
    "what is `rm -rf` doing here?",
    'why does "we use postgres" appear?',
    "以后都用中文回答",
    "why " * 30_000 + "?",
]


@pytest.mark.parametrize("prompt", QUESTIONS)
def test_plain_questions_are_refused(prompt: str) -> None:
    assert not may_capture(prompt)
    assert captures(prompt) == []


@pytest.mark.parametrize("prompt", MAYBE)
def test_anything_else_is_left_to_the_engine(prompt: str) -> None:
    assert may_capture(prompt)


def test_the_engine_does_capture_some_of_what_the_gate_lets_through() -> None:
    """So the property below could fail: the gate's "maybe" prompts are real captures."""
    assert captures("From now on, always use pytest -q.")
    assert captures("my password is Hunter2-xyz")


FRAGMENTS = [
    "why", "what", "how", "is", "does", "can you", "please", "I", "we", "my", "always",
    "never", "prefer", "decided", "use", "the", "planner", "cache", "index", "tabs", "ruff",
    "from now on", "remind me", "deployed", "to", "on", "redis", "postgres", "password",
    "key", "token", "hunter2", "sk-abc", "?", ".", "!", ";", ",", "\n", "I'm", "we're",
    "let's", "switch", "moved", "live in", "Berlin", "years old", "42", "name is", "Bob",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=14))
def test_the_gate_never_refuses_what_the_engine_captures(words: list[str]) -> None:
    prompt = " ".join(words)
    if not may_capture(prompt):
        assert captures(prompt) == [], prompt


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=120))
def test_the_gate_on_arbitrary_text(prompt: str) -> None:
    if not may_capture(prompt):
        assert captures(prompt) == [], prompt


def _spawned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prompt: str) -> list[list[str]]:
    home = tmp_path / "home"
    if not (home / "memory.db").exists():
        seed(home)
    proj = git_project(tmp_path)
    calls: list[list[str]] = []
    monkeypatch.setattr(claude_code, "spawn_detached",
                        lambda argv, stdin: calls.append(list(argv)))
    cfg = config(home, capture_mode="background")
    out = claude_code.run_hook(
        "prompt", json.dumps(payload("UserPromptSubmit", proj, prompt=prompt)), cfg)
    assert "skipped" not in out
    return calls


def test_prompt_hook_spawns_no_capture_for_a_question(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    assert _spawned(tmp_path, monkeypatch, "why do the integration tests need postgres?") == []


def test_prompt_hook_still_spawns_the_capture_for_a_statement(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _spawned(tmp_path, monkeypatch, "From now on, always use pytest -q.")
    assert len(calls) == 1 and calls[0][-1] == "capture-prompt"
