"""A Jepsen-style run: concurrent writes, supersedes, invalidations and purges on every node
of a cluster whose links drop, delay, duplicate, reorder and partition — then heal and check.

``--nodes`` (3) ``amcp serve`` processes with separate stores, each pair of nodes linked
through its own fault proxy (bench/cluster.py). Each round re-draws every link's faults
from the seed, and every node gets one operation at the same time from its own client
(clients talk to their node directly; only node-to-node traffic is faulted):

* write a new record (kept as *acknowledged* only on a 201/200 ack);
* supersede an acknowledged record (a new record with ``causal.supersedes``);
* a conflict: two nodes supersede the same acknowledged record at once;
* invalidate one of the node's own records; purge one (SYNC_PUSH op purge, the protocol's
  only purge).

Every ``--partition-every`` rounds the nodes are split in two for a few rounds (reset or
black-hole). Then all faults are healed and, once every node answers the same, checked:

1. every acknowledged write is on every node (as a record or, if purged, a tombstone);
2. no purged record has content anywhere (no resurrection);
3. identical per-scope digests (the kit's digest of each node's SYNC_PULL feed);
4. the same conflict winner (``superseded_by`` of the contested record) on every node;
   and the same lifecycle of every record everywhere.

    PYTHONPATH=src:. python bench/jepsen.py --rounds 1000 --seed 7
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.cluster import Cluster
from bench.common import save

from amcp.amf import KnowledgeType
from amcp.conformance.records import make_record
from amcp.conformance.syncsteps import digest
from amcp.node import Client, RetryPolicy, connect
from amcp.testing.faultproxy import Partition

SCOPE = "jepsen"
WRITER = "amcp://ai.jepsen.fp-000000.local"
RETRY = RetryPolicy(ack_timeout=2.0, backoff=(2.0, 5.0), request_timeout=15.0,
                    connect_timeout=5.0)
READ_CHUNK = 50
KINDS = (KnowledgeType.DECISION, KnowledgeType.FACT, KnowledgeType.CONTEXT,
         KnowledgeType.PATTERN)


@dataclass
class History:
    """What the clients were told happened (only acknowledged operations count)."""

    acked: dict[str, int] = field(default_factory=dict)  # id → node that acked it
    purged: set[str] = field(default_factory=set)
    invalidated: set[str] = field(default_factory=set)
    superseded: set[str] = field(default_factory=set)
    conflicts: list[str] = field(default_factory=list)  # contested predecessors
    refused: dict[str, int] = field(default_factory=dict)  # op → refusals (not errors)

    def live(self, node: int | None = None) -> list[str]:
        gone = self.purged | self.invalidated | self.superseded
        return [k for k, n in self.acked.items() if k not in gone and (node is None or n == node)]

    def refuse(self, op: str) -> None:
        self.refused[op] = self.refused.get(op, 0) + 1


def _record(rng: random.Random, supersedes: str | None = None) -> dict[str, Any]:
    return make_record(SCOPE, WRITER, kind=rng.choice(KINDS), supersedes=supersedes,
                       subject=f"jepsen {rng.getrandbits(64):016x}", obj="under faults")


async def _write(client: Client, node: int, record: dict[str, Any], h: History,
                 op: str) -> bool:
    try:
        ack = await client.write(record)
    except Exception:  # refused (412: predecessor not here yet, 409…) or timed out
        h.refuse(op)
        return False
    if ack.queued or ack.status not in (200, 201):
        h.refuse(op)
        return False
    h.acked[record["knowledge_id"]] = node
    return True


async def _op(client: Client, node: int, rng: random.Random, h: History) -> None:
    roll = rng.random()
    mine = h.live(node)
    if roll < 0.55 or not mine:
        await _write(client, node, _record(rng), h, "write")
    elif roll < 0.75:
        old = rng.choice(mine)
        if await _write(client, node, _record(rng, supersedes=old), h, "supersede"):
            h.superseded.add(old)
    elif roll < 0.9:
        kid = rng.choice(mine)
        try:
            await client.invalidate(kid, "jepsen invalidation")
            h.invalidated.add(kid)
        except Exception:
            h.refuse("invalidate")
    else:
        kid = rng.choice(mine)
        change = {"op": "purge", "knowledge_id": kid, "hlc": int(time.time() * 1000) << 16}
        try:
            ack = await client.sync_push([change])
            if ack.get("status") in (200, 201, 204):
                h.purged.add(kid)
        except Exception:
            h.refuse("purge")


async def _conflict(clients: list[Client], rng: random.Random, h: History) -> None:
    """Two nodes supersede one record at the same moment."""
    live = h.live()
    candidates = live[: max(1, len(live) // 2)]  # older ones: likely on both nodes by now
    if len(clients) < 2 or not live:
        return
    old = rng.choice(candidates)
    a, b = rng.sample(range(len(clients)), 2)
    done = await asyncio.gather(_write(clients[a], a, _record(rng, old), h, "conflict"),
                                _write(clients[b], b, _record(rng, old), h, "conflict"))
    if any(done):
        h.superseded.add(old)
    if all(done):
        h.conflicts.append(old)


async def workload(cluster: Cluster, clients: list[Client], args: argparse.Namespace,
                   h: History) -> dict[str, int]:
    rng = random.Random(args.seed)
    partitions = 0
    split_until = -1
    for rnd in range(args.rounds):
        if rnd == split_until:
            cluster.heal()
        if args.partition_every and rnd % args.partition_every == args.partition_every - 1:
            members = list(range(len(clients)))
            rng.shuffle(members)
            cut = rng.randrange(1, len(members))
            mode = rng.choice([Partition.RESET, Partition.BLACKHOLE])
            cluster.partition([members[:cut], members[cut:]], mode)
            split_until, partitions = rnd + rng.randrange(3, 10), partitions + 1
        elif rnd > split_until:
            cluster.random_faults(rng)
        ops = [_op(c, i, random.Random(rng.getrandbits(64)), h) for i, c in enumerate(clients)]
        if rng.random() < 0.1:
            ops.append(_conflict(clients, random.Random(rng.getrandbits(64)), h))
        await asyncio.gather(*ops)
        # Let replication run under this round's faults before the next draw.
        await asyncio.sleep(args.round_s)
    return {"partitions": partitions}


async def snapshot(client: Client, ids: list[str]) -> dict[str, tuple[Any, ...]]:
    """id → (lifecycle, superseded_by, has content) as this node serves it."""
    out: dict[str, tuple[Any, ...]] = {}
    for start in range(0, len(ids), READ_CHUNK):
        got = await client.read_ids(ids[start:start + READ_CHUNK])
        for r in got.records:
            view = (r.get("vendor_extensions") or {}).get("x-state") or {}
            core = r.get("core") or {}
            out[r["knowledge_id"]] = (view.get("lifecycle"),
                                      (r.get("causal") or {}).get("superseded_by"),
                                      bool(core.get("subject")))
    return out


async def feed_digest(client: Client) -> str:
    pulled = await client.sync_pull(0, scopes=[SCOPE])
    return digest(pulled["changes"])


async def settle(clients: list[Client], ids: list[str], give_up: float) -> tuple[
        float | None, list[dict[str, tuple[Any, ...]]], list[str]]:
    """Poll until every node serves the same states and digests; seconds it took."""
    start = time.perf_counter()
    while True:
        snaps = [await snapshot(c, ids) for c in clients]
        digests = [await feed_digest(c) for c in clients]
        same = all(s == snaps[0] for s in snaps) and len(set(digests)) == 1
        if same or time.perf_counter() - start > give_up:
            return (time.perf_counter() - start if same else None), snaps, digests
        await asyncio.sleep(1.0)


def verdict(h: History, snaps: list[dict[str, tuple[Any, ...]]], digests: list[str]) -> dict[
        str, Any]:
    lost = [(k, n) for k in h.acked for n, s in enumerate(snaps) if k not in s
            and k not in h.purged]
    resurrected = [(k, n) for k in h.purged for n, s in enumerate(snaps)
                   if k in s and s[k][2]]
    winners = [k for k in h.conflicts if len({s.get(k, (None, None))[1] for s in snaps}) > 1]
    divergent = [k for k in h.acked if len({s.get(k) for s in snaps}) > 1]
    return {
        "lost_acknowledged_writes": len(lost), "resurrections": len(resurrected),
        "digest_mismatches": len(set(digests)) - 1, "divergent_conflict_winners": len(winners),
        "divergent_records": len(divergent),
        "examples": {"lost": lost[:5], "resurrected": resurrected[:5],
                     # per node: (lifecycle, superseded_by, has content), None = missing
                     "divergent": {k: [s.get(k) for s in snaps] for k in divergent[:5]}},
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    h = History()
    with tempfile.TemporaryDirectory() as tmp:
        async with Cluster(Path(tmp), args.nodes, seed=args.seed) as cluster:
            clients = [await connect("127.0.0.1", p, retry=RETRY) for p in cluster.ports]
            await asyncio.sleep(args.warmup)
            started = time.perf_counter()
            extra = await workload(cluster, clients, args, h)
            print(f"workload done: {len(h.acked)} acknowledged; healing", file=sys.stderr)
            ran = time.perf_counter() - started
            cluster.heal()
            took, snaps, digests = await settle(clients, sorted(h.acked), args.give_up)
            out = {"rounds": args.rounds, "workload_s": round(ran, 1),
                   "converged_after_heal_s": None if took is None else round(took, 2),
                   "acknowledged": len(h.acked), "purged": len(h.purged),
                   "invalidated": len(h.invalidated), "superseded": len(h.superseded),
                   "conflicts": len(h.conflicts), "refused": h.refused, **extra,
                   "proxy_stats": cluster.fault_stats(), **verdict(h, snaps, digests)}
            for c in clients:
                await c.aclose()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=1000)
    ap.add_argument("--partition-every", type=int, default=50)
    ap.add_argument("--round-s", type=float, default=0.1, help="pause after each round")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--warmup", type=float, default=4.0)
    ap.add_argument("--give-up", type=float, default=120.0)
    args = ap.parse_args()
    result = asyncio.run(run(args))
    ok = all(result[k] == 0 for k in ("lost_acknowledged_writes", "resurrections",
                                      "digest_mismatches", "divergent_conflict_winners"))
    path = save("jepsen", {
        "conditions": f"{args.nodes} amcp serve processes on loopback, each node pair through "
                      "a seeded fault proxy (drop ≤ 20 %, duplicate ≤ 10 %, reorder ≤ 10 %, "
                      "delay ≤ 20 ms on a random 30 % of links per round; partitions); 2 "
                      "cores shared with other engineers' jobs",
        "passed": ok and result["converged_after_heal_s"] is not None, **vars(args), **result})
    print(path.read_text())


if __name__ == "__main__":
    main()
