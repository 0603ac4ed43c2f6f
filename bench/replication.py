"""Replication between real ``amcp serve`` processes on loopback (issue 17 targets).

1. push: a KT-FACT written to node A (``--peer B``) is visible on B — p50/p95/max over
   repeated writes, measured from A's MEMORY_WRITE_ACK to the first MEMORY_READ on B that
   finds it (B is polled every 2 ms). Target: p95 <= 500 ms (PROFILE §10).
2. heal: three nodes (c → b → a); c is stopped, both sides write (a and b through the node,
   c to its own store), c is started again; the time until every node reports the same
   per-scope digests. Target: <= 10 s.
3. throughput: a hub holding N records (hashing embedder) and a new, empty edge started
   with ``--peer hub``; records/s until the edge holds all of them, and the CPU per record
   each process spent meanwhile. Target: >= 5,000/s.
4. apply (not in the default parts): the same bootstrap in one process, no network — the
   hub's pages read, then applied to an empty edge; CPU per record of each side.

    .venv/bin/python bench/replication.py [--writes 50] [--records 100000] [--batch 2000]
        [--verify-workers 0,1]  (one throughput run per value; CPU per record of both)

Writes bench/results/replication.json. The machine is shared: the load average at the start
and end of each part is in the results.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from common import cpu_with_children_s  # noqa: E402

from amcp.agent.hooks.runtime import read_runtime  # noqa: E402
from amcp.memory import Memory  # noqa: E402
from amcp.node import SyncClient  # noqa: E402
from amcp.node.client import RetryPolicy  # noqa: E402
from amcp.wire import MsgType  # noqa: E402

RETRY = RetryPolicy(ack_timeout=5.0, backoff=(5.0, 10.0), request_timeout=120.0,
                    connect_timeout=10.0, heartbeat=3600.0)
_ENTRY = "import sys; sys.argv = ['amcp', *sys.argv[1:]]; from amcp.cli.entry import main; main()"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _load() -> float:
    return round(os.getloadavg()[0], 2)


class Node:
    """One ``amcp serve`` process with its own store."""

    def __init__(self, root: Path, name: str, *extra: str) -> None:
        self.name, self.extra = name, extra
        self.store = root / name / "memory.db"
        self.port = _free_port()
        self.err = root / f"{name}.err"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{os.environ.get('PYTHONPATH', '')}"}
        with self.err.open("ab") as fh:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _ENTRY, "serve", "--store", str(self.store), "--port",
                 str(self.port), "--http-port", str(_free_port()), "--embedder", "hashing",
                 *self.extra], stdout=subprocess.DEVNULL, stderr=fh, env=env)
        for _ in range(2400):
            if read_runtime(self.store) is not None:
                return
            if self.proc.poll() is not None:
                raise RuntimeError(self.err.read_text())
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} did not start: {self.err.read_text()}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def client(self) -> SyncClient:
        return SyncClient.connect("127.0.0.1", self.port, retry=RETRY, budget_tokens=2100)


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))] * 1000, 1)


def push_latency(root: Path, writes: int) -> dict[str, Any]:
    b = Node(root, "push-b")
    b.start()
    a = Node(root, "push-a", "--peer", b.endpoint)
    a.start()
    load = _load()
    lat: list[float] = []
    try:
        with Memory(root / "writer" / "memory.db", embedder="hashing") as writer:
            records = [writer.compose(f"fact number {i}: port {8000 + i} is taken",
                                      type="KT-FACT", scope="team:bench").to_dict()
                       for i in range(writes + 1)]
        with a.client() as ca, b.client() as cb:
            ca.write(records[0])  # the first connection a→b is made before we time
            _wait(lambda: bool(cb.read_ids([records[0]["knowledge_id"]]).records), 30)
            for amf in records[1:]:
                ca.write(amf)
                acked = time.perf_counter()
                kid = amf["knowledge_id"]
                _wait(lambda kid=kid: bool(cb.read_ids([kid]).records), 30, every=0.002)
                lat.append(time.perf_counter() - acked)
                time.sleep(0.05)
    finally:
        a.stop()
        b.stop()
    return {"writes": writes, "p50_ms": _pct(lat, 0.5), "p95_ms": _pct(lat, 0.95),
            "max_ms": round(max(lat) * 1000, 1), "mean_ms": round(statistics.mean(lat) * 1000, 1),
            "target_p95_ms": 500, "load_start": load, "load_end": _load()}


def _wait(check: Callable[[], bool], timeout: float, every: float = 0.02) -> float:
    start = time.perf_counter()
    while not check():
        if time.perf_counter() - start > timeout:
            raise TimeoutError("not converged in time")
        time.sleep(every)
    return time.perf_counter() - start


def _digests(client: SyncClient) -> dict[str, Any]:
    async def ask() -> dict[str, Any]:
        frame = await client.client.request(MsgType.SYNC_PULL_REQUEST,
                                            {"since": 0, "digest": True})
        return dict(frame.payload.get("digests") or {})

    return client._call(ask())


def partition_heal(root: Path, writes: int) -> dict[str, Any]:
    a = Node(root, "heal-a")
    a.start()
    b = Node(root, "heal-b", "--peer", a.endpoint)
    b.start()
    c = Node(root, "heal-c", "--peer", b.endpoint)
    c.start()
    load = _load()
    with Memory(root / "heal-writer" / "memory.db", embedder="hashing") as writer:
        def rec(text: str) -> dict[str, Any]:
            return writer.compose(text, type="KT-DECISION", scope="team:bench").to_dict()

        first = rec("before the partition")
        left = [(rec(f"left a {i}"), rec(f"left b {i}")) for i in range(writes)]
    try:
        with a.client() as ca:
            ca.write(first)
        time.sleep(3)  # spread to b and c before the cut
        c.stop()  # the partition: c is cut off (and writes on its own)
        with a.client() as ca, b.client() as cb:
            for on_a, on_b in left:
                ca.write(on_a)
                cb.write(on_b)
        with Memory(c.store, embedder="hashing") as mc:
            for i in range(writes):
                mc.remember(f"right c {i}", scope="team:bench")
        c.start()
        healed = time.perf_counter()
        clients = [n.client() for n in (a, b, c)]
        try:
            def same() -> bool:
                seen = [_digests(cl) for cl in clients]
                return all(d == seen[0] for d in seen) and bool(seen[0])

            _wait(same, 120, every=0.1)
            took = time.perf_counter() - healed  # from c listening again
            records = {n.name: cl.health()["store"]["records"]
                       for n, cl in zip((a, b, c), clients, strict=True)}
        finally:
            for cl in clients:
                cl.close()
    finally:
        for n in (c, b, a):
            n.stop()
    return {"writes_per_side": writes, "converged_s": round(took, 2), "records": records,
            "target_s": 10, "load_start": load, "load_end": _load()}


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process and its live children (a verifier pool)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        me, parent = int(stat.parent.name), int(fields[1])
        if me == pid or parent == pid:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def build_hub(root: Path, n: int) -> tuple[Node, float]:
    hub = Node(root, "hub")
    started = time.perf_counter()
    with Memory(hub.store, embedder="hashing") as mem:
        for start in range(0, n, 1000):
            mem.remember_many({"text": f"record {i}: service s{i % 97} listens on port "
                                       f"{1024 + i % 50000}", "scope": f"team:{i % 7}"}
                              for i in range(start, min(n, start + 1000)))
    return hub, time.perf_counter() - started


def throughput(root: Path, hub: Node, built: float, n: int, batch: int,
               workers: int, run: int) -> dict[str, Any]:
    """A new, empty edge pulls the hub's ``n`` records (the hub restarted for each run)."""
    hub.start()
    config = root / f"edge-{run}.toml"
    # verify_workers only when asked for: the same script then runs against older trees
    extra = f"verify_workers = {workers}\n" if workers else ""
    config.write_text(f"[sync]\nbatch = {batch}\n{extra}", encoding="utf-8")
    edge = Node(root, f"edge-{run}", "--peer", hub.endpoint, "--config", str(config))
    load = _load()
    try:
        assert hub.proc is not None
        hub_cpu0 = _cpu_s(hub.proc.pid)
        edge.start()
        assert edge.proc is not None
        edge_cpu0 = _cpu_s(edge.proc.pid)  # start-up (imports, store creation) left out
        t0 = time.perf_counter()
        with edge.client() as ce:
            first = None
            while True:
                have = int(ce.health()["store"]["records"])
                if have and first is None:
                    first = (time.perf_counter(), have)
                if have >= n:
                    break
                if time.perf_counter() - t0 > 3600:
                    raise TimeoutError(f"edge has {have} of {n} after an hour")
                time.sleep(0.25)
        done = time.perf_counter()
        edge_cpu = _cpu_s(edge.proc.pid) - edge_cpu0
        hub_cpu = _cpu_s(hub.proc.pid) - hub_cpu0
    finally:
        edge.stop()
        hub.stop()
        shutil.rmtree(edge.store.parent, ignore_errors=True)  # 100k records: ~GB of disk
    assert first is not None
    steady = (n - first[1]) / max(done - first[0], 1e-9)
    return {"records": n, "batch": batch, "verify_workers": workers,
            "hub_build_s": round(built, 1),
            "edge_listening_to_complete_s": round(done - t0, 1),
            "records_per_s_total": round(n / (done - t0)),
            "records_per_s_steady": round(steady), "target_records_per_s": 5000,
            # CPU while syncing; the edge's includes its verifier workers and the bench's
            # health polls (4/s, negligible)
            "edge_cpu_ms_per_record": round(edge_cpu * 1000 / n, 3),
            "hub_cpu_ms_per_record": round(hub_cpu * 1000 / n, 3),
            "load_start": load, "load_end": _load()}


