"""Shared helpers for the session tests: fake clocks, node builders, a frame pump."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from amcp.errors import PreconditionFailed
from amcp.session import (
    CloseConnection,
    Event,
    LocalNode,
    NodeIdentity,
    NodeType,
    NodeURI,
    Role,
    SendFrame,
    Session,
    SessionState,
    Timeouts,
    TrustConfig,
)
from amcp.wire.constants import MsgType
from amcp.wire.frame import Frame

WALL_MS = 1_750_000_000_000
CAPS: dict[str, Any] = {
    "memory_read": True,
    "memory_write": True,
    "memory_invalidate": True,
    "vector_search": True,
    "amql_query": True,
    "distributed_sync": True,
    "causal_clock": True,
    "streaming": False,
    "compression": True,
    "max_context_tokens": 8000,
    "supported_amf_versions": ["1.0"],
    "supported_knowledge_types": ["KT-FACT", "KT-PITFALL"],
}
# Key generation is the slow part of building a session; Hypothesis builds thousands.
CLIENT_ID = NodeIdentity.generate()
NODE_ID = NodeIdentity.generate()


@dataclass
class FakeClock:
    """A CausalClock with the HLC's drift rule and a wall clock the test sets."""

    wall_ms: int = WALL_MS
    max_drift_ms: int = 60_000
    last: int = 0
    received: list[int] = field(default_factory=list)

    def send(self) -> int:
        self.last = max(self.last + 1, self.wall_ms << 16)
        return self.last

    def receive(self, remote: int) -> int:
        if (remote >> 16) - self.wall_ms > self.max_drift_ms:
            raise PreconditionFailed("remote clock too far ahead")
        self.received.append(remote)
        self.last = max(self.last, remote, self.wall_ms << 16) + 1
        return self.last


@dataclass
class FakeTime:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


def make_local(
    node_type: NodeType = NodeType.AI,
    identity: NodeIdentity | None = None,
    *,
    vendor: str = "acme",
    product: str | None = "agent_1",
    capabilities: dict[str, Any] | None = None,
    **kw: Any,
) -> LocalNode:
    caps = dict(CAPS if capabilities is None else capabilities)
    if identity is None:
        identity = CLIENT_ID if node_type is NodeType.AI else NODE_ID
    address = NodeURI.for_capabilities(node_type, vendor, caps, product=product, region="eu-1")
    return LocalNode(identity, address, caps, **kw)


@dataclass
class Pair:
    client: Session
    node: Session
    time: FakeTime
    client_clock: FakeClock
    node_clock: FakeClock


def make_pair(
    *,
    client_local: LocalNode | None = None,
    node_local: LocalNode | None = None,
    client_trust: TrustConfig | None = None,
    node_trust: TrustConfig | None = None,
    timeouts: Timeouts | None = None,
) -> Pair:
    time = FakeTime()
    cc, nc = FakeClock(), FakeClock()
    client = Session(
        Role.CLIENT,
        client_local or make_local(NodeType.AI),
        clock=cc,
        monotonic=time,
        trust=client_trust or TrustConfig(trust_local=True),
        timeouts=timeouts,
    )
    node = Session(
        Role.NODE,
        node_local or make_local(NodeType.DB, product="store"),
        clock=nc,
        monotonic=time,
        trust=node_trust or TrustConfig(trust_local=True),
        timeouts=timeouts,
    )
    return Pair(client, node, time, cc, nc)


def frames(events: Iterable[Event]) -> list[Frame]:
    return [e.frame for e in events if isinstance(e, SendFrame)]


def of(events: Iterable[Event], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def pump(
    sender: Session, receiver: Session, outgoing: list[Frame]
) -> tuple[list[Event], list[Event]]:
    """Deliver ``outgoing`` to ``receiver`` and route every reply back and forth until quiet.

    Returns (events seen by ``sender``, events seen by ``receiver``).
    """
    seen: dict[int, list[Event]] = {id(sender): [], id(receiver): []}
    closed: set[int] = set()
    queue: list[tuple[Session, Session, Frame]] = [(receiver, sender, f) for f in outgoing]
    while queue:
        dst, src, frame = queue.pop(0)
        if id(dst) in closed:  # like a driver: a closed connection reads nothing more
            continue
        events = dst.receive(frame)
        seen[id(dst)].extend(events)
        queue.extend((src, dst, f) for f in frames(events))
        if any(isinstance(e, CloseConnection) for e in events):
            closed.add(id(dst))
    return seen[id(sender)], seen[id(receiver)]


def handshake(pair: Pair) -> tuple[list[Event], list[Event]]:
    return pump(pair.client, pair.node, [pair.client.start()])


def activate(pair: Pair) -> Frame:
    """Handshake and cold boot; returns the COLD_BOOT_RESPONSE frame."""
    handshake(pair)
    request = pair.client.send(MsgType.COLD_BOOT_REQUEST, {"task": "t", "budget_tokens": 4000})
    (req_event,) = pair.node.receive(request)
    response = pair.node.reply(req_event.frame, MsgType.COLD_BOOT_RESPONSE, {"pack": {}})
    pair.client.receive(response)
    assert pair.client.state is SessionState.ACTIVE
    assert pair.node.state is SessionState.ACTIVE
    return response


def session_in(state: SessionState, role: Role) -> tuple[Session, Pair]:
    """A session of ``role`` driven into ``state`` through real protocol steps."""
    pair = make_pair()
    me = pair.client if role is Role.CLIENT else pair.node
    if state is SessionState.INIT:
        return me, pair
    if state is SessionState.HANDSHAKING:
        me.start()
        return me, pair
    if state is SessionState.COLD_BOOTING:
        handshake(pair)
        request = pair.client.send(MsgType.COLD_BOOT_REQUEST, {"task": "t", "budget_tokens": 1})
        pair.node.receive(request)
        return me, pair
    activate(pair)
    if state is SessionState.SUSPENDED:
        me.tick(pair.time.now + Timeouts().active_warning)
    elif state is SessionState.SYNCING:
        me.send(MsgType.SYNC_PUSH, {"changes": [], "origin": "x", "hops": 0})
    elif state is SessionState.TERMINATING:
        me.end("done")
    elif state is SessionState.TERMINATED:
        other = pair.node if me is pair.client else pair.client
        pump(other, me, [other.end("bye")])
    assert me.state is state, (me.state, state)
    return me, pair
