"""What cputune asks Prometheus, and how the answers become values: the PromQL queries and the pure conversions of
their instant vectors into inventory and readings (docs/domain.md#prometheus). The two are kept together because the
conversions read exactly the labels and families the queries produce.

- **Inventory** from kube-state-metrics: `kube_node_info` (kernel, OS image, runtime, kubelet), node CPU from
  `kube_node_status_{allocatable,capacity}{resource="cpu"}` (`*_cpu_cores` on kube-state-metrics 1.x), pods from
  `kube_pod_info` (node, uid, creator), containers from `kube_pod_container_info` (runtime id) and the CPU
  requests/limits (`kube_pod_container_resource_{requests,limits}{resource="cpu"}`, or the 1.x names
  `…_requests_cpu_cores`), restarts, QoS class (`kube_pod_status_qos_class`; derived from CPU and memory requests
  and limits as the API does when an older kube-state-metrics lacks it). A ReplicaSet's pod belongs to the
  Deployment `kube_replicaset_owner` names, else to the ReplicaSet name without its pod-template-hash suffix; Jobs
  map to CronJobs through `kube_job_owner`. Finished pods (phase Succeeded/Failed) are left out, as the Kubernetes
  source leaves them out.
- **Readings**: the raw cumulative cAdvisor counters at one evaluation instant — `container_cpu_cfs_periods_total`,
  `…_throttled_periods_total`, `…_throttled_seconds_total`, `container_cpu_usage_seconds_total` (the `cpu="total"`
  series, else the per-CPU series summed), `container_threads`, `container_spec_cpu_{period,quota}` — for every
  container (`container!="", container!="POD", image!=""`, pause images excluded), the numbers the Kubernetes source
  stores, so deltas come from cputune's own ingest. A reading's instant is the sample's own timestamp
  (`timestamp()`), not the query's, so the interval between two readings is the interval between the samples.
  Pre-1.16 label names (`pod_name`, `container_name`) are read too, renamed in the query.
  When cAdvisor still reports a dead container next to its restarted successor (two cgroup `id`s), the one with
  the latest `container_start_time_seconds` is kept, as the scrape parser does.
- **Throttle figures**: the kubernetes-mixin figures — `increase()` of the CFS counters over a window, summed by
  container, and their ratio — as Prometheus computes them, to cross-check cputune's stored deltas.

Known differences from the Kubernetes source: static pods keep the mirror pod's API uid (kube-state-metrics shows no
`kubernetes.io/config.mirror` annotation), requests and limits are the spec's (not the resources applied after an
in-place resize), and containers are listed by name, not in spec order.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from apps.clusters.info import POD_CGROUP
from apps.collector.inventory import container_id_without_runtime, qos_class, workload_of
from apps.telemetry.counters import BadCounter, check_counter, throttle_ratio
from apps.telemetry.readings import ContainerInfo, CounterReading, NodeInfo, PodInfo

__all__ = [
    "COUNTER_QUERIES",
    "INVENTORY_QUERIES",
    "ThrottleFigures",
    "VectorSample",
    "figures_from_readings",
    "figures_from_vectors",
    "inventory_from_vectors",
    "limited_containers_query",
    "on_node",
    "readings_from_vectors",
    "running_pods_query",
    "throttle_queries",
]

MAX_PROBLEMS = 50
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NO_OWNER = frozenset({"", "<none>"})  # kube-state-metrics 2.x writes "", 1.x "<none>"


@dataclass(frozen=True, slots=True)
class VectorSample:
    """One element of an instant vector: its labels and its value (NaN and ±Inf as Prometheus sent them)."""

    labels: Mapping[str, str]
    value: float


def _string(value: str) -> str:
    """A PromQL string literal (the same escapes as JSON for the characters a label value may hold)."""
    return json.dumps(value)


# --------------------------------------------------------------------------------------------------------- PromQL

# A pause image: repository `pause` or `pause-<arch>`, any registry, tag or digest (RE2, anchored by Prometheus).
_PAUSE_IMAGE = r"(.*/)?pause(-[^/:@]*)?([:@].*)?"
_CONTAINER_MATCHERS = 'container!="",container!="POD",image!="",image!~' + _string(_PAUSE_IMAGE)
_OLD_CONTAINER_MATCHERS = 'container_name!="",container_name!="POD",image!="",image!~' + _string(_PAUSE_IMAGE)


def _cadvisor(metric: str, extra: str = "", *, wrap: str = "", window: str = "") -> str:
    """The container-level series of a cAdvisor family under both label schemes, labelled `pod` and `container`.

    `extra` adds matchers (`,cpu="total"`); `wrap` applies a function to the raw selector (`timestamp`, `increase`
    with `window` such as `[90s]`), before the old names are copied over, since those functions need the selector
    itself. A series carrying both schemes (Kubernetes 1.14–1.15) comes out once: its copies have equal labels.
    """
    selectors = [
        f"{metric}{{{matchers}{extra}}}{window}" for matchers in (_CONTAINER_MATCHERS, _OLD_CONTAINER_MATCHERS)
    ]
    if wrap:
        selectors = [f"{wrap}({s})" for s in selectors]
    new, old = selectors
    old = f'label_replace(label_replace({old}, "container", "$1", "container_name", "(.+)"), "pod", "$1", "pod_name", "(.+)")'
    return f"({new}) or ({old})"


_USAGE = "container_cpu_usage_seconds_total"
# Family → query, each answering one value per container cgroup (labels namespace, pod, container, id, …).
COUNTER_QUERIES: dict[str, str] = {
    "periods_total": _cadvisor("container_cpu_cfs_periods_total"),
    "throttled_periods_total": _cadvisor("container_cpu_cfs_throttled_periods_total"),
    "throttled_seconds_total": _cadvisor("container_cpu_cfs_throttled_seconds_total"),
    # Newer cAdvisors report cpu="total"; older ones one series per CPU, which are summed only where no total exists.
    "usage_seconds_total": (
        f"sum without (cpu) ({_cadvisor(_USAGE, ',cpu=' + _string('total'))}) "
        f"or sum without (cpu) ({_cadvisor(_USAGE, ',cpu!=' + _string('total'))})"
    ),
    "threads": _cadvisor("container_threads"),
    # CPU pressure (PSI), where the kubelet exports it (cgroup v2, KubeletPSI): absent series stay None.
    "pressure_waiting_seconds_total": _cadvisor("container_pressure_cpu_waiting_seconds_total"),
    "pressure_stalled_seconds_total": _cadvisor("container_pressure_cpu_stalled_seconds_total"),
    "period_us": _cadvisor("container_spec_cpu_period"),
    "quota_us": _cadvisor("container_spec_cpu_quota"),
    "start_time_seconds": _cadvisor("container_start_time_seconds"),
    # The samples' own instants: cAdvisor stamps a container's CPU series with its stats time (one per container).
    "ts_seconds": (
        f"max without (cpu) ({_cadvisor(_USAGE, wrap='timestamp')}) "
        f"or ({_cadvisor('container_cpu_cfs_periods_total', wrap='timestamp')})"
    ),
}


# The pod cgroups' own CFS series (container="", a pod label): a pod-level quota throttles the whole pod. Only the
# current label scheme (Kubernetes ≥ 1.16) is asked; their families carry POD_FAMILY_PREFIX.
POD_FAMILY_PREFIX = "pod_cgroup_"
_POD_MATCHERS = 'container="",pod!="",namespace!=""'
POD_QUERIES: dict[str, str] = {
    POD_FAMILY_PREFIX + "periods_total": f"container_cpu_cfs_periods_total{{{_POD_MATCHERS}}}",
    POD_FAMILY_PREFIX + "throttled_periods_total": f"container_cpu_cfs_throttled_periods_total{{{_POD_MATCHERS}}}",
    POD_FAMILY_PREFIX + "throttled_seconds_total": f"container_cpu_cfs_throttled_seconds_total{{{_POD_MATCHERS}}}",
    POD_FAMILY_PREFIX + "ts_seconds": f"timestamp(container_cpu_cfs_periods_total{{{_POD_MATCHERS}}})",
}
COUNTER_QUERIES.update(POD_QUERIES)

FAMILY_LABEL = "cputune_family"


def one_query(queries: Mapping[str, str]) -> str:
    """Several per-container queries as one, each answer tagged with its name in FAMILY_LABEL: Prometheus evaluates
    one query against one consistent view of its head, so every family of a container comes from the same scrape.
    Queried apart, a scrape landing between two of them gave a reading the timestamp of one scrape and the values
    of the one before."""
    return " or ".join(
        f'label_replace(({query}), {_string(FAMILY_LABEL)}, {_string(name)}, "", "")' for name, query in queries.items()
    )


def split_families(samples: Iterable[VectorSample], names: Iterable[str]) -> dict[str, list[VectorSample]]:
    """one_query's answer back into a vector per query name, without the tag."""
    out: dict[str, list[VectorSample]] = {name: [] for name in names}
    for sample in samples:
        labels = dict(sample.labels)
        name = labels.pop(FAMILY_LABEL, None)
        if name in out:
            out[name].append(VectorSample(labels, sample.value))
    return out


