"""Window summaries: ratios over deltas, gaps, resets, undefined ratios, lifetime figures, hourly rollups."""

from __future__ import annotations

import math
import re
import statistics
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apps.advisor.windows import (
    RollupRow,
    SampleRow,
    percentile,
    period_throttled_us,
    summarize_rollups,
    summarize_window,
)
from apps.telemetry.counters import BadCounter
from apps.telemetry.readings import CounterReading
from tests.advisor.series import lifetime_summary, rows_from_readings

FIXTURES = Path(__file__).parents[1] / "fixtures"
T0 = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
HOUR_LATER = T0 + timedelta(hours=1)


def row(
    seconds: float,
    *,
    interval_s: float | None = 15.0,
    periods: int | None = 150,
    throttled: int | None = 0,
    throttled_s: float | None = 0.0,
    usage_s: float | None = 1.5,
    threads: int | None = None,
    periods_total: int | None = None,
    throttled_total: int | None = None,
) -> SampleRow:
    return SampleRow(
        ts=T0 + timedelta(seconds=seconds),
        interval_s=interval_s,
        periods_delta=periods,
        throttled_periods_delta=throttled,
        throttled_seconds_delta=throttled_s,
        usage_seconds_delta=usage_s,
        threads=threads,
        periods_total=periods_total,
        throttled_periods_total=throttled_total,
    )


def reading(seconds: float, **counters: Any) -> CounterReading:
    return CounterReading(
        namespace="shop", pod="web-1", container="app", ts=T0 + timedelta(seconds=seconds), **counters
    )


# summarize_window


def test_ratio_is_throttled_periods_over_periods_across_the_window() -> None:
    rows = [row(15 * i, throttled=t) for i, t in enumerate((15, 30, 0, 45), start=1)]
    summary = summarize_window(rows, T0, HOUR_LATER, expected_interval_s=15)
    assert summary.periods == 600
    assert summary.throttled_periods == 90
    assert summary.throttle_ratio == pytest.approx(0.15)
    assert summary.samples == 4
    assert summary.covered_seconds == 60
    assert not summary.lifetime


def test_throttled_seconds_are_per_second_of_covered_time() -> None:
    rows = [row(15, throttled_s=3.0), row(30, throttled_s=6.0)]
    assert summarize_window(rows, T0, HOUR_LATER, 15).throttled_seconds_per_second == pytest.approx(0.3)


def test_average_usage_is_weighted_by_time_and_max_is_the_busiest_interval() -> None:
    rows = [row(10, interval_s=10, usage_s=1.0), row(30, interval_s=20, usage_s=1.0)]
    summary = summarize_window(rows, T0, HOUR_LATER, expected_interval_s=15)
    assert summary.usage_avg_mcpu == pytest.approx(2.0 / 30 * 1000)  # 66.7m, not the mean of 100m and 50m
    assert summary.usage_max_mcpu == pytest.approx(100)


def test_usage_percentiles_agree_with_statistics_quantiles() -> None:
    usages = [0.1 * ((i * 37) % 60) for i in range(60)]  # 0–5.9 s per 15 s, shuffled
    rows = [row(15 * (i + 1), usage_s=u) for i, u in enumerate(usages)]
    summary = summarize_window(rows, T0, HOUR_LATER, 15)
    rates_mcpu = [u / 15 * 1000 for u in usages]
    cuts = statistics.quantiles(rates_mcpu, n=100, method="inclusive")
    assert summary.usage_p95_mcpu == pytest.approx(cuts[94])
    assert summary.usage_p99_mcpu == pytest.approx(cuts[98])


def test_an_interval_longer_than_three_expected_ones_is_ignored_not_spread() -> None:
    rows = [row(15, throttled=15), row(135, interval_s=120, periods=1200, throttled=1200, usage_s=100.0), row(150)]
    summary = summarize_window(rows, T0, HOUR_LATER, expected_interval_s=15)
    assert summary.periods == 300
    assert summary.throttle_ratio == pytest.approx(0.05)
    assert summary.gaps_ignored == 1
    assert summary.covered_seconds == 30
    assert summary.usage_max_mcpu == pytest.approx(100)  # the outage's 100 s of CPU went nowhere


