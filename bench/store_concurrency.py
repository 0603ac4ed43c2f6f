"""Store concurrency (issue 14, finding 4): false tamper alarms and bricked stores when
several processes open, create and write one SQLite store.

Four measurements, each bounded in count and time, loopback/disk only:

a. **Opens under a writer**: one process writes ~50 records/s through ``Memory`` while
   this one opens the store N times (``Memory(...)``, verification on) and closes it.
   Any IntegrityError/StoreError at open is a false alarm: nobody tampered.
b. **Five creators**: T trials; in each, 5 long-lived worker processes (spawned once, so
   imports are paid once) meet at a barrier and create the same new store (same path,
   same key dir) at once, each writing one record. Afterwards: is the store openable,
   and is every acknowledged write in it?
c. **Mixed CLI load**: a writer process as in (a) while three threads run ``amcp
   remember`` / ``recall`` / ``stats`` against the store; any non-zero exit is a failure,
   and every acknowledged ``remember`` must be in the store afterwards.
d. **Fast-reader opens under a writer**: (a) with the coding-agent hooks' reader
   (``store.fastread.FastReader``: witnesses, the head's MAC, log tail and counts in one
   snapshot) and one verified pointer-tier read per open; a refusal, an ``Unreconciled``
   or a record left out is a false alarm.

    .venv/bin/python bench/store_concurrency.py [--quick] [--name NAME]

Writes ``bench/results/<name>.json`` (default ``store_concurrency``). The default run
(500 opens, 100 trials, 36 CLI calls) takes a few minutes on two cores.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from bench.common import percentile, save  # noqa: E402

# The CLI of this tree (not whatever ``amcp`` the venv installed): ``python -m`` with src/
# first on the path, in the child's environment.
AMCP = (sys.executable, "-m", "amcp.cli.entry")
CREATORS = 5
WRITE_RATE = 50.0  # records per second, the figure


def _memory(db: Path) -> Any:
    from amcp.memory import Memory

    return Memory(db, embedder="hashing", key_dir=db.parent / "keys")


def _kind(exc: BaseException) -> str:
    """A failure's class and the gist of its message (paths and ids dropped)."""
    text = str(exc).split(": ", 1)[-1] if "memory.db" in str(exc) else str(exc)
    text = re.sub(r"/\S+", "PATH", re.sub(r"\b\d+\b", "N", text))  # group alike failures
    return f"{type(exc).__name__}: {text[:110]}"


# ---------------------------------------------------------------------- a writer process


def writer(db: str, stop: Any, ready: Any, counts: Any, rate: float) -> None:
    """Write ~``rate`` records/s until ``stop`` is set; ``counts`` = [acked, failed]."""
    mem = _memory(Path(db))
    ready.set()
    period, n = 1.0 / rate, 0
    next_at = time.perf_counter()
    try:
        while not stop.is_set():
            try:
                mem.remember(f"writer record {n} {os.getpid()} {time.time()}", scope="bench:w")
                counts[0] += 1
            except Exception:
                counts[1] += 1
            n += 1
            next_at += period
            time.sleep(max(0.0, next_at - time.perf_counter()))
    finally:
        mem.close()


class Writer:
    """The writer process, started and stopped around one measurement."""

    def __init__(self, ctx: Any, db: Path, rate: float) -> None:
        self.stop, ready = ctx.Event(), ctx.Event()
        self.counts = ctx.Array("i", [0, 0])
        self.proc = ctx.Process(target=writer, args=(str(db), self.stop, ready, self.counts,
                                                     rate), daemon=True)
        self.started = time.perf_counter()
        self.proc.start()
        if not ready.wait(120):
            raise RuntimeError("the writer did not start")

    def wait_for(self, acked: int, timeout_s: float = 60.0) -> None:
        deadline = time.perf_counter() + timeout_s
        while self.counts[0] < acked and time.perf_counter() < deadline:
            time.sleep(0.02)

    def finish(self) -> dict[str, Any]:
        self.stop.set()
        self.proc.join(60)
        took = time.perf_counter() - self.started
        acked, failed = self.counts[0], self.counts[1]
        return {"acked": acked, "failed": failed, "records_per_s": round(acked / took, 1)}


# ---------------------------------------------------------------------- (a) opens under a writer


def _preload(db: Path, n: int = 200) -> None:
    """A store with some history, so an open has a log to check."""
    mem = _memory(db)
    try:
        mem.remember_many({"text": f"preloaded record {i}", "scope": "bench:p"}
                          for i in range(n))
    finally:
        mem.close()


