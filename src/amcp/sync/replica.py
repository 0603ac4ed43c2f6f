"""``Replica``: what the node service and the replicator share about replication. Sans-IO.

- the config (peers, intervals, hop limit) and the membership table;
- the status board (counters, per-peer status) behind ``amcp peers`` and ``/v1/health``;
- where each recently applied change came from (``Source``), so that forwarding gives it the
  right ``origin`` and ``hops`` and never sends it back to the peer it came from;
- a token bucket per pushing peer (a flood is answered 429);
- the loop rule: a change whose origin is this node, or past the hop limit, is 508;
- the verifier that checks a large pulled page in worker processes (``verify_workers``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

from amcp.sync.bulk import Verifier
from amcp.sync.members import Membership
from amcp.sync.peers import SyncConfig
from amcp.sync.status import StatusBoard

log = logging.getLogger("amcp.sync")
MAX_SOURCES = 500_000  # (op, id) → source entries kept; the oldest go first
MAX_BUCKETS = 4096


@dataclass(frozen=True, slots=True)
class Source:
    peer: str  # the key of the peer we received the change from
    origin: str  # the key of the node that first sent it (its writer, as far as we know)
    origin_address: str
    hops: int  # how many times it had been forwarded when it reached us


class _Bucket:
    __slots__ = ("level", "stamp")

    def __init__(self, level: float, stamp: float) -> None:
        self.level, self.stamp = level, stamp


class Replica:
    def __init__(self, config: SyncConfig, key: str, node_address: str,
                 endpoint: str | None = None) -> None:
        self.config = config
        self.key = key  # this node's public key (base64url): its identity in sync
        self.node_address = node_address
        now = time.monotonic()
        self.membership = Membership(key, node_address, endpoint, int(time.time() * 1000), now)
        self.board = StatusBoard()
        self._sources: dict[tuple[str, str], Source] = {}
        self._buckets: dict[str, _Bucket] = {}
        self._lock = threading.Lock()
        # Started on the first large page (amcp.sync.bulk); closed with the replicator.
        self.verifier = Verifier(config.verify_workers) if config.verify_workers else None

    def close(self) -> None:
        """End what the replica started (the verifier's worker processes)."""
        if self.verifier is not None:
            self.verifier.close()

    # ------------------------------------------------------------------ sources

    def note_applied(self, done: Iterable[tuple[str, str]], source: Source) -> None:
        with self._lock:
            for item in done:
                self._sources.pop(item, None)
                self._sources[item] = source
            while len(self._sources) > MAX_SOURCES:
                self._sources.pop(next(iter(self._sources)))

    def source_of(self, op: str, kid: str) -> Source | None:
        return self._sources.get((op, kid))

    # ------------------------------------------------------------------ inbound rules

    def is_loop(self, origin_key: str | None, origin: str | None, hops: int) -> bool:
        """PROFILE §10: a change back at its origin, or relayed past the hop limit.

        Our node URIs name a capability set, not a node, so the origin is compared by key
        (``origin_key``); a peer that sends only ``origin`` is compared by URI, except that
        our own URI alone is not taken for a loop (another node of this build has it too)."""
        if hops > self.config.hop_limit:
            return True
        return origin_key is not None and origin_key == self.key

    def admit_push(self, peer_key: str, changes: int, now: float | None = None) -> bool:
        """Token bucket per peer: ``push_rate`` changes/s, bursts of 10 s worth."""
        now = time.monotonic() if now is None else now
        rate = self.config.push_rate
        cap = rate * 10
        with self._lock:
            bucket = self._buckets.get(peer_key)
            if bucket is None:
                if len(self._buckets) >= MAX_BUCKETS:
                    self._buckets.pop(next(iter(self._buckets)))
                bucket = self._buckets[peer_key] = _Bucket(cap, now)
            bucket.level = min(cap, bucket.level + (now - bucket.stamp) * rate)
            bucket.stamp = now
            if bucket.level < changes:
                return False
            bucket.level -= changes
            return True

    def refused(self, peer_key: str | None, who: str, why: str, **counts: int) -> None:
        """A peer's message refused: counted and logged with the peer's identity."""
        self.board.count(peer_key, **{"refused": 1, **counts})
        log.warning("sync: refused from %s: %s", who, why)

    def bad_peer(self, peer_key: str, who: str, why: str) -> None:
        """A peer sent a bad record (PROFILE §10): counted, logged, and marked suspect."""
        self.board.count(peer_key, refused=1, violations=1)
        self.membership.suspect(peer_key, time.monotonic())
        log.warning("sync: bad record from %s: %s (marked suspect)", who, why)


__all__ = ["Replica", "Source"]
