"""Every bench target measured on two source trees in one run, alternating (issue 15).

Each bench runs with each tree's OWN copy of its script and its own code
(``PYTHONPATH=<tree>/src:<tree>``, this interpreter, ``nice``), before and after back to
back for every bench in every round, the order flipped each round so drift in the
machine's load falls on both sides. Each run's JSON is taken from where the script writes
it (an output option where it has one, else ``<tree>/bench/results/``, then restored with
``git checkout`` or removed, so no tree is left dirty) into a temporary results directory.
Stores a bench can reuse (``--data``) are built once per tree and commit, under
``--work``; stores whose build is timed (the hashing ingest) are built every run.

    .venv/bin/python bench/before_after.py --before /work/wt/before [--after .]
        [--rounds 3] [--benches latency hooks_latency ...] [--work /tmp/amcp-before-after]
    .venv/bin/python bench/before_after.py --show bench/results/before_after.json [--markdown]

Scripts find their data beside the tree (``<tree>/../shared``: the LoCoMo texts, and for
trees before e5f7001 the upstream AMQL examples), so put both trees in one directory with
a ``shared`` link to the shared data, as docs/architecture.md ("Bench targets before and
after") shows; otherwise both sides fall back to the same synthetic texts.

Prints bench, metric, target, before and after medians, after/before, and flags a
regression of more than 10 % (a ``_ms``/``_us`` figure up by more than 10 %, a rate down
by more than 10 %, a count that should be 0 above 0). CPU-time figures (``cpu`` in the
name) are the ones that mean something on a shared machine; wall figures are listed
beside them. Writes bench/results/before_after.json: every run's figures, the machine's
``uptime`` per round and the load average around every run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
LIMIT = 1.10  # a regression is more than 10 % worse than before
RUN_TIMEOUT_S = 1200

Figures = dict[str, float]


@dataclass(frozen=True)
class Bench:
    """One bench configuration: its script, arguments (``{data}`` and ``{out}`` filled per
    tree), where its JSON lands, the figures taken from it and their targets."""

    name: str
    script: str
    args: tuple[str, ...]
    result: str  # file name under <tree>/bench/results/, or "{out}" for an output option
    figures: Callable[[dict[str, Any]], Figures]
    targets: dict[str, str] = field(default_factory=dict)
    before_args: tuple[str, ...] | None = None  # when the older script takes others


def _pick(d: dict[str, Any], keys: tuple[str, ...], prefix: str = "") -> Figures:
    return {prefix + k: float(d[k]) for k in keys if isinstance(d.get(k), (int, float))}


def latency_figures(size: int, embedder: str) -> Callable[[dict[str, Any]], Figures]:
    def figures(doc: dict[str, Any]) -> Figures:
        row = next(r for r in doc["rows"]
                   if r.get("size") == size and r.get("embedder") == embedder)
        keys = ("recall_cpu_p50_ms", "recall_p50_ms", "recall_p95_ms",
                "scoped_recall_cpu_p50_ms", "scoped_recall_p50_ms", "scoped_recall_p95_ms",
                "open_ms", "first_recall_ms")
        out = _pick(row, keys)
        if not row.get("reused"):  # a reused store's ingest figure is from its build
            out |= _pick(row, ("ingest_per_s",), "write_")
        return out
    return figures


def hooks_figures(doc: dict[str, Any]) -> Figures:
    out: Figures = {}
    for mode, hooks in doc["modes"].items():
        for hook, stats in hooks.items():
            if isinstance(stats, dict):
                out |= _pick(stats, ("cpu_p50_ms", "p95_ms"), f"{mode}/{hook}/")
    for name, stats in doc.get("baselines", {}).items():
        out |= _pick(stats, ("cpu_p50_ms",), f"baseline {name}/")
    return out


def cse_figures(doc: dict[str, Any]) -> Figures:
    row = doc["results"][0]
    return _pick(row, ("cpu_p50_ms", "cpu_p95_ms", "p50_ms", "p95_ms", "open_ms",
                       "first_pack_ms", "after_write_p50_ms"))


def node_figures(doc: dict[str, Any]) -> Figures:
    out: Figures = {}
    for res in doc["results"]:
        mode = "inline" if res.get("inline_reads") else "pool"
        out |= _pick(res["median"], ("server_cpu_us_per_rt", "client_cpu_us_per_rt",
                                     "rtt_per_s", "p99_ms"), f"{mode}/")
        out |= _pick(res.get("idle") or {}, ("kib_per_connection",), f"{mode}/idle_")
    return out


def mcp_figures(doc: dict[str, Any]) -> Figures:
    run = doc["runs"]["hashing-10000"]
    return _pick(run, ("server_cpu_ms_per_call", "client_cpu_ms_per_call", "p50_ms",
                       "p95_ms"))


def frames_figures(doc: dict[str, Any]) -> Figures:
    return {f"{name}/cpu_per_s": float(r["median_per_s_cpu"])
            for name, r in doc["results"].items()}


def parse_figures(doc: dict[str, Any]) -> Figures:
    out = _pick(doc, ("parser_build_ms",))
    for q in doc["queries"]:
        out |= _pick(q, ("median_ms",), f"{q['name']}/")
    return out


def plan_figures(doc: dict[str, Any]) -> Figures:
    out: Figures = {}
    for q in doc["queries"]:
        out |= _pick(q, ("plan_median_ms", "exec_median_ms"), f"{q['query']}/")
    return out


def concurrency_figures(doc: dict[str, Any]) -> Figures:
    parts = {
        "a_opens_under_writer": ("open_ms_p50", "open_ms_p95", "false_alarms"),
        "b_five_creators": ("unopenable_stores", "lost_acknowledged_writes"),
        "c_mixed_cli": ("failures", "lost_acknowledged_writes"),
        "d_fast_reader_opens_under_writer": ("open_ms_p50", "open_ms_p95", "false_alarms"),
    }
    out: Figures = {}
    for part, keys in parts.items():
        if part in doc:
            out |= _pick(doc[part], keys, f"{part[0]}/")
    return out


def verify_figures(doc: dict[str, Any]) -> Figures:
    return _pick(doc["rows"][0], ("open_ms_median", "digest_ms_median", "fast_open_ms_median",
                                  "fast_ranked_ms_median", "seal_us_p50", "body_us_p50",
                                  "get_warm_us_p50"))


def embed_figures(doc: dict[str, Any]) -> Figures:
    onnx = doc["minilm_onnx"]
    out = _pick(onnx["query"], ("p50_ms", "p95_ms"), "query_")
    out |= _pick(onnx["ingest"], ("texts_per_s",), "ingest_")
    for v in doc.get("vectors", []):
        out |= _pick(v, ("p50_ms", "filtered50_p50_ms"), f"vectors_{int(v['n'])}/")
    return out


HOOK_TARGETS = {f"{m}/{h}/p95_ms": "<= 150 ms" for m in ("no_node", "node")
                for h in ("session-start", "prompt", "post-tool", "post-tool-noop", "stop")}
ZERO = "0"

# The table of benches. Every script of the before tree (1b17915) takes the same arguments
# as this tree's, so ``before_args`` is unused today; it is where a difference would go.
BENCHES: tuple[Bench, ...] = (
    Bench("latency minilm 10k", "latency.py",
          ("--sizes", "10000", "--embedder", "minilm", "--data", "{data}"), "latency.json",
          latency_figures(10_000, "minilm"),
          {"recall_p95_ms": "<= 25 ms (at 100k)", "write_ingest_per_s": ">= 300/s"}),
    Bench("latency hashing 10k", "latency.py",
          ("--sizes", "10000", "--embedder", "hashing"), "latency.json",
          latency_figures(10_000, "hashing")),
    Bench("hooks_latency", "hooks_latency.py", ("--out", "{out}"), "{out}", hooks_figures,
          HOOK_TARGETS),
    Bench("cse_pack 10k", "cse_pack.py", ("--sizes", "10000", "--data", "{data}"),
          "cse_pack.json", cse_figures, {"p95_ms": "<= 20 ms (at 100k)"}),
    Bench("node_rtt", "node_rtt.py", (), "node_rtt.json", node_figures,
          {"inline/rtt_per_s": ">= 5000/s", "pool/rtt_per_s": ">= 5000/s",
           "inline/p99_ms": "<= 10 ms", "pool/p99_ms": "<= 10 ms",
           "inline/idle_kib_per_connection": "<= 64 KiB",
           "pool/idle_kib_per_connection": "<= 64 KiB"}),
    Bench("mcp_rtt", "mcp_rtt.py", ("--records", "10000", "--data", "{data}"), "mcp_rtt.json",
          mcp_figures, {"p95_ms": "<= 30 ms"}),
    Bench("frames", "frames.py", (), "frames.json", frames_figures,
          {"roundtrip_256B/cpu_per_s": ">= 150000/s"}),
    Bench("amql_parse", "amql_parse.py", (), "amql_parse.json", parse_figures),
    Bench("amql_plan", "amql_plan.py", ("--data", "{data}"), "amql_plan.json", plan_figures),
    Bench("store_concurrency", "store_concurrency.py", ("--quick",),
          "store_concurrency.json", concurrency_figures),
    Bench("verify_cost 10k", "verify_cost.py", ("--size", "10000", "--data", "{data}"),
          "verify_cost.json", verify_figures),
    Bench("embed_speed", "embed_speed.py", ("--quick", "--repeat", "1"), "embed_speed.json",
          embed_figures),
)
# Targets the parse/plan/concurrency scripts state for every row of a kind.
SUFFIX_TARGETS = {"/median_ms": "<= 1 ms", "/plan_median_ms": "<= 1 ms",
                  "false_alarms": ZERO, "lost_acknowledged_writes": ZERO,
                  "unopenable_stores": ZERO, "/failures": ZERO}


def target_of(bench: Bench, metric: str) -> str:
    if metric in bench.targets:
        return bench.targets[metric]
    return next((t for s, t in SUFFIX_TARGETS.items() if metric.endswith(s)), "")


@dataclass(frozen=True)
class Tree:
    label: str  # "before" or "after"
    path: Path
    commit: str


def git(tree: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(tree), *args], capture_output=True, text=True,
                          check=True).stdout


def tree_of(label: str, path: Path) -> Tree:
    path = path.resolve()
    if not (path / "src" / "amcp").is_dir() or not (path / "bench").is_dir():
        raise SystemExit(f"{label} tree {path} has no src/amcp and bench/")
    return Tree(label, path, git(path, "rev-parse", "--short", "HEAD").strip())


def dirty(tree: Tree) -> set[str]:
    return set(git(tree.path, "status", "--porcelain", "--untracked-files=all").splitlines())


def restore(tree: Tree, clean: set[str]) -> list[str]:
    """Put back what a run changed under bench/results (tracked: ``git checkout``; new
    files: removed); returns any other change, which is reported, not touched."""
    other = []
    for line in sorted(dirty(tree) - clean):
        status, rel = line[:2], line[3:]
        if not rel.startswith("bench/results/"):
            other.append(line)
        elif status == "??":
            (tree.path / rel).unlink(missing_ok=True)
        else:
            git(tree.path, "checkout", "--", rel)
    return other


def env_for(tree: Tree, state: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = f"{tree.path / 'src'}:{tree.path}"
    # Witnesses and keys of the throwaway stores go to a throwaway state directory; through
    # XDG_STATE_HOME, which hooks_latency hands on to the hooks (it drops AMCP_*).
    env["XDG_STATE_HOME"] = str(state)
    env.pop("AMCP_STATE_DIR", None)
    # Each tree keeps its bytecode (git ignores __pycache__), as an installed package
    # does; without it every process a bench starts would compile its imports again.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def compile_tree(tree: Tree, state: Path) -> None:
    """Byte-compile the tree first, so no side pays the compile inside a timed run."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", "src", "bench"], cwd=tree.path,
                   env=env_for(tree, state), capture_output=True, check=True)