def test_a_row_belongs_to_the_window_its_end_falls_in() -> None:
    rows = [row(0, throttled=150), row(15), row(3600, throttled=150), row(3615, throttled=150)]
    summary = summarize_window(rows, T0, HOUR_LATER, 15)
    assert summary.periods == 300  # the rows ending at +15 s and at +3600 s
    assert summary.throttled_periods == 150


def test_no_periods_in_the_window_leaves_the_ratio_undefined_not_zero() -> None:
    rows = [row(15, periods=0, throttled=0), row(30, periods=0, throttled=0)]
    summary = summarize_window(rows, T0, HOUR_LATER, 15)
    assert summary.periods == 0
    assert summary.throttle_ratio is None


def test_a_container_without_cfs_counters_has_no_periods_at_all() -> None:
    rows = [
        row(15, periods=None, throttled=None, throttled_s=None),
        row(30, periods=None, throttled=None, throttled_s=None),
    ]
    summary = summarize_window(rows, T0, HOUR_LATER, 15)
    assert summary.periods is None
    assert summary.throttle_ratio is None
    assert summary.throttled_seconds_per_second is None
    assert summary.usage_avg_mcpu == pytest.approx(100)


def test_an_empty_window_reports_nothing_as_unknown() -> None:
    summary = summarize_window([], T0, HOUR_LATER, 15)
    assert summary.samples == 0
    assert summary.periods is None
    assert summary.usage_p95_mcpu is None
    assert summary.threads_max is None


def test_threads_reported_as_zero_mean_not_collected() -> None:
    assert summarize_window([row(15, threads=0)], T0, HOUR_LATER, 15).threads_max is None
    assert summarize_window([row(15, threads=3), row(30, threads=9)], T0, HOUR_LATER, 15).threads_max == 9


def test_a_container_seen_once_falls_back_to_lifetime_figures() -> None:
    rows = [row(15, interval_s=None, periods=None, throttled=None, periods_total=1000, throttled_total=250)]
    summary = summarize_window(rows, T0, HOUR_LATER, 15)
    assert summary.lifetime
    assert summary.throttle_ratio == pytest.approx(0.25)
    assert summary.window_start is None


def test_bad_window_arguments_and_negative_deltas_are_rejected() -> None:
    with pytest.raises(ValueError, match="before it starts"):
        summarize_window([], HOUR_LATER, T0, 15)
    with pytest.raises(ValueError, match="0"):
        summarize_window([], T0, HOUR_LATER, 0)
    with pytest.raises(ValueError, match="-5"):
        summarize_window([row(15, periods=-5)], T0, HOUR_LATER, 15)


def test_rows_given_as_a_generator_are_filtered_the_same_way() -> None:
    rows = [row(0, throttled=150), row(15), row(30, throttled=150)]
    from_list = summarize_window(rows, T0, HOUR_LATER, 15)
    from_generator = summarize_window((r for r in rows), T0, HOUR_LATER, 15)
    assert from_list == from_generator
    assert from_list.throttled_periods == 150


@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.floats(-5, 100)),
            st.one_of(st.none(), st.integers(0, 10_000)),
            st.one_of(st.none(), st.integers(0, 10_000)),
        ),
        max_size=40,
    )
)
def test_the_ratio_stays_between_zero_and_one_whatever_the_rows(
    raw: list[tuple[float | None, int | None, int | None]],
) -> None:
    rows = [row(15 * (i + 1), interval_s=iv, periods=p, throttled=t) for i, (iv, p, t) in enumerate(raw)]
    summary = summarize_window(rows, T0, T0 + timedelta(days=1), 15)
    if summary.throttle_ratio is not None:
        assert 0.0 <= summary.throttle_ratio <= 1.0
        assert summary.periods


# rows_from_readings


