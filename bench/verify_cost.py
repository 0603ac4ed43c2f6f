"""What verified reads cost (issue 14): per served record, and opening a large store.

For every record of a store (built here with the hashing embedder, or an existing one):

- ``seal_us``: the row-seal check a read does for every row it serves (HMAC-SHA256 over the
  sealed columns and the body's sha256) — ``rowseal.Sealer.check``;
- ``body_us``: what a first read of a body adds (decode, id, checksum and envelope
  recomputed) — ``Verifier.open_body``; later reads of the same record use the decoded
  copy, keyed by its seal;
- ``get_us``: a whole read by id through the store, warm (row cache and decoded cache);
- ``open_ms``: opening the store with the check on open (quick_check, chain from the mark,
  signed head, the sum of all seals against the signed digest, witnesses), median of runs,
  and ``digest_ms``: the seal sum alone;
- ``fast_open_ms``: opening it with the hooks' fast reader (witnesses, the head's MAC, the
  log tail, record count and census, in one snapshot; no chain walk, no seal sum), and
  ``fast_ranked_ms``: its pointer tier of 40 verified records after that open.

    .venv/bin/python bench/verify_cost.py [--size 100000] [--data /work/benchcache/verify]
    .venv/bin/python bench/verify_cost.py --store /work/benchcache/latency/100000/lat.db
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import median, percentile, save

from amcp.memory import Memory
from amcp.store import sqlite_rows as col
from amcp.store.rowseal import digest_of
from amcp.store.sqlite import SQLiteStore

WORDS = (
    "deploy", "cache", "planner", "tabs", "spaces", "postgres", "redis", "kafka", "billing",
    "invoice", "alice", "bob", "thursday", "friday", "window", "review", "incident",
    "outage", "token", "budget", "latency",
)


def build(path: Path, size: int) -> None:
    rng = random.Random(7)
    with Memory(path, embedder="hashing") as mem:
        have = mem.stats().records
        batch = []
        for i in range(have, size):
            text = " ".join(rng.choice(WORDS) for _ in range(12)) + f" #{i}"
            batch.append({"text": text, "scope": f"team:{i % 8}", "tags": [f"t{i % 50}"]})
            if len(batch) == 1000:
                mem.remember_many(batch)
                batch = []
        if batch:
            mem.remember_many(batch)


def per_record(store: SQLiteStore, sample: int) -> dict[str, float]:
    rows = store.conn.db.execute(
        f"SELECT {col.ROW_COLS} FROM records r WHERE r.body IS NOT NULL ORDER BY random() "
        "LIMIT ?", (sample,)
    ).fetchall()
    seal, body, get = [], [], []
    for row in rows:
        t = time.perf_counter()
        store.verifier.sealer.check(row[col.ROWID], row[col.FACTS], row[col.BODY], row[col.SEAL])
        seal.append((time.perf_counter() - t) * 1e6)
        t = time.perf_counter()
        store.verifier.open_body(row, signature=False)
        body.append((time.perf_counter() - t) * 1e6)
    ids = [row[col.KID] for row in rows]
    for kid in ids:
        store.get(kid)  # warm both caches
    for kid in ids:
        t = time.perf_counter()
        store.get(kid)
        get.append((time.perf_counter() - t) * 1e6)
    return {
        "seal_us_p50": median(seal), "seal_us_p95": percentile(seal, 95),
        "body_us_p50": median(body), "body_us_p95": percentile(body, 95),
        "get_warm_us_p50": median(get), "get_warm_us_p95": percentile(get, 95),
        "sample": len(rows),
    }


def open_times(path: Path, runs: int) -> dict[str, float]:
    times, digests = [], []
    for _ in range(runs):
        t = time.perf_counter()
        with Memory(path, embedder=None, check_embedder=False) as mem:
            times.append((time.perf_counter() - t) * 1000)
            store = mem.store
            assert isinstance(store, SQLiteStore)
            t = time.perf_counter()
            digest_of(r[0] for r in store.conn.db.execute("SELECT seal FROM records"))
            digests.append((time.perf_counter() - t) * 1000)
    return {"open_ms_median": median(times), "open_ms_runs": times,
            "digest_ms_median": median(digests)}


def fast_open_times(path: Path, runs: int) -> dict[str, float]:
    from amcp.store.fastread import FastReader

    opens, ranked = [], []
    for _ in range(runs):
        t = time.perf_counter()
        with FastReader(path) as reader:
            opens.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            reader.ranked(["team:1"], 40)
            ranked.append((time.perf_counter() - t) * 1000)
    return {"fast_open_ms_median": median(opens), "fast_open_ms_runs": opens,
            "fast_ranked_ms_median": median(ranked)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--data", type=Path, default=Path("/tmp/amcp-verify-bench"))
    ap.add_argument("--store", type=Path, help="measure an existing store instead")
    ap.add_argument("--sample", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    path = args.store or args.data / str(args.size) / "memory.db"
    if args.store is None:
        t = time.perf_counter()
        build(path, args.size)
        print(f"store ready in {time.perf_counter() - t:.0f} s: {path}")
    row: dict[str, object] = {"store": str(path)}
    row |= open_times(path, args.runs)
    row |= fast_open_times(path, args.runs * 4)
    with Memory(path, embedder=None, check_embedder=False) as mem:
        assert isinstance(mem.store, SQLiteStore)
        row["records"] = mem.stats().records
        row |= per_record(mem.store, args.sample)
    for key, value in row.items():
        print(f"{key:18} {value}")
    save("verify_cost", {"rows": [row]})


if __name__ == "__main__":
    main()
