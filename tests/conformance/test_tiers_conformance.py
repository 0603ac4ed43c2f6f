"""T3-04 against an edge with a small tier 0 and no holder: it must fail, saying why.

The passing runs of T3-04 and T2-03 are in test_level3_cluster.py, against three tiered
nodes together with the rest of Level 3 (issue 17 kept them apart while an evicted
conflict loser came back active; tests/sync/test_tier_conflicts.py).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from tests.sync.kit import FAST, cluster

from amcp.conformance import KitConfig, Report, run_level
from amcp.sync.tierconfig import TierConfig

EDGE = replace(FAST, tiers=TierConfig(max_records=40, idle_days=0, interval=0.5))


def _run(tmp_path: Path, level: int, only: list[str], *, with_hub: bool = True) -> Report:
    async def main() -> Report:
        names = ["hub", "edge"] if with_hub else ["edge"]
        async with cluster(tmp_path, names, config=EDGE) as nodes:
            edge = nodes["edge"]
            peers = [("127.0.0.1", nodes["hub"].port)] if with_hub else []
            if not peers:
                peers = [("127.0.0.1", edge.port)]  # a second address, but no holder
            config = KitConfig(timeout=5.0, converge_within=30.0)
            return await asyncio.to_thread(run_level, "127.0.0.1", edge.port, level,
                                           config=config, only=only, peers=peers)

    return asyncio.run(asyncio.wait_for(main(), 180))


def test_t3_04_fails_on_a_node_with_no_holder_to_evict_to(tmp_path: Path) -> None:
    report = _run(tmp_path, 3, ["T3-04"], with_hub=False)
    (result,) = report.results
    assert not result.passed
    assert "higher-tier peer" in result.detail
