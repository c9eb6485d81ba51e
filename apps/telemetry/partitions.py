"""The sample table's daily partitions (PostgreSQL): created on demand before a write, listed for retention, and
the statistics of the tables that grow all day."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta

from django.db import connection, transaction
from django.utils import timezone

from apps.db import analyze_tables

log = logging.getLogger(__name__)

_known_partitions: set[date] = set()
PARTITION_PREFIX = "telemetry_sample_p"


def partition_name(day: date) -> str:
    return f"{PARTITION_PREFIX}{day:%Y%m%d}"


def ensure_partitions(days: Iterable[date]) -> list[str]:
    """Create the daily partitions that do not exist yet (PostgreSQL only). Returns the names created."""
    if connection.vendor != "postgresql":
        return []
    created = []
    # Only remember partitions once committed: inside an outer transaction (a test, a caller's atomic block) the
    # creation may still be rolled back.
    cacheable = not connection.in_atomic_block
    for day in sorted(set(days) - _known_partitions):
        name = partition_name(day)
        with transaction.atomic(), connection.cursor() as cursor:
            # Concurrent workers may race to create the same day; an advisory lock makes them take turns.
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext('telemetry_sample_partitions'))")
            cursor.execute("SELECT to_regclass(%s)", [name])
            if cursor.fetchone()[0] is None:
                cursor.execute(
                    f"CREATE TABLE {name} PARTITION OF telemetry_sample "
                    f"FOR VALUES FROM ('{day.isoformat()} 00:00:00+00') TO ('{(day + timedelta(days=1)).isoformat()} 00:00:00+00')"
                )
                created.append(name)
        if cacheable:
            _known_partitions.add(day)
    return created


def forget_partition(day: date) -> None:
    """Forget that `day`'s partition exists (retention dropped it): the next write of that day creates it again."""
    _known_partitions.discard(day)


def list_partitions() -> list[tuple[str, date]]:
    """The sample partitions that exist, with their day, oldest first (PostgreSQL only)."""
    if connection.vendor != "postgresql":
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'telemetry_sample'::regclass ORDER BY c.relname"
        )
        names = [r[0] for r in cursor.fetchall()]
    out = []
    for name in names:
        suffix = name.removeprefix(PARTITION_PREFIX)
        try:
            out.append((name, datetime.strptime(suffix, "%Y%m%d").date()))
        except ValueError:
            log.warning("ignoring unexpected partition %s", name)
    return out


def analyze_recent(now: datetime | None = None) -> None:
    """Statistics for the series tables that grow all day: the heads, today's sample partition, the rollups."""
    if connection.vendor != "postgresql":
        return
    today = partition_name((now or timezone.now()).astimezone(UTC).date())
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s)", [today])
        exists = cursor.fetchone()[0] is not None
    analyze_tables("telemetry_serieshead", "telemetry_hourlyrollup", *([today] if exists else []))
