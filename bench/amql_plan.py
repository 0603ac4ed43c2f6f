"""AMQL planning and execution: parse + plan per upstream example, run time on a 10k store.

    .venv/bin/python bench/amql_plan.py [--records 10000] [--runs 1000] [--exec-runs 3]
        [--data DIR]

Parse + plan is pure (no store access) and is timed over ``--runs`` (median, target ≤ 1 ms).
Execution runs each query against a store of ``--records`` synthetic records (hashing
embedder) and reports the median of ``--exec-runs``, the number of results, and the store
filter the planner pushed. With ``--data`` the store is built once under DIR and reused
(queries run with ``touch=False``, so reusing it does not change the answers).
Writes bench/results/amql_plan.json (with platform, CPU count and
Python version).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine, median, save

from amcp.amql import Recall, parse
from amcp.amql.planner import plan_recall
from amcp.amql.run import run_query
from amcp.memory import Memory

SPEC = Path(__file__).resolve().parents[1] / "tests/spec/upstream/AMCP_v1.0.json"
TARGET_MS = 1.0
PROJECT = "StepQuant"
EXTRA = {
    "extra.pushed_only": "RECALL * WHERE type = KT-PITFALL AND tags CONTAINS 'api_integration' "
                         "AND subject = 'OKX.API.item3' LIMIT rows(20)",
    "extra.residual_scan": "RECALL * WHERE confidence > 0.95 ORDER BY weight DESC LIMIT rows(10)",
    "extra.semantic_only": "RECALL * WHERE semantic_match('stop loss orders', 0.3) "
                           "LIMIT rows(10)",
}


def examples() -> dict[str, str]:
    found = {}
    if SPEC.exists():
        spec = json.loads(SPEC.read_text("utf-8"))
        found = {f"upstream.{k}": v for k, v in spec["L4_routing_scheduling"]["amql"]
                 ["examples"].items()}
    return {**found, **EXTRA}


def time_plan(text: str, runs: int) -> float:
    samples = []
    for i in range(runs + 20):
        t0 = time.perf_counter_ns()
        stmt = parse(text)
        assert isinstance(stmt, Recall)
        plan_recall(stmt, scopes=(PROJECT, "Other"), project=PROJECT)
        if i >= 20:  # warm-up
            samples.append((time.perf_counter_ns() - t0) / 1e6)
    return median(samples)


def build(path: Path, n: int) -> Memory:
    if path.exists():
        return Memory(path, embedder="hashing")
    path.parent.mkdir(parents=True, exist_ok=True)
    m = Memory(path, embedder="hashing")
    types = ["KT-FACT", "KT-PITFALL", "KT-DECISION", "KT-CONTEXT", "KT-PATTERN"]
    spaces = ["OKX.API", "Python.Division", "StepQuant.Parameter", "risk_management.Stops"]
    batch = []
    for i in range(n):
        kind = types[i % 5]
        topic = "stop loss orders" if i % 3 == 0 else "division results"
        batch.append((m.compose(
            f"record {i} about {topic} number {i % 97}", type=kind,
            scope=[PROJECT, "Other", "*"][i % 3], subject=f"{spaces[i % 4]}.item{i % 11}",
            tags=["api_integration"] if i % 4 == 0 else [f"t{i % 7}"],
            confidence=round(0.5 + (i % 50) / 100, 2),
            created_at=f"2026-0{1 + i % 6}-1{i % 10}T0{i % 9}:00:00Z",
            sample_size=10 if kind == "KT-PATTERN" else None,
            session="S-20260313-143022-abc123" if i % 500 == 0 else None,
        ), False))
    m.put_many(batch)
    return m


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--exec-runs", type=int, default=3)
    ap.add_argument("--data", type=Path, default=None, help="keep the store here and reuse it")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        where = args.data / f"r{args.records}" if args.data else Path(tmp)
        m = build(where / "m.db", args.records)
        build_s = time.perf_counter() - t0
        for name, text in examples().items():
            plan_ms = time_plan(text, args.runs)
            row = {"query": name, "text": text, "plan_median_ms": round(plan_ms, 4),
                   "plan_ok": plan_ms <= TARGET_MS}
            try:
                times, result = [], None
                for _ in range(args.exec_runs):
                    t1 = time.perf_counter()
                    result = run_query(m, text, scopes=(PROJECT, "Other"), touch=False)
                    times.append((time.perf_counter() - t1) * 1000)
                assert result is not None
                row.update(exec_median_ms=round(median(times), 2), results=len(result.records),
                           truncated=result.truncated,
                           pushed=result.explain.split("executed with: ")[-1][:160])
            except Exception as exc:  # a query this node cannot answer is reported, not fatal
                row.update(exec_median_ms=None, error=f"{type(exc).__name__}: {exc}")
            rows.append(row)
        m.close()
    print(f"{'query':28} {'parse+plan ms':>14} {'exec ms':>10} {'rows':>6}  store filter")
    for r in rows:
        ex = f"{r['exec_median_ms']:.1f}" if r.get("exec_median_ms") is not None else "error"
        print(f"{r['query']:28} {r['plan_median_ms']:>14.3f} {ex:>10} "
              f"{r.get('results', '-')!s:>6}  {r.get('pushed', r.get('error', ''))[:70]}")
    path = save("amql_plan", {
        "records": args.records, "build_s": round(build_s, 1), "target_plan_ms": TARGET_MS,
        "runs": args.runs, "exec_runs": args.exec_runs, "queries": rows,
        "platform": machine()["platform"], "cpu_count": machine()["cpus"],
        "python": machine()["python"],
    })
    print(f"wrote {path}")
    return 0 if all(r["plan_ok"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
