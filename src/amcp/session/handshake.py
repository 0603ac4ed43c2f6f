"""CAPABILITY_HELLO / CAPABILITY_RESPONSE handling for ``Session`` (PROFILE §4): the
hello exchange, the trust claim check, the nonce-possession proof and negotiation. A mixin,
kept apart so the session module stays about the state machine; it reads and sets the
session's handshake fields declared below."""

from __future__ import annotations

from typing import Any

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from amcp.errors import (
    ForbiddenError,
    PreconditionFailed,
    RemoteProtocolError,
    Status,
    UnauthorizedError,
)
from amcp.session import events as ev
from amcp.session.hello import (
    CapabilityResponse,
    Hello,
    LocalNode,
    Negotiated,
    TrustLevel,
    check_version,
    negotiate,
    possession_message,
)
from amcp.session.identity import verify_signature
from amcp.session.state import SessionState
from amcp.session.trust import TrustConfig, evaluate_claim
from amcp.wire.constants import Flag, MsgType
from amcp.wire.frame import Frame

S = SessionState
M = MsgType
Outcome = tuple[list[ev.Event], SessionState | None]


class Handshake:
    """The handshake handlers of ``Session``."""

    local: LocalNode
    _trust: TrustConfig
    _nonce: bytes
    _x25519: X25519PrivateKey | None
    _clock_ok: bool
    _hello_sent: bool
    _peer: Hello | None
    _granted: TrustLevel | None
    _response_sent: bool
    _negotiated: Negotiated | None

    def _stamp(self, mt: MsgType, payload: dict[str, Any], flags: Flag = Flag.NONE) -> Frame:
        raise NotImplementedError  # Session's

    def _reply_frame(
        self, ref_seq: int, mt: MsgType, payload: dict[str, Any], flags: Flag = Flag.NONE
    ) -> Frame:
        raise NotImplementedError  # Session's

    def _own_hello(self) -> Frame:
        self._hello_sent = True
        return self._stamp(M.CAPABILITY_HELLO, self.local.hello(self._nonce).to_payload())

    def _capability_response(
        self, peer: Hello, status: int, trust: TrustLevel, reason: str | None = None
    ) -> CapabilityResponse:
        return self.local.response(peer, status, trust, self._x25519, reason)

    def _on_hello(self, frame: Frame, nxt: SessionState) -> Outcome:
        if self._peer is not None:
            raise RemoteProtocolError("a second CAPABILITY_HELLO", status=Status.STATE_VIOLATION)
        hello = Hello.from_payload(frame.payload)
        events: list[ev.Event] = []
        if not self._hello_sent:  # T1-02: our hello goes out before anything else of ours
            events.append(ev.SendFrame(self._own_hello()))
        self._peer = hello
        events.append(ev.HelloReceived(hello))
        try:
            if not self._clock_ok:
                raise PreconditionFailed("the hello's clock is too far ahead of ours")
            granted = evaluate_claim(hello, self.local, self._trust)
        except (UnauthorizedError, ForbiddenError, PreconditionFailed) as exc:
            # PROFILE §4: a claim that cannot be backed gets 401/403 in the response, then
            # the connection closes. A skewed clock is refused the same way (412).
            resp = self._capability_response(hello, int(exc.status), hello.trust_level, exc.message)
            events += [
                ev.SendFrame(
                    self._reply_frame(frame.seq, M.CAPABILITY_RESPONSE, resp.to_payload(frame.seq))
                ),
                ev.HandshakeRejected(int(exc.status), exc.message, by_peer=False),
                ev.CloseConnection(exc.message),
            ]
            return events, S.TERMINATED
        self._granted = granted
        resp = self._capability_response(hello, int(Status.OK), granted)
        payload = resp.to_payload(frame.seq)
        events.append(ev.SendFrame(self._reply_frame(frame.seq, M.CAPABILITY_RESPONSE, payload)))
        self._response_sent = True
        return events, nxt

    def _on_cap_response(self, frame: Frame, nxt: SessionState) -> Outcome:
        peer = self._peer
        if peer is None or not self._hello_sent:
            raise RemoteProtocolError(
                "CAPABILITY_RESPONSE before the hellos", status=Status.STATE_VIOLATION
            )
        if self._negotiated is not None:
            raise RemoteProtocolError("a second CAPABILITY_RESPONSE", status=Status.STATE_VIOLATION)
        resp = CapabilityResponse.from_payload(frame.payload)
        # The peer proves it holds the key its hello named by signing our nonce with its
        # address: a replayed or forged hello cannot produce this (PROFILE §4: violation).
        signed = possession_message(self._nonce, peer.node_address)
        if not verify_signature(peer.public_key, resp.signature, signed):
            raise RemoteProtocolError(
                "CAPABILITY_RESPONSE signature does not match the hello's key"
            )
        if resp.status != Status.OK:
            reason = resp.reason or f"the peer refused the handshake ({resp.status})"
            return [
                ev.HandshakeRejected(resp.status, reason, by_peer=True),
                ev.CloseConnection(reason),
            ], S.TERMINATED
        check_version(resp.accepted_version, "accepted_version")
        if self._granted is None or not self._response_sent:  # pragma: no cover - see _on_hello
            raise RemoteProtocolError(
                "CAPABILITY_RESPONSE before ours", status=Status.STATE_VIOLATION
            )
        self._negotiated = negotiate(self.local, peer, self._granted, resp, self._x25519)
        return [ev.HandshakeComplete(self._negotiated)], nxt
