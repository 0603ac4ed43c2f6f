"""Tiers x conflicts (PROFILE §10, docs/replication.md "Tiers"): an evicted record takes
part in a supersede conflict as if it were still in tier 0, and comes back in the state
the rule gave it.

Issue 17: on an edge that evicts eagerly, a fork that lost a conflict after it was evicted
came back *active* when a read fetched it (the loser's new state was written on the record,
which was not there, not on its pointer), and a conflict met while a claimant was evicted
was decided without it. Deterministic: plain stores, no replicator; each step is explicit —
a sync step moves one store's change feed to another (``pull_changes`` →
``apply_changes``), an eviction is ``tiers.evict_held`` with the hub's copy checked by the
test, and a fetch-back is the hub node's MEMORY_READ reply stored with ``tiers.restore``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from amcp.amf.types import KnowledgeType, Lifecycle
from amcp.conformance.records import make_record
from amcp.errors import GoneError
from amcp.memory import Memory
from amcp.node import connect, serve
from amcp.sync import apply_changes, pull_changes
from amcp.sync.conflicts import settle
from amcp.sync.digest import scope_digests
from amcp.sync.tiers import Candidate, evict_held, restore

SCOPE = "team:tiers"
WRITER = "amcp://ai.test.fp-000000.local"
HOLDER = "127.0.0.1:7707"


@contextmanager
def stores(tmp_path: Path, *names: str) -> Iterator[list[Memory]]:
    mems = [Memory(tmp_path / n / "memory.db", embedder="hashing") for n in names]
    try:
        yield mems
    finally:
        for m in mems:
            m.close()


def sync(src: Memory, dst: Memory) -> None:
    """One sync step: everything in ``src``'s feed applied on ``dst``."""
    result = apply_changes(dst, pull_changes(src, 0, limit=5000).changes)
    # The only refusals allowed: a purged id offered again (it never comes back).
    assert all("purged" in p for p in result.problems), result.problems


def both_ways(*mems: Memory) -> None:
    for _ in range(2):  # the second round only brings duplicates
        for src in mems:
            for dst in mems:
                if src is not dst:
                    sync(src, dst)


def write(mem: Memory, record: dict[str, Any]) -> str:
    """A client's write on ``mem``: stored and settled, as the node's write path does."""
    with mem.atomic():
        mem.put(record)
        settle(mem, [mem.store.get(record["knowledge_id"]).record])  # type: ignore[union-attr, list-item]
    return str(record["knowledge_id"])


def rec(subject: str, **kw: Any) -> dict[str, Any]:
    return make_record(SCOPE, WRITER, kind=KnowledgeType.DECISION, subject=subject,
                       obj="chosen under test", **kw)


def evict(edge: Memory, hub: Memory, *ids: str) -> None:
    """Evict ``ids`` from ``edge``: the hub's copies are checked here as a round's MEMORY_READ
    confirmation would (same checksum), then the real eviction runs."""
    cands, held = [], {}
    for kid in ids:
        mine, theirs = edge.store.get(kid), hub.store.get(kid)
        assert mine is not None and mine.record is not None and theirs is not None
        assert theirs.record is not None
        checksum = mine.record.integrity.checksum
        cands.append(Candidate(kid, "test", 0, checksum))
        held[kid] = theirs.record.integrity.checksum
    done = evict_held(edge, cands, held, holder=HOLDER, tier=1)
    assert sorted(p.knowledge_id for p in done) == sorted(ids)
    for kid in ids:
        assert edge.store.get(kid) is None


def pointer_state(mem: Memory, kid: str) -> tuple[Lifecycle, str | None]:
    tiers = mem.store.capabilities.tiers
    assert tiers is not None
    p = tiers.pointer(kid)
    assert p is not None, f"{kid} has no pointer"
    return p.lifecycle, p.superseded_by


def fetch_back(edge: Memory, hub: Memory, *ids: str) -> None:
    """A read on the edge met evicted ``ids``: the hub node's reply, stored through restore."""
    async def read() -> list[dict[str, Any]]:
        server = await serve(hub, "127.0.0.1", 0)
        try:
            client = await connect("127.0.0.1", server.port)
            try:
                return [dict(r) for r in (await client.read_ids(list(ids))).records]
            finally:
                await client.aclose()
        finally:
            await server.close()

    tiers = edge.store.capabilities.tiers
    assert tiers is not None
    pointers = tiers.pointers(list(ids))
    for amf in asyncio.run(read()):
        assert restore(edge, amf, pointers[amf["knowledge_id"]])


