"""Small builders for test data: real model rows with sensible defaults."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from apps.clusters.change_groups import group_alone
from apps.clusters.models import Cluster, Container, ContainerChange, SourceKind
from apps.telemetry.readings import ContainerInfo, CounterReading, NodeInfo, PodInfo

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def cluster(name: str = "test", source: str = SourceKind.KUBERNETES) -> Cluster:
    return Cluster.objects.create(name=name, source=source)


def change(container: Container, kind: str, before: str, after: str, seen_at: datetime) -> ContainerChange:
    """A change of its own group, as a write that saw only it would record it."""
    made = ContainerChange.objects.create(container=container, kind=kind, before=before, after=after, seen_at=seen_at)
    group_alone([made.pk])
    made.refresh_from_db()
    return made


def node_info(name: str = "node-a", cpus: int = 8, kernel: str = "5.15.0-1034-aws") -> NodeInfo:
    return NodeInfo(name=name, capacity_mcpu=cpus * 1000, allocatable_mcpu=cpus * 1000 - 100, kernel_version=kernel)


def pod_info(name: str = "web-1", namespace: str = "shop", node: str = "node-a", containers: int = 1) -> PodInfo:
    return PodInfo(
        namespace=namespace,
        name=name,
        uid=f"uid-{namespace}-{name}",
        node=node,
        qos_class="Burstable",
        workload_kind="Deployment",
        workload_name=name.rsplit("-", 1)[0],
        containers=tuple(
            ContainerInfo(name=f"c{i}", container_id=f"{i:064x}", request_mcpu=250, limit_mcpu=500)
            for i in range(containers)
        ),
    )


def reading(
    minute: int,
    *,
    periods: int,
    throttled: int,
    usage_s: float,
    throttled_s: float = 0.0,
    pod: str = "web-1",
    namespace: str = "shop",
    container: str = "c0",
    threads: int | None = 4,
) -> CounterReading:
    return CounterReading(
        namespace=namespace,
        pod=pod,
        container=container,
        ts=T0 + timedelta(minutes=minute),
        periods_total=periods,
        throttled_periods_total=throttled,
        throttled_seconds_total=throttled_s,
        usage_seconds_total=usage_s,
        threads=threads,
        period_us=100_000,
        node="node-a",
    )
