"""Which source reads a cluster: its source kind → a Source (apps.collector.sources.base). The registry imports the
sources; nothing imports it back but the collector's services, tasks and commands.

Adding a source means one folder under sources/ (client, convert, source) and one entry in SOURCES.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from django.conf import settings

from apps.clusters.models import Cluster, SourceKind
from apps.collector.sources.base import Inventory, NodeRead, Source, SourceUnavailable
from apps.collector.sources.kubernetes.source import KubernetesAdapter
from apps.collector.sources.lab.source import LabAdapter
from apps.collector.sources.prometheus.source import PrometheusAdapter

__all__ = ["SOURCES", "PushOnlyAdapter", "cached_source_for", "source_for"]


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


SOURCES: dict[str, Callable[[Cluster], Source]] = {
    SourceKind.KUBERNETES: KubernetesAdapter,
    SourceKind.LAB: LabAdapter,
    SourceKind.PROMETHEUS: PrometheusAdapter,
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
    another reuses the client (loading credentials and building the Kubernetes client cost more than a scrape)."""
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
