"""``Link``: one client connection — socket, Channel (ai role), replies matched by ref_seq.

The ``Client`` owns at most one live Link and replaces it when it dies (reconnect); a Link
never reconnects by itself. Replies are matched to requests by ``ref_seq``; an ERROR
answering a request fails that request's future with the matching ``AmcpError``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any, cast

from amcp.errors import (
    AmcpError,
    ConflictError,
    ForbiddenError,
    GoneError,
    NotFoundError,
    PreconditionFailed,
    RemoteProtocolError,
    Status,
    UnauthorizedError,
    ValidationError,
)
from amcp.node.channel import Channel
from amcp.session import (
    CloseConnection,
    ErrorReceived,
    Event,
    HandshakeComplete,
    HandshakeRejected,
    PeerViolation,
    Request,
    Response,
    Session,
    SessionState,
    Violation,
)
from amcp.wire import Flag, Frame, MsgType

log = logging.getLogger("amcp.node.client")
M = MsgType


class NodeUnavailable(AmcpError):
    """The node could not be reached, or did not answer in time."""

    status = Status.UNAVAILABLE


_BY_STATUS: dict[int, type[AmcpError]] = {
    404: NotFoundError, 409: ConflictError, 410: GoneError, 412: PreconditionFailed,
    403: ForbiddenError, 401: UnauthorizedError,
}


def error_for(status: int | None, reason: str) -> AmcpError:
    """The local exception for an ERROR the node sent (same status, same reason)."""
    if status == Status.BAD_REQUEST:
        return ValidationError("", reason)
    cls = _BY_STATUS.get(status or 0)
    if cls is not None:
        return cls(reason)
    try:
        code = Status(status or 0)
    except ValueError:
        code = Status.INTERNAL
    return AmcpError(reason, status=code)


class Link(asyncio.Protocol):
    """One connection's protocol driver on the client side (an asyncio Protocol: replies
    are matched and their futures resolved straight from ``data_received``)."""

    def __init__(self, session: Session, *, write_timeout: float = 60.0) -> None:
        self.loop = asyncio.get_running_loop()
        self.channel = Channel(session)
        self.transport: asyncio.Transport | None = None
        self.write_timeout = write_timeout
        self.pending: dict[int, asyncio.Future[Frame]] = {}
        self.handshake: asyncio.Future[None] = self.loop.create_future()
        self.closed: asyncio.Future[str] = self.loop.create_future()
        self.last_sent = self.loop.time()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        # Request deadlines (seq -> (when, timeout)), swept by one timer: cheaper than a
        # wait_for (a Task-side timer, a waiter future and callbacks) per request.
        self._deadlines: dict[int, tuple[float, float]] = {}
        self._expiry: asyncio.TimerHandle | None = None
        self._expiry_at: float | None = None
        self._write_timer: asyncio.TimerHandle | None = None
        self._lost: asyncio.Future[None] = self.loop.create_future()

    @property
    def session(self) -> Session:
        return self.channel.session

    @property
    def alive(self) -> bool:
        return not self.closed.done()

    @property
    def state(self) -> SessionState:
        return self.channel.session.state

    # ------------------------------------------------------------------ transport callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = cast(asyncio.Transport, transport)
        self.start()

    def start(self) -> None:
        self.channel.start()
        self.flush()
        self.arm()

    def data_received(self, data: bytes) -> None:
        if not self.alive:
            return
        self.on_events(self.channel.feed(data))
        self.flush()
        self.arm()

    def eof_received(self) -> bool:
        self.close("connection closed by the node")
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.close(f"connection lost: {exc}" if exc else "connection closed by the node")
        if not self._lost.done():
            self._lost.set_result(None)

    def pause_writing(self) -> None:
        # The node does not read what we send: give it write_timeout, then give up on it
        # (the next request reconnects) rather than buffer requests without bound.
        if self._write_timer is None and self.alive:
            self._write_timer = self.loop.call_later(
                self.write_timeout, self.close, "the node does not read"
            )

    def resume_writing(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None

    # ------------------------------------------------------------------ sending

    def flush(self) -> None:
        channel = self.channel
        if channel.pending_output:
            self.write(channel.take_output())
        if channel.closing is not None:
            self.close(channel.closing)

    def submit(
        self, msg_type: MsgType, payload: Mapping[str, Any], flags: Flag = Flag.NONE, *,
        timeout: float | None = None,
    ) -> tuple[asyncio.Future[Frame], bytes]:
        """Send a request; returns the future of its answer and the exact wire bytes (for
        retransmission: the same SEQUENCE_NUMBER lets the node drop or re-ack it).

        With ``timeout`` the future fails with NodeUnavailable when no answer came in time.
        """
        if not self.alive:
            raise NodeUnavailable("the connection is closed")
        if self.channel.pending_output:
            self.flush()
        frame = self.channel.send(msg_type, payload, flags)
        data = self.channel.take_output()
        future: asyncio.Future[Frame] = self.loop.create_future()
        seq = frame.seq
        self.pending[seq] = future
        if timeout is not None:
            when = self.loop.time() + timeout
            self._deadlines[seq] = (when, timeout)
            if self._expiry_at is None or when < self._expiry_at:
                self._arm_expiry(when)
        self.write(data)
        self.arm()
        return future, data

    def send_only(self, msg_type: MsgType, payload: Mapping[str, Any]) -> None:
        """A message that expects no answer (SYNC_ACK closing our pull stream)."""
        self.channel.send(msg_type, payload)
        self.flush()
        self.arm()

    def write(self, data: bytes) -> None:
        if self.alive and self.transport is not None:
            self.transport.write(data)
            self.last_sent = self.loop.time()

    # ------------------------------------------------------------------ receiving

    def on_events(self, events: list[Event]) -> None:
        for event in events:
            kind = type(event)
            if kind is Response:
                assert isinstance(event, Response)
                self._resolve(event.frame.payload.get("ref_seq"), event.frame, None)
            elif kind is ErrorReceived:
                assert isinstance(event, ErrorReceived)
                self._resolve(event.ref_seq, None, error_for(event.status, event.reason))
            elif kind is Request:
                assert isinstance(event, Request)
                self._answer_node(event.frame)
            elif kind is HandshakeComplete:
                if not self.handshake.done():
                    self.handshake.set_result(None)
            elif kind is HandshakeRejected:
                assert isinstance(event, HandshakeRejected)
                self._fail_handshake(error_for(event.status, event.reason))
            elif kind is PeerViolation:
                assert isinstance(event, PeerViolation)
                self._fail_all(RemoteProtocolError(f"the node reported a violation: "
                                                   f"{event.reason} ({event.status})"))
            elif kind is Violation:
                assert isinstance(event, Violation)
                self._fail_all(RemoteProtocolError(f"the node violated the protocol: "
                                                   f"{event.reason}", status=event.status))
            elif kind is CloseConnection:
                assert isinstance(event, CloseConnection)
                self.close(event.reason)

    def _answer_node(self, frame: Frame) -> None:
        if frame.msg_type is M.HEALTH_CHECK:
            self.channel.reply(frame, M.HEALTH_RESPONSE, {
                "state": self.state.value, "hlc": frame.clock,
                "store": {"records": 0, "bytes": 0}, "uptime_s": 0.0,
            })
        else:  # a client serves no memory; the node never asks it to
            self.channel.reply_error(frame, Status.FORBIDDEN, "this peer serves no memory")

    def _resolve(self, ref: Any, frame: Frame | None, error: AmcpError | None) -> None:
        if isinstance(ref, int):
            future = self.pending.pop(ref, None)
            if self._deadlines:
                self._deadlines.pop(ref, None)
        else:
            future = None
        if future is None or future.done():
            if error is not None and ref in (0, None):
                log.warning("node error: %s", error)
            return
        if error is not None:
            future.set_exception(error)
        else:
            assert frame is not None
            future.set_result(frame)

    def _fail_handshake(self, error: AmcpError) -> None:
        if not self.handshake.done():
            self.handshake.set_exception(error)

    def _fail_all(self, error: AmcpError) -> None:
        self._fail_handshake(error)
        for future in self.pending.values():
            if not future.done():
                future.set_exception(error)
        self.pending.clear()
        self._deadlines.clear()

    # ------------------------------------------------------------------ timers

    def arm(self) -> None:
        """Keep the session timer at or before the session's next deadline. Lazy, like the
        server's: a deadline that moved later leaves the timer where it is (it fires early,
        finds nothing due and re-arms), so a request costs a comparison, not a TimerHandle.
        """
        when = self.channel.session.next_deadline() if self.alive else None
        current = self._timer_at
        if when is None or (current is not None and current <= when):
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = when
        self._timer = self.loop.call_at(when, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = self._timer_at = None
        if not self.alive:
            return
        self.on_events(self.channel.tick(self.loop.time()))
        self.flush()
        self.arm()

    def _arm_expiry(self, when: float) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
        self._expiry_at = when
        self._expiry = self.loop.call_at(when, self._expire)

    def _expire(self) -> None:
        """Fail every request whose deadline passed; re-arm for the earliest one left."""
        self._expiry = self._expiry_at = None
        now = self.loop.time()
        due = [seq for seq, (when, _) in self._deadlines.items() if when <= now]
        for seq in due:
            _, timeout = self._deadlines.pop(seq)
            future = self.pending.pop(seq, None)
            if future is not None and not future.done():
                future.set_exception(NodeUnavailable(f"no answer from the node in {timeout} s"))
        if self._deadlines:
            self._arm_expiry(min(when for when, _ in self._deadlines.values()))

    # ------------------------------------------------------------------ closing

    def close(self, reason: str) -> None:
        if self.closed.done():
            return
        self.closed.set_result(reason)
        self._fail_all(NodeUnavailable(f"connection closed: {reason}"))
        for handle in (self._timer, self._expiry, self._write_timer):
            if handle is not None:
                handle.cancel()
        self._timer = self._expiry = self._write_timer = None
        transport = self.transport
        if transport is not None:
            transport.close()  # flushes queued bytes (a SESSION_END, a 0x00FF)
            if not self._lost.done():
                self.loop.call_later(1.0, transport.abort)

    async def aclose(self) -> None:
        self.close("closed by the client")
        if self.transport is not None:
            await asyncio.shield(self._lost)
