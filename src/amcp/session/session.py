"""``Session``: one AMCP connection's protocol state, sans-IO (PROFILE §1-§4, §8).

The driver feeds decoded frames to :meth:`Session.receive` and acts on the events it gets
back; the application answers ``Request`` events with :meth:`Session.reply`; timers run
through :meth:`Session.tick` with a time the driver supplies. Nothing here reads a socket
or the real clock — that is what makes every path testable with plain objects.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from amcp.errors import LocalProtocolError, Status
from amcp.session import events as ev
from amcp.session.exchange import Exchange
from amcp.session.handshake import Handshake
from amcp.session.hello import Hello, LocalNode, Negotiated
from amcp.session.machine import Machine
from amcp.session.outbox import DEFAULT_REACK_CACHE, Outbox
from amcp.session.policy import Principal
from amcp.session.receive import Receiver
from amcp.session.state import (
    SEND,
    SEND_REFUSALS,
    TIMER,
    TO_CLIENT,
    TO_NODE,
    Action,
    Input,
    Role,
    SessionState,
    Timeouts,
    Transition,
)
from amcp.session.support import CausalClock, deadline
from amcp.session.trust import TrustConfig
from amcp.wire.constants import Flag, MsgType
from amcp.wire.frame import Frame

S = SessionState
M = MsgType
# 0 in ref_seq means "no frame": sequence numbers start at 1, so 0 can never name a real one.
NO_FRAME = 0


class Session:
    """The protocol state of one connection, for either side (``role``).

    Composed of parts that each own their fields: the :class:`Outbox` stamps our frames,
    the :class:`Handshake` runs the hello exchange, the :class:`Exchange` tracks the cold
    boot and sync stream, the :class:`Machine` holds the state, and the :class:`Receiver`
    handles incoming frames. This class is the send side, the timers and the public face.
    """

    def __init__(
        self,
        role: Role,
        local: LocalNode,
        *,
        clock: CausalClock,
        monotonic: Callable[[], float],
        trust: TrustConfig | None = None,
        timeouts: Timeouts | None = None,
        random_bytes: Callable[[int], bytes] = os.urandom,
        new_session_id: Callable[[], bytes] | None = None,
        reack_cache: int = DEFAULT_REACK_CACHE,
    ) -> None:
        self.role = role
        self.local = local
        self._mono = monotonic
        self._timeouts = timeouts or Timeouts()
        self._new_session_id = new_session_id or (lambda: uuid.uuid4().bytes)
        self._outbox = Outbox(clock, reack_cache=reack_cache)
        self._handshake = Handshake(
            local, trust or TrustConfig(), self._outbox, random_bytes=random_bytes
        )
        self._exchange = Exchange()
        self._machine = Machine(self._outbox, monotonic)
        # What we may not send: the other role's messages (ai→db flows one way).
        self._not_ours = TO_NODE if role is Role.NODE else TO_CLIENT
        # What a send under an action checks or fills in first, and opens or closes after
        # (per action, like the receive handlers; most actions have neither).
        self._before: dict[Action, Callable[[dict[str, Any], int | None], None]] = {
            Action.COLD_BOOT: self._before_cold_boot,
            Action.COLD_BOOT_DONE: self._before_cold_boot_done,
        }
        exchange = self._exchange
        self._after: dict[Action, Callable[[Frame], None]] = {
            Action.COLD_BOOT: lambda f: exchange.open_cold_boot(f.seq, by_peer=False),
            Action.COLD_BOOT_DONE: lambda _: exchange.close_cold_boot(),
            Action.COLD_BOOT_FAILED: lambda _: exchange.close_cold_boot(),
            Action.SYNC_OPEN: lambda f: exchange.open_sync(f.seq, self._mono(), by_peer=False),
            Action.SYNC_BATCH: lambda f: exchange.sync_batch(f.msg_type, f.seq, self._mono()),
            Action.SYNC_CLOSE: lambda _: exchange.close_sync(),
            Action.SYNC_FAILED: lambda _: exchange.close_sync(),
        }
        self._receiver = Receiver(
            role,
            self._machine,
            self._outbox,
            self._handshake,
            self._exchange,
            clock=clock,
            monotonic=monotonic,
        )

    # ------------------------------------------------------------------------ state

    @property
    def state(self) -> SessionState:
        return self._machine.state

    @property
    def session_id(self) -> bytes:
        return self._outbox.session_id

    @property
    def last_seq(self) -> int:
        """The SEQUENCE_NUMBER of the latest frame we stamped (0 before the first)."""
        return self._outbox.seq

    @property
    def peer(self) -> Hello | None:
        return self._handshake.peer

    @property
    def negotiated(self) -> Negotiated | None:
        """Set once both capability responses are exchanged and verified."""
        return self._handshake.negotiated

    @property
    def principal(self) -> Principal | None:
        """The peer as the access policy sees it, once its hello has arrived."""
        peer = self._handshake.peer
        return None if peer is None else Principal(peer.public_key, peer.bearer)

    def receive(self, frame: Frame) -> list[ev.Event]:
        """Process one decoded frame. Never raises for anything the peer sends."""
        return self._receiver.receive(frame)

    # ------------------------------------------------------------------------- send

    def consume_seqs(self, count: int) -> None:
        """The frame just stamped went out as ``count + 1`` fragments (the codec split it):
        its extra fragments took the next ``count`` SEQUENCE_NUMBERs, so skip them."""
        self._outbox.skip(count)

    def start(self) -> Frame:
        """Our CAPABILITY_HELLO. Call it as soon as the connection is up, on both sides (T1-02)."""
        _, nxt = self._check_send(M.CAPABILITY_HELLO, M.CAPABILITY_HELLO)
        frame = self._handshake.own_hello()
        self._machine.enter(nxt)
        return frame

    def send(
        self,
        msg_type: MsgType,
        payload: Mapping[str, Any] | None = None,
        *,
        flags: Flag = Flag.NONE,
    ) -> Frame:
        """A message that answers nothing (a request, SYNC_PUSH, SESSION_END...)."""
        return self._send(msg_type, dict(payload or {}), flags, None)

    def reply(
        self,
        request: Frame,
        msg_type: MsgType,
        payload: Mapping[str, Any] | None = None,
        *,
        status: Status | int = Status.OK,
        flags: Flag = Flag.NONE,
    ) -> Frame:
        """Answer ``request``: ``ref_seq`` and ``status`` are put in the payload (PROFILE §1).

        Answering COLD_BOOT_REQUEST with COLD_BOOT_RESPONSE assigns the session id (a fresh
        UUIDv4) and adds it to the payload as ``session_id``.
        """
        body = {**(payload or {}), "ref_seq": request.seq, "status": int(status)}
        return self._send(msg_type, body, flags, request.seq)

    def reply_error(self, request: Frame, status: Status | int, reason: str) -> Frame:
        """ERROR 0x00FE ``{status, reason, ref_seq}``: the session continues."""
        return self.reply(request, M.ERROR, {"reason": reason}, status=status)

    def end(self, reason: str | None = None, summary: str | None = None) -> Frame:
        """SESSION_END: TERMINATING until the peer's SESSION_END_ACK (or the timer)."""
        payload = {k: v for k, v in (("reason", reason), ("summary", summary)) if v is not None}
        return self.send(M.SESSION_END, payload)

    def fail(self, status: Status, reason: str, ref_seq: int | None = None) -> list[ev.Event]:
        """Report a violation the driver or codec found (bad magic, oversize, bad flags...)."""
        return self._machine.violation(status, reason, ref_seq)

    def _check_send(self, inp: Input, mt: MsgType) -> Transition:
        state = self._machine.state
        row = SEND.get((state, inp))
        if row is None:
            detail = "" if inp is mt else f" ({inp.value})"
            raise LocalProtocolError(
                f"cannot send {mt.name} in state {state.name}{detail}",
                status=SEND_REFUSALS.get(inp, Status.STATE_VIOLATION),
            )
        if mt in self._not_ours:
            raise LocalProtocolError(f"a {self.role.value} does not send {mt.name}")
        return row

    def _send(
        self, mt: MsgType, payload: dict[str, Any], flags: Flag, ref_seq: int | None
    ) -> Frame:
        action, nxt = self._check_send(self._exchange.input_for(mt, payload, sending=True), mt)
        before = self._before.get(action)
        if before is not None:
            before(payload, ref_seq)
        frame = (
            self._outbox.stamp(mt, payload, flags)
            if ref_seq is None
            else self._outbox.reply(ref_seq, mt, payload, flags)
        )
        after = self._after.get(action)
        if after is not None:
            after(frame)
        self._machine.enter(nxt)
        return frame

    def _before_cold_boot(self, payload: dict[str, Any], ref_seq: int | None) -> None:
        if self._handshake.negotiated is None:
            raise LocalProtocolError("COLD_BOOT_REQUEST before the handshake completed")

    def _before_cold_boot_done(self, payload: dict[str, Any], ref_seq: int | None) -> None:
        if ref_seq is None or ref_seq != self._exchange.cold_boot_seq:
            raise LocalProtocolError("COLD_BOOT_RESPONSE must answer the COLD_BOOT_REQUEST")
        self._outbox.session_id = self._new_session_id()
        payload["session_id"] = str(uuid.UUID(bytes=self._outbox.session_id))

    # ------------------------------------------------------------------------ timers

    def next_deadline(self) -> float | None:
        """When :meth:`tick` next has something to do (monotonic seconds), or None."""
        machine = self._machine
        return deadline(
            machine.state,
            self._timeouts,
            entered_at=machine.entered_at,
            active_since=machine.active_since,
            sync_started=self._exchange.sync_started,
        )

    def tick(self, now: float) -> list[ev.Event]:
        """Fire every deadline at or before ``now`` (several, if the driver was late)."""
        events: list[ev.Event] = []
        while (deadline := self.next_deadline()) is not None and now >= deadline:
            events += self._on_timer()
        return events

    def _on_timer(self) -> list[ev.Event]:
        state = self._machine.state
        action, nxt = TIMER[state]
        events: list[ev.Event] = []
        if action is Action.EXPIRE:
            reason = f"{state.name} timed out"
            events.append(ev.SessionTimedOut(state))
            # 408 SESSION_TIMEOUT answers no frame (ref_seq 0). Not before our hello: T1-02.
            if self._handshake.hello_sent and not self._machine.violated:
                payload = {"status": int(Status.TIMEOUT), "reason": reason, "ref_seq": NO_FRAME}
                events.append(ev.SendFrame(self._outbox.stamp(M.ERROR, payload)))
            events.append(ev.CloseConnection(reason))
        elif action is Action.SUSPEND:
            events.append(ev.SessionSuspended())
        elif action is Action.SYNC_EXPIRE:
            self._exchange.close_sync()
            events.append(ev.SyncEnded(timed_out=True))
        else:
            events.append(ev.CloseConnection("no SESSION_END_ACK in time"))
        self._machine.enter(nxt)
        return events
