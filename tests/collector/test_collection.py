"""A whole collection cycle against the local API-server stand-in playing the real recorded 1.33 cluster."""

from __future__ import annotations

import time

import pytest

from apps.advisor.models import Finding
from apps.clusters.models import Container, Node, Pod
from apps.clusters.services import register_cluster
from apps.collector.models import CollectionRun
from apps.collector.services import collect_once
from apps.telemetry.models import Sample
from standins.apiserver import ApiServerStandin, Faults

pytestmark = pytest.mark.django_db(transaction=True)
FIXTURE = "tests/fixtures/clusters/k8s-1.33-minikube"


@pytest.fixture()
def standin(tmp_path):
    faults = Faults()
    with ApiServerStandin(FIXTURE, faults, replicas=3) as server:
        kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
        server.kubeconfig = kubeconfig  # type: ignore[attr-defined]
        yield server


def test_collect_stores_inventory_and_counters_for_every_node(standin, settings):
    cluster, _ = register_cluster("minikube", "kubernetes", kubeconfig_path=str(standin.kubeconfig))

    run = collect_once(cluster)

    assert run.status == CollectionRun.Status.OK
    assert (run.nodes_total, run.nodes_ok, run.nodes_failed) == (3, 3, 0)
    assert Node.objects.filter(cluster=cluster).count() == 3
    assert Node.objects.filter(cluster=cluster, has_cfs_counters=True).count() == 3
    assert Pod.objects.filter(cluster=cluster, node__name=standin.node_names[2]).count() > 10
    assert Sample.objects.count() == run.samples_written > 0
    # Counters are stored as the kubelet reported them: check one container against the scrape by hand.
    node = standin.node_names[0]
    scrape = standin.scrape_of(node).decode()
    line = next(
        ln for ln in scrape.splitlines()
        if ln.startswith("container_cpu_cfs_periods_total{") and 'container="php-apache"' in ln
    )  # fmt: skip
    periods = int(line.split("}")[1].split()[0])
    pod = line.split('pod="')[1].split('"')[0]
    php = Container.objects.get(pod__cluster=cluster, pod__name=pod, name="php-apache")
    assert Sample.objects.get(container=php).periods_total == periods
    assert (
        Finding.objects.filter(cluster=cluster, window="1h").count()
        == Container.objects.filter(pod__cluster=cluster).count()
    )


def test_a_failing_and_a_hanging_node_are_reported_and_the_rest_stored(standin, settings):
    settings.CPUTUNE_NODE_TIMEOUT = 2
    broken, hanging, healthy = standin.node_names
    standin.faults.scrape_status[broken] = 500
    standin.faults.hang_s[hanging] = 30
    cluster, _ = register_cluster("minikube", "kubernetes", kubeconfig_path=str(standin.kubeconfig))

    started = time.monotonic()
    run = collect_once(cluster)

    assert time.monotonic() - started < 15, "a hanging node held the cycle past its timeout"
    assert run.status == CollectionRun.Status.PARTIAL
    assert (run.nodes_ok, run.nodes_failed) == (1, 2)
    errors = dict(run.node_results.filter(ok=False).values_list("node", "error"))
    assert "500" in errors[broken]
    assert "no complete answer within 2 s" in errors[hanging]
    stored_nodes = set(Sample.objects.values_list("container__pod__node__name", flat=True).distinct())
    assert stored_nodes == {healthy}


def test_a_second_cycle_gives_deltas_and_an_unreachable_api_fails_the_run_clearly(standin, tmp_path):
    cluster, _ = register_cluster("minikube", "kubernetes", kubeconfig_path=str(standin.kubeconfig))
    collect_once(cluster)
    collect_once(cluster)
    # The recorded scrape does not advance: the second reading has the same sample timestamps and is a duplicate.
    assert Sample.objects.filter(periods_delta__isnull=False).count() == 0

    gone, _ = register_cluster("gone", "kubernetes", kubeconfig_path=str(tmp_path / "missing-kubeconfig"))
    run = collect_once(gone)
    assert run.status == CollectionRun.Status.FAILED
    assert "missing-kubeconfig" in run.problems.get().message
