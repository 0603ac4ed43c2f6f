"""Strangers cannot exhaust the node: the two attacks of issue 17, against a real node.

1. Partial 10 MiB frames sent before the handshake (40 of them took RSS from 97 to
   ~500 MB): refused from the header, and all unauthenticated buffers together are capped.
2. Idle connections holding every slot (1,024 locked clients out until the 30 s
   handshake timeout): the waiting room is bounded, the longest waiter is evicted, and
   authenticated sessions keep their room.

Memory is measured by bench/node_limits.py (RSS of a node process); here the node's own
accounting (``server.admission``) and what the peers see are checked.
"""

from __future__ import annotations

import asyncio
import struct
import time
from pathlib import Path

from tests.node.kit import (
    RawPeer,
    client_for,
    hello_payload,
    make_memory,
    record,
    run,
    running,
    short_limits,
)

from amcp.session import Timeouts
from amcp.wire import HEADER_SIZE, Frame, MsgType, encode_frame

M = MsgType
MiB = 1024 * 1024


def _header_claiming(length: int) -> bytes:
    """The 50-byte header of a CAPABILITY_HELLO whose PAYLOAD_LENGTH says ``length``."""
    frame = encode_frame(Frame(M.CAPABILITY_HELLO, {}, 1, clock=int(time.time() * 1000) << 16))
    return frame[:10] + struct.pack(">I", length) + frame[14:HEADER_SIZE]


async def _closed(peer: RawPeer, timeout: float = 5.0) -> list[Frame]:
    try:
        frames, _ = await peer.read_until_closed(timeout)
    except (ConnectionError, OSError):
        frames = peer.frames
    return frames


def test_a_10_mib_frame_before_the_handshake_is_refused_from_its_header(tmp_path: Path) -> None:
    mem = make_memory(tmp_path)

    async def main() -> None:
        async with running(mem, limits=short_limits()) as server:
            peers = [await RawPeer.open(server.port) for _ in range(40)]
            for peer in peers:
                # Only the header and a little payload: more unread bytes would make the
                # kernel answer the close with RST and lose the 0x00FF this test reads.
                peer.send(_header_claiming(10 * MiB) + b"\x00" * 1024)
            for peer in peers:
                frames = await _closed(peer)
                assert frames[-1].msg_type is M.PROTOCOL_VIOLATION
                assert "exceeds the maximum 65536" in frames[-1].payload["reason"]
                await peer.close()
            assert server.admission.buffered == 0
            c = await client_for(server)  # the node still serves an honest client
            await c.write(record(mem, "after the flood"))
            await c.end()

    try:
        run(main())
    finally:
        mem.close()


def test_unauthenticated_buffers_share_one_aggregate_cap(tmp_path: Path) -> None:
    mem = make_memory(tmp_path)
    cap = 256 * 1024
    limits = short_limits(unauthenticated_buffer_bytes=cap)

    async def main() -> None:
        async with running(mem, limits=limits) as server:
            peers = [await RawPeer.open(server.port) for _ in range(12)]
            for peer in peers:  # each under the 64 KiB hello cap, together far over `cap`
                peer.send(_header_claiming(60 * 1024) + b"\x00" * (40 * 1024))
                await peer.writer.drain()
            await asyncio.sleep(0.5)
            assert server.admission.over_memory >= 5  # 12 × ~40 KiB > 256 KiB
            assert server.admission.buffered <= cap
            c = await client_for(server)
            await c.write(record(mem, "served while strangers hold their share"))
            await c.end()
            for peer in peers:
                await peer.close()

    try:
        run(main())
    finally:
        mem.close()


def test_idle_strangers_cannot_lock_clients_out(tmp_path: Path) -> None:
    mem = make_memory(tmp_path)
    # The real 30 s handshake timeout: the honest client must get in long before it.
    limits = short_limits(max_connections=48, max_unauthenticated=12,
                          timeouts=Timeouts(handshaking=30.0))

    async def main() -> None:
        async with running(mem, limits=limits) as server:
            ours = [await client_for(server) for _ in range(3)]  # authenticated first
            idle = [await RawPeer.open(server.port) for _ in range(60)]
            await asyncio.sleep(0.3)
            assert server.admission.waiting <= 12
            assert server.admission.evicted >= 48
            late = await client_for(server)  # a newcomer evicts the longest waiter
            r = record(mem, "a client that arrived during the flood")
            await late.write(r)
            for c in ours:  # authenticated sessions were never evicted
                got = await c.read_ids([r["knowledge_id"]])
                assert len(got.records) == 1
                await c.end()
            await late.end()
            for peer in idle:
                await peer.close()

    try:
        run(main())
    finally:
        mem.close()


def test_a_full_node_of_authenticated_sessions_refuses_newcomers(tmp_path: Path) -> None:
    mem = make_memory(tmp_path)
    limits = short_limits(max_connections=3, max_unauthenticated=2)

    async def main() -> None:
        async with running(mem, limits=limits) as server:
            ours = [await client_for(server) for _ in range(3)]
            peer = await RawPeer.open(server.port)
            assert await _closed(peer) == []  # closed before a byte: nothing to evict
            assert server.refused == 1
            for c in ours:
                await c.end()
            await peer.close()

    try:
        run(main())
    finally:
        mem.close()


def test_hello_under_the_cap_still_completes(tmp_path: Path) -> None:
    mem = make_memory(tmp_path)

    async def main() -> None:
        async with running(mem, limits=short_limits()) as server:
            peer = await RawPeer.open(server.port)
            await peer.next_frame()  # the node's hello
            # A hello padded with a 40 KiB certificate-sized field is still accepted.
            peer.send(peer.frame(M.CAPABILITY_HELLO, hello_payload(pad="x" * 40_000)))
            reply = await peer.next_frame()
            assert reply.msg_type is M.CAPABILITY_RESPONSE
            assert server.admission.waiting == 1  # until its own response arrives
            await peer.close()

    try:
        run(main())
    finally:
        mem.close()
