"""Retries, the offline queue across a server restart, and peers that try to hold the node:
slowloris (one byte a second) and a peer that never reads."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from tests.node.kit import (
    FAST,
    RawPeer,
    client_for,
    free_port,
    hello_payload,
    make_memory,
    record,
    run,
    running,
    short_limits,
)

from amcp.memory import Memory
from amcp.node import NodeServer, connect
from amcp.wire import FrameDecoder, MsgType

M = MsgType


def test_offline_queue_replays_after_restart_without_duplicates(tmp_path: Path) -> None:
    mem = make_memory(tmp_path)
    port = free_port()
    queue = tmp_path / "client" / "outbox.db"

    async def main() -> None:
        server = NodeServer(mem)
        await server.start("127.0.0.1", port)
        c = await client_for(server, queue_path=queue)
        first = record(mem, "written while online")
        assert (await c.write(first)).status == 201
        await server.close()  # the node goes away
        offline = [record(mem, f"written while offline {i}") for i in range(3)]
        acks = [await c.write(r) for r in offline]
        assert all(a.queued and a.status is None for a in acks)
        assert [a.knowledge_id for a in acks] == [r["knowledge_id"] for r in offline]
        await c.write(offline[0])  # queued twice: replay must still store it once
        assert c.queue is not None
        assert len(c.queue) == 4
        server = NodeServer(mem)
        await server.start("127.0.0.1", port)  # back, same port
        await c.flush_queue()  # reconnects; the new session replays the queue first
        assert len(c.queue) == 0
        assert c.replay_failures == []
        # A write acked before the restart, replayed by hand: 200, not a second record.
        assert (await c.write(first)).status == 200
        await c.end()
        await server.close()

    try:
        run(main())
        assert mem.stats().records == 4
    finally:
        mem.close()


def test_requires_ack_retransmits_the_same_frame(tmp_path: Path) -> None:
    """The node holds the first copy until the client has retransmitted it (same seq, seen
    on the wire by a relay in between); the node drops the duplicate, answers once, and the
    write is stored once."""
    mem = make_memory(tmp_path)
    resent = threading.Event()

    async def main() -> None:
        async with running(mem) as server, _relay(server.port, resent) as port:
            c = await connect("127.0.0.1", port, retry=FAST)
            original = mem.put
            calls = []

            def slow_put(*a, **kw):  # type: ignore[no-untyped-def]
                # Held until the retransmission (after FAST.ack_timeout) went past the relay.
                calls.append(resent.wait(30))
                return original(*a, **kw)

            mem.put = slow_put  # type: ignore[method-assign]
            try:
                ack = await c.write(record(mem, "slow but sure"))
            finally:
                mem.put = original  # type: ignore[method-assign]
            assert ack.status == 201
            assert calls == [True]
            await c.end()

    try:
        run(main())
        assert mem.stats().records == 1
    finally:
        mem.close()


@asynccontextmanager
async def _relay(node_port: int, resent: threading.Event) -> AsyncIterator[int]:
    """A loopback relay to the node on ``node_port`` that decodes what clients send and sets
    ``resent`` once a MEMORY_WRITE frame has come twice with one sequence number."""
    seen: list[int] = []

    async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter,
                   decoder: FrameDecoder | None) -> None:
        while data := await src.read(65536):
            for frame in decoder.feed(data) if decoder is not None else ():
                if frame.msg_type is M.MEMORY_WRITE:
                    if frame.seq in seen:
                        resent.set()
                    seen.append(frame.seq)
            dst.write(data)
            await dst.drain()
        dst.close()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", node_port)
        with contextlib.suppress(ConnectionError, OSError):
            await asyncio.gather(pump(reader, up_writer, FrameDecoder()),
                                 pump(up_reader, writer, None))

    relay = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield relay.sockets[0].getsockname()[1]
    finally:
        relay.close()


async def _working_client_survives(server: NodeServer, mem: Memory, seconds: float) -> int:
    """A normal client keeps getting answers while the bad peer is being dealt with."""
    c = await client_for(server)
    r = record(mem, "still serving")
    await c.write(r)
    done = 0
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while loop.time() < end:
        got = await asyncio.wait_for(c.read_ids([r["knowledge_id"]]), 2.0)
        assert len(got.records) == 1
        done += 1
        await asyncio.sleep(0.02)
    await c.end()
    return done


def test_slowloris_is_cut_off_while_others_are_served(tmp_path: Path) -> None:
    mem = make_memory(tmp_path)
    limits = short_limits(frame_timeout=1.0)

    async def main() -> None:
        async with running(mem, limits=limits) as server:
            peer = await RawPeer.open(server.port)
            await peer.next_frame()
            hello = peer.frame(M.CAPABILITY_HELLO, hello_payload())

            async def dribble() -> float:
                start = asyncio.get_running_loop().time()
                try:
                    for byte in hello:
                        peer.send(bytes([byte]))
                        await peer.writer.drain()
                        await asyncio.sleep(0.25)
                        if peer.reader.at_eof():
                            break
                except (ConnectionError, OSError):
                    pass
                return asyncio.get_running_loop().time() - start

            dribbler = asyncio.create_task(dribble())
            served = await _working_client_survives(server, mem, 1.5)
            frames, _ = await peer.read_until_closed(timeout=5.0)
            await dribbler
            assert served >= 3  # kept being served (no throughput claim)
            assert not any(f.msg_type is M.CAPABILITY_RESPONSE for f in frames)
            assert server.connections == 0
            await peer.close()

    try:
        run(main())
    finally:
        mem.close()


def test_peer_that_never_reads_is_cut_off_while_others_are_served(tmp_path: Path) -> None:
    mem = make_memory(tmp_path)
    limits = short_limits(write_timeout=0.5, write_high_water=32 * 1024,
                          write_low_water=8 * 1024)

    async def main() -> None:
        async with running(mem, limits=limits) as server:
            # A few large records so every read answer is big.
            for i in range(8):
                mem.put(record(mem, f"{i} " + "payload " * 3000))
            ids = [c.knowledge_id for c in mem.store.changes(0, 100)]
            # The greedy peer: a tiny receive buffer, many big requests, never a read.
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.setblocking(False)
            loop = asyncio.get_running_loop()
            await loop.sock_connect(sock, ("127.0.0.1", server.port))
            reader, writer = await asyncio.open_connection(sock=sock)
            greedy = await _handshake_raw(reader, writer)
            for _ in range(400):
                writer.write(greedy.frame(M.MEMORY_READ, {"ids": ids}))
            served = await _working_client_survives(server, mem, 2.0)
            assert served >= 3  # kept being served (no throughput claim)
            # The node gave up on the greedy peer: its connection is gone.
            for _ in range(50):
                if server.connections == 0:
                    break
                await asyncio.sleep(0.1)
            assert server.connections == 0
            writer.transport.abort()

    try:
        run(main())
    finally:
        mem.close()


async def _handshake_raw(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> RawPeer:
    """Hello + capability response + cold boot by hand (no encryption, no compression)."""
    from amcp.node.config import local_node
    from amcp.session import NodeIdentity, NodeType

    peer = RawPeer(reader, writer)
    server_hello = await peer.next_frame()
    local = local_node(NodeIdentity.generate(), NodeType.AI, compression=False)
    nonce = b"\x02" * 16
    peer.send(peer.frame(M.CAPABILITY_HELLO, local.hello(nonce).to_payload()))
    resp = await peer.next_frame()
    assert resp.payload["status"] == 200
    from amcp.session.hello import Hello

    theirs = Hello.from_payload(server_hello.payload)
    mine = local.response(theirs, 200, local.trust_level, None)
    peer.send(peer.frame(M.CAPABILITY_RESPONSE, mine.to_payload(server_hello.seq)))
    peer.send(peer.frame(M.COLD_BOOT_REQUEST, {"task": "be greedy", "budget_tokens": 4000}))
    boot = await peer.next_frame()
    assert boot.msg_type is M.COLD_BOOT_RESPONSE, boot
    return peer
