"""AMQL parse + validation time per query: the upstream examples and one of each statement.

    .venv/bin/python bench/amql_parse.py [--runs 2000]

Times ``amcp.amql.parse`` (lexing, LALR parsing, AST building and every validation) once
per run and reports the median and p95 per query against the 1 ms target. The one-off
parser construction is measured separately. Writes bench/results/amql_parse.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from importlib import metadata
from pathlib import Path

from amcp.amql import parse
from amcp.amql.parser import parser

HERE = Path(__file__).resolve().parent
SPEC = HERE.parent / "tests/spec/upstream/AMCP_v1.0.json"
OUT = HERE / "results" / "amql_parse.json"
TARGET_MS = 1.0

KID = "K-" + "0123456789abcdef" * 4
EXTRA = {
    "remember": (
        "REMEMBER {\"type\": \"KT-PITFALL\", \"core\": {\"subject\": \"OKX.API.TP_SL\", "
        "\"predicate\": \"CAUSES\", \"object\": \"tpTriggerPx ignored\", \"confidence\": 0.97, "
        "\"evidence\": [\"S-20260313-143022-abc123\"]}, \"meta\": {\"created_at\": "
        "\"2026-03-13T14:30:22Z\", \"project_scope\": [\"StepQuant\"]}}"
    ),
    "forget_id": f"FORGET {KID} REASON 'superseded by v2'",
    "forget_where": "FORGET WHERE lifecycle = archived AND weight < 0.1 REASON 'cleanup'",
    "distill": (
        "DISTILL FROM RECALL * WHERE type = KT-PITFALL AND tags CONTAINS 'api_integration' "
        "LIMIT rows(50) INTO KT-PRINCIPLE WITH confidence_threshold 0.8"
    ),
}


def queries() -> dict[str, str]:
    found: dict[str, str] = {}
    if SPEC.exists():
        with SPEC.open(encoding="utf-8") as f:
            examples = json.load(f)["L4_routing_scheduling"]["amql"]["examples"]
        found.update({f"upstream.{k}": v for k, v in examples.items()})
    else:
        print(f"note: {SPEC} not found; timing the extra queries only", file=sys.stderr)
    found.update({f"extra.{k}": v for k, v in EXTRA.items()})
    return found


def time_one(text: str, runs: int) -> dict[str, float]:
    for _ in range(50):  # warm caches and the allocator before measuring
        parse(text)
    samples = []
    clock = time.perf_counter_ns
    for _ in range(runs):
        t0 = clock()
        parse(text)
        samples.append((clock() - t0) / 1e6)
    samples.sort()
    return {
        "median_ms": statistics.median(samples),
        "p95_ms": samples[int(len(samples) * 0.95) - 1],
        "min_ms": samples[0],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=2000)
    args = ap.parse_args()

    t0 = time.perf_counter()
    parser()
    build_ms = (time.perf_counter() - t0) * 1e3

    rows = []
    for name, text in queries().items():
        stats = time_one(text, args.runs)
        rows.append({"name": name, "chars": len(text), **stats,
                     "ok": stats["median_ms"] <= TARGET_MS})

    width = max(len(r["name"]) for r in rows)
    print(f"parser build (once per process): {build_ms:.1f} ms")
    print(f"{'query':<{width}}  chars  median ms  p95 ms  min ms  <= {TARGET_MS} ms")
    for r in rows:
        print(f"{r['name']:<{width}}  {r['chars']:>5}  {r['median_ms']:>9.3f}  "
              f"{r['p95_ms']:>6.3f}  {r['min_ms']:>6.3f}  {'yes' if r['ok'] else 'NO'}")

    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    result = {
        "benchmark": "amql_parse",
        "what": "amcp.amql.parse(text): lex + LALR parse + AST + validation, per call",
        "runs_per_query": args.runs,
        "target_median_ms": TARGET_MS,
        "parser_build_ms": build_ms,
        "all_within_target": all(r["ok"] for r in rows),
        "queries": rows,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "cpu_count": os.cpu_count(),
        "load_average_1m": load[0] if load else None,
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "lark": metadata.version("lark"),
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(HERE.parent)}")
    return 0 if result["all_within_target"] else 1


if __name__ == "__main__":
    sys.exit(main())
