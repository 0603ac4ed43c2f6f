"""SWIM-style membership over HEALTH_CHECK / HEALTH_RESPONSE (PROFILE §10). Sans-IO.

Each node keeps a table of members ``{node_address, hlc, state, incarnation}`` and sends it
in every HEALTH_CHECK and HEALTH_RESPONSE; the receiver merges it. A member is identified by
its Ed25519 public key (``key``): node URIs carry a capability fingerprint, not an identity,
so two nodes of the same build in the same region have the same URI. Entries also carry
``endpoint`` (``host:port``), without which a member learned through gossip could not be
dialled. Both are additions to PROFILE's entry, recorded in docs/protocol.md.

Merge rule (SWIM): information about a member with a higher incarnation wins; at the same
incarnation ``dead`` beats ``suspect`` beats ``alive``. A node told it is suspect or dead
refutes it by raising its own incarnation, which is a wall-clock millisecond value so a
restarted node starts above anything said about its previous life.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

MAX_MEMBERS = 1024  # entries taken from one message: a peer cannot grow the table without bound


class MemberState(StrEnum):
    ALIVE = "alive"
    SUSPECT = "suspect"
    DEAD = "dead"


_RANK = {MemberState.ALIVE: 0, MemberState.SUSPECT: 1, MemberState.DEAD: 2}


@dataclass(slots=True)
class Member:
    key: str  # the node's Ed25519 public key, base64url
    node_address: str
    endpoint: str | None
    state: MemberState
    incarnation: int
    hlc: int = 0
    changed_at: float = 0.0  # monotonic time of the last state change here

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "node_address": self.node_address, "hlc": self.hlc, "state": self.state.value,
            "incarnation": self.incarnation, "key": self.key,
        }
        if self.endpoint:
            out["endpoint"] = self.endpoint
        return out


def _parse(entry: Any) -> Member | None:
    """One wire entry, or None when it is not one we can use (ignored, never an error:
    a member list is advice, and an older peer may send fewer fields)."""
    if not isinstance(entry, Mapping):
        return None
    key, address, inc = entry.get("key"), entry.get("node_address"), entry.get("incarnation")
    endpoint, hlc = entry.get("endpoint"), entry.get("hlc", 0)
    if not (isinstance(key, str) and 0 < len(key) <= 64 and isinstance(address, str)
            and len(address) <= 256):
        return None
    if isinstance(inc, bool) or not isinstance(inc, int) or not 0 <= inc < 2**63:
        return None
    if endpoint is not None and (not isinstance(endpoint, str) or len(endpoint) > 300):
        return None
    if isinstance(hlc, bool) or not isinstance(hlc, int) or not 0 <= hlc < 2**64:
        hlc = 0
    try:
        state = MemberState(str(entry.get("state")))
    except ValueError:
        return None
    return Member(key, address, endpoint, state, inc, hlc)


class Membership:
    """The member table of one node (itself included)."""

    def __init__(self, key: str, node_address: str, endpoint: str | None, incarnation: int,
                 now: float = 0.0) -> None:
        self.me = Member(key, node_address, endpoint, MemberState.ALIVE, incarnation,
                         changed_at=now)
        self.members: dict[str, Member] = {}

    def entries(self, hlc: int) -> list[dict[str, Any]]:
        self.me.hlc = hlc
        return [self.me.to_wire(), *(m.to_wire() for m in self.members.values())]

    def get(self, key: str) -> Member | None:
        return self.members.get(key)

    def live(self) -> list[Member]:
        return [m for m in self.members.values() if m.state is not MemberState.DEAD]

    def merge(self, entries: Iterable[Any], now: float) -> list[Member]:
        """Merge a received member list; returns members newly learned (to dial)."""
        learned: list[Member] = []
        for i, raw in enumerate(entries):
            if i >= MAX_MEMBERS:
                break
            got = _parse(raw)
            if got is None:
                continue
            if got.key == self.me.key:
                self._refute(got)
                continue
            mine = self.members.get(got.key)
            if mine is None:
                if got.state is MemberState.DEAD:
                    continue  # nothing to learn about a node we never knew
                got.changed_at = now
                self.members[got.key] = got
                learned.append(got)
            elif (got.incarnation, _RANK[got.state]) > (mine.incarnation, _RANK[mine.state]):
                if got.state is not mine.state:
                    mine.changed_at = now
                mine.state, mine.incarnation = got.state, got.incarnation
                mine.endpoint = got.endpoint or mine.endpoint
                mine.node_address, mine.hlc = got.node_address, max(mine.hlc, got.hlc)
        return learned

    def _refute(self, said: Member) -> None:
        if said.state is not MemberState.ALIVE and said.incarnation >= self.me.incarnation:
            self.me.incarnation = said.incarnation + 1

    def heard_from(self, key: str, node_address: str, endpoint: str | None, now: float,
                   hlc: int = 0, incarnation: int | None = None) -> Member:
        """A direct answer (or request) from the member: it is alive."""
        m = self.members.get(key)
        if m is None:
            m = Member(key, node_address, endpoint, MemberState.ALIVE, incarnation or 0,
                       hlc, now)
            self.members[key] = m
            return m
        if m.state is not MemberState.ALIVE:
            m.state, m.changed_at = MemberState.ALIVE, now
            # We saw it ourselves: make our word beat the rumour we held.
            m.incarnation = max(m.incarnation, incarnation or 0) + 1
        elif incarnation is not None and incarnation > m.incarnation:
            m.incarnation = incarnation
        m.node_address, m.hlc = node_address, max(m.hlc, hlc)
        m.endpoint = endpoint or m.endpoint
        return m

    def suspect(self, key: str, now: float) -> None:
        m = self.members.get(key)
        if m is not None and m.state is MemberState.ALIVE:
            m.state, m.changed_at = MemberState.SUSPECT, now

    def tick(self, now: float, suspect_timeout: float) -> list[Member]:
        """Suspects not cleared in time are declared dead; returns them."""
        dead = []
        for m in self.members.values():
            if m.state is MemberState.SUSPECT and now - m.changed_at >= suspect_timeout:
                m.state, m.changed_at = MemberState.DEAD, now
                dead.append(m)
        return dead


__all__ = ["MAX_MEMBERS", "Member", "MemberState", "Membership"]
