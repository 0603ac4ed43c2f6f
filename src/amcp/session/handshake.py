"""CAPABILITY_HELLO / CAPABILITY_RESPONSE handling for ``Session`` (PROFILE §4): the
hello exchange, the trust claim check, the nonce-possession proof and negotiation. A part
the session owns and calls, kept apart so the session module stays about the state machine;
it stamps its frames through the session's :class:`~amcp.session.outbox.Outbox`."""

from __future__ import annotations

from collections.abc import Callable

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
    NONCE_SIZE,
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
from amcp.session.outbox import Outbox
from amcp.session.support import Aborted, Outcome
from amcp.session.trust import TrustConfig, evaluate_claim
from amcp.wire.constants import MsgType
from amcp.wire.frame import Frame

M = MsgType


class Handshake:
    """One session's side of the hello exchange, and what it established."""

    def __init__(
        self,
        local: LocalNode,
        trust: TrustConfig,
        outbox: Outbox,
        *,
        random_bytes: Callable[[int], bytes],
    ) -> None:
        self.local = local
        self.trust = trust
        self._outbox = outbox
        self._nonce = random_bytes(NONCE_SIZE)
        # Ephemeral per connection, so a leaked session key says nothing about the next one.
        self._x25519 = X25519PrivateKey.generate() if local.encryption else None
        self.hello_sent = False
        self.peer: Hello | None = None
        self._granted: TrustLevel | None = None
        self._response_sent = False
        #: Set once both capability responses are exchanged and verified.
        self.negotiated: Negotiated | None = None

    def own_hello(self) -> Frame:
        self.hello_sent = True
        return self._outbox.stamp(M.CAPABILITY_HELLO, self.local.hello(self._nonce).to_payload())

    def _capability_response(
        self, peer: Hello, status: int, trust: TrustLevel, reason: str | None = None
    ) -> CapabilityResponse:
        return self.local.response(peer, status, trust, self._x25519, reason)

    def on_hello(self, frame: Frame, *, clock_ok: bool) -> Outcome:
        """The peer's hello, whose clock merged (``clock_ok``) or was too far ahead."""
        if self.peer is not None:
            raise RemoteProtocolError("a second CAPABILITY_HELLO", status=Status.STATE_VIOLATION)
        hello = Hello.from_payload(frame.payload)
        events: list[ev.Event] = []
        if not self.hello_sent:  # T1-02: our hello goes out before anything else of ours
            events.append(ev.SendFrame(self.own_hello()))
        self.peer = hello
        events.append(ev.HelloReceived(hello))
        try:
            if not clock_ok:
                raise PreconditionFailed("the hello's clock is too far ahead of ours")
            granted = evaluate_claim(hello, self.local, self.trust)
        except (UnauthorizedError, ForbiddenError, PreconditionFailed) as exc:
            # PROFILE §4: a claim that cannot be backed gets 401/403 in the response, then
            # the connection closes. A skewed clock is refused the same way (412).
            resp = self._capability_response(hello, int(exc.status), hello.trust_level, exc.message)
            events += [
                ev.SendFrame(
                    self._outbox.reply(frame.seq, M.CAPABILITY_RESPONSE, resp.to_payload(frame.seq))
                ),
                ev.HandshakeRejected(int(exc.status), exc.message, by_peer=False),
                ev.CloseConnection(exc.message),
            ]
            return Aborted(events)
        self._granted = granted
        resp = self._capability_response(hello, int(Status.OK), granted)
        payload = resp.to_payload(frame.seq)
        events.append(ev.SendFrame(self._outbox.reply(frame.seq, M.CAPABILITY_RESPONSE, payload)))
        self._response_sent = True
        return events

    def on_cap_response(self, frame: Frame) -> Outcome:
        peer = self.peer
        if peer is None or not self.hello_sent:
            raise RemoteProtocolError(
                "CAPABILITY_RESPONSE before the hellos", status=Status.STATE_VIOLATION
            )
        if self.negotiated is not None:
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
            return Aborted(
                [
                    ev.HandshakeRejected(resp.status, reason, by_peer=True),
                    ev.CloseConnection(reason),
                ]
            )
        check_version(resp.accepted_version, "accepted_version")
        if self._granted is None or not self._response_sent:  # pragma: no cover - see on_hello
            raise RemoteProtocolError(
                "CAPABILITY_RESPONSE before ours", status=Status.STATE_VIOLATION
            )
        self.negotiated = negotiate(self.local, peer, self._granted, resp, self._x25519)
        return [ev.HandshakeComplete(self.negotiated)]