def on_node(query: str, node: str) -> str:
    """Restrict a per-container query to the pods kube-state-metrics places on `node`."""
    return f"({query}) and on (namespace, pod) kube_pod_info{{node={_string(node)}}}"


def running_pods_query(node: str) -> str:
    """The number of running pods kube-state-metrics places on `node`."""
    return f'count(kube_pod_status_phase{{phase="Running"}} == 1 and on (namespace, pod) kube_pod_info{{node={_string(node)}}})'


def limited_containers_query(node: str) -> str:
    """The number of containers with a CPU limit in the running pods on `node`, under both kube-state-metrics names."""
    return (
        "count(("
        '(max by (namespace, pod, container) (kube_pod_container_resource_limits{resource="cpu"}) > 0)'
        " or (max by (namespace, pod, container) (kube_pod_container_resource_limits_cpu_cores) > 0))"
        f" and on (namespace, pod) kube_pod_info{{node={_string(node)}}}"
        ' and on (namespace, pod) (kube_pod_status_phase{phase="Running"} == 1))'
    )


def _resources(kind: str, init: bool) -> str:
    """CPU (cores) and memory (bytes) requests or limits per container, under both kube-state-metrics generations."""
    base = f"kube_pod_{'init_' if init else ''}container_resource_{kind}"
    by = "by (namespace, pod, container, resource)"
    old_by = "by (namespace, pod, container)"
    return (
        f'max {by} ({base}{{resource=~"cpu|memory"}})'
        f' or label_replace(max {old_by} ({base}_cpu_cores), "resource", "cpu", "", "")'
        f' or label_replace(max {old_by} ({base}_memory_bytes), "resource", "memory", "", "")'
    )


