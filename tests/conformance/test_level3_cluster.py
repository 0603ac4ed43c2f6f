"""Level 3 against three of our nodes that replicate (amcp.node.replicator, in-process).

The nodes run on an event loop of their own thread (``tests.sync.kit.serving``) and the
kit on the test's thread, bounded by its own deadlines; leaving the block stops every node
and joins that thread whatever happened, so a failed run cannot leak sockets into a later
test. Gossip every 0.2 s (``tests.sync.kit.FAST``), so a change is everywhere within a
second: the converge bound below is only a ceiling for a very busy machine. Wall time is
a few seconds for Level 3 alone, under ten for Levels 1–3 (no T2-01); it is not asserted
(speed is bench/'s business).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tests.sync.kit import serving

from amcp.conformance import LEVEL_1, KitConfig, Report, run_level
from amcp.conformance.level2 import LEVEL_2
from amcp.conformance.level3 import LEVEL_3 as LEVEL_3_SPECS

# T3-04 (tiers) runs against an edge with a small tier 0 and its hub:
# tests/conformance/test_tiers_conformance.py. Not here: with every node evicting eagerly
# (idle_days=0) a conflict's loser that was evicted comes back active when it is fetched
# (docs/replication.md, "Known gaps"), so the two configurations are tested apart.
LEVEL_3 = ["T3-01", "T3-02", "T3-03", "T3-05", "T3-06"]


def _run(tmp_path: Path, only: list[str], whole: bool = False) -> Report:
    """Level 3 against nodes a, b, c (c the target: it names b as its configured peer; a
    is learned through membership); a ``whole`` run (Levels 1 and 2
    too) also takes b as T2-08's reference node and shortens T1-07's silence window."""
    with serving(tmp_path, ["a", "b", "c"]) as nodes:
        ports = [n.port for n in nodes.values()]
        kit = KitConfig(timeout=5.0, converge_within=30.0, poll_interval=0.05)
        if whole:
            kit = replace(kit, silence_window=0.5, reference=f"127.0.0.1:{ports[1]}")
        return run_level("127.0.0.1", ports[-1], 3, config=kit, only=only,
                         peers=[("127.0.0.1", p) for p in ports[:-1]])


def _failures(report: Report) -> list[tuple[str, str]]:
    return [(r.id, r.detail) for r in report.results if not r.passed]


def test_three_replicating_nodes_pass_level_3(tmp_path: Path) -> None:
    report = _run(tmp_path, LEVEL_3)
    assert not _failures(report), _failures(report)
    assert [r.id for r in report.results] == LEVEL_3


def test_three_replicating_nodes_resolve_conflicts_alike(tmp_path: Path) -> None:
    """T3-02 on its own: the node each fork was written to ends like the others (the
    loser superseded there too). The deterministic cases are tests/sync/
    test_writer_conflicts.py; this is the black-box view of the same rule."""
    (result,) = _run(tmp_path, ["T3-02"]).results
    assert result.passed, result.detail
    assert len(result.checks) == 8 and all(c.passed for c in result.checks)


def test_the_whole_of_levels_1_to_3_against_replicating_nodes(tmp_path: Path) -> None:
    """Every level, in order, against one cluster: Level 2's QEF outcome (T2-06) moves
    weights, which once stalled the change feed for everything behind it (issue 17), so
    T3-01/02/06 failed when run after it. The second node is T2-08's reference node.

    T2-01 is left out here: its 100 ms bound, measured with three nodes and the kit in one
    Python process, measures their contention for the interpreter, not a node's cold boot;
    test_levels_node.py runs it against one node, and a run against three `amcp serve`
    processes is in docs/conformance.md."""
    every = [spec.id for spec in (*LEVEL_1, *LEVEL_2, *LEVEL_3_SPECS)]
    only = [i for i in every if i not in ("T2-01", "T3-04")]
    report = _run(tmp_path, only, whole=True)
    assert not _failures(report), _failures(report)
    assert [r.id for r in report.results] == only
    assert {"T1-01", "T2-06", "T2-08", *LEVEL_3} <= set(only)
