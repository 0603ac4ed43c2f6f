"""SWIM's indirect ping (PROFILE §10): a member whose direct probe goes unanswered is
asked about through k other members before it is suspected.

Three real nodes on loopback. ``a`` reaches ``b`` only through a fault proxy and ``c``
directly; ``c`` reaches ``b`` directly. Black-holing the proxy breaks a's direct path to b
and nothing else, as a lossy link between two hosts of a healthy cluster would.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from tests.sync.kit import FAST, Node, eventually, run, start_node, stop_node

from amcp.node import connect
from amcp.sync.members import MemberState
from amcp.sync.peers import PeerSpec, SyncConfig
from amcp.testing.faultproxy import FaultProxy, Partition
from amcp.wire import MsgType


def _key(node: Node) -> str:
    return node.server.identity.public_key_b64


def _state(node: Node, of: Node) -> MemberState | None:
    member = node.replicator.replica.membership.get(_key(of))
    return None if member is None else member.state


async def _states_while_cut(config: SyncConfig, tmp: Path, watch: float) -> set[MemberState]:
    """Every state a's table gives b while a's direct path to b is black-holed."""
    b = await start_node(tmp, "b", config)
    c = await start_node(tmp, "c", config, (b,))
    proxy = await FaultProxy("127.0.0.1", b.port).start()
    via_proxy = replace(config, peers=(PeerSpec("127.0.0.1", proxy.port, name="b-proxied"),))
    a = await start_node(tmp, "a", via_proxy, (c,))
    try:
        await eventually(lambda: _all_alive(a, b, c), timeout=20)
        proxy.cut(Partition.BLACKHOLE)
        seen: set[MemberState] = set()
        end = asyncio.get_running_loop().time() + watch
        while asyncio.get_running_loop().time() < end:
            state = _state(a, b)
            if state is not None:
                seen.add(state)
            await asyncio.sleep(0.01)
        return seen
    finally:
        for node in (a, c, b):
            await stop_node(node)
        await proxy.close()


async def _all_alive(a: Node, b: Node, c: Node) -> bool:
    return (_state(a, b) is MemberState.ALIVE and _state(a, c) is MemberState.ALIVE
            and _state(c, b) is MemberState.ALIVE
            and all(link.connected for link in a.replicator.links.values()))


def test_a_member_reached_through_another_is_never_suspected(tmp_path: Path) -> None:
    # Several probe rounds of a's (0.2 s apart, 1 s timeout each) and past suspect_timeout.
    seen = run(_states_while_cut(FAST, tmp_path, watch=6.0))
    assert seen == {MemberState.ALIVE}


def test_without_indirect_probes_the_same_cut_makes_it_suspect(tmp_path: Path) -> None:
    """The control: the setup above does break a's direct probes."""
    seen = run(_states_while_cut(replace(FAST, indirect_probes=0), tmp_path, watch=6.0))
    assert MemberState.SUSPECT in seen


def test_a_node_answers_a_relay_request_for_members_it_reaches(tmp_path: Path) -> None:
    """The wire half: HEALTH_CHECK ``probe: <key>`` gets HEALTH_RESPONSE ``probe: {key,
    alive}``; a key it has no link to, a gone member and a malformed ask are answered too,
    never with an error."""
    async def main() -> None:
        b = await start_node(tmp_path, "b", FAST)
        c = await start_node(tmp_path, "c", FAST, (b,))
        client = await connect("127.0.0.1", c.port)
        b_up = True
        try:
            await eventually(lambda: _linked(c, b), timeout=20)

            async def ask(probe: object) -> object:
                frame = await client.request(MsgType.HEALTH_CHECK, {"probe": probe})
                assert frame.msg_type is MsgType.HEALTH_RESPONSE
                return frame.payload.get("probe")

            assert await ask(_key(b)) == {"key": _key(b), "alive": True}
            assert await ask("x" * 43) == {"key": "x" * 43, "alive": False}
            assert await ask(12) is None and await ask("y" * 65) is None  # not an ask
            b_up = False
            await stop_node(b)
            assert await ask(_key(b)) == {"key": _key(b), "alive": False}
        finally:
            await client.aclose()
            await stop_node(c)
            if b_up:
                await stop_node(b)

    run(main())


async def _linked(node: Node, other: Node) -> bool:
    return any(link.key == _key(other) and link.connected
               for link in node.replicator.links.values())
