"""The Kubernetes source: the API server for the inventory, each kubelet's /metrics/cadvisor (and, opt-in, its
configz) per node. The client does the talking, convert the reading; this is the Source the collector calls."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from django.conf import settings

from apps.clusters.models import Cluster
from apps.collector.sources.base import Inventory, NodeRead, SourceError, SourceUnavailable
from apps.collector.sources.kubernetes import convert
from apps.collector.sources.kubernetes.client import KubernetesSource
from apps.telemetry.readings import NodeInfo, PodInfo

__all__ = ["KubernetesAdapter"]

_Listed = TypeVar("_Listed", NodeInfo, PodInfo)


def _listed(call: Callable[[], tuple[list[_Listed], list[str]]]) -> tuple[list[_Listed], list[str]]:
    """A list call of the client, its SourceError (the list failed) as SourceUnavailable."""
    try:
        return call()
    except SourceError as exc:
        raise SourceUnavailable(str(exc)) from exc


class KubernetesAdapter:
    """The registry's source for clusters registered with a kubeconfig or in-cluster credentials."""

    def __init__(self, cluster: Cluster) -> None:
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
        result = convert.node_read(node, self.source.scrape_cadvisor(node), now)
        if self.source.read_kubelet_config:
            try:
                config = self.source.kubelet_config(node)
            except Exception as exc:  # a config we cannot read must not cost the node's counters
                result.problems.append(f"kubelet config not read: {exc}")
            else:
                if config:
                    result.node_info = convert.node_info_from_kubelet_config(node, config)
        return result

    def close(self) -> None:
        self.source.close()
