"""Recall latency (p50/p95/p99, query embedding included) and ingest rate at 10k and 100k.

Memories are synthetic but varied (templated sentences over a few thousand words, several
scopes and types), ingested through ``Memory.remember_many`` in batches — the bulk API that
embeds a batch at once — and queried with 300 distinct questions through ``Memory.recall``.

    .venv/bin/python bench/latency.py [--sizes 10000 100000] [--embedder minilm]
        [--data /work/benchcache/latency]   # build each size once there, then only query
    .venv/bin/python bench/latency.py --ingest-only --sizes 10000 [--embedder minilm-int8]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, median, percentile, save

from amcp.memory import Memory
from amcp.store.base import RecordFilter

PEOPLE = ["Alice", "Bob", "Chen Wei", "Dana", "Emeka", "Farah", "Giulia", "Hiro", "Ines", "Jonas"]
THINGS = [
    "postgres",
    "redis",
    "kafka",
    "terraform",
    "kubernetes",
    "react",
    "django",
    "fastapi",
    "pandas",
    "numpy",
    "airflow",
    "grafana",
    "prometheus",
    "nginx",
    "docker",
    "jenkins",
    "github-actions",
    "sentry",
    "stripe",
    "okx",
    "binance",
    "s3",
    "bigquery",
    "snowflake",
    "dbt",
    "spark",
    "flink",
    "rust",
    "go",
    "typescript",
    "python",
    "java",
    "kotlin",
    "swift",
    "elixir",
    "ruby",
    "php",
    "rails",
    "vue",
    "svelte",
    "tailwind",
    "graphql",
    "grpc",
    "protobuf",
    "avro",
    "parquet",
    "duckdb",
    "sqlite",
    "clickhouse",
    "elasticsearch",
    "opensearch",
    "qdrant",
    "pgvector",
    "faiss",
    "onnx",
    "pytorch",
    "tensorflow",
    "jax",
    "vllm",
    "ollama",
    "langgraph",
    "celery",
    "rabbitmq",
]
VERBS = [
    "requires",
    "breaks when",
    "is faster with",
    "conflicts with",
    "is configured with",
    "must not use",
    "was migrated to",
    "depends on",
    "is deprecated in favour of",
    "caches",
]
ASPECTS = [
    "connection pooling",
    "retry backoff",
    "rate limits",
    "timeouts",
    "TLS certificates",
    "schema migrations",
    "batch size",
    "memory limits",
    "feature flags",
    "log levels",
    "API keys rotation",
    "index rebuilds",
    "cold starts",
    "dependency pinning",
    "sharding",
]
TYPES = ["KT-FACT", "KT-PITFALL", "KT-DECISION", "KT-CONTEXT", "KT-PRINCIPLE"]


def memory_text(rng: random.Random, i: int) -> str:
    a, b = rng.sample(THINGS, 2)
    who = rng.choice(PEOPLE)
    return (
        f"{a} {rng.choice(VERBS)} {b} for {rng.choice(ASPECTS)} "
        f"(noted by {who}, service {rng.randint(1, 400)}, ticket {i})"
    )


def question(rng: random.Random) -> str:
    return f"what do we know about {rng.choice(THINGS)} and {rng.choice(ASPECTS)}?"


def _items(rng: random.Random, start: int, stop: int) -> list[dict[str, object]]:
    return [
        {
            "text": memory_text(rng, i),
            "scope": f"team:{i % 8}",
            "type": TYPES[i % 5],
            "tags": [rng.choice(THINGS)],
        }
        for i in range(start, stop)
    ]


def ingest(path: Path, size: int, embedder: str, batch: int) -> dict[str, object]:
    """Fill the store at ``path`` up to ``size`` memories; resumes an interrupted build by
    replaying the generator past the records already stored (same texts, same order)."""
    rng = random.Random(size)
    with Memory(path, embedder=embedder) as mem:
        have = mem.store.count(RecordFilter(lifecycles=None, include_expired=True))
        for start in range(0, have, batch):  # replay the generator: same rng state as a build
            _items(rng, start, min(have, start + batch))
        t0 = time.perf_counter()
        for start in range(have, size, batch):
            mem.remember_many(_items(rng, start, min(size, start + batch)))
        took = time.perf_counter() - t0
    added = size - have
    return {
        "ingest_per_s": added / took if added else None,
        "ingested": added,
        "resumed_from": have,
        "ingested_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def store_for(size: int, embedder: str, batch: int, data: Path | None) -> tuple[Path, dict]:
    """The store to query: built in a temporary directory, or built once under ``data`` and
    reused (building 100k memories embeds 100k texts, minutes of CPU)."""
    if data is None:
        tmp = Path(tempfile.mkdtemp(prefix="amcp-lat-"))
        path = tmp / "lat.db"
        return path, ingest(path, size, embedder, batch)
    where = data / f"{embedder}-{size}"
    path, mark = where / "lat.db", where / "ingest.json"
    if mark.exists():
        info = json.loads(mark.read_text())
        info["reused"] = True  # the ingest figure is from when the store was built
        return path, info
    info = ingest(path, size, embedder, batch)
    mark.write_text(json.dumps(info, indent=2) + "\n")
    return path, info


def run(
    size: int, embedder: str, queries: int, batch: int, data: Path | None
) -> dict[str, object]:
    path, info = store_for(size, embedder, batch, data)
    # Measured as a user meets it: a fresh open, the first query (model load, index load or
    # build), then the time until the fast path (the ANN graph, from 20k) is in use.
    t_open = time.perf_counter()
    mem = Memory(path, embedder=embedder)
    open_ms = (time.perf_counter() - t_open) * 1000
    try:
        t = time.perf_counter()
        mem.recall("warm up the index and the model", touch=False)
        first_ms = (time.perf_counter() - t) * 1000
        index = mem.searcher.index
        ann_ready = getattr(index, "ann_ready", False) if index is not None else False
        if index is not None and hasattr(index, "wait_for_ann"):
            ann_ready = index.wait_for_ann(900)
        ready_s = time.perf_counter() - t_open
        qrng = random.Random(7)
        lat: list[float] = []
        cpu: list[float] = []
        for _ in range(queries):
            q = question(qrng)
            t, c = time.perf_counter(), time.process_time()
            mem.recall(q, k=10, touch=False)
            lat.append((time.perf_counter() - t) * 1000)
            cpu.append((time.process_time() - c) * 1000)
        scoped: list[float] = []
        scoped_cpu: list[float] = []
        for _ in range(queries // 3):
            q = question(qrng)
            t, c = time.perf_counter(), time.process_time()
            mem.recall(q, k=10, scope=f"team:{qrng.randint(0, 7)}", touch=False)
            scoped.append((time.perf_counter() - t) * 1000)
            scoped_cpu.append((time.process_time() - c) * 1000)
    finally:
        mem.close()
        if data is None:
            shutil.rmtree(path.parent, ignore_errors=True)
    return {
        "size": size,
        **info,
        "open_ms": open_ms,
        "first_recall_ms": first_ms,
        "ann_in_use": bool(ann_ready),
        "fast_path_ready_s": ready_s,
        "recall_p50_ms": median(lat),
        "recall_p95_ms": percentile(lat, 95),
        "recall_p99_ms": percentile(lat, 99),
        "recall_cpu_p50_ms": median(cpu),
        "scoped_recall_p50_ms": median(scoped),
        "scoped_recall_p95_ms": percentile(scoped, 95),
        "scoped_recall_cpu_p50_ms": median(scoped_cpu),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument(
        "--ingest-only",
        action="store_true",
        help="time ingest only (no recall); writes latency_ingest_<embedder>.json",
    )
    ap.add_argument(
        "--data",
        type=Path,
        help="keep the stores here and reuse them on later runs (query only); "
        "delete a size's directory to rebuild it",
    )
    args = ap.parse_args()
    rows = []
    if args.ingest_only:
        for size in args.sizes:
            load = os.getloadavg()[0]
            with tempfile.TemporaryDirectory() as tmp:  # always a fresh build: it is timed
                info = ingest(Path(tmp) / "lat.db", size, args.embedder, args.batch)
                with Memory(Path(tmp) / "lat.db", embedder=args.embedder) as mem:
                    model = mem.embedder.model_id if mem.embedder else "none"
            row = {"size": size, "ingest_per_s": info["ingest_per_s"], "model": model}
            row |= {"batch": args.batch, "load_avg_1m": [load, os.getloadavg()[0]]}
            rows.append(row)
            print(
                f"{size:>7} memories ({model}): ingest {row['ingest_per_s']:.0f}/s, "
                f"load {load:.1f}",
                flush=True,
            )
        name = "latency_ingest_" + args.embedder.replace("/", "_")
        print(f"wrote {save(name, {'embedder': args.embedder, 'rows': rows})}")
        return
    for size in args.sizes:
        row = run(size, args.embedder, args.queries, args.batch, args.data)
        rows.append(row)
        print(
            f"{size:>7} memories: ingest {row['ingest_per_s'] or 0:.0f}/s"
            f"{' (reused store)' if row.get('reused') else ''}; open {row['open_ms']:.0f} ms, "
            f"first recall {row['first_recall_ms']:.0f} ms, fast path after "
            f"{row['fast_path_ready_s']:.1f} s; recall p50 "
            f"{row['recall_p50_ms']:.1f} ms p95 {row['recall_p95_ms']:.1f} ms p99 "
            f"{row['recall_p99_ms']:.1f} ms (CPU p50 {row['recall_cpu_p50_ms']:.1f} ms); scoped "
            f"p50 {row['scoped_recall_p50_ms']:.1f} ms p95 {row['scoped_recall_p95_ms']:.1f} ms "
            f"(CPU p50 {row['scoped_recall_cpu_p50_ms']:.1f} ms)",
            flush=True,
        )
    load = [round(x, 2) for x in os.getloadavg()]
    for row in rows:
        row.update(embedder=args.embedder, queries=args.queries, load_avg=load)
    # Merge with earlier runs of other sizes/embedders (one row per embedder and size).
    keep = []
    if (RESULTS / "latency.json").exists():
        old = json.loads((RESULTS / "latency.json").read_text()).get("rows", [])
        done = {(r["embedder"], r["size"]) for r in rows}
        keep = [r for r in old if "embedder" in r and (r["embedder"], r["size"]) not in done]
    path = save("latency", {"rows": keep + rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
