"""The HTTP listing refuses a trust: tag filter (it would be answered by the writer's own
claim), and MCP recall shows tags as verified provenance earns them."""

from __future__ import annotations

import asyncio
from pathlib import Path

from fastapi.testclient import TestClient
from mcp import Client

from amcp.api.http import create_app
from amcp.api.mcp_server import build_mcp
from amcp.memory import Memory


def test_listing_refuses_a_trust_tag_filter(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", embedder="hashing") as mem:
        mem.remember("the deploy key lives in the vault", tags=["trust:verified", "ops"])
        client = TestClient(create_app(mem), base_url="http://127.0.0.1")
        bad = client.get("/v1/memories", params={"tag": "trust:verified"})
        assert bad.status_code == 400 and "trust filter" in bad.text
        ok = client.get("/v1/memories", params={"tag": "ops"})
        assert ok.status_code == 200 and len(ok.json()["items"]) == 1


def test_mcp_recall_drops_a_writers_own_trust_tag(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "m.db", embedder="hashing")
    mem.remember("the deploy key lives in the vault", tags=["trust:verified", "ops"],
                 provenance={"origin": "external"})

    async def main() -> None:
        async with Client(build_mcp(mem), read_timeout_seconds=60) as client:
            got = await client.call_tool("memory_recall", {"query": "deploy key vault"})
            tags = got.structured_content["results"][0]["tags"]
            assert "ops" in tags and "trust:verified" not in tags
    try:
        asyncio.run(main())
    finally:
        mem.close()
