"""Hourly rollups of the raw samples, recomputed from them: run again, or over a still-open hour, it gives the same
rows."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from .models import HourlyRollup, Sample

# The same rollup as _rollup's loop, computed where the rows are. percentile_disc is the nearest rank (the first value
# whose cumulative fraction reaches q), as _nearest_rank. At 1,000 nodes an hour holds millions of samples: reading
# them into Python took the worker many seconds and over a gigabyte on every findings refresh.
_ROLLUP = """
INSERT INTO telemetry_hourlyrollup (container_id, hour, samples, covered_seconds, periods, throttled_periods,
    throttled_seconds, usage_seconds, pressure_waiting_seconds, pressure_stalled_seconds, usage_p95_mcpu,
    usage_max_mcpu, threads_max)
SELECT container_id, date_trunc('hour', ts), count(*),
    coalesce(sum(interval_s) FILTER (WHERE used), 0),
    sum(periods_delta) FILTER (WHERE used),
    sum(throttled_periods_delta) FILTER (WHERE used),
    sum(throttled_seconds_delta) FILTER (WHERE used),
    sum(usage_seconds_delta) FILTER (WHERE used),
    sum(pressure_waiting_seconds_delta) FILTER (WHERE used),
    sum(pressure_stalled_seconds_delta) FILTER (WHERE used),
    percentile_disc(0.95) WITHIN GROUP (ORDER BY usage_seconds_delta / interval_s * 1000.0) FILTER (WHERE used),
    max(usage_seconds_delta / interval_s * 1000.0) FILTER (WHERE used),
    max(threads)
FROM (
    SELECT *, interval_s IS NOT NULL AND interval_s > 0 AND interval_s <= %(max_gap_s)s AS used
    FROM telemetry_sample WHERE ts >= %(start)s AND ts < %(end)s
) s
GROUP BY container_id, date_trunc('hour', ts)
ON CONFLICT (container_id, hour) DO UPDATE SET samples = excluded.samples,
    covered_seconds = excluded.covered_seconds, periods = excluded.periods,
    throttled_periods = excluded.throttled_periods, throttled_seconds = excluded.throttled_seconds,
    usage_seconds = excluded.usage_seconds, pressure_waiting_seconds = excluded.pressure_waiting_seconds,
    pressure_stalled_seconds = excluded.pressure_stalled_seconds, usage_p95_mcpu = excluded.usage_p95_mcpu,
    usage_max_mcpu = excluded.usage_max_mcpu, threads_max = excluded.threads_max
"""


def rollup_hours(*, now: datetime | None = None, hours: int = 2, method: str = "auto") -> int:
    """Recompute the hourly rollups of the last `hours` hours (the current one included) from raw samples.

    Rows are replaced, so running it again, or over a still-open hour, is harmless. Returns rollup rows written.
    Usage per interval in millicores is usage_seconds_delta / interval_s × 1000; intervals over 3 collection
    intervals are gaps and are left out of usage percentiles and covered time. PostgreSQL computes them in one
    statement ("sql"); elsewhere the rows are read and summed here ("python").
    """
    now = now or timezone.now()
    start = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=hours - 1)
    max_gap_s = 3 * settings.CPUTUNE_COLLECT_INTERVAL
    if method == "auto":
        method = "sql" if connection.vendor == "postgresql" else "python"
    if method == "sql":
        with transaction.atomic(), connection.cursor() as cursor:
            params: dict[str, datetime | float] = {
                "start": start,
                "end": start + timedelta(hours=hours),
                "max_gap_s": max_gap_s,
            }
            cursor.execute(_ROLLUP, params)
            return max(0, cursor.rowcount)
    qs = (
        Sample.objects.filter(ts__gte=start, ts__lt=start + timedelta(hours=hours))
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
            "pressure_waiting_seconds_delta",
            "pressure_stalled_seconds_delta",
        )
    )
    groups: dict[tuple[int, datetime], list[tuple]] = {}
    for row in qs.iterator(chunk_size=10000):
        hour = row[1].replace(minute=0, second=0, microsecond=0)
        groups.setdefault((row[0], hour), []).append(row)
    rollups = [_rollup(container_id, hour, rows, max_gap_s) for (container_id, hour), rows in groups.items()]
    with transaction.atomic():
        HourlyRollup.objects.bulk_create(
            rollups,
            batch_size=2000,
            update_conflicts=True,
            unique_fields=["container", "hour"],
            update_fields=[
                "samples",
                "covered_seconds",
                "periods",
                "throttled_periods",
                "throttled_seconds",
                "usage_seconds",
                "pressure_waiting_seconds",
                "pressure_stalled_seconds",
                "usage_p95_mcpu",
                "usage_max_mcpu",
                "threads_max",
            ],
        )
    return len(rollups)


def _rollup(container_id: int, hour: datetime, rows: list[tuple], max_gap_s: float) -> HourlyRollup:
    periods = throttled = None
    throttled_s = usage_s = waiting_s = stalled_s = None
    covered = 0.0
    usages: list[float] = []
    threads_max = None
    for _cid, _ts, interval_s, d_periods, d_throttled, d_throttled_s, d_usage_s, threads, d_waiting, d_stalled in rows:
        if threads is not None:
            threads_max = threads if threads_max is None else max(threads_max, threads)
        if interval_s is None or interval_s <= 0 or interval_s > max_gap_s:
            continue
        covered += interval_s
        if d_periods is not None:
            periods = (periods or 0) + d_periods
        if d_throttled is not None:
            throttled = (throttled or 0) + d_throttled
        if d_throttled_s is not None:
            throttled_s = (throttled_s or 0.0) + d_throttled_s
        if d_usage_s is not None:
            usage_s = (usage_s or 0.0) + d_usage_s
            usages.append(d_usage_s / interval_s * 1000.0)
        if d_waiting is not None:
            waiting_s = (waiting_s or 0.0) + d_waiting
        if d_stalled is not None:
            stalled_s = (stalled_s or 0.0) + d_stalled
    usages.sort()
    return HourlyRollup(
        container_id=container_id,
        hour=hour,
        samples=len(rows),
        covered_seconds=covered,
        periods=periods,
        throttled_periods=throttled,
        throttled_seconds=throttled_s,
        usage_seconds=usage_s,
        pressure_waiting_seconds=waiting_s,
        pressure_stalled_seconds=stalled_s,
        usage_p95_mcpu=_nearest_rank(usages, 0.95),
        usage_max_mcpu=usages[-1] if usages else None,
        threads_max=threads_max,
    )


def _nearest_rank(sorted_values: list[float], q: float) -> float | None:
    if not sorted_values:
        return None
    return sorted_values[max(0, math.ceil(q * len(sorted_values)) - 1)]
