"""From one container's samples to what happened in a window: throttle ratio, usage percentiles, threads. Pure Python.

The throttle ratio is Δnr_throttled / Δnr_periods over the window; it is undefined (None), not 0,
when the container ran no quota periods, and absent when the source has no CFS counters (no limit). Each sample row
holds the deltas since the previous sample, computed at ingest; a row belongs to the window its end instant falls in
and its delta is never split. Rows whose interval is longer than `max_gap_intervals` expected intervals (a collector
outage, a dead node) are ignored: their usage cannot be placed in time, so it is neither invented nor spread.

Percentiles interpolate linearly between ranks (q × (n − 1)), as numpy's default, statistics.quantiles(method=
"inclusive") and Prometheus' quantile_over_time do.

This is the advisor's hot path (150,000 containers × 60 rows in seconds): rows are named tuples, read in one plain
loop with locals; the only object made per row is its usage rate, kept for the percentiles.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from apps.telemetry.counters import throttle_ratio

MCPU_PER_CPU = 1000.0


class SampleRow(NamedTuple):
    """One stored sample of one container: deltas since the previous sample (None: missing, or the first sample).

    `interval_s` is the time since the previous sample, `threads` a gauge (cAdvisor container_threads; 0 means
    "not collected" there and is ignored). The cumulative totals are kept for the lifetime fallback.

    An immutable named tuple rather than a frozen dataclass: the advisor builds millions of these per pass, and
    SampleRow._make(values) costs ~0.3 µs against ~1.5 µs for a frozen dataclass (benchmarks/bench_advisor.py).
    """

    ts: datetime
    interval_s: float | None
    periods_delta: int | None
    throttled_periods_delta: int | None
    throttled_seconds_delta: float | None
    usage_seconds_delta: float | None
    threads: int | None = None
    periods_total: int | None = None
    throttled_periods_total: int | None = None
    usage_seconds_total: float | None = None
    pressure_waiting_seconds_delta: float | None = None  # PSI cpu "some" time in the interval
    pressure_stalled_seconds_delta: float | None = None  # PSI cpu "full"
    throttled_seconds_total: float | None = None
    pressure_waiting_seconds_total: float | None = None


class RollupRow(NamedTuple):
    """One container's hour, pre-aggregated: sums of the deltas and the hour's own usage percentiles.

    A named tuple for the same reason as SampleRow: a 7-day window is 168 of these per container.
    """

    hour_start: datetime
    covered_seconds: float
    samples: int
    periods: int | None
    throttled_periods: int | None
    throttled_seconds: float | None
    usage_seconds: float | None
    usage_p95_mcpu: float | None
    usage_max_mcpu: float | None
    usage_p99_mcpu: float | None = None
    threads_max: int | None = None
    pressure_waiting_seconds: float | None = None
    pressure_stalled_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class WindowSummary:
    """What one container did in one window. None means unknown or not applicable, never zero."""

    window_start: datetime | None  # None for lifetime figures: the container's start is not known
    window_end: datetime
    periods: int | None  # Δnr_periods; None when the source has no CFS counters (no limit)
    throttled_periods: int | None
    throttle_ratio: float | None  # in [0, 1]; None when periods is None or 0
    throttled_seconds_per_second: float | None  # summed over threads: can exceed 1
    usage_avg_mcpu: float | None
    usage_p95_mcpu: float | None
    usage_p99_mcpu: float | None
    usage_max_mcpu: float | None
    threads_max: int | None
    samples: int  # rows (or hourly rollups' samples) that contributed
    covered_seconds: float | None  # time the used rows span; None for lifetime figures
    lifetime: bool = False  # True: counters since the container started, from a single reading
    gaps_ignored: int = 0  # rows dropped for an interval longer than max_gap_intervals × expected
    usage_active_mcpu: float | None = None  # lifetime only: usage ÷ (nr_periods × period), CPU while it ran
    # CPU pressure (PSI) per second of the intervals that reported it: waiting = some task runnable and not running,
    # stalled = all of them. None where the source has no pressure.
    pressure_waiting_per_second: float | None = None
    pressure_stalled_per_second: float | None = None
    # Lifetime only: the totals since the container started, which tell whether pressure is measured at all.
    throttled_seconds_total: float | None = None
    pressure_waiting_seconds_total: float | None = None


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The q-quantile (0 ≤ q ≤ 1) of already sorted values, interpolating between ranks. Raises on an empty input."""
    n = len(sorted_values)
    if n == 0:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile {q!r} is outside [0, 1]")
    rank = q * (n - 1)
    low = int(rank)
    if low >= n - 1:
        return float(sorted_values[-1])
    fraction = rank - low
    return sorted_values[low] + (sorted_values[low + 1] - sorted_values[low]) * fraction


