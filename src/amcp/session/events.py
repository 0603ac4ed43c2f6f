"""What ``Session`` tells its driver (h11 ``_events.py`` style: frozen, slotted, typed).

A driver loop needs only three of them to be correct: ``SendFrame`` (encode and write),
``CloseConnection`` (close the transport; after a ``Violation`` within 1 s) and
``Request`` (the application must answer with ``Session.reply``). The rest are for logs,
metrics and the application's own bookkeeping.
"""

from __future__ import annotations

from dataclasses import dataclass

from amcp.errors import Status
from amcp.session.hello import Hello, Negotiated
from amcp.session.state import SessionState
from amcp.wire.frame import Frame


@dataclass(frozen=True, slots=True)
class Event:
    """Base class of every session event."""


@dataclass(frozen=True, slots=True)
class SendFrame(Event):
    frame: Frame


@dataclass(frozen=True, slots=True)
class CloseConnection(Event):
    reason: str


@dataclass(frozen=True, slots=True)
class Violation(Event):
    """We found a protocol violation: a 0x00FF follows as SendFrame, then CloseConnection.

    The driver must also forget anything it keyed on the peer's address (PROFILE §2).
    """

    status: Status
    reason: str
    ref_seq: int | None = None


@dataclass(frozen=True, slots=True)
class PeerViolation(Event):
    """The peer sent 0x00FF; the session is TERMINATED and is never answered."""

    status: int | None
    reason: str


@dataclass(frozen=True, slots=True)
class HelloReceived(Event):
    hello: Hello


@dataclass(frozen=True, slots=True)
class HandshakeComplete(Event):
    negotiated: Negotiated


@dataclass(frozen=True, slots=True)
class HandshakeRejected(Event):
    """The handshake failed with a 401/403/412 CAPABILITY_RESPONSE (``by_peer``: theirs)."""

    status: int
    reason: str
    by_peer: bool


@dataclass(frozen=True, slots=True)
class Request(Event):
    """A request for the application; answer it with ``Session.reply``/``reply_error``."""

    frame: Frame


@dataclass(frozen=True, slots=True)
class Response(Event):
    """A reply to something we sent (``payload['ref_seq']`` says which)."""

    frame: Frame


@dataclass(frozen=True, slots=True)
class ErrorReceived(Event):
    status: int | None
    reason: str
    ref_seq: int | None
    frame: Frame


@dataclass(frozen=True, slots=True)
class SessionActive(Event):
    """COLD_BOOT_RESPONSE assigned the session id: the session is ACTIVE."""

    session_id: bytes


@dataclass(frozen=True, slots=True)
class SessionSuspended(Event):
    """ACTIVE for ``active_warning`` seconds: any request resumes, else it expires."""


@dataclass(frozen=True, slots=True)
class SessionResumed(Event):
    pass


@dataclass(frozen=True, slots=True)
class SessionTimedOut(Event):
    state: SessionState


@dataclass(frozen=True, slots=True)
class SyncStarted(Event):
    by_peer: bool


@dataclass(frozen=True, slots=True)
class SyncEnded(Event):
    """The sync stream ended: by SYNC_ACK, by an ERROR answering it, or by its timer."""

    timed_out: bool = False


@dataclass(frozen=True, slots=True)
class SessionEnded(Event):
    """The peer sent SESSION_END (``frame``); it has been acked."""

    frame: Frame


@dataclass(frozen=True, slots=True)
class DuplicateDropped(Event):
    seq: int
    reacked: bool


@dataclass(frozen=True, slots=True)
class ClockRejected(Event):
    """The peer's clock is too far ahead: not merged; a request got ERROR 412."""

    seq: int
    reason: str


@dataclass(frozen=True, slots=True)
class Ignored(Event):
    """A frame dropped in TERMINATING."""

    frame: Frame
