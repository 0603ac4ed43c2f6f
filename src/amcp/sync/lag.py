"""How far behind each peer is, and a bounded history of it. Sans-IO.

Two directions, each from data the node really has:

- **push** (the peer behind us): the change-log entries after the peer's pushed watermark
  that the next round would send — the change log *is* the offline queue
  (docs/replication.md) — counted up to ``BACKLOG_CAP``, and how old the oldest of them is;
- **pull** (us behind the peer): how far our pulled watermark is behind the peer's clock as
  it last told us, in ms (``PeerStatus.lag_ms``). A peer does not say how many entries its
  log holds after our watermark, so there is no record count for this direction.

``LagHistory`` keeps the last ``HISTORY`` samples the replicator takes (every
``SyncConfig.lag_sample_interval``); nothing is persisted: a restarted node starts a new
history, which is what a "since this node started" chart means.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from amcp.store.base import Change, Store

BACKLOG_CAP = 5000  # entries read to count a backlog: bounds one page's or sample's cost
HISTORY = 360  # samples kept (an hour at the default 10 s interval)


@dataclass(frozen=True, slots=True)
class Backlog:
    """What the next push to one peer would consider sending."""

    records: int  # change-log entries after the pushed watermark, not from that peer
    capped: bool  # more than ``BACKLOG_CAP`` entries: ``records`` is a lower bound
    oldest_ms: int | None  # wall-clock ms (HLC physical part) of the oldest of them

    def age_s(self, now: float) -> float | None:
        """Seconds the oldest queued entry has waited (None: nothing queued)."""
        if self.oldest_ms is None:
            return None
        return max(0.0, now - self.oldest_ms / 1000)


def push_backlog(store: Store, since: int, skip: Callable[[Change], bool] | None = None,
                 cap: int = BACKLOG_CAP) -> Backlog:
    """The entries after ``since`` (a pushed watermark) that ``skip`` does not leave out —
    the replicator's own rule: a change that came from the peer is never sent back to it.
    The per-peer scope filter (``send``) needs each record read, so it is not applied: for a
    peer with ``send = ["*"]`` (the default) the count is exact, otherwise an upper bound."""
    rows = store.changes(since, cap + 1)
    capped = len(rows) > cap
    kept = [c for c in rows[:cap] if skip is None or not skip(c)]
    oldest = (kept[0].hlc >> 16) if kept else None
    return Backlog(len(kept), capped, oldest)


@dataclass(frozen=True, slots=True)
class PeerLag:
    """One peer at one sample: both directions, None where there is nothing to say."""

    their_records: int | None  # our log entries it may lack (``SyncView``'s ``TheirLag``)
    their_capped: bool
    their_s: float | None  # age of the oldest of them
    our_s: float | None  # our pull behind its clock


@dataclass(frozen=True, slots=True)
class LagSample:
    at: float  # wall-clock seconds
    peers: Mapping[str, PeerLag]  # by peer label


class LagHistory:
    """The last ``size`` samples, oldest first; safe to read from any thread."""

    def __init__(self, size: int = HISTORY) -> None:
        self._ring: deque[LagSample] = deque(maxlen=size)
        self._lock = threading.Lock()

    def add(self, peers: Mapping[str, PeerLag], at: float | None = None) -> LagSample:
        sample = LagSample(time.time() if at is None else at, dict(peers))
        with self._lock:
            self._ring.append(sample)
        return sample

    def samples(self) -> tuple[LagSample, ...]:
        with self._lock:
            return tuple(self._ring)

    def __len__(self) -> int:
        return len(self._ring)


__all__ = ["BACKLOG_CAP", "HISTORY", "Backlog", "LagHistory", "LagSample", "PeerLag",
           "push_backlog"]