def state(mem: Memory, kid: str) -> tuple[Lifecycle, str | None]:
    item = mem.store.get(kid)
    assert item is not None, f"{kid} not stored"
    return item.state.lifecycle, item.state.superseded_by or None


def forks(hub: Memory, edge: Memory) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Root R (and two evidence records) on the hub and the edge; the two forks of R, not
    yet written: the loser, and the winner, which cites the evidence (the longer chain)."""
    root, e1, e2 = rec("root"), rec("evidence one"), rec("evidence two")
    for r in (root, e1, e2):
        write(hub, r)
    sync(hub, edge)
    rid = str(root["knowledge_id"])
    loser = rec("fork that loses", supersedes=rid)
    winner = rec("fork that wins", supersedes=rid,
                 caused_by=(e1["knowledge_id"], e2["knowledge_id"]))
    return rid, loser, winner


def either(mem: Memory, kid: str) -> tuple[Lifecycle, str | None]:
    """The record's state, from its row or, evicted, from its pointer."""
    return state(mem, kid) if mem.store.get(kid) is not None else pointer_state(mem, kid)


def agree(hub: Memory, edge: Memory) -> None:
    both_ways(hub, edge)
    assert scope_digests(hub) == scope_digests(edge)


@pytest.mark.parametrize("root_evicted", [False, True])
@pytest.mark.parametrize("winner_by", ["client on the edge", "sync from the hub"])
def test_an_evicted_loser_is_marked_on_its_pointer_and_comes_back_superseded(
        tmp_path: Path, root_evicted: bool, winner_by: str) -> None:
    with stores(tmp_path, "hub", "edge") as (hub, edge):
        rid, loser, winner = forks(hub, edge)
        lid, wid = write(hub, loser), str(winner["knowledge_id"])
        sync(hub, edge)
        evict(edge, hub, lid, *([rid] if root_evicted else []))
        # Step: the conflict is decided on the edge while the loser is evicted.
        if winner_by == "client on the edge":
            write(edge, winner)
        else:
            write(hub, winner)
            sync(hub, edge)
        assert pointer_state(edge, lid) == (Lifecycle.SUPERSEDED, wid)
        assert either(edge, rid) == (Lifecycle.SUPERSEDED, wid)
        assert state(edge, wid) == (Lifecycle.ACTIVE, None)
        agree(hub, edge)
        # Step: a read fetches the loser back — superseded, with its conflict note.
        fetch_back(edge, hub, lid, *([rid] if root_evicted else []))
        assert state(edge, lid) == (Lifecycle.SUPERSEDED, wid)
        assert "conflict over" in (edge.store.get(lid).state.reason or "")  # type: ignore[union-attr]
        assert state(edge, rid) == (Lifecycle.SUPERSEDED, wid)
        assert scope_digests(hub) == scope_digests(edge)
        assert edge.store.verify(full=True).ok


@pytest.mark.parametrize("root_evicted", [False, True])
def test_an_evicted_winner_still_wins_over_a_fork_that_arrives_later(
        tmp_path: Path, root_evicted: bool) -> None:
    with stores(tmp_path, "hub", "edge") as (hub, edge):
        rid, loser, winner = forks(hub, edge)
        wid = write(hub, winner)
        sync(hub, edge)
        evict(edge, hub, wid, *([rid] if root_evicted else []))
        # Step: the (shorter) fork is written on the edge; the evicted winner is ranked
        # from its pointer (its chain cites two evidence records), not left out.
        lid = write(edge, loser)
        assert state(edge, lid) == (Lifecycle.SUPERSEDED, wid)
        assert either(edge, rid) == (Lifecycle.SUPERSEDED, wid)
        assert pointer_state(edge, wid) == (Lifecycle.ACTIVE, None)
        agree(hub, edge)
        assert state(hub, lid) == (Lifecycle.SUPERSEDED, wid)
        fetch_back(edge, hub, wid)
        assert state(edge, wid) == (Lifecycle.ACTIVE, None)
        assert scope_digests(hub) == scope_digests(edge)