def test_cumulative_readings_become_deltas_with_the_first_left_empty() -> None:
    rows = rows_from_readings(
        [
            reading(0, periods_total=100, throttled_periods_total=10, usage_seconds_total=5.0, threads=8),
            reading(15, periods_total=250, throttled_periods_total=40, usage_seconds_total=6.5, threads=9),
        ]
    )
    assert rows[0].periods_delta is None
    assert rows[0].interval_s is None
    assert rows[0].periods_total == 100
    assert (rows[1].interval_s, rows[1].periods_delta, rows[1].throttled_periods_delta) == (15, 150, 30)
    assert rows[1].usage_seconds_delta == pytest.approx(1.5)
    assert rows[1].threads == 9


def test_counter_reset_starts_a_new_interval_from_the_new_value() -> None:
    rows = rows_from_readings(
        [
            reading(0, periods_total=5000, throttled_periods_total=900),
            reading(15, periods_total=120, throttled_periods_total=30),  # the container restarted
        ]
    )
    assert rows[1].periods_delta == 120
    assert rows[1].throttled_periods_delta == 30


def test_a_repeated_scrape_is_skipped_and_going_back_in_time_is_an_error() -> None:
    same = [reading(0, periods_total=1), reading(0, periods_total=1), reading(15, periods_total=2)]
    assert len(rows_from_readings(same)) == 2
    with pytest.raises(ValueError, match="out of order"):
        rows_from_readings([reading(15, periods_total=1), reading(0, periods_total=2)])


def test_readings_of_another_container_are_refused_rather_than_subtracted() -> None:
    other = CounterReading(
        namespace="shop", pod="web-2", container="app", ts=T0 + timedelta(seconds=15), periods_total=9
    )
    with pytest.raises(ValueError, match="web-2"):
        rows_from_readings([reading(0, periods_total=1), other])


def test_an_impossible_counter_is_rejected_by_name() -> None:
    with pytest.raises(BadCounter, match="throttled time of shop/web-1/app"):
        rows_from_readings([reading(0, throttled_seconds_total=float("nan"))])
    with pytest.raises(BadCounter, match="18446744073709551615"):
        rows_from_readings([reading(0, throttled_seconds_total=18446744073709551615)])


@given(st.lists(st.one_of(st.none(), st.integers(0, 2**40)), max_size=30))
def test_deltas_are_never_negative_whatever_the_counter_sequence(values: list[int | None]) -> None:
    readings = [
        reading(15 * i, periods_total=v, throttled_periods_total=v, usage_seconds_total=v) for i, v in enumerate(values)
    ]
    for sample in rows_from_readings(readings):
        for delta in (sample.periods_delta, sample.throttled_periods_delta, sample.usage_seconds_delta):
            assert delta is None or delta >= 0


# lifetime_summary, on real scrapes


def cadvisor_values(path: Path, container: str, pod: str) -> dict[str, float]:
    values: dict[str, float] = {}
    for line in path.read_text().splitlines():
        match = re.match(r"^(container_[a-z_]+)\{(.*)\} (\S+)", line)
        if match and f'container="{container}"' in match.group(2) and f'pod="{pod}"' in match.group(2):
            values[match.group(1)] = float(match.group(3))
    return values


def reading_from_cadvisor(values: dict[str, float]) -> CounterReading:
    return CounterReading(
        namespace="default",
        pod="p",
        container="c",
        ts=T0,
        periods_total=int(values["container_cpu_cfs_periods_total"]),
        throttled_periods_total=int(values["container_cpu_cfs_throttled_periods_total"]),
        throttled_seconds_total=values["container_cpu_cfs_throttled_seconds_total"],
        usage_seconds_total=values.get("container_cpu_usage_seconds_total"),
        threads=int(values["container_threads"]),
        period_us=int(values["container_spec_cpu_period"]),
        quota_us=int(values["container_spec_cpu_quota"]),
    )


def test_lifetime_ratio_of_the_kind_datadog_agent_is_26467_of_115517_periods() -> None:
    values = cadvisor_values(FIXTURES / "cadvisor" / "kind-1.16-containerd.txt", "datadog-agent", "agent-nsvs4")
    summary = lifetime_summary(reading_from_cadvisor(values))
    assert summary.lifetime
    assert summary.periods == 115517
    assert summary.throttle_ratio == pytest.approx(26467 / 115517)  # 22.9 %
    assert summary.threads_max is None  # cAdvisor reported container_threads 0: not collected
    assert summary.window_start is None
    assert summary.covered_seconds is None


