"""Node agent pushes → stored readings: the token's cluster and a known node, cgroups matched to that node's
containers, ingest.

The token says which cluster (every ingest token has one, and maybe one node); the batch must name a node the
inventory holds, and only containers the inventory places on that node are stored, so a token on one node cannot
write readings for another node's containers, invent nodes or rewrite what the inventory says of a node.

The agent (agent/cputune_agent.py; its docstring defines the payload) sees pod uids and runtime container ids, not
names. A cgroup is matched to a stored container by its runtime id (recorded by the Kubernetes inventory). The pod uid
then tells an unmatched id apart: in a known pod whose every container was matched it is the pod's sandbox (pause
container); otherwise it is reported back as unknown, with the reason, and never guessed. Pod-level cgroups (empty
container id) are counted and left out: readings are stored per container.

The batch is then one telemetry ingest: node facts (kernel, CFS slice, cpufreq governor) and the matched readings, all
at the agent's `collected_at`. Counter deltas, resets and duplicates are the ingest's job, as for every other source.
The period samples of matched containers (the agent's few seconds of polling right after `collected_at`) are stored
beside them, once per container and instant.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from django.utils import timezone

from apps.clusters.models import POD_CGROUP, Cluster, Container, Node, Pod
from apps.clusters.services import cgroup_scheme_fields
from apps.telemetry.bursts import BurstValues, store_burst_readings
from apps.telemetry.ingest import ingest, ingest_readings
from apps.telemetry.periods import store_period_samples
from apps.telemetry.readings import Batch, CounterReading, NodeInfo, PeriodReading
from apps.words import printable

log = logging.getLogger(__name__)


class PushRejected(ValueError):
    """The batch cannot be placed in a cluster; the message says why and what to do about it."""


@dataclass(frozen=True, slots=True)
class AgentNode:
    """What the agent says about its node. capacity_mcpu: CPUs in the root cpuset × 1000; cfs_slice_us: None when the
    kernel has no sched_cfs_bandwidth_slice_us; cpufreq_governor: "" without cpufreq."""

    name: str
    kernel_version: str = ""
    capacity_mcpu: int | None = None
    cfs_slice_us: int | None = None
    cpufreq_governor: str = ""


@dataclass(frozen=True, slots=True)
class AgentPeriodSample:
    """A container's cpu.stat polled period by period for `seconds`: `periods` counted, and the throttled time (µs)
    of each one that had some."""

    seconds: float
    periods: int
    throttled_us: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class AgentSample:
    """One cgroup's cumulative counters as the agent read them (seconds, periods, threads); None = not reported."""

    pod_uid: str
    container_id: str  # "" for the pod-level cgroup
    qos_class: str = ""
    periods_total: int | None = None
    throttled_periods_total: int | None = None
    throttled_seconds_total: float | None = None
    usage_seconds_total: float | None = None
    pressure_waiting_seconds_total: float | None = None  # cpu.pressure "some" total
    pressure_stalled_seconds_total: float | None = None  # cpu.pressure "full" total
    threads: int | None = None
    quota_us: int | None = None
    period_us: int | None = None
    period_sample: AgentPeriodSample | None = None  # only with period_us (the validation sees to it)
    shares: int | None = None  # cpu.shares (v1)
    weight: int | None = None  # cpu.weight (v2)
    burst_us: int | None = None  # the CFS burst setting; None: the kernel has none (< 5.14)
    bursts_total: int | None = None
    burst_seconds_total: float | None = None


@dataclass(frozen=True, slots=True)
class AgentBatch:
    """One validated agent push: every sample was read at `collected_at` (timezone-aware)."""

    node: AgentNode
    collected_at: datetime
    samples: tuple[AgentSample, ...] = ()
    errors: tuple[str, ...] = ()  # the agent's own read errors, one line per cgroup it could not read
    cgroup_version: int = 2
    agent_version: str = "1"
    sampler_cpu_seconds: float | None = None  # CPU the agent spent on the period samples


@dataclass(frozen=True, slots=True)
class Unmatched:
    pod_uid: str
    container_id: str
    reason: str


@dataclass
class PushResult:
    cluster: str
    node: str
    accepted: int = 0  # readings matched to a stored container and handed to the ingest
    samples_written: int = 0
    duplicates: int = 0  # readings at or before the container's last stored instant
    period_samples_written: int = 0
    pod_level: int = 0  # pod cgroups in the batch
    pod_cgroups_written: int = 0  # of those, the ones with a quota (pods on this node): stored as the pods' own
    sandboxes: int = 0  # the pause container of a pod whose containers were all matched
    unknown: list[Unmatched] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


class PushForbidden(PushRejected):
    """The token may not push this batch (no cluster of its own, or another node's): a 403, not a bad payload."""


