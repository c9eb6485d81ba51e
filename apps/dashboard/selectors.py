"""Reads for the pages: querysets shaped for templates."""

from __future__ import annotations

from dataclasses import dataclass

from apps.clusters.models import Cluster
from apps.collector.models import CollectionRun


@dataclass(frozen=True)
class ClusterRow:
    cluster: Cluster
    last_run: CollectionRun | None
    nodes: int
    pods: int


def cluster_overview() -> list[ClusterRow]:
    rows = []
    for cluster in Cluster.objects.all():
        last_run = CollectionRun.objects.filter(cluster=cluster).first()
        rows.append(ClusterRow(cluster, last_run, cluster.nodes.count(), cluster.pods.count()))
    return rows
