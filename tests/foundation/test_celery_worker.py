"""A real Celery worker (in-process thread, not eager mode) takes a task from Redis and writes to PostgreSQL."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.telemetry.ingest import ingest
from apps.telemetry.models import HourlyRollup
from apps.telemetry.readings import Batch
from apps.telemetry.tasks import rollup
from tests import factories as f


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_worker_runs_a_task_from_redis_that_writes_to_postgres(celery_worker_redis):
    cluster = f.cluster()
    now = timezone.now().replace(second=0, microsecond=0)
    base = [f.reading(m, periods=600 * (m + 1), throttled=6 * m, usage_s=10.0 * m) for m in range(3)]
    shifted = [replace(r, ts=now - timedelta(minutes=3 - i)) for i, r in enumerate(base)]
    ingest(cluster, Batch(pods=[f.pod_info()], readings=shifted))
    assert HourlyRollup.objects.count() == 0

    rollup.delay()

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not HourlyRollup.objects.exists():
        time.sleep(0.1)
    assert HourlyRollup.objects.exists(), "the worker did not write the rollup within 20 s"
    assert sum(r.periods or 0 for r in HourlyRollup.objects.all()) == 1200
