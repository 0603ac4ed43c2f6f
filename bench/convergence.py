"""T3-01's figure: how long a change takes to reach 95 % of nodes under packet loss.

``--nodes`` (5) ``amcp serve`` processes peered through fault proxies (bench/cluster.py)
that drop ``--loss`` (5 %) of the frames on every link, handshakes spared. Each change is
written on a random node; every node is polled by id every 20 ms until ceil(95 %) of them
hold it. Two kinds: KT-DECISION (carried by gossip rounds) and KT-FACT (pushed at once to
tier-1 peers, PROFILE §10). Median and p95 per kind, JSON in bench/results/.

    PYTHONPATH=src:. python bench/convergence.py --changes 20
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.cluster import Cluster
from bench.common import median, percentile, save

from amcp.amf import KnowledgeType
from amcp.conformance.records import make_record
from amcp.node import Client, RetryPolicy, connect
from amcp.testing.faultproxy import Faults

SCOPE = "bench-convergence"
POLL = 0.02
RETRY = RetryPolicy(ack_timeout=2.0, backoff=(2.0, 5.0), request_timeout=20.0,
                    connect_timeout=5.0)


async def _holders(clients: list[Client], kid: str) -> int:
    got = await asyncio.gather(*(c.read_ids([kid]) for c in clients), return_exceptions=True)
    return sum(1 for g in got if not isinstance(g, BaseException) and g.records)


async def one_change(clients: list[Client], rng: random.Random, kind: KnowledgeType,
                     give_up: float) -> float | None:
    src = rng.randrange(len(clients))
    record = make_record(SCOPE, "amcp://ai.bench.fp-000000.local", kind=kind,
                         subject=f"convergence {rng.getrandbits(64):016x}", obj="spreads")
    need = math.ceil(0.95 * len(clients))
    start = time.perf_counter()
    await clients[src].write(record)
    while time.perf_counter() - start < give_up:
        if await _holders(clients, record["knowledge_id"]) >= need:
            return time.perf_counter() - start
        await asyncio.sleep(POLL)
    return None


async def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        async with Cluster(Path(tmp), args.nodes, seed=args.seed) as cluster:
            clients = [await connect("127.0.0.1", p, retry=RETRY) for p in cluster.ports]
            await asyncio.sleep(args.warmup)  # let every link connect and exchange members
            cluster.set_faults(Faults(drop=args.loss))
            out: dict[str, Any] = {}
            for kind in (KnowledgeType.DECISION, KnowledgeType.FACT):
                times = [await one_change(clients, rng, kind, args.give_up)
                         for _ in range(args.changes)]
                done = [t for t in times if t is not None]
                out[kind.value] = {
                    "changes": len(times), "reached_95pct": len(done),
                    "median_s": round(median(done), 3) if done else None,
                    "p95_s": round(percentile(done, 95), 3) if done else None,
                    "max_s": round(max(done), 3) if done else None,
                }
            out["proxy_stats"] = cluster.fault_stats()
            for c in clients:
                await c.aclose()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=5)
    ap.add_argument("--loss", type=float, default=0.05)
    ap.add_argument("--changes", type=int, default=20)
    ap.add_argument("--give-up", type=float, default=60.0)
    ap.add_argument("--warmup", type=float, default=4.0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    result = asyncio.run(run(args))
    path = save("convergence", {
        "conditions": f"{args.nodes} amcp serve processes on loopback, every link through a "
                      f"fault proxy dropping {args.loss:.0%} of frames (handshakes spared), "
                      "gossip_interval 0.5 s; 2 cores shared with other engineers' jobs",
        "target": "T3-01: 95 % of nodes within 60 s", **vars(args), **result})
    print(path.read_text())


if __name__ == "__main__":
    main()
