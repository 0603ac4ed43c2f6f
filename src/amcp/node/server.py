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
import functools
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar, cast

from cryptography import x509

from amcp.errors import AmcpError, IntegrityError, Status
from amcp.memory import Memory
from amcp.node.admission import Admission
from amcp.node.channel import Channel
from amcp.node.config import DEFAULT_HOST, DEFAULT_PORT, Limits, is_local_address, local_node
from amcp.node.health import (
    Fetch,
    Relay,
    health_payload,
    health_reads,
    read_fetching_back,
    relayed_answer,
)
from amcp.node.service import WRITES, NodeService, Peer, Reply, small_id_read
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
    TrustConfig,
    TrustLevel,
)
from amcp.sync.replica import Replica
from amcp.wire import Frame, MsgType

log = logging.getLogger("amcp.node")
T = TypeVar("T")
M = MsgType
# Enum members as globals on the per-request path: EnumType.__getattr__ makes `M.X` a slow
# lookup in Python 3.11 (see amcp.session.session).
_LATER: set[asyncio.Task[None]] = set()
_HEALTH_CHECK, _SESSION_BEGIN, _MEMORY_READ = M.HEALTH_CHECK, M.SESSION_BEGIN, M.MEMORY_READ
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
        # Replication state shared with the replicator (amcp.node.replicator.attach) and a
        # hook it sets to hear of every acknowledged write at once (the push trigger).
        self.replica: Replica | None = None
        self.after_write: Callable[[], None] | None = None
        # Tier 0 (amcp.node.tiering, set by attach): fetch evicted ids back (then serve
        # them: node.health.Fetch), and the tier rounds' report for HEALTH_RESPONSE.
        self.fetch_back: Fetch | None = None
        self.tier_status: Callable[[], dict[str, Any]] | None = None
        self.relay_probe: Relay | None = None  # SWIM's indirect ping, for a member asking us
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
        lim = self.limits
        self.admission = Admission(
            min(lim.max_unauthenticated, lim.max_connections), lim.unauthenticated_buffer_bytes
        )
        self._maintenance: asyncio.Task[None] | None = None
        # Every socket read lands here (get_buffer); see _Connection.buffer_updated.
        self._read_buffer = memoryview(bytearray(self.limits.read_chunk))

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
        loop = asyncio.get_running_loop()
        if host is not None:
            trust = is_local_address(host) if self._trust_local is None else self._trust_local
            self._servers.append(await loop.create_server(
                functools.partial(_Connection, self, trust), host, port, reuse_address=True,
            ))
        if unix is not None:
            trust = True if self._trust_local is None else self._trust_local
            path = Path(unix)
            with contextlib.suppress(FileNotFoundError):
                if path.is_socket():
                    path.unlink()
            self._servers.append(await loop.create_unix_server(
                functools.partial(_Connection, self, trust), str(path),
            ))
            os.chmod(path, 0o600)  # the unix socket is the owner's: local trust is granted
        if self._maintenance is None:
            self._maintenance = loop.create_task(self._maintain_every())

    async def _maintain_every(self) -> None:
        """``Memory.maintain`` every ``limits.maintenance_interval`` seconds, on the write
        thread (writes stay serialised in one place); a failed round is logged and retried
        next time."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.limits.maintenance_interval)
            try:
                await loop.run_in_executor(self._write_pool, self.memory.maintain)
            except Exception:
                log.warning("maintenance round failed", exc_info=True)

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

    async def run_read(self, fn: Callable[[], T]) -> T:
        """``fn`` on the read pool (the replicator's Memory reads)."""
        return await asyncio.get_running_loop().run_in_executor(self._read_pool, fn)

    async def run_write(self, fn: Callable[[], T]) -> T:
        """``fn`` on the write thread, serialised with every other write of this node."""
        return await asyncio.get_running_loop().run_in_executor(self._write_pool, fn)

    async def serve_forever(self) -> None:
        await asyncio.gather(*(s.serve_forever() for s in self._servers))

    async def close(self) -> None:
        if self._maintenance is not None:
            self._maintenance.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._maintenance
            self._maintenance = None
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

    def uptime(self) -> float:
        return time.time() - self.started_at


class _Connection(asyncio.BufferedProtocol):
    """One peer, driven by transport callbacks (no reader task, no per-request Task for the
    inline path). All methods run on the event loop; Memory calls go to the pools."""

    def __init__(self, server: NodeServer, trust_local: bool) -> None:
        self.server = server
        self.limits = server.limits
        self.loop = asyncio.get_running_loop()
        session = Session(
            Role.NODE, server.local, clock=server.memory.clock, monotonic=self.loop.time,
            trust=TrustConfig(trust_local=trust_local, anchors=server.anchors),
            timeouts=self.limits.timeouts,
        )
        self.channel = Channel(
            session, max_payload=server.local.max_payload,
            handshake_max_payload=self.limits.handshake_max_payload,
        )
        self.transport: asyncio.Transport | None = None
        self.peer: Peer | None = None
        self.inflight = 0
        self.timer: asyncio.TimerHandle | None = None
        self.timer_at: float | None = None
        self.write_timer: asyncio.TimerHandle | None = None  # set while the peer is not reading
        now = self.loop.time()
        self.partial_since: float | None = None
        self.last_frame = now
        self.closed = False
        self.lost = False

    # ------------------------------------------------------------------ transport callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = stream = cast(asyncio.Transport, transport)
        server = self.server
        full = len(server._conns) >= self.limits.max_connections
        if full and not server.admission.waiting:
            # Every slot is an authenticated session's: close before a byte (nothing to
            # answer yet, the peer has not said hello).
            server.refused += 1
            self.closed = True
            stream.abort()
            return
        server.admission.admit(self, node_full=full)  # may evict the longest-waiting one
        server._conns.add(self)
        limits = self.limits
        stream.set_write_buffer_limits(limits.write_high_water, limits.write_low_water)
        self.channel.start()
        self.flush()
        self.arm()

    def get_buffer(self, sizehint: int) -> memoryview:
        # One buffer per server, never more than read_chunk: the transport copies into it
        # and buffer_updated() takes the bytes out before the loop reads any other socket.
        return self.server._read_buffer

    def buffer_updated(self, nbytes: int) -> None:
        if self.closed:
            return
        self.received(bytes(self.server._read_buffer[:nbytes]))

    def eof_received(self) -> bool:
        self.close_soon("peer closed")
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.server._conns.discard(self)
        self.server.admission.gone(self)
        if not self.closed:
            self.closed = True
        self.stop_timer()
        self._stop_write_timer()

    def pause_writing(self) -> None:
        # Backpressure: the peer does not read its replies fast enough. Stop reading its
        # requests until the buffer drains below low water; cut it off if that takes longer
        # than write_timeout (a peer that never reads cannot make the node buffer forever).
        if self.closed or self.transport is None:
            return
        self.transport.pause_reading()
        if self.write_timer is None:
            self.write_timer = self.loop.call_later(
                self.limits.write_timeout, self.abort, "peer does not read (write buffer full)"
            )

    def resume_writing(self) -> None:
        self._stop_write_timer()
        if not self.closed and self.transport is not None:
            self.transport.resume_reading()

    def _stop_write_timer(self) -> None:
        if self.write_timer is not None:
            self.write_timer.cancel()
            self.write_timer = None

    # ------------------------------------------------------------------ input

    def received(self, data: bytes) -> None:
        channel = self.channel
        events = channel.feed(data)
        if self in self.server.admission and not self._admitted():
            return
        now = self.loop.time()
        if events:
            self.last_frame = now
            self.partial_since = now if channel.buffered else None
            self.on_events(events)
        elif self.partial_since is None and channel.buffered:
            self.partial_since = now
        if not self.flush():
            self.arm()

    def _admitted(self) -> bool:
        """Move an authenticated connection out of the waiting room, or account what an
        unauthenticated one buffers; False when that broke the aggregate cap (aborted)."""
        admission = self.server.admission
        if self.channel.negotiated is not None:
            admission.authenticated(self)
            return True
        if admission.holds(self, self.channel.buffered):
            return True
        self.abort("unauthenticated connections hold too much buffered data")
        return False

    def on_events(self, events: list[Event]) -> None:
        # At most INLINE_PER_CHUNK small reads are answered inline per socket read, so a
        # pipelined flood goes to the pool (and its in-flight cap) instead of stalling
        # every other connection on the loop.
        inline = INLINE_PER_CHUNK if self.server.inline_reads else 0
        for event in events:
            kind = type(event)
            if kind is Request:
                assert isinstance(event, Request)
                inline = self.dispatch(event.frame, inline)
            elif kind is HelloReceived:
                assert isinstance(event, HelloReceived)
                principal = self.channel.session.principal
                assert principal is not None
                self.peer = Peer(principal, str(event.hello.node_address))

    def flush(self) -> bool:
        """Write what the channel produced; True when the connection is now closing.

        No drain per frame: the transport writes at once when the socket accepts it and
        buffers the rest; pause_writing() above high water is the backpressure."""
        channel = self.channel
        if channel.pending_output and not self.closed:
            assert self.transport is not None
            self.transport.write(channel.take_output())
        if channel.closing is not None and not self.closed:
            self.close_soon(channel.closing)
            return True
        return False

    # ------------------------------------------------------------------ requests

    def dispatch(self, frame: Frame, inline: int) -> int:
        """Answer or schedule one request; returns the inline budget left."""
        mt = frame.msg_type
        if self.inflight >= self.limits.max_inflight:
            self.channel.reply_error(frame, Status.TOO_MANY_REQUESTS, "too many requests in flight")
            return inline
        if mt is _HEALTH_CHECK:
            self.inflight += 1
            wants = isinstance(frame.payload, dict) and bool(frame.payload.get("tiers"))
            self.submit(self.server._read_pool,
                        functools.partial(health_reads, self.server.memory, wants),
                        frame, self.health)
            return inline
        peer = self.peer
        assert peer is not None  # requests only arrive after the hello
        if mt is _SESSION_BEGIN or (
            inline > 0 and mt is _MEMORY_READ and small_id_read(frame.payload)
        ):
            result = self.run_inline(frame, peer)
            if not self.fetch_then_answer(frame, result):
                self.answer(frame, result)
            return inline - 1
        self.inflight += 1
        server = self.server
        pool = server._write_pool if mt in WRITES else server._read_pool
        self.submit(pool, functools.partial(server.service.handle, frame, peer), frame,
                    self.served)
        return inline

    def run_inline(self, frame: Frame, peer: Peer) -> Reply | BaseException:
        try:
            return self.server.service.handle(frame, peer)
        except Exception as exc:  # noqa: BLE001 - turned into ERROR / violation in answer()
            return exc

    def submit(
        self, pool: ThreadPoolExecutor, fn: Callable[[], Any], frame: Frame,
        done: Callable[[Frame, Any], None],
    ) -> None:
        """Run ``fn`` on ``pool``; ``done(frame, result or exception)`` runs on the loop.

        A plain callback on the executor future instead of a Task per request: fewer loop
        iterations and allocations on the pooled path."""
        future = self.loop.run_in_executor(pool, fn)

        def finished(fut: asyncio.Future[Any]) -> None:
            self.inflight -= 1
            if self.closed:
                return
            if fut.cancelled():
                return
            exc = fut.exception()
            done(frame, exc if exc is not None else fut.result())

        future.add_done_callback(finished)

    def served(self, frame: Frame, result: Reply | BaseException) -> None:
        if self.fetch_then_answer(frame, result):
            return
        self.answer(frame, result)
        hook = self.server.after_write
        if hook is not None and frame.msg_type in WRITES and isinstance(result, Reply):
            hook()
        if not self.flush():
            self.arm()

    def fetch_then_answer(self, frame: Frame, result: Reply | BaseException) -> bool:
        """A read that met evicted records, on a node that can fetch them back: fetch
        (tier 1 first), read again and answer then, with ``network_fetches``. True: the
        answer is on its way from a task."""
        fetch, peer = self.server.fetch_back, self.peer
        if fetch is None or not isinstance(result, Reply) or frame.msg_type is not _MEMORY_READ:
            return False
        ids = result.payload.get("cache_miss")
        if not ids or peer is None:
            return False
        self.inflight += 1

        async def reread() -> Reply | BaseException:
            return await self.loop.run_in_executor(
                self.server._read_pool,
                functools.partial(self.server.service.handle, frame, peer))

        # Every id the read asked for is held from eviction until it is answered, not only
        # the evicted ones: a round in between (the restores put tier 0 over its limit) took
        # others the first look had found (T3-04 read-back).
        held = frame.payload.get("ids") or ids
        self.later(read_fetching_back(fetch, held, result, reread),
                   lambda again: self.answer(frame, again))
        return True

    def later(self, work: Awaitable[Any], answer: Callable[[Any], object]) -> None:
        """Answer from a task once ``work`` is done (counted in flight until then)."""
        async def run() -> None:
            try:
                got = await work
            finally:
                self.inflight -= 1
            if not self.closed:
                answer(got)
                if not self.flush():
                    self.arm()

        task = self.loop.create_task(run())
        _LATER.add(task)  # held until done: the loop keeps only a weak reference
        task.add_done_callback(_LATER.discard)

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

    def health(self, frame: Frame, facts: Any) -> None:
        if isinstance(facts, BaseException):
            self.answer(frame, facts)
        else:
            server = self.server
            payload = health_payload(self.channel.session, facts, server.memory.clock.send(),
                                     server.uptime(), server.tier_status, server.replica,
                                     frame.payload)
            relayed = relayed_answer(server.relay_probe, frame.payload, payload)
            if relayed is not None:  # an indirect probe: answered once it is done
                self.inflight += 1
                self.later(relayed, functools.partial(self.channel.reply, frame, M.HEALTH_RESPONSE))
                return
            self.channel.reply(frame, M.HEALTH_RESPONSE, payload)
        if not self.flush():
            self.arm()

    # ------------------------------------------------------------------ timers

    def arm(self) -> None:
        """Keep the one timer at or before the earliest of: session deadline, frame
        deadline, idle deadline.

        Lazy: a deadline that moved *later* (the idle deadline moves with every frame)
        does not re-schedule the timer; it fires early, finds nothing due and re-arms.
        So the hot path costs a comparison, not a TimerHandle per request."""
        if self.closed:
            return
        when = self.channel.session.next_deadline()
        if self.partial_since is not None:
            at = self.partial_since + self.limits.frame_timeout
            if when is None or at < when:
                when = at
        if self.channel.negotiated is not None:
            at = self.last_frame + self.limits.idle_timeout
            if when is None or at < when:
                when = at
        current = self.timer_at
        if when is None or (current is not None and current <= when):
            return
        if self.timer is not None:
            self.timer.cancel()
        self.timer_at = when
        self.timer = self.loop.call_at(when, self.on_timer)

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
        assert self.transport is not None
        self.transport.close()  # flushes the buffer, then closes
        if not self.lost:
            self.loop.call_later(self.limits.close_grace, self.transport.abort)

    def abort(self, reason: str) -> None:
        if not self.closed:
            log.debug("aborting: %s", reason)
        self.closed = True
        self.stop_timer()
        self._stop_write_timer()
        if self.transport is not None:
            self.transport.abort()

    def stop_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = self.timer_at = None


async def serve(
    memory: Memory, host: str | None = DEFAULT_HOST, port: int = DEFAULT_PORT, *,
    unix: str | Path | None = None, **options: Any,
) -> NodeServer:
    """Start a :class:`NodeServer` and return it (listening)."""
    server = NodeServer(memory, **options)
    await server.start(host, port, unix=unix)
    return server
