"""Every message type over a real loopback socket, encryption and compression on and off."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.node.kit import client_for, make_memory, record, run, running

from amcp.errors import ForbiddenError, ValidationError
from amcp.memory import Memory
from amcp.session import AccessPolicy


@pytest.fixture
def mem(tmp_path: Path):
    m = make_memory(tmp_path)
    yield m
    m.close()


@pytest.mark.parametrize(("encryption", "compression"), [(False, False), (True, True),
                                                         (True, False), (False, True)])
def test_every_message_type(mem: Memory, encryption: bool, compression: bool) -> None:
    async def main() -> None:
        async with running(mem) as server:
            c = await client_for(server, encryption=encryption, compression=compression)
            link = c._link
            assert link is not None
            assert (link.channel.cipher is not None) is encryption
            assert link.channel.negotiated is not None
            assert link.channel.negotiated.compression is compression
            # COLD_BOOT_RESPONSE happened in connect()
            assert c.boot is not None
            assert {"pack", "confirmation", "urgent_signals", "cse_ms", "session_id"} <= set(c.boot)
            # MEMORY_WRITE {amf}: 201, then 200 (idempotent)
            big = record(mem, "x" * 3000 + " compression pays off here")  # > 1 KiB payload
            r = record(mem, "the build uses uv")
            first = await c.write(r)
            assert first.status == 201
            assert first.knowledge_id == r["knowledge_id"]
            assert (await c.write(r)).status == 200
            assert (await c.write([big])).status == 201  # {batch}
            # MEMORY_READ {ids}: AMF + x-state
            got = await c.read_ids([r["knowledge_id"], big["knowledge_id"]])
            assert [x["knowledge_id"] for x in got.records] == [r["knowledge_id"],
                                                                 big["knowledge_id"]]
            state = got.records[0]["vendor_extensions"]["x-state"]
            assert set(state) == {"lifecycle", "decay_status", "effective_confidence", "weight",
                                  "access_count_7d", "last_access", "tier", "envelope"}
            assert state["lifecycle"] == "active"
            # MEMORY_READ {query}
            hits = await c.recall("which build tool", k=3)
            assert r["knowledge_id"] in [x["knowledge_id"] for x in hits.records]
            # SESSION_BEGIN then an AMQL REMEMBER composed by the node carries the session
            wsid = await c.begin_session(task="t")
            assert wsid.startswith("S-")
            rem = await c.write(amql='REMEMBER {"type": "KT-FACT", "core": {"subject": '
                                '"db.port", "predicate": "EQUALS", "object": "5432", '
                                '"confidence": 0.8}, "meta": {"project_scope": ["team:a"]}}')
            assert rem.status == 201
            stored = (await c.read_ids([rem.knowledge_id]))  # type: ignore[list-item]
            assert f"session:{wsid}" in stored.records[0]["core"]["evidence"]
            # MEMORY_INVALIDATE {knowledge_id, reason}: 204
            inv = await c.invalidate(r["knowledge_id"], "we moved to pip")
            assert inv.status == 204
            # HEALTH_CHECK
            health = await c.health()
            assert health["state"] == "ACTIVE"
            assert health["store"]["records"] >= 3
            assert {"hlc", "uptime_s"} <= set(health)
            # SYNC_PULL_REQUEST: put entries carry the AMF, the invalidation follows
            pulled = await c.sync_pull(0)
            ops = [(ch["op"], ch["knowledge_id"]) for ch in pulled["changes"]]
            assert ("put", r["knowledge_id"]) in ops
            assert ("invalidate", r["knowledge_id"]) in ops
            assert all("amf" in ch for ch in pulled["changes"] if ch["op"] == "put")
            assert pulled["watermark"] > 0
            # SYNC_PUSH: a record from elsewhere, applied once, then a duplicate
            other = record(mem, "pushed from the laptop")
            change = {"op": "put", "knowledge_id": other["knowledge_id"], "hlc": 1, "amf": other}
            ack = await c.sync_push([change], origin="amcp://db.amcp.fp-aaaaaa.laptop")
            assert (ack["applied"], ack["duplicates"], ack["conflicts"]) == (1, 0, 0)
            ack = await c.sync_push([change], origin="amcp://db.amcp.fp-aaaaaa.laptop")
            assert (ack["applied"], ack["duplicates"]) == (0, 1)
            # QEF_SIGNAL → QEF_ACK
            qef = await c.signal({"type": "TEST", "status": "emitted", "priority": "low",
                                  "metric": {"pass_rate": 0.5}, "action_hint": "retry",
                                  "evidence": ["ci"], "knowledge_ids": [big["knowledge_id"]],
                                  "outcome": "success"})
            assert qef["status"] == 200
            assert qef["signal_knowledge_id"].startswith("K-")
            assert [u["knowledge_id"] for u in qef["updated"]] == [big["knowledge_id"]]
            await c.end("done")
    run(main())


def test_knowledge_distill(mem: Memory) -> None:
    async def main() -> None:
        async with running(mem) as server:
            c = await client_for(server)
            for i in range(3):
                await c.write(record(mem, f"retry flaky network call {i}", type="KT-PITFALL"))
            ack = await c.distill("RECALL * WHERE type = 'KT-PITFALL'", into="KT-PRINCIPLE")
            assert ack.status in (200, 201)
            await c.end()
    run(main())


def test_amql_read_and_forget(mem: Memory) -> None:
    async def main() -> None:
        async with running(mem) as server:
            c = await client_for(server)
            r = record(mem, "amql is supported")
            await c.write(r)
            res = await c.query("RECALL * WHERE type = 'KT-FACT' LIMIT 5")
            assert r["knowledge_id"] in [x["knowledge_id"] for x in res.records]
            ack = await c.invalidate(amql=f"FORGET {r['knowledge_id']} REASON 'obsolete'")
            assert ack.status == 204
            with pytest.raises(ValidationError):
                await c.query("FORGET K-" + "0" * 64)  # MEMORY_READ takes RECALL only
            await c.end()
    run(main())


def test_malformed_write_is_400_and_session_continues(mem: Memory) -> None:
    async def main() -> None:
        async with running(mem) as server:
            c = await client_for(server)
            bad = record(mem, "no subject")
            del bad["core"]["subject"]
            with pytest.raises(ValidationError):
                await c.write(bad)
            changed = record(mem, "original")
            await c.write(changed)
            changed["core"]["object"] = "tampered"
            from amcp.errors import ConflictError

            with pytest.raises(ConflictError):  # T1-05: same id, other content → 409
                await c.write(changed)
            assert (await c.health())["state"] == "ACTIVE"
            await c.end()
    run(main())


def test_write_outside_scope_is_403_and_nothing_stored(tmp_path: Path) -> None:
    mem = make_memory(tmp_path)
    policy = AccessPolicy.from_mapping({"default": {"read": ["*"], "write": ["team:a"]}})

    async def main() -> None:
        async with running(mem, policy=policy) as server:
            c = await client_for(server)
            outside = record(mem, "secret plan", scope="team:b")
            with pytest.raises(ForbiddenError):
                await c.write(outside)
            with pytest.raises(ForbiddenError):
                await c.write([record(mem, "fine", scope="team:a"), outside])
            assert (await c.write(record(mem, "inside", scope="team:a"))).status == 201
            await c.end()
    try:
        run(main())
        assert mem.stats().records == 1
        assert mem.store.get(record(mem, "secret plan", scope="team:b")["knowledge_id"]) is None
    finally:
        mem.close()


def test_unix_socket(tmp_path: Path) -> None:
    from amcp.node import NodeServer, connect

    mem = make_memory(tmp_path)
    sock = tmp_path / "node.sock"

    async def main() -> None:
        server = NodeServer(mem)
        await server.start(None, unix=sock)
        try:
            c = await connect(None, unix=sock)
            assert (await c.health())["state"] == "ACTIVE"
            await c.end()
        finally:
            await server.close()
    try:
        run(main())
    finally:
        mem.close()
