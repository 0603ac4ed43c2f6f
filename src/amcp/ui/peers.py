"""The peers and sync-lag page (``/ui/peers``): the node's ``SyncView`` plus its charts.

Who may see it: a caller who may read **every** scope (a token for ``*``, or anyone on a node
without a policy) — the same bar as the review queue's quarantine. Peer addresses, keys and
their last errors (which quote refused records and scopes) describe the whole store, not
one scope's share, so a scoped token gets 403 rather than a filtered page.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from amcp.errors import ForbiddenError
from amcp.session.policy import Mode
from amcp.sync.lag import LagSample
from amcp.sync.view import PeerRow, SyncView
from amcp.ui.charts import Chart, line_chart
from amcp.web.access import Caller

SyncSource = Callable[[], SyncView]
MAX_CHARTS = 8  # peers charted; the table lists them all


@dataclass(frozen=True, slots=True)
class LagCharts:
    label: str
    their: Chart | None  # our log entries it may lack, over time
    ours: Chart | None  # our pull behind its clock, s, over time
    samples: int


@dataclass(frozen=True, slots=True)
class PeersPage:
    view: SyncView | None  # None: this process runs no AMCP node (``amcp http``)
    charts: tuple[LagCharts, ...]

    @property
    def configured(self) -> tuple[PeerRow, ...]:
        return tuple(p for p in self.view.peers if p.origin == "configured") if self.view else ()


def _clock(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%H:%M:%S")


def _chart(samples: Sequence[LagSample], values: Sequence[float | None], *, unit: str,
           fmt: str, whole: bool = False) -> Chart | None:
    points = [(s.at, v) for s, v in zip(samples, values, strict=True) if v is not None]
    if len(points) < 2:
        return None
    xs = [at - points[0][0] for at, _ in points]
    ys = [v for _, v in points]
    top = max(*ys, 1.0)
    if whole:  # a count: an even top, so the middle tick is a whole number too
        top = float(math.ceil(top / 2) * 2)
    return line_chart(xs, ys, x_labels=[_clock(at) for at, _ in points], y_max=top,
                      y_format=fmt + unit)


def lag_charts(view: SyncView) -> tuple[LagCharts, ...]:
    """Per peer (up to ``MAX_CHARTS``, in table order): its two lag series, from the
    replicator's samples; a peer with fewer than two points in a series gets no line."""
    out = []
    for row in view.peers[:MAX_CHARTS]:
        mine = [s for s in view.history if row.label in s.peers]
        if not mine:
            continue
        lags = [s.peers[row.label] for s in mine]
        their = _chart(mine, [None if g.their_records is None else float(g.their_records)
                              for g in lags], unit="", fmt="{:.0f}", whole=True)
        ours = _chart(mine, [g.our_s for g in lags], unit=" s", fmt="{:.1f}")
        out.append(LagCharts(row.label, their, ours, len(mine)))
    return tuple(out)


def peers_page(source: SyncSource | None, who: Caller) -> PeersPage:
    if who.patterns(Mode.READ) is not None:
        raise ForbiddenError("the peers page needs a token that may read every scope ('*'): "
                             "peer addresses, keys and errors are about the whole store")
    if source is None:
        return PeersPage(None, ())
    view = source()
    return PeersPage(view, lag_charts(view))


__all__ = ["MAX_CHARTS", "LagCharts", "PeersPage", "SyncSource", "lag_charts", "peers_page"]
