"""The node agent's period samples: stored once per (container, instant), read back per window for the advisor.

Each sample is a few seconds of one container's cpu.stat polled period by period; the advisor turns the samples in a
window into one throttled-time figure per sampled period (docs/domain.md#expected-effect).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from django.db.models import F, Window
from django.db.models.functions import RowNumber

from .models import PeriodSample
from .readings import PeriodReading

# The newest samples a window reads per container: an hour of one-minute cycles; at the agent's defaults (5 s every
# 15 s, 100 ms periods) 3,000 periods, enough for a 10 % target and bounded whatever the window's length.
MAX_SAMPLES_PER_WINDOW = 60


def store_period_samples(readings: Sequence[PeriodReading]) -> int:
    """Store the readings not stored yet (one per container and instant: a batch pushed twice is stored once).
    Returns how many were written."""
    if not readings:
        return 0
    ids = {r.container_id for r in readings}
    instants = {r.ts for r in readings}
    stored = set(
        PeriodSample.objects.filter(container_id__in=ids, collected_at__in=instants).values_list(
            "container_id", "collected_at"
        )
    )
    fresh = {(r.container_id, r.ts): r for r in readings if (r.container_id, r.ts) not in stored}
    PeriodSample.objects.bulk_create(
        [
            PeriodSample(
                container_id=r.container_id,
                collected_at=r.ts,
                seconds=r.seconds,
                periods=r.periods,
                period_us=r.period_us,
                quota_us=r.quota_us,
                throttled_us=list(r.throttled_us),
            )
            for r in fresh.values()
        ],
        ignore_conflicts=True,  # a concurrent push of the same batch
    )
    return len(fresh)


def period_sample_rows(ids: Sequence[int], start: datetime, end: datetime) -> list[PeriodReading]:
    """The newest MAX_SAMPLES_PER_WINDOW samples in (start, end] of each of these containers, newest first."""
    if not ids:
        return []
    newest = Window(RowNumber(), partition_by=F("container_id"), order_by=F("collected_at").desc())
    rows = (
        PeriodSample.objects.filter(container_id__in=ids, collected_at__gt=start, collected_at__lte=end)
        .annotate(rank=newest)
        .filter(rank__lte=MAX_SAMPLES_PER_WINDOW)
        .order_by("container_id", "-collected_at")
        .values_list("container_id", "collected_at", "seconds", "periods", "throttled_us", "period_us", "quota_us")
    )
    return [
        PeriodReading(
            cid, ts if ts.tzinfo else ts.replace(tzinfo=UTC), seconds, periods, tuple(throttled), period, quota
        )
        for cid, ts, seconds, periods, throttled, period, quota in rows
    ]