def test_lifetime_usage_per_running_period_shows_a_cpu_bound_pod_at_its_80m_limit() -> None:
    values = cadvisor_values(
        FIXTURES / "clusters" / "k8s-1.31-minikube" / "cadvisor.txt", "compute-pi-digits", "e2e-statefulset-0"
    )
    summary = lifetime_summary(reading_from_cadvisor(values))
    assert summary.throttle_ratio == 1.0  # 439 of 439 periods
    assert summary.usage_active_mcpu == pytest.approx(3.517356 / (439 * 0.1) * 1000)  # 80.1m of CPU per running period
    assert values["container_spec_cpu_quota"] == 8000  # an 80m limit
    assert summary.threads_max == 1


def test_a_reading_without_periods_has_an_undefined_lifetime_ratio() -> None:
    summary = lifetime_summary(reading(0, periods_total=0, throttled_periods_total=0))
    assert summary.periods == 0
    assert summary.throttle_ratio is None


# Rollups


def rollup(hour: int, *, p95: float, usage_max: float, periods: int = 36_000, throttled: int = 0) -> RollupRow:
    return RollupRow(
        hour_start=T0 + timedelta(hours=hour),
        covered_seconds=3600,
        samples=240,
        periods=periods,
        throttled_periods=throttled,
        throttled_seconds=36.0,
        usage_seconds=1800.0,
        usage_p95_mcpu=p95,
        usage_max_mcpu=usage_max,
    )


def test_rollups_sum_exactly_and_approximate_p95_from_the_hourly_p95s() -> None:
    rollups = [rollup(h, p95=100.0 * (h + 1), usage_max=200.0 * (h + 1), throttled=3600 * (h % 2)) for h in range(24)]
    summary = summarize_rollups(rollups, T0, T0 + timedelta(days=1))
    assert summary.periods == 24 * 36_000
    assert summary.throttle_ratio == pytest.approx(12 * 3600 / (24 * 36_000))
    assert summary.usage_avg_mcpu == pytest.approx(500)  # 1800 s of CPU per 3600 s
    assert summary.throttled_seconds_per_second == pytest.approx(0.01)
    assert summary.usage_p95_mcpu == pytest.approx(
        statistics.quantiles([100.0 * (h + 1) for h in range(24)], n=100, method="inclusive")[94]
    )
    assert summary.usage_p99_mcpu is None  # no hour carried a p99
    assert summary.usage_max_mcpu == 4800
    assert summary.samples == 24 * 240


def test_rollups_outside_the_window_are_left_out() -> None:
    rollups = [rollup(-1, p95=999, usage_max=999), rollup(0, p95=10, usage_max=20), rollup(24, p95=999, usage_max=999)]
    summary = summarize_rollups(rollups, T0, T0 + timedelta(days=1))
    assert summary.usage_max_mcpu == 20
    assert summary.covered_seconds == 3600


# percentile


def test_percentile_interpolates_between_ranks() -> None:
    assert percentile([10.0, 20.0], 0.5) == 15
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 0.95) == pytest.approx(4.8)
    assert percentile([7.0], 0.99) == 7
    with pytest.raises(ValueError, match="no values"):
        percentile([], 0.5)


@given(st.lists(st.floats(0, 1e6), min_size=1, max_size=80), st.floats(0, 1))
def test_percentile_stays_within_the_values(values: list[float], q: float) -> None:
    values.sort()
    assert values[0] <= percentile(values, q) <= values[-1] or math.isclose(percentile(values, q), values[-1])


def test_the_advisor_sees_one_figure_per_sampled_period_with_zeros_for_the_unthrottled():
    assert period_throttled_us([(4, (30_000, 10)), (3, ())]) == (30_000.0, 10.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    assert period_throttled_us([]) is None
    assert period_throttled_us([(0, ())]) is None