def resolve_target(node_name: str, cluster: Cluster | None, token_node: str = "") -> tuple[Cluster, Node]:
    """The cluster and stored node a batch from `node_name` goes to, for a token bound to `cluster` (and, when set,
    to `token_node`). Only nodes the inventory holds take pushes: a token cannot invent nodes. Raises PushForbidden
    or PushRejected with what to do."""
    if cluster is None:
        raise PushForbidden(
            "this ingest token belongs to no cluster (made before every ingest token had one): create one for the "
            "agent's cluster (manage.py create_token --scope ingest --cluster NAME) and revoke this one"
        )
    if token_node and token_node != node_name:
        raise PushForbidden(f"this ingest token pushes for node {token_node!r} only, not for {node_name!r}")
    if not cluster.enabled:
        raise PushRejected(f"cluster {cluster.name!r} is disabled: enable it in the admin to accept its agents")
    node = Node.objects.filter(cluster=cluster, name=node_name).first()
    if node is None:
        raise PushRejected(
            f"node {node_name!r} is not in cluster {cluster.name!r}'s inventory: pushes are taken for known nodes "
            "only (the next collection adds a new node; an agent-only cluster imports its nodes and pods with "
            "manage.py import_dump --nodes --pods)"
        )
    return cluster, node


def ingest_agent_batch(
    batch: AgentBatch, *, cluster: Cluster | None, token_node: str = "", now: datetime | None = None
) -> PushResult:
    """Store one agent batch from a token bound to `cluster` (and maybe one node); returns what was matched.

    Raises PushForbidden / PushRejected when the batch cannot go there (see resolve_target). Readings are kept only
    for containers the inventory places on the batch's node; the rest, like unmatched cgroups, are in the result
    with the reason. Counters the ingest finds impossible are dropped from their reading and listed in `problems`.
    """
    now = now or timezone.now()
    target, node = resolve_target(batch.node.name, cluster, token_node)
    result = PushResult(cluster=target.name, node=batch.node.name)
    readings, period_readings, cpu_values, bursts = _match(target, node, batch, result)
    stored = ingest(target, Batch(nodes=[_node_info(node, batch.node)], readings=readings), now=now)
    scheme = cgroup_scheme_fields(
        target,
        node.name,
        cpu_values,
        "weight" if batch.cgroup_version == 2 else "cadvisor_shares",
        cgroup_version=batch.cgroup_version,
        source="the node agent",
    )
    Node.objects.filter(pk=node.pk).update(**scheme)
    pod_cgroups = _pod_cgroup_readings(target, node, batch)
    if pod_cgroups:
        pods_stored = ingest_readings(target, pod_cgroups, now=now)
        result.pod_cgroups_written = pods_stored.samples_written
        result.problems.extend(pods_stored.problems)
    result.period_samples_written = store_period_samples(period_readings)
    store_burst_readings(bursts, batch.collected_at)
    result.accepted = len(readings)
    result.samples_written = stored.samples_written
    result.duplicates = stored.duplicates
    result.problems.extend(stored.problems)
    if batch.errors:
        log.warning(
            "agent on %s/%s could not read %d cgroup(s), first: %s",
            target.name,
            batch.node.name,
            len(batch.errors),
            printable(batch.errors[0]),  # the agent's own words: a newline in them would forge a log line
        )
    if batch.sampler_cpu_seconds is not None:
        log.info(
            "agent on %s/%s sampled %d container(s) period by period for %.3f s of its CPU",
            target.name,
            batch.node.name,
            sum(1 for s in batch.samples if s.period_sample is not None),
            batch.sampler_cpu_seconds,
        )
    return result


def _node_info(stored: Node, node: AgentNode) -> NodeInfo:
    # What the inventory (the Kubernetes API, a dump) says of a node is kept: a push only fills a gap, so a token
    # cannot rewrite a node's kernel (its verdict and advice). The slice and governor only the agent can read.
    return NodeInfo(
        name=node.name,
        capacity_mcpu=node.capacity_mcpu if stored.capacity_mcpu is None else None,
        kernel_version=node.kernel_version if not stored.kernel_version else "",
        cfs_slice_us=node.cfs_slice_us,
        cpufreq_governor=node.cpufreq_governor,
    )


