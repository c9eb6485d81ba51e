"""Chart building without a database: bucketing keeps the throttle ratio exact, gaps break lines, figures stay small."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from apps.dashboard.charts import (
    MAX_POINTS,
    MIN_SPAN_S,
    container_figure,
    downsample,
    figure_json,
    lone_point_note,
    shares_figure,
)
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


def ms(ts: datetime) -> float:
    return ts.timestamp() * 1000


def test_the_time_axis_starts_at_the_first_sample_not_the_window_start() -> None:
    # 30 minutes of samples in a 1 h window: the axis and the reference lines span those 30 minutes.
    points = [point(m, usage=490, periods=600, throttled=360) for m in range(30, 60)]
    fig = figure_dict(points=points)
    span = [ms(T0 + timedelta(minutes=30)), ms(T0 + timedelta(hours=1))]
    assert fig["layout"]["xaxis"]["range"] == span
    assert {tuple(t["x"]) for t in fig["data"] if t["name"].startswith(("quota", "shares", "target"))} == {tuple(span)}


def test_a_lone_point_gets_a_readable_axis_around_it() -> None:
    # One sample at the window's end would give a zero-width axis; it gets MIN_SPAN_S, with the point inside.
    fig = figure_dict(points=[point(60)])
    start, end = fig["layout"]["xaxis"]["range"]
    assert end - start >= MIN_SPAN_S * 1000 and start < ms(T0 + timedelta(hours=1)) < end


def test_the_ceiling_the_floor_and_the_target_differ_in_colour_and_dash() -> None:
    lines = {t["name"].split(" ")[0]: t["line"] for t in figure_dict()["data"]}
    ceiling, floor, target = lines["quota"], lines["shares"], lines["target"]
    assert ceiling["color"] != target["color"] and ceiling["dash"] != target["dash"]
    assert ceiling["dash"] != floor["dash"]  # the same panel: red and green alone fail colour-blind readers


def test_usage_is_drawn_over_the_reference_lines_and_listed_first() -> None:
    # Plotly draws traces in order: usage last of its panel, so a usage line at the ceiling is not under it.
    traces = figure_dict(resolution="hourly")["data"]
    order = [t["name"] for t in traces]
    usage = order.index("usage (hourly mean)")
    assert usage > order.index("quota ceiling 500m") and usage > order.index("shares floor 1,385m")
    assert usage > order.index("usage p95 per hour")
    assert order.index("throttle ratio") > order.index("target 10%")
    legend = [t["name"] for t in sorted(traces, key=lambda t: t["legendrank"])]
    assert legend[:2] == ["usage (hourly mean)", "usage p95 per hour"]


def test_a_container_without_a_quota_has_no_throttle_ratio_panel() -> None:
    # No CPU limit: no CFS quota, no periods counted, no ratio to draw.
    points = [point(m, periods=None, throttled=None) for m in range(60)]
    fig = figure_dict(points=points, shares_floor_mcpu=None, quota_ceiling_mcpu=None)
    assert {t["name"] for t in fig["data"]} == {"usage", "threads"}
    titles = [a["text"] for a in fig["layout"]["annotations"]]
    assert titles == ["CPU usage (millicores)", "Threads"]
    assert "yaxis2" not in fig["layout"]
    usage, threads = fig["layout"]["yaxis"]["domain"], fig["layout"]["yaxis3"]["domain"]
    assert threads[1] < usage[0] and usage[1] == 1.0 and threads[0] == 0.0  # the two panels fill the plot
    assert fig["layout"]["height"] < figure_dict()["layout"]["height"]


def test_periods_in_the_series_keep_the_ratio_panel_when_the_ceiling_is_unknown() -> None:
    # Without a finding there is no ceiling to pass, but counted CFS periods mean there is (or was) a quota.
    names = {t["name"] for t in figure_dict(shares_floor_mcpu=None, quota_ceiling_mcpu=None)["data"]}
    assert names == {"usage", "throttle ratio", "target 10%", "threads"}


def test_a_lone_point_is_drawn_as_a_dot_and_said_in_words() -> None:
    one = [point(0, usage=200, p95=450)]
    fig = figure_dict(points=one, resolution="hourly")
    data = {t["name"]: t for t in fig["data"]}
    for name in ("usage (hourly mean)", "usage p95 per hour", "throttle ratio", "threads"):
        assert data[name]["mode"] == "markers", name
    assert data["quota ceiling 500m"]["mode"] == "lines"
    assert lone_point_note(one, "hourly") == (
        "One hourly point so far (the hour from 09:00 UTC), shown as a dot: this window charts hourly averages, "
        "so lines start once a second hour has samples."
    )
    assert lone_point_note([point(5)], "raw") == (
        "One sample interval so far (ending 09:05 UTC), shown as a dot: lines start with the next collection."
    )


def test_two_points_draw_lines_and_need_no_note() -> None:
    two = [point(0), point(60)]
    assert {t["mode"] for t in figure_dict(points=two)["data"]} == {"lines"}
    assert lone_point_note(two, "hourly") is None


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
    assert json.loads(payload)["data"][0]["y"] == ["ns/&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;"]


def test_shares_figure_refuses_inputs_of_different_lengths() -> None:
    with pytest.raises(ValueError, match="differ in length: 2, 1, 1"):
        shares_figure(["a", "b"], [1], [1.0])


@pytest.mark.django_db
def test_a_chart_and_the_report_show_the_same_throttle_ratio_for_the_same_window():
    """One formula (telemetry.counters.throttle_ratio): the chart's points merged into one bucket give the report's
    ratio for the hour — clamped to 100 % alike when the counters are inconsistent (more throttled than periods)."""
    from apps.advisor.models import Finding
    from apps.advisor.services import refresh_findings
    from apps.dashboard.selectors import pod_detail
    from apps.telemetry.models import Sample
    from tests.builders import build_cluster

    now = datetime(2026, 12, 1, 12, 0, 30, tzinfo=UTC)
    cluster = build_cluster("same-ratio", minutes=30, step_s=60, now=now)

    def chart_and_report(pod_name: str) -> tuple[float | None, float | None]:
        pod = cluster.pods.get(name=pod_name)
        detail = pod_detail(pod, window="1h", now=now)
        (bucket,) = downsample(detail.containers[0].points, max_points=1)
        return bucket.throttle_ratio, Finding.objects.get(container__pod=pod, window="1h").throttle_ratio

    chart, report = chart_and_report("api-0")
    assert report == pytest.approx(0.6) and chart == pytest.approx(report)
    worker = Sample.objects.filter(container__pod__cluster=cluster, container__pod__name="worker-0")
    for sample in worker.filter(periods_delta__gt=0):
        Sample.objects.filter(pk=sample.pk).update(throttled_periods_delta=2 * (sample.periods_delta or 0))
    refresh_findings(cluster, now=now)
    assert chart_and_report("worker-0") == (1.0, 1.0)
