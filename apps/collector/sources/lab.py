"""The lab as a source: inventory from the lab runtime's state, counters read with the node agent's cgroupfs reader
— the same code that runs on real nodes — and named through the lab's own inventory."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings

from agent import cputune_agent
from apps.clusters.models import Cluster
from apps.collector.registry import Inventory, NodeRead, SourceUnavailable
from apps.lab import runtime
from apps.telemetry.readings import CounterReading


def lab_state_dir() -> Path:
    return Path(settings.DATA_DIR) / "lab"


class LabAdapter:
    def __init__(self, cluster: Cluster) -> None:
        if not runtime.lab_status(lab_state_dir()).running:
            raise SourceUnavailable("the lab is not running: start it with `python manage.py lab up`")

    def inventory(self) -> Inventory:
        lab = runtime.lab_inventory(lab_state_dir())
        return Inventory(nodes=[lab.node], pods=list(lab.pods()))

    def read_node(self, node: str, now: datetime) -> NodeRead:
        lab = runtime.lab_inventory(lab_state_dir())
        cpu_root = os.path.join(lab.cpu_mount, lab.root)
        if lab.cgroup_version == 2:
            payload = cputune_agent.collect(cgroup_root_v2=cpu_root, node_name=node, now=now)
        else:
            cpuacct_root = os.path.join(lab.cpuacct_mount, lab.root) if lab.cpuacct_mount else None
            payload = cputune_agent.collect(
                cgroup_root_v1_cpu=cpu_root, cgroup_root_v1_cpuacct=cpuacct_root, node_name=node, now=now
            )
        names = {(c.pod_uid, c.container_id): (c.namespace, c.pod, c.container) for c in lab.containers}
        collected_at = datetime.fromisoformat(payload["collected_at"]).astimezone(UTC)
        readings = []
        for entry in payload["containers"]:
            key = (entry["pod_uid"], entry["container_id"])
            if key not in names:
                continue  # pod-level cgroups, and anything this lab did not start
            namespace, pod, container = names[key]
            readings.append(
                CounterReading(
                    namespace=namespace,
                    pod=pod,
                    container=container,
                    ts=collected_at,
                    periods_total=entry["periods_total"],
                    throttled_periods_total=entry["throttled_periods_total"],
                    throttled_seconds_total=entry["throttled_seconds_total"],
                    usage_seconds_total=entry["usage_seconds_total"],
                    threads=entry["threads"],
                    period_us=entry["period_us"],
                    quota_us=entry["quota_us"],
                    node=node,
                )
            )
        problems = list(payload["errors"])
        if len(readings) < len(names):
            problems.append(f"{len(names) - len(readings)} lab container(s) had no cgroup to read (stopped or removed)")
        return NodeRead(node=node, readings=readings, node_info=lab.node, has_cfs_counters=True, problems=problems)

    def close(self) -> None:
        pass
