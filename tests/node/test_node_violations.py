"""Violations over a real socket: exactly one 0x00FF, then the node closes within 1 s.
A bad checksum is silence, and the stream goes on (T1-07)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path

import msgpack
import pytest
from tests.node.kit import RawPeer, hello_payload, make_memory, run, running

from amcp.memory import Memory
from amcp.session import NodeIdentity
from amcp.session.identity import b64url_encode
from amcp.wire import MsgType, pack_raw_frame

M = MsgType
CLOSE_WITHIN = 1.0  # PROFILE §2


@pytest.fixture
def mem(tmp_path: Path):
    m = make_memory(tmp_path)
    yield m
    m.close()


def _hello(peer: RawPeer) -> bytes:
    return peer.frame(M.CAPABILITY_HELLO, hello_payload())


def _cases() -> dict[str, Callable[[RawPeer], list[bytes]]]:
    return {
        "bad magic": lambda p: [pack_raw_frame(msg_type=M.CAPABILITY_HELLO, magic=b"\0\0\0\0")],
        "reserved flag": lambda p: [pack_raw_frame(msg_type=M.CAPABILITY_HELLO, flags=1 << 6)],
        "oversize 4 GiB header": lambda p: [
            pack_raw_frame(msg_type=M.CAPABILITY_HELLO, payload_length=0xFFFFFFFF)[:50]
        ],
        "unknown type": lambda p: [pack_raw_frame(msg_type=0x0099, seq=1)],
        "unknown major version": lambda p: [pack_raw_frame(msg_type=M.CAPABILITY_HELLO,
                                                           version=0x0200)],
        "undecodable payload": lambda p: [pack_raw_frame(msg_type=M.CAPABILITY_HELLO,
                                                         payload=b"\xc1\xc1")],
        "memory read before hello (T1-06)": lambda p: [p.frame(M.MEMORY_READ, {"ids": []})],
        "fingerprint mismatch": lambda p: [p.frame(M.CAPABILITY_HELLO, hello_payload(
            node_address="amcp://ai.amcp.pyamcp.fp-0123456789abcdef.local"))],
    }


@pytest.mark.parametrize("case", sorted(_cases()))
def test_violation_sends_one_0x00ff_then_closes(mem: Memory, case: str) -> None:
    async def main() -> None:
        async with running(mem) as server:
            peer = await RawPeer.open(server.port)
            hello = await peer.next_frame()
            assert hello.msg_type is M.CAPABILITY_HELLO  # T1-02
            for chunk in _cases()[case](peer):
                peer.send(chunk)
            frames, took = await peer.read_until_closed(timeout=5.0)
            types = [f.msg_type for f in frames]
            assert types.count(M.PROTOCOL_VIOLATION) == 1, types
            assert types[-1] is M.PROTOCOL_VIOLATION
            assert took < CLOSE_WITHIN
            await peer.close()
    run(main())


def test_bad_hello_signature_is_a_violation(mem: Memory) -> None:
    """The possession proof (CAPABILITY_RESPONSE signature) does not verify."""

    async def main() -> None:
        async with running(mem) as server:
            peer = await RawPeer.open(server.port)
            server_hello = await peer.next_frame()
            peer.send(peer.frame(M.CAPABILITY_HELLO, hello_payload(NodeIdentity.generate())))
            resp = await peer.next_frame()
            assert resp.msg_type is M.CAPABILITY_RESPONSE
            assert resp.payload["status"] == 200
            forged = {
                "status": 200, "ref_seq": server_hello.seq, "accepted_version": "1.0.0",
                "signature": b64url_encode(os.urandom(64)), "trust_level": "local",
                "max_payload": 10 * 1024 * 1024, "compression": "none", "encryption": "none",
            }
            peer.send(peer.frame(M.CAPABILITY_RESPONSE, forged))
            frames, took = await peer.read_until_closed(timeout=5.0)
            assert [f.msg_type for f in frames] == [M.PROTOCOL_VIOLATION]
            assert took < CLOSE_WITHIN
            await peer.close()
    run(main())


def test_bad_checksum_is_silent_and_the_stream_continues(mem: Memory) -> None:
    async def main() -> None:
        async with running(mem) as server:
            peer = await RawPeer.open(server.port)
            await peer.next_frame()  # the node's hello
            body = msgpack.packb(hello_payload(), use_bin_type=True)
            peer.send(pack_raw_frame(msg_type=M.CAPABILITY_HELLO, payload=body, seq=1,
                                     checksum=0xDEADBEEF))
            with pytest.raises(TimeoutError):
                await peer.next_frame(timeout=0.5)  # T1-07: no reply of any kind
            peer.seq = 1
            peer.send(_hello(peer))  # the stream is still in sync: a real hello works
            resp = await peer.next_frame()
            assert resp.msg_type is M.CAPABILITY_RESPONSE
            assert resp.payload["status"] == 200
            await peer.close()
    run(main())


def test_integrity_mismatch_on_write_is_a_violation(tmp_path: Path) -> None:
    """A knowledge_id that does not match its content (no record under that id yet)."""
    from tests.node.kit import client_for, record

    mem = make_memory(tmp_path)

    async def main() -> None:
        async with running(mem) as server:
            c = await client_for(server)
            bad = record(mem, "forged")
            bad["knowledge_id"] = "K-" + "1" * 64
            started = time.monotonic()
            from amcp.errors import AmcpError

            with pytest.raises(AmcpError):
                await c.write(bad)
            link = c._link
            assert link is not None
            reason = await asyncio.wait_for(link.closed, CLOSE_WITHIN)
            assert "violation" in reason or "closed" in reason
            assert time.monotonic() - started < 5.0
            await c.aclose()
    try:
        run(main())
        assert mem.stats().records == 0
    finally:
        mem.close()
