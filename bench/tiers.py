"""Tier 0 eviction and fetch-back between two real nodes on loopback (docs/replication.md).

A hub and an edge (``--peer hub``, ``[tiers] max_records``) in one process, each with its
own store and the hashing embedder; the edge holds N records the hub also holds.

1. plan: CPU of one eviction plan over the edge's N records (read only);
2. round: one eviction round (plan, confirm with the hub, evict) — wall and CPU, records/s;
3. reads: MEMORY_READ of one id from the edge over AMCP — a record still in tier 0, an
   evicted one fetched back from the hub, and an evicted one with the hub down (CACHE_MISS):
   p50 / p95 in ms.

    nice .venv/bin/python bench/tiers.py [--records 2000] [--reads 100]

CPU is this process's (both nodes and the client share it): compare the parts' ratios in
one run. Writes bench/results/tiers.json with the load average at start and end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from bench.common import percentile, save  # noqa: E402

from amcp.memory import Memory  # noqa: E402
from amcp.node.client import connect  # noqa: E402
from amcp.node.replicator import Replicator, attach  # noqa: E402
from amcp.node.server import NodeServer  # noqa: E402
from amcp.sync.peers import PeerSpec, SyncConfig  # noqa: E402
from amcp.sync.tierconfig import TierConfig  # noqa: E402
from amcp.sync.tiers import plan  # noqa: E402


def _load() -> float:
    return round(os.getloadavg()[0], 2)


async def _node(root: Path, name: str, config: SyncConfig,
                port: int = 0) -> tuple[Memory, NodeServer, Replicator]:
    memory = Memory(root / name / "memory.db", embedder="hashing")
    server = NodeServer(memory)
    replicator = attach(server, config)
    await server.start("127.0.0.1", port)
    await replicator.start()
    return memory, server, replicator


async def _stop(memory: Memory, server: NodeServer, replicator: Replicator) -> None:
    await replicator.close()
    await server.close()
    memory.close()


def _ms(values: list[float]) -> dict[str, float]:
    return {"p50_ms": round(percentile(values, 50) * 1000, 2),
            "p95_ms": round(percentile(values, 95) * 1000, 2), "n": len(values)}


async def _reads(port: int, ids: list[str]) -> tuple[list[float], int, int]:
    took, fetched, missed = [], 0, 0
    async with await connect("127.0.0.1", port) as client:
        for kid in ids:
            start = time.perf_counter()
            got = await client.read_ids([kid])
            took.append(time.perf_counter() - start)
            fetched += int(got.payload.get("network_fetches") or 0)
            missed += len(got.payload.get("cache_miss") or ())
    return took, fetched, missed


async def run(records: int, reads: int) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="amcp-tiers-"))
    base = SyncConfig(gossip_interval=0.2, anti_entropy_interval=3600.0,
                      tiers=TierConfig(max_records=records // 2, idle_days=0, interval=3600))
    hub = await _node(root, "hub", base)
    edge = await _node(root, "edge", replace(base, peers=(PeerSpec("127.0.0.1", hub[1].port),)))
    out: dict[str, Any] = {"records": records, "load_start": _load()}
    hub_up = True
    try:
        mem = edge[0]
        ids = await edge[1].run_write(lambda: [mem.remember(
            f"decision {i} about the deploy window", type="KT-DECISION", scope="team:a",
            subject=f"deploy {i}").knowledge_id for i in range(records)])
        hub_mem = hub[0]
        while len(await hub[1].run_read(lambda: hub_mem.store.get_many(ids))) < records:
            await asyncio.sleep(0.2)  # the hub must hold them before anything is evicted
        cpu = time.process_time()
        planned = await edge[1].run_read(lambda: plan(mem, base.tiers, limit=records))
        out["plan"] = {"candidates": len(planned),
                       "cpu_ms": round((time.process_time() - cpu) * 1000, 1)}
        cpu, wall = time.process_time(), time.perf_counter()
        gone = await edge[2].tiering.evict_round()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        out["round"] = {"evicted": gone, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
                        "records_per_s": round(gone / wall, 1) if wall else None}
        evicted = [k for k in ids if mem.store.get(k) is None]
        local = [k for k in ids if k not in set(evicted)][:reads]
        took, _f, _m = await _reads(edge[1].port, local)
        out["read_tier0"] = _ms(took)
        took, fetched, _m = await _reads(edge[1].port, evicted[:reads])
        out["read_fetched_back"] = {**_ms(took), "fetched": fetched}
        await hub[2].close()
        await hub[1].close()
        hub_up = False
        took, _f, missed = await _reads(edge[1].port, evicted[reads:2 * reads])
        out["read_cache_miss"] = {**_ms(took), "cache_misses": missed}
    finally:
        await _stop(*edge)
        if hub_up:
            await _stop(*hub)
        else:
            hub[0].close()
    out["load_end"] = _load()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=2000)
    ap.add_argument("--reads", type=int, default=100)
    args = ap.parse_args()
    if args.records < 4 * args.reads:
        ap.error("--records must be at least 4 x --reads (half are evicted, two reads sets)")
    result = asyncio.run(run(args.records, args.reads))
    for key, value in result.items():
        print(f"{key}: {value}")
    print(f"wrote {save('tiers', result)}")


if __name__ == "__main__":
    main()