INVENTORY_QUERIES: dict[str, str] = {
    "node_info": "kube_node_info",
    "allocatable": (
        'max by (node) (kube_node_status_allocatable{resource="cpu"})'
        " or max by (node) (kube_node_status_allocatable_cpu_cores)"
    ),
    "capacity": (
        'max by (node) (kube_node_status_capacity{resource="cpu"}) or max by (node) (kube_node_status_capacity_cpu_cores)'
    ),
    "pod_info": "kube_pod_info",
    "phase": "kube_pod_status_phase == 1",
    "qos": "kube_pod_status_qos_class == 1",
    "created": "max by (namespace, pod) (kube_pod_created)",
    "container_info": "kube_pod_container_info",
    "sidecar_info": 'kube_pod_init_container_info{restart_policy="Always"}',
    "restarts": "max by (namespace, pod, container) (kube_pod_container_status_restarts_total)",
    "init_restarts": "max by (namespace, pod, container) (kube_pod_init_container_status_restarts_total)",
    "requests": _resources("requests", init=False),
    "limits": _resources("limits", init=False),
    "init_requests": _resources("requests", init=True),
    "init_limits": _resources("limits", init=True),
    "replicaset_owner": "kube_replicaset_owner",
    "job_owner": "kube_job_owner",
}


def throttle_queries(window_s: float) -> dict[str, str]:
    """The kubernetes-mixin window figures (docs/domain.md#prometheus): increase of each CFS counter, by container."""
    window = f"[{max(1, round(window_s * 1000))}ms]"
    return {
        name: f"sum by (namespace, pod, container) ({_cadvisor(metric, wrap='increase', window=window)})"
        for name, metric in (
            ("periods", "container_cpu_cfs_periods_total"),
            ("throttled_periods", "container_cpu_cfs_throttled_periods_total"),
            ("throttled_seconds", "container_cpu_cfs_throttled_seconds_total"),
        )
    }


# ------------------------------------------------------------------------------------------------ vectors → values


