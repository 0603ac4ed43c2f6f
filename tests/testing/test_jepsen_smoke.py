"""bench/jepsen.py end to end on a small scale, so the harness itself cannot rot.

Two node processes, a few rounds with faults and one partition. Only the harness is judged
here (it ran, healed, checked and reported every figure); whether replication passes is
the bench's verdict, recorded in bench/results/jepsen.json, not a test's.
"""

from __future__ import annotations

import argparse
import asyncio

from bench.jepsen import run

FIGURES = ("lost_acknowledged_writes", "resurrections", "digest_mismatches",
           "divergent_conflict_winners", "divergent_records", "converged_after_heal_s")


def test_a_small_jepsen_run_reports_every_figure() -> None:
    args = argparse.Namespace(nodes=2, rounds=12, partition_every=6, round_s=0.05, seed=3,
                              warmup=2.0, give_up=20.0)
    result = asyncio.run(asyncio.wait_for(run(args), 180))
    assert result["acknowledged"] > 0
    assert result["partitions"] == 2
    assert result["proxy_stats"]["frames"] > 0
    for figure in FIGURES:
        assert figure in result
    assert result["lost_acknowledged_writes"] == 0  # clients talk to their node directly