class _Sums(NamedTuple):
    periods: int
    throttled_periods: int
    have_periods: bool
    throttled_seconds: float
    throttled_seconds_span: float
    usage_seconds: float
    usage_span: float
    usage_rates: list[float]  # CPU per second of each used row, unsorted
    waiting_seconds: float
    stalled_seconds: float
    pressure_span: float
    threads_max: int  # 0 when unknown
    samples: int
    covered_seconds: float
    gaps: int


def _sum_rows(rows: Sequence[SampleRow], max_interval_s: float) -> _Sums:
    """One pass over the rows: skips missing fields and gaps, raises ValueError on a negative delta (naming the row)."""
    periods = 0
    throttled_periods = 0
    have_periods = False
    throttled_seconds = 0.0
    throttled_seconds_span = 0.0
    usage_seconds = 0.0
    usage_span = 0.0
    usage_rates: list[float] = []
    waiting_seconds = stalled_seconds = pressure_span = 0.0
    append_rate = usage_rates.append  # bound once: this loop runs millions of times per advisor pass
    threads_max = 0
    samples = 0
    covered_seconds = 0.0
    gaps = 0

    # Tuple unpacking is the cheapest way to read a named tuple's fields in CPython 3.11 (a column-wise pass with
    # zip/min/sum measured no faster: transposing the rows costs as much as the loop).
    for (
        ts,
        interval,
        periods_delta,
        throttled_delta,
        throttled_delta_s,
        usage_delta,
        threads,
        _,
        _,
        _,
        waiting,
        stalled,
        _,
        _,
    ) in rows:
        if threads is not None and threads > threads_max:
            threads_max = threads
        if interval is None:
            continue
        if interval <= 0 or interval > max_interval_s:
            gaps += 1
            continue
        samples += 1
        covered_seconds += interval
        if periods_delta is not None and throttled_delta is not None:
            if periods_delta < 0 or throttled_delta < 0:
                raise ValueError(
                    f"negative period delta in the row at {ts.isoformat()}: {periods_delta}, {throttled_delta}"
                )
            have_periods = True
            periods += periods_delta
            throttled_periods += throttled_delta
        if throttled_delta_s is not None:
            if throttled_delta_s < 0:
                raise ValueError(f"negative throttled-time delta {throttled_delta_s} in the row at {ts.isoformat()}")
            throttled_seconds += throttled_delta_s
            throttled_seconds_span += interval
        if usage_delta is not None:
            if usage_delta < 0:
                raise ValueError(f"negative CPU usage delta {usage_delta} in the row at {ts.isoformat()}")
            usage_seconds += usage_delta
            usage_span += interval
            append_rate(usage_delta / interval)
        if waiting is not None:
            if waiting < 0:
                raise ValueError(f"negative CPU pressure delta {waiting} in the row at {ts.isoformat()}")
            waiting_seconds += waiting
            stalled_seconds += stalled or 0.0
            pressure_span += interval

    return _Sums(
        periods=periods,
        throttled_periods=throttled_periods,
        have_periods=have_periods,
        throttled_seconds=throttled_seconds,
        throttled_seconds_span=throttled_seconds_span,
        usage_seconds=usage_seconds,
        usage_span=usage_span,
        usage_rates=usage_rates,
        waiting_seconds=waiting_seconds,
        stalled_seconds=stalled_seconds,
        pressure_span=pressure_span,
        threads_max=threads_max,
        samples=samples,
        covered_seconds=covered_seconds,
        gaps=gaps,
    )