def test_an_evicted_ancestor_still_counts_in_a_chain(tmp_path: Path) -> None:
    """The chain walk goes through evicted ancestors (their pointers keep what they cite),
    so a node that evicted them ranks forks as one that did not."""
    with stores(tmp_path, "hub", "edge") as (hub, edge):
        rid, _loser, _winner = forks(hub, edge)
        base = write(hub, rec("base"))
        mid = write(hub, rec("middle", caused_by=(base,)))
        other = write(hub, rec("other"))
        sync(hub, edge)
        evict(edge, hub, mid)  # the walk must continue through it, to base
        # deep: R, mid, base (3); flat: R, other (2) and the greater knowledge_id, which
        # wins the tie a walk that stopped at the evicted mid would see (2 against 2).
        deep = rec("cites the middle", supersedes=rid, caused_by=(mid,))
        flat = next(r for r in (rec(f"cites another {i}", supersedes=rid, caused_by=(other,))
                                for i in range(100))
                    if r["knowledge_id"] > deep["knowledge_id"])
        write(hub, deep)
        write(edge, flat)
        both_ways(hub, edge)
        for mem in (hub, edge):
            assert state(mem, rid) == (Lifecycle.SUPERSEDED, deep["knowledge_id"])
            assert state(mem, flat["knowledge_id"])[1] == deep["knowledge_id"]


@pytest.mark.parametrize("purged_on", ["hub", "edge"])
def test_purging_an_evicted_winner_hands_the_root_to_the_evicted_loser(
        tmp_path: Path, purged_on: str) -> None:
    with stores(tmp_path, "hub", "edge", "away") as (hub, edge, away):
        rid, loser, winner = forks(hub, edge)
        lid, wid = write(hub, loser), write(hub, winner)
        agree(hub, edge)
        sync(hub, away)  # a node that still holds the winner, to try resurrecting it
        evict(edge, hub, rid, lid, wid)
        # Step: the winner is purged — on the hub (the edge learns it by sync) or on the
        # edge itself, where only its pointer is.
        if purged_on == "hub":
            hub.purge(wid, "erase")
            sync(hub, edge)
        else:
            edge.purge(wid, "erase")
        assert pointer_state(edge, lid) == (Lifecycle.ACTIVE, None)
        assert pointer_state(edge, rid) == (Lifecycle.SUPERSEDED, lid)
        agree(hub, edge)
        assert state(hub, lid) == (Lifecycle.ACTIVE, None)
        assert state(hub, rid) == (Lifecycle.SUPERSEDED, lid)
        fetch_back(edge, hub, lid, rid)
        assert state(edge, lid) == (Lifecycle.ACTIVE, None)
        assert state(edge, rid) == (Lifecycle.SUPERSEDED, lid)
        # Never resurrected: the node that was away sends the winner again.
        again = apply_changes(edge, pull_changes(away, 0, limit=5000).changes)
        assert any(wid in p and "purged" in p for p in again.problems), again.problems
        with pytest.raises(GoneError):
            edge.get(wid)
        assert scope_digests(hub) == scope_digests(edge)


def test_a_local_purge_re_decides_the_conflict_as_sync_does(tmp_path: Path) -> None:
    """``Memory.purge`` (what ``amcp purge``, the inspector and the HTTP API call) on the
    node itself, no tiers involved: the root goes to the next claimant there and then,
    as on the peer the purge reaches by sync."""
    with stores(tmp_path, "hub", "edge") as (hub, edge):
        rid, loser, winner = forks(hub, edge)
        lid, wid = write(hub, loser), write(hub, winner)
        agree(hub, edge)
        edge.purge(wid, "erase")  # no sync step yet
        assert state(edge, lid) == (Lifecycle.ACTIVE, None)
        assert state(edge, rid) == (Lifecycle.SUPERSEDED, lid)
        sync(edge, hub)
        assert state(hub, lid) == (Lifecycle.ACTIVE, None)
        assert state(hub, rid) == (Lifecycle.SUPERSEDED, lid)
        edge.purge(lid, "erase")  # the last claimant: the root is active again
        assert state(edge, rid) == (Lifecycle.ACTIVE, None)
        agree(hub, edge)


def test_a_stale_pointer_comes_back_in_the_holders_state(tmp_path: Path) -> None:
    with stores(tmp_path, "hub", "edge") as (hub, edge):
        rid, _loser, _winner = forks(hub, edge)
        evict(edge, hub, rid)
        hub.invalidate(rid, "the root was wrong")
        sync(hub, edge)  # the edge cannot apply it to a record it does not hold: stale
        tiers = edge.store.capabilities.tiers
        assert tiers is not None and tiers.pointer(rid).stale  # type: ignore[union-attr]
        fetch_back(edge, hub, rid)
        item = edge.store.get(rid)
        assert item is not None and item.state.lifecycle is Lifecycle.INVALIDATED
        # x-state carries no reason: the holder says only that it was invalidated.
        assert item.state.reason == "invalidated at the holder"
        agree(hub, edge)
