"""The fault proxy on its own (frames in, frames out) and in front of a real node."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from tests.node.kit import client_for, make_memory, record, run, running

from amcp.testing.faultproxy import FaultProxy, Faults, Partition
from amcp.wire import Frame, FrameDecoder, MsgType, encode_frame

N = 60


class Sink:
    """A server that decodes every frame it receives and keeps the sequence numbers."""

    def __init__(self) -> None:
        self.seqs: list[int] = []
        self.server: asyncio.Server | None = None
        self.connections = 0

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        decoder = FrameDecoder()
        while data := await reader.read(65536):
            self.seqs += [f.seq for f in decoder.feed(data)]
        writer.close()

    async def close(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


def _frames(count: int = N) -> bytes:
    return b"".join(encode_frame(Frame(MsgType.HEALTH_CHECK, {"n": i}, i + 1))
                    for i in range(count))


async def _through(faults: Faults, seed: int = 7, data: bytes | None = None) -> tuple[
        list[int], FaultProxy]:
    sink = Sink()
    port = await sink.start()
    async with FaultProxy("127.0.0.1", port, seed=seed, faults=faults) as proxy:
        _, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(data if data is not None else _frames())
        await writer.drain()
        await asyncio.sleep(0.4)
        writer.close()
        await asyncio.sleep(0.1)
    await sink.close()
    return sink.seqs, proxy


def test_no_faults_passes_every_frame_in_order() -> None:
    seqs, proxy = run(_through(Faults()))
    assert seqs == list(range(1, N + 1))
    assert proxy.stats.frames == N and proxy.stats.dropped == 0


def test_frames_split_across_reads_are_reassembled() -> None:
    async def main() -> list[int]:
        sink = Sink()
        port = await sink.start()
        async with FaultProxy("127.0.0.1", port) as proxy:
            _, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            for byte in _frames(3):  # one byte per write: frames cut anywhere
                writer.write(bytes([byte]))
                await writer.drain()
            await asyncio.sleep(0.2)
            writer.close()
            await asyncio.sleep(0.1)
        await sink.close()
        return sink.seqs

    assert run(main()) == [1, 2, 3]


def test_drop_everything_but_the_spared_handshake_frames() -> None:
    seqs, proxy = run(_through(Faults(drop=1.0, spare=2)))
    assert seqs == [1, 2]
    assert proxy.stats.dropped == N - 2


def test_duplicate_sends_each_frame_twice() -> None:
    seqs, proxy = run(_through(Faults(duplicate=1.0, spare=0)))
    assert seqs == [s for i in range(1, N + 1) for s in (i, i)]
    assert proxy.stats.duplicated == N


def test_reorder_changes_order_but_loses_nothing() -> None:
    seqs, proxy = run(_through(Faults(reorder=0.3, spare=0)))
    assert sorted(seqs) == list(range(1, N + 1))
    assert seqs != sorted(seqs)
    assert proxy.stats.reordered > 0


def test_delay_is_counted() -> None:
    seqs, proxy = run(_through(Faults(delay=(0.001, 0.002), spare=0), data=_frames(10)))
    assert seqs == list(range(1, 11))
    assert proxy.stats.delayed == 10


def test_the_same_seed_gives_the_same_faults() -> None:
    faults = Faults(drop=0.3, duplicate=0.2, spare=0)
    first, _ = run(_through(faults, seed=42))
    again, _ = run(_through(faults, seed=42))
    other, _ = run(_through(faults, seed=43))
    assert first == again
    assert first != other
    assert 0 < len(set(first)) < N


def test_bad_probabilities_are_refused() -> None:
    with pytest.raises(ValueError, match="probability"):
        Faults(drop=1.5)
    with pytest.raises(ValueError, match="delay"):
        Faults(delay=(0.2, 0.1))


def test_partition_resets_and_refuses_then_heals() -> None:
    async def main() -> None:
        sink = Sink()
        port = await sink.start()
        async with FaultProxy("127.0.0.1", port) as proxy:
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writer.write(_frames(2))
            await writer.drain()
            await asyncio.sleep(0.1)
            proxy.cut(Partition.RESET)
            assert await asyncio.wait_for(reader.read(10), 2) == b""  # cut off
            writer.close()
            r2, w2 = await asyncio.open_connection("127.0.0.1", proxy.port)
            assert await asyncio.wait_for(r2.read(10), 2) == b""  # refused while cut
            w2.close()
            assert proxy.stats.refused == 1
            proxy.heal()
            _, w3 = await asyncio.open_connection("127.0.0.1", proxy.port)
            w3.write(_frames(1))
            await w3.drain()
            await asyncio.sleep(0.2)
            w3.close()
        await sink.close()
        assert sink.seqs == [1, 2, 1]

    run(main())


def test_blackhole_keeps_connections_and_drops_every_frame() -> None:
    async def main() -> None:
        sink = Sink()
        port = await sink.start()
        async with FaultProxy("127.0.0.1", port) as proxy:
            proxy.cut(Partition.BLACKHOLE)
            _, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writer.write(_frames(5))
            await writer.drain()
            await asyncio.sleep(0.2)
            assert sink.seqs == [] and sink.connections == 1
            proxy.heal()
            writer.write(encode_frame(Frame(MsgType.HEALTH_CHECK, {}, 6)))
            await writer.drain()
            await asyncio.sleep(0.2)
            writer.close()
        await sink.close()
        assert sink.seqs == [6]

    run(main())


def test_a_real_client_writes_through_a_lossy_proxy(tmp_path: Path) -> None:
    """Frames lost after the handshake are retransmitted (REQUIRES_ACK) until acked."""
    mem = make_memory(tmp_path)

    async def main() -> None:
        async with running(mem) as server, FaultProxy(
            "127.0.0.1", server.port, seed=3, faults=Faults(drop=0.2, spare=3),
        ) as proxy:
            from tests.node.kit import FAST

            from amcp.node import connect

            client = await connect("127.0.0.1", proxy.port, retry=FAST)
            ids = []
            for i in range(10):
                ack = await client.write(record(mem, f"through the proxy {i}"))
                ids.append(ack.knowledge_id)
            await client.aclose()
            direct = await client_for(server)
            got = await direct.read_ids(ids)
            assert len(got.records) == 10
            await direct.end()
            assert proxy.stats.dropped > 0

    try:
        run(main(), timeout=120)
    finally:
        mem.close()
