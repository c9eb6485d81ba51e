"""A cycle stores its nodes, then its pods, then reads the nodes: the run closes only when the pods are stored and
every node has its outcome, and a node's ingest (another cycle's) never writes while pods are being written."""

from __future__ import annotations

import threading
from datetime import datetime

import psycopg
import pytest
from django.db import connection, connections

from apps.clusters.models import Container, Pod
from apps.collector.models import CollectionRun
from apps.collector.services import collect_inventory, collect_node, start_run, store_node_list, store_pod_list
from apps.collector.sources.base import Inventory, NodeRead
from apps.telemetry.ingest import ingest_readings, lock_cluster_ingest
from tests import factories as f
from tests.drill.harness import wait_until


class _SplitSource:
    """Nodes and pods listed apart, as the Kubernetes adapter does; each pod has one reading of its container c0."""

    def __init__(self) -> None:
        self.pods_listed = 0
        self.pods = [f.pod_info("web-1", node="node-a"), f.pod_info("web-2", node="node-b")]

    def list_nodes(self):
        return [f.node_info("node-a"), f.node_info("node-b")], []

    def list_pods(self):
        self.pods_listed += 1
        return list(self.pods), []

    def inventory(self) -> Inventory:  # pragma: no cover - the collector lists this source in two steps
        raise AssertionError("listed whole")

    def read_node(self, node: str, now: datetime) -> NodeRead:
        minute = self.pods_listed
        readings = [
            f.reading(minute, periods=100 * (minute + 1), throttled=10, usage_s=5.0 * (minute + 1), pod=p.name)
            for p in self.pods
            if p.node == node
        ]
        return NodeRead(node=node, readings=readings)

    def close(self) -> None:
        pass


@pytest.mark.django_db
def test_pods_are_stored_before_any_node_is_read_every_cycle():
    cluster = f.cluster()
    source = _SplitSource()
    for cycle in range(2):
        if cycle:
            source.pods.append(f.pod_info("web-3", node="node-a"))  # a pod that appeared since
        run = start_run(cluster)
        nodes = collect_inventory(run, source)
        stored = CollectionRun.objects.get(pk=run.pk).pods
        assert (stored, source.pods_listed) == (CollectionRun.PodsStatus.STORED, cycle + 1)
        closed = [collect_node(run.pk, node, source)[1] for node in nodes]
        assert closed == [False, True]  # the last node's outcome closes the run
        run.refresh_from_db()
        assert (run.status, run.nodes_ok) == (CollectionRun.Status.OK, 2)

    web = Pod.objects.get(cluster=cluster, name="web-3")
    assert web.node is not None
    assert (web.uid, web.qos_class, web.node.name) == ("uid-shop-web-3", "Burstable", "node-a")
    assert Container.objects.get(pod=web, name="c0").request_mcpu == 250


@pytest.mark.django_db
def test_a_run_whose_pods_were_never_stored_is_closed_by_the_stale_run_sweep():
    from datetime import timedelta

    from django.utils import timezone

    from apps.collector.services import close_stale_runs

    cluster = f.cluster()
    source = _SplitSource()
    run = start_run(cluster)
    store_node_list(run, source)  # the cycle task died here, before listing the pods
    for node in ("node-a", "node-b"):
        collect_node(run.pk, node, source)
    run.refresh_from_db()
    assert run.finished_at is None and run.pods == CollectionRun.PodsStatus.PENDING

    CollectionRun.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(hours=1))
    close_stale_runs(max_age_s=600)

    run.refresh_from_db()
    assert (run.status, run.pods) == (CollectionRun.Status.PARTIAL, CollectionRun.PodsStatus.FAILED)
    assert any("pods were not stored" in p.message for p in run.problems.all())
    assert store_pod_list(run, source) is False  # a late pod store finds the run closed


def _connect() -> psycopg.Connection:
    db = connection.settings_dict  # the test database's, not the configured one
    return psycopg.connect(
        host=db["HOST"], port=db["PORT"] or 5432, user=db["USER"], password=db["PASSWORD"] or None,
        dbname=db["NAME"], autocommit=True,
    )  # fmt: skip


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_node_ingest_waits_while_the_pods_are_written():
    cluster = f.cluster()
    holding = threading.Event()
    release = threading.Event()
    done: list[int] = []

    def pod_writer() -> None:
        from django.db import transaction

        try:
            with transaction.atomic():
                lock_cluster_ingest(cluster, exclusive=True)
                holding.set()
                release.wait(10)
        finally:
            connections.close_all()

    def node_ingest() -> None:
        try:
            done.append(
                ingest_readings(cluster, [f.reading(0, periods=100, throttled=10, usage_s=5.0)]).samples_written
            )
        finally:
            connections.close_all()

    writer = threading.Thread(target=pod_writer)
    writer.start()
    assert holding.wait(10)
    reader = threading.Thread(target=node_ingest)
    reader.start()
    try:
        with _connect() as watcher:
            waiting = (
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory' "
                "AND datname = current_database()"
            )
            wait_until(lambda: watcher.execute(waiting).fetchone() == (1,), 10, "the ingest waiting for the pods")
            assert done == []
    finally:
        release.set()
        writer.join(10)
        reader.join(10)
    assert done == [1]

    # Node ingests share the lock: two at once do not wait on each other for it.
    other = f.cluster("other")
    assert ingest_readings(other, [f.reading(0, periods=1, throttled=0, usage_s=1.0)]).samples_written == 1
