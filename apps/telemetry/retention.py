"""Retention: raw samples (and the agent's period samples), rollups and pods not seen are kept for as long as the
settings say, then dropped.

Run twice, it drops nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from apps.clusters.models import Pod

from .models import HourlyRollup, PeriodSample, Sample
from .partitions import ensure_partitions, forget_partition, list_partitions

DELETE_BATCH = 5000


@dataclass
class RetentionResult:
    partitions_dropped: list[str] = field(default_factory=list)
    samples_deleted: int = 0
    period_samples_deleted: int = 0
    rollups_deleted: int = 0
    pods_deleted: int = 0


def apply_retention(*, now: datetime | None = None) -> RetentionResult:
    """Drop raw samples older than CPUTUNE_RETENTION_RAW_DAYS (whole partitions on PostgreSQL, bounded deletes elsewhere)
    and period samples as old (bounded deletes), rollups older than CPUTUNE_RETENTION_ROLLUP_DAYS, and pods not seen
    for that long. Also makes tomorrow's partition.
    """
    now = now or timezone.now()
    result = RetentionResult()
    raw_cutoff = now - timedelta(days=settings.CPUTUNE_RETENTION_RAW_DAYS)
    if connection.vendor == "postgresql":
        for name, day in list_partitions():
            # A partition holds [day, day + 1): drop it once all of it is past the cutoff.
            if datetime.combine(day + timedelta(days=1), datetime.min.time(), tzinfo=UTC) <= raw_cutoff:
                with connection.cursor() as cursor:
                    cursor.execute(f"DROP TABLE IF EXISTS {name}")
                forget_partition(day)
                result.partitions_dropped.append(name)
        ensure_partitions([now.date(), (now + timedelta(days=1)).date()])
    else:
        result.samples_deleted = _delete_in_batches(Sample.objects.filter(ts__lt=raw_cutoff), ("container_id", "ts"))
    old_periods = PeriodSample.objects.filter(collected_at__lt=raw_cutoff)
    result.period_samples_deleted = _delete_in_batches(old_periods, ("id",))
    rollup_cutoff = now - timedelta(days=settings.CPUTUNE_RETENTION_ROLLUP_DAYS)
    result.rollups_deleted = _delete_in_batches(HourlyRollup.objects.filter(hour__lt=rollup_cutoff), ("id",))
    stale = Pod.objects.filter(Q(last_seen__lt=rollup_cutoff) | Q(last_seen__isnull=True))
    result.pods_deleted = _delete_in_batches(stale, ("id",))
    return result


def _delete_in_batches(queryset, key: tuple[str, ...]) -> int:
    """Delete what the queryset matches in batches of DELETE_BATCH rows, so no transaction grows without bound."""
    total = 0
    if key == ("container_id", "ts"):
        # Composite keys: delete up to the ts of the batch's last row (a few more rows when many share that instant).
        while True:
            boundary = list(queryset.order_by("ts").values_list("ts", flat=True)[DELETE_BATCH - 1 : DELETE_BATCH])
            batch = queryset.filter(ts__lte=boundary[0]) if boundary else queryset
            deleted, _ = batch.delete()
            total += deleted
            if not boundary:
                return total
    while True:
        ids = list(queryset.values_list("pk", flat=True)[:DELETE_BATCH])
        if not ids:
            return total
        queryset.model.objects.filter(pk__in=ids).delete()
        total += len(ids)
