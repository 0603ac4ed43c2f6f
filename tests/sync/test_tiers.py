"""Tier 0 on real nodes: an edge with a small tier 0 and a hub (tier 1) on loopback."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from tests.sync.kit import FAST, cluster, cut, eventually, heal, run

from amcp.errors import CacheMissError, ConfigError
from amcp.memory import Memory
from amcp.node.client import connect
from amcp.sync.digest import scope_digests
from amcp.sync.peers import config_from_mapping
from amcp.sync.tierconfig import TierConfig
from amcp.sync.tiers import plan

# Eviction rounds only when the test says (the first, at start, finds nothing to do).
SMALL = replace(FAST, tiers=TierConfig(max_records=10, idle_days=0, interval=3600))


def _fill(memory: Memory, n: int, tag: str) -> list[str]:
    return [memory.remember(f"decision {tag} number {i} about the deploy window",
                            type="KT-DECISION", scope="team:a",
                            subject=f"deploy {tag} {i}").knowledge_id for i in range(n)]


async def _on_hub(nodes: dict, ids: list[str]) -> None:  # type: ignore[type-arg]
    async def there() -> bool:
        return all([await nodes["hub"].has(k) for k in ids])
    await eventually(there, timeout=20)


def test_eviction_keeps_pinned_types_and_only_drops_what_the_hub_holds(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path, ["hub", "edge"], config=SMALL) as nodes:
            edge = nodes["edge"]
            pinned = await edge.write(lambda m: [
                m.remember("never deploy on a friday evening", type="KT-PITFALL",
                           scope="team:a").knowledge_id,
                m.remember("the api gateway listens on 8443", type="KT-FACT",
                           scope="team:a").knowledge_id])
            fill = await edge.write(lambda m: _fill(m, 30, "a"))
            await _on_hub(nodes, pinned + fill)
            # Local-only records exist nowhere else: never candidates.
            before = await edge.read(scope_digests)
            gone = await edge.replicator.tiering.evict_round()
            # 32 records against max_records 10 at high water 0.8: 24 must go, all fillers.
            assert gone == 24
            for kid in pinned:
                assert await edge.has(kid)
            usage = await edge.read(lambda m: m.store.capabilities.tiers.usage())
            assert (usage.records, usage.evicted) == (8, 24)
            # Eviction moves no digest: anti-entropy sees nothing to repair.
            assert await edge.read(scope_digests) == before
            hub_digests = await nodes["hub"].read(scope_digests)
            assert hub_digests == before
            # The hub still has every evicted one, and the next plan finds nothing.
            assert all([await nodes["hub"].has(k) for k in fill])
            assert await edge.read(lambda m: plan(m, SMALL.tiers)) == []
            await edge.read(lambda m: m.store.verify(full=True).ok)

    run(main())


def test_a_read_fetches_evicted_records_back_online_and_misses_offline(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path, ["hub", "edge"], config=SMALL) as nodes:
            edge, hub = nodes["edge"], nodes["hub"]
            fill = await edge.write(lambda m: _fill(m, 20, "b"))
            await _on_hub(nodes, fill)
            assert await edge.replicator.tiering.evict_round() == 12
            evicted = [k for k in fill if not await edge.has(k)]
            assert len(evicted) == 12
            async with await connect("127.0.0.1", edge.port) as client:
                got = await client.read_ids(evicted[:3])
                assert {r["knowledge_id"] for r in got.records} == set(evicted[:3])
                assert got.payload["network_fetches"] == 3
                assert "cache_miss" not in got.payload
                # Stored again, verified, served locally from now on.
                again = await client.read_ids(evicted[:3])
                assert again.payload["network_fetches"] == 0
                # A recall names evicted records that match (the local index).
                found = await client.recall("deploy b", k=5)
                assert found.payload.get("evicted")
            port = await cut(hub)
            try:
                async with await connect("127.0.0.1", edge.port) as client:
                    miss = await client.read_ids([evicted[5], fill[-1]])
                    assert miss.payload["cache_miss"] == [evicted[5]]
                    view = miss.payload["evicted"][0]
                    assert view["where"] == f"127.0.0.1:{port}" and view["tier"] == 1
                    assert "missing" not in miss.payload
                with pytest.raises(CacheMissError) as err:
                    await edge.read(lambda m: m.get(evicted[5]))
                assert err.value.status == 503 and err.value.code == "CACHE_MISS"
            finally:
                await heal(hub, port, SMALL)
            assert await edge.read(lambda m: m.store.verify(full=True).ok)

    run(main())


def test_purge_beats_eviction_and_state_changes_bring_the_record_back(tmp_path: Path) -> None:
    async def main() -> None:
        config = replace(SMALL, anti_entropy_interval=0.5)
        async with cluster(tmp_path, ["hub", "edge"], config=config) as nodes:
            edge, hub = nodes["edge"], nodes["hub"]
            fill = await edge.write(lambda m: _fill(m, 15, "c"))
            await _on_hub(nodes, fill)
            await edge.replicator.tiering.evict_round()
            evicted = [k for k in fill if not await edge.has(k)]
            assert len(evicted) == 7
            # Purged on the hub: the tombstone replaces the pointer on the edge.
            await hub.write(lambda m: m.purge(evicted[0], "erase"))

            async def tombstoned() -> bool:
                found = await edge.read(lambda m: m.store.get(evicted[0]))
                return found is not None and found.record is None
            await eventually(tombstoned)
            assert await edge.read(
                lambda m: m.store.capabilities.tiers.pointer(evicted[0])) is None
            # Purged on the edge while evicted: the tombstone reaches the hub.
            await edge.write(lambda m: m.purge(evicted[1], "erase"))

            async def gone_on_hub() -> bool:
                found = await hub.read(lambda m: m.store.get(evicted[1]))
                return found is not None and found.record is None
            await eventually(gone_on_hub)
            # Invalidated on the hub: the pointer goes stale, anti-entropy brings the
            # record back whole, invalidated, and the digests agree again.
            await hub.write(lambda m: m.invalidate(evicted[2], "wrong window"))

            async def back_invalidated() -> bool:
                found = await edge.read(lambda m: m.store.get(evicted[2]))
                return found is not None and found.state.lifecycle.value == "invalidated"
            await eventually(back_invalidated, timeout=20)

            async def same() -> bool:
                a = await edge.read(scope_digests)
                b = await hub.read(scope_digests)
                return a == b
            await eventually(same, timeout=20)
            assert await edge.read(lambda m: m.store.verify(full=True).ok)

    run(main())


def test_nothing_is_evicted_without_a_higher_tier_peer(tmp_path: Path) -> None:
    async def main() -> None:
        async with cluster(tmp_path, ["solo"], config=SMALL) as nodes:
            solo = nodes["solo"]
            await solo.write(lambda m: _fill(m, 20, "d"))
            assert await solo.replicator.tiering.evict_round() == 0
            usage = await solo.read(lambda m: m.store.capabilities.tiers.usage())
            assert (usage.records, usage.evicted) == (20, 0)

    run(main())


@pytest.mark.parametrize(("section", "why"), [
    ({"max_bytes": 0}, "tiers.max_bytes"),
    ({"max_bytes": 2 * 1024 ** 3}, "1 GB"),
    ({"high_water": 1.5}, "tiers.high_water"),
    ({"max_records": -1}, "tiers.max_records"),
    ({"bogus": 1}, "unknown keys"),
    ({"active_tags": "x"}, "tiers.active_tags"),
    ({"interval": True}, "must be a number"),
])
def test_bad_tier_config_is_refused(section: dict, why: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ConfigError, match=why):
        config_from_mapping({"tiers": section})


def test_tier_config_is_read() -> None:
    cfg = config_from_mapping({"tiers": {"max_records": 500, "max_bytes": 1048576,
                                         "active_tags": ["release"]}}).tiers
    assert (cfg.max_records, cfg.max_bytes, cfg.active_tags) == (500, 1048576, ("release",))


def test_serve_tier_options_override_the_config_and_bad_ones_are_refused() -> None:
    from amcp.cli.serve_cmd import sync_config

    cfg = sync_config(None, ["127.0.0.1:7707"], 50, 1024 * 1024).tiers
    assert (cfg.max_records, cfg.max_bytes) == (50, 1024 * 1024)
    with pytest.raises(ConfigError, match="tiers.max_bytes"):
        sync_config(None, [], None, 0)
    with pytest.raises(ConfigError, match="tiers.max_records"):
        sync_config(None, [], -5, None)


def test_a_tampered_pointer_is_not_served_and_sync_brings_the_record_back(
        tmp_path: Path) -> None:
    import sqlite3

    async def main() -> None:
        config = replace(SMALL, anti_entropy_interval=0.5)
        async with cluster(tmp_path, ["hub", "edge"], config=config) as nodes:
            edge = nodes["edge"]
            fill = await edge.write(lambda m: _fill(m, 15, "e"))
            await _on_hub(nodes, fill)
            await edge.replicator.tiering.evict_round()
            evicted = [k for k in fill if not await edge.has(k)]
            db = sqlite3.connect(tmp_path / "edge" / "memory.db")
            db.execute("UPDATE evicted SET holder='evil.example:1' WHERE knowledge_id=?",
                       (evicted[0],))
            db.commit()
            db.close()

            async def back() -> bool:
                return await edge.has(evicted[0])
            await eventually(back, timeout=20)
            assert await edge.read(lambda m: m.store.verify(full=True).ok)

    run(main())