OPEN_INTERVAL_S = 0.02  # one open per 20 ms: the 500 opens span ~10 s of the writer's commits


def _fast_open(db: Path) -> None:
    """What a hook does on a read: the fast reader's open (witnesses, the head's MAC, the
    log tail and counts) and one verified pointer-tier read."""
    from amcp.store.fastread import FastReader

    with FastReader(db) as reader:
        reader.ranked(["bench:p"], 5)
        if reader.quarantined():
            raise RuntimeError(f"left out: {reader.quarantined()}")


def fast_opens_under_writer(ctx: Any, work: Path, opens: int) -> dict[str, Any]:
    """(a) with the hooks' fast reader instead of ``Memory``."""
    return opens_under_writer(ctx, work, opens, opener=_fast_open, where="d")


def opens_under_writer(ctx: Any, work: Path, opens: int, *,
                       opener: Any = None, where: str = "a") -> dict[str, Any]:
    db = work / where / "memory.db"
    _preload(db)  # created before the writer starts: (b) measures creation
    w = Writer(ctx, db, WRITE_RATE)
    w.wait_for(10)  # opens race real commits, not the writer's start-up
    failures: Counter[str] = Counter()
    times = []
    first, started = w.counts[0], time.perf_counter()
    try:
        for n in range(opens):
            t0 = time.perf_counter()
            try:
                if opener is None:
                    _memory(db).close()
                else:
                    opener(db)
            except Exception as exc:
                failures[_kind(exc)] += 1
            times.append((time.perf_counter() - t0) * 1000)
            time.sleep(max(0.0, started + (n + 1) * OPEN_INTERVAL_S - time.perf_counter()))
        window = time.perf_counter() - started
        during = w.counts[0] - first
    finally:
        wrote = w.finish()
    return {
        "opens": opens, "false_alarms": sum(failures.values()), "failures": dict(failures),
        "open_ms_p50": round(percentile(times, 50), 1),
        "open_ms_p95": round(percentile(times, 95), 1),
        "writes_during_opens": during, "writes_per_s_during_opens": round(during / window, 1),
        "writer": wrote,
    }


# ---------------------------------------------------------------------- (b) five creators


def creator(index: int, jobs: Any, results: Any, barrier: Any) -> None:
    """One of the five: per trial, meet the others at the barrier, then create the store
    and write one record; report what was acknowledged."""
    import amcp.memory  # noqa: F401  (imported before the barrier: only the race is timed)

    while (db := jobs.get()) is not None:
        barrier.wait()
        kid, error = None, None
        try:
            mem = _memory(Path(db))
            try:
                kid = mem.remember(f"creator {index} wrote this to {db}",
                                   scope="bench:c").knowledge_id
            finally:
                mem.close()
        except Exception as exc:
            error = _kind(exc)
        results.put((index, kid, error))


def five_creators(ctx: Any, work: Path, trials: int) -> dict[str, Any]:
    barrier = ctx.Barrier(CREATORS)
    jobs = [ctx.Queue() for _ in range(CREATORS)]
    results = ctx.Queue()
    procs = [ctx.Process(target=creator, args=(i, jobs[i], results, barrier), daemon=True)
             for i in range(CREATORS)]
    for p in procs:
        p.start()
    unopenable, lost, write_errors = 0, 0, Counter()
    refused_trials = bricked_after_acks = 0
    open_errors: Counter[str] = Counter()
    acked_total = 0
    try:
        for t in range(trials):
            db = work / "b" / f"t{t}" / "memory.db"
            for q in jobs:
                q.put(str(db))
            got = [results.get(timeout=300) for _ in range(CREATORS)]
            acked = [kid for _i, kid, _e in got if kid]
            acked_total += len(acked)
            write_errors.update(e for _i, _k, e in got if e)
            refused_trials += len(acked) < CREATORS
            try:
                mem = _memory(db)
            except Exception as exc:
                unopenable += 1
                bricked_after_acks += len(acked) == CREATORS
                open_errors[_kind(exc)] += 1
                continue
            try:
                lost += sum(1 for kid in acked if mem.store.get(kid) is None)
            finally:
                mem.close()
            shutil.rmtree(db.parent, ignore_errors=True)
    finally:
        for q in jobs:
            q.put(None)
        for p in procs:
            p.join(30)
    return {
        "trials": trials, "processes": CREATORS, "unopenable_stores": unopenable,
        "lost_acknowledged_writes": lost, "acknowledged": acked_total,
        "refused_writes": sum(write_errors.values()),
        "trials_with_a_refused_writer": refused_trials,
        "unopenable_after_every_write_acked": bricked_after_acks,
        "write_errors": dict(write_errors),
        "open_errors": dict(open_errors),
    }


