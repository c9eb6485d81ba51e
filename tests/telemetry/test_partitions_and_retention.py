from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection

from apps.telemetry.models import HourlyRollup, Sample
from apps.telemetry.readings import Batch
from apps.telemetry.services import (
    apply_retention,
    ensure_partitions,
    ingest,
    list_partitions,
    partition_name,
    rollup_hours,
)
from tests import factories as f


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_partition_for_a_new_day_is_created_on_demand():
    cluster = f.cluster()
    day = (f.T0 + timedelta(days=3)).date()
    assert partition_name(day) not in [name for name, _ in list_partitions()]

    ingest(cluster, Batch(pods=[f.pod_info()], readings=[f.reading(3 * 24 * 60, periods=1, throttled=0, usage_s=1.0)]))

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
            readings=[f.reading(d * minutes_per_day, periods=d + 1, throttled=0, usage_s=float(d)) for d in range(5)],
        ),
    )
    days = [(f.T0 + timedelta(days=d)).date() for d in range(5)]
    now = f.T0 + timedelta(days=4, hours=1)  # day 4, 10:00

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
