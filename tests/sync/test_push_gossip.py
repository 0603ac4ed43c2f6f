"""Push on write, gossip to every live node, membership, locality (PROFILE §10)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tests.sync.kit import FAST, cluster, eventually, run, with_distribution

from amcp.amf.types import Lifecycle


def test_a_fact_written_on_a_is_pushed_to_b_at_once(tmp_path: Path) -> None:
    """Gossip is off here, so only the push trigger can deliver it; how fast it does (the
    500 ms of PROFILE §10) is measured by bench/replication.py, not asserted here."""
    async def main() -> None:
        no_gossip = replace(FAST, gossip_interval=3600.0)
        async with cluster(tmp_path, ["b", "a"], config=no_gossip) as n:  # a names b
            a, b = n["a"], n["b"]
            await eventually(lambda: _connected(a))
            out = await a.write(lambda m: m.remember("the build needs python 3.11",
                                                    type="KT-FACT", scope="team:a"))
            await eventually(lambda: b.has(out.knowledge_id), timeout=5)
            eventual = await a.write(lambda m: m.remember("a decision", type="KT-DECISION",
                                                         scope="team:a"))
            urgent = await a.write(lambda m: m.put(with_distribution(
                m, "deploys freeze at 5pm", sync_priority="immediate")))
            await eventually(lambda: b.has(urgent.knowledge_id), timeout=5)
            assert not await b.has(eventual.knowledge_id)  # that one waits for gossip

    run(main())


def test_an_eventual_change_reaches_the_peer_by_gossip(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path, ["b", "a"]) as n:
            a, b = n["a"], n["b"]
            out = await a.write(lambda m: m.remember("we picked sqlite", type="KT-DECISION",
                                                    scope="team:a"))
            await eventually(lambda: b.has(out.knowledge_id))
            # and the other way: b's writes reach a although b names no peer
            back = await b.write(lambda m: m.remember("b says hello", scope="team:a"))
            await eventually(lambda: a.has(back.knowledge_id))
            await a.write(lambda m: m.invalidate(out.knowledge_id, "we moved to postgres"))
            await eventually(lambda: b.read(lambda m: m.store.get(out.knowledge_id).state
                                             .lifecycle is Lifecycle.INVALIDATED))

    run(main())


def test_three_nodes_learn_each_other_and_gossip_everything(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path, ["a", "b", "c"]) as n:  # c→b→a: c learns a via b
            a, c = n["a"], n["c"]
            await eventually(lambda: _knows(c, a), timeout=10)
            out = await a.write(lambda m: m.remember("a's note", scope="team:a"))
            await eventually(lambda: c.has(out.knowledge_id))
            back = await c.write(lambda m: m.remember("c's note", scope="team:a"))
            for node in n.values():
                await eventually(lambda node=node: node.has(back.knowledge_id))

    run(main())


def test_a_local_record_never_leaves(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path, ["b", "a"]) as n:
            a, b = n["a"], n["b"]
            local = await a.write(lambda m: m.put(with_distribution(
                m, "my ssh config lives in ~/.ssh", locality="local")))
            marker = await a.write(lambda m: m.remember("after the local one", type="KT-FACT",
                                                       scope="team:a"))
            await eventually(lambda: b.has(marker.knowledge_id))
            assert not await b.has(local.knowledge_id)

    run(main())


async def _connected(node: object) -> bool:
    links = node.replicator.links.values()  # type: ignore[attr-defined]
    return all(link.connected for link in links)


async def _knows(node: object, other: object) -> bool:
    key = other.server.identity.public_key_b64  # type: ignore[attr-defined]
    return node.replicator.replica.membership.get(key) is not None  # type: ignore[attr-defined]
