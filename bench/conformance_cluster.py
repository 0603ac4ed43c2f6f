"""The conformance kit against real ``amcp serve`` processes: the README's ``--level 2``
against one node, or ``--level 3`` against N nodes peered with each other.

    PYTHONPATH=src:. python bench/conformance_cluster.py --nodes 3 --level 3
    PYTHONPATH=src:. python bench/conformance_cluster.py --nodes 1 --level 2

Each node has its own store and the hashing embedder and names every other node as a
``--peer`` (the node config's defaults otherwise: gossip every 1 s). With three or more
nodes the second is also T2-08's ``--reference``. Prints the kit's table and writes
``bench/results/conformance_<level>_<nodes>.json`` (the kit's report, the load average
before and after, wall and CPU time of the kit's process). Timed procedures (T2-01's
100 ms) judge whatever else the machine is doing: the load is recorded for that reason.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

from bench.cluster import free_ports
from bench.common import save
from bench.nodeproc import amcp_serve

from amcp.conformance import KitConfig, run_level


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--level", type=int, default=3, choices=(1, 2, 3))
    ap.add_argument("--converge-within", type=float, default=60.0)
    args = ap.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="amcp-conf-") as tmp:
        ports = free_ports(args.nodes)
        nodes = []
        try:
            for i, port in enumerate(ports):
                peers = [a for j, p in enumerate(ports) if j != i
                         for a in ("--peer", f"127.0.0.1:{p}")]
                nodes.append(amcp_serve(Path(tmp) / f"node{i}" / "memory.db", port, *peers))
            reference = f"127.0.0.1:{ports[1]}" if args.nodes >= 3 else None
            config = KitConfig(converge_within=args.converge_within, reference=reference)
            wall, cpu = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
            report = run_level("127.0.0.1", ports[0], args.level, config=config,
                               peers=[("127.0.0.1", p) for p in ports[1:]])
            after = resource.getrusage(resource.RUSAGE_SELF)
            wall = time.perf_counter() - wall
        finally:
            for node in nodes:
                node.stop()
    failed = [(r.id, r.detail) for r in report.results if not r.passed]
    for r in report.results:
        print(f"{r.id} {'PASS' if r.passed else 'FAIL'} {r.duration_ms:8.0f} ms  {r.detail}")
    path = save(f"conformance_{args.level}_{args.nodes}", {
        "conditions": f"{args.nodes} amcp serve processes on loopback, each peered with every "
                      "other (default [sync] intervals), hashing embedder; 2 cores shared "
                      "with other engineers' jobs",
        **vars(args), "passed": report.passed, "failed": failed,
        "kit_wall_s": round(wall, 1),
        "kit_cpu_s": round(after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime, 1),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "report": report.to_json()})
    print(f"wrote {path}: {'passed' if report.passed else f'{len(failed)} failed'}")
    sys.exit(report.exit_code())


if __name__ == "__main__":
    main()
