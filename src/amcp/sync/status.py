"""Sync counters and per-peer status: what ``amcp peers``, ``stats`` and ``/v1/health`` show.

Plain data, updated by the replicator (outbound links) and the node service (inbound pushes
and pulls) on their own threads; each update is one attribute increment, and a reader
tolerates a count that is one behind.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from amcp.sync.lag import LagHistory

COUNTERS = ("pushed", "pulled", "applied", "duplicates", "conflicts", "refused", "loops",
            "violations", "rate_limited", "repairs", "digest_rounds", "resolved_conflicts",
            "malformed")


@dataclass(slots=True)
class Counters:
    pushed: int = 0  # changes we sent in SYNC_PUSH and the peer acknowledged
    pulled: int = 0  # changes received in SYNC_PULL_RESPONSE
    applied: int = 0  # received changes that changed this store
    duplicates: int = 0  # received changes already reflected here
    conflicts: int = 0  # received changes refused by a write rule (410, 409, 412, scope)
    refused: int = 0  # whole messages refused: bad record, scope, clock, loop, flood
    loops: int = 0  # 508 SYNC_LOOP answered or received
    violations: int = 0  # records with a wrong id / checksum / envelope / signature
    rate_limited: int = 0  # pushes answered 429
    repairs: int = 0  # scopes whose digests differed and were re-synced
    digest_rounds: int = 0
    resolved_conflicts: int = 0  # supersede conflicts decided by the PROFILE §10 rule
    malformed: int = 0  # received entries refused for their shape or an op not applied here

    def add(self, **counts: int) -> None:
        for name, n in counts.items():
            setattr(self, name, getattr(self, name) + n)

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass(slots=True)
class PeerStatus:
    """One peer as the operator sees it."""

    label: str
    endpoint: str | None
    key: str | None = None
    node_address: str | None = None
    tier: int = 1
    configured: bool = True
    state: str = "unknown"  # connecting | connected | offline, or a member state
    last_error: str | None = None
    last_error_at: float | None = None
    last_sync_at: float | None = None
    last_probe_at: float | None = None  # the last HEALTH_CHECK it answered
    pulled_watermark: int = 0  # the peer's HLC we have pulled up to
    pushed_watermark: int = 0  # our HLC we have pushed up to
    remote_hlc: int = 0  # the peer's clock as it last told us
    behind: bool = True  # the last pull ended with "more" (or none finished yet)
    counters: Counters = field(default_factory=Counters)

    @property
    def lag_ms(self) -> int | None:
        """How far our pull is behind the peer's log, in ms of its clock (0: caught up at the
        last round; None: no pull has finished yet)."""
        if self.last_sync_at is None:
            return None
        if not self.behind or not self.remote_hlc:
            return 0
        return max(0, (self.remote_hlc >> 16) - (self.pulled_watermark >> 16))

    @property
    def last_contact_at(self) -> float | None:
        """When we last heard from it: an exchange that finished or a probe it answered."""
        seen = [t for t in (self.last_sync_at, self.last_probe_at) if t is not None]
        return max(seen) if seen else None

    def error(self, message: str) -> None:
        self.last_error, self.last_error_at = message[:300], time.time()

    def to_dict(self) -> dict[str, Any]:
        return {
            "peer": self.label, "endpoint": self.endpoint, "key": self.key,
            "node_address": self.node_address, "tier": self.tier,
            "configured": self.configured, "state": self.state, "lag_ms": self.lag_ms,
            "last_error": self.last_error, "last_error_at": self.last_error_at,
            "last_sync_at": self.last_sync_at, "last_probe_at": self.last_probe_at,
            "pulled_watermark": self.pulled_watermark,
            "pushed_watermark": self.pushed_watermark, "counters": self.counters.to_dict(),
        }


@dataclass(slots=True)
class InboundPull:
    """What a peer that dials us last pulled: how far it has read our log."""

    at: float  # wall-clock seconds
    watermark: int  # our HLC it has pulled up to
    more: bool  # it stopped with more to read


class StatusBoard:
    """Every peer's status and the node's totals, keyed by peer label; what peers that dial
    us sent (keyed by their key); and the lag history the replicator samples."""

    def __init__(self) -> None:
        self.totals = Counters()
        self.peers: dict[str, PeerStatus] = {}
        self.inbound: dict[str, Counters] = {}  # per peer key: what its connections sent us
        self.inbound_at: dict[str, float] = {}  # per peer key: its last push or pull here
        self.inbound_pulls: dict[str, InboundPull] = {}
        self.history = LagHistory()
        self._lock = threading.Lock()

    def peer(self, label: str, endpoint: str | None, **kw: Any) -> PeerStatus:
        with self._lock:
            found = self.peers.get(label)
            if found is None:
                found = self.peers[label] = PeerStatus(label, endpoint, **kw)
            return found

    def count(self, peer_key: str | None, **counts: int) -> None:
        """Totals and, for an inbound peer, its own counters."""
        self.totals.add(**counts)
        if peer_key is not None:
            with self._lock:
                mine = self.inbound.get(peer_key)
                if mine is None:
                    if len(self.inbound) >= 4096:  # keyed by peer identity: bound it
                        self.inbound.pop(next(iter(self.inbound)))
                    mine = self.inbound[peer_key] = Counters()
                self._seen(peer_key, time.time())
            mine.add(**counts)

    def pulled_by(self, peer_key: str, watermark: int, *, more: bool) -> None:
        """A peer that dials us pulled our log up to ``watermark``."""
        with self._lock:
            if peer_key not in self.inbound_pulls and len(self.inbound_pulls) >= 4096:
                self.inbound_pulls.pop(next(iter(self.inbound_pulls)))
            now = time.time()
            self.inbound_pulls[peer_key] = InboundPull(now, watermark, more)
            self._seen(peer_key, now)

    def contact(self, peer_key: str) -> None:
        """A peer that dials us was heard from (a HEALTH_CHECK, say)."""
        with self._lock:
            self._seen(peer_key, time.time())

    def _seen(self, peer_key: str, now: float) -> None:
        """Under the lock: the peer's last contact (bounded as the counters are)."""
        if peer_key not in self.inbound_at and len(self.inbound_at) >= 4096:
            self.inbound_at.pop(next(iter(self.inbound_at)))
        self.inbound_at[peer_key] = now

    def to_dict(self) -> dict[str, Any]:
        return {
            "totals": self.totals.to_dict(),
            "peers": [p.to_dict() for p in self.peers.values()],
            "inbound": {k: c.to_dict() for k, c in list(self.inbound.items())[:64]},
        }


__all__ = ["COUNTERS", "Counters", "InboundPull", "PeerStatus", "StatusBoard"]
