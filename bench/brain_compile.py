"""Brain compile at scale (issue 22 targets).

* compile of a 100k-record store ≤ 10 s;
* INDEX.md ≤ 8 KB;
* byte-identical output across two runs, and across two "machines" — two processes with
  different ``TZ`` and a wall clock skewed by days — given the same ``--now``.

The store is built once with the hashing embedder through ``Memory.remember_many`` in
batches (500 scopes, several kinds and types, 1% superseded, some outcomes and lifefacts)
and cached under /tmp; ``--rebuild`` makes it again.

    .venv/bin/python bench/brain_compile.py [--records 100000] [--rebuild] [--runs 3]
        [--reference DIR] [--workers auto,0]

Each run: a cold compile into a fresh directory, then a warm one into the same directory;
CPU (user+sys of this process and of the worker processes it waited for) and wall time of
each, with the load average, and medians. ``--workers`` lists the settings compared (one
cold compile each per run, interleaved, so a slow minute of this shared machine hits them
alike): ``auto`` is the default (one worker per spare core), ``0`` the read in one process.
The first setting's figures are the headline ones.
``--reference``: a directory compiled from the same store and ``--now`` by other code (the
checkout before a change): the output must be byte-identical to it.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import cpu_with_children_s, save

NOW = "2026-12-01T00:00:00Z"
KINDS = ["learning", "work_boundary", "preference", "decision", "pitfall", "lifefact", None]
TYPES = ["KT-FACT", "KT-CONTEXT", "KT-DECISION", "KT-PITFALL", "KT-FACT"]
WORDS = ["deploy", "build", "cache", "retry", "token", "schema", "index", "region", "pointer",
         "weight", "outcome", "commit", "branch", "review", "test", "flaky", "timeout",
         "queue", "worker", "lock", "store", "sync", "merge"]

# Runs one compile in a child process whose wall clock is skewed by SKEW seconds: what a
# second machine with a wrong clock (and another TZ) would do with the same --now.
CHILD = """
import sys, time
skew = float(sys.argv[1])
real = time.time
time.time = lambda: real() + skew
from amcp.cli.app import app
sys.argv = ["amcp", *sys.argv[2:]]
app()
"""


def build(path: Path, n: int) -> None:
    from amcp.memory import Memory

    if path.parent.exists():
        shutil.rmtree(path.parent)
    rng = random.Random(22)
    with Memory(path, embedder="hashing") as mem:
        ids: list[str] = []
        for start in range(0, n, 1000):
            batch = []
            for i in range(start, min(n, start + 1000)):
                words = " ".join(rng.choice(WORDS) for _ in range(8))
                batch.append({
                    "text": f"Memory {i}: {words}.",
                    "scope": f"project:p{i % 500:03d}",
                    "type": TYPES[i % len(TYPES)],
                    "kind": KINDS[i % len(KINDS)],
                    "created_at": 1_780_000_000 + i,
                })
            ids += [o.knowledge_id for o in mem.remember_many(batch)]
        for kid in ids[: n // 100]:
            mem.supersede(kid, f"{mem.get(kid).record.text} (revised)")  # type: ignore[union-attr]
        for start in range(n // 100, n // 100 + 2000, 100):
            mem.outcome(ids[start:start + 50], "success")
            mem.outcome(ids[start + 50:start + 100], "failure")


def digest(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.iterdir()) if p.is_file()}


def run(store: Path, out: Path, tz: str, skew: float) -> float:
    if out.exists():
        shutil.rmtree(out)  # a fresh directory: a cold compile
    env = dict(os.environ, TZ=tz, AMCP_HOME=str(store.parent))
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", CHILD, str(skew), "brain", "compile", str(out),
         "--store", str(store), "--now", NOW],
        check=True, env=env, stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


def timed(compile_once: Callable[[], Any]) -> tuple[tuple[float, float, tuple[float, ...]], Any]:
    """((wall s, CPU s of this process and its workers, load average before), result)."""
    load = os.getloadavg()
    t, c = time.perf_counter(), cpu_with_children_s()
    result = compile_once()
    return (time.perf_counter() - t, cpu_with_children_s() - c, load), result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--dir", type=Path, default=Path("/tmp/amcp-bench-brain"))
    ap.add_argument("--runs", type=int, default=3, help="cold and warm compiles each")
    ap.add_argument("--reference", type=Path, default=None,
                    help="a directory compiled from the same store and --now by another "
                         "checkout (the code before a change): compared byte for byte")
    ap.add_argument("--workers", default="auto,0",
                    help="comma-separated worker settings for the cold compiles: auto or N")
    args = ap.parse_args()
    names = args.workers.split(",")
    from amcp.brain.parts import default_workers

    settings = [default_workers() if w == "auto" else int(w) for w in names]
    store = args.dir / f"store-{args.records}" / "memory.db"
    if args.rebuild or not store.exists():
        t = time.perf_counter()
        build(store, args.records)
        print(f"built {args.records} records in {time.perf_counter() - t:.1f} s")

    from amcp.brain.compile import compile_brain
    from amcp.brain.entries import parse_now
    from amcp.memory import Memory

    load_before = os.getloadavg()
    # In-process compile time (the target): open the store first, then time the compile.
    # Cold: a fresh directory (every body read and verified by the store); warm: the same
    # directory again (bodies come from the compile cache, states from the store).
    colds: dict[str, list[tuple[float, float, tuple[float, ...]]]] = {n: [] for n in names}
    warm: list[tuple[float, float, tuple[float, ...]]] = []
    outs = [args.dir / f"inproc-{i}-w{n}" for i in range(args.runs) for n in names]
    for out in outs:
        shutil.rmtree(out, ignore_errors=True)
    with Memory(store, embedder=None, check_embedder=False) as mem:
        for i in range(args.runs):
            for name, workers in zip(names, settings, strict=True):
                out = args.dir / f"inproc-{i}-w{name}"
                figures, report = timed(lambda out=out, w=workers: compile_brain(
                    mem, out, now=parse_now(NOW), workers=w))
                colds[name].append(figures)
                print(f"run {i} workers={name}: cold {figures[0]:.2f} s wall, "
                      f"{figures[1]:.2f} s CPU", flush=True)
            # warm: the last cold directory again (bodies from its cache, states from the store)
            warm.append(timed(lambda out=out: compile_brain(mem, out, now=parse_now(NOW)))[0])
    first = digest(outs[0])
    same_runs = all(digest(out) == first for out in outs[1:])
    cold = colds[names[0]]
    # Two "machines": other TZ, clock skewed by +3 days and −5 hours; whole CLI process.
    a = run(store, args.dir / "machine-a", "UTC", 3 * 86400)
    b = run(store, args.dir / "machine-b", "Pacific/Kiritimati", -5 * 3600)
    same_machines = digest(args.dir / "machine-a") == digest(args.dir / "machine-b") == first
    index_bytes = (outs[0] / "INDEX.md").stat().st_size

    def summary(runs: list[tuple[float, float, tuple[float, ...]]]) -> dict[str, object]:
        return {
            "wall_s": [round(w, 3) for w, _, _ in runs],
            "cpu_s": [round(c, 3) for _, c, _ in runs],
            "median_wall_s": round(statistics.median(w for w, _, _ in runs), 3),
            "median_cpu_s": round(statistics.median(c for _, c, _ in runs), 3),
            "load_avg_before": [list(load) for _, _, load in runs],
        }

    payload = {
        "records": report.records,
        "regions": report.regions,
        "cold": summary(cold),
        "cold_by_workers": {name: summary(runs) for name, runs in colds.items()},
        "workers_default": default_workers(),
        "warm": summary(warm),
        "cli_process_s": [round(a, 3), round(b, 3)],
        "index_bytes": index_bytes,
        "files": len(first),
        "byte_identical_runs": same_runs,
        "byte_identical_machines": same_machines,
        "byte_identical_reference": (digest(args.reference) == first
                                     if args.reference is not None else None),
        "targets": {"compile_s": 10, "index_bytes": 8192},
        "load_avg_before": load_before,
        "load_avg": os.getloadavg(),
    }
    print(payload)
    save("brain_compile" if args.records == 100_000 else f"brain_compile_{args.records}",
         payload)


if __name__ == "__main__":
    main()