class _Problems:
    """Problem notes, capped at MAX_PROBLEMS with one closing count."""

    def __init__(self) -> None:
        self.notes: list[str] = []
        self.dropped = 0

    def add(self, message: str) -> None:
        if len(self.notes) < MAX_PROBLEMS:
            self.notes.append(message)
        else:
            self.dropped += 1

    def as_list(self) -> list[str]:
        return [*self.notes, f"... and {self.dropped} more problems not listed"] if self.dropped else list(self.notes)


def _mcpu(cores: float | None) -> int | None:
    """Cores as kube-state-metrics reports them (from the quantity's milli value) → millicores."""
    if cores is None or not math.isfinite(cores) or cores < 0:
        return None
    return round(cores * 1000)


def inventory_from_vectors(
    vectors: Mapping[str, Sequence[VectorSample]],
) -> tuple[list[NodeInfo], list[PodInfo], list[str]]:
    """kube-state-metrics series (the INVENTORY_QUERIES answers, by name) → nodes, pods and problems.

    Duplicated series (kube-state-metrics scraped by two jobs) count once. A pod whose phase is Succeeded or Failed
    is left out. CPU in millicores; a request left unset next to a limit is the limit (API defaulting); a CPU limit
    of 0 is no limit (None).
    """
    problems = _Problems()
    nodes = _nodes(vectors)

    phase: dict[tuple[str, str], str] = {}
    for s in vectors.get("phase", ()):
        phase[(s.labels.get("namespace", ""), s.labels.get("pod", ""))] = s.labels.get("phase", "")
    qos = {
        (s.labels.get("namespace", ""), s.labels.get("pod", "")): s.labels.get("qos_class", "")
        for s in vectors.get("qos", ())
    }
    created = {(s.labels.get("namespace", ""), s.labels.get("pod", "")): s.value for s in vectors.get("created", ())}
    replicasets = _owners(vectors.get("replicaset_owner"), "replicaset")
    jobs = _owners(vectors.get("job_owner"), "job_name")
    containers, init_containers = _container_fields(vectors)

    pods: list[PodInfo] = []
    seen: set[tuple[str, str]] = set()
    for s in sorted(
        vectors.get("pod_info", ()), key=lambda s: (s.labels.get("namespace", ""), s.labels.get("pod", ""))
    ):
        namespace, name = s.labels.get("namespace", ""), s.labels.get("pod", "")
        key = (namespace, name)
        if not namespace or not name:
            problems.add(f"kube_pod_info series without namespace or pod label skipped: {dict(s.labels)}")
            continue
        if key in seen or phase.get(key) in ("Succeeded", "Failed"):
            continue
        seen.add(key)
        node = s.labels.get("node", "")
        if node == "<none>":
            node = ""
        own = containers.get(key, {})
        sidecars = {c: f for c, f in init_containers.get(key, {}).items() if f.get("sidecar")}
        # A pending pod with no resources set has no container series yet: it is kept, without containers.
        kind, workload = _workload(s.labels, node, created.get(key), replicasets, jobs)
        pod_qos = qos.get(key) or _derived_qos(own, init_containers.get(key, {}), f"pod {namespace}/{name}", problems)
        pods.append(
            PodInfo(
                namespace=namespace,
                name=name,
                uid=s.labels.get("uid", ""),
                node=node,
                qos_class=pod_qos,
                workload_kind=kind,
                workload_name=workload,
                containers=tuple(_container_info(c, f) for c, f in [*sorted(sidecars.items()), *sorted(own.items())]),
            )
        )
    return nodes, pods, problems.as_list()


_Fields = dict[tuple[str, str], dict[str, dict[str, Any]]]  # pod → container → fields


