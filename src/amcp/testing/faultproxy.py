"""A loopback TCP proxy that drops, delays, duplicates, reorders and partitions AMCP frames.

Put one between two nodes (node A dials the proxy, the proxy dials node B) to see what
replication does when the network misbehaves. Faults are applied to **whole frames**, cut
from the byte stream by the 50-byte header's PAYLOAD_LENGTH (PROFILE §1): a lost TCP
segment is retransmitted by the kernel and never reaches AMCP, whereas a lost, repeated or
overtaken *message* is what the protocol's sequence numbers, REQUIRES_ACK retries and
anti-entropy exist for. (Cutting bytes mid-frame would only ever test the magic check.)

Every decision comes from ``random.Random`` seeded with ``(seed, connection number,
direction)``, so one seed and one traffic pattern give one fault pattern. The first
``spare`` frames of each direction (hello and capability response) pass untouched unless
``spare=0``: a dropped hello only measures the 30 s handshake timeout.

A partition either resets (every connection through the proxy is aborted and new ones are
closed at once: what a peer sees when a route disappears) or black-holes (connections stay
up, every frame is dropped: what it sees when packets vanish). ``heal()`` ends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import struct
from dataclasses import dataclass, field, replace
from enum import Enum

HEADER_SIZE = 50  # PROFILE §1; not imported from amcp.wire so the proxy stays protocol-light
_LENGTH = struct.Struct(">I")
_LENGTH_AT = 10
MAX_FRAME = HEADER_SIZE + 10 * 1024 * 1024
READ_CHUNK = 64 * 1024
REORDER_WAIT = 0.05  # a held frame goes out after this long if no frame overtakes it


class Partition(Enum):
    NONE = "none"
    RESET = "reset"
    BLACKHOLE = "blackhole"


@dataclass(frozen=True, slots=True)
class Faults:
    """Per-frame probabilities (0..1) and the added latency range in seconds."""

    drop: float = 0.0
    duplicate: float = 0.0
    reorder: float = 0.0  # the frame is held and sent after the next one
    delay: tuple[float, float] = (0.0, 0.0)
    spare: int = 2  # frames per direction and connection that are never faulted

    def __post_init__(self) -> None:
        for name in ("drop", "duplicate", "reorder"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be a probability in [0, 1]")
        lo, hi = self.delay
        if not 0.0 <= lo <= hi:
            raise ValueError("delay must be (low, high) with 0 <= low <= high")
        if self.spare < 0:
            raise ValueError("spare must be >= 0")


@dataclass(slots=True)
class Stats:
    connections: int = 0
    refused: int = 0
    frames: int = 0
    dropped: int = 0
    duplicated: int = 0
    reordered: int = 0
    delayed: int = 0


@dataclass(eq=False)
class _Pipe:
    """One direction of one proxied connection."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    rng: random.Random
    proxy: FaultProxy
    seen: int = 0
    held: bytes | None = None
    buf: bytearray = field(default_factory=bytearray)

    async def run(self) -> None:
        try:
            while True:
                wait = REORDER_WAIT if self.held is not None else None
                try:
                    chunk = await asyncio.wait_for(self.reader.read(READ_CHUNK), wait)
                except TimeoutError:
                    await self._flush_held()
                    continue
                if not chunk:
                    break
                self.buf += chunk
                for frame in self._frames():
                    await self._forward(frame)
            await self._flush_held()
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self.writer.close()

    def _frames(self) -> list[bytes]:
        out = []
        while len(self.buf) >= HEADER_SIZE:
            total = HEADER_SIZE + _LENGTH.unpack_from(self.buf, _LENGTH_AT)[0]
            if total > MAX_FRAME:  # not AMCP framing: pass the bytes on unjudged
                total = len(self.buf)
            if len(self.buf) < total:
                break
            out.append(bytes(self.buf[:total]))
            del self.buf[:total]
        return out

    async def _forward(self, frame: bytes) -> None:
        proxy, stats, f = self.proxy, self.proxy.stats, self.proxy.faults
        stats.frames += 1
        self.seen += 1
        if proxy.partition is Partition.BLACKHOLE:
            stats.dropped += 1
            return
        if self.seen <= f.spare:
            await self._write(frame)
            return
        # Draw every number each time, whichever fault applies, so one fault's setting
        # does not shift the random stream the others see.
        r_drop, r_dup, r_reorder, r_delay = (self.rng.random() for _ in range(4))
        if r_drop < f.drop:
            stats.dropped += 1
            return
        if f.delay[1] > 0:
            stats.delayed += 1
            await asyncio.sleep(f.delay[0] + (f.delay[1] - f.delay[0]) * r_delay)
        copies = 2 if r_dup < f.duplicate else 1
        stats.duplicated += copies - 1
        if r_reorder < f.reorder and self.held is None:
            stats.reordered += 1
            self.held = frame * copies
            return
        await self._write(frame * copies)
        await self._flush_held()

    async def _flush_held(self) -> None:
        if self.held is not None:
            held, self.held = self.held, None
            await self._write(held)

    async def _write(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()


class FaultProxy:
    """``listen → target`` with faults. ``await start()``, then dial ``proxy.port``."""

    def __init__(self, target_host: str, target_port: int, *, seed: int = 0,
                 faults: Faults | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
        self.target = (target_host, target_port)
        self.listen = (host, port)
        self.seed = seed
        self.faults = faults or Faults()
        self.partition = Partition.NONE
        self.stats = Stats()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._count = 0

    @property
    def port(self) -> int:
        assert self._server is not None, "start() first"
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> FaultProxy:
        self._server = await asyncio.start_server(self._accept, *self.listen)
        return self

    def set_faults(self, faults: Faults | None = None, **changes: object) -> None:
        """Replace the faults (or change some fields); applies to frames from now on."""
        base = faults or self.faults
        self.faults = replace(base, **changes) if changes else base  # type: ignore[arg-type]

    def cut(self, mode: Partition = Partition.RESET) -> None:
        """Start a partition. RESET aborts every connection now and refuses new ones."""
        self.partition = mode
        if mode is Partition.RESET:
            self._abort_all()

    def heal(self) -> None:
        self.partition = Partition.NONE

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        self._abort_all()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def __aenter__(self) -> FaultProxy:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _abort_all(self) -> None:
        for writer in list(self._writers):
            _abort(writer)
        self._writers.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.partition is Partition.RESET:
            self.stats.refused += 1
            _abort(writer)
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            self.stats.refused += 1
            _abort(writer)
            return
        self._count += 1
        self.stats.connections += 1
        n = self._count
        self._writers |= {writer, up_writer}
        pipes = (
            _Pipe(reader, up_writer, random.Random(f"{self.seed}:{n}:up"), self),
            _Pipe(up_reader, writer, random.Random(f"{self.seed}:{n}:down"), self),
        )
        tasks = [asyncio.create_task(p.run()) for p in pipes]
        self._tasks.update(tasks)
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in (writer, up_writer):  # one side ended: so does the other
                _abort(w)
                self._writers.discard(w)
            for t in tasks:
                self._tasks.discard(t)
                t.cancel()


def _abort(writer: asyncio.StreamWriter) -> None:
    """Reset the connection now (no FIN, no flush) and mark the writer closed."""
    writer.transport.abort()
    writer.close()
