"""Level 3 against three of our nodes that replicate (amcp.node.replicator, in-process)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from tests.sync.kit import cluster

from amcp.conformance import KitConfig, Report, run_level


def _run(tmp_path: Path, only: list[str]) -> Report:
    async def main() -> Report:
        async with cluster(tmp_path, ["a", "b", "c"]) as nodes:
            ports = [n.port for n in nodes.values()]
            config = KitConfig(timeout=5.0, converge_within=30.0)
            return await asyncio.to_thread(
                run_level, "127.0.0.1", ports[0], 3, config=config, only=only,
                peers=[("127.0.0.1", p) for p in ports[1:]],
            )

    return asyncio.run(asyncio.wait_for(main(), 240))


@pytest.mark.xfail(run=False, reason="on a clean-clone CI run (2 cores) the whole Level-3 run "
                   "did not finish within 240 s and its cancelled nodes leaked sockets into "
                   "later tests; passes locally in ~60 s — to investigate (issue 17 note)")
def test_three_replicating_nodes_pass_level_3(tmp_path: Path) -> None:
    only = ["T3-01", "T3-03", "T3-04", "T3-05", "T3-06"]
    report = _run(tmp_path, only)
    failures = [(r.id, r.detail) for r in report.results if not r.passed]
    assert not failures, failures
    assert [r.id for r in report.results] == only


@pytest.mark.xfail(reason="replication bug found by this procedure: on the node where the "
                   "losing fork was written it stays 'active' (PROFILE §10: the loser is kept "
                   "superseded); the other nodes mark it superseded", strict=False)
def test_three_replicating_nodes_resolve_conflicts_alike(tmp_path: Path) -> None:
    (result,) = _run(tmp_path, ["T3-02"]).results
    assert result.passed, result.detail
