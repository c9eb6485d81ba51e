"""A clock that jumps ahead and is then corrected: readings far ahead of the server's clock are refused, and a series
whose stored head is far in the future (stored while the server's clock was ahead) restarts at the next reading
instead of dropping every reading as a duplicate until real time passes the head. Both ingest paths."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from apps.clusters.models import Container
from apps.telemetry.ingest import IngestResult, ingest_readings
from apps.telemetry.models import HourlyRollup, Sample, SeriesHead
from tests import factories as f

pytestmark = pytest.mark.django_db
METHODS = ["bulk_create", pytest.param("sql", marks=pytest.mark.postgres)]


def at(ts: datetime, periods: int, throttled: int, usage_s: float):
    return replace(f.reading(0, periods=periods, throttled=throttled, usage_s=usage_s), ts=ts)


def series() -> list[Sample]:
    return list(Sample.objects.filter(container__name="c0").order_by("ts"))


@pytest.mark.parametrize("method", METHODS)
def test_a_reading_stamped_far_ahead_of_the_server_clock_is_refused_with_a_problem(method):
    cluster = f.cluster()
    now = timezone.now()
    ok = at(now - timedelta(minutes=1), 100, 10, 5.0)
    ahead = replace(at(now + timedelta(hours=3), 700, 70, 32.0), container="c1")
    within = replace(at(now + timedelta(minutes=2), 100, 10, 5.0), container="c2")  # inside the 5 min tolerance

    result = ingest_readings(cluster, [ok, ahead, within], now=now, method=method)

    assert (result.samples_written, result.refused_future, result.duplicates) == (2, 1, 0)
    assert set(Sample.objects.values_list("container__name", flat=True)) == {"c0", "c2"}
    (problem,) = result.problems
    assert "1 reading(s) stamped up to 3 h ahead of this server's clock" in problem and "shop/web-1/c1" in problem


@pytest.mark.parametrize("method", METHODS)
def test_a_head_left_in_the_future_by_a_jumped_clock_restarts_the_series_at_the_next_reading(method):
    cluster = f.cluster()
    real = timezone.now()
    jumped = real + timedelta(hours=3)
    ingest_readings(cluster, [at(real - timedelta(minutes=10), 1000, 100, 50.0)], now=real, method=method)
    # The server's clock (and the node's) is three hours ahead for two cycles: both readings are stored.
    for minute, (p, tp, u) in enumerate([(1600, 130, 80.0), (2200, 160, 110.0)]):
        ingest_readings(cluster, [at(jumped + timedelta(minutes=minute), p, tp, u)], now=jumped, method=method)
    HourlyRollup.objects.create(
        container=Container.objects.get(name="c0"), hour=jumped.replace(minute=0, second=0, microsecond=0), samples=2,
        covered_seconds=60.0,
    )  # fmt: skip

    # Corrected: the next reading at the right time is stored, with its deltas against the last sample before the jump.
    result = ingest_readings(cluster, [at(real, 2500, 175, 125.0)], now=real, method=method)

    assert (result.samples_written, result.duplicates, result.series_restarted) == (1, 0, 1)
    first, recovered = series()
    assert recovered.ts == real and recovered.interval_s == pytest.approx(600.0)
    assert (recovered.periods_delta, recovered.throttled_periods_delta) == (1500, 75)
    assert recovered.usage_seconds_delta == pytest.approx(75.0) and recovered.reset is False
    assert SeriesHead.objects.get(container__name="c0").ts == real
    assert not HourlyRollup.objects.exists(), "the rollup of a jumped hour went with its samples"
    (problem,) = result.problems
    assert problem.startswith("shop/web-1/c0: stored head ") and "is 3 h in the future (a clock jumped?)" in problem
    assert "2 sample(s) stamped after" in problem and f"restarted from its sample at {first.ts.isoformat()}" in problem

    # The series goes on as usual from there.
    later = ingest_readings(cluster, [at(real + timedelta(minutes=1), 2800, 190, 140.0)], now=real, method=method)
    assert (later.samples_written, later.series_restarted, later.problems) == (1, 0, [])
    assert series()[-1].periods_delta == 300


@pytest.mark.parametrize("method", METHODS)
def test_a_series_stored_only_in_the_future_starts_afresh_without_deltas(method):
    cluster = f.cluster()
    real = timezone.now()
    jumped = real + timedelta(hours=2)
    ingest_readings(cluster, [at(jumped, 1600, 130, 80.0)], now=jumped, method=method)

    result = ingest_readings(cluster, [at(real, 2500, 175, 125.0)], now=real, method=method)

    assert (result.samples_written, result.series_restarted) == (1, 1)
    (sample,) = series()
    assert sample.ts == real and sample.interval_s is None and sample.periods_delta is None
    assert "its next reading starts it afresh, 1 sample(s) stamped after" in result.problems[0]


@pytest.mark.parametrize("method", METHODS)
def test_a_head_just_ahead_within_the_tolerance_still_makes_earlier_readings_duplicates(method):
    cluster = f.cluster()
    real = timezone.now()
    ingest_readings(cluster, [at(real + timedelta(minutes=2), 1600, 130, 80.0)], now=real, method=method)

    result = ingest_readings(cluster, [at(real, 2500, 175, 125.0)], now=real, method=method)

    assert result == IngestResult(duplicates=1)
    assert [s.ts for s in series()] == [real + timedelta(minutes=2)]


def test_a_replayed_old_batch_never_restarts_newer_series():
    """`now` earlier than the server's clock (a dump imported with its own instant) does not make the present
    look like the future."""
    cluster = f.cluster()
    real = timezone.now()
    ingest_readings(cluster, [at(real, 2500, 175, 125.0)], now=real)

    result = ingest_readings(cluster, [at(real - timedelta(days=1), 100, 10, 5.0)], now=real - timedelta(days=1))

    assert (result.duplicates, result.series_restarted) == (1, 0)
