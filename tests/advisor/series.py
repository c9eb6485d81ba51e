"""Test helpers: a container's readings as the sample rows and lifetime figures ingest would store, in memory, so
the window arithmetic is tested on real scrapes without a database (the product computes deltas in telemetry.ingest,
with the same counter_delta and check_counter)."""

from __future__ import annotations

from collections.abc import Iterable

from apps.advisor.windows import MCPU_PER_CPU, SampleRow, WindowSummary, lifetime_from_totals
from apps.telemetry.counters import check_counter, counter_delta
from apps.telemetry.readings import CounterReading


def rows_from_readings(readings: Iterable[CounterReading]) -> list[SampleRow]:
    """Turn one container's cumulative readings, oldest first, into sample rows with deltas.

    The first reading gets no deltas. A counter that goes backwards is a reset: its delta is the new value
    (counter_delta). A repeated timestamp (the same scrape stored twice) is skipped. Raises ValueError when
    readings go back in time and BadCounter (a ValueError) for a counter that cannot be real, naming it.
    """
    rows: list[SampleRow] = []
    previous: CounterReading | None = None
    for reading in readings:
        where = f"{reading.namespace}/{reading.pod}/{reading.container} at {reading.ts.isoformat()}"
        check_counter(f"nr_periods of {where}", reading.periods_total)
        check_counter(f"nr_throttled of {where}", reading.throttled_periods_total)
        check_counter(f"throttled time of {where}", reading.throttled_seconds_total)
        check_counter(f"CPU usage of {where}", reading.usage_seconds_total)
        threads = reading.threads if reading.threads is not None and reading.threads > 0 else None
        if previous is None:
            rows.append(
                SampleRow(
                    ts=reading.ts,
                    interval_s=None,
                    periods_delta=None,
                    throttled_periods_delta=None,
                    throttled_seconds_delta=None,
                    usage_seconds_delta=None,
                    threads=threads,
                    periods_total=reading.periods_total,
                    throttled_periods_total=reading.throttled_periods_total,
                    usage_seconds_total=reading.usage_seconds_total,
                )
            )
            previous = reading
            continue
        if (reading.namespace, reading.pod, reading.container) != (
            previous.namespace,
            previous.pod,
            previous.container,
        ):
            raise ValueError(
                f"readings of two containers in one series: {where} after {previous.pod}/{previous.container}"
            )
        if reading.ts == previous.ts:
            continue
        if reading.ts < previous.ts:
            raise ValueError(f"readings out of order: {where} follows {previous.ts.isoformat()}")
        periods_delta, _ = counter_delta(previous.periods_total, reading.periods_total)
        throttled_delta, _ = counter_delta(previous.throttled_periods_total, reading.throttled_periods_total)
        throttled_seconds_delta, _ = counter_delta(previous.throttled_seconds_total, reading.throttled_seconds_total)
        usage_delta, _ = counter_delta(previous.usage_seconds_total, reading.usage_seconds_total)
        rows.append(
            SampleRow(
                ts=reading.ts,
                interval_s=(reading.ts - previous.ts).total_seconds(),
                periods_delta=None if periods_delta is None else int(periods_delta),
                throttled_periods_delta=None if throttled_delta is None else int(throttled_delta),
                throttled_seconds_delta=throttled_seconds_delta,
                usage_seconds_delta=usage_delta,
                threads=threads,
                periods_total=reading.periods_total,
                throttled_periods_total=reading.throttled_periods_total,
                usage_seconds_total=reading.usage_seconds_total,
            )
        )
        previous = reading
    return rows


def lifetime_summary(reading: CounterReading) -> WindowSummary:
    """Figures since the container started, from one reading: ratio = nr_throttled / nr_periods, labelled lifetime.

    Usage over time is unknown (the start is not), but with a known period `usage_active_mcpu` gives the CPU it
    used per period it ran: usage ÷ (nr_periods × period). Raises BadCounter for a counter that cannot be real.
    """
    where = f"{reading.namespace}/{reading.pod}/{reading.container} at {reading.ts.isoformat()}"
    check_counter(f"nr_periods of {where}", reading.periods_total)
    check_counter(f"nr_throttled of {where}", reading.throttled_periods_total)
    check_counter(f"CPU usage of {where}", reading.usage_seconds_total)
    usage_active = None
    if reading.usage_seconds_total is not None and reading.periods_total and reading.period_us:
        usage_active = reading.usage_seconds_total / (reading.periods_total * reading.period_us / 1e6) * MCPU_PER_CPU
    return lifetime_from_totals(
        window_end=reading.ts,
        periods_total=reading.periods_total,
        throttled_periods_total=reading.throttled_periods_total,
        threads=reading.threads if reading.threads is not None and reading.threads > 0 else None,
        usage_active_mcpu=usage_active,
    )
