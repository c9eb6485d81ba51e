"""The node agent's CFS burst readings: one row per container, replaced by each push (the setting and the totals
since the container started; the explanation of the ceiling shows them)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .models import BurstReading


@dataclass(frozen=True, slots=True)
class BurstValues:
    container_id: int
    burst_us: int
    bursts_total: int | None
    burst_seconds_total: float | None


def store_burst_readings(values: list[BurstValues], ts: datetime) -> int:
    """Upsert each container's burst reading at `ts`; an older push never replaces a newer one. Returns rows written."""
    if not values:
        return 0
    newer = set(
        BurstReading.objects.filter(container_id__in=[v.container_id for v in values], ts__gt=ts).values_list(
            "container_id", flat=True
        )
    )
    rows = [
        BurstReading(
            container_id=v.container_id,
            ts=ts,
            burst_us=v.burst_us,
            bursts_total=v.bursts_total,
            burst_seconds_total=v.burst_seconds_total,
        )
        for v in values
        if v.container_id not in newer
    ]
    BurstReading.objects.bulk_create(
        rows,
        update_conflicts=True,
        unique_fields=["container"],
        update_fields=["ts", "burst_us", "bursts_total", "burst_seconds_total"],
    )
    return len(rows)
