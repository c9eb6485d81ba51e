"""Beat-scheduled maintenance of the time series. Thin: each task calls one service."""

from __future__ import annotations

from celery import shared_task

from .partitions import analyze_recent
from .retention import apply_retention
from .rollups import rollup_hours


@shared_task(name="telemetry.rollup", acks_late=True, time_limit=600, soft_time_limit=540)
def rollup() -> int:
    written = rollup_hours()
    analyze_recent()
    return written


@shared_task(name="telemetry.retention", acks_late=True, time_limit=3000, soft_time_limit=2700)
def retention() -> dict:
    result = apply_retention()
    return {
        "partitions_dropped": result.partitions_dropped,
        "samples_deleted": result.samples_deleted,
        "period_samples_deleted": result.period_samples_deleted,
        "rollups_deleted": result.rollups_deleted,
        "pods_deleted": result.pods_deleted,
    }
