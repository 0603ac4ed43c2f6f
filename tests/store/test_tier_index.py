"""Tier 0's local index in the SQLite store: eviction, pointers, integrity, purge."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from amcp.amf.types import Lifecycle
from amcp.errors import CacheMissError, IntegrityError, ValidationError
from amcp.memory import Memory
from amcp.sync.digest import scope_digests
from amcp.sync.tierconfig import TierConfig
from amcp.sync.tiers import plan, restore, stays

HUB = "127.0.0.1:7707"


def _memory(tmp_path: Path) -> Memory:
    return Memory(tmp_path / "memory.db", embedder="hashing")


def _evict(memory: Memory, kid: str) -> None:
    tiers = memory.store.capabilities.tiers
    assert tiers is not None
    with memory.atomic():
        tiers.evict(kid, hlc=memory.clock.send(), holder=HUB, tier=1)


def _decision(memory: Memory, text: str) -> str:
    return memory.remember(text, type="KT-DECISION", scope="team:a",
                           tags=["deploy"]).knowledge_id


def test_eviction_keeps_a_verified_pointer_and_the_store_stays_sound(tmp_path: Path) -> None:
    with _memory(tmp_path) as memory:
        kid = _decision(memory, "we deploy on tuesdays after the freeze")
        amf = memory.get(kid).record
        assert amf is not None
        before = scope_digests(memory)
        _evict(memory, kid)
        tiers = memory.store.capabilities.tiers
        assert tiers is not None
        pointer = tiers.pointer(kid)
        assert pointer is not None and pointer.holder == HUB and pointer.tier == 1
        assert pointer.checksum == amf.integrity.checksum and pointer.tags == ("deploy",)
        assert memory.store.get(kid) is None
        assert scope_digests(memory) == before  # eviction moves no digest
        assert memory.store.verify(full=True).ok
        with pytest.raises(CacheMissError) as err:
            memory.get(kid)
        assert err.value.status == 503 and err.value.pointer["where"] == HUB
        assert [p.knowledge_id for p in tiers.find_pointers(["tuesdays", "deploy"])] == [kid]
    with _memory(tmp_path) as memory:  # the check on open accepts the missing row
        assert memory.store.verify(full=True).ok
        tiers = memory.store.capabilities.tiers
        assert tiers is not None and tiers.usage().evicted == 1


def test_a_pointer_edited_behind_the_nodes_back_is_not_served(tmp_path: Path) -> None:
    with _memory(tmp_path) as memory:
        kid = _decision(memory, "the cache ttl is ten minutes")
        _evict(memory, kid)
    db = sqlite3.connect(tmp_path / "memory.db")
    db.execute("UPDATE evicted SET holder='evil.example:1' WHERE knowledge_id=?", (kid,))
    db.commit()
    db.close()
    with _memory(tmp_path) as memory:
        tiers = memory.store.capabilities.tiers
        assert tiers is not None and tiers.pointer(kid) is None
        assert scope_digests(memory) == {}  # left out: anti-entropy pulls it back
        (warning,) = memory.store.integrity_warnings()
        assert "1 of 1 evicted-record pointers" in warning


def test_restore_checks_the_copy_against_the_pointer(tmp_path: Path) -> None:
    with _memory(tmp_path) as memory:
        kid = _decision(memory, "the build agent pool is twelve machines")
        other = _decision(memory, "the build agent pool is eight machines")
        old = memory.get(kid).record
        wrong = memory.get(other).record
        assert old is not None and wrong is not None
        memory.invalidate(kid, "pool resized")
        _evict(memory, kid)
        tiers = memory.store.capabilities.tiers
        assert tiers is not None
        pointer = tiers.pointer(kid)
        assert pointer is not None and pointer.lifecycle is Lifecycle.INVALIDATED
        with pytest.raises(IntegrityError):
            restore(memory, wrong.to_dict(), pointer)
        assert restore(memory, old.to_dict(), pointer)
        back = memory.store.get(kid)
        assert back is not None and back.state.lifecycle is Lifecycle.INVALIDATED
        assert tiers.pointer(kid) is None
        assert not restore(memory, old.to_dict(), pointer)  # not evicted any more
        assert memory.store.verify(full=True).ok


def test_what_must_stay_cannot_be_planned_or_evicted(tmp_path: Path) -> None:
    with _memory(tmp_path) as memory:
        fact = memory.remember("the gateway listens on 8443", type="KT-FACT",
                               scope="team:a").knowledge_id
        pit = memory.remember("never deploy on friday", type="KT-PITFALL",
                              scope="team:a").knowledge_id
        secret = memory.remember("the staging password is hunter2", type="KT-DECISION",
                                 scope="team:a", sensitive=True).knowledge_id
        plain = _decision(memory, "release notes go to the wiki")
        cfg = TierConfig(max_records=1, idle_days=0)
        planned = {c.knowledge_id for c in plan(memory, cfg)}
        assert planned == {plain}
        for kid in (fact, pit, secret):
            item = memory.store.get(kid)
            assert item is not None and stays(item, 0, cfg, 0.0) is not None
        with pytest.raises(ValidationError):
            _evict(memory, secret)  # sensitive: never replicated, no other copy
        with pytest.raises(ValidationError):
            tiers = memory.store.capabilities.tiers
            assert tiers is not None
            tiers.evict(plain, hlc=memory.clock.send(), holder="", tier=1)


def test_purge_beats_eviction(tmp_path: Path) -> None:
    with _memory(tmp_path) as memory:
        kid = _decision(memory, "ship the installer on mondays")
        _evict(memory, kid)
        memory.purge(kid, "erase")
        tiers = memory.store.capabilities.tiers
        assert tiers is not None and tiers.pointer(kid) is None
        found = memory.store.get(kid)
        assert found is not None and found.record is None
        assert memory.store.verify(full=True).ok


def test_a_stale_pointer_leaves_the_digest(tmp_path: Path) -> None:
    with _memory(tmp_path) as memory:
        kid = _decision(memory, "logs are kept for ninety days")
        before = scope_digests(memory)
        _evict(memory, kid)
        tiers = memory.store.capabilities.tiers
        assert tiers is not None
        assert tiers.release(kid, hlc=memory.clock.send(), why="invalidated elsewhere")
        pointer = tiers.pointer(kid)
        assert pointer is not None and pointer.stale
        assert scope_digests(memory) != before
        assert not tiers.release(kid, hlc=memory.clock.send(), why="again")
        assert memory.store.verify(full=True).ok


def test_http_answers_503_for_an_evicted_record(tmp_path: Path) -> None:
    from tests.api.kit import client_for

    with _memory(tmp_path) as memory:
        kid = _decision(memory, "the on-call rotation changes on mondays")
        _evict(memory, kid)
        with client_for(memory) as client:
            reply = client.get(f"/v1/memories/{kid}")
            assert reply.status_code == 503
            assert "evicted from tier 0" in reply.json()["error"]
            assert client.get("/v1/memories/K-" + "0" * 64).status_code == 404
            found = client.post("/v1/recall", json={"query": "on-call rotation mondays"})
            assert found.status_code == 200
            assert [e["knowledge_id"] for e in found.json()["evicted"]] == [kid]
            assert found.json()["evicted"][0]["where"] == HUB


def test_an_evicted_record_still_counts_as_a_causal_predecessor(tmp_path: Path) -> None:
    with _memory(tmp_path) as memory:
        kid = _decision(memory, "the api rate limit is 100 per second")
        _evict(memory, kid)
        later = memory.remember("the api rate limit is now 200 per second",
                                type="KT-DECISION", scope="team:a", caused_by=[kid])
        assert later.status == 201
