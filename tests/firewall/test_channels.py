"""The same provenance rules through the node protocol and MCP (the write rules are
``admit_write``'s for every path)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from mcp import Client
from tests.firewall.kit import SCOPE, SECRET, hmac_claim
from tests.node.kit import client_for, make_memory, run, running

from amcp.api.mcp_server import build_mcp
from amcp.errors import ForbiddenError


def test_node_write_with_a_forged_signature_is_403(tmp_path: Path) -> None:
    mem = make_memory(tmp_path)
    assert mem.firewall is not None
    mem.firewall.keys.register(SCOPE, "alice", hmac_secret=SECRET)
    text = "Alice's manager is Priya."
    forged = mem.compose(text, scope=SCOPE, provenance={
        "origin": "user", "writer": "alice", "signature": "00" * 32}).to_dict()
    good = mem.compose(text, scope=SCOPE, provenance=hmac_claim(text)).to_dict()

    async def main() -> None:
        async with running(mem) as server:
            c = await client_for(server)
            with pytest.raises(ForbiddenError, match=r"provenance\.signature"):
                await c.write(forged)
            assert (await c.write(good)).status == 201
            await c.end()
    try:
        run(main())
        assert mem.stats().records == 1
    finally:
        mem.close()


def test_mcp_remember_takes_provenance(tmp_path: Path) -> None:
    mem = make_memory(tmp_path)
    assert mem.firewall is not None
    mem.firewall.keys.register(SCOPE, "alice", hmac_secret=SECRET)
    text = "Alice's desk is on floor 3."

    async def main() -> None:
        async with Client(build_mcp(mem), read_timeout_seconds=60) as client:
            bad = await client.call_tool("memory_remember", {
                "text": text, "scope": [SCOPE], "provenance": {"origin": "user"}})
            assert bad.is_error and "provenance.signature" in str(bad.content)
            ok = await client.call_tool("memory_remember", {
                "text": text, "scope": [SCOPE], "provenance": hmac_claim(text)})
            assert not ok.is_error, ok.content
            got = await client.call_tool("memory_recall", {"query": "desk floor",
                                                            "scope": [SCOPE]})
            first = got.structured_content["results"][0]
            assert (first["origin"], first["verification"]) == ("user", "verified")
            assert first["trust"] == "from the user, verified (alice)"
    try:
        asyncio.run(main())
        assert mem.stats().records == 1
    finally:
        mem.close()
