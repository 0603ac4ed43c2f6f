"""A peer's bad input is refused, counted and logged with its identity; nothing bad is stored
or forwarded, and sync with the other peers goes on (issue 17, "Bad input")."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from tests.node.kit import FAST as FAST_RETRY
from tests.sync.kit import FAST, eventually, run, start_node, stop_node

from amcp.clock import Timestamp
from amcp.errors import AmcpError, RemoteProtocolError, Status
from amcp.node import connect
from amcp.node.client import Client
from amcp.session import NodeIdentity, NodeType
from amcp.session.policy import AccessPolicy, Grant
from amcp.wire import MsgType


async def _hostile(port: int, identity: NodeIdentity) -> Client:
    return await connect("127.0.0.1", port, identity=identity, retry=FAST_RETRY,
                         node_type=NodeType.DB)


def _push(changes: list[dict[str, Any]], *, origin_key: str | None = None,
          hops: int = 0) -> dict[str, Any]:
    payload: dict[str, Any] = {"changes": changes, "origin": "amcp://db.evil.fp-aaaaaa.x",
                               "hops": hops}
    if origin_key is not None:
        payload["origin_key"] = origin_key
    return payload


def test_bad_pushes_are_refused_counted_and_not_forwarded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    evil = NodeIdentity.generate()

    async def main() -> None:
        b = await start_node(tmp_path, "b", replace(FAST, push_rate=50.0))
        # b lets the hostile peer write team:a only; everyone may read
        b.server.service.policy = AccessPolicy(
            (Grant("evil", read=("*",), write=("team:a",), public_key=evil.public_key),),
            Grant("default", read=("*",)))
        c = await start_node(tmp_path, "c", FAST, (b,))
        try:
            await _attack(b, evil)
            good = await b.write(lambda m: m.remember("still replicating", type="KT-FACT",
                                                     scope="team:a"))
            await eventually(lambda: c.has(good.knowledge_id))
            assert await c.read(lambda m: m.stats().records) == 1  # only the good one
            board = b.replicator.replica.board.to_dict()
            totals = board["totals"]
            assert totals["violations"] >= 1 and totals["loops"] >= 2
            assert totals["rate_limited"] >= 1 and totals["conflicts"] >= 2
            assert evil.public_key_b64 in board["inbound"]
        finally:
            await stop_node(c)
            await stop_node(b)

    with caplog.at_level(logging.WARNING, logger="amcp.sync"):
        run(main())
    assert any(evil.public_key_b64[:12] in r.getMessage() for r in caplog.records)


async def _attack(b: Any, evil: NodeIdentity) -> None:
    mem = b.memory
    peer = await _hostile(b.port, evil)
    # a scope it may not write, and a record with its clock a day ahead: refused per entry
    other_scope = mem.compose("secret plans", scope="team:b").to_dict()
    ahead = mem.compose("from the future", scope="team:a")
    future = Timestamp(int(time.time() * 1000) + 86_400_000, 0, "evil")
    ahead_amf = ahead.with_causal(hlc=str(future)).to_dict()
    ack = await peer.request(MsgType.SYNC_PUSH, _push([
        {"op": "put", "knowledge_id": other_scope["knowledge_id"], "hlc": 1,
         "amf": other_scope},
        {"op": "put", "knowledge_id": ahead_amf["knowledge_id"], "hlc": 2, "amf": ahead_amf},
    ]), ack=True)
    assert (ack.payload["applied"], ack.payload["conflicts"]) == (0, 2)
    # a loop: the change claims to come from b itself, or went past the hop limit
    for kw in ({"origin_key": b.server.identity.public_key_b64}, {"hops": 9}):
        with pytest.raises(AmcpError) as err:
            await peer.request(MsgType.SYNC_PUSH, _push([], **kw), ack=True)  # type: ignore[arg-type]
        assert err.value.status == Status.LOOP_DETECTED
    # a flood: over 10 s worth of its 50 changes/s at once
    flood = [{"op": "purge", "knowledge_id": f"K-{i:064x}", "hlc": i} for i in range(600)]
    with pytest.raises(AmcpError) as err:
        await peer.request(MsgType.SYNC_PUSH, _push(flood), ack=True)
    assert err.value.status == Status.TOO_MANY_REQUESTS
    # a record whose content does not match its id: a violation, the connection closes
    forged = mem.compose("the real text", scope="team:a").to_dict()
    forged["core"]["object"] = "something else"
    with pytest.raises(RemoteProtocolError):
        await peer.request(MsgType.SYNC_PUSH, _push([
            {"op": "put", "knowledge_id": forged["knowledge_id"], "hlc": 3, "amf": forged}]),
            ack=True)
    await peer.aclose()
    for kid in (other_scope["knowledge_id"], ahead_amf["knowledge_id"], forged["knowledge_id"]):
        assert not await b.has(kid)
    assert not await b.has(flood[0]["knowledge_id"])


def test_a_peer_that_vanishes_mid_pull_loses_nothing(tmp_path: Path) -> None:
    """The hub goes away while the edge pulls in small batches: the edge keeps what it
    applied, its watermark names exactly that, and the next pull after the hub is back
    brings the rest."""
    from tests.sync.kit import cut, heal

    quiet = replace(FAST, gossip_interval=3600.0, batch=2)

    async def main() -> None:
        hub = await start_node(tmp_path, "hub", quiet)
        hub.memory.remember_many({"text": f"note {i}", "type": "KT-DECISION",
                                  "scope": "team:a"} for i in range(300))
        edge = await start_node(tmp_path, "edge", quiet, (hub,))
        try:
            link = next(iter(edge.replicator.links.values()))
            pulling = asyncio.ensure_future(link.pull_new())
            await eventually(lambda: _moved(link), timeout=30, every=0.001)
            port = await cut(hub)
            # Returns, with no exception: at the latest when a request left on a half-closed
            # connection reaches the link's request timeout (30 s).
            await asyncio.wait_for(pulling, 120)
            have = await edge.read(lambda m: m.stats().records)
            assert 0 < have < 300 and not link.connected
            mark = link.status.pulled_watermark
            below = [c.knowledge_id for c in hub.memory.store.changes(0, 1000) if c.hlc <= mark]
            assert all([await edge.has(k) for k in below])
            await heal(hub, port, quiet)
            link.next_attempt = 0.0
            await link.pull_new()
            assert await edge.read(lambda m: m.stats().records) == 300
        finally:
            await stop_node(edge)
            await stop_node(hub)

    run(main())


async def _moved(link: Any) -> bool:
    return bool(link.status.pulled_watermark)
