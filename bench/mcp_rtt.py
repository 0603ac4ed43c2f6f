"""MCP tool-call round trips over stdio: ``memory_recall`` on a 10k-record store.

The server is ``amcp mcp`` as an MCP client launches it (a subprocess over stdin/stdout,
via the standalone entry ``python -m amcp.cli.api_cmd mcp``); the client is the official
SDK's. Target: p95 <= 30 ms with the hashing embedder.

    .venv/bin/python bench/mcp_rtt.py [--records 10000] [--calls 300] [--embedder hashing|minilm]
        [--data DIR]  # keep the built store there and reuse it

Writes bench/results/mcp_rtt.json (one entry per embedder run, merged with earlier runs).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from common import RESULTS, child_pids, machine, percentile, process_cpu_s, save  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.stdio import get_default_environment  # noqa: E402

from amcp.memory import Memory  # noqa: E402

TOPICS = ["deploy", "database", "pytest", "frontend", "auth", "billing", "search", "cache",
          "queue", "metrics", "logging", "docker", "kubernetes", "api", "schema", "migration"]
VERBS = ["uses", "requires", "breaks when", "is faster with", "was replaced by", "needs"]
THINGS = ["connection pooling", "a retry budget", "feature flags", "UTC timestamps",
          "idempotency keys", "structured logs", "a warm cache", "the v2 client", "uv",
          "read replicas", "batch inserts", "a circuit breaker", "signed URLs"]


def build_store(path: Path, records: int, embedder: str) -> float:
    rng = random.Random(7)
    started = time.perf_counter()
    with Memory(path, embedder=embedder) as mem:
        batch: list[dict[str, Any]] = []
        for i in range(records):
            topic = rng.choice(TOPICS)
            batch.append({
                "text": f"The {topic} service {rng.choice(VERBS)} {rng.choice(THINGS)} "
                        f"(note {i}, team {rng.randrange(40)})",
                "scope": f"proj:{topic}",
                "tags": [topic],
            })
            if len(batch) == 1000:
                mem.remember_many(batch)
                batch.clear()
        if batch:
            mem.remember_many(batch)
    return time.perf_counter() - started


async def measure(
    store: Path, embedder: str, calls: int, warmup: int, profile: Path | None = None
) -> dict[str, Any]:
    # The SDK passes a client's server only a few safe variables (PATH, HOME...): name this
    # tree's sources explicitly, or the subprocess would import whatever amcp is installed.
    env = {**get_default_environment(), "PYTHONPATH": str(ROOT / "src")}
    prof = ["-m", "cProfile", "-o", str(profile)] if profile else []
    params = StdioServerParameters(
        command=sys.executable,
        args=[*prof, "-m", "amcp.cli.api_cmd", "mcp", "--store", str(store),
              "--embedder", embedder],
        cwd=str(ROOT),
        env=env,
    )
    rng = random.Random(11)
    queries = [f"what does the {rng.choice(TOPICS)} service need for {rng.choice(THINGS)}"
               for _ in range(calls + warmup)]
    times: list[float] = []
    started = time.perf_counter()
    async with Client(params, read_timeout_seconds=120) as client:
        connect_s = time.perf_counter() - started
        # CPU time of each side per call: the figure a loaded machine distorts least.
        (server,) = child_pids()
        server_cpu, client_cpu = process_cpu_s(server), time.process_time()
        for i, query in enumerate(queries):
            if i == warmup:
                server_cpu, client_cpu = process_cpu_s(server), time.process_time()
            t0 = time.perf_counter()
            result = await client.call_tool("memory_recall", {"query": query, "k": 8})
            dt = (time.perf_counter() - t0) * 1000
            if result.is_error:
                raise RuntimeError(result.content)
            if i >= warmup:
                times.append(dt)
        server_cpu = process_cpu_s(server) - server_cpu
        client_cpu = time.process_time() - client_cpu
    return {
        "embedder": embedder,
        "calls": len(times),
        "k": 8,
        "connect_s": round(connect_s, 3),
        "p50_ms": round(percentile(times, 50), 3),
        "p95_ms": round(percentile(times, 95), 3),
        "p99_ms": round(percentile(times, 99), 3),
        "max_ms": round(max(times), 3),
        "server_cpu_ms_per_call": round(server_cpu * 1000 / len(times), 2),
        "client_cpu_ms_per_call": round(client_cpu * 1000 / len(times), 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=10_000)
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--embedder", default="hashing")
    ap.add_argument("--data", type=Path, help="build the store here once and reuse it")
    ap.add_argument("--profile", type=Path, help="cProfile the server into this file")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = args.data or Path(tmp)
        store = base / f"mcp-{args.embedder}-{args.records}" / "bench.db"
        build_s = None if store.exists() else build_store(store, args.records, args.embedder)
        run = asyncio.run(measure(store, args.embedder, args.calls, args.warmup, args.profile))
    run["records"] = args.records
    run["build_s"] = None if build_s is None else round(build_s, 2)
    run["load_avg"] = [round(x, 2) for x in os.getloadavg()]
    run["target_p95_ms"] = 30
    run["meets_target"] = run["p95_ms"] <= 30
    run["machine"] = machine()
    previous = RESULTS / "mcp_rtt.json"
    runs: dict[str, Any] = {}
    if previous.exists():
        runs = json.loads(previous.read_text()).get("runs", {})
    runs[f"{args.embedder}-{args.records}"] = run
    path = save("mcp_rtt", {
        "what": "memory_recall round trip over MCP stdio (SDK client -> amcp mcp subprocess)",
        "runs": runs,
    })
    print(json.dumps(run, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
