"""The stop hook records outcomes from the agent's ## Recall manifest and Outcome: markers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.agent.hooks.kit import config, git_project, payload, seed

from amcp.agent.hooks.claude_code import run_hook
from amcp.agent.hooks.ledger import LedgerStore
from amcp.agent.hooks.outcomes import plan, resolve
from amcp.memory import Memory


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    return git_project(tmp_path)


def weights(home: Path, *ids: str) -> list[float]:
    with Memory(home / "memory.db", embedder="hashing") as mem:
        return [mem.get(i).state.weight for i in ids]


def start(home: Path, proj: Path) -> dict[str, str]:
    ids = seed(home)
    out = run_hook("session-start", json.dumps(payload("SessionStart", proj)), config(home))
    assert ids["ruff"][:14] in out and ids["db"][:14] in out
    return ids


def test_plan_parses_manifest_and_markers() -> None:
    text = (
        "Done.\n\n## Recall\n"
        "- **Surfaced:** K-1a2b3c4d5e6f (used → success), K-2b3c4d5e6f7a (unused),\n"
        "  K-3c4d5e6f7a8b (used -> failure), K-4d5e6f7a8b9c (used)\n"
        "- **Capture:** declined — \"trivial\"\n\n## Next\nOutcome: success\n"
        "Outcome: neutral K-5e6f7a8b9c0d\n"
    )
    p = plan(text)
    assert p.rounds["success"] == ["K-1a2b3c4d5e6f", "K-4d5e6f7a8b9c"]
    assert p.rounds["failure"] == ["K-3c4d5e6f7a8b"]
    assert p.rounds["neutral"] == ["K-5e6f7a8b9c0d"]
    assert p.unused == ["K-2b3c4d5e6f7a"] and p.problems == []


def test_unknown_marker_is_reported_not_applied() -> None:
    p = plan("## Recall\n- **Surfaced:** K-1a2b3c4d5e6f (used → great)\nOutcome: maybe\n")
    assert p.empty
    assert len(p.problems) == 2 and "'Outcome: maybe'" in p.problems[1]


def test_resolve_only_against_shown_ids() -> None:
    shown = ["K-ab" + "a" * 62, "K-ab" + "c" * 62, "K-" + "c" * 64]
    ids, problems = resolve(["K-cccccc", "K-ab", "K-dddddd"], shown)
    assert ids == ["K-" + "c" * 64]
    assert any("several" in p for p in problems) and any("not shown" in p for p in problems)


def test_stop_credits_used_memories_only(home: Path, proj: Path) -> None:
    ids = start(home, proj)
    reply = (f"AMCP-LEARN: ruff must run before mypy here\n\n## Recall\n"
             f"- **Surfaced:** {ids['ruff'][:14]} (used → success), "
             f"{ids['db'][:14]} (used → failure), {ids['tabs'][:14]} (unused)\n"
             f"- **Capture:** stored\n")
    out = json.loads(run_hook("stop", json.dumps(payload("Stop", proj,
                                                          last_assistant_message=reply)),
                              config(home)))
    assert "outcome success recorded" in out["systemMessage"]
    assert "stored the session's learning" in out["systemMessage"]
    ruff, db, tabs = weights(home, ids["ruff"], ids["db"], ids["tabs"])
    assert ruff == pytest.approx(0.5 * 0.98 + 0.30)  # KT-PRINCIPLE → pattern decay
    assert db == pytest.approx(0.5 * 0.95 - 0.20)
    assert tabs == 0.5  # unused: nothing recorded
    ledger = LedgerStore(home / "ledger").load("s-1")
    assert set(ledger.credited) == {ids["ruff"], ids["db"]}
    # The same manifest again (a repeated Stop) does not count twice.
    run_hook("stop", json.dumps(payload("Stop", proj, last_assistant_message=reply)),
             config(home))
    assert weights(home, ids["ruff"])[0] == pytest.approx(0.5 * 0.98 + 0.30)


def test_stop_refuses_ids_not_shown_and_unknown_markers(home: Path, proj: Path) -> None:
    ids = start(home, proj)
    reply = (f"AMCP-DECLINE: nothing new\n## Recall\n- **Surfaced:** {ids['other'][:14]} "
             "(used → success)\nOutcome: sideways\n")
    out = json.loads(run_hook("stop", json.dumps(payload("Stop", proj,
                                                          last_assistant_message=reply)),
                              config(home)))
    assert "not shown in this session" in out["systemMessage"]
    assert "'Outcome: sideways'" in out["systemMessage"]
    assert weights(home, ids["other"]) == [0.5]
    assert LedgerStore(home / "ledger").load("s-1").stop_outcome == "declined"
