"""The node a fork was written to resolves the conflict like every other node (PROFILE §10).

Issue 17, T3-02: a client's MEMORY_WRITE of a record with ``causal.supersedes`` left the
predecessor — and, once the other fork arrived, the writer's own losing fork — ``active``
on the writer, while every peer marked them superseded. Deterministic: real nodes serve the
writes, but no replicator runs; the tests move each node's change feed to the other with
explicit steps (``pull_changes`` → ``apply_changes``), in both orders.
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
from amcp.memory import Memory
from amcp.node import connect, serve
from amcp.sync import apply_changes, pull_changes
from amcp.sync.digest import scope_digests

SCOPE = "team:forks"
WRITER = "amcp://ai.test.fp-000000.local"


class Served:
    """A node (no replication) and a client on it, driven from one event loop."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    async def write(self, record: dict[str, Any]) -> int:
        server = await serve(self.memory, "127.0.0.1", 0)
        try:
            client = await connect("127.0.0.1", server.port)
            try:
                ack = await client.write(record)
            finally:
                await client.aclose()
        finally:
            await server.close()
        assert ack.status in (200, 201), ack
        return ack.hlc


@contextmanager
def two_nodes(tmp_path: Path) -> Iterator[tuple[Memory, Memory]]:
    a = Memory(tmp_path / "a" / "memory.db", embedder="hashing")
    b = Memory(tmp_path / "b" / "memory.db", embedder="hashing")
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def exchange(src: Memory, dst: Memory) -> None:
    """One sync step: everything in ``src``'s feed applied on ``dst``."""
    result = apply_changes(dst, pull_changes(src, 0, limit=5000).changes)
    assert result.conflicts == 0, result.problems


def state(mem: Memory, kid: str) -> tuple[Lifecycle, str | None]:
    item = mem.store.get(kid)
    assert item is not None
    return item.state.lifecycle, item.state.superseded_by or None


def _rec(subject: str, **kw: Any) -> dict[str, Any]:
    return make_record(SCOPE, WRITER, kind=KnowledgeType.DECISION, subject=subject,
                       obj="chosen under test", **kw)


def test_a_written_successor_supersedes_its_predecessor_on_the_writer(tmp_path: Path) -> None:
    with two_nodes(tmp_path) as (a, _b):
        node = Served(a)
        root = _rec("the port of the api")
        asyncio.run(node.write(root))
        succ = _rec("the port of the api, revised", supersedes=root["knowledge_id"])
        asyncio.run(node.write(succ))
        assert state(a, root["knowledge_id"]) == (Lifecycle.SUPERSEDED, succ["knowledge_id"])
        assert state(a, succ["knowledge_id"]) == (Lifecycle.ACTIVE, None)


@pytest.mark.parametrize("a_first", [True, False])
@pytest.mark.parametrize("longer", [True, False])
def test_both_writers_keep_the_same_winner_and_the_loser_superseded(
    tmp_path: Path, longer: bool, a_first: bool
) -> None:
    with two_nodes(tmp_path) as (a, b):
        on_a, on_b = Served(a), Served(b)
        root, e1, e2 = _rec("root"), _rec("evidence one"), _rec("evidence two")
        for rec in (root, e1, e2):
            asyncio.run(on_a.write(rec))
        exchange(a, b)
        rid = root["knowledge_id"]
        x = _rec("fork x", supersedes=rid)
        cites = (e1["knowledge_id"], e2["knowledge_id"]) if longer else None
        y = _rec("fork y", supersedes=rid, caused_by=cites)
        hx = asyncio.run(on_a.write(x))
        hy = asyncio.run(on_b.write(y))
        xid, yid = x["knowledge_id"], y["knowledge_id"]
        # each writer alone: its own fork supersedes the root
        assert state(a, rid) == (Lifecycle.SUPERSEDED, xid)
        assert state(b, rid) == (Lifecycle.SUPERSEDED, yid)
        pair = [(a, b), (b, a)] if a_first else [(b, a), (a, b)]
        for src, dst in pair + pair:  # twice: what the second round brings is duplicates
            exchange(src, dst)
        winner = yid if longer else max((hx, xid), (hy, yid))[1]
        loser = xid if winner == yid else yid
        for mem in (a, b):
            assert state(mem, rid) == (Lifecycle.SUPERSEDED, winner)
            assert state(mem, winner) == (Lifecycle.ACTIVE, None)
            assert state(mem, loser) == (Lifecycle.SUPERSEDED, winner)
            lost = mem.store.get(loser)
            assert lost is not None and "conflict over" in (lost.state.reason or "")
        assert scope_digests(a) == scope_digests(b)


