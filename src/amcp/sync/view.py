"""``SyncView``: one consistent picture of a node's replication, for the web inspector.

Built by the node (``amcp.node.syncview``) from its links, membership and status board;
plain frozen data, so the page code only formats it. ``/v1/health`` (totals) and ``amcp
peers`` (the board over AMCP) read the same board.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from amcp.sync.lag import LagSample


@dataclass(frozen=True, slots=True)
class TheirLag:
    """How much of our change log the peer may still lack: the entries after the furthest
    point it has — acknowledged by our pushes or read by its own pulls."""

    records: int
    capped: bool  # past ``amcp.sync.lag.BACKLOG_CAP``: at least ``records``
    seconds: float | None  # age of the oldest such entry (None: none)


@dataclass(frozen=True, slots=True)
class PeerRow:
    """One configured, learned or inbound peer as the operator sees it."""

    label: str
    origin: str  # "configured" | "learned" (through membership) | "inbound" (dials us only)
    endpoint: str | None
    key: str | None
    node_address: str | None
    tier: int | None  # None: we do not dial it, so no tier applies
    link: str | None  # our connection: connecting | connected | offline; None: no link
    member: str | None  # SWIM: alive | suspect | dead; None: not in our member table
    member_for_s: float | None  # seconds in that member state
    last_contact_at: float | None  # wall clock
    last_sync_at: float | None
    their_lag: TheirLag | None
    our_lag_s: float | None  # our pull behind its clock (None: no pull finished yet)
    our_pull_more: bool  # our last pull stopped with more batches waiting
    queued: TheirLag | None  # our push backlog (None: we do not push to it)
    last_error: str | None
    last_error_at: float | None
    counters: Mapping[str, int]  # our exchanges on the link
    inbound: Mapping[str, int] | None  # what its own connections sent us


@dataclass(frozen=True, slots=True)
class NodeSelf:
    key: str
    node_address: str
    endpoint: str | None
    incarnation: int


@dataclass(frozen=True, slots=True)
class SyncView:
    me: NodeSelf
    taken_at: float
    totals: Mapping[str, int]
    peers: tuple[PeerRow, ...]
    history: tuple[LagSample, ...]
    intervals: Mapping[str, float]  # gossip, probe, suspect timeout, anti-entropy, sampling


__all__ = ["NodeSelf", "PeerRow", "SyncView", "TheirLag"]