# ---------------------------------------------------------------------- (c) mixed CLI load


def _cli(args: list[str], db: Path, env: dict[str, str]) -> tuple[int, str, str]:
    done = subprocess.run([*AMCP, *args, "--store", str(db)], capture_output=True,
                          text=True, env={**env, "PYTHONPATH": str(ROOT / "src")}, timeout=300,
                          check=False)
    return done.returncode, done.stdout, done.stderr


def mixed_cli(ctx: Any, work: Path, calls: int) -> dict[str, Any]:
    db = work / "c" / "memory.db"
    _preload(db)
    env = dict(os.environ)
    w = Writer(ctx, db, WRITE_RATE)
    w.wait_for(10)
    failures: Counter[str] = Counter()
    acked: list[str] = []
    lock = threading.Lock()
    commands = [
        lambda i: ["remember", f"cli memory {i}", "--embedder", "hashing", "--json"],
        lambda i: ["recall", "writer record", "--embedder", "hashing", "--json"],
        lambda i: ["stats", "--json"],
    ]

    def run(which: int) -> None:
        for i in range(calls // len(commands)):
            code, out, err = _cli(commands[which](i), db, env)
            with lock:
                if code != 0:
                    line = (err.strip().splitlines() or ["?"])[-1]
                    line = re.sub(r"/\S+", "PATH", re.sub(r"\b\d+\b", "N", line))
                    failures[line[-120:]] += 1
                elif which == 0:
                    acked.append(json.loads(out)["knowledge_id"])

    started = time.perf_counter()
    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(commands))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        wrote = w.finish()
    took = time.perf_counter() - started
    lost = 0
    try:
        mem = _memory(db)
        lost = sum(1 for kid in acked if mem.store.get(kid) is None)
        mem.close()
    except Exception as exc:
        failures[f"final open: {_kind(exc)}"] += 1
    done = calls // len(commands) * len(commands)
    return {"cli_calls": done, "failures": sum(failures.values()), "by_error": dict(failures),
            "acknowledged_remembers": len(acked), "lost_acknowledged_writes": lost,
            "seconds": round(took, 1), "writer": wrote}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="100 opens, 20 trials, 12 calls")
    ap.add_argument("--opens", type=int)
    ap.add_argument("--trials", type=int)
    ap.add_argument("--calls", type=int)
    ap.add_argument("--only", help="the parts to run, e.g. 'ad' (default: all four)")
    ap.add_argument("--name", default="store_concurrency")
    args = ap.parse_args()
    opens = args.opens or (100 if args.quick else 500)
    trials = args.trials or (20 if args.quick else 100)
    calls = args.calls or (12 if args.quick else 36)
    ctx = mp.get_context("spawn")
    work = Path(tempfile.mkdtemp(prefix="amcp-concurrency-"))
    # Witnesses of these throwaway stores go to a throwaway per-user state directory.
    os.environ["XDG_STATE_HOME"] = str(work / "xdg-state")
    os.environ["AMCP_STATE_DIR"] = str(work / "xdg-state" / "amcp")
    out: dict[str, Any] = {}
    started = time.perf_counter()
    try:
        for part, fn, n in (("a_opens_under_writer", opens_under_writer, opens),
                            ("b_five_creators", five_creators, trials),
                            ("c_mixed_cli", mixed_cli, calls),
                            ("d_fast_reader_opens_under_writer", fast_opens_under_writer,
                             opens)):
            if args.only and part[0] not in args.only:
                continue
            t0 = time.perf_counter()
            out[part] = {**fn(ctx, work, n), "seconds": round(time.perf_counter() - t0, 1)}
            print(part, json.dumps(out[part], indent=1))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    git = subprocess.run(["git", "-C", str(ROOT), "log", "--oneline", "-1"],
                         capture_output=True, text=True, check=False).stdout.strip()
    path = save(args.name, {"commit": git, "write_rate": WRITE_RATE, **out,
                            "seconds": round(time.perf_counter() - started, 1)})
    print(f"wrote {path} in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
