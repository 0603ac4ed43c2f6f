"""The record tools agents expect (read, list, supersede, purge with confirmation, export),
scope as a string or a list, id prefixes and one-sentence errors — with the SDK's client."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from mcp import Client
from tests.api.kit import make_memory

from amcp.api.mcp_server import build_mcp
from amcp.memory import Memory


def talk(mem: Memory, script: Any) -> Any:
    async def main() -> Any:
        async with Client(build_mcp(mem)) as client:
            return await script(client)

    return asyncio.run(main())


def test_read_list_supersede_purge_export(tmp_path: Path) -> None:
    mem = make_memory(tmp_path)

    async def script(c: Client) -> None:
        r = await c.call_tool("memory_remember", {"text": "Alice likes tabs", "scope": "user:alice"})
        kid = r.structured_content["knowledge_id"]
        await c.call_tool("memory_remember", {"text": "Deploys on Thursday",
                                              "scope": ["project:payments"]})
        r = await c.call_tool("memory_recall", {"query": "tabs", "scope": "user:alice"})
        assert [x["knowledge_id"] for x in r.structured_content["results"]] == [kid]
        r = await c.call_tool("memory_read", {"knowledge_id": kid[:8]})
        assert r.structured_content["text"] == "Alice likes tabs"
        r = await c.call_tool("memory_list", {"scope": "user:alice"})
        assert [i["knowledge_id"] for i in r.structured_content["items"]] == [kid]
        r = await c.call_tool("memory_supersede", {"knowledge_id": kid[:10],
                                                   "text": "Alice likes spaces now"})
        new = r.structured_content["knowledge_id"]
        assert r.structured_content["supersedes"] == kid
        r = await c.call_tool("memory_list", {"lifecycle": ["superseded"]})
        assert [i["knowledge_id"] for i in r.structured_content["items"]] == [kid]
        r = await c.call_tool("memory_export", {"scope": "user:alice"})
        lines = r.structured_content["ndjson"].strip().splitlines()
        assert r.structured_content["records"] == len(lines) >= 1
        assert any("Alice likes spaces now" in json.dumps(json.loads(x)) for x in lines)
        # purge needs the whole id as confirmation: the first call only says which
        r = await c.call_tool("memory_purge", {"knowledge_id": new[:8], "reason": "privacy"})
        assert r.is_error and new in r.content[0].text
        r = await c.call_tool("memory_read", {"knowledge_id": new})
        assert r.structured_content["lifecycle"] == "active"
        r = await c.call_tool("memory_purge", {"knowledge_id": new[:8], "reason": "privacy",
                                               "confirm": new})
        assert r.structured_content == {"knowledge_id": new, "purged": True}
        r = await c.call_tool("memory_read", {"knowledge_id": new})
        assert r.structured_content["lifecycle"] == "purged"
        assert r.structured_content["text"] is None

    talk(mem, script)
    mem.close()


def test_errors_are_one_sentence(tmp_path: Path) -> None:
    mem = make_memory(tmp_path)

    async def script(c: Client) -> None:
        r = await c.call_tool("memory_remember", {"text": 5, "confidence": "high"})
        text = r.content[0].text
        assert r.is_error and "\n" not in text and "pydantic" not in text, text
        assert text.startswith("memory_remember: bad arguments: text:") and "confidence" in text
        r = await c.call_tool("memory_forget", {"knowledge_id": "K-0000", "reason": "x"})
        assert r.is_error and r.content[0].text == (
            "memory_forget: 404 NOT_FOUND: no record starts with K-0000")
        assert "Error executing" not in r.content[0].text

    talk(mem, script)
    assert mem.stats().records == 0
    mem.close()
