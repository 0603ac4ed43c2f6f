"""Helpers for node tests: a real server on a free loopback port, raw sockets, AMF records."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar

from amcp.memory import Memory
from amcp.node import Client, Limits, NodeServer, RetryPolicy, connect
from amcp.session import NodeIdentity, Timeouts
from amcp.session.identity import b64url_encode
from amcp.wire import Flag, Frame, FrameDecoder, MsgType, encode_frame

T = TypeVar("T")
# Retransmits quickly but gives up only after several seconds: a loaded CI box must not
# turn a slow write into a failure.
FAST = RetryPolicy(ack_timeout=0.3, backoff=(0.3, 10.0), request_timeout=20.0,
                   connect_timeout=5.0, heartbeat=30.0)


def run(coro: Awaitable[T], timeout: float = 60.0) -> T:
    async def main() -> T:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(main())


def make_memory(tmp: Path, name: str = "node") -> Memory:
    return Memory(tmp / name / "memory.db", embedder="hashing")


@asynccontextmanager
async def running(
    memory: Memory, *, limits: Limits | None = None, port: int = 0, **options: Any
) -> AsyncIterator[NodeServer]:
    server = NodeServer(memory, limits=limits, **options)
    await server.start("127.0.0.1", port)
    try:
        yield server
    finally:
        await server.close()


async def client_for(server: NodeServer, **options: Any) -> Client:
    options.setdefault("retry", FAST)
    return await connect("127.0.0.1", server.port, **options)


def record(mem: Memory, text: str, scope: str = "team:a", **kw: Any) -> dict[str, Any]:
    """A sealed AMF dict built by ``mem`` (never stored there)."""
    return mem.compose(text, scope=scope, **kw).to_dict()


class RawPeer:
    """A hand-driven TCP peer: send exact bytes, read frames, see when the node closes."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.decoder = FrameDecoder()
        self.frames: list[Frame] = []
        self.seq = 0

    @classmethod
    async def open(cls, port: int) -> RawPeer:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    def send(self, data: bytes) -> None:
        self.writer.write(data)

    def frame(self, msg_type: MsgType, payload: dict[str, Any], flags: Flag = Flag.NONE,
              seq: int | None = None) -> bytes:
        self.seq = seq if seq is not None else self.seq + 1
        return encode_frame(Frame(msg_type, payload, self.seq, flags=flags,
                                  clock=int(time.time() * 1000) << 16))

    async def read_until_closed(self, timeout: float) -> tuple[list[Frame], float]:
        """Frames received until EOF, and the seconds it took the node to close."""
        start = time.monotonic()
        while True:
            data = await asyncio.wait_for(self.reader.read(65536), timeout)
            if not data:
                return self.frames, time.monotonic() - start
            self.frames += self.decoder.feed(data)

    async def next_frame(self, timeout: float = 5.0) -> Frame:
        while not self.frames:
            data = await asyncio.wait_for(self.reader.read(65536), timeout)
            if not data:
                raise ConnectionError("closed")
            self.frames += self.decoder.feed(data)
        return self.frames.pop(0)

    async def close(self) -> None:
        self.writer.close()
        with suppress(ConnectionError, OSError):
            await self.writer.wait_closed()


def hello_payload(identity: NodeIdentity | None = None, **over: Any) -> dict[str, Any]:
    from amcp.node.config import local_node
    from amcp.session import NodeType

    local = local_node(identity or NodeIdentity.generate(), NodeType.AI)
    payload = local.hello(b"\x01" * 16).to_payload()
    payload.update(over)
    return payload


def short_limits(**kw: Any) -> Limits:
    kw.setdefault("timeouts", Timeouts(handshaking=2.0, cold_booting=2.0, syncing=2.0,
                                       terminating=1.0))
    return Limits(**kw)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


Callback = Callable[[], Awaitable[None]]
__all__ = ["FAST", "RawPeer", "b64url_encode", "client_for", "free_port", "hello_payload",
           "make_memory", "record", "run", "running", "short_limits"]
