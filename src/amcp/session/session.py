"""``Session``: one AMCP connection's protocol state, sans-IO (PROFILE §1-§4, §8).

The driver feeds decoded frames to :meth:`Session.receive` and acts on the events it gets
back; the application answers ``Request`` events with :meth:`Session.reply`; timers run
through :meth:`Session.tick` with a time the driver supplies. Nothing here reads a socket
or the real clock — that is what makes every path testable with plain objects.
"""

from __future__ import annotations

import os
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from amcp.errors import (
    LocalProtocolError,
    PreconditionFailed,
    RemoteProtocolError,
    Status,
)
from amcp.session import events as ev
from amcp.session.handshake import Handshake, Outcome
from amcp.session.hello import (
    NONCE_SIZE,
    Hello,
    LocalNode,
    Negotiated,
    TrustLevel,
)
from amcp.session.policy import Principal
from amcp.session.state import (
    ALTERNATIVES,
    FORBIDDEN,
    RECEIVE,
    SEND,
    SYNC_OPENERS,
    TIMER,
    TO_CLIENT,
    TO_NODE,
    Action,
    Role,
    SessionState,
    Timeouts,
)
from amcp.session.support import CausalClock, SyncStream, deadline, payload_int
from amcp.session.trust import TrustConfig
from amcp.wire.constants import Flag, MsgType
from amcp.wire.frame import ZERO_SESSION, Frame

S = SessionState
M = MsgType
# Members the per-frame paths compare against, as module globals: Python 3.11's EnumType
# defines __getattr__, so every ``S.ACTIVE`` is an unspecialised class-attribute lookup
# through that hook (~0.2 us), where a global load is a few nanoseconds. A round trip ran
# some thirty of these on each end.
_A_COLD_BOOT = Action.COLD_BOOT
_A_COLD_BOOT_DONE = Action.COLD_BOOT_DONE
_A_IGNORE = Action.IGNORE
_A_PEER_ERROR = Action.PEER_ERROR
_A_PEER_VIOLATION = Action.PEER_VIOLATION
_A_SYNC_BATCH = Action.SYNC_BATCH
_A_SYNC_CLOSE = Action.SYNC_CLOSE
_A_SYNC_OPEN = Action.SYNC_OPEN
_M_HEALTH_CHECK = M.HEALTH_CHECK
_M_SESSION_BEGIN = M.SESSION_BEGIN
_ROLE_CLIENT = Role.CLIENT
_ROLE_NODE = Role.NODE
_S_ACTIVE = S.ACTIVE
_S_COLD_BOOTING = S.COLD_BOOTING
_S_HANDSHAKING = S.HANDSHAKING
_S_SUSPENDED = S.SUSPENDED
_S_SYNCING = S.SYNCING
_S_TERMINATED = S.TERMINATED
# Re-acks need the reply we sent; keep the last few hundred. A peer retransmitting older
# frames than that gets no re-ack, which the profile allows (it may simply retry).
DEFAULT_REACK_CACHE = 256
# Seconds of the 3.5 h warning etc. come from Timeouts; 0 in ref_seq means "no frame":
# sequence numbers start at 1, so 0 can never name a real one.
NO_FRAME = 0
_U64 = 1 << 64


Handler = Callable[[Frame, SessionState], Outcome]


