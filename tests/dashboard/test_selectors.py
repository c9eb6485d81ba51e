"""The pages' reads: aggregates, sorting, share holders; figures worked out by hand from the builder's patterns."""

from __future__ import annotations

import pytest
from django.utils import timezone

from apps.clusters.models import Cluster, Node
from apps.dashboard import nodes, selectors
from apps.telemetry.ingest import ingest
from apps.telemetry.readings import Batch, ContainerInfo, NodeInfo, PodInfo

pytestmark = pytest.mark.django_db


def test_share_holders_split_allocatable_cpu_by_shares(demo: Cluster) -> None:
    holders = nodes.share_holders(Node.objects.get(name="demo-node-0"))
    by_pod = {h.pod: h for h in holders}
    # Shares: cache 2000m → 2048, web 500m → 512, api 250m → 256, worker 100m → 102, batch none → 2; Σ 2,920.
    assert [h.pod for h in holders] == ["cache-0", "web-0", "api-0", "worker-0", "batch-0"]
    assert [h.shares for h in holders] == [2048, 512, 256, 102, 2]
    assert by_pod["api-0"].floor_mcpu == 15_800 * 256 // 2920  # 1,385m
    assert by_pod["batch-0"].request_mcpu is None and by_pod["batch-0"].floor_mcpu == 15_800 * 2 // 2920
    assert sum(h.fraction for h in holders) == pytest.approx(1.0)


def test_share_holders_sum_a_pods_containers_and_need_allocatable_for_floors(db: None) -> None:
    cluster = Cluster.objects.create(name="two")
    pod = PodInfo(namespace="ns", name="p", node="n1", containers=(
        ContainerInfo(name="a", request_mcpu=300), ContainerInfo(name="b", request_mcpu=200), ContainerInfo(name="c"),
    ))  # fmt: skip
    ingest(cluster, Batch(nodes=[NodeInfo(name="n1")], pods=[pod]), now=timezone.now())
    (holder,) = nodes.share_holders(Node.objects.get(cluster=cluster, name="n1"))
    assert holder.request_mcpu == 500 and holder.shares == 512
    assert holder.floor_mcpu is None  # the node reported no CPU: no floor to compute


def test_most_throttled_workloads_group_pods_by_owner(demo: Cluster) -> None:
    rows = selectors.most_throttled_workloads()
    assert [(r.workload_name, r.containers, r.worst_ratio) for r in rows] == [("api", 2, 0.6), ("worker", 2, 0.4)]
    assert rows[0].workload_kind == "Deployment" and rows[0].namespace == "shop"


def test_a_pod_without_an_owner_stands_for_itself(demo: Cluster) -> None:
    from apps.clusters.models import Pod

    Pod.objects.filter(cluster=demo, name="api-1").update(workload_name="", workload_kind="")
    names = {(r.workload_kind, r.workload_name, r.containers) for r in selectors.most_throttled_workloads()}
    assert ("Pod", "api-1", 1) in names and ("Deployment", "api", 1) in names


def test_node_verdicts_are_counted_per_cluster(demo: Cluster) -> None:
    Node.objects.filter(name="demo-node-1").update(kernel_version="5.10.12")
    assert selectors.node_verdict_counts()[demo.pk] == {"fixed": 1, "affected": 0, "unknown": 1}


def test_an_unknown_sort_key_is_refused_with_its_name(demo: Cluster) -> None:
    with pytest.raises(ValueError, match="cannot sort by 'evil'"):
        selectors.report_queryset(demo, "shop", sort="evil")


def test_the_namespace_summary_counts_containers_over_the_target(demo: Cluster, settings) -> None:
    summary = selectors.namespace_summary(demo, "shop", "1h")
    assert (summary.containers, summary.over_target, summary.worst_ratio) == (8, 4, 0.6)
    settings.CPUTUNE_THROTTLE_TARGET = 0.5
    assert selectors.namespace_summary(demo, "shop", "1h").over_target == 2  # only api's 60% is over 50%


def test_namespaces_seen_without_findings_in_the_window_still_get_a_row(demo: Cluster) -> None:
    from apps.advisor.models import Finding

    Finding.objects.filter(cluster=demo, namespace="batch").delete()
    rows = {r.namespace: r for r in selectors.cluster_page(demo).namespaces}
    assert rows["batch"].containers == 0 and rows["batch"].worst_ratio is None
    assert rows["shop"].containers == 8


def test_a_workload_whose_worst_ratio_is_a_lifetime_figure_is_marked_lifetime(db: None) -> None:
    from tests.builders import build_cluster

    build_cluster("once", per_pattern=1, minutes=0, uptime_s=3)  # one reading: 30 periods since each started
    rows = {r.workload_name: r for r in selectors.most_throttled_workloads()}
    assert rows["api"].lifetime and rows["api"].lifetime_periods == 30 and rows["api"].worst_ratio == 0.6


def test_a_window_figure_as_bad_as_the_lifetime_one_is_not_marked_lifetime(demo: Cluster) -> None:
    from apps.advisor.models import Finding

    # api-0 seen once (lifetime 60%), api-1 over the window at 60% too: the worst ratio holds over the window.
    Finding.objects.filter(cluster=demo, window="1h", container__pod__name="api-0").update(lifetime=True)
    api = next(r for r in selectors.most_throttled_workloads() if r.workload_name == "api")
    assert not api.lifetime
    Finding.objects.filter(cluster=demo, window="1h", container__pod__name="api-1").update(throttle_ratio=0.5)
    api = next(r for r in selectors.most_throttled_workloads() if r.workload_name == "api")
    assert api.lifetime and api.worst_ratio == 0.6


def test_the_namespace_summary_carries_the_windows_coverage(demo: Cluster) -> None:
    from apps.advisor.selectors import window_coverage

    summary = selectors.namespace_summary(demo, "shop", "24h")
    assert summary.coverage == window_coverage(demo, "24h", namespace="shop")
    assert 0 < summary.coverage.covered_minutes <= 30 and summary.coverage.partial and not summary.worst_lifetime


def test_share_holders_take_linear_work_in_the_pods_of_a_node(db: None, monkeypatch) -> None:
    """A node page's share holders convert each pod's request to shares once: a node with 15,000 pods spent two
    minutes here when every pod's neighbours were converted again (quadratic)."""
    from apps.advisor import cfs

    cluster = Cluster.objects.create(name="crowded")
    pods = [PodInfo(namespace="ns", name=f"p{i}", node="n1", containers=(ContainerInfo(name="c", request_mcpu=10 + i),))
            for i in range(400)]  # fmt: skip
    node = NodeInfo(name="n1", capacity_mcpu=64_000, allocatable_mcpu=63_000)
    ingest(cluster, Batch(nodes=[node], pods=pods), now=timezone.now())
    calls = 0
    convert = nodes.shares_from_request_mcpu

    def counted(request_mcpu):
        nonlocal calls
        calls += 1
        return convert(request_mcpu)

    monkeypatch.setattr(nodes, "shares_from_request_mcpu", counted)
    monkeypatch.setattr(cfs, "shares_from_request_mcpu", counted)
    holders = nodes.share_holders(Node.objects.get(cluster=cluster, name="n1"))
    assert len(holders) == 400 and calls <= 2 * 400
    assert sum(h.floor_mcpu or 0 for h in holders) <= 63_000
    assert holders[0].floor_mcpu == 63_000 * holders[0].shares // sum(h.shares for h in holders)
