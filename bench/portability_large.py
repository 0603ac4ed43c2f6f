"""A 2 GB import (issue 19, bad input: "a 2 GB file, streamed, bounded memory").

Writes a JSONL file of ``--gb`` gigabytes (generic ``{"text", "created_at", "user"}`` lines
of ~430 bytes; ``--distinct`` different texts, repeated, as an app's log-like dump is), then
imports it into a fresh store with the hashing embedder: the health pass and the write pass
both stream the file. Reports wall time per pass, items/s, the peak resident memory of the
process (``ru_maxrss``) against the file size, and the verification result.

What grows with the input is the planner's dedup keys, one per distinct item kept (the
figure ``bytes_per_distinct_item`` below); everything else is per batch.

    .venv/bin/python bench/portability_large.py [--gb 2] [--distinct 20000] [--keep]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import save

from amcp.memory import Memory
from amcp.portability.api import import_path, plan_import
from amcp.portability.model import ImportOptions


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def write_file(path: Path, gb: float, distinct: int) -> tuple[int, int]:
    rng = random.Random(19)
    words = ("deploy", "cache", "billing", "alice", "bob", "window", "review", "latency",
             "postgres", "budget", "incident", "token", "friday", "invoice", "kafka")
    texts = [" ".join(rng.choice(words) for _ in range(12)) + f" note {i} " + "x" * 300
             for i in range(distinct)]
    target = int(gb * 1024**3)
    written = lines = 0
    with path.open("w", encoding="utf-8") as out:
        while written < target:
            chunk = []
            for _ in range(10_000):
                n = lines % distinct
                chunk.append(json.dumps({"text": texts[n], "created_at": 1709647500 + n,
                                         "user": f"user{n % 7}"}) + "\n")
                lines += 1
            block = "".join(chunk)
            out.write(block)
            written += len(block.encode("utf-8"))
    return written, lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gb", type=float, default=2.0)
    ap.add_argument("--distinct", type=int, default=20_000)
    ap.add_argument("--dir", type=Path, default=None, help="where the file and store go")
    ap.add_argument("--keep", action="store_true", help="keep the file and the store")
    args = ap.parse_args()
    base = args.dir or Path(tempfile.mkdtemp(prefix="amcp-2gb-"))
    base.mkdir(parents=True, exist_ok=True)
    src = base / "dump.jsonl"
    t = time.perf_counter()
    size, lines = write_file(src, args.gb, args.distinct)
    print(f"wrote {size / 1024**3:.2f} GiB, {lines} lines in {time.perf_counter() - t:.0f} s")
    options = ImportOptions(kind="table", mapping={"text": "text", "created_at": "created_at",
                                                   "scope": "user"})
    before = _rss_mb()
    with Memory(base / "store" / "memory.db", embedder="hashing") as mem:
        t = time.perf_counter()
        health = plan_import(mem, src, options)
        plan_s = time.perf_counter() - t
        after_plan = _rss_mb()
        print(f"health pass: {health.items} items in {plan_s:.0f} s, peak RSS {after_plan:.0f} MB")
        t = time.perf_counter()
        result = import_path(mem, src, options)
        import_s = time.perf_counter() - t
        records = mem.stats().records
    peak = _rss_mb()
    row = {
        "file_bytes": size, "lines": lines, "distinct": args.distinct,
        "health_pass_s": round(plan_s, 1), "import_s": round(import_s, 1),
        "items_per_s_health": round(lines / plan_s), "items_per_s_import": round(lines / import_s),
        "records": records, "created": result.created, "ok": result.ok,
        "rss_mb_before": round(before), "rss_mb_peak_after_health": round(after_plan),
        "rss_mb_peak": round(peak),
        "bytes_per_distinct_item": round((after_plan - before) * 1024 * 1024 / args.distinct),
        "decisions": result.health.decisions,
    }
    for key, value in row.items():
        print(f"{key:26} {value}")
    print("wrote", save("portability_large", {"rows": [row]}))
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
