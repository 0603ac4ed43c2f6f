"""Real nodes on loopback for replication tests: separate stores, hashing embedder."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from amcp.memory import Memory
from amcp.node.replicator import Replicator, attach
from amcp.node.server import NodeServer
from amcp.sync.peers import PeerSpec, SyncConfig

T = TypeVar("T")
# Quick rounds so tests converge in a second or two; anti-entropy off unless asked.
FAST = SyncConfig(gossip_interval=0.2, probe_interval=0.2, probe_timeout=1.0,
                  suspect_timeout=2.0, anti_entropy_interval=3600.0,
                  reconnect_backoff=(0.1, 0.2, 0.3))


@dataclass
class Node:
    name: str
    memory: Memory
    server: NodeServer
    replicator: Replicator

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def write(self, fn: Callable[[Memory], T]) -> T:
        """Run ``fn(memory)`` on the node's write thread, then tell the replicator."""
        out = await self.server.run_write(lambda: fn(self.memory))
        self.replicator.poke()
        return out

    async def read(self, fn: Callable[[Memory], T]) -> T:
        return await self.server.run_read(lambda: fn(self.memory))

    async def has(self, kid: str) -> bool:
        return await self.read(lambda m: m.store.get(kid) is not None)


async def start_node(tmp: Path, name: str, config: SyncConfig = FAST,
                     peers: tuple[Node, ...] = (), port: int = 0) -> Node:
    memory = Memory(tmp / name / "memory.db", embedder="hashing")
    server = NodeServer(memory)
    specs = tuple(PeerSpec("127.0.0.1", p.port, name=p.name) for p in peers)
    replicator = attach(server, replace(config, peers=config.peers + specs))
    await server.start("127.0.0.1", port)
    replicator.replica.membership.me.endpoint = f"127.0.0.1:{server.port}"
    await replicator.start()
    return Node(name, memory, server, replicator)


async def stop_node(node: Node) -> None:
    """Replicator, server, store — each closed even if the one before failed or this is
    cancelled, so no socket or thread outlives the test (filterwarnings = error)."""
    try:
        if node.replicator is not None:
            await node.replicator.close()
    finally:
        try:
            await node.server.close()
        finally:
            node.memory.close()


async def cut(node: Node) -> int:
    """A partition: the node stops serving and replicating (its store stays open, so the
    test can still write to it). Returns its port, for ``heal``."""
    port = node.port
    await node.replicator.close()
    await node.server.close()
    return port


async def heal(node: Node, port: int, config: SyncConfig = FAST) -> None:
    """Serve the same store again on the same port, with the same peers."""
    server = NodeServer(node.memory)
    replicator = attach(server, replace(config, peers=node.replicator.config.peers))
    await server.start("127.0.0.1", port)
    replicator.replica.membership.me.endpoint = f"127.0.0.1:{port}"
    await replicator.start()
    node.server, node.replicator = server, replicator


@asynccontextmanager
async def cluster(tmp: Path, names: list[str], *, config: SyncConfig = FAST,
                  chain: bool = True, star: bool = False) -> AsyncIterator[dict[str, Node]]:
    """Nodes started in order; with ``chain`` each one names the one before as its peer
    (so the rest is learned through membership); with ``star`` each names the first (a
    hub, the tier-1 holder of every other node's evicted records)."""
    nodes: dict[str, Node] = {}
    async with AsyncExitStack() as stack:
        prev: tuple[Node, ...] = ()
        for name in names:
            node = await start_node(tmp, name, config, prev)
            stack.push_async_callback(stop_node, node)
            nodes[name] = node
            if chain and not (star and prev):
                prev = (node,)
        yield nodes


@contextmanager
def serving(tmp: Path, names: list[str], *, config: SyncConfig = FAST,
            bound: float = 60.0, star: bool = False) -> Iterator[dict[str, Node]]:
    """``cluster`` on an event loop of its own thread, for a synchronous caller such as the
    conformance kit. The caller's blocking work stays on its own thread, bounded by its own
    deadlines — never a thread that a cancelled ``asyncio.to_thread`` would leave running
    against nodes being torn down. On exit every node is stopped, the loop's leftover tasks
    and executor are finished, the loop closed and the thread joined, whatever was raised."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="cluster-loop", daemon=True)
    thread.start()
    stack = AsyncExitStack()

    async def up() -> dict[str, Node]:
        return await stack.enter_async_context(cluster(tmp, names, config=config, star=star))

    try:
        yield asyncio.run_coroutine_threadsafe(up(), loop).result(bound)
    finally:
        try:
            asyncio.run_coroutine_threadsafe(stack.aclose(), loop).result(bound)
        finally:
            asyncio.run_coroutine_threadsafe(_drain(), loop).result(bound)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(bound)
            loop.close()


async def _drain() -> None:
    """What ``asyncio.run`` does before it closes a loop: cancel what is left, finish the
    async generators and the default executor."""
    loop = asyncio.get_running_loop()
    rest = [t for t in asyncio.all_tasks(loop) if t is not asyncio.current_task()]
    for task in rest:
        task.cancel()
    await asyncio.gather(*rest, return_exceptions=True)
    await loop.shutdown_asyncgens()
    await loop.shutdown_default_executor()


async def eventually(check: Callable[[], Any], timeout: float = 10.0,
                     every: float = 0.02) -> float:
    """Seconds until ``await check()`` is true; AssertionError after ``timeout``."""
    start = time.perf_counter()
    while True:
        if await check():
            return time.perf_counter() - start
        if time.perf_counter() - start > timeout:
            raise AssertionError(f"not true within {timeout} s")
        await asyncio.sleep(every)


def with_distribution(memory: Memory, text: str, **dist: str) -> Any:
    """A record of ``memory`` carrying ``distribution`` (compose has no such field), sealed
    and signed again by the node's key."""
    from amcp.amf.ids import seal
    from amcp.amf.record import Distribution

    record = memory.compose(text, type="KT-FACT", scope="team:a")
    return seal(replace(record, distribution=Distribution.from_dict(dist)),
                memory.keyring.signing_key)


def run(coro: Any, timeout: float = 90.0) -> Any:
    async def main() -> Any:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(main())
