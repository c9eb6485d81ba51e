"""Two ingests of the same container at once (two cycles overlapping: a double-started beat, a redelivered task
next to the next cycle's). Each must see the other's sample: the stored intervals may not overlap, or the seconds
between the two readings would be counted twice."""

from __future__ import annotations

import itertools
import threading
from datetime import timedelta

import psycopg
import pytest
from django.db import connection, connections

from apps.telemetry.models import Sample
from apps.telemetry.services import ingest_readings
from tests import factories as f
from tests.drill.harness import wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _connect(*, autocommit: bool) -> psycopg.Connection:
    db = connection.settings_dict  # the test database's, not the configured one
    return psycopg.connect(
        host=db["HOST"], port=db["PORT"] or 5432, user=db["USER"], password=db["PASSWORD"] or None,
        dbname=db["NAME"], autocommit=autocommit,
    )  # fmt: skip


def test_two_concurrent_ingests_of_one_container_never_count_the_same_seconds_twice():
    cluster = f.cluster()
    first = f.reading(0, periods=100, throttled=10, usage_s=5.0)
    assert ingest_readings(cluster, [first]).samples_written == 1
    later = [
        f.reading(1, periods=700, throttled=70, usage_s=32.0),  # one minute on
        f.reading(2, periods=1300, throttled=130, usage_s=59.0),  # two minutes on
    ]
    with connection.cursor() as cursor:
        cursor.execute("SELECT container_id FROM telemetry_serieshead")
        (container_id,) = cursor.fetchone()

    # A third session holds the series head, so both ingests are inside their work when the other one runs.
    with _connect(autocommit=False) as holder, _connect(autocommit=True) as watcher:
        holder.execute("SELECT 1 FROM telemetry_serieshead WHERE container_id = %s FOR UPDATE", [container_id])
        errors: list[BaseException] = []

        def ingest(reading) -> None:
            try:
                ingest_readings(cluster, [reading])
            except BaseException as exc:
                errors.append(exc)
            finally:
                connections.close_all()

        threads = [threading.Thread(target=ingest, args=(r,)) for r in later]
        for thread in threads:
            thread.start()
        waiting = (
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
        )
        wait_until(lambda: watcher.execute(waiting).fetchone()[0] >= 2, 20, "both ingests waiting")  # type: ignore[index]
        holder.rollback()
        for thread in threads:
            thread.join(timeout=30)
    assert errors == []

    samples = list(Sample.objects.order_by("ts").values_list("ts", "interval_s", "usage_seconds_delta"))
    stored = [ts for ts, _, _ in samples]
    # Whichever ingest locked first is stored; the other follows it, or is late and skipped when it is the older one.
    assert stored in ([first.ts, later[0].ts, later[1].ts], [first.ts, later[1].ts]), stored
    for (previous_ts, _, _), (ts, interval_s, _) in itertools.pairwise(samples):
        assert interval_s == (ts - previous_ts).total_seconds(), f"the sample at {ts} overlaps the one before it"
    # The usage stored over the intervals adds up to the usage between the first and the last reading, once.
    assert sum(delta or 0.0 for _, _, delta in samples[1:]) == pytest.approx(59.0 - 5.0)
    assert samples[-1][0] - samples[0][0] == timedelta(minutes=2)
