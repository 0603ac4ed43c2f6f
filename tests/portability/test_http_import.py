"""``POST /v1/import?from=KIND``: another tool's file through the HTTP API."""

from __future__ import annotations

from pathlib import Path

from tests.api.kit import bearer, client_for
from tests.portability.kit import FIXTURES

from amcp.memory import Memory


def test_http_import_from_mem0_verifies(mem: Memory) -> None:
    body = (FIXTURES / "mem0_get_all.json").read_bytes()
    with client_for(mem) as c:
        dry = c.post("/v1/import", params={"from": "mem0", "dry_run": "true"}, content=body)
        assert dry.status_code == 200, dry.text
        assert dry.json()["health"]["items"] == 5 and mem.stats().records == 0
        r = c.post("/v1/import", params={"from": "mem0"}, content=body)
        assert r.status_code == 200, r.text
        out = r.json()
        assert out["ok"] and out["created"] == 5
        assert [ch["ok"] for ch in out["verification"]["checks"]] == [True] * 5


def test_http_import_needs_write_access_to_every_mapped_scope(tmp_path: Path) -> None:
    body = (FIXTURES / "mem0_get_all.json").read_bytes()
    with Memory(tmp_path / "m.db", embedder="hashing") as mem:
        with client_for(mem, tokens={"t": ["user:alice"]}) as c:
            r = c.post("/v1/import", params={"from": "mem0"}, content=body, headers=bearer("t"))
            assert r.status_code == 403, r.text  # bob's and the agent's scopes too
            ok = c.post("/v1/import", params={"from": "mem0", "scope": "user:alice"},
                        content=body, headers=bearer("t"))
            assert ok.status_code == 200 and ok.json()["created"] == 5
        assert {r.record.meta.project_scope[0] for r in mem.list_records()} == {"user:alice"}


def test_http_import_bad_input_is_400_naming_the_item(mem: Memory) -> None:
    with client_for(mem) as c:
        r = c.post("/v1/import", params={"from": "mcp-memory"}, content=b'{"type": "x"}\n')
        assert r.status_code == 400
        assert "line 1: not an MCP memory line" in r.text
        assert mem.stats().records == 0
