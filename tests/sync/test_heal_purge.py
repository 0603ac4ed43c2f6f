"""Partitions heal, drift is repaired by digests, purge is final (PROFILE §10)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tests.sync.kit import FAST, cluster, cut, eventually, heal, run, start_node, stop_node

from amcp.amf.types import Lifecycle
from amcp.sync.digest import scope_digests


async def _same_digests(nodes: list) -> bool:  # type: ignore[type-arg]
    seen = [await n.read(scope_digests) for n in nodes]
    return all(d == seen[0] for d in seen)


def test_a_partition_with_writes_on_both_sides_converges(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path, ["a", "b", "c"]) as n:
            a, b, c = n["a"], n["b"], n["c"]
            base = await a.write(lambda m: m.remember("shared before", scope="team:a"))
            for node in (b, c):
                await eventually(lambda node=node: node.has(base.knowledge_id))
            port = await cut(c)
            left = [await a.write(lambda m, i=i: m.remember(f"left {i}", scope="team:a"))
                    for i in range(5)]
            right = [c.memory.remember(f"right {i}", scope="team:a") for i in range(5)]
            c.memory.invalidate(base.knowledge_id, "c learned it was wrong")
            await heal(c, port)
            await eventually(lambda: _same_digests([a, b, c]), timeout=15)
            for node in (a, b, c):
                for out in left + right:
                    assert await node.has(out.knowledge_id)
                lc = await node.read(lambda m: m.store.get(base.knowledge_id).state.lifecycle)
                assert lc is Lifecycle.INVALIDATED

    run(main())


def test_anti_entropy_finds_and_repairs_drift(tmp_path: Path) -> None:
    async def main() -> None:
        quiet = replace(FAST, gossip_interval=3600.0)  # only the digest round may repair
        b = await start_node(tmp_path, "b", quiet)
        a = await start_node(tmp_path, "a", quiet, (b,))
        try:
            # not critical, so no push trigger: only the digest round can move them
            made = [a.memory.remember(f"note {i}", type="KT-DECISION", scope="team:a")
                    for i in range(20)]
            theirs = b.memory.remember("only on b", type="KT-DECISION", scope="team:b")
            link = next(iter(a.replicator.links.values()))
            # Watermarks that claim everything was exchanged: what lost pushes leave behind.
            link.status.pulled_watermark = link.status.pushed_watermark = 2**62
            repaired = await link.anti_entropy()
            assert set(repaired) == {"team:a", "team:b"}
            assert await _same_digests([a, b])
            assert all([await b.has(o.knowledge_id) for o in made])
            assert await a.has(theirs.knowledge_id)
            assert await link.anti_entropy() == []  # nothing left to repair
        finally:
            await stop_node(a)
            await stop_node(b)

    run(main())


def test_a_purged_record_never_comes_back_from_a_node_that_was_away(tmp_path: Path) -> None:
    async def main() -> None:
        a = await start_node(tmp_path, "a")
        away = None
        try:
            out = await a.write(lambda m: m.remember("alice's phone is 555-0100",
                                                    type="KT-FACT", scope="team:a"))
            record = await a.read(lambda m: m.store.get(out.knowledge_id).record)
            # b got the record long ago (an old export), then was away while a purged it.
            from amcp.memory import Memory

            old = Memory(tmp_path / "b" / "memory.db", embedder="hashing")
            old.put(record.to_dict())
            old.close()
            await a.write(lambda m: m.purge(out.knowledge_id, "erasure request"))
            away = await start_node(tmp_path, "b", FAST, (a,))
            b = away

            async def purged_on_b() -> bool:
                found = await b.read(lambda m: m.store.get(out.knowledge_id))
                return found is not None and found.record is None

            await eventually(purged_on_b)
            await eventually(lambda: _same_digests([a, b]))
            found = await a.read(lambda m: m.store.get(out.knowledge_id))
            assert found is not None and found.record is None
            # ... and an import of the old record is refused too
            from amcp.errors import GoneError

            try:
                await a.write(lambda m: m.put(record.to_dict()))
            except GoneError:
                pass
            else:
                raise AssertionError("a purged id was stored again")
        finally:
            if away is not None:
                await stop_node(away)
            await stop_node(a)

    run(main())