def summarize_window(
    rows: Iterable[SampleRow],
    window_start: datetime,
    window_end: datetime,
    expected_interval_s: float,
    max_gap_intervals: float = 3,
    period_us: int | None = None,
) -> WindowSummary:
    """Aggregate one container's rows, oldest first, whose `ts` falls in (window_start, window_end].

    `period_us` (the container's CFS period) lets the lifetime fallback tell the CPU used per period it ran.

    Rows with no interval (first sample) or an interval ≤ 0 or > max_gap_intervals × expected_interval_s add no
    deltas (the latter are counted in gaps_ignored). Usage percentiles are over the per-row rates in mcpu; the
    average is time-weighted. When no row in the window has deltas but one carries totals (a container seen once),
    the result is the lifetime figure of the latest such row, flagged `lifetime`. Raises ValueError for an
    inverted window, a non-positive expected interval or a negative delta.
    """
    if window_end < window_start:
        raise ValueError(f"window ends ({window_end.isoformat()}) before it starts ({window_start.isoformat()})")
    if not expected_interval_s > 0:
        raise ValueError(f"expected sample interval {expected_interval_s!r} s must be positive")
    max_interval_s = expected_interval_s * max_gap_intervals

    # Rows arrive oldest first: when both ends are inside the window every row is, and the per-row test is skipped.
    in_window: Sequence[SampleRow]
    if isinstance(rows, list | tuple) and rows and window_start < rows[0].ts and rows[-1].ts <= window_end:
        in_window = rows
    else:
        in_window = [row for row in rows if window_start < row.ts <= window_end]

    sums = _sum_rows(in_window, max_interval_s)
    samples, gaps, threads_max = sums.samples, sums.gaps, sums.threads_max

    if samples == 0:
        # A container seen once (or only across gaps): fall back to the counters since it started.
        for row in reversed(in_window):
            if row.periods_total is not None:
                usage_active = None
                if row.usage_seconds_total is not None and row.periods_total and period_us:
                    usage_active = row.usage_seconds_total / (row.periods_total * period_us / 1e6) * MCPU_PER_CPU
                return lifetime_from_totals(
                    window_end=row.ts,
                    periods_total=row.periods_total,
                    throttled_periods_total=row.throttled_periods_total,
                    threads=threads_max or None,
                    gaps=gaps,
                    usage_active_mcpu=usage_active,
                    throttled_seconds_total=row.throttled_seconds_total,
                    pressure_waiting_seconds_total=row.pressure_waiting_seconds_total,
                )

    usage_rates = sums.usage_rates
    usage_p95 = usage_p99 = usage_max = None
    if usage_rates:
        usage_rates.sort()
        usage_p95 = percentile(usage_rates, 0.95) * MCPU_PER_CPU
        usage_p99 = percentile(usage_rates, 0.99) * MCPU_PER_CPU
        usage_max = usage_rates[-1] * MCPU_PER_CPU
    return WindowSummary(
        window_start=window_start,
        window_end=window_end,
        periods=sums.periods if sums.have_periods else None,
        throttled_periods=sums.throttled_periods if sums.have_periods else None,
        throttle_ratio=throttle_ratio(sums.throttled_periods, sums.periods) if sums.have_periods else None,
        throttled_seconds_per_second=(
            sums.throttled_seconds / sums.throttled_seconds_span if sums.throttled_seconds_span else None
        ),
        usage_avg_mcpu=sums.usage_seconds / sums.usage_span * MCPU_PER_CPU if sums.usage_span else None,
        usage_p95_mcpu=usage_p95,
        usage_p99_mcpu=usage_p99,
        usage_max_mcpu=usage_max,
        threads_max=threads_max or None,
        samples=samples,
        covered_seconds=sums.covered_seconds,
        gaps_ignored=gaps,
        pressure_waiting_per_second=sums.waiting_seconds / sums.pressure_span if sums.pressure_span else None,
        pressure_stalled_per_second=sums.stalled_seconds / sums.pressure_span if sums.pressure_span else None,
    )


def lifetime_from_totals(
    *,
    window_end: datetime,
    periods_total: int | None,
    throttled_periods_total: int | None,
    threads: int | None,
    gaps: int = 0,
    usage_active_mcpu: float | None = None,
    throttled_seconds_total: float | None = None,
    pressure_waiting_seconds_total: float | None = None,
) -> WindowSummary:
    periods: int | None = None
    throttled: int | None = None
    ratio: float | None = None
    if periods_total is not None and throttled_periods_total is not None:
        periods, throttled = periods_total, throttled_periods_total
        ratio = throttle_ratio(throttled, periods)
    return WindowSummary(
        window_start=None,
        window_end=window_end,
        periods=periods,
        throttled_periods=throttled,
        throttle_ratio=ratio,
        throttled_seconds_per_second=None,
        usage_avg_mcpu=None,
        usage_p95_mcpu=None,
        usage_p99_mcpu=None,
        usage_max_mcpu=None,
        threads_max=threads,
        samples=1,
        covered_seconds=None,
        lifetime=True,
        gaps_ignored=gaps,
        usage_active_mcpu=usage_active_mcpu,
        throttled_seconds_total=throttled_seconds_total,
        pressure_waiting_seconds_total=pressure_waiting_seconds_total,
    )


