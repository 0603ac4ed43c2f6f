"""The GitHub-issues backend against a local stand-in whose every request and response is
validated against GitHub's published OpenAPI description (@octokit/openapi, from npm)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.brain.ghkit import TOKEN, FakeGitHub, octokit_spec

from amcp.brain import amp
from amcp.brain.errors import MissingToken, RemoteError
from amcp.brain.ghrest import GitHub
from amcp.brain.github import Mirror, post_outcome, pull, push
from amcp.errors import ValidationError
from amcp.memory import Memory


@pytest.fixture(scope="session")
def spec() -> dict[str, Any]:
    return octokit_spec()


@pytest.fixture
def fake(spec: dict[str, Any]) -> Iterator[FakeGitHub]:
    server = FakeGitHub(spec)
    yield server
    server.close()
    assert server.errors == [], server.errors  # the stand-in never drifted from the spec
    assert server.validated > 0


@pytest.fixture
def gh(fake: FakeGitHub) -> Iterator[GitHub]:
    sleeps: list[float] = []
    client = GitHub(fake.repo, TOKEN, base_url=fake.base, sleep=sleeps.append)
    yield client
    client.close()


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    m = Memory(tmp_path / "s" / "memory.db", embedder=None, check_embedder=False)
    yield m
    m.close()


def test_title_template_is_validated() -> None:
    title = amp.title_for("amcp", "project-amcp", "learning", "facts",
                          "Deploys [really] happen on Thursday and that is " + "x" * 80)
    parsed = amp.parse_title(title)
    assert parsed.kind == "facts" and len(parsed.short) < 60 and "[" not in parsed.short
    for bad, why in [
        ("Deploys happen on Thursday", "has no"),
        ("[FROM:a→b][REGION:r][PLACE:p][TYPE:fact] x", "is not one of"),
        ("[FROM:a b→c][REGION:r][PLACE:p][TYPE:facts] x", "must come first"),
        ("[FROM:a→b][REGION:r][PLACE:p][TYPE:facts]x", "does not follow"),
        ("[FROM:a→b][REGION:r][PLACE:p][TYPE:facts] " + "y" * 60, "does not follow"),
    ]:
        with pytest.raises(ValidationError, match=why):
            amp.parse_title(bad)
    with pytest.raises(ValidationError):
        amp.title_for("bad agent", "r", "p", "facts", "text")  # never sent


def test_markers() -> None:
    assert amp.outcome_of("## Reply Metadata\n- **Outcome:** success\n") == ("success", None)
    assert amp.outcome_of("Outcome: failure") == ("failure", None)
    assert amp.outcome_of("just a reply") == (None, None)
    result, problem = amp.outcome_of("- **Outcome:** great")
    assert result is None and problem and "unknown marker" in problem
    assert amp.supersedes({"Supersedes": "#12, #13 — replaced by #45"}) == [12, 13]
    assert amp.supersedes({"Supersedes": "#12 — replaced by #45"}) == [12]


def test_push_creates_issues_labels_and_dedups(mem: Memory, gh: GitHub,
                                               fake: FakeGitHub) -> None:
    a = mem.remember("Deploys happen on Thursday", scope="project:amcp", kind="learning")
    mem.remember("Use rebase on feature branches", scope="project:amcp", kind="pattern",
                 type="KT-PATTERN", sample_size=2)
    mem.remember("secret token xyz", scope="project:amcp", sensitive=True)
    rep = push(mem, gh, agent="amcp")
    assert rep.created == [1, 2] and rep.problems == []
    first = fake.issues[0]
    assert amp.parse_title(first["title"]).region == "project-amcp"
    assert {lb["name"] for lb in first["labels"]} == {"from:amcp", "type:facts", "unindexed"}
    assert amp.metadata(first["body"])["AMCP-ID"] == a.knowledge_id
    assert {lb["name"] for lb in fake.labels} >= {"from:amcp", "type:facts", "type:pattern",
                                                  "unindexed"}
    assert all("secret" not in i["body"] for i in fake.issues)
    assert push(mem, gh).created == []  # idempotent
    # Another machine with the same memory: the live state has it, nothing is posted.
    Mirror().save(mem, gh.repo)
    again = push(mem, gh)
    assert again.created == [] and sorted(again.deduplicated) == [1, 2]
    assert len(fake.issues) == 2
    assert fake.requests("GET", r"/issues$") >= 4  # a live refresh before every write


def test_supersede_is_posted_with_supersedes_line(mem: Memory, gh: GitHub,
                                                  fake: FakeGitHub) -> None:
    a = mem.remember("Deploys happen on Thursday", scope="project:amcp")
    push(mem, gh)
    mem.supersede(a.knowledge_id, "Deploys happen on Friday")
    rep = push(mem, gh)
    assert rep.created == [2]
    assert amp.supersedes(amp.metadata(fake.issues[1]["body"])) == [1]


def test_pull_other_agents_issues_outcomes_and_supersedes(mem: Memory, gh: GitHub,
                                                          fake: FakeGitHub) -> None:
    meta = {"From": "codex", "Type": "facts"}
    fake.add_issue("[FROM:codex→all][REGION:ProjectX][PLACE:config][TYPE:facts] Token "
                   "format is v2", amp.body_for(meta, "The token format is v2."))
    fake.add_issue("Untagged note", "no template here")
    rep = pull(mem, gh)
    assert len(rep.remembered) == 1 and "#2" in rep.problems[0]
    kid = rep.remembered[0]
    rec = mem.get(kid).record
    assert rec is not None and rec.text == "The token format is v2."
    assert rec.meta.project_scope == ("amp:ProjectX",) and rec.kind == "facts"
    fake.add_comment(1, "## Reply Metadata\n- **Outcome:** success\n\nworked")
    fake.add_comment(1, "Outcome: failure")
    fake.add_comment(1, "Outcome: perhaps")
    fake.add_comment(1, "a plain reply")
    rep = pull(mem, gh)
    assert rep.outcomes == [(kid, "success"), (kid, "failure")]
    assert any("Outcome: perhaps" in p for p in rep.problems)
    weight = mem.get(kid).state.weight
    assert weight == pytest.approx((0.5 * 0.95 + 0.30) * 0.95 - 0.20)
    assert pull(mem, gh).outcomes == []  # each comment applied once
    assert mem.get(kid).state.weight == weight
    fake.add_issue("[FROM:codex→all][REGION:ProjectX][PLACE:config][TYPE:invalidation] "
                   "Token format changed", amp.body_for({"Supersedes": "#1"},
                                                        "The token format is v3."))
    rep = pull(mem, gh)
    assert rep.superseded and rep.superseded[0][0] == kid
    assert mem.get(kid).state.lifecycle.value == "superseded"


def test_post_outcome_comment(mem: Memory, gh: GitHub, fake: FakeGitHub) -> None:
    a = mem.remember("Run ruff before mypy", scope="project:amcp")
    push(mem, gh)
    post_outcome(mem, gh, a.knowledge_id, "success", "it worked")
    assert amp.outcome_of(fake.comments[1][0]["body"]) == ("success", None)
    assert mem.get(a.knowledge_id).state.weight == pytest.approx(0.5 * 0.95 + 0.30)
    assert pull(mem, gh).outcomes == []  # our own comment is not applied twice


def test_rate_limit_and_5xx_are_retried(mem: Memory, fake: FakeGitHub) -> None:
    waits: list[float] = []
    client = GitHub(fake.repo, TOKEN, base_url=fake.base, sleep=waits.append)
    mem.remember("one", scope="project:amcp")
    fake.faults += [(429, {"Retry-After": "3"}), (502, {}),
                    (403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "0"}),
                    (503, {})]
    rep = push(mem, client)
    assert rep.created == [1] and rep.retries == 4
    assert waits[0] == 3.0 and waits[1] == 2.0
    client.close()


def test_failing_api_loses_nothing(mem: Memory, fake: FakeGitHub) -> None:
    client = GitHub(fake.repo, TOKEN, base_url=fake.base, sleep=lambda s: None,
                    max_retries=2)
    for i in range(3):
        mem.remember(f"memory {i}", scope="project:amcp")
    push(mem, client, limit=1)
    fake.faults += [(500, {})] * 10
    with pytest.raises(RemoteError, match="500 3 times"):
        push(mem, client)
    fake.faults.clear()
    assert len(Mirror.load(mem, client.repo).issues) == 1  # the written one is recorded
    rep = push(mem, client)
    assert rep.created == [2, 3] and len(fake.issues) == 3  # resumed, no duplicate
    client.close()


def test_missing_or_wrong_token(fake: FakeGitHub, mem: Memory) -> None:
    with pytest.raises(MissingToken, match="GITHUB_TOKEN"):
        GitHub(fake.repo, None)
    bad = GitHub(fake.repo, "wrong", base_url=fake.base, sleep=lambda s: None)
    with pytest.raises(RemoteError, match="401 Bad credentials"):
        pull(mem, bad)
    bad.close()


def test_pagination(mem: Memory, gh: GitHub, fake: FakeGitHub) -> None:
    for i in range(230):
        fake.add_issue(f"[FROM:codex→all][REGION:r][PLACE:p][TYPE:events] Event {i}",
                       amp.body_for({}, f"event number {i}"))
    rep = pull(mem, gh)
    assert len(rep.remembered) == 230
    assert fake.requests("GET", r"/issues$") == 3
