"""Steps every level's procedures share: the run's target, writing, reading, describing.

Kept apart from the procedures so Level 1, 2 and 3 use one implementation of "write a
record and remember it for cleanup" and "what did the node answer".
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from amcp.conformance.client import (
    KitIdentity,
    NodeFaultError,
    Peer,
    RawConnection,
    Received,
    open_active,
)
from amcp.conformance.report import Check
from amcp.errors import Status
from amcp.wire import MsgType

# Upstream T1-03/T1-07 wait 5 s; PROFILE §2 tightens the close after a violation to 1 s.
UPSTREAM_WAIT_S = 5.0
PROFILE_CLOSE_S = 1.0


@dataclass(frozen=True, slots=True)
class KitConfig:
    """Knobs of a run. Defaults are the spec's numbers; tests shrink the waits."""

    timeout: float = 5.0  # seconds to wait for any one expected reply
    silence_window: float = UPSTREAM_WAIT_S  # T1-07: how long "no response" must last
    close_within: float = PROFILE_CLOSE_S  # T1-03/T1-06: close after a 0x00FF
    hello_wait: float = 1.0  # T1-02: how long to wait for an unprompted hello
    # The project scope the kit writes into: a new one per run, so a run against a live
    # node never mixes its test records with anyone's (and its cleanup touches only them).
    scope: str = field(default_factory=lambda: f"amcp-conformance-{secrets.token_hex(4)}")
    bearer: str | None = None  # sent as hello auth.bearer, for nodes with an access policy
    # Level 3: how long a change may take to reach the other nodes (T3-01: 60 s).
    converge_within: float = 60.0
    poll_interval: float = 0.25  # between two reads while waiting for convergence
    # T2-08: a reference node ("HOST:PORT") to exchange records with through the kit.
    reference: str | None = None


@dataclass(frozen=True, slots=True)
class Target:
    host: str
    port: int
    config: KitConfig
    me: KitIdentity
    # Every knowledge id a node acknowledged storing during the run: what cleanup removes.
    written: list[str] = field(default_factory=list)
    # Level 3: the other nodes of the cluster under test (the first node is this one),
    # and what the run stored on each of them ("host:port" → ids), for cleanup.
    peers: tuple[tuple[str, int], ...] = ()
    extra_written: dict[str, list[str]] = field(default_factory=dict)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def connect(self) -> RawConnection:
        return RawConnection(self.host, self.port, timeout=self.config.timeout)

    def active(self) -> Peer:
        return open_active(
            self.host, self.port, timeout=self.config.timeout, scope=self.config.scope,
            me=self.me,
        )


@dataclass(frozen=True, slots=True)
class Verdict:
    passed: bool
    detail: str
    evidence: bytes | None = None
    checks: tuple[Check, ...] = ()


def verdict_of(checks: Sequence[Check], ok: str, evidence: bytes | None = None) -> Verdict:
    """PASS with ``ok`` when every check passed; otherwise FAIL naming the failed ones."""
    failed = [c for c in checks if not c.passed]
    if not failed:
        return Verdict(True, ok, evidence, tuple(checks))
    detail = f"{len(failed)}/{len(checks)} checks failed: " + "; ".join(
        f"{c.name}: {c.detail}" for c in failed
    )
    return Verdict(False, detail, evidence, tuple(checks))


def describe(item: Received) -> str:
    f = item.frame
    reason = f.payload.get("reason")
    tail = f" reason={reason!r}" if isinstance(reason, str) else ""
    return f"{f.msg_type.name} (0x{int(f.msg_type):04X}) status={item.status}{tail}"


def created_by(target: Target) -> str:
    return str(target.me.address)


def ack_id(reply: Received) -> str | None:
    p = reply.frame.payload
    kid = p.get("knowledge_id")
    if kid is None and isinstance(p.get("knowledge_ids"), list) and p["knowledge_ids"]:
        kid = p["knowledge_ids"][0]
    return kid if isinstance(kid, str) else None


def is_ack(reply: Received, *statuses: int) -> bool:
    return reply.frame.msg_type is MsgType.MEMORY_WRITE_ACK and reply.status in statuses


def write(target: Target, peer: Peer, record: dict[str, Any]) -> Received:
    """MEMORY_WRITE ``{amf: record}``; a 201 is remembered for the run's cleanup."""
    reply = peer.request(MsgType.MEMORY_WRITE, {"amf": record})
    kid = ack_id(reply) if is_ack(reply, Status.CREATED) else None
    if kid is not None:
        target.written.append(kid)
    return reply


def write_all(target: Target, peer: Peer, records: Sequence[dict[str, Any]]) -> list[str]:
    """Write each record; raise NodeFaultError on the first that is not acknowledged."""
    ids = []
    for record in records:
        reply = write(target, peer, record)
        if not is_ack(reply, Status.CREATED, Status.OK):
            raise NodeFaultError(f"could not store a seed record: {describe(reply)}", reply.raw)
        ids.append(record["knowledge_id"])
    return ids


def read_results(peer: Peer, payload: dict[str, Any]) -> tuple[Received, list[dict[str, Any]]]:
    """MEMORY_READ; the reply and its ``results`` (empty when it is not a read response)."""
    reply = peer.request(MsgType.MEMORY_READ, payload)
    results = reply.frame.payload.get("results")
    if reply.frame.msg_type is not MsgType.MEMORY_READ_RESPONSE or not isinstance(results, list):
        return reply, []
    return reply, [r for r in results if isinstance(r, dict)]


def read_by_id(peer: Peer, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The records the node returns for ``ids``, by knowledge_id."""
    _, results = read_results(peer, {"ids": list(ids)})
    return {r["knowledge_id"]: r for r in results if isinstance(r.get("knowledge_id"), str)}


def x_state(record: dict[str, Any]) -> dict[str, Any]:
    """The node's view (PROFILE §6 ``vendor_extensions["x-state"]``), or {}."""
    ext = record.get("vendor_extensions")
    state = ext.get("x-state") if isinstance(ext, dict) else None
    return state if isinstance(state, dict) else {}


def check(name: str, passed: bool, detail: str) -> Check:
    return Check(name, bool(passed), detail)


Procedure = Callable[[Target], Verdict]


@dataclass(frozen=True, slots=True)
class Spec:
    id: str
    name: str
    run: Procedure