def _match(
    cluster: Cluster, node: Node, batch: AgentBatch, result: PushResult
) -> tuple[list[CounterReading], list[PeriodReading], dict[tuple[str, str, str], int], list[BurstValues]]:
    """Readings (and period samples) for the samples whose container id is a stored container of `cluster` on
    `node`, the matched containers' cpu.weight (v2) or cpu.shares (v1) and their burst settings; the rest sorted
    into pod-level, sandbox and unknown on `result`."""
    container_samples = [s for s in batch.samples if s.container_id]
    result.pod_level = len(batch.samples) - len(container_samples)
    ids = {s.container_id for s in container_samples}
    containers = {
        c.container_id: c
        for c in Container.objects.filter(pod__cluster=cluster, container_id__in=ids).select_related("pod__node")
    }
    readings: list[CounterReading] = []
    period_readings: list[PeriodReading] = []
    matched_per_pod: dict[str, set[str]] = defaultdict(set)
    unmatched: list[AgentSample] = []
    cpu_values: dict[tuple[str, str, str], int] = {}
    bursts: list[BurstValues] = []
    for sample in container_samples:
        container = containers.get(sample.container_id)
        if container is None:
            unmatched.append(sample)
            continue
        pod = container.pod
        if pod.node_id != node.pk:
            where = f"node {pod.node.name}" if pod.node else "no node"
            reason = f"the inventory places {pod.namespace}/{pod.name} on {where}, not on {node.name}: not stored"
            result.unknown.append(Unmatched(sample.pod_uid, sample.container_id, reason))
            continue
        if pod.uid and pod.uid != sample.pod_uid:
            result.problems.append(
                f"container {sample.container_id[:12]} is {pod.namespace}/{pod.name}/{container.name} (pod uid "
                f"{pod.uid}) but the agent found it under pod uid {sample.pod_uid}; stored by its container id"
            )
        matched_per_pod[sample.pod_uid].add(sample.container_id)
        value = sample.weight if batch.cgroup_version == 2 else sample.shares
        if value is not None:
            cpu_values[(pod.namespace, pod.name, container.name)] = value
        if sample.burst_us is not None:
            bursts.append(BurstValues(container.pk, sample.burst_us, sample.bursts_total, sample.burst_seconds_total))
        readings.append(_reading(sample, pod, container.name, batch))
        periods = sample.period_sample
        if periods is not None and sample.period_us is not None:
            period_readings.append(
                PeriodReading(
                    container_id=container.pk,
                    ts=batch.collected_at,
                    seconds=periods.seconds,
                    periods=periods.periods,
                    throttled_us=periods.throttled_us,
                    period_us=sample.period_us,
                    quota_us=sample.quota_us,
                )
            )
    if unmatched:
        _sort_unmatched(cluster, unmatched, matched_per_pod, result)
    return readings, period_readings, cpu_values, bursts


def _pod_cgroup_readings(cluster: Cluster, node: Node, batch: AgentBatch) -> list[CounterReading]:
    """The pod cgroups with a quota (CFS counters) of pods the inventory places on `node`, as the pods' own series
    (POD_CGROUP); the others are only counted."""
    samples = [s for s in batch.samples if not s.container_id and s.periods_total is not None]
    if not samples:
        return []
    pods = {p.uid: p for p in Pod.objects.filter(cluster=cluster, node=node, uid__in={s.pod_uid for s in samples})}
    return [
        _reading(sample, pod, POD_CGROUP, batch) for sample in samples if (pod := pods.get(sample.pod_uid)) is not None
    ]


def _reading(sample: AgentSample, pod: Pod, container: str, batch: AgentBatch) -> CounterReading:
    return CounterReading(
        namespace=pod.namespace,
        pod=pod.name,
        container=container,
        ts=batch.collected_at,
        periods_total=sample.periods_total,
        throttled_periods_total=sample.throttled_periods_total,
        throttled_seconds_total=sample.throttled_seconds_total,
        usage_seconds_total=sample.usage_seconds_total,
        pressure_waiting_seconds_total=sample.pressure_waiting_seconds_total,
        pressure_stalled_seconds_total=sample.pressure_stalled_seconds_total,
        threads=sample.threads,
        period_us=sample.period_us,
        quota_us=sample.quota_us,
        node=batch.node.name,
    )


def _sort_unmatched(
    cluster: Cluster, unmatched: list[AgentSample], matched_per_pod: dict[str, set[str]], result: PushResult
) -> None:
    uids = {s.pod_uid for s in unmatched}
    pods = {p.uid: p for p in Pod.objects.filter(cluster=cluster, uid__in=uids)}
    # Containers of those pods that have a runtime id: when every one of them was matched, an extra id is the sandbox.
    ids_per_pod: dict[int, set[str]] = defaultdict(set)
    for pod_id, container_id in (
        Container.objects.filter(pod__in=pods.values()).exclude(container_id="").values_list("pod_id", "container_id")
    ):
        ids_per_pod[pod_id].add(container_id)
    for sample in unmatched:
        pod = pods.get(sample.pod_uid)
        if pod is None:
            reason = f"no pod with uid {sample.pod_uid} in cluster {cluster.name} (not in the inventory yet?)"
        elif ids_per_pod[pod.pk] and ids_per_pod[pod.pk] <= matched_per_pod[sample.pod_uid]:
            result.sandboxes += 1
            continue
        elif not ids_per_pod[pod.pk]:
            reason = f"pod {pod.namespace}/{pod.name} has no container ids in the inventory, so its cgroups cannot be told apart"
        else:
            reason = (
                f"pod {pod.namespace}/{pod.name} has no container with this id: its sandbox, or a container "
                "started after the last inventory"
            )
        result.unknown.append(Unmatched(sample.pod_uid, sample.container_id, reason))
