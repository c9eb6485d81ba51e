"""A small stored cluster with history, built through the real ingest and advisor services.

Containers follow recognisable patterns so pages, API and CSV tests can assert what a user would see:

- `api-*`     (shop)   limit 500m, runs at its ceiling, throttled in ~60% of periods      → raise_limit
- `worker-*`  (shop)   limit 200m, 64 threads, throttled in ~40% of periods              → cut_threads
- `cache-*`   (shop)   request 2000m, uses ~30m                                          → lower_request
- `batch-*`   (batch)  no request, no limit (BestEffort)                                 → set_request
- `web-*`     (shop)   request 500m, limit 1000m, uses ~200m, never throttled            → healthy
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from apps.advisor.services import refresh_findings
from apps.clusters.models import Cluster
from apps.telemetry.ingest import ingest, ingest_readings
from apps.telemetry.readings import Batch, ContainerInfo, CounterReading, NodeInfo, PodInfo


@dataclass(frozen=True)
class Pattern:
    prefix: str
    namespace: str
    request_mcpu: int | None
    limit_mcpu: int | None
    usage_mcpu: float
    throttle_ratio: float
    threads: int
    workload_kind: str = "Deployment"
    pressure: float | None = None  # share of the time some task waited (PSI some; full is half); None: not exported


PATTERNS = (
    Pattern("api", "shop", 250, 500, 490.0, 0.6, 8),
    Pattern("worker", "shop", 100, 200, 150.0, 0.4, 64),
    Pattern("cache", "shop", 2000, None, 30.0, 0.0, 4, "StatefulSet"),
    Pattern("batch", "batch", None, None, 100.0, 0.0, 2, "Job"),
    Pattern("web", "shop", 500, 1000, 200.0, 0.0, 4),
)


def build_cluster(
    name: str = "demo",
    *,
    per_pattern: int = 2,
    minutes: int = 30,
    step_s: int = 60,
    node_cpus: int = 16,
    kernel: str = "4.19.76-linuxkit",
    now: datetime | None = None,
    uptime_s: float = 0,
    patterns: tuple[Pattern, ...] = PATTERNS,
) -> Cluster:
    """Store `minutes` of readings every `step_s` seconds for per_pattern pods of each pattern, then findings.

    `uptime_s`: how long the containers ran before the first reading, so that reading's counters are not zero, as
    for containers already running when cputune starts (minutes=0 then gives lifetime figures with a ratio)."""
    now = (now or timezone.now()).replace(microsecond=0)
    cluster = Cluster.objects.create(name=name, source="kubernetes")
    nodes = [NodeInfo(name=f"{name}-node-{i}", capacity_mcpu=node_cpus * 1000, allocatable_mcpu=node_cpus * 1000 - 200,
                      kernel_version=kernel, cpu_manager_policy="none") for i in range(2)]  # fmt: skip
    pods: list[PodInfo] = []
    plan: list[tuple[PodInfo, Pattern]] = []
    for pattern in patterns:
        for i in range(per_pattern):
            qos = "BestEffort" if pattern.request_mcpu is None else "Burstable"
            pod = PodInfo(
                namespace=pattern.namespace,
                name=f"{pattern.prefix}-{i}",
                uid=f"{name}-{pattern.prefix}-{i}",
                node=nodes[i % 2].name,
                qos_class=qos,
                workload_kind=pattern.workload_kind,
                workload_name=pattern.prefix,
                containers=(
                    ContainerInfo(
                        name="main",
                        container_id=f"{abs(hash((name, pattern.prefix, i))):064x}"[:64],
                        request_mcpu=pattern.request_mcpu,
                        limit_mcpu=pattern.limit_mcpu,
                    ),
                ),
            )
            pods.append(pod)
            plan.append((pod, pattern))
    ingest(cluster, Batch(nodes=nodes, pods=pods), now=now)
    steps = minutes * 60 // step_s
    readings: list[CounterReading] = []
    for pod, pattern in plan:
        has_quota = pattern.limit_mcpu is not None
        for s in range(steps + 1):
            ts = now - timedelta(seconds=(steps - s) * step_s)
            ran_s = uptime_s + s * step_s
            periods = round(ran_s * 10) if has_quota else 0  # 100 ms periods
            readings.append(
                CounterReading(
                    namespace=pod.namespace,
                    pod=pod.name,
                    container="main",
                    ts=ts,
                    periods_total=periods if has_quota else None,
                    throttled_periods_total=round(periods * pattern.throttle_ratio) if has_quota else None,
                    throttled_seconds_total=periods * pattern.throttle_ratio * 0.05 if has_quota else None,
                    usage_seconds_total=pattern.usage_mcpu / 1000.0 * ran_s,
                    threads=pattern.threads,
                    period_us=100_000,
                    node=pod.node,
                    pressure_waiting_seconds_total=None if pattern.pressure is None else pattern.pressure * ran_s,
                    pressure_stalled_seconds_total=None if pattern.pressure is None else pattern.pressure / 2 * ran_s,
                )
            )
    ingest_readings(cluster, readings, now=now)
    refresh_findings(cluster, now=now)
    return cluster
