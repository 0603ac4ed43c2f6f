"""CSE pack benchmark: build time at 10k and 100k records, and digest determinism.

    .venv/bin/python bench/cse_pack.py [--sizes 10000 100000] [--packs 50] [--data DIR]

Stores are built once (hashing embedder, ``Memory.put_many``) under ``--data`` and reused.
Timing: ``Memory.context`` wall time per pack, 50+ packs with different tasks after one
warm-up pack (the first pack of a process builds the vector index and ranks the core types;
it is reported separately as ``first_pack_ms``). Determinism: one request built 100 times
in this process and once in each of 2 fresh processes must give one digest.
Writes bench/results/cse_pack.json.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import RESULTS, machine, median, percentile

from amcp.amf.types import KnowledgeType as KT  # noqa: N817
from amcp.memory import Memory

WORDS = [
    "alpha", "beta", "gamma", "delta", "order", "price", "risk", "api", "timeout", "retry",
    "cache", "index", "query", "token", "budget", "scope", "deploy", "build", "test", "lint",
    "schema", "migration", "vector", "embed", "latency", "memory", "agent", "trade", "signal",
    "python", "rust", "sqlite", "postgres", "network", "socket", "frame", "window", "pack",
    "digest", "cluster",
]
TYPES = [KT.FACT, KT.PITFALL, KT.PRINCIPLE, KT.DECISION, KT.CONTEXT, KT.PATTERN]
T0 = 1_760_000_000.0  # records are created one second apart from here
REQUEST = {"task": "retry the api call after a timeout", "budget_tokens": 8000}


def build(path: Path, n: int) -> None:
    if path.exists():
        return
    rng = random.Random(n)
    mem = Memory(path, embedder="hashing")
    batch = []
    for i in range(n):
        ktype = TYPES[i % len(TYPES)]
        text = " ".join(rng.choice(WORDS) for _ in range(12)) + f" #{i}"
        batch.append((mem.compose(
            text, type=ktype, scope=["project:bench"], subject=f"ns{i % 500}.t{i % 7}.item",
            sample_size=10 if ktype is KT.PATTERN else None, created_at=T0 + i,
        ), False))
        if len(batch) == 5000:
            mem.put_many(batch)
            batch = []
    if batch:
        mem.put_many(batch)
    mem.close()


def digest_once(path: Path, now: float) -> str:
    with Memory(path, embedder="hashing") as mem:
        digest = str(mem.context(REQUEST["task"], budget_tokens=8000, now=now).digest)
        # Above 20k vectors the retrieval index builds an HNSW graph in a background thread;
        # exiting while faiss is still building aborts the process (SIGABRT), so wait.
        index = mem.searcher.index
        if index is not None:
            index.wait_for_ann(timeout=900)
        return digest


def run(path: Path, n: int, packs: int) -> dict[str, object]:
    now = T0 + n + 3600.0
    rng = random.Random(99)
    with Memory(path, embedder="hashing") as mem:
        t = time.perf_counter()
        mem.context("warm up", budget_tokens=8000, now=now)
        first = (time.perf_counter() - t) * 1000
        times = []
        for _ in range(packs):
            task = " ".join(rng.choice(WORDS) for _ in range(6))
            t = time.perf_counter()
            mem.context(task, budget_tokens=8000, now=now)
            times.append((time.perf_counter() - t) * 1000)
        digests = {mem.context(REQUEST["task"], budget_tokens=8000, now=now).digest
                   for _ in range(100)}
    procs = {
        subprocess.run(
            [sys.executable, __file__, "--digest", str(path), str(now)],
            check=True, capture_output=True, text=True,
        ).stdout.strip()
        for _ in range(2)
    }
    return {
        "records": n, "packs": packs, "first_pack_ms": round(first, 2),
        "p50_ms": round(median(times), 2), "p95_ms": round(percentile(times, 95), 2),
        "max_ms": round(max(times), 2),
        "digest_in_process_runs": 100, "distinct_digests_in_process": len(digests),
        "distinct_digests_across_2_processes": len(procs | digests),
        "digest": sorted(digests)[0],
    }


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--digest":
        print(digest_once(Path(sys.argv[2]), float(sys.argv[3])))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--packs", type=int, default=50)
    ap.add_argument("--data", type=Path, default=Path("/tmp/amcp-bench-cse"))
    args = ap.parse_args()
    results = []
    for n in args.sizes:
        path = args.data / f"s{n}" / "memory.db"
        t = time.perf_counter()
        build(path, n)
        print(f"store {n}: ready in {time.perf_counter() - t:.1f}s", flush=True)
        res = run(path, n, args.packs)
        print(json.dumps(res), flush=True)
        results.append(res)
    RESULTS.mkdir(exist_ok=True)
    out = {
        "bench": "cse_pack", "machine": machine(), "embedder": "hashing-v1-384",
        "budget_tokens": 8000, "target": "p95 <= 20 ms at 100k records", "results": results,
        "command": "python bench/cse_pack.py " + " ".join(sys.argv[1:]),
    }
    (RESULTS / "cse_pack.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
