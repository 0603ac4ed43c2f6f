"""Embedding and vector-search speed: the latency budget of recall and the cost of ingest.

    .venv/bin/python bench/embed_speed.py [--quick] [--torch] [--int8] [--repeat N]

* query embedding latency (p50/p95) over >= 200 distinct real questions (LoCoMo QA), one
  at a time, as recall does it;
* batch ingest throughput (texts/s) for 2,000 realistic 10-40-word sentences (LoCoMo
  turns), through ``MiniLMEmbedder.embed`` (tokenise, length-sort, batch, run);
* vector search p50/p95 (top-50) at 10k and 100k vectors, unfiltered and with a 50% filter,
  plus the ANN build time.

The machine is shared and noisy: each figure is the median over ``--repeat`` runs.
Writes bench/results/embed_speed.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
LOCOMO = HERE.parents[1] / "shared" / "bench-data" / "locomo" / "locomo10.json"


def pct(values: list[float], p: float) -> float:
    return float(np.percentile(np.asarray(values), p))


def load_texts() -> tuple[list[str], list[str]]:
    """(queries, sentences) from LoCoMo, or synthetic stand-ins when the data is absent."""
    if LOCOMO.exists():
        data = json.loads(LOCOMO.read_text())
        queries = sorted({q["question"] for s in data for q in s["qa"]})
        turns = [
            t["text"]
            for s in data
            for k, v in s["conversation"].items()
            if k.startswith("session_") and isinstance(v, list)
            for t in v
        ]
        sentences = [t for t in turns if 10 <= len(t.split()) <= 40]
        return queries, list(dict.fromkeys(sentences))
    rng = np.random.default_rng(0)
    words = ["the", "deploy", "script", "database", "user", "prefers", "tabs", "staging"]
    words += ["release", "memory", "agent", "meeting", "postgres", "vector", "team", "review"]
    sentences = [" ".join(rng.choice(words, rng.integers(10, 41))) for _ in range(2000)]
    queries = [f"what about {' '.join(rng.choice(words, 6))}?" for _ in range(300)]
    return queries, sentences


def bench_query(emb: Any, queries: list[str]) -> dict[str, float]:
    for q in queries[:10]:  # warm-up: first runs allocate arenas
        emb.embed_query(q)
    times = []
    for q in queries:
        t = time.perf_counter()
        emb.embed_query(q)
        times.append((time.perf_counter() - t) * 1e3)
    return {"p50_ms": pct(times, 50), "p95_ms": pct(times, 95), "n": len(times)}


def bench_ingest(emb: Any, sentences: list[str]) -> dict[str, float]:
    t = time.perf_counter()
    out = emb.embed(sentences)
    dt = time.perf_counter() - t
    assert out.shape[0] == len(sentences)
    return {"texts_per_s": len(sentences) / dt, "seconds": dt, "n": len(sentences)}


def clustered(rng: np.random.Generator, n: int, dim: int = 384) -> np.ndarray:
    # Topic centres plus noise: closer to sentence embeddings than isotropic noise.
    c = rng.standard_normal((max(50, n // 50), dim)).astype(np.float32)
    x = c[rng.integers(0, len(c), n)] + 0.6 * rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def bench_vectors(n: int, nq: int = 300) -> dict[str, float]:
    from amcp.retrieval.vectors import VectorIndex

    rng = np.random.default_rng(n)
    x = clustered(rng, n + nq)
    idx = VectorIndex(384, background=False)
    t = time.perf_counter()
    idx.add(np.arange(n, dtype=np.int64), x[:n])  # builds the ANN synchronously if >= 20k
    build = time.perf_counter() - t
    exact = VectorIndex(384, ann_threshold=None)
    exact.add(np.arange(n, dtype=np.int64), x[:n])
    queries = x[n:]
    allowed = np.arange(0, n, 2, dtype=np.int64)
    res: dict[str, float] = {"n": n, "mode": 1.0 if idx.ann_ready else 0.0, "build_s": build}
    for label, flt in (("", None), ("filtered50_", allowed)):
        for q in queries[:10]:
            idx.search(q, 50, allowed=flt)
        times, recall = [], []
        for q in queries:
            t = time.perf_counter()
            hits = idx.search(q, 50, allowed=flt)
            times.append((time.perf_counter() - t) * 1e3)
            truth = {i for i, _ in exact.search(q, 10, allowed=flt)}
            recall.append(len(truth & {i for i, _ in hits[:10]}) / 10)
        res[f"{label}p50_ms"] = pct(times, 50)
        res[f"{label}p95_ms"] = pct(times, 95)
        res[f"{label}recall_at_10"] = float(np.mean(recall))
    return res


def median_of(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: float(statistics.median(r[k] for r in runs)) for k in runs[0]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="skip the 100k vector bench")
    ap.add_argument("--torch", action="store_true", help="also time the torch backend")
    ap.add_argument("--int8", action="store_true", help="also time the int8 model (onnx)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    from amcp.retrieval.minilm import MiniLMEmbedder

    queries, sentences = load_texts()
    queries = queries[:300]
    sentences = sentences[:2000]
    results: dict[str, Any] = {
        "benchmark": "embed_speed",
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "load_avg_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
        "data": "LoCoMo questions / 10-40-word turns" if LOCOMO.exists() else "synthetic",
        "repeat": args.repeat,
    }
    backends = ["onnx", "torch"] if args.torch else ["onnx"]
    if args.int8:
        backends.append("onnx_int8")
    for backend in backends:
        if backend == "onnx_int8":
            emb = MiniLMEmbedder(backend="onnx", precision="int8")
        else:
            emb = MiniLMEmbedder(backend=backend, precision="fp32")
        t = time.perf_counter()
        emb.load()
        load_s = time.perf_counter() - t
        q_runs = [bench_query(emb, queries) for _ in range(args.repeat)]
        i_runs = [bench_ingest(emb, sentences) for _ in range(args.repeat)]
        results[f"minilm_{backend}"] = {
            "load_s": load_s,
            "query": median_of(q_runs),
            "ingest": median_of(i_runs),
        }
    results["vectors"] = [
        median_of([bench_vectors(n) for _ in range(args.repeat if n <= 10_000 else 1)])
        for n in ((10_000,) if args.quick else (10_000, 100_000))
    ]

    print(f"\nembed_speed  (cpus={os.cpu_count()}, load avg {results['machine']['load_avg_1m']})")
    print(f"{'what':44} {'p50':>9} {'p95':>9} {'other':>16}")
    for backend in backends:
        r = results[f"minilm_{backend}"]
        q, i = r["query"], r["ingest"]
        print(f"{'query embed, ' + backend:44} {q['p50_ms']:8.2f}ms {q['p95_ms']:8.2f}ms")
        label = f"ingest {int(i['n'])} sentences, {backend}"
        print(f"{label:44} {'':>9} {'':>9} {i['texts_per_s']:10.0f} t/s")
    for v in results["vectors"]:
        n = int(v["n"])
        mode = "hnsw" if v["mode"] else "exact"
        for label, key in (
            (f"search top-50, {n} vectors ({mode})", ""),
            ("  same, 50% filter", "filtered50_"),
        ):
            p50, p95, rec = v[key + "p50_ms"], v[key + "p95_ms"], v[key + "recall_at_10"]
            print(f"{label:44} {p50:8.2f}ms {p95:8.2f}ms {'r@10 ' + format(rec, '.3f'):>16}")
        if v["mode"]:
            print(f"{f'  hnsw build, {n} vectors':44} {'':>9} {'':>9} {v['build_s']:14.1f} s")
    out = HERE / "results" / "embed_speed.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
