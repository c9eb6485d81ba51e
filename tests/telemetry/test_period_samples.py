"""The node agent's period samples in the time series: stored once, read back per window (newest first, bounded),
dropped by retention with the raw samples."""

from __future__ import annotations

from datetime import timedelta

import pytest

from apps.clusters.models import Container
from apps.telemetry.ingest import ingest
from apps.telemetry.models import PeriodSample
from apps.telemetry.periods import MAX_SAMPLES_PER_WINDOW, period_sample_rows, store_period_samples
from apps.telemetry.readings import Batch, PeriodReading
from apps.telemetry.retention import apply_retention
from tests import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture()
def containers() -> list[int]:
    ingest(f.cluster(), Batch(pods=[f.pod_info(containers=2)]))
    return list(Container.objects.order_by("name").values_list("pk", flat=True))


def reading(container_id: int, minute: float, throttled_us: tuple[int, ...] = (20_000, 60_000)) -> PeriodReading:
    return PeriodReading(container_id, f.T0 + timedelta(minutes=minute), 5.0, 50, throttled_us, 100_000, 50_000)


def test_period_samples_are_stored_once_per_container_and_instant(containers):
    first, second = containers
    batch = [reading(first, 0), reading(second, 0), reading(first, 1)]
    assert store_period_samples(batch) == 3
    assert store_period_samples([*batch, reading(second, 1)]) == 1
    assert PeriodSample.objects.count() == 4


def test_a_window_reads_its_own_samples_newest_first_and_at_most_the_newest_sixty(containers):
    first, second = containers
    store_period_samples([reading(first, m) for m in range(MAX_SAMPLES_PER_WINDOW + 10)] + [reading(second, 5)])

    rows = period_sample_rows([first, second], f.T0, f.T0 + timedelta(hours=2))

    firsts = [r for r in rows if r.container_id == first]
    assert len(firsts) == MAX_SAMPLES_PER_WINDOW
    # (start, end]: minute 0 is at the start, so not in; the newest sixty are minutes 10 to 69.
    assert [r.ts for r in firsts] == [f.T0 + timedelta(minutes=m) for m in range(69, 9, -1)]
    assert firsts[0] == reading(first, 69)
    assert [r.ts for r in rows if r.container_id == second] == [f.T0 + timedelta(minutes=5)]
    assert period_sample_rows([first], f.T0 + timedelta(minutes=3), f.T0 + timedelta(minutes=4)) == [reading(first, 4)]


def test_retention_drops_period_samples_with_the_raw_samples(containers, settings):
    settings.CPUTUNE_RETENTION_RAW_DAYS = 2
    first, _ = containers
    store_period_samples([reading(first, 0), reading(first, 24 * 60 * 3)])

    result = apply_retention(now=f.T0 + timedelta(days=3, hours=1))

    assert result.period_samples_deleted == 1
    assert list(PeriodSample.objects.values_list("collected_at", flat=True)) == [f.T0 + timedelta(days=3)]
    assert apply_retention(now=f.T0 + timedelta(days=3, hours=1)).period_samples_deleted == 0