def _container_fields(vectors: Mapping[str, Sequence[VectorSample]]) -> tuple[_Fields, _Fields]:
    """Per pod and container (regular ones, then init containers and sidecars): runtime id, restarts, and the
    requests and limits by resource."""
    containers: _Fields = defaultdict(dict)
    init_containers: _Fields = defaultdict(dict)

    def entry(table: _Fields, s: VectorSample) -> dict[str, Any] | None:
        name = s.labels.get("container", "")
        if not name:
            return None
        pod_key = (s.labels.get("namespace", ""), s.labels.get("pod", ""))
        return table[pod_key].setdefault(name, {})

    for s in vectors.get("container_info", ()):
        fields = entry(containers, s)
        if fields is not None:
            fields["container_id"] = container_id_without_runtime(s.labels.get("container_id", ""))
            fields["image"] = _spec_image(s.labels)
    for s in vectors.get("sidecar_info", ()):
        fields = entry(init_containers, s)
        if fields is not None:
            fields["container_id"] = container_id_without_runtime(s.labels.get("container_id", ""))
            fields["image"] = _spec_image(s.labels)
            fields["sidecar"] = True
    for metric, table in (("restarts", containers), ("init_restarts", init_containers)):
        for s in vectors.get(metric, ()):
            fields = entry(table, s)
            if fields is not None and math.isfinite(s.value) and s.value >= 0:
                fields["restarts"] = int(s.value)
    for metric, table in (
        ("requests", containers),
        ("limits", containers),
        ("init_requests", init_containers),
        ("init_limits", init_containers),
    ):
        kind = metric.removeprefix("init_")
        for s in vectors.get(metric, ()):
            fields = entry(table, s)
            if fields is not None and math.isfinite(s.value):
                fields.setdefault(kind, {})[s.labels.get("resource", "")] = s.value
    return containers, init_containers


def _nodes(vectors: Mapping[str, Sequence[VectorSample]]) -> list[NodeInfo]:
    allocatable = {s.labels.get("node", ""): s.value for s in vectors.get("allocatable", ())}
    capacity = {s.labels.get("node", ""): s.value for s in vectors.get("capacity", ())}
    info: dict[str, Mapping[str, str]] = {}
    for s in vectors.get("node_info", ()):
        info.setdefault(s.labels.get("node", ""), s.labels)
    names = sorted(n for n in {*info, *allocatable, *capacity} if n)
    return [
        NodeInfo(
            name=name,
            capacity_mcpu=_mcpu(capacity.get(name)),
            allocatable_mcpu=_mcpu(allocatable.get(name)),
            kernel_version=info.get(name, {}).get("kernel_version", ""),
            os_image=info.get(name, {}).get("os_image", ""),
            container_runtime=info.get(name, {}).get("container_runtime_version", ""),
            kubelet_version=info.get(name, {}).get("kubelet_version", ""),
        )
        for name in names
    ]


def _owners(samples: Sequence[VectorSample] | None, name_label: str) -> dict[tuple[str, str], tuple[str, str]] | None:
    """(namespace, ReplicaSet or Job) → (owner kind, owner name), ("", "") for none; None when the metric is absent,
    so the name rules apply."""
    if not samples:
        return None
    owners: dict[tuple[str, str], tuple[str, str]] = {}
    for s in samples:
        key = (s.labels.get("namespace", ""), s.labels.get(name_label, ""))
        kind, name = s.labels.get("owner_kind", ""), s.labels.get("owner_name", "")
        if kind in _NO_OWNER or name in _NO_OWNER:
            owners.setdefault(key, ("", ""))
        elif s.labels.get("owner_is_controller", "true") in ("true", ""):
            owners[key] = (kind, name)
    return owners


# pod-template-hash: apimachinery's SafeEncodeString alphabet (Kubernetes ≥ 1.8), or the numeric hash before.
_TEMPLATE_HASH = re.compile(r"-([bcdfghjklmnpqrstvwxz2456789]{5,10}|[0-9]{5,10})$")


def _workload(
    labels: Mapping[str, str],
    node: str,
    created_s: float | None,
    replicasets: dict[tuple[str, str], tuple[str, str]] | None,
    jobs: dict[tuple[str, str], tuple[str, str]] | None,
) -> tuple[str, str]:
    """The same rules as the Kubernetes source (inventory.workload_of), fed what kube-state-metrics knows."""
    kind = labels.get("created_by_kind", "")
    name = labels.get("created_by_name", "")
    metadata: dict[str, Any] = {"name": labels.get("pod", ""), "namespace": labels.get("namespace", "")}
    if kind not in _NO_OWNER and name not in _NO_OWNER:
        metadata["ownerReferences"] = [{"kind": kind, "name": name, "controller": True}]
        if kind == "ReplicaSet" and (replicasets is None or (metadata["namespace"], name) not in replicasets):
            # No owner series for this ReplicaSet: a Deployment's ReplicaSet is <deployment>-<pod-template-hash>.
            match = _TEMPLATE_HASH.search(name)
            if match:
                metadata["labels"] = {"pod-template-hash": match.group(1)}
    if created_s is not None and math.isfinite(created_s):
        metadata["creationTimestamp"] = datetime.fromtimestamp(created_s, tz=UTC).isoformat()
    return workload_of({"metadata": metadata, "spec": {"nodeName": node}}, replicasets, jobs)


