from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.cse.kit import NOW, T0, add, open_mem, seed

from amcp.amf.canonical import canonical_packb
from amcp.amf.types import KnowledgeType
from amcp.cse.canon import Raw, packb_parts
from amcp.cse.pack import build_pack
from amcp.cse.zones import SHARE_PERCENT, Zone, allocate
from amcp.errors import ValidationError
from amcp.memory import Memory


@pytest.fixture
def mem(tmp_path: Path) -> Memory:
    m = open_mem(tmp_path)
    yield m
    m.close()


def check_invariants(pack) -> None:
    for zone, use in pack.zones.items():
        assert 0 <= use.used <= use.budget, zone
        items = pack.zone_items(zone)
        assert sum(it.tokens for it in items) <= use.budget
        if zone is not Zone.RESERVED and zone is not Zone.WORKING_MEMORY:
            assert sum(it.tokens for it in items) == use.used
    assert sum(u.budget for u in pack.zones.values()) == pack.budget_tokens
    assert Zone.CORE_PRINCIPLES in pack.zones
    ids = [it.knowledge_id for it in pack.items]
    assert len(ids) == len(set(ids))


def test_allocation_follows_upstream_shares() -> None:
    b = allocate(8000)
    assert b == {Zone.RESERVED: 80, Zone.CORE_PRINCIPLES: 320, Zone.HIGH_ROI: 2000,
                 Zone.MEDIUM_ROI: 1200, Zone.WORKING_MEMORY: 3600, Zone.OVERFLOW_BUFFER: 800}
    assert sum(SHARE_PERCENT.values()) == 100
    assert sum(allocate(12345).values()) == 12345


