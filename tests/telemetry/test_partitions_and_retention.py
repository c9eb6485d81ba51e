from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from django.db import connection

from apps.telemetry.ingest import ingest
from apps.telemetry.models import HourlyRollup, Sample
from apps.telemetry.partitions import ensure_partitions, list_partitions, partition_name
from apps.telemetry.readings import Batch
from apps.telemetry.retention import apply_retention
from apps.telemetry.rollups import rollup_hours
from tests import factories as f


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_partition_for_a_new_day_is_created_on_demand():
    cluster = f.cluster()
    # Before T0, not after: a reading ahead of the server's clock would be refused (CPUTUNE_CLOCK_SKEW).
    day = (f.T0 - timedelta(days=3)).date()
    assert partition_name(day) not in [name for name, _ in list_partitions()]

    ingest(cluster, Batch(pods=[f.pod_info()], readings=[f.reading(-3 * 24 * 60, periods=1, throttled=0, usage_s=1.0)]))

    assert (partition_name(day), day) in list_partitions()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {partition_name(day)}")  # noqa: S608 - our own partition name
        assert cursor.fetchone()[0] == 1


@pytest.mark.postgres
@pytest.mark.django_db
def test_retention_drops_whole_old_partitions_and_keeps_recent_ones(settings):
    settings.CPUTUNE_RETENTION_RAW_DAYS = 2
    cluster = f.cluster()
    minutes_per_day = 24 * 60
    ingest(
        cluster,
        Batch(
            pods=[f.pod_info()],
            # Days 0-4 end at T0, not after: readings ahead of the server's clock are refused (CPUTUNE_CLOCK_SKEW).
            readings=[
                f.reading((d - 4) * minutes_per_day, periods=d + 1, throttled=0, usage_s=float(d)) for d in range(5)
            ],
        ),
    )
    days = [(f.T0 + timedelta(days=d - 4)).date() for d in range(5)]
    now = f.T0 + timedelta(hours=1)  # day 4, 10:00

    result = apply_retention(now=now)

    # Cutoff is day 2 10:00: days 0 and 1 lie wholly before it; day 2 still holds samples inside the retention.
    assert result.partitions_dropped == [partition_name(days[0]), partition_name(days[1])]
    remaining = {day for _, day in list_partitions()}
    assert set(days[2:]) <= remaining and not {days[0], days[1]} & remaining
    assert Sample.objects.count() == 3
    assert apply_retention(now=now).partitions_dropped == []


@pytest.mark.django_db
def test_retention_on_sqlite_or_postgres_removes_old_rollups_and_gone_pods(settings):
    settings.CPUTUNE_RETENTION_ROLLUP_DAYS = 30
    cluster = f.cluster()
    ingest(cluster, Batch(pods=[f.pod_info()], readings=[f.reading(0, periods=1, throttled=0, usage_s=1.0)]), now=f.T0)
    rollup_hours(now=f.T0)
    assert HourlyRollup.objects.count() == 1

    result = apply_retention(now=f.T0 + timedelta(days=31))

    assert result.rollups_deleted == 1 and result.pods_deleted == 1


@pytest.mark.django_db
def test_hourly_rollup_sums_deltas_and_ignores_gaps(settings):
    settings.CPUTUNE_COLLECT_INTERVAL = 60
    cluster = f.cluster()
    # Minutes 0..3 every minute, then a 20-minute gap to minute 23: that interval is not usage evidence.
    minutes = [0, 1, 2, 3, 23]
    readings = [f.reading(m, periods=600 * (i + 1), throttled=60 * i, usage_s=30.0 * i) for i, m in enumerate(minutes)]
    ingest(cluster, Batch(pods=[f.pod_info()], readings=readings))

    assert rollup_hours(now=f.T0 + timedelta(minutes=30)) == 1
    rollup = HourlyRollup.objects.get()

    assert rollup.samples == 5
    assert rollup.covered_seconds == 180  # three 60 s intervals; the 1200 s gap is left out
    assert (rollup.periods, rollup.throttled_periods) == (1800, 180)
    assert rollup.usage_max_mcpu == pytest.approx(500.0)  # 30 s of CPU per 60 s
    assert rollup_hours(now=f.T0 + timedelta(minutes=30)) == 1 and HourlyRollup.objects.count() == 1


@pytest.mark.postgres
@pytest.mark.django_db
def test_ensure_partitions_is_idempotent():
    day = (f.T0 + timedelta(days=40)).date()
    first = ensure_partitions([day])
    second = ensure_partitions([day])
    assert first == [partition_name(day)] and second == []


@pytest.mark.postgres
@pytest.mark.django_db
def test_postgresql_rollups_equal_the_python_ones(settings):
    """The SQL rollup and the Python loop agree on sums, nearest-rank p95, max and threads: several containers,
    three hours, gaps, counter resets, missing threads, a container without CFS counters."""
    import random

    settings.CPUTUNE_COLLECT_INTERVAL = 60
    rng = random.Random(7)
    cluster = f.cluster()
    pods = [f.pod_info(f"web-{p}", containers=3) for p in range(4)]
    readings = []
    for pod in pods:
        for container in pod.containers:
            periods = throttled = 0
            usage = throttled_s = 0.0
            minute = 0
            while minute < 3 * 60:
                if rng.random() < 0.03:  # a restart: counters start again
                    periods = throttled = 0
                    usage = throttled_s = 0.0
                periods += 600
                throttled += rng.randrange(0, 300)
                throttled_s += rng.random() * 3
                usage += rng.random() * 60
                cfs = container.name != "c2"
                readings.append(
                    dataclasses.replace(
                        f.reading(minute, periods=periods, throttled=throttled, usage_s=usage, throttled_s=throttled_s,
                                  pod=pod.name, container=container.name, threads=rng.choice([None, 0, 4, 9, 40])),
                        periods_total=periods if cfs else None,
                        throttled_periods_total=throttled if cfs else None,
                        throttled_seconds_total=throttled_s if cfs else None,
                    )
                )  # fmt: skip
                minute += rng.choice([1, 1, 1, 2, 5])  # and the odd gap longer than three intervals
    ingest(cluster, Batch(pods=pods, readings=readings))
    now = f.T0 + timedelta(hours=2, minutes=59)

    def rollups() -> list[tuple]:
        return list(
            HourlyRollup.objects.order_by("container_id", "hour").values_list(
                "container_id", "hour", "samples", "covered_seconds", "periods", "throttled_periods",
                "throttled_seconds", "usage_seconds", "usage_p95_mcpu", "usage_max_mcpu", "threads_max",
            )
        )  # fmt: skip

    assert rollup_hours(now=now, hours=3, method="python") == 36
    by_python = rollups()
    HourlyRollup.objects.all().delete()
    assert rollup_hours(now=now, hours=3, method="sql") == 36
    by_sql = rollups()
    assert len(by_sql) == 36
    for python_row, sql_row in zip(by_python, by_sql, strict=True):
        assert python_row[:3] == sql_row[:3]
        for name, expected, got in zip(("covered", "periods", "throttled", "throttled_s", "usage", "p95", "max",
                                        "threads"), python_row[3:], sql_row[3:], strict=True):  # fmt: skip
            assert (got is None) == (expected is None), (python_row[:2], name, expected, got)
            assert got is None or got == pytest.approx(expected, rel=1e-12), (python_row[:2], name, expected, got)
