"""Geometry of the history page's small SVG charts: measured values over time, a threshold line.

Plain Python, no Django: the template draws what this computes. Values come from signed but
contributor-written predicate text, so nothing here trusts them: NaN and infinities are not
plotted (the table beside the chart still lists them), ranges are computed without overflow
(``1e308 - -1e308`` is infinite in floating point), and every coordinate written into the SVG
is a finite number formatted here, never text from the evidence.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

WIDTH = 640
HEIGHT = 180
LEFT = 64  # room for the y-axis labels
RIGHT = 12
TOP = 12
BOTTOM = 28  # room for the first and last dates
MARK = 4.5  # half the size of a point's mark


@dataclass(frozen=True)
class Sample[Ref]:
    """One measured value: when, what, whether it meets the threshold, and what it came from."""

    when: datetime
    value: float
    meets: bool | None  # None: no numeric threshold to compare with
    ref: Ref


@dataclass(frozen=True)
class PlotPoint[Ref]:
    x: str  # SVG user units, formatted
    y: str
    sample: Sample[Ref]

    @property
    def fails(self) -> bool:
        return self.sample.meets is False

    @property
    def cross(self) -> str:
        """The path of the "x" mark a failing point gets (a shape, not only a colour)."""
        x, y, m = float(self.x), float(self.y), MARK
        return (
            f"M{x - m:.1f} {y - m:.1f}L{x + m:.1f} {y + m:.1f}"
            f"M{x - m:.1f} {y + m:.1f}L{x + m:.1f} {y - m:.1f}"
        )


@dataclass(frozen=True)
class Chart[Ref]:
    points: list[PlotPoint[Ref]]  # the finite samples, oldest first
    unplotted: int  # samples that are not finite numbers
    line: str  # polyline points through the plotted samples
    threshold_y: str  # "" when there is no threshold (or it is not finite)
    low: float  # the y axis' range
    high: float
    first: datetime | None
    last: datetime | None
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    right_x: int = WIDTH - RIGHT
    top: int = TOP
    bottom_y: int = HEIGHT - BOTTOM

    @property
    def failing(self) -> int:
        return sum(1 for p in self.points if p.fails)

    @property
    def view_box(self) -> str:
        return f"0 0 {self.width} {self.height}"

    @property
    def label_y(self) -> int:
        return self.height - 8


def _fraction(value: float, low: float, high: float) -> float:
    """Where ``value`` sits between ``low`` and ``high`` (0..1), without overflowing: halves
    are subtracted, so even ``±1.7e308`` give finite differences."""
    span = high / 2 - low / 2
    if span <= 0:
        return 0.5
    return min(1.0, max(0.0, (value / 2 - low / 2) / span))


def _range(values: Sequence[float], threshold: float | None) -> tuple[float, float]:
    numbers = [*values, *([threshold] if threshold is not None else [])]
    if not numbers:
        return 0.0, 1.0
    low, high = min(numbers), max(numbers)
    if low == high:  # one value: give the axis some room around it
        pad = abs(low) / 10 or 1.0
        return low - pad, high + pad
    return low, high


def chart[Ref](samples: Sequence[Sample[Ref]], threshold: float | None) -> Chart[Ref]:
    """Plot ``samples`` (any order) against time, with ``threshold`` as a horizontal line."""
    finite = sorted(
        (s for s in samples if math.isfinite(s.value)), key=lambda s: (s.when, str(s.ref))
    )
    bound = threshold if threshold is not None and math.isfinite(threshold) else None
    low, high = _range([s.value for s in finite], bound)
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM
    first = finite[0].when if finite else None
    last = finite[-1].when if finite else None
    seconds = (last - first).total_seconds() if first and last else 0.0

    def y_of(value: float) -> float:
        return TOP + plot_h * (1 - _fraction(value, low, high))

    points: list[PlotPoint[Ref]] = []
    for index, sample in enumerate(finite):
        if seconds > 0 and first is not None:
            share = (sample.when - first).total_seconds() / seconds
        else:  # every sample at one instant: spread them evenly
            share = (index + 0.5) / len(finite)
        points.append(
            PlotPoint(
                x=f"{LEFT + plot_w * share:.1f}", y=f"{y_of(sample.value):.1f}", sample=sample
            )
        )
    return Chart(
        points=points,
        unplotted=len(samples) - len(finite),
        line=" ".join(f"{p.x},{p.y}" for p in points),
        threshold_y=f"{y_of(bound):.1f}" if bound is not None else "",
        low=low,
        high=high,
        first=first,
        last=last,
    )
