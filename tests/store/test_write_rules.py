"""Finding 6: the write rules existed four times and disagreed. Now every path goes through
``memory_writes.admit_write``; these cases hold for each of them alike."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.node.kit import FAST

from amcp.errors import ConflictError, GoneError, PreconditionFailed, Status
from amcp.memory import Memory
from amcp.node import NodeServer, SyncClient


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    with Memory(tmp_path / "m.db", embedder="hashing") as m:
        yield m


def _single(mem: Memory, rec: dict[str, Any]) -> Status:
    return mem.put(rec).status


def _many(mem: Memory, rec: dict[str, Any]) -> Status:
    from amcp.amf.record import AMFRecord

    return mem.put_many([(AMFRecord.from_dict(rec), False)])[0].status


def _batch(mem: Memory, rec: dict[str, Any]) -> Status:
    return mem.put_batch([rec])[0].status


PATHS: dict[str, Callable[[Memory, dict[str, Any]], Status]] = {
    "put": _single, "put_many": _many, "put_batch": _batch,
}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_every_path_answers_alike(mem: Memory, path: str) -> None:
    put = PATHS[path]
    base = mem.remember("the base", scope="team:a").knowledge_id
    orphan = mem.compose("needs a missing cause", scope="team:a", caused_by=["K-" + "1" * 64])
    with pytest.raises(PreconditionFailed):  # put used to say 412, put_many stored it (201)
        put(mem, orphan.to_dict())
    assert mem.store.get(orphan.knowledge_id) is None
    child = mem.compose("caused by the base", scope="team:a", caused_by=[base]).to_dict()
    assert put(mem, child) is Status.CREATED
    assert put(mem, child) is Status.OK  # identical re-write: idempotent
    edited = {**child, "core": {**child["core"], "object": "something else"}}
    with pytest.raises(ConflictError):
        put(mem, edited)
    mem.purge(child["knowledge_id"], "gdpr")
    with pytest.raises(GoneError):
        put(mem, child)


def test_a_batch_is_one_transaction(mem: Memory) -> None:
    first = mem.compose("first of the batch", scope="team:a")
    orphan = mem.compose("orphan", scope="team:a", caused_by=["K-" + "2" * 64])
    with pytest.raises(PreconditionFailed):
        mem.put_batch([first.to_dict(), orphan.to_dict()])
    assert mem.store.get(first.knowledge_id) is None  # record 1 was not kept
    # A predecessor earlier in the same batch counts.
    child = mem.compose("child of first", scope="team:a", caused_by=[first.knowledge_id])
    outcomes = mem.put_batch([first.to_dict(), child.to_dict()])
    assert [o.status for o in outcomes] == [Status.CREATED, Status.CREATED]


def test_node_batch_write_stores_nothing_on_a_412_and_blames_nobody(tmp_path: Path) -> None:
    """And a tampered row in the node's own store is a store problem (ERROR 5xx), never a
    violation that disconnects the client (finding 7)."""
    mem = Memory(tmp_path / "hub.db", embedder="hashing")
    loop = asyncio.new_event_loop()
    server = NodeServer(mem)
    loop.run_until_complete(server.start("127.0.0.1", 0))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        with SyncClient.connect("127.0.0.1", server.port, retry=FAST) as node:
            first = mem.compose("batched one", scope="team:a").to_dict()
            orphan = mem.compose("batched orphan", scope="team:a",
                                 caused_by=["K-" + "3" * 64]).to_dict()
            with pytest.raises(PreconditionFailed):
                node.write([first, orphan])
            assert mem.store.get(first["knowledge_id"]) is None
            kept = mem.remember("kept and then tampered", scope="team:a").knowledge_id
            db = sqlite3.connect(tmp_path / "hub.db", isolation_level=None)
            db.execute("UPDATE records SET weight=0.99 WHERE knowledge_id=?", (kept,))
            db.close()
            assert node.read_ids([kept]).records == ()  # quarantined: left out, not an error
            with pytest.raises(Exception, match="quarantined") as failed:
                node.invalidate(kept, "wrong")  # a state change on a damaged record
            assert getattr(failed.value, "status", 500) >= 500
            assert node.health()["state"] == "ACTIVE"  # still connected
    finally:
        asyncio.run_coroutine_threadsafe(server.close(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()
        mem.close()
