"""Each source format, from fixtures made by the real tools (or real Letta files)."""

from __future__ import annotations

import pytest
from tests.portability.kit import FIXTURES, LETTA, run, texts

from amcp.memory import Memory
from amcp.portability.api import import_path
from amcp.portability.model import ImportOptions
from amcp.store.base import RecordFilter


def _ok(result) -> None:  # type: ignore[no-untyped-def]
    assert result.verification is not None
    failed = [c for c in result.verification.checks if not c.ok]
    assert not failed, failed


def test_mem0_get_all_keeps_scopes_metadata_and_kinds(mem: Memory) -> None:
    res = run(mem, FIXTURES / "mem0_get_all.json")
    _ok(res)
    assert res.created == 5  # six added, one deleted in mem0
    by_text = {r.record.text: r.record for r in mem.list_records(limit=50)}
    pref = by_text["Alice prefers tabs over spaces"]
    assert pref.meta.project_scope == ("user:alice",)
    assert pref.kind == "preference"
    task = by_text["Remind Alice to renew the TLS certificate by March 3"]
    assert task.vendor_extensions["x-meta"]["metadata"]["priority"] == 2
    assert by_text["The support agent answers in French"].meta.project_scope == (
        "agent:support-bot",)
    assert "Alice's team deploys on Thursdays after 14:00" in by_text  # the updated text


def test_mem0_local_directory_reads_history_and_docstore(mem: Memory) -> None:
    res = run(mem, FIXTURES / "mem0_local")
    _ok(res)
    assert res.created == 5
    assert "Bob is allergic to peanuts" not in texts(mem)  # deleted in mem0's history
    assert dict(res.health.vectors_discarded) == {"mem0 vector store": 5}
    scopes = {r.record.meta.project_scope[0] for r in mem.list_records(limit=50)}
    assert scopes == {"user:alice", "user:bob", "agent:support-bot"}


def test_mcp_memory_graph_becomes_triples(mem: Memory) -> None:
    res = run(mem, FIXTURES / "mcp_memory.jsonl")
    _ok(res)
    assert res.health.items == 3 + 4 + 2  # entities, observations, relations
    rels = [r.record for r in mem.list_records(limit=50)
            if "x-relation" in r.record.vendor_extensions]
    assert {(x.vendor_extensions["x-relation"]["from"], x.vendor_extensions["x-relation"]["type"],
             x.vendor_extensions["x-relation"]["to"]) for x in rels} == {
        ("Alice", "works_at", "Acme Corp"), ("Alice", "maintains", "billing-service")}


@pytest.mark.skipif(not LETTA.is_dir(), reason="needs ../shared/bench-data/portability")
def test_letta_agent_files_real(mem: Memory) -> None:
    res = run(mem, LETTA)
    _ok(res)
    assert res.created == 4  # two agents with human + persona blocks
    assert res.health.decisions["drop"] == 3  # each agent's system prompt
    human = [t for t in texts(mem) if t.startswith("human:")]
    assert any("Computer science PhD student" in t for t in human)
    agents = {r.record.meta.project_scope[0] for r in mem.list_records(limit=50)}
    assert agents == {"agent:memgpt_agent", "agent:customer_service"}


def test_chatgpt_export_follows_current_branch_and_captures(mem: Memory) -> None:
    res = run(mem, FIXTURES / "chatgpt_export")
    _ok(res)
    files = dict(res.health.files)
    assert files[str(FIXTURES / "chatgpt_export" / "user.json")] == "skipped: unknown format"
    all_text = " ".join(texts(mem))
    assert "first draft, regenerated" not in all_text  # off the current branch
    kinds = {r.record.kind for r in mem.list_records(limit=50)}
    assert {"preference", "credential", "task"} <= kinds
    cred = mem.list_records(RecordFilter(kinds=("credential",)), limit=5)[0]
    assert cred.state.sensitive and "Zq8vR2" not in cred.record.text