def test_pack_has_core_zones_and_confirmation(mem: Memory) -> None:
    seed(mem, 40)
    pack = build_pack(mem, "retry after a network timeout", budget_tokens=20000,
                      project="x", now=NOW)
    check_invariants(pack)
    core = pack.zone_items(Zone.CORE_PRINCIPLES)
    assert core and all(it.record.type in {KnowledgeType.FACT, KnowledgeType.PITFALL,
                                           KnowledgeType.PRINCIPLE} for it in core)
    assert pack.zone_items(Zone.HIGH_ROI)
    assert pack.confirmation == (
        f"[AMCP 1.0] Cold boot: x v0.0.0 | context: {pack.tokens}t from {pack.count}k | "
        "QEF: 0 pending | state: ACTIVE"
    )
    d = pack.to_dict()
    assert d["digest"] == pack.digest and d["zones"]["HIGH_ROI"]["budget"] == 5000
    item = d["items"][0]
    assert {"knowledge_id", "zone", "roi", "tokens"} <= set(item)
    full = next(i for i in d["items"] if i["form"] == "full")
    assert full["tokens"] == -(-len(canonical_packb(full["amf"])) // 4)
    hi = [it.roi for it in pack.zone_items(Zone.HIGH_ROI)]
    assert hi == sorted(hi, reverse=True)


def test_same_store_request_clock_same_digest(mem: Memory, tmp_path: Path) -> None:
    seed(mem, 30)
    a = build_pack(mem, "schema migration", budget_tokens=6000, now=NOW)
    b = build_pack(mem, "schema migration", budget_tokens=6000, now=NOW)
    assert a.digest == b.digest and a.timings is not b.timings
    c = build_pack(mem, "schema migration", budget_tokens=6000, now=NOW + 86400 * 30)
    assert c.digest != a.digest  # the clock is part of the request
    mem.close()
    code = (
        "import sys; from amcp.memory import Memory; "
        f"m = Memory({str(tmp_path / 'm.db')!r}, embedder='hashing'); "
        f"print(m.context('schema migration', budget_tokens=6000, now={NOW!r}).digest)"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout.strip()
    assert out == a.digest


def test_digest_is_sha256_of_canonical_body(mem: Memory) -> None:
    import hashlib

    seed(mem, 12)
    pack = build_pack(mem, "index budget", budget_tokens=8000, now=NOW)
    assert pack.digest == hashlib.sha256(canonical_packb(pack.body())).hexdigest()
    value = {"b": [1, Raw(canonical_packb({"z": 1.0, "a": None}))], "a": "x", "n": None}
    assert packb_parts(value) == canonical_packb({"b": [1, {"z": 1.0}], "a": "x"})
    # Items are composed directly (PackItem.packed), full and pointer forms alike.
    packer = msgpack.Packer(use_bin_type=True, use_single_float=False, autoreset=True)
    assert {it.form for it in pack.items} == {"full", "pointer"}
    for it in pack.items:
        assert it.packed(packer).data == canonical_packb(it.to_dict())


def test_overflow_gets_lowest_medium_as_pointers(mem: Memory) -> None:
    seed(mem, 60)
    calm = build_pack(mem, "retry timeout cache", budget_tokens=4000, now=NOW)
    busy = build_pack(mem, "retry timeout cache", budget_tokens=4000, now=NOW,
                      working_tokens=1800)
    check_invariants(busy)
    assert busy.zones[Zone.WORKING_MEMORY].used == 1800
    over = busy.zone_items(Zone.OVERFLOW_BUFFER)
    assert over and all(it.form == "pointer" and it.pointer.startswith("K-") for it in over)
    assert all("\n" not in it.pointer for it in over)
    assert busy.zones[Zone.MEDIUM_ROI].used <= calm.zones[Zone.MEDIUM_ROI].budget // 2
    kept = min((it.roi for it in busy.zone_items(Zone.MEDIUM_ROI)), default=1.0)
    moved = {it.knowledge_id for it in calm.zone_items(Zone.MEDIUM_ROI)} - {
        it.knowledge_id for it in busy.zone_items(Zone.MEDIUM_ROI)}
    assert moved and all(
        it.roi <= kept for it in calm.zone_items(Zone.MEDIUM_ROI) if it.knowledge_id in moved)


def test_tiny_budget_is_refused_with_the_minimum(mem: Memory) -> None:
    seed(mem, 5)
    with pytest.raises(ValidationError, match="at least"):
        build_pack(mem, "anything", budget_tokens=500, now=NOW)


def test_small_core_budget_degrades_to_pointers(mem: Memory) -> None:
    add(mem, "a long pitfall " * 40, KnowledgeType.PITFALL, at=T0)
    pack = build_pack(mem, "pitfall", budget_tokens=3000, now=NOW)
    check_invariants(pack)
    core = pack.zone_items(Zone.CORE_PRINCIPLES)
    assert core and core[0].form == "pointer" and pack.degraded


def test_expired_context_is_not_loaded_but_facts_are(mem: Memory) -> None:
    ctx = add(mem, "release branch is frozen this week", KnowledgeType.CONTEXT, at=T0)
    fact = add(mem, "release branch needs two reviews", KnowledgeType.FACT, at=T0)
    later = build_pack(mem, "release branch", budget_tokens=8000, now=T0 + 60 * 86400)
    ids = {it.knowledge_id for it in later.items}
    assert fact in ids and ctx not in ids


def test_gravity_pulls_causal_predecessors(mem: Memory) -> None:
    base = add(mem, "zebra crossing rule: stop", KnowledgeType.DECISION, subject="roads.rules.z")
    child = add(mem, "quokka migration plan uses zebra", KnowledgeType.DECISION,
                subject="animals.plans.q", caused_by=[base])
    pack = build_pack(mem, "quokka migration plan", budget_tokens=20000, now=NOW)
    zones = {it.knowledge_id: it.zone for it in pack.items}
    assert zones[child] is Zone.HIGH_ROI and base in zones


def test_pack_does_not_touch_records(mem: Memory) -> None:
    kid = add(mem, "touch me not", KnowledgeType.FACT)
    build_pack(mem, "touch me", budget_tokens=8000, now=NOW)
    assert mem.store.get(kid).state.access_count == 0


def test_bad_requests(mem: Memory) -> None:
    for kw in ({"budget_tokens": 0}, {"budget_tokens": True}, {"working_tokens": -1}):
        with pytest.raises(ValidationError):
            build_pack(mem, "x", now=NOW, **kw)
    with pytest.raises(ValidationError):
        build_pack(mem, "  ", now=NOW)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    n=st.integers(0, 25), budget=st.integers(2200, 40000),
    working=st.integers(0, 30000), shift=st.integers(0, 17),
    task=st.sampled_from(["retry timeout", "schema vector", "price risk agent", "zzz"]),
)
def test_no_zone_over_budget_for_random_stores(tmp_path_factory, n, budget, working, shift,
                                               task) -> None:
    m = open_mem(tmp_path_factory.mktemp("h"))
    try:
        seed(m, n, seed_words=shift)
        pack = build_pack(m, task, budget_tokens=budget, working_tokens=working,
                          now=NOW + shift * 86400)
        check_invariants(pack)
        if n:
            assert pack.zone_items(Zone.CORE_PRINCIPLES)
    finally:
        m.close()
