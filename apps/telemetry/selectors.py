"""Reading the time series back for charts and the series API: per container, points in time order.

Ranges up to RAW_MAX_HOURS read raw samples (one point per collection); longer ranges read hourly rollups
(one point per hour), so a 7-day chart is 168 points per container instead of 10,080.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import psycopg
from django.db import connection

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
    # CPU pressure (PSI) seconds per second: some task waiting for CPU / all of them; None where not reported.
    pressure_waiting_per_second: float | None = None
    pressure_stalled_per_second: float | None = None


def _per_second(seconds: float | None, span: float) -> float | None:
    return None if seconds is None else seconds / span


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
                "pressure_waiting_seconds_delta",
                "pressure_stalled_seconds_delta",
            )
        )
        for cid, ts, interval_s, periods, throttled, throttled_s, usage_s, threads, waiting, stalled in rows.iterator(
            chunk_size=20000
        ):
            if not interval_s or interval_s <= 0:
                continue
            out[cid].append(
                SeriesPoint(
                    ts=aware(ts),
                    usage_mcpu=None if usage_s is None else usage_s / interval_s * 1000.0,
                    usage_p95_mcpu=None,
                    throttle_ratio=throttle_ratio(throttled, periods),
                    throttled_seconds_per_second=_per_second(throttled_s, interval_s),
                    periods=periods,
                    throttled_periods=throttled,
                    threads=threads,
                    pressure_waiting_per_second=_per_second(waiting, interval_s),
                    pressure_stalled_per_second=_per_second(stalled, interval_s),
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
            "pressure_waiting_seconds",
            "pressure_stalled_seconds",
        )
    )
    for cid, hour, covered, periods, throttled, throttled_s, usage_s, p95, threads, waiting, stalled in hours.iterator(
        chunk_size=20000
    ):
        if not covered:
            continue
        out[cid].append(
            SeriesPoint(
                ts=aware(hour),
                usage_mcpu=None if usage_s is None else usage_s / covered * 1000.0,
                usage_p95_mcpu=p95,
                throttle_ratio=throttle_ratio(throttled, periods),
                throttled_seconds_per_second=_per_second(throttled_s, covered),
                periods=periods,
                throttled_periods=throttled,
                threads=threads,
                pressure_waiting_per_second=_per_second(waiting, covered),
                pressure_stalled_per_second=_per_second(stalled, covered),
            )
        )
    return "hourly", dict(out)


def aware(ts: datetime) -> datetime:
    """A timestamp read back from the database, UTC-aware (SQLite hands back naive ones)."""
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)


# --- rows for the findings refresh -------------------------------------------------------------------------------
# The advisor reads stored series only through these: raw SQL and plain tuples, as a refresh reads every sample of
# the window for thousands of containers (ORM row building was a large share of it).

SAMPLE_FIELDS = (
    "container_id",
    "ts",
    "interval_s",
    "periods_delta",
    "throttled_periods_delta",
    "throttled_seconds_delta",
    "usage_seconds_delta",
    "threads",
    "periods_total",
    "throttled_periods_total",
    "usage_seconds_total",
    "pressure_waiting_seconds_delta",
    "pressure_stalled_seconds_delta",
    "throttled_seconds_total",
    "pressure_waiting_seconds_total",
)
ROLLUP_FIELDS = (
    "container_id",
    "hour",
    "covered_seconds",
    "samples",
    "periods",
    "throttled_periods",
    "throttled_seconds",
    "usage_seconds",
    "usage_p95_mcpu",
    "usage_max_mcpu",
    "threads_max",
    "pressure_waiting_seconds",
    "pressure_stalled_seconds",
)
_SAMPLE_COLUMNS_SQL = ", ".join(SAMPLE_FIELDS)
_ROLLUP_COLUMNS_SQL = ", ".join(ROLLUP_FIELDS)


def _fetch(sql: str, params: list) -> list[tuple]:
    """Rows of a read-only query as tuples. PostgreSQL: server-side binding with binary results — Django's cursor
    asks for text, and parsing every timestamp's text was most of the fetch (benchmarks/RESULTS.md). Elsewhere Django's
    cursor."""
    if connection.vendor != "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall()
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(sql, params, binary=True)
        return cursor.fetchall()


def _in_ids(ids: list[int]) -> tuple[str, list]:
    """`= ANY(%s)` with one array parameter on PostgreSQL (thousands of placeholders cost more to parse than the
    query runs), an IN list elsewhere."""
    if connection.vendor == "postgresql":
        return "= ANY(%s)", [ids]
    return f"IN ({', '.join(['%s'] * len(ids))})", list(ids)


def sample_rows(ids: list[int], start: datetime, end: datetime) -> list[tuple]:
    """Samples in (start, end] of these containers, oldest first per container, as plain tuples (SAMPLE_FIELDS).

    Raw SQL: building ORM rows was a large share of a big refresh.
    """
    if not ids:
        return []
    condition, params = _in_ids(ids)
    return _fetch(
        f"SELECT {_SAMPLE_COLUMNS_SQL} FROM telemetry_sample WHERE container_id {condition} "  # noqa: S608 - constant columns
        "AND ts > %s AND ts <= %s ORDER BY container_id, ts",
        [*params, start, end],
    )


def latest_sample_rows(ids: list[int], before: datetime) -> list[tuple]:
    """The latest sample at or before `before` of each of these containers (none for a container never sampled)."""
    if not ids:
        return []
    condition, params = _in_ids(ids)
    if connection.vendor == "postgresql":
        sql = (
            f"SELECT DISTINCT ON (container_id) {_SAMPLE_COLUMNS_SQL} FROM telemetry_sample "  # noqa: S608 - constant columns
            f"WHERE container_id {condition} AND ts <= %s ORDER BY container_id, ts DESC"
        )
    else:
        sql = (
            f"SELECT {_SAMPLE_COLUMNS_SQL} FROM telemetry_sample s WHERE container_id {condition} AND ts = ("  # noqa: S608 - constant columns
            "SELECT max(ts) FROM telemetry_sample l WHERE l.container_id = s.container_id AND l.ts <= %s)"
        )
    return _fetch(sql, [*params, before])


def rollup_rows(ids: list[int], since_hour: datetime) -> list[tuple]:
    """Hourly rollups from `since_hour` on of these containers, oldest first per container, as tuples
    (ROLLUP_FIELDS)."""
    if not ids:
        return []
    condition, params = _in_ids(ids)
    return _fetch(
        f"SELECT {_ROLLUP_COLUMNS_SQL} FROM telemetry_hourlyrollup "  # noqa: S608 - constant columns
        f"WHERE container_id {condition} AND hour >= %s ORDER BY container_id, hour",
        [*params, since_hour],
    )