def period_throttled_us(samples: Iterable[tuple[int, Sequence[int]]]) -> tuple[float, ...] | None:
    """One throttled-time figure per sampled period (µs) from (periods counted, figures of the periods that had
    throttled time) pairs: each sample's figures, then a zero for each of its other periods. None without a period."""
    values: list[float] = []
    for periods, throttled_us in samples:
        values.extend(map(float, throttled_us))
        values.extend([0.0] * (periods - len(throttled_us)))
    return tuple(values) or None


def summarize_rollups(rollups: Iterable[RollupRow], window_start: datetime, window_end: datetime) -> WindowSummary:
    """Aggregate hourly rollups whose hour starts in [window_start, window_end), for long windows (7 d).

    Sums are exact. Percentiles are an approximation: p95 is the 95th percentile of the hours' p95s (p99 likewise
    from the hours' p99s, None if no hour has one) and max is the largest hourly max; a burst that filled 3 % of
    every hour shows in neither. Raises ValueError for an inverted window or negative sums.
    """
    if window_end < window_start:
        raise ValueError(f"window ends ({window_end.isoformat()}) before it starts ({window_start.isoformat()})")
    periods = throttled_periods = 0
    have_periods = False
    throttled_seconds = throttled_span = usage_seconds = usage_span = covered = 0.0
    waiting_seconds = stalled_seconds = pressure_span = 0.0
    samples = 0
    threads_max = 0
    hourly_p95: list[float] = []
    hourly_p99: list[float] = []
    usage_max: float | None = None
    for rollup in rollups:
        if rollup.hour_start < window_start or rollup.hour_start >= window_end:
            continue
        if rollup.covered_seconds < 0:
            raise ValueError(f"rollup at {rollup.hour_start.isoformat()} covers {rollup.covered_seconds} s")
        samples += rollup.samples
        covered += rollup.covered_seconds
        if rollup.periods is not None and rollup.throttled_periods is not None:
            if rollup.periods < 0 or rollup.throttled_periods < 0:
                raise ValueError(f"negative period sums in the rollup at {rollup.hour_start.isoformat()}")
            have_periods = True
            periods += rollup.periods
            throttled_periods += rollup.throttled_periods
        if rollup.throttled_seconds is not None:
            throttled_seconds += rollup.throttled_seconds
            throttled_span += rollup.covered_seconds
        if rollup.usage_seconds is not None:
            usage_seconds += rollup.usage_seconds
            usage_span += rollup.covered_seconds
        if rollup.pressure_waiting_seconds is not None:
            waiting_seconds += rollup.pressure_waiting_seconds
            stalled_seconds += rollup.pressure_stalled_seconds or 0.0
            pressure_span += rollup.covered_seconds
        if rollup.usage_p95_mcpu is not None:
            hourly_p95.append(rollup.usage_p95_mcpu)
        if rollup.usage_p99_mcpu is not None:
            hourly_p99.append(rollup.usage_p99_mcpu)
        if rollup.usage_max_mcpu is not None and (usage_max is None or rollup.usage_max_mcpu > usage_max):
            usage_max = rollup.usage_max_mcpu
        if rollup.threads_max is not None and rollup.threads_max > threads_max:
            threads_max = rollup.threads_max
    hourly_p95.sort()
    hourly_p99.sort()
    return WindowSummary(
        window_start=window_start,
        window_end=window_end,
        periods=periods if have_periods else None,
        throttled_periods=throttled_periods if have_periods else None,
        throttle_ratio=throttle_ratio(throttled_periods, periods) if have_periods else None,
        throttled_seconds_per_second=throttled_seconds / throttled_span if throttled_span else None,
        usage_avg_mcpu=usage_seconds / usage_span * MCPU_PER_CPU if usage_span else None,
        usage_p95_mcpu=percentile(hourly_p95, 0.95) if hourly_p95 else None,
        usage_p99_mcpu=percentile(hourly_p99, 0.99) if hourly_p99 else None,
        usage_max_mcpu=usage_max,
        threads_max=threads_max or None,
        samples=samples,
        covered_seconds=covered,
        pressure_waiting_per_second=waiting_seconds / pressure_span if pressure_span else None,
        pressure_stalled_per_second=stalled_seconds / pressure_span if pressure_span else None,
    )
