"""Chart building without a database: bucketing keeps the throttle ratio exact, gaps break lines, figures stay small."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from apps.dashboard.charts import MAX_POINTS, container_figure, downsample, figure_json, shares_figure
from apps.telemetry.selectors import SeriesPoint

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def point(minute: float, *, usage: float | None = 100.0, periods: int | None = 600, throttled: int | None = 0,
          threads: int | None = 4, p95: float | None = None) -> SeriesPoint:  # fmt: skip
    return SeriesPoint(
        ts=T0 + timedelta(minutes=minute),
        usage_mcpu=usage,
        usage_p95_mcpu=p95,
        throttle_ratio=throttled / periods if periods and throttled is not None else None,
        throttled_seconds_per_second=None,
        periods=periods,
        throttled_periods=throttled,
        threads=threads,
    )


def test_a_short_series_is_drawn_point_for_point() -> None:
    points = [point(m, usage=100.0 + m) for m in range(60)]
    buckets = downsample(points)
    assert [b.usage_mcpu for b in buckets] == [100.0 + m for m in range(60)]


def test_bucketing_sums_periods_so_the_ratio_is_not_a_mean_of_ratios() -> None:
    # 4 intervals: 600 periods with 600 throttled, then three with 60 periods and none throttled.
    # Σ throttled / Σ periods = 600 / 780 = 0.769…, while the mean of the ratios would be 0.25.
    points = [point(0, periods=600, throttled=600), *[point(m, periods=60, throttled=0) for m in (1, 2, 3)]]
    (bucket,) = downsample(points, max_points=1)
    assert bucket.throttle_ratio == pytest.approx(600 / 780)


def test_bucketing_keeps_the_mean_usage_the_peak_and_the_most_threads() -> None:
    points = [point(m, usage=u, threads=t) for m, (u, t) in enumerate([(100, 4), (500, 9), (300, 6), (100, 4)])]
    first, second = downsample(points, max_points=2)
    assert (first.usage_mcpu, first.usage_peak_mcpu, first.threads) == (300.0, 500.0, 9)
    assert (second.usage_mcpu, second.usage_peak_mcpu, second.threads) == (200.0, 300.0, 6)


def test_a_day_of_minutes_fits_in_the_point_budget() -> None:
    points = [point(m) for m in range(24 * 60)]
    assert len(downsample(points)) <= MAX_POINTS


def test_a_gap_in_collection_breaks_the_line_instead_of_bridging_it() -> None:
    points = [point(m) for m in range(10)] + [point(m) for m in range(40, 50)]
    buckets = downsample(points)
    gaps = [b for b in buckets if b.usage_mcpu is None and b.throttle_ratio is None and b.threads is None]
    assert len(buckets) == 21 and len(gaps) == 1
    assert buckets[10] is gaps[0]


def test_intervals_without_periods_have_no_ratio_rather_than_zero() -> None:
    (bucket,) = downsample([point(0, periods=None, throttled=None), point(1, periods=0, throttled=0)], max_points=1)
    assert bucket.throttle_ratio is None


def test_no_points_give_no_buckets_and_a_zero_budget_is_an_error() -> None:
    assert downsample([]) == []
    with pytest.raises(ValueError, match="max_points 0"):
        downsample([point(0)], max_points=0)


def figure_dict(**overrides: object) -> dict:
    args: dict = {
        "since": T0,
        "until": T0 + timedelta(hours=1),
        "shares_floor_mcpu": 1385,
        "quota_ceiling_mcpu": 500,
        "target_ratio": 0.1,
        "resolution": "raw",
    }
    args.update(overrides)
    points = args.pop("points", [point(m, usage=490, periods=600, throttled=360) for m in range(60)])
    return json.loads(figure_json(container_figure(points, **args)))


def test_the_container_figure_has_reference_lines_across_the_whole_span() -> None:
    traces = {t["name"]: t for t in figure_dict()["data"]}
    hour_ms = 3600 * 1000
    assert traces["shares floor 1,385m"]["x"] == [T0.timestamp() * 1000, T0.timestamp() * 1000 + hour_ms]
    assert traces["shares floor 1,385m"]["y"] == [1385, 1385]
    assert traces["quota ceiling 500m"]["y"] == [500, 500]
    assert traces["target 10%"]["y"] == [10, 10]
    assert set(traces["throttle ratio"]["y"]) == {60.0}  # 360 of 600 periods, in percent


def test_a_container_without_limit_or_floor_draws_no_reference_lines() -> None:
    names = {t["name"] for t in figure_dict(shares_floor_mcpu=None, quota_ceiling_mcpu=None)["data"]}
    assert names == {"usage", "throttle ratio", "target 10%", "threads"}


def test_hourly_figures_add_the_hours_p95() -> None:
    points = [point(h * 60, usage=200, p95=450) for h in range(24)]
    traces = {t["name"]: t for t in figure_dict(points=points, resolution="hourly")["data"]}
    assert set(traces["usage p95 per hour"]["y"]) == {450}
    assert "usage (hourly mean)" in traces


def test_a_day_of_raw_points_stays_under_30_kb() -> None:
    points = [point(m, usage=400 + m % 50, periods=600, throttled=m % 600) for m in range(24 * 60)]
    payload = figure_json(
        container_figure(
            points,
            since=T0,
            until=T0 + timedelta(days=1),
            shares_floor_mcpu=1385,
            quota_ceiling_mcpu=500,
            target_ratio=0.1,
            resolution="raw",
        )
    )
    assert len(payload) < 30_000


def test_figure_json_cannot_close_the_script_tag_it_sits_in() -> None:
    fig = shares_figure(["ns/</script><script>alert(1)</script>"], [100], [1.0])
    payload = figure_json(fig)
    assert "</script>" not in payload and "<" not in payload
    assert json.loads(payload)["data"][0]["y"] == ["ns/</script><script>alert(1)</script>"]


def test_shares_figure_refuses_inputs_of_different_lengths() -> None:
    with pytest.raises(ValueError, match="differ in length: 2, 1, 1"):
        shares_figure(["a", "b"], [1], [1.0])
