"""Line charts as server-rendered SVG: no chart library, no script, nothing to download.

A chart is a few dozen points; drawing it on the server keeps the page within its weight
budget and within a CSP that allows no inline script. The template draws the ``Chart``'s
path and labels inside an ``<svg>`` with a ``<title>`` for screen readers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

WIDTH = 640
HEIGHT = 200
PAD_X = 44
PAD_Y = 18


@dataclass(frozen=True, slots=True)
class Tick:
    x: float
    y: float
    label: str


@dataclass(frozen=True, slots=True)
class Chart:
    path: str  # the polyline's "d" attribute
    x_ticks: tuple[Tick, ...]
    y_ticks: tuple[Tick, ...]
    marker_x: float | None  # a vertical marker (e.g. "now"), in SVG units
    width: int = WIDTH
    height: int = HEIGHT


def line_chart(
    xs: Sequence[float], ys: Sequence[float], *, x_labels: Sequence[str] | None = None,
    y_max: float | None = None, marker: float | None = None, y_format: str = "{:.2f}",
) -> Chart:
    """Scale ``(xs, ys)`` into the plot area; ``x_labels`` label the first, middle and
    last point (defaults: the x values); ``marker`` is an x value to draw a line at."""
    if not xs:
        return Chart("", (), (), None)
    x0, x1 = min(xs), max(xs)
    top = y_max if y_max is not None else max(*ys, 1e-9)
    span_x = (x1 - x0) or 1.0

    def sx(x: float) -> float:
        return round(PAD_X + (x - x0) / span_x * (WIDTH - 2 * PAD_X), 1)

    def sy(y: float) -> float:
        return round(HEIGHT - PAD_Y - (y / top) * (HEIGHT - 2 * PAD_Y), 1)

    pairs = zip(xs, ys, strict=True)
    path = " ".join(f"{'M' if i == 0 else 'L'}{sx(x)},{sy(y)}" for i, (x, y) in enumerate(pairs))
    picks = sorted({0, len(xs) // 2, len(xs) - 1})
    labels = list(x_labels) if x_labels is not None else [f"{x:g}" for x in xs]
    x_ticks = tuple(Tick(sx(xs[i]), HEIGHT - 2, labels[i]) for i in picks)
    y_ticks = tuple(Tick(PAD_X - 6, sy(v), y_format.format(v)) for v in (0.0, top / 2, top))
    mark = sx(marker) if marker is not None and x0 <= marker <= x1 else None
    return Chart(path, x_ticks, y_ticks, mark)


__all__ = ["Chart", "Tick", "line_chart"]
