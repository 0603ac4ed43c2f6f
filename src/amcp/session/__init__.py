"""amcp.session: the sans-IO protocol session (PROFILE §4, §8).

``Session`` turns decoded frames into events and application intents into frames; the
transition tables live in ``state``; identity, hello and trust in their own modules.
"""

from __future__ import annotations

from amcp.session.events import (
    ClockRejected,
    CloseConnection,
    DuplicateDropped,
    ErrorReceived,
    Event,
    HandshakeComplete,
    HandshakeRejected,
    HelloReceived,
    Ignored,
    PeerViolation,
    Request,
    Response,
    SendFrame,
    SessionActive,
    SessionEnded,
    SessionResumed,
    SessionSuspended,
    SessionTimedOut,
    SyncEnded,
    SyncStarted,
    Violation,
)
from amcp.session.hello import CapabilityResponse, Hello, LocalNode, Negotiated, TrustLevel
from amcp.session.identity import NodeIdentity, NodeType, NodeURI, capability_fingerprint
from amcp.session.policy import AccessPolicy, Mode, Principal
from amcp.session.session import Session
from amcp.session.state import Role, SessionState, Timeouts
from amcp.session.support import CausalClock
from amcp.session.trust import TrustConfig

__all__ = [
    "AccessPolicy",
    "CapabilityResponse",
    "CausalClock",
    "ClockRejected",
    "CloseConnection",
    "DuplicateDropped",
    "ErrorReceived",
    "Event",
    "HandshakeComplete",
    "HandshakeRejected",
    "Hello",
    "HelloReceived",
    "Ignored",
    "LocalNode",
    "Mode",
    "Negotiated",
    "NodeIdentity",
    "NodeType",
    "NodeURI",
    "PeerViolation",
    "Principal",
    "Request",
    "Response",
    "Role",
    "SendFrame",
    "Session",
    "SessionActive",
    "SessionEnded",
    "SessionResumed",
    "SessionState",
    "SessionSuspended",
    "SessionTimedOut",
    "SyncEnded",
    "SyncStarted",
    "Timeouts",
    "TrustConfig",
    "TrustLevel",
    "Violation",
    "capability_fingerprint",
]
