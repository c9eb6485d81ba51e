"""The PostgreSQL inventory path (COPY and one statement per table) stores what the ORM path stores."""

from __future__ import annotations

from datetime import timedelta

import pytest

from apps.clusters.inventory import _NODE_REPORTED, upsert_nodes, upsert_pods
from apps.clusters.models import Cluster, Container, Node, Pod
from apps.telemetry.readings import ContainerInfo, NodeInfo, PodInfo
from tests import factories as f

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def _stored(cluster: Cluster) -> tuple[list[tuple], list[tuple], list[tuple]]:
    nodes = sorted(Node.objects.filter(cluster=cluster).values_list("name", *_NODE_REPORTED, "last_seen"))
    pods = sorted(
        Pod.objects.filter(cluster=cluster).values_list(
            "namespace", "name", "uid", "node__name", "qos_class", "workload_kind", "workload_name", "last_seen"
        ),
        key=repr,
    )
    containers = sorted(
        Container.objects.filter(pod__cluster=cluster).values_list(
            "pod__namespace", "pod__name", "name", "container_id", "request_mcpu", "limit_mcpu", "restarts", "last_seen"
        ),
        key=repr,
    )
    return nodes, pods, containers


def _inventory(cluster: Cluster, method: str) -> None:
    first, second = f.T0, f.T0 + timedelta(minutes=1)
    nodes = [
        f.node_info("node-a", cpus=88, kernel="4.14.133-113.105.amzn2.x86_64"),
        NodeInfo(name="node-b", kernel_version="5.15.0-1034-aws", cpu_manager_policy="static", cfs_slice_us=5000),
        NodeInfo(name="node-c"),
    ]
    node_ids = upsert_nodes(cluster, nodes, first, method=method)
    pods = [
        f.pod_info("web-1", containers=2),
        PodInfo(namespace="shop", name="bare", node="node-b"),  # no containers, a bare pod
        PodInfo(namespace="jobs", name="lost-1", node="gone", containers=(ContainerInfo("main", request_mcpu=100),)),
    ]
    upsert_pods(cluster, pods, first, node_ids, method=method)

    # The next cycle: node-a reports nothing but its name (the rest must stay), node-b a new kernel and policy,
    # node-d is new; web-1 changed its requests and restarted, bare moved, a new pod came.
    nodes = [
        NodeInfo(name="node-a"),
        NodeInfo(name="node-b", kernel_version="6.1.0-18-amd64", cpu_manager_policy="none", capacity_mcpu=16000),
        NodeInfo(name="node-d", capacity_mcpu=4000, allocatable_mcpu=3800, cpufreq_governor="performance"),
    ]
    node_ids = upsert_nodes(cluster, nodes, second, method=method)
    pods = [
        PodInfo(
            namespace="shop",
            name="web-1",
            uid="uid-shop-web-1",
            node="node-a",
            qos_class="Guaranteed",
            workload_kind="Deployment",
            workload_name="web",
            containers=(
                ContainerInfo("c0", container_id="abc", request_mcpu=600, limit_mcpu=600, restarts=3),
                ContainerInfo("c1", request_mcpu=None, limit_mcpu=None),
            ),
        ),
        PodInfo(namespace="shop", name="bare", node="node-d", qos_class="BestEffort"),
        PodInfo(namespace="shop", name="api-7", node="node-b", containers=(ContainerInfo("api", limit_mcpu=250),)),
    ]
    upsert_pods(cluster, pods, second, node_ids, method=method)


def test_the_sql_inventory_stores_what_the_orm_path_stores():
    by_sql, by_orm = f.cluster("by-sql"), f.cluster("by-orm")

    _inventory(by_sql, "sql")
    _inventory(by_orm, "orm")

    sql_nodes, sql_pods, sql_containers = _stored(by_sql)
    assert (sql_nodes, sql_pods, sql_containers) == _stored(by_orm)
    # And what they both store is the intended result, not merely the same one.
    node_a = next(n for n in sql_nodes if n[0] == "node-a")
    assert node_a[1:4] == (88000, 87900, "4.14.133-113.105.amzn2.x86_64")
    node_b = next(n for n in sql_nodes if n[0] == "node-b")
    assert (node_b[1], node_b[3], node_b[7], node_b[8]) == (16000, "6.1.0-18-amd64", "none", 5000)
    assert [p[:4] for p in sql_pods] == [
        ("jobs", "lost-1", "", None),
        ("shop", "api-7", "", "node-b"),
        ("shop", "bare", "", "node-d"),
        ("shop", "web-1", "uid-shop-web-1", "node-a"),
    ]
    web = [c for c in sql_containers if c[1] == "web-1"]
    assert [c[2:7] for c in web] == [("c0", "abc", 600, 600, 3), ("c1", "", None, None, 0)]
    assert {c[7] for c in web} == {f.T0 + timedelta(minutes=1)}
    assert next(c for c in sql_containers if c[1] == "lost-1")[7] == f.T0  # not listed again: last seen then


def test_the_sql_inventory_can_run_twice_in_one_transaction():
    """The load tables empty themselves at the outermost commit only: a second upsert in one transaction must not
    see the first one's rows."""
    cluster = f.cluster()
    node_ids = upsert_nodes(cluster, [f.node_info("node-a"), f.node_info("node-b")], f.T0, method="sql")
    upsert_pods(cluster, [f.pod_info("web-1", node="node-a")], f.T0, node_ids, method="sql")
    upsert_nodes(cluster, [f.node_info("node-b", cpus=2), f.node_info("node-c")], f.T0, method="sql")
    upsert_pods(cluster, [f.pod_info("web-2", node="node-b")], f.T0 + timedelta(minutes=1), node_ids, method="sql")

    assert Node.objects.get(cluster=cluster, name="node-a").capacity_mcpu == 8000
    assert Node.objects.get(cluster=cluster, name="node-b").capacity_mcpu == 2000
    assert Pod.objects.get(cluster=cluster, name="web-1").last_seen == f.T0
