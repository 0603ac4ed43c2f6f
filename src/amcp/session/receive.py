"""The receive side of ``Session``: a decoded frame in, events out (PROFILE §1-§5, §8).

Each frame is classified once (its table input), looked up in ``RECEIVE`` (a missing row
is a violation), checked against the role and session id, its clock merged, and handed to
the row's action; the session then enters the row's next state, or ``ABORTED`` when the
handler refused. Nothing the peer sends makes :meth:`Receiver.receive` raise.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from amcp.errors import PreconditionFailed, RemoteProtocolError, Status
from amcp.session import events as ev
from amcp.session.exchange import Exchange
from amcp.session.handshake import Handshake
from amcp.session.machine import Machine
from amcp.session.outbox import Outbox
from amcp.session.state import (
    ABORTED,
    RECEIVE,
    SYNC_OPENERS,
    TO_CLIENT,
    TO_NODE,
    Action,
    Role,
    SessionState,
)
from amcp.session.support import Aborted, CausalClock, Outcome, payload_int
from amcp.wire.constants import Flag, MsgType
from amcp.wire.frame import ZERO_SESSION, Frame

S = SessionState
M = MsgType

# Rows whose frames are not merged into our clock: what TERMINATING drops, and a 0x00FF
# (the connection closes either way).
_CLOCK_UNTOUCHED = frozenset({Action.IGNORE, Action.PEER_VIOLATION})
_ASKED = TO_NODE | SYNC_OPENERS | {M.HEALTH_CHECK}
_REQUESTS_TO: dict[Role, frozenset[MsgType]] = {
    Role.NODE: _ASKED | {M.SESSION_BEGIN},
    Role.CLIENT: _ASKED,
}


class Receiver:
    """Turns one session's incoming frames into events."""

    def __init__(
        self,
        role: Role,
        machine: Machine,
        outbox: Outbox,
        handshake: Handshake,
        exchange: Exchange,
        *,
        clock: CausalClock,
        monotonic: Callable[[], float],
    ) -> None:
        self._role = role
        self._machine = machine
        self._outbox = outbox
        self._handshake = handshake
        self._exchange = exchange
        self._clock = clock
        self._mono = monotonic
        # What the peer may not send us: the other role's messages (ai→db flows one way).
        self._not_for_us = TO_CLIENT if role is Role.NODE else TO_NODE
        # Frames that ask us for something, so a clock too far ahead is answered 412: the
        # node's SESSION_BEGIN is an answer (to the client's), the client's a request.
        self._requests = _REQUESTS_TO[role]
        self._begin_answers = role is Role.CLIENT
        self._seq_in = 0  # the peer's highest SEQUENCE_NUMBER so far
        self._clock_ok = True  # whether the frame being handled merged into our clock
        self._handlers: dict[Action, Callable[[Frame], Outcome]] = {
            Action.HELLO: self._on_hello,
            Action.CAP_RESPONSE: handshake.on_cap_response,
            Action.COLD_BOOT: self._on_cold_boot,
            Action.COLD_BOOT_DONE: self._on_cold_boot_done,
            Action.COLD_BOOT_FAILED: self._on_cold_boot_failed,
            Action.REQUEST: self._on_request,
            Action.ANSWER: self._on_answer,
            Action.SYNC_OPEN: self._on_sync_open,
            Action.SYNC_BATCH: self._on_sync_batch,
            Action.SYNC_REFUSE: self._on_sync_refuse,
            Action.SYNC_CLOSE: self._on_sync_close,
            Action.SYNC_FAILED: self._on_sync_failed,
            Action.END: self._on_end,
            Action.END_CROSSED: self._on_end_crossed,
            Action.END_ACK: self._on_end_ack,
            Action.PEER_ERROR: self._on_peer_error,
            Action.PEER_VIOLATION: self._on_peer_violation,
            Action.IGNORE: self._on_ignore,
        }

    def receive(self, frame: Frame) -> list[ev.Event]:
        if frame.seq <= self._seq_in:
            return self._duplicate(frame)
        self._seq_in = frame.seq
        try:
            return self._dispatch(frame)
        except RemoteProtocolError as exc:
            return self._machine.violation(exc.status, exc.message, frame.seq)

    def _dispatch(self, frame: Frame) -> list[ev.Event]:
        state, mt = self._machine.state, frame.msg_type
        row = RECEIVE.get((state, self._exchange.input_for(mt, frame.payload, sending=False)))
        if row is None:
            # INIT/HANDSHAKING/COLD_BOOTING + MEMORY_* lands here too: status 702 tells the
            # peer a cold boot is required (T1-06 accepts 0x00FF or 702; this is both).
            raise RemoteProtocolError(
                f"{mt.name} is not allowed in state {state.name}", status=Status.STATE_VIOLATION
            )
        action, nxt = row
        if mt in self._not_for_us:
            raise RemoteProtocolError(f"{mt.name} is not sent to a {self._role.value}")
        session_id = self._outbox.session_id
        if session_id != ZERO_SESSION and frame.session_id not in (
            session_id,
            ZERO_SESSION,  # frames the peer sent before our COLD_BOOT_RESPONSE reached it
        ):
            raise RemoteProtocolError("SESSION_ID does not belong to this session")
        if action not in _CLOCK_UNTOUCHED:
            self._clock_ok, why = self._merge_clock(frame.clock)
            if not self._clock_ok and mt in self._requests:
                # PROFILE §5: not merged, answered 412; the request is not processed.
                return [
                    ev.ClockRejected(frame.seq, why),
                    ev.SendFrame(self._outbox.error(frame, Status.PRECONDITION_FAILED, why)),
                ]
        outcome = self._handlers[action](frame)
        if isinstance(outcome, Aborted):
            self._machine.enter(ABORTED)
            return outcome.events
        self._machine.enter(nxt)
        return outcome

    def _merge_clock(self, remote: int) -> tuple[bool, str]:
        try:
            self._clock.receive(remote)
        except PreconditionFailed as exc:
            return False, exc.message
        return True, ""

    def _duplicate(self, frame: Frame) -> list[ev.Event]:
        if frame.flags & Flag.REQUIRES_ACK and self._machine.state is not S.TERMINATED:
            again = self._outbox.reack(frame.seq)
            if again is not None:
                return [ev.DuplicateDropped(frame.seq, reacked=True), ev.SendFrame(again)]
        return [ev.DuplicateDropped(frame.seq, reacked=False)]

    # -------------------------------------------------------------------- handlers

    def _on_hello(self, frame: Frame) -> Outcome:
        return self._handshake.on_hello(frame, clock_ok=self._clock_ok)

    def _on_cold_boot(self, frame: Frame) -> Outcome:
        if self._handshake.negotiated is None:
            raise RemoteProtocolError(
                "COLD_BOOT_REQUEST before both capability responses", status=Status.STATE_VIOLATION
            )
        if frame.session_id != ZERO_SESSION:
            raise RemoteProtocolError("COLD_BOOT_REQUEST must carry a zero SESSION_ID")
        self._exchange.open_cold_boot(frame.seq, by_peer=True)
        return [ev.Request(frame)]

    def _on_cold_boot_done(self, frame: Frame) -> Outcome:
        if frame.session_id == ZERO_SESSION:
            raise RemoteProtocolError("COLD_BOOT_RESPONSE did not assign a SESSION_ID")
        named = frame.payload.get("session_id")
        if named is not None and named != str(uuid.UUID(bytes=frame.session_id)):
            raise RemoteProtocolError("COLD_BOOT_RESPONSE session_id differs from its header")
        self._outbox.session_id = frame.session_id
        self._exchange.close_cold_boot()
        return [ev.Response(frame), ev.SessionActive(frame.session_id)]

    def _on_cold_boot_failed(self, frame: Frame) -> Outcome:
        self._exchange.close_cold_boot()
        return self._on_peer_error(frame)

    def _on_request(self, frame: Frame) -> Outcome:
        events: list[ev.Event] = []
        if self._machine.state is S.SUSPENDED:
            events.append(ev.SessionResumed())
        if self._begin_answers and frame.msg_type is M.SESSION_BEGIN:
            events.append(ev.Response(frame))
        else:
            events.append(ev.Request(frame))
        return events

    def _on_answer(self, frame: Frame) -> Outcome:
        return [ev.Response(frame)]

    def _on_sync_open(self, frame: Frame) -> Outcome:
        events: list[ev.Event] = []
        if self._machine.state is S.SUSPENDED:
            events.append(ev.SessionResumed())
        self._exchange.open_sync(frame.seq, self._mono(), by_peer=True)
        return [*events, ev.SyncStarted(by_peer=True), ev.Request(frame)]

    def _on_sync_batch(self, frame: Frame) -> Outcome:
        self._exchange.sync_batch(frame.msg_type, frame.seq, self._mono())
        if frame.msg_type in SYNC_OPENERS:
            return [ev.Request(frame)]
        return [ev.Response(frame)]

    def _on_sync_refuse(self, frame: Frame) -> Outcome:
        reason = "a sync stream is already open on this connection"
        return [ev.SendFrame(self._outbox.error(frame, Status.TOO_MANY_REQUESTS, reason))]

    def _on_sync_close(self, frame: Frame) -> Outcome:
        self._exchange.close_sync()
        return [ev.Response(frame), ev.SyncEnded()]

    def _on_sync_failed(self, frame: Frame) -> Outcome:
        self._exchange.close_sync()
        return [*self._on_peer_error(frame), ev.SyncEnded()]

    def _on_end(self, frame: Frame) -> Outcome:
        return [
            ev.SessionEnded(frame),
            ev.SendFrame(self._outbox.end_ack(frame)),
            ev.CloseConnection("the peer ended the session"),
        ]

    def _on_end_crossed(self, frame: Frame) -> Outcome:
        return [ev.SessionEnded(frame), ev.SendFrame(self._outbox.end_ack(frame))]

    def _on_end_ack(self, frame: Frame) -> Outcome:
        return [ev.Response(frame), ev.CloseConnection("session ended")]

    def _on_peer_error(self, frame: Frame) -> list[ev.Event]:
        reason = frame.payload.get("reason")
        return [
            ev.ErrorReceived(
                payload_int(frame.payload, "status"),
                reason if isinstance(reason, str) else "",
                payload_int(frame.payload, "ref_seq"),
                frame,
            )
        ]

    def _on_peer_violation(self, frame: Frame) -> Outcome:
        self._machine.violated = True  # never answer a 0x00FF with one
        reason = frame.payload.get("reason")
        text = reason if isinstance(reason, str) else "protocol violation"
        return [
            ev.PeerViolation(payload_int(frame.payload, "status"), text),
            ev.CloseConnection(f"peer reported a protocol violation: {text}"),
        ]

    def _on_ignore(self, frame: Frame) -> Outcome:
        return [ev.Ignored(frame)]