def _derived_qos(
    containers: Mapping[str, Mapping[str, Any]],
    init_containers: Mapping[str, Mapping[str, Any]],
    where: str,
    problems: _Problems,
) -> str:
    """QoS from requests and limits (cores, bytes) when kube-state-metrics does not report it (before 2.7)."""

    def resources(fields: Mapping[str, Any]) -> dict[str, dict[str, float]]:
        return {kind: dict(fields.get(kind, {})) for kind in ("requests", "limits") if fields.get(kind)}

    spec = {
        "containers": [{"name": c, "resources": resources(f)} for c, f in containers.items()],
        "initContainers": [{"name": c, "resources": resources(f)} for c, f in init_containers.items()],
    }
    try:
        return qos_class(spec, where)
    except ValueError as exc:
        problems.add(f"{where}: QoS class not derived: {exc}")
        return ""


def _spec_image(labels: Mapping[str, str]) -> str:
    """The spec's image: `image_spec` (kube-state-metrics 2.x; its `image` is the status's resolved name), else the
    older `image`. Env vars are not in kube-state-metrics: the runtime advice reads only the image here."""
    return labels.get("image_spec") or labels.get("image", "")


def _container_info(name: str, fields: Mapping[str, Any]) -> ContainerInfo:
    limit_mcpu = _mcpu(fields.get("limits", {}).get("cpu"))
    request_mcpu = _mcpu(fields.get("requests", {}).get("cpu"))
    if request_mcpu is None:
        request_mcpu = limit_mcpu
    return ContainerInfo(
        name=name,
        container_id=fields.get("container_id", ""),
        request_mcpu=request_mcpu,
        limit_mcpu=limit_mcpu or None,
        restarts=fields.get("restarts", 0),
        image=fields.get("image", ""),
    )


@dataclass(slots=True)
class _Cgroup:
    values: dict[str, float] = field(default_factory=dict)
    node_label: str = ""


_Key = tuple[str, str, str]  # namespace, pod, container
_COUNTERS = (
    "periods_total",
    "throttled_periods_total",
    "throttled_seconds_total",
    "usage_seconds_total",
    "threads",
    "pressure_waiting_seconds_total",
    "pressure_stalled_seconds_total",
)


def readings_from_vectors(
    vectors: Mapping[str, Sequence[VectorSample]],
    *,
    default_ts: datetime,
    pod_nodes: Mapping[tuple[str, str], str] | None = None,
) -> tuple[list[CounterReading], list[str]]:
    """The COUNTER_QUERIES answers (by family) → one CounterReading per container, sorted, and problems.

    Counters are cumulative (periods and threads as int, seconds as float); impossible values (NaN, negative, past
    2**53) are dropped with a problem. `ts` is the sample's own instant, else `default_ts`. Of several cgroups
    reporting one container the newest (latest start time, then latest sample) is kept; a series repeated by
    several scrape jobs counts once. `node` is the pod's node from `pod_nodes`, else the series' `node` label.
    """
    problems = _Problems()
    cgroups = _cgroups(vectors, problems)
    readings: list[CounterReading] = []
    for key in sorted(cgroups):
        candidates = cgroups[key]
        cgroup_id, cgroup = max(
            candidates.items(),
            key=lambda item: (
                "start_time_seconds" in item[1].values,
                item[1].values.get("start_time_seconds", 0.0),
                item[1].values.get("ts_seconds", 0.0),
                item[0],
            ),
        )
        if len(candidates) > 1:
            problems.add(
                f"{'/'.join(key)}: {len(candidates)} cgroups report this container (cAdvisor keeps a dead one for "
                f"a while); kept the newest, {cgroup_id or '(no id)'}"
            )
        values = cgroup.values
        if not any(name in values for name in (*_COUNTERS, "period_us", "quota_us")):
            continue
        ts_s = values.get("ts_seconds")
        ts = default_ts if ts_s is None else _EPOCH + timedelta(milliseconds=round(ts_s * 1000))
        node = (pod_nodes or {}).get(key[:2]) or cgroup.node_label
        readings.append(
            CounterReading(
                namespace=key[0],
                pod=key[1],
                container=key[2],
                ts=ts,
                periods_total=_int(values.get("periods_total")),
                throttled_periods_total=_int(values.get("throttled_periods_total")),
                throttled_seconds_total=values.get("throttled_seconds_total"),
                usage_seconds_total=values.get("usage_seconds_total"),
                threads=_int(values.get("threads")),
                period_us=_positive_int(values.get("period_us")),
                quota_us=_positive_int(values.get("quota_us")),  # 0 or -1 means no quota
                node=node,
                pressure_waiting_seconds_total=values.get("pressure_waiting_seconds_total"),
                pressure_stalled_seconds_total=values.get("pressure_stalled_seconds_total"),
            )
        )
    return readings, problems.as_list()