def test_claude_export_conversations_and_projects(mem: Memory) -> None:
    res = run(mem, FIXTURES / "claude_export")
    _ok(res)
    recs = {r.record.text: r.record for r in mem.list_records(limit=50)}
    assert recs["Always answer with runnable SQL examples."].kind == "preference"
    assert recs["Always answer with runnable SQL examples."].meta.project_scope == (
        "project:billing",)
    assert any(t.startswith("Decision: use PostgreSQL 16") for t in recs)


def test_basic_memory_observations_and_relations(mem: Memory) -> None:
    res = run(mem, FIXTURES / "basic_memory")
    _ok(res)
    recs = {r.record.text: r.record for r in mem.list_records(limit=50)}
    assert recs["Prefers pour over to French press for light roasts #taste"].kind == "preference"
    assert recs["Buy a gooseneck kettle before the weekend"].kind == "task"
    assert "Coffee Brewing Methods requires Proper Grinding Technique" in recs
    assert not any(t.startswith("unticked") for t in recs)  # "- [ ]" is not an observation


def test_agents_sdk_session(mem: Memory) -> None:
    res = run(mem, FIXTURES / "agents_session.db")
    _ok(res)
    recs = [r.record for r in mem.list_records(limit=50)]
    assert {r.meta.project_scope[0] for r in recs} == {"agents:support-thread-7"}
    assert {"log", "preference"} <= {r.kind for r in recs}  # tool calls are logs


def test_langgraph_store(mem: Memory) -> None:
    res = run(mem, FIXTURES / "langgraph_store.db")
    _ok(res)
    recs = {r.record.text: r.record for r in mem.list_records(limit=50)}
    assert recs["Alice prefers Vim keybindings"].meta.project_scope == ("lg:users.alice",)
    assert recs["Deploys happen on Thursdays"].meta.project_scope == ("lg:projects.billing",)
    assert recs["Alice prefers Vim keybindings"].meta.created_at.endswith("Z")


def test_generic_csv_with_mapping(mem: Memory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "notes.csv"
    f.write_text("when,what,who\n1714557600,Carol prefers email over calls,carol\n"
                 "1714557600123,ERROR db timeout after 30s,carol\n")
    res = run(mem, f, mapping={"text": "what", "created_at": "when", "scope": "who"})
    _ok(res)
    recs = {r.record.text: r.record for r in mem.list_records(limit=50)}
    assert recs["Carol prefers email over calls"].kind == "preference"
    assert recs["ERROR db timeout after 30s"].kind == "log"
    assert recs["ERROR db timeout after 30s"].meta.created_at == "2024-05-01T10:00:00.123000Z"
    assert recs["Carol prefers email over calls"].meta.project_scope == ("user:carol",)


def test_portable_records_upsert_by_id_supersedes(mem: Memory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "p.jsonl"
    f.write_text('{"id": "m1", "type": "preference", "content": "Dana likes tea", '
                 '"scope": "user:dana", "created_at": "2024-01-01T00:00:00Z"}\n')
    _ok(run(mem, f))
    f.write_text('{"id": "m1", "type": "preference", "content": "Dana likes coffee now", '
                 '"scope": "user:dana", "created_at": "2024-02-01T00:00:00Z"}\n')
    res = run(mem, f)
    _ok(res)
    assert res.superseded == 1
    active = [r.record.text for r in mem.list_records(RecordFilter(scopes=("user:dana",)))]
    assert active == ["Dana likes coffee now"]
    old = mem.list_records(RecordFilter(scopes=("user:dana",), lifecycles=None), limit=5)
    assert sorted(r.state.lifecycle.value for r in old) == ["active", "superseded"]


def test_memory_import_from_delegates(mem: Memory) -> None:
    dry = import_path(mem, FIXTURES / "mcp_memory.jsonl", dry_run=True)
    assert dry.verification is None and mem.stats().records == 0
    res = import_path(mem, FIXTURES / "mcp_memory.jsonl", ImportOptions(scope="team:graph"))
    assert res.ok and res.created == 9
    assert {r.record.meta.project_scope[0] for r in mem.list_records(limit=20)} == {"team:graph"}
