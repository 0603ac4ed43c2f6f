"""The node's replication as one ``SyncView`` (the inspector's peers page), and the lag
samples the replicator keeps for its chart.

Safe to call from any thread (the HTTP API's pool, as ``/v1/health``'s totals are): it
copies the links, members and board tables it reads (each copy is one C-level call, so a
table the event loop changes meanwhile is read whole) and reads the store, which any thread
may. Each peer costs at most two bounded change-log reads (``amcp.sync.lag``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from amcp.node.peerlink import PeerLink
from amcp.store.base import Change, Store
from amcp.sync.lag import PeerLag, push_backlog
from amcp.sync.members import Member
from amcp.sync.replica import Replica
from amcp.sync.status import InboundPull
from amcp.sync.view import NodeSelf, PeerRow, SyncView, TheirLag

MAX_INBOUND_ROWS = 256  # peers that only dial us, shown (the tables behind hold 4,096)


class _Tables:
    """One read of the replica's tables, so every row is built from the same moment."""

    def __init__(self, replica: Replica, store: Store, now: float) -> None:
        board = replica.board
        self.replica, self.store, self.now = replica, store, now
        self.mono = time.monotonic()
        self.members: dict[str, Member] = dict(replica.membership.members)
        self.inbound = dict(board.inbound)
        self.inbound_at = dict(board.inbound_at)
        self.pulls: dict[str, InboundPull] = dict(board.inbound_pulls)

    def came_from(self, key: str | None) -> Callable[[Change], bool] | None:
        """The replicator's no-echo rule: what came from that peer never goes back."""
        if key is None:
            return None
        source_of = self.replica.source_of

        def skip(change: Change) -> bool:
            src = source_of(change.op.value, change.knowledge_id)
            return src is not None and key in (src.peer, src.origin)

        return skip

    def lag_after(self, since: int, key: str | None) -> TheirLag:
        backlog = push_backlog(self.store, since, self.came_from(key))
        return TheirLag(backlog.records, backlog.capped, backlog.age_s(self.now))

    def member(self, key: str | None) -> tuple[str | None, float | None]:
        found = self.members.get(key) if key is not None else None
        if found is None:
            return None, None
        return found.state.value, max(0.0, self.mono - found.changed_at)

    def inbound_counts(self, key: str | None) -> Mapping[str, int] | None:
        counts = self.inbound.get(key) if key is not None else None
        return counts.to_dict() if counts is not None else None


def _link_state(link: PeerLink) -> str:
    if link.connected:
        return "connected"
    return "offline" if link.failures or link.status.state == "offline" else "connecting"


def _latest(*times: float | None) -> float | None:
    seen = [t for t in times if t is not None]
    return max(seen) if seen else None


def _link_row(t: _Tables, link: PeerLink) -> PeerRow:
    status, key = link.status, link.key
    pushed = link.saved_pushed()
    queued = t.lag_after(pushed, key)
    pull = t.pulls.get(key) if key is not None else None
    # It has every entry up to the further of: what it acknowledged from our pushes, what
    # it read with its own pulls.
    theirs = queued if pull is None or pull.watermark <= pushed else t.lag_after(
        pull.watermark, key)
    member, since = t.member(key)
    lag_ms = status.lag_ms
    return PeerRow(
        label=status.label, origin="learned" if link.learned else "configured",
        endpoint=link.spec.endpoint, key=key, node_address=status.node_address,
        tier=link.spec.tier, link=_link_state(link), member=member, member_for_s=since,
        last_contact_at=_latest(status.last_contact_at, t.inbound_at.get(key or "")),
        last_sync_at=status.last_sync_at, their_lag=theirs,
        our_lag_s=None if lag_ms is None else lag_ms / 1000,
        our_pull_more=status.last_sync_at is not None and status.behind, queued=queued,
        last_error=status.last_error, last_error_at=status.last_error_at,
        counters=status.counters.to_dict(), inbound=t.inbound_counts(key),
    )


def _inbound_row(t: _Tables, key: str) -> PeerRow:
    found = t.members.get(key)
    pull = t.pulls.get(key)
    member, since = t.member(key)
    return PeerRow(
        label=f"member {key[:12]}", origin="inbound",
        endpoint=found.endpoint if found is not None else None, key=key,
        node_address=found.node_address if found is not None else None, tier=None,
        link=None, member=member, member_for_s=since, last_contact_at=t.inbound_at.get(key),
        last_sync_at=pull.at if pull is not None else None,
        their_lag=t.lag_after(pull.watermark, key) if pull is not None else None,
        our_lag_s=None, our_pull_more=False, queued=None, last_error=None,
        last_error_at=None, counters={}, inbound=t.inbound_counts(key),
    )


def peer_rows(replica: Replica, links: Sequence[PeerLink], store: Store,
              now: float | None = None) -> tuple[PeerRow, ...]:
    """Every link (configured first, as configured), then every member or inbound peer we
    have no link to."""
    t = _Tables(replica, store, time.time() if now is None else now)
    rows = [_link_row(t, link) for link in links]
    linked = {link.key for link in links if link.key is not None}
    others = [k for k in dict.fromkeys([*t.members, *t.inbound_at])
              if k not in linked and k != replica.key]
    rows += [_inbound_row(t, k) for k in others[:MAX_INBOUND_ROWS]]
    return tuple(rows)


def lag_sample(rows: Sequence[PeerRow]) -> dict[str, PeerLag]:
    """The lag part of ``rows``: what the replicator's history keeps."""
    out = {}
    for row in rows:
        theirs = row.their_lag
        if theirs is None and row.our_lag_s is None:
            continue
        out[row.label] = PeerLag(
            their_records=theirs.records if theirs is not None else None,
            their_capped=theirs.capped if theirs is not None else False,
            their_s=theirs.seconds if theirs is not None else None, our_s=row.our_lag_s)
    return out


def sync_view(replica: Replica, links: Sequence[PeerLink], store: Store,
              intervals: Mapping[str, float]) -> SyncView:
    now = time.time()
    me = replica.membership.me
    totals = replica.board.totals.to_dict()
    totals["peers"] = len(links)
    totals["peers_connected"] = sum(1 for link in links if link.connected)
    return SyncView(
        me=NodeSelf(replica.key, replica.node_address, me.endpoint, me.incarnation),
        taken_at=now, totals=totals, peers=peer_rows(replica, links, store, now),
        history=replica.board.history.samples(), intervals=dict(intervals),
    )


__all__ = ["MAX_INBOUND_ROWS", "lag_sample", "peer_rows", "sync_view"]
