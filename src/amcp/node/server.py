"""The node's asyncio server: one TCP or unix-socket connection = one ``Channel`` (db role).

The event loop only moves bytes and timers. Memory calls block (SQLite, embeddings), so
they run in a bounded thread pool — reads on ``Limits.read_threads`` threads, writes on one
thread of their own so they are serialised — and the loop never waits on the store.

Every resource a peer can make the node hold is bounded (``Limits``): connections
(global cap), requests in flight per connection (ERROR 429), read size per call, the write
buffer (backpressure: stop reading, wait for the peer to drain, cut it off after
``write_timeout``), the time one frame may take to arrive (``frame_timeout``, against
slowloris) and idle time. Nothing is kept per peer address — not even after a violation.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from cryptography import x509

from amcp.errors import AmcpError, IntegrityError, Status
from amcp.memory import Memory
from amcp.node.channel import Channel
from amcp.node.config import DEFAULT_HOST, DEFAULT_PORT, Limits, is_local_address, local_node
from amcp.node.service import WRITES, NodeService, Peer, Reply
from amcp.session import (
    AccessPolicy,
    Event,
    HelloReceived,
    LocalNode,
    NodeIdentity,
    NodeType,
    Request,
    Role,
    Session,
    SessionState,
    TrustConfig,
    TrustLevel,
)
from amcp.wire import Frame, MsgType

log = logging.getLogger("amcp.node")
M = MsgType
# Reads by id this small are answered on the loop itself: a thread-pool hop costs more than
# the lookup (bench/node_rtt.py). Anything larger, and every write, goes to a thread.
INLINE_READ_IDS = 8
# ...but at most this many per socket read, so a pipelined flood goes to the pool (and its
# in-flight cap) instead of stalling every other connection on the loop.
INLINE_PER_CHUNK = 4


class NodeServer:
    """Serve ``memory`` over AMCP. ``await start(...)``, then ``await close()`` (or use
    ``async with``)."""

    def __init__(
        self,
        memory: Memory,
        *,
        identity: NodeIdentity | None = None,
        policy: AccessPolicy | None = None,
        limits: Limits | None = None,
        anchors: tuple[x509.Certificate, ...] = (),
        trust_local: bool | None = None,
        encryption: bool = True,
        compression: bool = True,
        trust_level: TrustLevel = TrustLevel.LOCAL,
        cert_chain: str | None = None,
        region: str = "local",
        inline_reads: bool = True,
    ) -> None:
        self.memory = memory
        self.limits = limits or Limits()
        self.identity = identity or NodeIdentity(memory.keyring.signing_key)
        self.local: LocalNode = local_node(
            self.identity, NodeType.DB, region=region, encryption=encryption,
            compression=compression, trust_level=trust_level, cert_chain=cert_chain,
        )
        self.service = NodeService(
            memory, policy, node_uri=str(self.local.address),
            max_payload=self.local.max_payload,
        )
        self.anchors = anchors
        self._trust_local = trust_local  # None: decided per listener (loopback/unix → on)
        self.inline_reads = inline_reads
        self.started_at = time.time()
        self._servers: list[asyncio.Server] = []
        self._conns: set[_Connection] = set()
        self._read_pool = ThreadPoolExecutor(self.limits.read_threads, "amcp-read")
        self._write_pool = ThreadPoolExecutor(1, "amcp-write")
        self.refused = 0  # connections closed at once because of max_connections

    @property
    def node_uri(self) -> str:
        return str(self.local.address)

    @property
    def connections(self) -> int:
        return len(self._conns)

    async def start(
        self, host: str | None = DEFAULT_HOST, port: int = DEFAULT_PORT, *,
        unix: str | Path | None = None,
    ) -> None:
        """Listen on ``host:port`` (port 0: any free port; host None: TCP off) and/or ``unix``."""
        if host is not None:
            trust = is_local_address(host) if self._trust_local is None else self._trust_local
            self._servers.append(await asyncio.start_server(
                lambda r, w: self._accept(r, w, trust), host, port,
                limit=self.limits.read_chunk, reuse_address=True,
            ))
        if unix is not None:
            trust = True if self._trust_local is None else self._trust_local
            path = Path(unix)
            with contextlib.suppress(FileNotFoundError):
                if path.is_socket():
                    path.unlink()
            self._servers.append(await asyncio.start_unix_server(
                lambda r, w: self._accept(r, w, trust), str(path), limit=self.limits.read_chunk,
            ))
            os.chmod(path, 0o600)  # the unix socket is the owner's: local trust is granted

    @property
    def addresses(self) -> list[Any]:
        return [s.getsockname() for srv in self._servers for s in srv.sockets]

    @property
    def port(self) -> int:
        for srv in self._servers:
            for sock in srv.sockets:
                if sock.family in (socket.AF_INET, socket.AF_INET6):
                    return int(sock.getsockname()[1])
        raise RuntimeError("not listening on TCP")

    async def serve_forever(self) -> None:
        await asyncio.gather(*(s.serve_forever() for s in self._servers))

    async def close(self) -> None:
        for srv in self._servers:
            srv.close()
        for conn in list(self._conns):
            conn.abort("server shutting down")
        for srv in self._servers:
            await srv.wait_closed()
        self._servers.clear()
        # Let connection handlers finish their teardown before the pools go away.
        for _ in range(3):
            await asyncio.sleep(0)
        self._read_pool.shutdown(wait=True, cancel_futures=True)
        self._write_pool.shutdown(wait=True, cancel_futures=True)

    async def __aenter__(self) -> NodeServer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _accept(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, trust_local: bool
    ) -> None:
        if len(self._conns) >= self.limits.max_connections:
            self.refused += 1
            writer.transport.abort()
            return
        conn = _Connection(self, reader, writer, trust_local)
        self._conns.add(conn)
        try:
            await conn.run()
        finally:
            self._conns.discard(conn)

    def uptime(self) -> float:
        return time.time() - self.started_at


class _Connection:
    """One peer. All methods run on the event loop; Memory calls go to the pools."""

    def __init__(
        self, server: NodeServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
        trust_local: bool,
    ) -> None:
        self.server = server
        self.limits = server.limits
        self.reader = reader
        self.writer = writer
        self.transport = writer.transport
        self.loop = asyncio.get_running_loop()
        session = Session(
            Role.NODE, server.local, clock=server.memory.clock, monotonic=self.loop.time,
            trust=TrustConfig(trust_local=trust_local, anchors=server.anchors),
            timeouts=self.limits.timeouts,
        )
        self.channel = Channel(session, max_payload=server.local.max_payload)
        self.peer: Peer | None = None
        self.inflight = 0
        self.inline_budget = INLINE_PER_CHUNK
        self.tasks: set[asyncio.Task[None]] = set()
        self.timer: asyncio.TimerHandle | None = None
        self.timer_at: float | None = None
        now = self.loop.time()
        self.partial_since: float | None = None
        self.last_frame = now
        self.closed = False

    # ------------------------------------------------------------------ main loop

    async def run(self) -> None:
        limits = self.limits
        self.transport.set_write_buffer_limits(limits.write_high_water, limits.write_low_water)
        self.channel.start()
        self.flush()
        self.arm()
        try:
            while not self.closed:
                data = await self.reader.read(limits.read_chunk)
                if not data or self.closed:
                    break
                events = self.channel.feed(data)
                now = self.loop.time()
                if events:
                    self.last_frame = now
                    self.partial_since = now if self.channel.buffered else None
                elif self.channel.buffered and self.partial_since is None:
                    self.partial_since = now
                self.inline_budget = INLINE_PER_CHUNK
                self.on_events(events)
                if self.flush():
                    break
                self.arm()
                # Backpressure: do not read more from a peer that does not read its replies.
                if self.transport.get_write_buffer_size() > limits.write_high_water:
                    await self.drain()
                else:
                    # A chunk full of pipelined requests must not monopolise the loop:
                    # StreamReader.read() returns buffered data without suspending.
                    await asyncio.sleep(0)
        except (ConnectionError, OSError):
            pass
        finally:
            await self.teardown()

    def on_events(self, events: list[Event]) -> None:
        for event in events:
            if type(event) is Request:
                self.dispatch(event.frame)
            elif type(event) is HelloReceived:
                principal = self.channel.session.principal
                assert principal is not None
                self.peer = Peer(principal, str(event.hello.node_address))

    def flush(self) -> bool:
        """Write what the channel produced; True when the connection is now closing."""
        data = self.channel.take_output()
        if data and not self.closed:
            self.writer.write(data)
        if self.channel.closing is not None and not self.closed:
            self.close_soon(self.channel.closing)
            return True
        return False

    async def drain(self) -> None:
        try:
            await asyncio.wait_for(self.writer.drain(), self.limits.write_timeout)
        except TimeoutError:
            self.abort("peer does not read (write buffer full)")
        except (ConnectionError, OSError):
            self.abort("connection lost")

    # ------------------------------------------------------------------ requests

    def dispatch(self, frame: Frame) -> None:
        mt = frame.msg_type
        if self.inflight >= self.limits.max_inflight:
            self.channel.reply_error(frame, Status.TOO_MANY_REQUESTS, "too many requests in flight")
            return
        if mt is M.HEALTH_CHECK:
            self.inflight += 1
            self.spawn(self.health(frame))
            return
        peer = self.peer
        assert peer is not None  # requests only arrive after the hello
        if mt is M.SESSION_BEGIN or (
            self.inline_budget > 0 and self.server.inline_reads and mt is M.MEMORY_READ
            and _small_id_read(frame.payload)
        ):
            self.inline_budget -= 1
            self.answer(frame, self.run_inline(frame, peer))
            return
        self.inflight += 1
        self.spawn(self.serve(frame, peer))

    def run_inline(self, frame: Frame, peer: Peer) -> Reply | BaseException:
        try:
            return self.server.service.handle(frame, peer)
        except Exception as exc:  # noqa: BLE001 - turned into ERROR / violation in answer()
            return exc

    async def serve(self, frame: Frame, peer: Peer) -> None:
        server = self.server
        pool = server._write_pool if frame.msg_type in WRITES else server._read_pool
        try:
            result: Reply | BaseException = await self.loop.run_in_executor(
                pool, server.service.handle, frame, peer
            )
        except Exception as exc:  # noqa: BLE001 - mapped to a wire status below
            result = exc
        finally:
            self.inflight -= 1
        if self.closed:
            return
        if self.transport.get_write_buffer_size() > self.limits.write_high_water:
            await self.drain()
            if self.transport.is_closing():  # drain() cut the peer off
                return
        self.answer(frame, result)
        self.flush()

    def answer(self, frame: Frame, result: Reply | BaseException) -> None:
        channel = self.channel
        if isinstance(result, Reply):
            channel.reply(frame, result.msg_type, result.payload, result.status)
        elif isinstance(result, IntegrityError):
            # PROFILE §2/§6: an id or checksum that does not match its content.
            channel.violation(Status.PROTOCOL_ERROR, result.message, frame.seq)
        elif isinstance(result, AmcpError):
            channel.reply_error(frame, result.status, result.message)
        else:
            log.exception("request %s failed", frame.msg_type.name, exc_info=result)
            channel.reply_error(frame, Status.INTERNAL, "internal error")

    async def health(self, frame: Frame) -> None:
        try:
            stats = await self.loop.run_in_executor(
                self.server._read_pool, self.server.memory.stats
            )
        finally:
            self.inflight -= 1
        state = self.channel.session.state
        self.channel.reply(frame, M.HEALTH_RESPONSE, {
            "state": (SessionState.ACTIVE if state is SessionState.SUSPENDED else state).value,
            "hlc": self.server.memory.clock.send(),
            "store": {"records": stats.records, "bytes": stats.bytes},
            "uptime_s": round(self.server.uptime(), 3),
        })
        self.flush()

    def spawn(self, coro: Any) -> None:
        task: asyncio.Task[None] = self.loop.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    # ------------------------------------------------------------------ timers

    def arm(self) -> None:
        """(Re)schedule the one timer at the earliest of: session deadline, frame deadline,
        idle deadline."""
        if self.closed:
            return
        deadlines = [self.channel.session.next_deadline()]
        if self.partial_since is not None:
            deadlines.append(self.partial_since + self.limits.frame_timeout)
        if self.channel.negotiated is not None:
            deadlines.append(self.last_frame + self.limits.idle_timeout)
        when = min(d for d in deadlines if d is not None) if any(
            d is not None for d in deadlines
        ) else None
        if when == self.timer_at:
            return
        if self.timer is not None:
            self.timer.cancel()
        self.timer_at = when
        self.timer = None if when is None else self.loop.call_at(when, self.on_timer)

    def on_timer(self) -> None:
        self.timer = self.timer_at = None
        if self.closed:
            return
        now = self.loop.time()
        if self.partial_since is not None and now >= self.partial_since + self.limits.frame_timeout:
            # Slowloris: a frame that does not complete in time. Nothing is sent — the
            # peer's half of the stream is stuck mid-frame; ours simply ends.
            self.abort("frame not completed in time")
            return
        idle_at = self.last_frame + self.limits.idle_timeout
        if self.channel.negotiated is not None and now >= idle_at:
            self.last_frame = now
            self.channel.end("idle")
        self.channel.tick(now)
        if not self.flush():
            self.arm()

    # ------------------------------------------------------------------ closing

    def close_soon(self, reason: str) -> None:
        """Flush what is queued (the 0x00FF, a SESSION_END_ACK), then close; abort after
        ``close_grace`` whatever the peer does (PROFILE §2: closed within 1 s)."""
        if self.closed:
            return
        self.closed = True
        log.debug("closing: %s", reason)
        self.stop_timer()
        self.transport.close()  # flushes the buffer, then closes
        self.loop.call_later(self.limits.close_grace, self.transport.abort)

    def abort(self, reason: str) -> None:
        if not self.closed:
            log.debug("aborting: %s", reason)
        self.closed = True
        self.stop_timer()
        self.transport.abort()

    def stop_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = self.timer_at = None

    async def teardown(self) -> None:
        if not self.closed:
            self.close_soon("peer closed")
        for task in list(self.tasks):
            task.cancel()
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.wait_closed()


def _small_id_read(payload: Any) -> bool:
    ids = payload.get("ids")
    return isinstance(ids, list) and len(ids) <= INLINE_READ_IDS and len(payload) == 1


async def serve(
    memory: Memory, host: str | None = DEFAULT_HOST, port: int = DEFAULT_PORT, *,
    unix: str | Path | None = None, **options: Any,
) -> NodeServer:
    """Start a :class:`NodeServer` and return it (listening)."""
    server = NodeServer(memory, **options)
    await server.start(host, port, unix=unix)
    return server
