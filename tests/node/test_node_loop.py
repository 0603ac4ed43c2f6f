"""The node and client on uvloop (what ``amcp.node.run`` picks when it is installed) and on
asyncio's own loop: same behaviour, both ways."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from tests.node.kit import client_for, make_memory, record, running

from amcp.node.runtime import loop_factory, loop_name, run


def _round_trips(tmp_path: Path, *, uv: bool, encryption: bool) -> str:
    mem = make_memory(tmp_path)

    async def main() -> str:
        async with running(mem, encryption=encryption) as server:
            c = await client_for(server, encryption=encryption)
            amf = record(mem, "on either loop")
            assert (await c.write(amf)).status == 201
            clients = [c, *[await client_for(server, encryption=encryption) for _ in range(3)]]
            results = await asyncio.gather(
                *(x.read_ids([amf["knowledge_id"]]) for x in clients for _ in range(5))
            )
            assert all(len(r.records) == 1 for r in results)
            assert (await c.health())["state"] == "ACTIVE"
            for x in clients:
                await x.end()
            return loop_name(asyncio.get_running_loop())

    try:
        return run(asyncio.wait_for(main(), 60), prefer_uvloop=uv)
    finally:
        mem.close()


@pytest.mark.parametrize("encryption", [False, True])
def test_node_and_client_on_uvloop(tmp_path: Path, encryption: bool) -> None:
    pytest.importorskip("uvloop")
    assert _round_trips(tmp_path, uv=True, encryption=encryption) == "uvloop"


def test_without_uvloop_the_asyncio_loop_is_used(tmp_path: Path) -> None:
    assert loop_factory(prefer_uvloop=False) is asyncio.new_event_loop
    assert _round_trips(tmp_path, uv=False, encryption=False) == "asyncio"


def test_the_node_maintains_on_its_own_schedule(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The TTL sweep is a task of the node's (Limits.maintenance_interval), run on its
    write thread, not a side effect of a read."""
    import asyncio
    import time

    from amcp.amf.types import Lifecycle
    from amcp.memory import Memory
    from amcp.node import NodeServer
    from amcp.node.config import Limits

    mem = Memory(tmp_path / "m.db", embedder="hashing")
    rec = mem.remember("a note that expires in a second", ttl=1, scope="team:x")

    async def run() -> None:
        server = NodeServer(mem, limits=Limits(maintenance_interval=0.05))
        await server.start("127.0.0.1", 0)
        try:
            deadline = time.monotonic() + 20  # its TTL runs out after 1 s; then one round
            while time.monotonic() < deadline:
                if mem.get(rec.knowledge_id).state.lifecycle is Lifecycle.ARCHIVED:
                    return
                await asyncio.sleep(0.05)
        finally:
            await server.close()

    asyncio.run(run())
    assert mem.get(rec.knowledge_id).state.lifecycle is Lifecycle.ARCHIVED
    mem.close()
