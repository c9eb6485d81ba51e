"""Counter arithmetic shared by ingest and the advisor. Pure Python: no Django import.

A cumulative counter that goes backwards is a reset (new container, restart): the delta is the new value, as in
Prometheus' rate(). A value above MAX_SANE is an overflowed or garbage counter (runc's own test data has
throttled_time 18446744073709551615) and is rejected rather than turned into a huge delta.
"""

from __future__ import annotations

import math

# 2**53: beyond this a float cannot hold every integer, and no real cgroup counter gets there
# (2**53 ns of throttled time is 104 days of every thread waiting; periods at 100 ms would take 28 million years).
MAX_SANE = float(2**53)


class BadCounter(ValueError):
    """A counter value that cannot be real: negative, NaN, infinite or absurdly large."""


def throttle_ratio(throttled_periods: float | None, periods: float | None) -> float | None:
    """The throttle ratio, Δnr_throttled / Δnr_periods (docs/domain.md#throttle-ratio): the share of enforcement
    periods in which the cgroup ran out of quota, in [0, 1]. The one formula for it: windows, charts, series, sources
    and ingest all call this. None when no period elapsed (the ratio is undefined, not 0) or a count is missing; a
    throttled count above the period count (inconsistent input, e.g. mismatched resets) is clamped to 1."""
    if periods is None or throttled_periods is None or periods <= 0:
        return None
    return min(1.0, max(0.0, throttled_periods / periods))


def throttled_us_per_period(throttled_us: float, periods: float) -> float:
    """Throttled time per period counted (µs; summed over CPUs, so it can exceed the period): what a period of
    those counted waited on average (docs/domain.md#expected-effect). 0 when no period is counted."""
    return throttled_us / periods if periods > 0 else 0.0


def consistency_problem(periods: float, throttled_periods: float) -> str | None:
    """Why a reading's period counts contradict each other (more throttled periods than periods), or None."""
    if throttled_periods > periods:
        return f"throttled periods ({throttled_periods:g}) exceed periods ({periods:g})"
    return None


def periods_deltas_agree(periods_delta: float | None, throttled_delta: float | None) -> bool:
    """False when an interval counts more throttled periods than periods (counters reset out of step, a forged
    reading): such an interval gives no ratio. A missing side is no contradiction."""
    return periods_delta is None or throttled_delta is None or throttled_delta <= periods_delta


def check_counter(name: str, value: float | int | None) -> None:
    """Raise BadCounter when a cumulative counter's value cannot be real; None (not reported) is fine."""
    if value is None:
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise BadCounter(f"{name} is {value}, not a finite number")
    if value < 0:
        raise BadCounter(f"{name} is negative ({value})")
    if value > MAX_SANE:
        raise BadCounter(f"{name} is {value}, past 2**53: an overflowed or corrupt counter")


def counter_delta(previous: float | None, current: float | None) -> tuple[float | None, bool]:
    """The increase of a cumulative counter between two readings, and whether it was reset.

    Returns (None, False) when either side is missing. A value lower than the previous one is a reset:
    the delta is the new value (never negative).
    """
    if previous is None or current is None:
        return None, False
    if current < previous:
        return current, True
    return current - previous, False
