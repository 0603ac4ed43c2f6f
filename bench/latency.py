"""Recall latency (p50/p95/p99, query embedding included) and ingest rate at 10k and 100k.

Memories are synthetic but varied (templated sentences over a few thousand words, several
scopes and types), ingested through ``Memory.remember_many`` in batches — the bulk API that
embeds a batch at once — and queried with 300 distinct questions through ``Memory.recall``.

    .venv/bin/python bench/latency.py [--sizes 10000 100000] [--embedder minilm]
    .venv/bin/python bench/latency.py --ingest-only --sizes 10000 [--embedder minilm-int8]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import median, percentile, save

from amcp.memory import Memory

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


def run(
    size: int, embedder: str, queries: int, batch: int, recall: bool = True
) -> dict[str, float]:
    rng = random.Random(size)
    with tempfile.TemporaryDirectory() as tmp:
        mem = Memory(Path(tmp) / "lat.db", embedder=embedder)
        t0 = time.perf_counter()
        for start in range(0, size, batch):
            items = [
                {
                    "text": memory_text(rng, i),
                    "scope": f"team:{i % 8}",
                    "type": TYPES[i % 5],
                    "tags": [rng.choice(THINGS)],
                }
                for i in range(start, min(size, start + batch))
            ]
            mem.remember_many(items)
        ingest_s = time.perf_counter() - t0
        if not recall:  # --ingest-only
            model = mem.embedder.model_id if mem.embedder else "none"
            mem.close()
            return {"size": size, "ingest_per_s": size / ingest_s, "model": model}
        qrng = random.Random(7)
        mem.recall("warm up the index and the model")  # first query builds the vector index
        if mem.searcher.index is not None and hasattr(mem.searcher.index, "wait_for_ann"):
            mem.searcher.index.wait_for_ann(600)
        lat: list[float] = []
        for _ in range(queries):
            q = question(qrng)
            t = time.perf_counter()
            mem.recall(q, k=10, touch=False)
            lat.append((time.perf_counter() - t) * 1000)
        scoped: list[float] = []
        for _ in range(queries // 3):
            q = question(qrng)
            t = time.perf_counter()
            mem.recall(q, k=10, scope=f"team:{qrng.randint(0, 7)}", touch=False)
            scoped.append((time.perf_counter() - t) * 1000)
        mem.close()
    return {
        "size": size,
        "ingest_per_s": size / ingest_s,
        "recall_p50_ms": median(lat),
        "recall_p95_ms": percentile(lat, 95),
        "recall_p99_ms": percentile(lat, 99),
        "scoped_recall_p50_ms": median(scoped),
        "scoped_recall_p95_ms": percentile(scoped, 95),
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
    args = ap.parse_args()
    rows = []
    if args.ingest_only:
        for size in args.sizes:
            load = os.getloadavg()[0]
            row = run(size, args.embedder, args.queries, args.batch, recall=False)
            row |= {"batch": args.batch, "load_avg_1m": [load, os.getloadavg()[0]]}
            rows.append(row)
            print(
                f"{size:>7} memories ({row['model']}): ingest {row['ingest_per_s']:.0f}/s, "
                f"load {load:.1f}",
                flush=True,
            )
        name = "latency_ingest_" + args.embedder.replace("/", "_")
        print(f"wrote {save(name, {'embedder': args.embedder, 'rows': rows})}")
        return
    for size in args.sizes:
        row = run(size, args.embedder, args.queries, args.batch)
        rows.append(row)
        print(
            f"{size:>7} memories: ingest {row['ingest_per_s']:.0f}/s; recall p50 "
            f"{row['recall_p50_ms']:.1f} ms p95 {row['recall_p95_ms']:.1f} ms p99 "
            f"{row['recall_p99_ms']:.1f} ms; scoped p95 {row['scoped_recall_p95_ms']:.1f} ms",
            flush=True,
        )
    path = save("latency", {"embedder": args.embedder, "queries": args.queries, "rows": rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
