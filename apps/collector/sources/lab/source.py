"""The lab as a source: inventory from the lab runtime's state, counters read with the node agent's cgroupfs reader
— the same code that runs on real nodes — and named through the lab's own inventory."""

from __future__ import annotations

from datetime import datetime

from apps.clusters.models import Cluster
from apps.collector.sources.base import Inventory, NodeRead, SourceUnavailable
from apps.collector.sources.lab import client, convert

__all__ = ["LabAdapter"]


class LabAdapter:
    def __init__(self, cluster: Cluster) -> None:
        if not client.lab_running():
            raise SourceUnavailable("the lab is not running: start it with `python manage.py lab up`")

    def inventory(self) -> Inventory:
        lab = client.read_inventory()
        return Inventory(nodes=[lab.node], pods=list(lab.pods()))

    def read_node(self, node: str, now: datetime) -> NodeRead:
        lab = client.read_inventory()
        return convert.node_read(lab, node, client.read_cgroups(lab, node, now))

    def close(self) -> None:
        pass
