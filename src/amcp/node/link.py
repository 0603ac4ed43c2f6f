"""``Link``: one client connection — socket, Channel (ai role), replies matched by ref_seq.

The ``Client`` owns at most one live Link and replaces it when it dies (reconnect); a Link
never reconnects by itself. Replies are matched to requests by ``ref_seq``; an ERROR
answering a request fails that request's future with the matching ``AmcpError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

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
READ_CHUNK = 256 * 1024


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


class Link:
    """One connection's protocol driver on the client side."""

    def __init__(
        self,
        session: Session,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self.channel = Channel(session)
        self.reader = reader
        self.writer = writer
        self.pending: dict[int, asyncio.Future[Frame]] = {}
        self.handshake: asyncio.Future[None] = self.loop.create_future()
        self.closed: asyncio.Future[str] = self.loop.create_future()
        self.last_sent = self.loop.time()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        self._reader_task: asyncio.Task[None] | None = None

    @property
    def session(self) -> Session:
        return self.channel.session

    @property
    def alive(self) -> bool:
        return not self.closed.done()

    @property
    def state(self) -> SessionState:
        return self.channel.session.state

    def start(self) -> None:
        self.channel.start()
        self.flush()
        self._reader_task = self.loop.create_task(self._read_loop())
        self.arm()

    # ------------------------------------------------------------------ sending

    def flush(self) -> None:
        data = self.channel.take_output()
        if data and self.alive:
            self.writer.write(data)
            self.last_sent = self.loop.time()
        if self.channel.closing is not None:
            self.close(self.channel.closing)

    def submit(
        self, msg_type: MsgType, payload: Mapping[str, Any], flags: Flag = Flag.NONE
    ) -> tuple[asyncio.Future[Frame], bytes]:
        """Send a request; returns the future of its answer and the exact wire bytes (for
        retransmission: the same SEQUENCE_NUMBER lets the node drop or re-ack it)."""
        if not self.alive:
            raise NodeUnavailable("the connection is closed")
        self.flush()
        frame = self.channel.send(msg_type, payload, flags)
        data = self.channel.take_output()
        future: asyncio.Future[Frame] = self.loop.create_future()
        self.pending[frame.seq] = future
        self.write(data)
        self.arm()
        return future, data

    def send_only(self, msg_type: MsgType, payload: Mapping[str, Any]) -> None:
        """A message that expects no answer (SYNC_ACK closing our pull stream)."""
        self.channel.send(msg_type, payload)
        self.flush()
        self.arm()

    def write(self, data: bytes) -> None:
        if self.alive:
            self.writer.write(data)
            self.last_sent = self.loop.time()

    async def drain(self, timeout: float) -> None:
        try:
            await asyncio.wait_for(self.writer.drain(), timeout)
        except (TimeoutError, ConnectionError, OSError):
            self.close("the node does not read")

    # ------------------------------------------------------------------ receiving

    async def _read_loop(self) -> None:
        try:
            while self.alive:
                data = await self.reader.read(READ_CHUNK)
                if not data:
                    break
                self.on_events(self.channel.feed(data))
                self.flush()
                self.arm()
        except (ConnectionError, OSError) as exc:
            self.close(f"connection lost: {exc}")
        finally:
            self.close("connection closed by the node")

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
        future = self.pending.pop(ref, None) if isinstance(ref, int) else None
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

    # ------------------------------------------------------------------ timers

    def arm(self) -> None:
        when = self.channel.session.next_deadline() if self.alive else None
        if when == self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = when
        self._timer = None if when is None else self.loop.call_at(when, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = self._timer_at = None
        if not self.alive:
            return
        self.on_events(self.channel.tick(self.loop.time()))
        self.flush()
        self.arm()

    # ------------------------------------------------------------------ closing

    def close(self, reason: str) -> None:
        if self.closed.done():
            return
        self.closed.set_result(reason)
        self._fail_all(NodeUnavailable(f"connection closed: {reason}"))
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.writer.transport.close()  # flushes queued bytes (a SESSION_END, a 0x00FF)
        self.loop.call_later(1.0, self.writer.transport.abort)

    async def aclose(self) -> None:
        self.close("closed by the client")
        task = self._reader_task
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.wait_closed()
