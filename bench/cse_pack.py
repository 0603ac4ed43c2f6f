"""CSE pack benchmark: build time at 10k and 100k records, and digest determinism.

    .venv/bin/python bench/cse_pack.py [--sizes 10000 100000] [--packs 50] [--writes 6]
        [--data DIR]

Stores are built once (hashing embedder, ``Memory.put_many``) under ``--data`` and reused.

Timing (``Memory.context`` wall time, and CPU time of this process):

- ``open_ms``: opening the store; ``first_pack_ms``: the first pack of the process (it loads
  the vector index from the store and ranks the core types);
- ``p50_ms`` / ``p95_ms``: ``--packs`` packs, each for a different task. Above 20k vectors the
  retrieval index builds an HNSW graph in a background thread (tens of seconds of both
  cores, for recall — packs use exact search); timed packs start after it has finished
  (``ann_wait_s``), so they measure the pack, not the build competing with it;
- ``after_write_*``: ``--writes`` times, one record is remembered (cycling through the types,
  so the core ranking must take it in), and the next pack — again a new task — is timed.
  The written records are purged at the end, so the store's content is as before.

Pre-scan recall (``prescan_*``): for 200 tasks, the exact top-48 by cosine over every indexed
vector (float64, ties by row id) against the candidates of the quantised pre-scan
(``amcp.cse.relevance``); a record of the exact top-48 outside the candidates is a miss.

Determinism: one request built 100 times in this process and once in each of 2 fresh
processes must give one digest. The load average is recorded before and after.
Writes bench/results/cse_pack.json.
"""

from __future__ import annotations

import argparse
import json
import os
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


def prescan_misses(mem: Memory, tasks: int = 200) -> dict[str, object]:
    """How often the SQ8 pre-scan's candidates miss a record of the exact top-``HITS``."""
    import numpy as np

    from amcp.cse.pack import HITS
    from amcp.cse.relevance import CANDIDATES, _prescan, _unit

    index = mem.searcher._ensure_index()
    if index is None or mem.embedder is None:
        return {}
    members = index.ids()
    parts = [(ids[np.isin(ids, members)], _unit(mat[np.isin(ids, members)]))
             for ids, mat in mem.store.capabilities.vectors.iter_vectors()]
    ids = np.concatenate([p[0] for p in parts])
    mat = np.concatenate([p[1] for p in parts]).astype(np.float64)
    rng = random.Random(2026)
    missed = tasks_missing = 0
    sizes = []
    for _ in range(tasks):
        q = np.asarray(mem.embedder.embed_query(" ".join(rng.choice(WORDS) for _ in range(6))),
                       dtype=np.float32)
        q = q / np.float32(np.linalg.norm(q))
        exact = ids[np.lexsort((ids, -(mat @ q.astype(np.float64))))[:HITS]]
        cands = _prescan(mem.store, index, q, CANDIDATES)
        sizes.append(len(cands))
        lost = len(set(exact.tolist()) - set(cands.tolist()))
        missed += lost
        tasks_missing += lost > 0
    return {"prescan_tasks": tasks, "prescan_candidates_p50": median(sizes),
            "prescan_tasks_with_a_miss": tasks_missing,
            "prescan_missed_records": missed, "prescan_exact_records": tasks * HITS}


def _timed(mem: Memory, task: str, now: float) -> tuple[float, float]:
    c, t = time.process_time(), time.perf_counter()
    mem.context(task, budget_tokens=8000, now=now)
    return (time.perf_counter() - t) * 1000, (time.process_time() - c) * 1000


def run(path: Path, n: int, packs: int, writes: int) -> dict[str, object]:
    now = T0 + n + 3600.0
    rng = random.Random(99)
    load_before = os.getloadavg()
    t = time.perf_counter()
    mem = Memory(path, embedder="hashing")
    open_ms = (time.perf_counter() - t) * 1000
    try:
        first, _ = _timed(mem, "warm up", now)
        t = time.perf_counter()
        index = mem.searcher.index
        if index is not None:
            index.wait_for_ann(timeout=900)
        ann_wait = time.perf_counter() - t

        def task() -> str:
            return " ".join(rng.choice(WORDS) for _ in range(6))

        timed = [_timed(mem, task(), now) for _ in range(packs)]
        times, cpu = [w for w, _ in timed], [c for _, c in timed]
        digests = {mem.context(REQUEST["task"], budget_tokens=8000, now=now).digest
                   for _ in range(100)}
        procs = {
            subprocess.run(
                [sys.executable, __file__, "--digest", str(path), str(now)],
                check=True, capture_output=True, text=True,
            ).stdout.strip()
            for _ in range(2)
        }
        after, written = [], []
        nonce = f"{time.time_ns():x}"
        for i in range(writes):
            ktype = TYPES[i % len(TYPES)]
            out = mem.remember(
                f"bench write {nonce} {i} " + task(), type=ktype, scope=["project:bench"],
                subject=f"ns{i}.write.item", sample_size=10 if ktype is KT.PATTERN else None,
            )
            written.append(out.knowledge_id)
            after.append(_timed(mem, task(), now)[0])
        for kid in written:
            mem.purge(kid, reason="cse_pack bench write")
        after_purge = mem.context(REQUEST["task"], budget_tokens=8000, now=now).digest
        recall = prescan_misses(mem)
    finally:
        index = mem.searcher.index
        if index is not None:  # exiting while faiss builds aborts the process
            index.wait_for_ann(timeout=900)
        mem.close()
    return {
        "records": n, "packs": packs, "open_ms": round(open_ms, 1),
        "first_pack_ms": round(first, 2), "ann_wait_s": round(ann_wait, 1),
        "p50_ms": round(median(times), 2), "p95_ms": round(percentile(times, 95), 2),
        "max_ms": round(max(times), 2), "cpu_p50_ms": round(median(cpu), 2),
        "cpu_p95_ms": round(percentile(cpu, 95), 2),
        "writes": writes,
        "after_write_p50_ms": round(median(after), 2) if after else None,
        "after_write_max_ms": round(max(after), 2) if after else None,
        "digest_in_process_runs": 100, "distinct_digests_in_process": len(digests),
        "distinct_digests_across_2_processes": len(procs | digests),
        "digest_unchanged_after_purging_writes": after_purge in digests,
        "digest": sorted(digests)[0],
        **recall,
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--digest":
        print(digest_once(Path(sys.argv[2]), float(sys.argv[3])))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--packs", type=int, default=50)
    ap.add_argument("--writes", type=int, default=6)
    ap.add_argument("--data", type=Path, default=Path("/tmp/amcp-bench-cse"))
    args = ap.parse_args()
    results = []
    for n in args.sizes:
        path = args.data / f"s{n}" / "memory.db"
        t = time.perf_counter()
        build(path, n)
        print(f"store {n}: ready in {time.perf_counter() - t:.1f}s", flush=True)
        res = run(path, n, args.packs, args.writes)
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
