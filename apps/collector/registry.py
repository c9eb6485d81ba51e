"""Sources behind one small interface: list the inventory, read one node. Heavy clients are imported where used.

A source yields the plain values of `apps.telemetry.readings`; the collector services store them. Adding a source
means one class here with `inventory()` and `read_node()`, and one entry in SOURCES.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, TypeVar, runtime_checkable

from django.conf import settings

from apps.clusters.models import Cluster, SourceKind
from apps.telemetry.readings import CounterReading, NodeInfo, PodInfo

_Listed = TypeVar("_Listed", NodeInfo, PodInfo)


class SourceUnavailable(RuntimeError):
    """The source cannot be reached or configured at all (no kubeconfig, API server down): the whole run fails."""


@dataclass
class Inventory:
    nodes: list[NodeInfo] = field(default_factory=list)
    pods: list[PodInfo] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


@dataclass
class NodeRead:
    """What reading one node gave: its containers' readings, facts about the node, and non-fatal problems."""

    node: str
    readings: list[CounterReading] = field(default_factory=list)
    node_info: NodeInfo | None = None  # facts only this read knows (CPU manager policy, slice size…)
    has_cfs_counters: bool | None = None
    problems: list[str] = field(default_factory=list)


class Source(Protocol):
    def inventory(self) -> Inventory: ...

    def read_node(self, node: str, now: datetime) -> NodeRead:
        """Read one node; raise an exception with a clear message when the node cannot be read at all."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class NodeLister(Protocol):
    """A source that lists nodes and pods apart (the Kubernetes API): a pod list that fails then costs the cycle
    its pod changes, not its node reads. A source without these methods is listed whole by `inventory()`."""

    def list_nodes(self) -> tuple[list[NodeInfo], list[str]]: ...

    def list_pods(self) -> tuple[list[PodInfo], list[str]]: ...


def _listed(call: Callable[[], tuple[list[_Listed], list[str]]]) -> tuple[list[_Listed], list[str]]:
    """A list call of the Kubernetes source, its SourceError (the list failed) as SourceUnavailable."""
    from apps.collector.sources import SourceError

    try:
        return call()
    except SourceError as exc:
        raise SourceUnavailable(str(exc)) from exc


class KubernetesAdapter:
    """The Kubernetes API for inventory, each kubelet's /metrics/cadvisor (and opt-in configz) per node."""

    def __init__(self, cluster: Cluster) -> None:
        from apps.collector.sources import SourceError
        from apps.collector.sources.kubernetes import KubernetesSource

        try:
            self.source = KubernetesSource(
                kubeconfig=cluster.kubeconfig_path or None,
                context=cluster.kube_context or None,
                in_cluster=cluster.in_cluster,
                kubelet_direct=cluster.kubelet_direct,
                read_kubelet_config=cluster.read_kubelet_config,
                request_timeout_s=settings.CPUTUNE_NODE_TIMEOUT,
            )
        except (SourceError, ValueError) as exc:
            raise SourceUnavailable(str(exc)) from exc

    def inventory(self) -> Inventory:
        nodes, node_problems = self.list_nodes()
        pods, pod_problems = self.list_pods()
        return Inventory(nodes=nodes, pods=pods, problems=node_problems + pod_problems)

    def list_nodes(self) -> tuple[list[NodeInfo], list[str]]:
        """Every node and the problems met listing them; SourceUnavailable when the list fails."""
        return _listed(self.source.list_nodes)

    def list_pods(self) -> tuple[list[PodInfo], list[str]]:
        """Every pod and the problems met listing them; SourceUnavailable when the list fails."""
        return _listed(self.source.list_pods)

    def read_node(self, node: str, now: datetime) -> NodeRead:
        from apps.collector.cadvisor import parse_cadvisor
        from apps.collector.inventory import node_with_kubelet_config

        body = self.source.scrape_cadvisor(node)
        scrape = parse_cadvisor(body, node=node, default_ts=now)
        result = NodeRead(node=node, readings=scrape.readings, has_cfs_counters=scrape.has_cfs_counters)
        result.problems.extend(scrape.problems)
        if not scrape.has_cfs_counters and scrape.readings:
            result.problems.append(
                "this kubelet exposes no container_cpu_cfs_* series: throttling is not reported on this node "
                "(usage is still collected); the node agent can read cpu.stat directly"
            )
        if self.source.read_kubelet_config:
            try:
                config = self.source.kubelet_config(node)
            except Exception as exc:  # a config we cannot read must not cost the node's counters
                result.problems.append(f"kubelet config not read: {exc}")
            else:
                if config:
                    result.node_info = node_with_kubelet_config(NodeInfo(name=node), config)
        return result

    def close(self) -> None:
        self.source.close()


class PushOnlyAdapter:
    """Clusters fed only by node agents (POST /api/v1/ingest/) or dumps: nothing to pull."""

    def __init__(self, cluster: Cluster) -> None:
        raise SourceUnavailable(
            f"cluster {cluster.name} is fed by pushes ({cluster.source}); there is nothing to collect"
        )

    def inventory(self) -> Inventory:  # pragma: no cover - never constructed
        raise NotImplementedError

    def read_node(self, node: str, now: datetime) -> NodeRead:  # pragma: no cover - never constructed
        raise NotImplementedError

    def close(self) -> None:  # pragma: no cover - never constructed
        pass


def _lab(cluster: Cluster) -> Source:
    from apps.collector.sources.lab import LabAdapter

    return LabAdapter(cluster)


def _prometheus(cluster: Cluster) -> Source:
    from apps.collector.sources.prometheus import PrometheusAdapter

    return PrometheusAdapter(cluster)


SOURCES: dict[str, Callable[[Cluster], Source]] = {
    SourceKind.KUBERNETES: KubernetesAdapter,
    SourceKind.LAB: _lab,
    SourceKind.PROMETHEUS: _prometheus,
    SourceKind.AGENT: PushOnlyAdapter,
    SourceKind.DUMP: PushOnlyAdapter,
}


def source_for(cluster: Cluster) -> Source:
    """The source that reads this cluster; SourceUnavailable when it cannot be set up."""
    try:
        factory = SOURCES[cluster.source]
    except KeyError:
        raise SourceUnavailable(f"cluster {cluster.name} has an unknown source {cluster.source!r}") from None
    return factory(cluster)


_cached: dict[int, tuple[tuple, Source]] = {}


def cached_source_for(cluster: Cluster) -> Source:
    """source_for, kept per process while the cluster's settings stay the same: a worker reading one node after
    another reuses the client (loading credentials and building the Kubernetes client took longer than a scrape)."""
    key = (
        cluster.source,
        cluster.kubeconfig_path,
        cluster.kube_context,
        cluster.in_cluster,
        cluster.kubelet_direct,
        cluster.read_kubelet_config,
        cluster.prometheus_url,
        settings.CPUTUNE_NODE_TIMEOUT,
    )
    hit = _cached.get(cluster.pk)
    if hit is not None and hit[0] == key:
        return hit[1]
    if hit is not None:
        hit[1].close()
    source = source_for(cluster)
    if cluster.source != SourceKind.LAB:  # the lab's state changes under it: read it fresh each time
        _cached[cluster.pk] = (key, source)
    return source