def in_process(root: Path, hub: Node, n: int, batch: int, workers: int) -> dict[str, Any]:
    """The same bootstrap without the network: the hub's pages read (``pull_changes``) and
    applied to an empty edge (``apply_changes``) in this process, CPU per record of each
    side (the verifier's workers included for the edge). Where a sync's CPU goes, without
    the wire's encoding and the other process's competition for the cores."""
    from amcp.sync import apply_changes, pull_changes

    pages: list[list[dict[str, Any]]] = []
    with Memory(hub.store, embedder="hashing") as mem:
        t = time.process_time()
        since, more = 0, True
        while more:
            page = pull_changes(mem, since, limit=batch, max_bytes=16 * 1024 * 1024)
            pages.append(list(page.changes))
            since, more = page.watermark, page.more
        pull_cpu = time.process_time() - t
    verifier = None
    if workers:  # imported only then: the same script runs against trees without it
        from amcp.sync.bulk import Verifier

        verifier = Verifier(workers)
    kw = {"verifier": verifier} if verifier is not None else {}
    edge_dir = root / f"inproc-{workers}"
    load = _load()
    applied = 0
    try:
        with Memory(edge_dir / "memory.db", embedder="hashing") as edge:
            t, wall = cpu_with_children_s(), time.perf_counter()
            for changes in pages:
                applied += apply_changes(edge, changes, **kw).applied
            wall = time.perf_counter() - wall
    finally:
        if verifier is not None:
            verifier.close()
        edge_cpu = cpu_with_children_s() - t  # after close: the workers' CPU is counted once reaped
        shutil.rmtree(edge_dir, ignore_errors=True)
    return {"records": n, "batch": batch, "verify_workers": workers, "applied": applied,
            "hub_pull_cpu_ms_per_record": round(pull_cpu * 1000 / n, 3),
            "edge_apply_cpu_ms_per_record": round(edge_cpu * 1000 / n, 3),
            "edge_apply_wall_s": round(wall, 1), "load_start": load, "load_end": _load()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--writes", type=int, default=50)
    ap.add_argument("--heal-writes", type=int, default=50)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=2000,
                    help="changes per pull page ([sync] batch of the edge)")
    ap.add_argument("--verify-workers", default="0",
                    help="comma-separated [sync] verify_workers values, one sync each")
    ap.add_argument("--parts", default="push,heal,throughput",
                    help="push, heal, throughput, apply (the bootstrap in one process)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "replication.json")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    result: dict[str, Any] = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "python": platform.python_version(), "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="amcp-repl-") as tmp:
        root = Path(tmp)
        if "push" in parts:
            result["push"] = push_latency(root, args.writes)
            print("push", result["push"], flush=True)
        if "heal" in parts:
            result["heal"] = partition_heal(root, args.heal_writes)
            print("heal", result["heal"], flush=True)
        hub = built = None
        if "apply" in parts:
            hub, built = build_hub(root, args.records)
            result["apply"] = [in_process(root, hub, args.records, args.batch, int(w))
                               for w in args.verify_workers.split(",")]
            print("apply", result["apply"], flush=True)
        if "throughput" in parts:
            if hub is None or built is None:
                hub, built = build_hub(root, args.records)
            runs = []
            for run, w in enumerate(args.verify_workers.split(",")):
                runs.append(throughput(root, hub, built, args.records, args.batch, int(w), run))
                print("throughput", runs[-1], flush=True)
            result["throughput"] = runs[0] if len(runs) == 1 else runs
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
