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

from tests.sync.kit import FAST, serving

from amcp.conformance import LEVEL_1, KitConfig, Report, run_level
from amcp.conformance.level2 import LEVEL_2
from amcp.conformance.level3 import LEVEL_3 as LEVEL_3_SPECS
from amcp.sync.peers import SyncConfig
from amcp.sync.tierconfig import TierConfig

# Every node is tiered, rounds every 0.5 s, no idleness rule; b and c name a as their
# tier-1 peer (``star``), so both evict to a, the hub, which has no holder of its own.
# Tier 0 holds 40 records (eviction from 32): T3-04 fills the target c past it and its
# fillers push b past it too, so everything after T3-04 runs against nodes that have
# evicted. Not a chain (c → b → a) nor a mesh of nodes that are each other's holders: a
# read there can cascade fetches (the holder fetching back for the asker), and at load
# 9-15 that overran a read timeout in one run of four to six (T3-02 against a mesh, T3-04's
# read-back through a middle node that had evicted too): reads were answered CACHE_MISS.
TIERED = replace(FAST, tiers=TierConfig(max_records=40, idle_days=0, interval=0.5))
# Eager: tier 0 keeps one record (eviction from 1.6), so T3-02's root, evidence and forks
# are evicted while the conflict forms and are read back through the local index.
EAGER = replace(FAST, tiers=TierConfig(max_records=2, idle_days=0, interval=0.2))
LEVEL_3 = [spec.id for spec in LEVEL_3_SPECS]


def _run(tmp_path: Path, only: list[str], whole: bool = False,
         config: SyncConfig = TIERED) -> tuple[Report, list[int]]:
    """Level 3 against nodes a, b, c (c the target, a and b its peers); a ``whole`` run
    (Levels 1 and 2 too) also takes b as T2-08's reference node and shortens T1-07's
    silence window. Returns the report and how many records each node evicted."""
    with serving(tmp_path, ["a", "b", "c"], config=config, star=True) as nodes:
        ports = [n.port for n in nodes.values()]
        kit = KitConfig(timeout=5.0, converge_within=30.0, poll_interval=0.05)
        if whole:
            kit = replace(kit, silence_window=0.5, reference=f"127.0.0.1:{ports[1]}")
        report = run_level("127.0.0.1", ports[-1], 3, config=kit, only=only,
                           peers=[("127.0.0.1", p) for p in ports[:-1]])
        return report, [n.replicator.tiering.evicted for n in nodes.values()]


def _failures(report: Report) -> list[tuple[str, str]]:
    return [(r.id, r.detail) for r in report.results if not r.passed]


def test_three_tiered_nodes_pass_level_3(tmp_path: Path) -> None:
    report, evicted = _run(tmp_path, LEVEL_3)
    assert not _failures(report), _failures(report)
    assert [r.id for r in report.results] == LEVEL_3
    assert evicted[1] > 0 and evicted[2] > 0, evicted  # T3-04's fill reached b too


def test_three_eager_evicting_nodes_resolve_conflicts_alike(tmp_path: Path) -> None:
    """T3-02 on its own, against nodes that evict all but one record (b and c; a is their
    hub and has no holder): the forks, the root
    and the evidence are evicted while the conflict forms, so the rule ranks and marks
    evicted records through their pointers and the kit's reads fetch them back
    (issue 17: an evicted loser came back active). The node each fork was written to ends
    like the others. The deterministic cases are tests/sync/test_tier_conflicts.py and
    test_writer_conflicts.py; this is the black-box view of the same rule.

    Not the rest of Level 3 at this size, each for a reason of its own: T3-01 compares a
    digest of each node's change *feed*, and a node's feed carries only the records it
    holds (an evicted record has no body to send; its holder sends it), so nodes that
    evicted different records differ there though their anti-entropy digests, which count
    pointers, agree; T3-03's cold boot packs tier 0 only (docs/replication.md, "Not done
    yet": no ROI pull of evicted records on a cold boot), and at this size its cluster is
    evicted before the boot."""
    report, evicted = _run(tmp_path, ["T3-02"], config=EAGER)
    (result,) = report.results
    assert result.passed, result.detail
    assert len(result.checks) == 8 and all(c.passed for c in result.checks)
    assert evicted[1] > 0 and evicted[2] > 0, evicted


def test_the_whole_of_levels_1_to_3_against_tiered_nodes(tmp_path: Path) -> None:
    """Every level, in order, against one cluster: Level 2's QEF outcome (T2-06) moves
    weights, which once stalled the change feed for everything behind it (issue 17), so
    T3-01/02/06 failed when run after it. The second node is T2-08's reference node.

    T2-01 is left out here: its 100 ms bound, measured with three nodes and the kit in one
    Python process, measures their contention for the interpreter, not a node's cold boot;
    test_levels_node.py runs it against one node, and a run against three `amcp serve`
    processes is in docs/conformance.md."""
    every = [spec.id for spec in (*LEVEL_1, *LEVEL_2, *LEVEL_3_SPECS)]
    only = [i for i in every if i != "T2-01"]
    report, _evicted = _run(tmp_path, only, whole=True)
    assert not _failures(report), _failures(report)
    assert [r.id for r in report.results] == only
    assert {"T1-01", "T2-03", "T2-06", "T2-08", *LEVEL_3} <= set(only)