def _cgroups(vectors: Mapping[str, Sequence[VectorSample]], problems: _Problems) -> dict[_Key, dict[str, _Cgroup]]:
    """The answers regrouped by container and cgroup id, impossible values dropped (each with a problem) and a series
    repeated by several scrape jobs counted once."""
    cgroups: dict[_Key, dict[str, _Cgroup]] = defaultdict(dict)
    repeated = 0
    for query_name, samples in vectors.items():
        pod_level = query_name.startswith(POD_FAMILY_PREFIX)  # the pod cgroup's own: stored under POD_CGROUP
        family = query_name.removeprefix(POD_FAMILY_PREFIX)
        for s in samples:
            labels = s.labels
            if pod_level:
                key = (labels.get("namespace", ""), labels.get("pod", ""), POD_CGROUP)
                if not all(key[:2]):
                    continue
            else:
                key = (labels.get("namespace", ""), labels.get("pod", ""), labels.get("container", ""))
                if not all(key):
                    continue
            cgroup = cgroups[key].setdefault(labels.get("id", ""), _Cgroup())
            if family in cgroup.values:
                repeated += 1
                continue
            cgroup.node_label = cgroup.node_label or labels.get("node", "")
            value = s.value
            if family in _COUNTERS:
                try:
                    check_counter(family, value)
                except BadCounter as exc:
                    problems.add(f"{'/'.join(key)}: {exc}; value dropped")
                    continue
            elif not math.isfinite(value):
                problems.add(f"{'/'.join(key)}: {family} is {value}; value dropped")
                continue
            cgroup.values[family] = value
    if repeated:
        problems.add(f"{repeated} series came more than once (several scrape jobs or replicas?); the first was kept")
    return cgroups


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


def _positive_int(value: float | None) -> int | None:
    return int(value) if value is not None and value > 0 else None


# ---------------------------------------------------------------------------------------------- throttle figures


@dataclass(frozen=True, slots=True)
class ThrottleFigures:
    """CFS figures of one container: lifetime totals (one reading) or increases over a window (Prometheus'
    `increase()`, extrapolated to the window's edges). `throttle_ratio` is None when no period ran (undefined, not 0).
    """

    namespace: str
    pod: str
    container: str
    periods: float | None
    throttled_periods: float | None
    throttled_seconds: float | None
    window_s: float | None  # None: lifetime, since the container started

    @property
    def throttle_ratio(self) -> float | None:
        return throttle_ratio(self.throttled_periods, self.periods)


def figures_from_readings(readings: Iterable[CounterReading]) -> dict[_Key, ThrottleFigures]:
    """Lifetime figures: each container's raw counters, as one reading holds them."""
    return {
        (r.namespace, r.pod, r.container): ThrottleFigures(
            r.namespace,
            r.pod,
            r.container,
            r.periods_total,
            r.throttled_periods_total,
            r.throttled_seconds_total,
            None,
        )
        for r in readings
    }


def figures_from_vectors(vectors: Mapping[str, Sequence[VectorSample]], window_s: float) -> dict[_Key, ThrottleFigures]:
    """Window figures: the `throttle_queries(window_s)` answers (by name) per container, sorted."""
    values: dict[_Key, dict[str, float]] = defaultdict(dict)
    for name, samples in vectors.items():
        for s in samples:
            key = (s.labels.get("namespace", ""), s.labels.get("pod", ""), s.labels.get("container", ""))
            values[key][name] = s.value
    return {
        key: ThrottleFigures(
            *key,
            periods=v.get("periods"),
            throttled_periods=v.get("throttled_periods"),
            throttled_seconds=v.get("throttled_seconds"),
            window_s=window_s,
        )
        for key, v in sorted(values.items())
    }