@pytest.mark.parametrize("invalidate_first", [True, False])
def test_an_invalidated_predecessor_ends_the_same_whatever_arrives_first(
    tmp_path: Path, invalidate_first: bool
) -> None:
    """Invalidation beats a concurrent supersede; the record still names its successor, so
    the node that saw the invalidation first and the one that saw the successor first agree
    (bench/jepsen.py found an invalidated record whose superseded_by was set on some nodes
    only)."""
    with two_nodes(tmp_path) as (a, b):
        on_a, on_b = Served(a), Served(b)
        root = _rec("to be both replaced and refuted")
        asyncio.run(on_a.write(root))
        exchange(a, b)
        rid = root["knowledge_id"]
        succ = _rec("the replacement", supersedes=rid)
        if invalidate_first:
            a.invalidate(rid, "wrong all along")
            exchange(a, b)
            asyncio.run(on_b.write(succ))
        else:
            asyncio.run(on_b.write(succ))
            a.invalidate(rid, "wrong all along")
        exchange(a, b)
        exchange(b, a)
        for mem in (a, b):
            assert state(mem, rid) == (Lifecycle.INVALIDATED, succ["knowledge_id"])
            got = mem.store.get(rid)
            assert got is not None and got.state.reason == "wrong all along"
        assert scope_digests(a) == scope_digests(b)


def _purge(mem: Memory, kid: str) -> None:
    """The protocol's purge (SYNC_PUSH op purge), as a client or a peer sends it."""
    result = apply_changes(mem, [{"op": "purge", "knowledge_id": kid, "hlc": 1}])
    assert result.conflicts == 0, result.problems


def test_a_purged_successor_no_longer_supersedes_wherever_the_tombstone_came_first(
    tmp_path: Path,
) -> None:
    """bench/jepsen.py: P superseded by X on the node that got X before X's purge, active on
    those that got the tombstone first (they can never learn X claimed P). Purge beats
    everything: every node ends as if X had never been written."""
    with two_nodes(tmp_path) as (a, b):
        on_a = Served(a)
        root, e1 = _rec("the root"), _rec("evidence for y")
        asyncio.run(on_a.write(root))
        asyncio.run(on_a.write(e1))
        exchange(a, b)
        rid = root["knowledge_id"]
        x = _rec("fork x", supersedes=rid)
        y = _rec("fork y", supersedes=rid, caused_by=(e1["knowledge_id"],))
        asyncio.run(on_a.write(x))
        asyncio.run(on_a.write(y))
        xid, yid = x["knowledge_id"], y["knowledge_id"]
        assert state(a, rid) == (Lifecycle.SUPERSEDED, yid)  # the longer chain
        assert state(a, xid) == (Lifecycle.SUPERSEDED, yid)
        _purge(b, yid)  # b: the tombstone before the record
        _purge(a, yid)  # a: after it, and after the conflict was decided
        exchange(a, b)
        exchange(b, a)
        for mem in (a, b):
            assert state(mem, rid) == (Lifecycle.SUPERSEDED, xid), mem.path
            assert state(mem, xid) == (Lifecycle.ACTIVE, None)
            assert state(mem, yid)[0] is Lifecycle.PURGED
        _purge(a, xid)
        exchange(a, b)
        for mem in (a, b):
            assert state(mem, rid) == (Lifecycle.ACTIVE, None)
        assert scope_digests(a) == scope_digests(b)


def test_a_loser_whose_own_successor_is_purged_is_the_loser_again(tmp_path: Path) -> None:
    """E lost to W over F, then E was superseded in its own right by Z (that pointer stays);
    purging Z gives E back to the conflict over F, which W still wins (bench/jepsen.py)."""
    with two_nodes(tmp_path) as (a, b):
        on_a = Served(a)
        f, ev = _rec("contested"), _rec("evidence for w")
        asyncio.run(on_a.write(f))
        asyncio.run(on_a.write(ev))
        fid = f["knowledge_id"]
        e = _rec("fork e", supersedes=fid)
        w = _rec("fork w", supersedes=fid, caused_by=(ev["knowledge_id"],))
        asyncio.run(on_a.write(e))
        asyncio.run(on_a.write(w))
        eid, wid = e["knowledge_id"], w["knowledge_id"]
        z = _rec("e, corrected", supersedes=eid)
        asyncio.run(on_a.write(z))
        assert state(a, eid) == (Lifecycle.SUPERSEDED, z["knowledge_id"])
        exchange(a, b)
        _purge(a, z["knowledge_id"])
        exchange(a, b)
        for mem in (a, b):
            assert state(mem, eid) == (Lifecycle.SUPERSEDED, wid)
            assert state(mem, fid) == (Lifecycle.SUPERSEDED, wid)
            assert state(mem, wid) == (Lifecycle.ACTIVE, None)
        assert scope_digests(a) == scope_digests(b)
