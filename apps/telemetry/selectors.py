"""Reading the time series back for charts and the series API: per container, points in time order.

Ranges up to RAW_MAX_HOURS read raw samples (one point per collection); longer ranges read hourly rollups
(one point per hour), so a 7-day chart is 168 points per container instead of 10,080.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from .counters import throttle_ratio
from .models import HourlyRollup, Sample

RAW_MAX_HOURS = 48


@dataclass(frozen=True, slots=True)
class SeriesPoint:
    ts: datetime
    usage_mcpu: float | None  # average over the interval (raw) or the hour (rollup)
    usage_p95_mcpu: float | None  # rollups only: the hour's 95th percentile of per-interval usage
    throttle_ratio: float | None  # Δthrottled / Δperiods in the interval; None when no periods ran
    throttled_seconds_per_second: float | None
    periods: int | None
    throttled_periods: int | None
    threads: int | None


def container_series(
    container_ids: Sequence[int], since: datetime, until: datetime, *, resolution: str = "auto"
) -> tuple[str, dict[int, list[SeriesPoint]]]:
    """Points per container in [since, until]; returns the resolution used ("raw" or "hourly") and the points.

    Raw intervals with no usable delta (first sample, after a gap) are left out rather than drawn as zero.
    """
    if until < since:
        raise ValueError("until is before since")
    if resolution == "auto":
        resolution = "raw" if until - since <= timedelta(hours=RAW_MAX_HOURS) else "hourly"
    out: dict[int, list[SeriesPoint]] = defaultdict(list)
    if resolution == "raw":
        rows = (
            Sample.objects.filter(container_id__in=container_ids, ts__gte=since, ts__lte=until)
            .order_by("container_id", "ts")
            .values_list(
                "container_id",
                "ts",
                "interval_s",
                "periods_delta",
                "throttled_periods_delta",
                "throttled_seconds_delta",
                "usage_seconds_delta",
                "threads",
            )
        )
        for cid, ts, interval_s, periods, throttled, throttled_s, usage_s, threads in rows.iterator(chunk_size=20000):
            if not interval_s or interval_s <= 0:
                continue
            out[cid].append(
                SeriesPoint(
                    ts=_aware(ts),
                    usage_mcpu=None if usage_s is None else usage_s / interval_s * 1000.0,
                    usage_p95_mcpu=None,
                    throttle_ratio=throttle_ratio(throttled, periods),
                    throttled_seconds_per_second=None if throttled_s is None else throttled_s / interval_s,
                    periods=periods,
                    throttled_periods=throttled,
                    threads=threads,
                )
            )
        return "raw", dict(out)
    if resolution != "hourly":
        raise ValueError(f"resolution {resolution!r} is not raw, hourly or auto")
    hours = (
        HourlyRollup.objects.filter(
            container_id__in=container_ids, hour__gte=since.replace(minute=0, second=0, microsecond=0), hour__lte=until
        )
        .order_by("container_id", "hour")
        .values_list(
            "container_id",
            "hour",
            "covered_seconds",
            "periods",
            "throttled_periods",
            "throttled_seconds",
            "usage_seconds",
            "usage_p95_mcpu",
            "threads_max",
        )
    )
    for cid, hour, covered, periods, throttled, throttled_s, usage_s, p95, threads in hours.iterator(chunk_size=20000):
        if not covered:
            continue
        out[cid].append(
            SeriesPoint(
                ts=_aware(hour),
                usage_mcpu=None if usage_s is None else usage_s / covered * 1000.0,
                usage_p95_mcpu=p95,
                throttle_ratio=throttle_ratio(throttled, periods),
                throttled_seconds_per_second=None if throttled_s is None else throttled_s / covered,
                periods=periods,
                throttled_periods=throttled,
                threads=threads,
            )
        )
    return "hourly", dict(out)


def _aware(ts: datetime) -> datetime:
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)
