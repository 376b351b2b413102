"""The history charts' geometry: untrusted numbers (NaN, infinities, ±1e308, one value, none)
always give finite coordinates inside the plot, time on x, the threshold as a line."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from recipes_app import history_charts
from recipes_app.history_charts import BOTTOM, HEIGHT, LEFT, RIGHT, TOP, WIDTH, Sample, chart

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def samples(*values: float, meets: bool | None = None) -> list[Sample[int]]:
    return [
        Sample(when=T0 + timedelta(days=i), value=v, meets=meets, ref=i)
        for i, v in enumerate(values)
    ]


def inside(drawn: history_charts.Chart[int]) -> bool:
    return all(
        LEFT <= float(p.x) <= WIDTH - RIGHT and TOP <= float(p.y) <= HEIGHT - BOTTOM
        for p in drawn.points
    )


def test_it_plots_time_on_x_and_higher_values_higher():
    drawn = chart(samples(100.0, 300.0, 200.0), threshold=150.0)

    xs = [float(p.x) for p in drawn.points]
    ys = [float(p.y) for p in drawn.points]
    assert xs == [LEFT, LEFT + (WIDTH - LEFT - RIGHT) / 2, WIDTH - RIGHT]
    assert ys[1] == TOP  # the highest value at the top
    assert ys[0] == HEIGHT - BOTTOM  # the lowest at the bottom
    assert ys[1] < ys[2] < float(drawn.threshold_y) < ys[0]
    assert drawn.line == " ".join(f"{p.x},{p.y}" for p in drawn.points)


def test_samples_in_any_order_are_drawn_oldest_first():
    drawn = chart(list(reversed(samples(1.0, 2.0, 3.0))), threshold=None)
    assert [p.sample.ref for p in drawn.points] == [0, 1, 2]
    assert drawn.first == T0
    assert drawn.last == T0 + timedelta(days=2)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_values_are_not_plotted_but_counted(bad):
    drawn = chart(samples(10.0, bad, 20.0), threshold=15.0)
    assert [p.sample.value for p in drawn.points] == [10.0, 20.0]
    assert drawn.unplotted == 1
    assert inside(drawn)


def test_the_largest_doubles_do_not_overflow_the_range():
    drawn = chart(samples(1.7e308, -1.7e308, 0.0), threshold=1e308)

    assert inside(drawn)
    assert all(math.isfinite(float(c)) for p in drawn.points for c in (p.x, p.y))
    assert float(drawn.points[1].y) == HEIGHT - BOTTOM
    assert float(drawn.points[0].y) == TOP
    assert float(drawn.points[2].y) == pytest.approx(TOP + (HEIGHT - TOP - BOTTOM) / 2, abs=0.1)


def test_one_value_or_equal_values_sit_inside_a_padded_axis():
    one = chart(samples(-5.0), threshold=None)
    assert one.low < -5.0 < one.high
    assert inside(one)
    assert float(one.points[0].x) == LEFT + (WIDTH - LEFT - RIGHT) / 2
    zero = chart(samples(0.0, 0.0), threshold=None)
    assert zero.low < 0.0 < zero.high


def test_a_non_finite_threshold_draws_no_line_and_no_samples_draw_nothing():
    assert chart(samples(1.0, 2.0), threshold=math.nan).threshold_y == ""
    empty = chart([], threshold=300.0)
    assert empty.points == []
    assert empty.line == ""
    assert empty.first is None
    assert empty.threshold_y != ""


def test_failing_points_get_a_cross_and_are_counted():
    drawn = chart([*samples(100.0, meets=False), *samples(400.0, meets=True)[:1]], threshold=300.0)
    failing = [p for p in drawn.points if p.fails]
    assert drawn.failing == len(failing) == 1
    assert failing[0].cross.count("M") == 2
    assert failing[0].cross.count("L") == 2
