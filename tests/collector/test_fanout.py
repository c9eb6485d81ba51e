"""The Celery fan-out with a real worker on Redis: one task per node, a failing node never blocks the others."""

from __future__ import annotations

import time

import pytest

from apps.advisor.models import Finding, Window
from apps.clusters.models import Container
from apps.clusters.services import register_cluster
from apps.collector.models import CollectionRun
from apps.collector.tasks import collect_cluster
from apps.telemetry.models import Sample
from standins.apiserver import ApiServerStandin, Faults

FIXTURE = "tests/fixtures/clusters/k8s-1.33-minikube"


def wait_for(predicate, timeout_s: float = 45.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_cycle_on_a_real_worker_stores_every_healthy_node_and_reports_the_failed_one(
    celery_worker_redis, tmp_path, settings
):
    with ApiServerStandin(FIXTURE, Faults(), replicas=4) as server:
        broken = server.node_names[1]
        server.faults.scrape_status[broken] = 500
        cluster, _ = register_cluster(
            "fanout", "kubernetes", kubeconfig_path=str(server.write_kubeconfig(tmp_path / "kc"))
        )

        collect_cluster.delay(cluster.pk)

        assert wait_for(lambda: CollectionRun.objects.filter(cluster=cluster, finished_at__isnull=False).exists()), (
            "the run did not close within 45 s"
        )
        run = CollectionRun.objects.get(cluster=cluster)
        assert (run.nodes_total, run.nodes_ok, run.nodes_failed) == (4, 3, 1)
        assert run.status == CollectionRun.Status.PARTIAL
        failed = run.node_results.get(ok=False)
        assert failed.node == broken and "HTTP 500" in failed.error
        stored = set(Sample.objects.values_list("container__pod__node__name", flat=True).distinct())
        assert stored == set(server.node_names) - {broken}
        # The last node to report enqueues the advisor: findings appear without anyone asking, computed in parts
        # (a task per group of nodes), for every container and window — the broken node's too, from the inventory.
        expected = len(Window.values) * Container.objects.filter(pod__cluster=cluster).count()
        assert wait_for(lambda: Finding.objects.filter(cluster=cluster).count() == expected, 30), (
            Finding.objects.filter(cluster=cluster).count(),
            expected,
        )


@pytest.mark.django_db
def test_a_node_that_cannot_be_read_is_an_outcome_logged_in_one_line_not_a_failed_task(tmp_path, caplog):
    from apps.collector.services import collect_inventory, start_run
    from apps.collector.tasks import collect_node

    with ApiServerStandin(FIXTURE, Faults(), replicas=2) as server:
        broken = server.node_names[1]
        server.faults.scrape_status[broken] = 500
        cluster, _ = register_cluster(
            "one-line", "kubernetes", kubeconfig_path=str(server.write_kubeconfig(tmp_path / "kc"))
        )
        run = start_run(cluster)
        collect_inventory(run)

        with caplog.at_level("WARNING"):
            outcome = collect_node.apply(args=(run.pk, broken))

    assert outcome.successful() and outcome.result == 0
    failed = run.node_results.get(node=broken)
    assert not failed.ok and "HTTP 500" in failed.error
    (record,) = [r for r in caplog.records if broken in r.getMessage()]
    assert record.levelname == "WARNING" and record.exc_info is None
    assert "not read" in record.getMessage() and "HTTP 500" in record.getMessage()