def child_cpu_s() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def run_one(bench: Bench, tree: Tree, work: Path, keep: Path, tag: str) -> dict[str, Any]:
    """One run of one bench on one tree; its JSON is moved to ``keep``."""
    data = work / f"{tree.label}-{tree.commit}" / bench.name.replace(" ", "_")
    data.mkdir(parents=True, exist_ok=True)
    out = keep / f"{tag}.json"
    args = bench.before_args if tree.label == "before" and bench.before_args else bench.args
    argv = [a.format(data=data, out=out) for a in args]
    made = out if bench.result == "{out}" else tree.path / "bench" / "results" / bench.result
    clean = dirty(tree)
    cmd = ["nice", "-n", "10", sys.executable, str(tree.path / "bench" / bench.script), *argv]
    load, cpu, t0 = os.getloadavg(), child_cpu_s(), time.time()
    try:
        proc = subprocess.run(cmd, cwd=tree.path, env=env_for(tree, work / "state"), check=False,
                              capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        rc, tail = proc.returncode, (proc.stdout + proc.stderr)[-2000:]
    except subprocess.TimeoutExpired:
        rc, tail = -1, f"timed out after {RUN_TIMEOUT_S} s"
    row: dict[str, Any] = {
        "bench": bench.name, "tree": tree.label, "argv": argv, "rc": rc,
        "wall_s": round(time.time() - t0, 1), "cpu_s": round(child_cpu_s() - cpu, 1),
        "load_avg_1_5_15": {"start": list(load), "end": list(os.getloadavg())},
    }
    fresh = made.exists() and made.stat().st_mtime >= t0 - 1
    if fresh and made != out:
        shutil.copyfile(made, out)
    row["other_changes"] = restore(tree, clean)
    try:
        row["figures"] = bench.figures(json.loads(out.read_text())) if fresh else {}
    except (KeyError, StopIteration, ValueError, IndexError, AttributeError, TypeError) as exc:
        row["figures"], tail = {}, f"{tail}\nunreadable result: {exc!r}"
    if not row["figures"]:
        row["error"] = tail
    return row


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def run_all(benches: list[Bench], trees: tuple[Tree, Tree], rounds: int, work: Path,
            keep: Path) -> Iterator[dict[str, Any]]:
    for rnd in range(rounds):
        yield {"round": rnd + 1, "uptime": uptime(), "when": time.strftime("%H:%M:%S")}
        for bench in benches:
            for tree in trees if rnd % 2 == 0 else trees[::-1]:
                tag = f"r{rnd + 1}-{tree.label}-{bench.name.replace(' ', '_')}"
                row = run_one(bench, tree, work, keep, tag)
                row["round"] = rnd + 1
                note = f" ERROR rc={row['rc']}" if "error" in row else ""
                print(f"round {rnd + 1} {tree.label:6} {bench.name:22} {row['wall_s']:7.1f} s "
                      f"load {row['load_avg_1_5_15']['start'][0]:.1f}{note}", flush=True)
                yield row


def worse(metric: str, ratio: float, before: float, after: float, target: str) -> bool:
    if target == ZERO:
        return after > 0
    if metric.endswith("per_s"):
        return ratio < 1 / LIMIT
    return ratio > LIMIT


def summarise(benches: list[Bench], runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    table = []
    for bench in benches:
        mine = [r for r in runs if r.get("bench") == bench.name and r.get("figures")]
        metrics = dict.fromkeys(m for r in mine for m in r["figures"])
        for metric in metrics:
            side = {label: [r["figures"][metric] for r in mine
                            if r["tree"] == label and metric in r["figures"]]
                    for label in ("before", "after")}
            med = {k: statistics.median(v) if v else None for k, v in side.items()}
            b, a = med["before"], med["after"]
            ratio = a / b if a is not None and b else None
            target = target_of(bench, metric)
            flag = (a is not None and b is not None
                    and worse(metric, ratio or 0.0, b, a, target)
                    and (ratio is not None or target == ZERO))
            table.append({"bench": bench.name, "metric": metric, "target": target,
                          "before": b, "after": a, "ratio": ratio, "regression": flag,
                          "n": {k: len(v) for k, v in side.items()}, "values": side})
    return table


def fmt(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.3g}" if abs(x) < 10 else f"{x:.1f}"


def print_table(table: list[dict[str, Any]], markdown: bool = False) -> None:
    head = ("bench", "metric", "target", "before", "after", "after/before", "")
    rows = [(t["bench"], t["metric"], t["target"], fmt(t["before"]), fmt(t["after"]),
             "-" if t["ratio"] is None else f"{t['ratio']:.2f}",
             "REGRESSION > 10 %" if t["regression"] else "") for t in table]
    if markdown:
        for r in (head, ("---",) * len(head), *rows):
            print("| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |")
        return
    widths = [max(len(str(r[i])) for r in (head, *rows)) for i in range(len(head))]
    for r in (head, *rows):
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", type=Path)
    ap.add_argument("--show", type=Path, help="print the table of a saved result and exit")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--after", type=Path, default=ROOT)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--benches", nargs="+", help="names (or their first word) to run")
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "amcp-before-after")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "before_after.json")
    args = ap.parse_args()
    if args.show:
        print_table(json.loads(args.show.read_text())["table"], args.markdown)
        return
    if args.before is None:
        ap.error("--before is required (or --show)")
    benches = [b for b in BENCHES if not args.benches
               or b.name in args.benches or b.name.split()[0] in args.benches]
    if not benches:
        raise SystemExit(f"no bench matches {args.benches}; known: "
                         + ", ".join(b.name for b in BENCHES))
    trees = (tree_of("before", args.before), tree_of("after", args.after))
    args.work.mkdir(parents=True, exist_ok=True)
    keep = Path(tempfile.mkdtemp(prefix="runs-", dir=args.work))
    for tree in trees:
        compile_tree(tree, args.work / "state")
    started = time.time()
    runs = list(run_all(benches, trees, args.rounds, args.work, keep))
    table = summarise(benches, runs)
    print_table(table, args.markdown)
    report = {
        "benchmark": "before_after", "rounds": args.rounds, "limit_ratio": LIMIT,
        "trees": {t.label: {"path": str(t.path), "commit": t.commit} for t in trees},
        "python": sys.version.split()[0], "cpus": os.cpu_count(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "minutes": round((time.time() - started) / 60, 1), "raw_runs_dir": str(keep),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "table": table, "runs": runs,
    }
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
