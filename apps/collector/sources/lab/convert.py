"""The agent's payload for the lab's cgroups → readings named through the lab's own inventory. Pure Python.

The agent sees pod uids and container ids only; the lab knows which namespace, pod and container each one is. Cgroups
the lab did not start (and pod-level ones) are left out.
"""

from __future__ import annotations

from datetime import UTC, datetime

from agent.cputune_agent import Payload
from apps.collector.sources.base import NodeRead
from apps.lab.runtime import LabInventory
from apps.telemetry.readings import CounterReading

__all__ = ["node_read"]


def node_read(lab: LabInventory, node: str, payload: Payload) -> NodeRead:
    """One reading per lab container the payload holds, at the payload's instant; the agent's read errors and a count
    of lab containers without a cgroup (stopped or removed) as problems."""
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
    # The lab writes its cgroups itself, v2 weights with the linear mapping (apps/lab/cgroups.py).
    return NodeRead(
        node=node,
        readings=readings,
        node_info=lab.node,
        has_cfs_counters=True,
        problems=problems,
        cgroup_version=lab.cgroup_version,
        weight_mapping="linear" if lab.cgroup_version == 2 else "",
    )
