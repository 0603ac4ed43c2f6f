"""Node configuration: the default port, resource limits, and our hello's identity.

Only composition roots (``amcp serve``, tests, benches) build these; nothing here reads the
environment.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from amcp.amf.types import KnowledgeType
from amcp.session import LocalNode, NodeIdentity, NodeType, NodeURI, Timeouts, TrustLevel
from amcp.wire import MAX_PAYLOAD

# 7707: unassigned by IANA, easy to remember ("AMCP" has no digits; 77 = 'M' in ASCII).
DEFAULT_PORT = 7707
DEFAULT_HOST = "127.0.0.1"
VENDOR = "amcp"
PRODUCT = "pyamcp"


@dataclass(frozen=True, slots=True)
class Limits:
    """Every bound the node puts on a peer. Each has its reason next to it."""

    # Global: file descriptors and memory are finite; past this new sockets are closed at
    # once, before a byte is read (the client retries with backoff).
    max_connections: int = 1024
    # Of those, at most this many may wait for a handshake (unauthenticated); the rest is
    # room only authenticated peers and clients can use (capped at max_connections). A new
    # connection that finds the waiting room full evicts the one waiting longest
    # (amcp.node.admission).
    max_unauthenticated: int = 256
    # Largest frame a peer may send before the handshake completes: a hello with a cert
    # chain is a few KiB, and a stranger must not make the node buffer 10 MiB per socket.
    handshake_max_payload: int = 64 * 1024
    # Bytes of incomplete frames all unauthenticated connections may hold together; the
    # one whose read crosses it is aborted (1,024 × 10 MiB partial hellos were ~10 GiB).
    unauthenticated_buffer_bytes: int = 8 * 1024 * 1024
    # Per connection: pipelined requests beyond this are answered ERROR 429 at once, so one
    # peer cannot queue unbounded work in the thread pool.
    max_inflight: int = 32
    # One socket read: large enough for a frame header plus a typical payload.
    read_chunk: int = 64 * 1024
    # Outgoing bytes queued in the transport before the node stops reading from that peer
    # and waits for it to drain (backpressure) — a peer that does not read cannot make the
    # node buffer replies without bound.
    write_high_water: int = 256 * 1024
    write_low_water: int = 64 * 1024
    # How long a full write buffer may stay full before the peer is cut off.
    write_timeout: float = 10.0
    # A frame once started must be complete within this (slowloris: one byte a second).
    frame_timeout: float = 10.0
    # No complete frame from the peer for this long: the node ends the session.
    idle_timeout: float = 600.0
    # After a violation or a refusal, how long the 0x00FF may take to flush (PROFILE §2: 1 s).
    close_grace: float = 0.5
    # Blocking Memory calls run on this many threads (writes on one more, serialised).
    read_threads: int = 4
    # Seconds between maintenance rounds (Memory.maintain: TTL expiry), run on the write
    # thread as a task of their own, never inside a request.
    maintenance_interval: float = 30.0
    timeouts: Timeouts = field(default_factory=Timeouts)

    def __post_init__(self) -> None:
        if self.max_connections < 1 or self.max_inflight < 1 or self.read_threads < 1:
            raise ValueError("connection, in-flight and thread limits must be positive")
        if self.max_unauthenticated < 1 or self.unauthenticated_buffer_bytes < 1:
            raise ValueError("unauthenticated connection and buffer limits must be positive")
        if not 64 <= self.handshake_max_payload <= MAX_PAYLOAD:
            raise ValueError(f"handshake_max_payload must be in [64, {MAX_PAYLOAD}]")
        if self.maintenance_interval <= 0:
            raise ValueError("maintenance_interval must be positive")
        if not 0 <= self.write_low_water <= self.write_high_water:
            raise ValueError("write_low_water must be between 0 and write_high_water")


def capabilities(node_type: NodeType) -> dict[str, Any]:
    """The upstream capability flags (PROFILE §4) this implementation offers."""
    serves = node_type is not NodeType.AI
    return {
        "memory_read": serves,
        "memory_write": serves,
        "memory_invalidate": serves,
        "vector_search": serves,
        "amql_query": serves,
        "distributed_sync": True,
        "causal_clock": True,
        "streaming": False,
        "compression": True,
        "max_context_tokens": 200_000,
        "supported_amf_versions": ["1.0"],
        "supported_knowledge_types": [t.value for t in KnowledgeType],
    }


def local_node(
    identity: NodeIdentity,
    node_type: NodeType,
    *,
    region: str = "local",
    encryption: bool = False,
    compression: bool = True,
    trust_level: TrustLevel = TrustLevel.LOCAL,
    cert_chain: str | None = None,
    bearer: str | None = None,
    max_payload: int = MAX_PAYLOAD,
    extra_capabilities: Mapping[str, Any] | None = None,
) -> LocalNode:
    caps = {**capabilities(node_type), **(extra_capabilities or {})}
    address = NodeURI.for_capabilities(node_type, VENDOR, caps, region=region, product=PRODUCT)
    return LocalNode(
        identity=identity,
        address=address,
        capabilities=caps,
        trust_level=trust_level,
        cert_chain=cert_chain,
        bearer=bearer,
        compression=compression,
        encryption=encryption,
        max_payload=max_payload,
    )


def is_local_address(host: str | None) -> bool:
    """Loopback (or a unix socket, host None): where ``local`` trust is reasonable (PROFILE §4)."""
    if host is None or host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False
