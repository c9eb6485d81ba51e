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

from apps.telemetry.ingest import ingest_readings
from apps.telemetry.models import Sample
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


class _BarrierSource:
    """A source whose inventory returns only when both cycles have listed: both then store a cluster seen for the
    first time, with the same new nodes and pods."""

    def __init__(self, barrier: threading.Barrier) -> None:
        self.barrier = barrier

    def inventory(self):
        from apps.collector.sources.base import Inventory

        self.barrier.wait(timeout=20)
        nodes = [f.node_info(f"node-{i}") for i in range(20)]
        pods = [f.pod_info(f"web-{i}", node=f"node-{i % 20}") for i in range(200)]
        return Inventory(nodes=nodes, pods=pods)

    def read_node(self, node, now):
        raise AssertionError("only the inventory is read here")

    def close(self) -> None:
        pass


def test_two_cycles_listing_a_new_cluster_at_once_both_store_the_inventory():
    """Two beats started by mistake: both cycles find the same nodes missing. The second waits for the first
    (found by a drill: it inserted the same nodes again and its run failed on the unique constraint)."""
    from apps.clusters.models import Node, Pod
    from apps.collector.models import CollectionRun
    from apps.collector.services import collect_inventory, start_run

    cluster = f.cluster()
    barrier = threading.Barrier(2)
    runs = [start_run(cluster), start_run(cluster)]
    listed: dict[int, list[str]] = {}
    errors: list[BaseException] = []

    def cycle(run) -> None:
        try:
            listed[run.pk] = collect_inventory(run, _BarrierSource(barrier))
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=cycle, args=(run,)) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    problems = list(CollectionRun.objects.filter(problems__isnull=False).values_list("problems__message", flat=True))
    assert problems == []
    assert [len(listed[run.pk]) for run in runs] == [20, 20]
    assert set(CollectionRun.objects.values_list("finished_at", flat=True)) == {None}, "both runs are still open"
    assert Node.objects.filter(cluster=cluster).count() == 20
    assert Pod.objects.filter(cluster=cluster).count() == 200