class Session(Handshake):
    """The protocol state of one connection, for either side (``role``)."""

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
        self._clock = clock
        self._mono = monotonic
        self._trust = trust or TrustConfig()
        self._timeouts = timeouts or Timeouts()
        self._new_session_id = new_session_id or (lambda: uuid.uuid4().bytes)
        self._nonce = random_bytes(NONCE_SIZE)
        # Ephemeral per connection, so a leaked session key says nothing about the next one.
        self._x25519 = X25519PrivateKey.generate() if local.encryption else None
        self._reack_limit = reack_cache
        self._replies: OrderedDict[int, tuple[MsgType, dict[str, Any], Flag]] = OrderedDict()

        self._state = S.INIT
        self._entered_at = monotonic()
        self._active_since = self._entered_at
        self._seq_out = 0
        self._seq_in = 0
        self._session_id = ZERO_SESSION
        self._hello_sent = False
        self._peer: Hello | None = None
        self._granted: TrustLevel | None = None
        self._response_sent = False
        self._negotiated: Negotiated | None = None
        self._cold_boot_seq: int | None = None
        self._sync: SyncStream | None = None
        self._violated = False
        self._clock_ok = True
        self._handlers: dict[Action, Handler] = {
            Action.HELLO: self._on_hello,
            Action.CAP_RESPONSE: self._on_cap_response,
            Action.COLD_BOOT: self._on_cold_boot,
            Action.COLD_BOOT_DONE: self._on_cold_boot_done,
            Action.REQUEST: self._on_request,
            Action.ANSWER: self._on_answer,
            Action.SYNC_OPEN: self._on_sync_open,
            Action.SYNC_BATCH: self._on_sync_batch,
            Action.SYNC_CLOSE: self._on_sync_close,
            Action.END: self._on_end,
            Action.END_CROSSED: self._on_end_crossed,
            Action.END_ACK: self._on_end_ack,
            Action.PEER_ERROR: self._on_peer_error,
            Action.PEER_VIOLATION: self._on_peer_violation,
            Action.IGNORE: self._on_ignore,
        }

    # ------------------------------------------------------------------------ state

    @property
    def state(self) -> SessionState:
        return self._state

    @property
    def session_id(self) -> bytes:
        return self._session_id

    @property
    def peer(self) -> Hello | None:
        return self._peer

    @property
    def negotiated(self) -> Negotiated | None:
        """Set once both capability responses are exchanged and verified."""
        return self._negotiated

    @property
    def principal(self) -> Principal | None:
        """The peer as the access policy sees it, once its hello has arrived."""
        if self._peer is None:
            return None
        return Principal(self._peer.public_key, self._peer.bearer)

    def _enter(self, new: SessionState) -> None:
        old = self._state
        if new is old:  # most frames leave the state as it is
            return
        if (old, new) in FORBIDDEN:
            raise LocalProtocolError(f"forbidden transition {old.name} -> {new.name}")
        self._entered_at = self._mono()
        # The 3.5 h / 4 h clock restarts when a cold boot completes or a suspended
        # session resumes (a sync opened while suspended is a resume); a sync round
        # trip from ACTIVE does not reset it.
        if (new is S.ACTIVE and old is S.COLD_BOOTING) or (
            old is S.SUSPENDED and new in (S.ACTIVE, S.SYNCING)
        ):
            self._active_since = self._entered_at
        self._state = new

    # ---------------------------------------------------------------------- receive

    def receive(self, frame: Frame) -> list[ev.Event]:
        """Process one decoded frame. Never raises for anything the peer sends."""
        if frame.seq <= self._seq_in:
            return self._duplicate(frame)
        self._seq_in = frame.seq
        try:
            return self._dispatch(frame)
        except RemoteProtocolError as exc:
            return self._violation(exc.status, exc.message, frame.seq)

    def _dispatch(self, frame: Frame) -> list[ev.Event]:
        state, mt = self._state, frame.msg_type
        row = RECEIVE.get((state, mt))
        if row is None:
            # INIT/HANDSHAKING/COLD_BOOTING + MEMORY_* lands here too: status 702 tells the
            # peer a cold boot is required (T1-06 accepts 0x00FF or 702; this is both).
            raise RemoteProtocolError(
                f"{mt.name} is not allowed in state {state.name}", status=Status.STATE_VIOLATION
            )
        action, nxt = row
        if (mt in TO_NODE and self.role is _ROLE_CLIENT) or (
            mt in TO_CLIENT and self.role is _ROLE_NODE
        ):
            raise RemoteProtocolError(f"{mt.name} is not sent to a {self.role.value}")
        if self._session_id != ZERO_SESSION and frame.session_id not in (
            self._session_id,
            ZERO_SESSION,  # frames the peer sent before our COLD_BOOT_RESPONSE reached it
        ):
            raise RemoteProtocolError("SESSION_ID does not belong to this session")
        if action is _A_IGNORE or action is _A_PEER_VIOLATION:
            return self._finish(state, action, nxt, self._handlers[action](frame, nxt))
        self._clock_ok, why = self._merge_clock(frame.clock)
        if not self._clock_ok and self._is_request(mt):
            # PROFILE §5: not merged, answered 412; the request is not processed.
            return [
                ev.ClockRejected(frame.seq, why),
                ev.SendFrame(self._auto_reply(frame, Status.PRECONDITION_FAILED, why)),
            ]
        return self._finish(state, action, nxt, self._handlers[action](frame, nxt))

    def _finish(
        self, state: SessionState, action: Action, nxt: SessionState, outcome: Outcome
    ) -> list[ev.Event]:
        events, chosen = outcome
        if chosen is not None and self._state is state:
            # The row's own outcome (the hot path) needs no set of alternatives built.
            if chosen is not nxt and chosen is not state and chosen is not _S_TERMINATED and (
                chosen is not ALTERNATIVES.get((state, action), nxt)
            ):  # pragma: no cover - a handler bug, not peer input
                raise LocalProtocolError(f"{action.value} may not lead to {chosen.name}")
            self._enter(chosen)
        return events

    def _merge_clock(self, remote: int) -> tuple[bool, str]:
        try:
            self._clock.receive(remote)
        except PreconditionFailed as exc:
            return False, exc.message
        return True, ""

    def _is_request(self, mt: MsgType) -> bool:
        if mt is _M_SESSION_BEGIN:  # the node's SESSION_BEGIN is an answer
            return self.role is _ROLE_NODE
        return mt in TO_NODE or mt in SYNC_OPENERS or mt is _M_HEALTH_CHECK

    def _duplicate(self, frame: Frame) -> list[ev.Event]:
        cached = self._replies.get(frame.seq)
        if not frame.flags & Flag.REQUIRES_ACK or cached is None or self._state is S.TERMINATED:
            return [ev.DuplicateDropped(frame.seq, reacked=False)]
        mt, payload, flags = cached
        # A new SEQUENCE_NUMBER: re-sending the old one would itself be dropped as a duplicate.
        return [
            ev.DuplicateDropped(frame.seq, reacked=True),
            ev.SendFrame(self._stamp(mt, payload, flags)),
        ]

    # --------------------------------------------------------------- other handlers

    def _on_cold_boot(self, frame: Frame, nxt: SessionState) -> Outcome:
        if self._negotiated is None:
            raise RemoteProtocolError(
                "COLD_BOOT_REQUEST before both capability responses", status=Status.STATE_VIOLATION
            )
        if frame.session_id != ZERO_SESSION:
            raise RemoteProtocolError("COLD_BOOT_REQUEST must carry a zero SESSION_ID")
        self._cold_boot_seq = frame.seq
        return [ev.Request(frame)], nxt

    def _on_cold_boot_done(self, frame: Frame, nxt: SessionState) -> Outcome:
        if frame.session_id == ZERO_SESSION:
            raise RemoteProtocolError("COLD_BOOT_RESPONSE did not assign a SESSION_ID")
        named = frame.payload.get("session_id")
        if named is not None and named != str(uuid.UUID(bytes=frame.session_id)):
            raise RemoteProtocolError("COLD_BOOT_RESPONSE session_id differs from its header")
        self._session_id = frame.session_id
        self._cold_boot_seq = None
        return [ev.Response(frame), ev.SessionActive(frame.session_id)], nxt

    def _on_request(self, frame: Frame, nxt: SessionState) -> Outcome:
        events: list[ev.Event] = []
        if self._state is _S_SUSPENDED:
            events.append(ev.SessionResumed())
        if frame.msg_type is _M_SESSION_BEGIN and self.role is _ROLE_CLIENT:
            events.append(ev.Response(frame))
        else:
            events.append(ev.Request(frame))
        return events, nxt

    def _on_answer(self, frame: Frame, nxt: SessionState) -> Outcome:
        return [ev.Response(frame)], nxt

    def _on_sync_open(self, frame: Frame, nxt: SessionState) -> Outcome:
        events: list[ev.Event] = [ev.SessionResumed()] if self._state is S.SUSPENDED else []
        self._sync = SyncStream(by_peer=True, batch_started=self._mono(), last_peer_seq=frame.seq)
        return [*events, ev.SyncStarted(by_peer=True), ev.Request(frame)], nxt

    def _on_sync_batch(self, frame: Frame, nxt: SessionState) -> Outcome:
        sync = self._sync
        assert sync is not None  # SYNCING is only entered with a stream
        if frame.msg_type in SYNC_OPENERS:
            if not sync.by_peer:
                # PROFILE §8: one sync stream at a time; ours is open.
                reason = "a sync stream is already open on this connection"
                return [
                    ev.SendFrame(self._auto_reply(frame, Status.TOO_MANY_REQUESTS, reason))
                ], None
            sync.batch_started, sync.last_peer_seq = self._mono(), frame.seq
            return [ev.Request(frame)], nxt
        sync.batch_started = self._mono()
        return [ev.Response(frame)], nxt

    def _on_sync_close(self, frame: Frame, nxt: SessionState) -> Outcome:
        self._sync = None
        return [ev.Response(frame), ev.SyncEnded()], nxt

    def _session_end_ack(self, frame: Frame) -> Frame:
        return self._reply_frame(
            frame.seq, M.SESSION_END_ACK, {"status": int(Status.OK), "ref_seq": frame.seq}
        )

    def _on_end(self, frame: Frame, nxt: SessionState) -> Outcome:
        return [
            ev.SessionEnded(frame),
            ev.SendFrame(self._session_end_ack(frame)),
            ev.CloseConnection("the peer ended the session"),
        ], nxt

    def _on_end_crossed(self, frame: Frame, nxt: SessionState) -> Outcome:
        return [ev.SessionEnded(frame), ev.SendFrame(self._session_end_ack(frame))], nxt

    def _on_end_ack(self, frame: Frame, nxt: SessionState) -> Outcome:
        return [ev.Response(frame), ev.CloseConnection("session ended")], nxt

    def _on_peer_error(self, frame: Frame, nxt: SessionState) -> Outcome:
        ref = payload_int(frame.payload, "ref_seq")
        reason = frame.payload.get("reason")
        events: list[ev.Event] = [
            ev.ErrorReceived(
                payload_int(frame.payload, "status"),
                reason if isinstance(reason, str) else "",
                ref,
                frame,
            )
        ]
        state, chosen = self._state, None
        if state is S.COLD_BOOTING and ref is not None and ref == self._cold_boot_seq:
            self._cold_boot_seq, chosen = None, S.HANDSHAKING
        elif state is S.SYNCING and self._sync is not None and ref == self._sync.last_local_seq:
            self._sync, chosen = None, S.ACTIVE
            events.append(ev.SyncEnded())
        return events, chosen or nxt

    def _on_peer_violation(self, frame: Frame, nxt: SessionState) -> Outcome:
        self._violated = True  # never answer a 0x00FF with one
        reason = frame.payload.get("reason")
        text = reason if isinstance(reason, str) else "protocol violation"
        return [
            ev.PeerViolation(payload_int(frame.payload, "status"), text),
            ev.CloseConnection(f"peer reported a protocol violation: {text}"),
        ], nxt

    def _on_ignore(self, frame: Frame, nxt: SessionState) -> Outcome:
        return [ev.Ignored(frame)], nxt

    # ------------------------------------------------------------------------- send

    def _stamp(self, mt: MsgType, payload: dict[str, Any], flags: Flag = Flag.NONE) -> Frame:
        # No copy: every caller hands over a dict built for this message (send() and
        # reply() copy the caller's mapping once), and nothing mutates a payload after it is
        # stamped; a re-ack re-sends the very dict its first frame carried.
        self._seq_out += 1
        return Frame(mt, payload, self._seq_out, self._session_id, self._clock.send(), flags)

    def _reply_frame(
        self, ref_seq: int, mt: MsgType, payload: dict[str, Any], flags: Flag = Flag.NONE
    ) -> Frame:
        self._replies[ref_seq] = (mt, payload, flags)
        self._replies.move_to_end(ref_seq)
        while len(self._replies) > self._reack_limit:
            self._replies.popitem(last=False)
        return self._stamp(mt, payload, flags)

    def _auto_reply(self, frame: Frame, status: Status, reason: str) -> Frame:
        payload = {"status": int(status), "reason": reason, "ref_seq": frame.seq}
        return self._reply_frame(frame.seq, M.ERROR, payload)

    def consume_seqs(self, count: int) -> None:
        """The frame just stamped went out as ``count + 1`` fragments (the codec split it):
        its extra fragments took the next ``count`` SEQUENCE_NUMBERs, so skip them."""
        if count < 0:
            raise ValueError("count must not be negative")
        if self._seq_out + count >= _U64:
            raise LocalProtocolError("SEQUENCE_NUMBER would overflow")
        self._seq_out += count

    def start(self) -> Frame:
        """Our CAPABILITY_HELLO. Call it as soon as the connection is up, on both sides (T1-02)."""
        self._check_send(M.CAPABILITY_HELLO)
        frame = self._own_hello()
        self._enter(S.HANDSHAKING)
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
        return self._violation(status, reason, ref_seq)

    def _check_send(self, mt: MsgType) -> tuple[Action, SessionState]:
        row = SEND.get((self._state, mt))
        if row is None:
            raise LocalProtocolError(
                f"cannot send {mt.name} in state {self._state.name}", status=Status.STATE_VIOLATION
            )
        if (mt in TO_NODE and self.role is _ROLE_NODE) or (
            mt in TO_CLIENT and self.role is _ROLE_CLIENT
        ):
            raise LocalProtocolError(f"a {self.role.value} does not send {mt.name}")
        return row

    def _send(
        self, mt: MsgType, payload: dict[str, Any], flags: Flag, ref_seq: int | None
    ) -> Frame:
        action, nxt = self._check_send(mt)
        state = self._state
        chosen = self._before_send(action, mt, payload, ref_seq) or nxt
        frame = (
            self._stamp(mt, payload, flags)
            if ref_seq is None
            else self._reply_frame(ref_seq, mt, payload, flags)
        )
        self._after_send(action, frame)
        if action is _A_SYNC_CLOSE or (chosen is _S_ACTIVE and state is _S_SYNCING):
            self._sync = None
        if chosen is _S_HANDSHAKING:
            self._cold_boot_seq = None
        self._enter(chosen)
        return frame

    def _before_send(
        self, action: Action, mt: MsgType, payload: dict[str, Any], ref_seq: int | None
    ) -> SessionState | None:
        """Refuse what the row allows but the session's details do not; pick an alternative."""
        sync, state = self._sync, self._state
        if action is _A_COLD_BOOT and self._negotiated is None:
            raise LocalProtocolError("COLD_BOOT_REQUEST before the handshake completed")
        if action is _A_SYNC_BATCH and mt in SYNC_OPENERS and sync is not None and sync.by_peer:
            raise LocalProtocolError(
                "the peer's sync stream is open; wait for it to end",
                status=Status.TOO_MANY_REQUESTS,
            )
        if action is _A_COLD_BOOT_DONE:
            if ref_seq is None or ref_seq != self._cold_boot_seq:
                raise LocalProtocolError("COLD_BOOT_RESPONSE must answer the COLD_BOOT_REQUEST")
            self._session_id = self._new_session_id()
            payload["session_id"] = str(uuid.UUID(bytes=self._session_id))
        if action is _A_PEER_ERROR and ref_seq is not None:
            if state is _S_COLD_BOOTING and ref_seq == self._cold_boot_seq:
                return _S_HANDSHAKING
            if state is _S_SYNCING and sync is not None and ref_seq == sync.last_peer_seq:
                return _S_ACTIVE
        return None

    def _after_send(self, action: Action, frame: Frame) -> None:
        sync = self._sync
        if action is _A_COLD_BOOT:
            self._cold_boot_seq = frame.seq
        elif action is _A_COLD_BOOT_DONE:
            self._cold_boot_seq = None
        elif action is _A_SYNC_OPEN:
            self._sync = SyncStream(
                by_peer=False, batch_started=self._mono(), last_local_seq=frame.seq
            )
        elif action is _A_SYNC_BATCH and sync is not None:
            sync.batch_started = self._mono()
            if frame.msg_type in SYNC_OPENERS:
                sync.last_local_seq = frame.seq

    def _violation(self, status: Status, reason: str, ref_seq: int | None) -> list[ev.Event]:
        if self._violated:  # one 0x00FF per connection; after that only close
            self._state = S.TERMINATED
            return [ev.CloseConnection(reason)]
        self._violated = True
        payload: dict[str, Any] = {"status": int(status), "reason": reason}
        if ref_seq is not None:
            payload["ref_seq"] = ref_seq
        frame = self._stamp(M.PROTOCOL_VIOLATION, payload)
        self._enter(S.TERMINATED)
        return [
            ev.Violation(status, reason, ref_seq),
            ev.SendFrame(frame),
            ev.CloseConnection(reason),
        ]

    # ------------------------------------------------------------------------ timers

    def next_deadline(self) -> float | None:
        """When :meth:`tick` next has something to do (monotonic seconds), or None."""
        return deadline(
            self._state,
            self._timeouts,
            entered_at=self._entered_at,
            active_since=self._active_since,
            sync_started=self._sync.batch_started if self._sync is not None else None,
        )

    def tick(self, now: float) -> list[ev.Event]:
        """Fire every deadline at or before ``now`` (several, if the driver was late)."""
        events: list[ev.Event] = []
        while (deadline := self.next_deadline()) is not None and now >= deadline:
            events += self._on_timer()
        return events

    def _on_timer(self) -> list[ev.Event]:
        state = self._state
        action, nxt = TIMER[state]
        events: list[ev.Event] = []
        if action is Action.EXPIRE:
            reason = f"{state.name} timed out"
            events.append(ev.SessionTimedOut(state))
            # 408 SESSION_TIMEOUT answers no frame (ref_seq 0). Not before our hello: T1-02.
            if self._hello_sent and not self._violated:
                payload = {"status": int(Status.TIMEOUT), "reason": reason, "ref_seq": NO_FRAME}
                events.append(ev.SendFrame(self._stamp(M.ERROR, payload)))
            events.append(ev.CloseConnection(reason))
        elif action is Action.SUSPEND:
            events.append(ev.SessionSuspended())
        elif action is Action.SYNC_EXPIRE:
            self._sync = None
            events.append(ev.SyncEnded(timed_out=True))
        else:
            events.append(ev.CloseConnection("no SESSION_END_ACK in time"))
        self._enter(nxt)
        return events
