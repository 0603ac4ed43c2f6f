"""MEMORY_READ-by-id round trips over loopback, and the node's memory per idle connection.

The node runs in its own process (as in production); the clients run in this one, on one
event loop. Targets: >= 5,000 round trips/s with 16 concurrent clients, p99 <= 10 ms;
<= 64 KiB of server RSS per idle (handshaken, cold-booted) connection.

    .venv/bin/python bench/node_rtt.py [--seconds 3] [--repeats 3] [--idle 256] [--loop uvloop]

Both processes run on the same event loop kind (``--loop``: uvloop when installed, which is
what ``amcp.node.run`` picks, or asyncio's own). Besides wall-clock rates, each run reports
the CPU time each side spent per round trip (server: its process's utime+stime; clients:
this process's CPU time) — the figure that stays meaningful on a shared, loaded machine.

Writes bench/results/node_rtt.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from amcp.heap import freeze_startup_heap  # noqa: E402
from amcp.memory import Memory  # noqa: E402
from amcp.node import Limits, NodeServer, RetryPolicy, connect  # noqa: E402
from amcp.node.runtime import loop_name, run  # noqa: E402

RETRY = RetryPolicy(heartbeat=3600.0)


def _serve(path: str, port_q: Any, stop: Any, inline: bool, uv: bool) -> None:
    async def main() -> None:
        mem = Memory(path, embedder="hashing")
        mem.flush_in_background()  # as `amcp serve` sets its store up
        kids = [mem.remember(f"bench record {i}", scope="bench").knowledge_id for i in range(64)]
        server = NodeServer(mem, encryption=False, inline_reads=inline,
                            limits=Limits(max_connections=4096))
        await server.start("127.0.0.1", 0)
        freeze_startup_heap()  # as `amcp serve` does once it listens (amcp/heap.py)
        port_q.put((server.port, kids, os.getpid(), loop_name(asyncio.get_running_loop())))
        while not stop.is_set():
            await asyncio.sleep(0.1)
        await server.close()
        mem.close()

    run(main(), prefer_uvloop=uv)


def _cpu_s(pid: int) -> float:
    """utime + stime of process ``pid`` in seconds (/proc/PID/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


async def _rtt(
    port: int, pid: int, kids: list[str], clients: int, seconds: float
) -> dict[str, float]:
    conns = [await connect("127.0.0.1", port, retry=RETRY) for _ in range(clients)]
    lat: list[float] = []
    loop = asyncio.get_running_loop()

    async def worker(i: int, c: Any) -> None:
        n = i
        end = loop.time() + seconds
        while loop.time() < end:
            t0 = time.perf_counter()
            res = await c.read_ids([kids[n % len(kids)]])
            lat.append(time.perf_counter() - t0)
            assert len(res.records) == 1
            n += 1

    for c in conns:  # warm up
        await c.read_ids(kids[:1])
    server_cpu, client_cpu = _cpu_s(pid), time.process_time()
    started = time.perf_counter()
    await asyncio.gather(*(worker(i, c) for i, c in enumerate(conns)))
    took = time.perf_counter() - started
    server_cpu, client_cpu = _cpu_s(pid) - server_cpu, time.process_time() - client_cpu
    for c in conns:
        await c.aclose()
    lat.sort()
    return {
        "rtt_per_s": len(lat) / took,
        "p50_ms": lat[len(lat) // 2] * 1000,
        "p99_ms": lat[int(len(lat) * 0.99)] * 1000,
        "server_cpu_us_per_rt": server_cpu / len(lat) * 1e6,
        "client_cpu_us_per_rt": client_cpu / len(lat) * 1e6,
        "round_trips": len(lat),
    }


async def _idle(port: int, pid: int, n: int) -> dict[str, float]:
    # One connection first: what the first one loads or builds once (handshake code paths,
    # caches) is not per-connection memory.
    warm = await connect("127.0.0.1", port, retry=RETRY)
    await warm.aclose()
    await asyncio.sleep(0.5)
    before = _rss_kib(pid)
    conns = []
    for _ in range(n):
        conns.append(await connect("127.0.0.1", port, retry=RETRY))
    await asyncio.sleep(1.0)
    after = _rss_kib(pid)
    for c in conns:
        await c.aclose()
    return {"connections": n, "rss_before_kib": before, "rss_after_kib": after,
            "kib_per_connection": (after - before) / n}


def run_one(inline: bool, args: argparse.Namespace) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        q, stop = ctx.Queue(), ctx.Event()
        uv = args.loop == "uvloop"
        proc = ctx.Process(target=_serve, args=(str(Path(tmp) / "m.db"), q, stop, inline, uv))
        proc.start()
        port, kids, pid, server_loop = q.get(timeout=60)
        try:
            # Idle memory first, on the fresh node: after the load runs, the allocator
            # returning their buffers can make the RSS delta negative (seen: -1.7 KiB).
            idle = run(_idle(port, pid, args.idle), prefer_uvloop=uv) if inline else None
            rtts = [run(_rtt(port, pid, kids, args.clients, args.seconds), prefer_uvloop=uv)
                    for _ in range(args.repeats)]
        finally:
            stop.set()
            proc.join(30)
    med = {k: statistics.median(r[k] for r in rtts) for k in rtts[0]}
    return {"inline_reads": inline, "server_loop": server_loop, "runs": rtts, "median": med,
            "idle": idle}


def _has_uvloop() -> bool:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--idle", type=int, default=256)
    ap.add_argument("--loop", choices=("uvloop", "asyncio"),
                    default="uvloop" if _has_uvloop() else "asyncio")
    args = ap.parse_args()
    load_before = os.getloadavg()
    results = [run_one(True, args), run_one(False, args)]
    report = {
        "bench": "node_rtt",
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "clients": args.clients,
        "seconds": args.seconds,
        "repeats": args.repeats,
        "loop": args.loop,
        # Wall-clock rates on a shared machine depend on everyone else's work: record it.
        "loadavg_1_5_15": {"before": load_before, "after": os.getloadavg()},
        "targets": {"rtt_per_s": 5000, "p99_ms": 10, "kib_per_idle_connection": 64},
        "results": results,
    }
    for r in results:
        m = r["median"]
        print(f"inline_reads={r['inline_reads']}: {m['rtt_per_s']:.0f} round trips/s, "
              f"p50 {m['p50_ms']:.2f} ms, p99 {m['p99_ms']:.2f} ms (median of {args.repeats}); "
              f"CPU per round trip: server {m['server_cpu_us_per_rt']:.0f} us, "
              f"clients {m['client_cpu_us_per_rt']:.0f} us [{r['server_loop']}]")
        if r["idle"]:
            i = r["idle"]
            print(f"idle: {i['kib_per_connection']:.1f} KiB server RSS per connection "
                  f"({i['connections']} connections)")
    out = ROOT / "bench" / "results" / "node_rtt.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out} (load average {report['loadavg_1_5_15']})")


if __name__ == "__main__":
    main()
