"""N ``amcp serve`` processes peered through fault proxies, for the replication benches.

Every ordered pair (i, j) has its own :class:`~amcp.testing.faultproxy.FaultProxy`: node
i reaches node j only through ``proxy[i][j]`` (its ``--peer``), so faults and partitions
can be set per link. Nodes advertise an address nobody listens on, so a member learned
through gossip is never dialled around the proxies. Proxies and the benches' clients run
in the caller's event loop; nodes are separate processes with separate stores.
"""

from __future__ import annotations

import asyncio
import random
import socket
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.nodeproc import NodeProcess, amcp_serve

from amcp.testing.faultproxy import FaultProxy, Faults, Partition

# Quick rounds: a bench on loopback should converge in seconds (defaults are for LANs).
FAST_SYNC = {"gossip_interval": 0.5, "anti_entropy_interval": 5.0, "probe_interval": 0.5,
             "probe_timeout": 1.0, "suspect_timeout": 3.0}
NOWHERE = "127.0.0.1:9"  # the discard port: nothing listens, so learned links go nowhere


def free_ports(count: int) -> list[int]:
    socks = [socket.socket() for _ in range(count)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass
class Cluster:
    root: Path
    size: int
    seed: int = 0
    sync: dict[str, float] = field(default_factory=lambda: dict(FAST_SYNC))
    nodes: list[NodeProcess] = field(default_factory=list)
    proxies: dict[tuple[int, int], FaultProxy] = field(default_factory=dict)
    ports: list[int] = field(default_factory=list)

    async def start(self) -> Cluster:
        self.ports = free_ports(self.size)
        for i in range(self.size):
            for j in range(self.size):
                if i != j:
                    seed = self.seed * 1000 + i * 31 + j
                    proxy = FaultProxy("127.0.0.1", self.ports[j], seed=seed)
                    self.proxies[i, j] = await proxy.start()
        starts = [asyncio.to_thread(self._start_node, i) for i in range(self.size)]
        self.nodes = list(await asyncio.gather(*starts))
        return self

    def _start_node(self, i: int) -> NodeProcess:
        home = self.root / f"node{i}"
        home.mkdir(parents=True, exist_ok=True)
        config = home / "node.toml"
        config.write_text("[sync]\n" + "".join(f"{k} = {v}\n" for k, v in self.sync.items()))
        peers = [a for j in range(self.size) if j != i
                 for a in ("--peer", f"127.0.0.1:{self.proxies[i, j].port}")]
        return amcp_serve(home / "memory.db", self.ports[i], "--config", str(config),
                          "--advertise", NOWHERE, *peers)

    async def stop(self) -> None:
        await asyncio.gather(*(asyncio.to_thread(n.stop) for n in self.nodes))
        for proxy in self.proxies.values():
            await proxy.close()

    async def __aenter__(self) -> Cluster:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ------------------------------------------------------------------ faults

    def set_faults(self, faults: Faults | None) -> None:
        for proxy in self.proxies.values():
            proxy.set_faults(faults or Faults())

    def random_faults(self, rng: random.Random, chance: float = 0.3) -> None:
        """Each link independently: no faults, or drops/duplicates/reorders/delays."""
        for proxy in self.proxies.values():
            if rng.random() < chance:
                proxy.set_faults(Faults(drop=rng.uniform(0, 0.2), duplicate=rng.uniform(0, 0.1),
                                        reorder=rng.uniform(0, 0.1),
                                        delay=(0.0, rng.uniform(0, 0.02))))
            else:
                proxy.set_faults(Faults())

    def partition(self, groups: Iterable[Iterable[int]], mode: Partition) -> None:
        """Cut every link between two different groups, both directions."""
        side = {n: g for g, members in enumerate(groups) for n in members}
        for (i, j), proxy in self.proxies.items():
            if side.get(i) != side.get(j):
                proxy.cut(mode)

    def heal(self) -> None:
        for proxy in self.proxies.values():
            proxy.heal()
            proxy.set_faults(Faults())

    def fault_stats(self) -> dict[str, int]:
        """What the proxies did, summed over every link."""
        total: dict[str, int] = {}
        for proxy in self.proxies.values():
            for key, value in asdict(proxy.stats).items():
                total[key] = total.get(key, 0) + value
        return total
