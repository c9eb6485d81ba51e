"""A simulated Kubernetes cluster at Kubernetes' limits, served over HTTP: the API server's paged node and pod lists
and every node's kubelet `/metrics/cadvisor` (through the API server's node proxy), deterministic from a seed.

    python -m standins.simulator --nodes 5000 --seed 1 --port 8081 [--kubeconfig PATH] [--processes 2]

prints its URL and writes a kubeconfig (bearer token, plain http) that `KubernetesSource` and
`manage.py add_cluster NAME --kubeconfig PATH` read like a real cluster's. Pure Python and the stdlib HTTP server;
no Django.

What it serves, for `nodes` × `pods_per_node` × `containers_per_pod` (default 5,000 × 30 × 2: 150,000 pods):

- Node objects shaped like a real one (`tests/fixtures/clusters/k8s-1.33-minikube/nodes.yaml`), in node pools with
  a realistic kernel mix, affected ones included (`4.14.133-113.105.amzn2.x86_64`, `4.19.76`, `4.9.85-…amzn2`);
- Pod objects with owner references (Deployments through ReplicaSets with `pod-template-hash`, StatefulSets,
  DaemonSets, CronJobs' Jobs, a few bare pods), requests/limits mixes (Guaranteed, Burstable with and without a CPU
  limit, BestEffort) and container statuses with ids and restart counts;
- one scrape per node in the exposition format cAdvisor writes: the families cputune reads and the bulk of the others
  (memory, fs, network, blkio, tasks…), node-level, pod-level and sandbox cgroups, sample timestamps in ms. Each
  cgroup's lines weigh about what the recorded 1.33 scrape's do (tests/lab/test_simulator.py checks ±30 %).

Counters follow a per-container profile — steady, throttled at its limit, bursty, idle — as closed-form functions of
the time since the container started, so they advance between scrapes with the elapsed wall time and two simulators
with the same seed (and start) give the same bytes at the same instant. Sample timestamps move in steps of
`stats_interval_s` (cAdvisor's housekeeping), each cgroup at its own phase. A fraction of containers restart every
`restart_every_s` (new container id, restartCount + 1, counters from zero); some nodes are slow, some answer 500,
some hang — chosen by node index from the seed. Bodies are generated per request from small per-family tables: a
5,000-node simulator holds no scrape and no object in memory.
"""

from __future__ import annotations

import argparse
import bisect
import functools
import hashlib
import json
import math
import os
import random
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from apps.clusters.kubelet import DEFAULT_PERIOD_US, quota_us_from_limit_mcpu, shares_from_request_mcpu
from standins.http import (
    EXPIRED_MESSAGE,
    PROMETHEUS_TEXT,
    KubernetesHandler,
    ThreadedServer,
    continue_token,
    read_continue_token,
    write_kubeconfig,
)

__all__ = ["DEFAULT_TOKEN", "SimulatedCluster", "SimulatorConfig", "SimulatorServer", "go_float", "main"]

DEFAULT_TOKEN = "simulator-token-not-a-secret"  # noqa: S105 - a fixed fake token the simulator checks
KUBELET_VERSION = "v1.31.4"
PERIODS_PER_SECOND = 1_000_000 / DEFAULT_PERIOD_US  # a busy cgroup with a quota runs one period per 100 ms
_GROUP_NODES = 50  # nodes whose same pod slot belongs to one workload (a Deployment's replicas, a StatefulSet's pods)
_SAFE = "bcdfghjklmnpqrstvwxz2456789"  # the alphabet of Kubernetes' generated name suffixes and template hashes


# ------------------------------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class SimulatorConfig:
    """What to simulate. Fractions are of nodes (faults) or containers (restarts), 0–1; times in seconds.

    `start_s` is the simulated cluster's t0 (Unix seconds): containers' lifetimes and restarts count from it. None
    means the current hour, so two runs with the same seed within an hour serve the same trajectories.
    """

    nodes: int = 5000
    pods_per_node: int = 30
    containers_per_pod: int = 2
    seed: int = 1
    restart_fraction: float = 0.02
    restart_every_s: float = 600.0
    slow_fraction: float = 0.01
    slow_delay_s: float = 2.0
    failing_fraction: float = 0.005
    hanging_fraction: float = 0.002
    hang_s: float = 120.0
    stats_interval_s: float = 10.0
    continue_ttl_s: float = 300.0
    start_s: float | None = None

    def __post_init__(self) -> None:
        for name in ("nodes", "pods_per_node", "containers_per_pod"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.pods_per_node > 110:
            raise ValueError(f"pods_per_node {self.pods_per_node} is above the kubelet's default maximum of 110")
        for name in ("restart_fraction", "slow_fraction", "failing_fraction", "hanging_fraction"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1, got {value}")
        if self.slow_fraction + self.failing_fraction + self.hanging_fraction > 1.0:
            raise ValueError("slow, failing and hanging fractions add up to more than all the nodes")
        for name in ("restart_every_s", "stats_interval_s", "continue_ttl_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.slow_delay_s < 0 or self.hang_s < 0:
            raise ValueError("slow_delay_s and hang_s cannot be negative")


# ------------------------------------------------------------------------------------------------ deterministic bits


def _bits(seed: int, *parts: object) -> int:
    """64 deterministic bits for (seed, parts): the same inputs give the same bits in every process and run."""
    key = "\x1f".join(str(part) for part in (seed, *parts)).encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big")


def _unit(seed: int, *parts: object) -> float:
    """A deterministic number in [0, 1)."""
    return _bits(seed, *parts) / 2**64


@functools.lru_cache(maxsize=4096)
def _image_digest(seed: int, image: str) -> str:
    return _hex(seed, 64, "image", image)


def _hex(seed: int, length: int, *parts: object) -> str:
    return hashlib.blake2b("\x1f".join(str(p) for p in (seed, *parts)).encode(), digest_size=32).hexdigest()[:length]


def _uuid(seed: int, *parts: object) -> str:
    h = _hex(seed, 32, "uuid", *parts)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"


def _safe_suffix(number: int, length: int) -> str:
    chars = []
    for _ in range(length):
        number, digit = divmod(number, len(_SAFE))
        chars.append(_SAFE[digit])
    return "".join(chars)


def _pick(weighted: Sequence[tuple[Any, float]], unit: float) -> Any:
    total = sum(weight for _, weight in weighted)
    point = unit * total
    for value, weight in weighted:
        point -= weight
        if point < 0:
            return value
    return weighted[-1][0]


def _memory_values(ws: int, limit_bytes: int = 0) -> dict[str, str]:
    """A cgroup's memory series, in proportion to its working set (bytes), as exposition values; 0: no limit."""
    return {
        "mem_usage": go_float(ws + ws // 4),
        "mem_ws": go_float(ws),
        "mem_rss": go_float(ws * 3 // 4),
        "mem_cache": go_float(ws // 2),
        "mem_max": go_float(ws + ws // 3),
        "mem_mapped": go_float(ws // 16),
        "mem_kernel": go_float(ws // 64),
        "mem_active_file": go_float(ws // 4),
        "mem_inactive_file": go_float(ws // 8),
        "mem_limit": go_float(limit_bytes),
    }


def go_float(value: float) -> str:
    """A number as cAdvisor (Go's strconv 'g', shortest) writes it: `4096`, `0.365`, `1.048576e+06`, `1e-05`."""
    if type(value) is int and -1_000_000 < value < 1_000_000:
        return str(value)
    if value != value:
        return "NaN"
    if value in (math.inf, -math.inf):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "0"
    magnitude = abs(value)
    if 1e-4 <= magnitude < 1e6:
        text = repr(float(value))
        return text[:-2] if text.endswith(".0") else text
    text = repr(float(value))
    if "e" in text:  # Python already wrote the shortest digits in exponent form, with a two-digit exponent
        return text
    sign = "-" if value < 0 else ""
    digits = text.lstrip("-").split(".")[0]
    fraction = text.split(".")[1] if "." in text else ""
    exponent = len(digits) - 1
    mantissa = (digits + fraction).rstrip("0") or "0"
    head, tail = mantissa[0], mantissa[1:]
    return f"{sign}{head}{'.' + tail if tail else ''}e+{exponent:02d}"


# -------------------------------------------------------------------------------------------------- the cluster


@dataclass(frozen=True)
class _Pool:
    name: str
    cpus: int
    memory_gib: int
    kernel: str
    os_image: str
    runtime: str
    cpu_manager_policy: str
    instance_type: str
    weight: float


# Kernel mix: fixed (5.10 AL2, 5.4 GKE, 6.1 COS, RHEL 7.8), affected by slice expiry (AL2 4.14.133, 4.19.76) and
# by clock drift (AL2 4.9), in proportions a long-lived fleet might have.
POOLS: tuple[_Pool, ...] = (
    _Pool("general", 16, 64, "5.10.210-201.855.amzn2.x86_64", "Amazon Linux 2", "containerd://1.7.11", "none",
          "m5.4xlarge", 30),
    _Pool("legacy", 16, 64, "4.14.133-113.105.amzn2.x86_64", "Amazon Linux 2", "docker://18.9.6", "none",
          "m5.4xlarge", 15),
    _Pool("compute", 32, 128, "4.19.76", "Container Linux by CoreOS 2247.6.0 (Rhyolite)", "docker://18.6.3",
          "static", "c5.9xlarge", 10),
    _Pool("gke", 16, 64, "5.4.0-1018-gke", "Ubuntu 18.04.4 LTS", "containerd://1.3.3", "none", "n1-standard-16",
          20),
    _Pool("cos", 32, 128, "6.1.100+", "Container-Optimized OS from Google", "containerd://1.7.24", "none",
          "n2-standard-32", 15),
    _Pool("rhel", 16, 64, "3.10.0-1127.el7.x86_64", "Red Hat Enterprise Linux Server 7.8 (Maipo)", "cri-o://1.11.16",
          "none", "m5.4xlarge", 5),
    _Pool("memory", 48, 384, "4.9.85-46.56.amzn2.x86_64", "Amazon Linux 2", "docker://17.6.2", "none", "r5.12xlarge",
          5),
)  # fmt: skip

NAMESPACES = (
    "checkout", "payments", "search", "catalog", "orders", "identity", "notifications", "recommendations",
    "inventory", "shipping", "analytics", "ads", "media", "messaging", "billing", "fraud", "pricing", "reviews",
    "gateway", "data-platform",
)  # fmt: skip
_ROLES = ("api", "worker", "web", "consumer", "scheduler", "grpc", "cache", "indexer", "sync", "gateway")
_MAIN_IMAGES = (
    "registry.example.com/{ns}/{name}:v2.14.3",
    "registry.example.com/{ns}/{name}:1.8.0",
    "docker.io/library/openjdk:17-jre-slim",
    "docker.io/library/golang:1.22-alpine",
    "docker.io/library/python:3.11-slim",
    "docker.io/library/node:20-alpine",
)
# (name, image, request mcpu, limit mcpu or None): what teams put next to their main container.
_SIDECARS = (
    ("istio-proxy", "docker.io/istio/proxyv2:1.20.3", 100, 2000),
    ("log-shipper", "docker.io/fluent/fluent-bit:2.2.2", 50, 200),
    ("config-reloader", "quay.io/prometheus-operator/prometheus-config-reloader:v0.71.2", 10, 50),
    ("metrics-exporter", "quay.io/prometheus/statsd-exporter:v0.26.0", 25, None),
    ("cloud-sql-proxy", "gcr.io/cloud-sql-connectors/cloud-sql-proxy:2.8.2", 100, 500),
)
_DAEMONSETS = (
    ("kube-system", "kube-proxy", "registry.k8s.io/kube-proxy:" + KUBELET_VERSION),
    ("monitoring", "node-exporter", "quay.io/prometheus/node-exporter:v1.7.0"),
    ("logging", "fluent-bit", "docker.io/fluent/fluent-bit:2.2.2"),
)
_REQUESTS_MCPU = (25, 50, 100, 100, 150, 250, 500)
_PROFILES = (("steady", 40.0), ("throttled", 20.0), ("bursty", 25.0), ("idle", 15.0))
_INTERFACES = ("erspan0", "eth0", "gre0", "gretap0", "ip6_vti0", "ip6gre0", "ip6tnl0", "ip_vti0", "sit0", "tunl0")
_NODE_DEVICES = (
    "/dev", "/dev/shm", "/dev/nvme0n1p1", "/run", "/run/lock", "/tmp", "/var/lib/kubelet", "/var/log",  # noqa: S108
    "overlay_0-190", "overlay_0-238", "overlay_0-240", "overlay_0-242", "overlay_0-244", "overlay_0-246",
    "overlay_0-248", "overlay_0-254", "overlay_0-255", "overlay_0-262", "overlay_0-270",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Profile:
    """CPU behaviour as a square wave: `burst_s` of every `cycle_s` at `high_cores`, the rest at `low_cores`.

    `active_*` is the share of CFS periods in which the cgroup ran (1 = every period), `throttled_*` the share of
    those periods that hit the quota, `throttled_s_per_period` the throttled time a throttled period adds.
    """

    kind: str
    cycle_s: float
    burst_s: float
    high_cores: float
    low_cores: float
    active_high: float
    active_low: float
    throttled_high: float
    throttled_low: float
    throttled_s_per_period: float


@dataclass(frozen=True, slots=True)
class _ContainerSpec:
    name: str
    image: str
    request_mcpu: int | None
    limit_mcpu: int | None
    memory_request_bytes: int | None
    memory_limit_bytes: int | None
    profile: _Profile
    restarting: bool
    restart_phase_s: float
    base_restarts: int
    threads: int
    working_set_bytes: int
    ts_phase: float  # when in cAdvisor's housekeeping interval this cgroup's stats are refreshed (0–1)


@dataclass(frozen=True, slots=True)
class _PodSpec:
    node: int
    slot: int
    namespace: str
    name: str
    uid: str
    workload_kind: str  # DaemonSet, Deployment, StatefulSet, CronJob, "" (bare)
    workload_name: str
    owner_kind: str  # the controller owner reference: ReplicaSet, StatefulSet, DaemonSet, Job, or ""
    owner_name: str
    template_hash: str
    created_s: float
    qos_class: str
    containers: tuple[_ContainerSpec, ...]
    sandbox_id: str
    ip: str
    ts_phase_pod: float
    ts_phase_sandbox: float
    traffic: float  # 0–1: how busy the pod's network is


@dataclass(frozen=True, slots=True)
class CpuState:
    """One container's CPU counters at an instant, as cAdvisor reports them (cumulative since `started_s`)."""

    incarnation: int  # restarts since the simulation started (0: the container running at t0)
    started_s: float
    usage_seconds_total: float
    periods_total: int | None  # None without a CPU limit: no quota, so no CFS counters
    throttled_periods_total: int | None
    throttled_seconds_total: float | None


class _Draws:
    """Sixteen deterministic 32-bit draws from one hash of (seed, parts): one digest per object, not per field."""

    __slots__ = ("_digest",)

    def __init__(self, seed: int, *parts: object) -> None:
        key = "\x1f".join(str(part) for part in (seed, *parts)).encode()
        self._digest = hashlib.blake2b(key, digest_size=64).digest()

    def number(self, index: int) -> int:
        return int.from_bytes(self._digest[4 * index : 4 * index + 4], "big")

    def unit(self, index: int) -> float:
        return self.number(index) / 2**32


@dataclass(frozen=True, slots=True)
class _ContainerShape:
    """A container as its workload's template declares it."""

    name: str
    image: str
    request_mcpu: int | None
    limit_mcpu: int | None
    memory_request_bytes: int | None
    memory_limit_bytes: int | None


@dataclass(frozen=True, slots=True)
class _Workload:
    bits: int
    namespace: str
    name: str
    kind: str  # DaemonSet, Deployment, StatefulSet, CronJob, "" (bare pods)
    owner_kind: str  # the pods' controller owner reference (a CronJob's pods are owned by its Job)
    owner_name: str  # "" for CronJob (the Job is named per run) and bare pods
    template_hash: str
    qos_class: str
    containers: tuple[_ContainerShape, ...]


@functools.lru_cache(maxsize=16384)
def _workload(seed: int, slot: int, group: int, containers: int) -> _Workload:
    """The workload behind pod `slot` on the nodes of `group`: DaemonSets on the first slots of every node, then
    Deployments, StatefulSets, CronJobs and bare pods with replicas on the group's nodes."""
    if slot < len(_DAEMONSETS):
        namespace, name, main_image = _DAEMONSETS[slot]
        draws = _Draws(seed, "daemonset", slot)
        kind, owner_kind, owner_name, template_hash, role = "DaemonSet", "DaemonSet", name, "", name
    else:
        draws = _Draws(seed, "workload", slot, group)
        namespace = NAMESPACES[draws.number(0) % len(NAMESPACES)]
        role = _ROLES[draws.number(1) % len(_ROLES)]
        name = f"{NAMESPACES[draws.number(2) % len(NAMESPACES)]}-{role}-{slot}{group:x}"
        main_image = _MAIN_IMAGES[draws.number(3) % len(_MAIN_IMAGES)].format(ns=namespace, name=name)
        kind = _pick((("Deployment", 70.0), ("StatefulSet", 15.0), ("CronJob", 10.0), ("", 5.0)), draws.unit(4))
        template_hash = _safe_suffix(draws.number(5) * 2**32 + draws.number(6), 10) if kind == "Deployment" else ""
        owner_kind = {"Deployment": "ReplicaSet", "StatefulSet": "StatefulSet", "CronJob": "Job"}.get(kind, "")
        owner_name = {"Deployment": f"{name}-{template_hash}", "StatefulSet": name}.get(kind, "")
    qos_draw = draws.unit(7)
    qos = "BestEffort" if qos_draw < 0.08 else "Guaranteed" if qos_draw < 0.23 else "Burstable"
    shapes = []
    for k in range(containers):
        bits = draws.number(8 + k % 8) + k
        request: int | None
        limit: int | None
        if k == 0:
            container, image = role, main_image
            request = _REQUESTS_MCPU[bits % len(_REQUESTS_MCPU)]
            limit = request * (1, 2, 2, 4)[(bits >> 8) % 4] if (bits >> 12) % 10 < 7 else None
        else:
            sidecar = _SIDECARS[(bits + k) % len(_SIDECARS)]
            container = sidecar[0] if k == 1 else f"{sidecar[0]}-{k}"
            image, request, limit = sidecar[1], sidecar[2], sidecar[3]
        memory_request: int | None = (64 + (bits >> 20) % 8 * 64) * 2**20
        memory_limit: int | None = 2 * memory_request if memory_request else None
        if qos == "BestEffort":
            request, limit, memory_request, memory_limit = None, None, None, None
        elif qos == "Guaranteed":
            limit, memory_limit = request, memory_request
        shapes.append(_ContainerShape(container, image, request, limit, memory_request, memory_limit))
    return _Workload(
        bits=draws.number(15),
        namespace=namespace,
        name=name,
        kind=kind,
        owner_kind=owner_kind,
        owner_name=owner_name,
        template_hash=template_hash,
        qos_class=qos,
        containers=tuple(shapes),
    )


class SimulatedCluster:
    """The cluster as pure functions of (seed, node index, pod slot, container, time). Holds no objects."""

    def __init__(self, config: SimulatorConfig | None = None) -> None:
        self.config = config or SimulatorConfig()
        c = self.config
        self.start_s: float = c.start_s if c.start_s is not None else math.floor(time.time() / 3600) * 3600
        self._cumulative_pool_weights: list[float] = []
        running = 0.0
        for pool in POOLS:
            running += pool.weight
            self._cumulative_pool_weights.append(running)
        # Faults by node index: one seeded shuffle, cut into the configured fractions.
        order = list(range(c.nodes))
        random.Random(_bits(c.seed, "faults")).shuffle(order)
        failing = round(c.nodes * c.failing_fraction)
        hanging = round(c.nodes * c.hanging_fraction)
        slow = round(c.nodes * c.slow_fraction)
        self._faults: dict[int, str] = {}
        for index in order[:failing]:
            self._faults[index] = "failing"
        for index in order[failing : failing + hanging]:
            self._faults[index] = "hanging"
        for index in order[failing + hanging : failing + hanging + slow]:
            self._faults[index] = "slow"
        self._names = [self._make_node_name(i) for i in range(c.nodes)]
        self._index = {name: i for i, name in enumerate(self._names)}

    # -- nodes

    @property
    def node_names(self) -> list[str]:
        return list(self._names)

    def node_name(self, node: int) -> str:
        return self._names[node]

    def node_index(self, name: str) -> int | None:
        return self._index.get(name)

    def node_fault(self, node: int) -> str:
        """ "ok", "slow" (answers after slow_delay_s), "failing" (HTTP 500) or "hanging" (no answer for hang_s)."""
        return self._faults.get(node, "ok")

    def pool(self, node: int) -> _Pool:
        point = _unit(self.config.seed, "pool", node // 10) * self._cumulative_pool_weights[-1]
        return POOLS[bisect.bisect_right(self._cumulative_pool_weights, point)]

    def _make_node_name(self, node: int) -> str:
        pool = self.pool(node)
        return f"ip-10-{(node >> 16) & 255}-{(node >> 8) & 255}-{node & 255}.{pool.name}.sim.internal"

    def node_object(self, node: int) -> dict[str, Any]:
        """The Node as `GET /api/v1/nodes/<name>` returns it."""
        c = self.config
        pool = self.pool(node)
        name = self._names[node]
        allocatable_mcpu = pool.cpus * 1000 - (100 if pool.cpus <= 16 else 200)  # kube-reserved + system-reserved
        memory_kib = pool.memory_gib * 1024 * 1024
        created = _iso(self.start_s - 86400 * (30 + _bits(c.seed, "node-age", node) % 300))
        zone = "abc"[node % 3]
        machine_id = _hex(c.seed, 32, "machine", node)
        images = sorted({ct.image for j in range(c.pods_per_node) for ct in self.pod_spec(node, j).containers})
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "annotations": {
                    "node.alpha.kubernetes.io/ttl": "0",
                    "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                },
                "creationTimestamp": created,
                "labels": {
                    "beta.kubernetes.io/arch": "amd64",
                    "beta.kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "node.kubernetes.io/instance-type": pool.instance_type,
                    "topology.kubernetes.io/region": "sim-1",
                    "topology.kubernetes.io/zone": f"sim-1{zone}",
                    "cputune.sim/pool": pool.name,
                },
                "name": name,
                "resourceVersion": str(1000 + node),
                "uid": _uuid(c.seed, "node", node),
            },
            "spec": {
                "podCIDR": f"10.{64 + (node >> 8) % 64}.{node & 255}.0/24",
                "podCIDRs": [f"10.{64 + (node >> 8) % 64}.{node & 255}.0/24"],
                "providerID": f"sim:///sim-1{zone}/i-{_hex(c.seed, 17, 'instance', node)}",
            },
            "status": {
                "addresses": [
                    {"address": _node_ip(node), "type": "InternalIP"},
                    {"address": name, "type": "Hostname"},
                    {"address": name, "type": "InternalDNS"},
                ],
                "allocatable": {
                    "cpu": f"{allocatable_mcpu}m",
                    "ephemeral-storage": "95491281146",
                    "hugepages-1Gi": "0",
                    "hugepages-2Mi": "0",
                    "memory": f"{memory_kib - 1024 * 1024}Ki",
                    "pods": "110",
                },
                "capacity": {
                    "cpu": str(pool.cpus),
                    "ephemeral-storage": "104845292Ki",
                    "hugepages-1Gi": "0",
                    "hugepages-2Mi": "0",
                    "memory": f"{memory_kib}Ki",
                    "pods": "110",
                },
                "conditions": [
                    _condition(
                        "MemoryPressure",
                        "False",
                        "KubeletHasSufficientMemory",
                        "kubelet has sufficient memory available",
                        created,
                    ),
                    _condition(
                        "DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure", created
                    ),
                    _condition(
                        "PIDPressure",
                        "False",
                        "KubeletHasSufficientPID",
                        "kubelet has sufficient PID available",
                        created,
                    ),
                    _condition("Ready", "True", "KubeletReady", "kubelet is posting ready status", created),
                ],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "images": [
                    {
                        "names": [f"{image.split(':')[0]}@sha256:{_image_digest(c.seed, image)}", image],
                        "sizeBytes": 10_000_000 + _bits(c.seed, "image-size", image) % 300_000_000,
                    }
                    for image in images
                ],
                "nodeInfo": {
                    "architecture": "amd64",
                    "bootID": _uuid(c.seed, "boot", node),
                    "containerRuntimeVersion": pool.runtime,
                    "kernelVersion": pool.kernel,
                    "kubeProxyVersion": "",
                    "kubeletVersion": KUBELET_VERSION,
                    "machineID": machine_id,
                    "operatingSystem": "linux",
                    "osImage": pool.os_image,
                    "systemUUID": machine_id,
                },
            },
        }

    def kubelet_config(self, node: int) -> dict[str, Any]:
        """The node's `/configz` kubeletconfig: kubelet defaults, the pool's CPU manager policy."""
        return {
            "enableServer": True,
            "port": 10250,
            "cgroupsPerQOS": True,
            "cgroupDriver": "cgroupfs",
            "cpuManagerPolicy": self.pool(node).cpu_manager_policy,
            "cpuManagerReconcilePeriod": "10s",
            "topologyManagerPolicy": "none",
            "cpuCFSQuota": True,
            "cpuCFSQuotaPeriod": "100ms",
            "maxPods": 110,
        }

    # -- pods

    def pod_spec(self, node: int, slot: int) -> _PodSpec:
        """What does not change over time about the pod in `slot` of `node` (0 ≤ slot < pods_per_node)."""
        c = self.config
        seed = c.seed
        group = node // _GROUP_NODES
        draws = _Draws(seed, "pod", node, slot)
        created_s = self.start_s - 60 * (5 + draws.number(0) % (60 * 24 * 20))
        workload = _workload(seed, slot, group, c.containers_per_pod)
        kind, name, owner_kind, owner_name = workload.kind, "", workload.owner_kind, workload.owner_name
        # A multiplier prime to 27**5 keeps the suffixes of one workload's pods distinct.
        suffix = _safe_suffix((node * 7919 + workload.bits) % len(_SAFE) ** 5, 5)
        workload_name = workload.name
        if kind == "StatefulSet":
            name = f"{workload.name}-{node % _GROUP_NODES}"
        elif kind == "CronJob":
            scheduled_min = int(created_s // 60)
            created_s = scheduled_min * 60 + 3.0  # the Job's pod starts seconds after its scheduled time
            owner_name = f"{workload.name}-{scheduled_min}"
            name = f"{owner_name}-{suffix}"
        elif owner_name:  # DaemonSet, ReplicaSet
            name = f"{owner_name}-{suffix}"
        else:  # a bare pod is its own workload
            name = workload_name = f"{workload.name}-{suffix}"
        containers = tuple(
            self._container_spec(node, slot, k, workload.containers[k], workload.qos_class)
            for k in range(c.containers_per_pod)
        )
        ids = _hex(seed, 96, "pod-ids", node, slot)
        uid = f"{ids[:8]}-{ids[8:12]}-4{ids[13:16]}-a{ids[17:20]}-{ids[20:32]}"
        return _PodSpec(
            node=node,
            slot=slot,
            namespace=workload.namespace,
            name=name,
            uid=uid,
            workload_kind=kind,
            workload_name=workload_name,
            owner_kind=owner_kind,
            owner_name=owner_name,
            template_hash=workload.template_hash,
            created_s=created_s,
            qos_class=workload.qos_class,
            containers=containers,
            sandbox_id=ids[32:96],
            ip=f"10.{64 + (node >> 8) % 64}.{node & 255}.{2 + slot}",
            ts_phase_pod=draws.unit(1),
            ts_phase_sandbox=draws.unit(2),
            traffic=draws.unit(3),
        )

    def _container_spec(self, node: int, slot: int, k: int, shape: _ContainerShape, qos: str) -> _ContainerSpec:
        draws = _Draws(self.config.seed, "container", node, slot, k)
        # Behaviour belongs to the container of this pod (not the workload): replicas differ, as in real fleets.
        kind = _pick(_PROFILES, draws.unit(0))
        if kind == "throttled" and shape.limit_mcpu is None:
            kind = "steady"
        return _ContainerSpec(
            name=shape.name,
            image=shape.image,
            request_mcpu=shape.request_mcpu,
            limit_mcpu=shape.limit_mcpu,
            memory_request_bytes=shape.memory_request_bytes,
            memory_limit_bytes=shape.memory_limit_bytes,
            profile=_make_profile(kind, shape.request_mcpu, shape.limit_mcpu, draws.unit(1)),
            restarting=draws.unit(2) < self.config.restart_fraction,
            restart_phase_s=draws.unit(3) * self.config.restart_every_s,
            base_restarts=draws.number(4) % 4 if draws.unit(5) < 0.2 else 0,
            threads=4 + draws.number(6) % (120 if kind == "throttled" else 40),
            working_set_bytes=(16 + draws.number(7) % 400) * 2**20,
            ts_phase=draws.unit(8),
        )

    def pod_phase(self, node: int, slot: int) -> str:
        return "Running"

    def cpu_state(self, spec: _PodSpec, k: int, at_s: float) -> CpuState:
        """Container k's counters at `at_s`: restarts counted from t0, counters from the incarnation's start."""
        container = spec.containers[k]
        started_s = spec.created_s + 2.0
        incarnation = 0
        if container.restarting:
            first_restart_s = self.start_s + container.restart_phase_s
            if at_s >= first_restart_s:
                incarnation = 1 + int((at_s - first_restart_s) // self.config.restart_every_s)
                started_s = first_restart_s + (incarnation - 1) * self.config.restart_every_s
        usage, periods, throttled, throttled_s = _counters(container.profile, max(0.0, at_s - started_s))
        limited = container.limit_mcpu is not None
        return CpuState(
            incarnation=incarnation,
            started_s=started_s,
            usage_seconds_total=usage,
            periods_total=periods if limited else None,
            throttled_periods_total=throttled if limited else None,
            throttled_seconds_total=throttled_s if limited else None,
        )

    def container_id(self, spec: _PodSpec, k: int, incarnation: int) -> str:
        return _hex(self.config.seed, 64, "cid", spec.node, spec.slot, k, incarnation)

    def pod_object(self, node: int, slot: int, now_s: float) -> dict[str, Any]:
        """The Pod as the API returns it at `now_s` (container ids and restart counts follow the restarts)."""
        spec = self.pod_spec(node, slot)
        seed = self.config.seed
        labels: dict[str, str] = {"app.kubernetes.io/name": spec.workload_name}
        owner_refs: list[dict[str, Any]] = []
        if spec.owner_kind:
            owner_refs.append({
                "apiVersion": "batch/v1" if spec.owner_kind == "Job" else "apps/v1",
                "blockOwnerDeletion": True,
                "controller": True,
                "kind": spec.owner_kind,
                "name": spec.owner_name,
                "uid": _uuid(seed, "owner", spec.namespace, spec.owner_name),
            })  # fmt: skip
        if spec.template_hash:
            labels["pod-template-hash"] = spec.template_hash
        if spec.owner_kind == "StatefulSet":
            labels["statefulset.kubernetes.io/pod-name"] = spec.name
            labels["controller-revision-hash"] = f"{spec.owner_name}-{_hex(seed, 10, 'rev', spec.owner_name)}"
        if spec.owner_kind == "DaemonSet":
            labels["controller-revision-hash"] = _hex(seed, 10, "rev", spec.owner_name)
            labels["pod-template-generation"] = "1"
        if spec.owner_kind == "Job":
            labels["batch.kubernetes.io/job-name"] = spec.owner_name
            labels["job-name"] = spec.owner_name
        created = _iso(spec.created_s)
        containers = []
        statuses = []
        for k, container in enumerate(spec.containers):
            resources: dict[str, dict[str, str]] = {}
            if container.request_mcpu is not None:
                resources["requests"] = {"cpu": f"{container.request_mcpu}m",
                                         "memory": f"{(container.memory_request_bytes or 0) // 2**20}Mi"}  # fmt: skip
            if container.limit_mcpu is not None or container.memory_limit_bytes is not None:
                limits = {"memory": f"{(container.memory_limit_bytes or 0) // 2**20}Mi"}
                if container.limit_mcpu is not None:
                    limits["cpu"] = f"{container.limit_mcpu}m"
                resources["limits"] = limits
            containers.append({
                "image": container.image,
                "imagePullPolicy": "IfNotPresent",
                "name": container.name,
                "ports": [{"containerPort": 8080 + k, "name": f"http-{k}", "protocol": "TCP"}],
                "resources": resources,
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "volumeMounts": [{"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                                  "name": f"kube-api-access-{_hex(seed, 5, 'vol', spec.uid)}", "readOnly": True}],
            })  # fmt: skip
            state = self.cpu_state(spec, k, now_s)
            status: dict[str, Any] = {
                "containerID": f"containerd://{self.container_id(spec, k, state.incarnation)}",
                "image": container.image,
                "imageID": f"{container.image.split(':')[0]}@sha256:{_image_digest(seed, container.image)}",
                "lastState": {},
                "name": container.name,
                "ready": True,
                "restartCount": container.base_restarts + state.incarnation,
                "started": True,
                "state": {"running": {"startedAt": _iso(state.started_s)}},
            }
            if state.incarnation:
                status["lastState"] = {"terminated": {
                    "containerID": f"containerd://{self.container_id(spec, k, state.incarnation - 1)}",
                    "exitCode": 137, "finishedAt": _iso(state.started_s - 1), "reason": "OOMKilled",
                    "startedAt": _iso(state.started_s - self.config.restart_every_s)}}  # fmt: skip
            statuses.append(status)
        metadata: dict[str, Any] = {
            "creationTimestamp": created,
            "labels": labels,
            "name": spec.name,
            "namespace": spec.namespace,
            "resourceVersion": str(10_000 + spec.node * 128 + spec.slot),
            "uid": spec.uid,
        }
        if spec.owner_kind in ("ReplicaSet", "Job", "DaemonSet"):
            metadata["generateName"] = spec.name[:-5]
        if owner_refs:
            metadata["ownerReferences"] = owner_refs
        node_name = self._names[node]
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": {
                "containers": containers,
                "dnsPolicy": "ClusterFirst",
                "enableServiceLinks": True,
                "nodeName": node_name,
                "preemptionPolicy": "PreemptLowerPriority",
                "priority": 0,
                "restartPolicy": "Never" if spec.owner_kind == "Job" else "Always",
                "schedulerName": "default-scheduler",
                "securityContext": {},
                "serviceAccount": "default",
                "serviceAccountName": "default",
                "terminationGracePeriodSeconds": 30,
                "tolerations": [
                    {
                        "effect": "NoExecute",
                        "key": "node.kubernetes.io/not-ready",
                        "operator": "Exists",
                        "tolerationSeconds": 300,
                    },
                    {
                        "effect": "NoExecute",
                        "key": "node.kubernetes.io/unreachable",
                        "operator": "Exists",
                        "tolerationSeconds": 300,
                    },
                ],
            },
            "status": {
                "conditions": [
                    {"lastProbeTime": None, "lastTransitionTime": created, "status": "True", "type": condition}
                    for condition in (
                        "PodReadyToStartContainers",
                        "Initialized",
                        "Ready",
                        "ContainersReady",
                        "PodScheduled",
                    )
                ],
                "containerStatuses": statuses,
                "hostIP": _node_ip(node),
                "hostIPs": [{"ip": _node_ip(node)}],
                "phase": self.pod_phase(node, spec.slot),
                "podIP": spec.ip,
                "podIPs": [{"ip": spec.ip}],
                "qosClass": spec.qos_class,
                "startTime": created,
            },
        }

    # -- the scrape

    def scrape(self, node: int, now_s: float) -> bytes:
        """The node's `/metrics/cadvisor` body at `now_s` (Unix seconds)."""
        cgroups = self._cgroups(node, now_s)
        cgroups.sort(key=lambda cg: (cg.container, cg.id))
        pool = self.pool(node)
        seed = self.config.seed
        out: list[str] = []
        append = out.append
        for family in _FAMILIES:
            append(family.header)
            if family.name == "cadvisor_version_info":
                append(
                    f'cadvisor_version_info{{cadvisorRevision="",cadvisorVersion="",dockerVersion="",'
                    f'kernelVersion="{pool.kernel}",osVersion="{pool.os_image}"}} 1\n'
                )
                continue
            if family.name.startswith("machine_") or family.name == "container_scrape_error":
                append(_machine_lines(family.name, pool, _uuid(seed, "boot", node), _hex(seed, 32, "machine", node)))
                continue
            name = family.name
            layout = family.layout
            cfs = family.cfs
            for cg in cgroups:
                lines = layout.get(cg.kind)
                if lines is None or (cfs and not cg.limited):
                    continue
                ts = cg.ts_ms
                values = cg.values
                labels_of = cg.labels
                for variant, key in lines:
                    labels = labels_of.get(variant)
                    if labels is None:
                        labels = labels_of[variant] = _label_block(cg.base, variant)
                    append(f"{name}{{{labels}}} {values[key]} {ts}\n")
        return "".join(out).encode()

    def _cgroups(self, node: int, now_s: float) -> list[_Cgroup]:
        """Every cgroup of the node with its label values and its formatted sample values at `now_s`."""
        c = self.config
        seed = c.seed
        pool = self.pool(node)
        interval = c.stats_interval_s
        cgroups: list[_Cgroup] = []
        sums: dict[str, float] = {"kubepods": 0.0, "burstable": 0.0, "besteffort": 0.0}
        memory_sums: dict[str, float] = {"kubepods": 0.0, "burstable": 0.0, "besteffort": 0.0}
        for slot in range(c.pods_per_node):
            spec = self.pod_spec(node, slot)
            qos_dir = {"Guaranteed": "/kubepods", "Burstable": "/kubepods/burstable"}.get(
                spec.qos_class, "/kubepods/besteffort"
            )
            pod_id = f"{qos_dir}/pod{spec.uid}"
            pod_ts_s = _stats_instant(now_s, interval, spec.ts_phase_pod)
            pod_usage = pod_periods = pod_throttled = 0.0
            pod_throttled_s = 0.0
            pod_memory = 0.0
            all_limited = True
            for k, container in enumerate(spec.containers):
                ts_s = _stats_instant(now_s, interval, container.ts_phase)
                state = self.cpu_state(spec, k, ts_s)
                container_id = self.container_id(spec, k, state.incarnation)
                limited = container.limit_mcpu is not None
                all_limited = all_limited and limited
                # The pod cgroup outlives container restarts: it counts the slot's whole life.
                usage, periods, throttled, throttled_s = _counters(
                    container.profile, max(0.0, pod_ts_s - spec.created_s)
                )
                pod_usage += usage
                if limited:
                    pod_periods = max(pod_periods, periods)
                    pod_throttled = max(pod_throttled, throttled)
                    pod_throttled_s += throttled_s
                pod_memory += container.working_set_bytes
                cgroups.append(
                    _Cgroup(
                        kind="container",
                        base=(container.name, f"{pod_id}/{container_id}", container.image, container_id,
                              spec.namespace, spec.name),
                        ts_s=ts_s,
                        limited=limited,
                        values=_container_values(container, state, ts_s),
                    )
                )  # fmt: skip
            sums["kubepods"] += pod_usage
            memory_sums["kubepods"] += pod_memory
            if spec.qos_class != "Guaranteed":
                sums[spec.qos_class.lower()] += pod_usage
                memory_sums[spec.qos_class.lower()] += pod_memory
            request_total = sum(ct.request_mcpu or 0 for ct in spec.containers)
            limit_total = sum(ct.limit_mcpu or 0 for ct in spec.containers) if all_limited else None
            alive_s = max(0.0, pod_ts_s - spec.created_s)
            cgroups.append(
                _Cgroup(
                    kind="pod",
                    base=("", pod_id, "", "", spec.namespace, spec.name),
                    ts_s=pod_ts_s,
                    limited=all_limited,
                    values=_pod_values(pod_usage, int(pod_periods), int(pod_throttled), pod_throttled_s,
                                       request_total, limit_total, pod_memory, spec.created_s, pod_ts_s,
                                       sum(ct.threads for ct in spec.containers)),
                )
            )  # fmt: skip
            sandbox_ts_s = _stats_instant(now_s, interval, spec.ts_phase_sandbox)
            cgroups.append(
                _Cgroup(
                    kind="sandbox",
                    base=("", f"{pod_id}/{spec.sandbox_id}", "registry.k8s.io/pause:3.10", spec.sandbox_id,
                          spec.namespace, spec.name),
                    ts_s=sandbox_ts_s,
                    limited=False,
                    values=_sandbox_values(spec.created_s, sandbox_ts_s, alive_s, spec.traffic),
                )
            )  # fmt: skip
        node_ts_s = _stats_instant(now_s, interval, _unit(seed, "ts", node, "node"))
        boot_s = self.start_s - 86400 * (1 + _bits(seed, "boot-age", node) % 60)
        uptime_s = max(1.0, node_ts_s - boot_s)
        system_usage = 0.05 * pool.cpus * uptime_s / 16
        for cgroup_id, usage, memory in (
            ("/", sums["kubepods"] + system_usage, memory_sums["kubepods"] + 2.5 * 2**30),
            ("/kubepods", sums["kubepods"], memory_sums["kubepods"]),
            ("/kubepods/besteffort", sums["besteffort"], memory_sums["besteffort"]),
            ("/kubepods/burstable", sums["burstable"], memory_sums["burstable"]),
            ("/system.slice/kubelet.service", 0.02 * uptime_s, 180 * 2**20),
        ):
            cgroups.append(
                _Cgroup(
                    kind="root" if cgroup_id == "/" else "node",
                    base=("", cgroup_id, "", "", "", ""),
                    ts_s=node_ts_s,
                    limited=False,
                    values=_node_values(usage, memory, boot_s, node_ts_s, uptime_s, pool.cpus),
                )
            )
        return cgroups


def _make_profile(kind: str, request_mcpu: int | None, limit_mcpu: int | None, shape: float) -> _Profile:
    request = (request_mcpu or 100) / 1000
    limit = limit_mcpu / 1000 if limit_mcpu else None
    if kind == "throttled":
        assert limit is not None
        high = limit * (0.95 + 0.04 * shape)
        return _Profile(kind, 60.0, 60.0, high, high, 1.0, 1.0, 0.3 + 0.6 * shape, 0.3 + 0.6 * shape,
                        0.005 + 0.05 * shape)  # fmt: skip
    if kind == "bursty":
        high = min(limit * 0.97, 3 * request) if limit else 3 * request
        cycle = 120.0 + 480.0 * shape
        throttled_high = 0.5 + 0.4 * shape if limit and high >= 0.9 * limit else 0.02
        return _Profile(kind, cycle, cycle * (0.1 + 0.2 * shape), high, 0.2 * request, 1.0, 0.3, throttled_high,
                        0.0, 0.02)  # fmt: skip
    if kind == "idle":
        cores = 0.001 + 0.004 * shape
        return _Profile(kind, 60.0, 60.0, cores, cores, 0.2, 0.2, 0.0, 0.0, 0.0)
    cores = request * (0.3 + 0.6 * shape)
    if limit:
        cores = min(cores, 0.8 * limit)
    # The cgroup runs in enough periods to use `cores` within its quota (at most `limit` per period).
    active = min(1.0, 0.3 + cores / limit) if limit else 0.7
    return _Profile("steady", 60.0, 60.0, cores, cores, active, active, 0.02 * shape, 0.02 * shape, 0.004)


def _counters(profile: _Profile, alive_s: float) -> tuple[float, int, int, float]:
    """(usage seconds, periods, throttled periods, throttled seconds) after `alive_s` seconds of this profile.

    Closed form of the square wave, so the counters never decrease as `alive_s` grows and throttled ≤ periods.
    """
    cycles, into = divmod(alive_s, profile.cycle_s)
    burst_s = cycles * profile.burst_s + min(into, profile.burst_s)
    calm_s = alive_s - burst_s
    usage = profile.high_cores * burst_s + profile.low_cores * calm_s
    active_high = burst_s * profile.active_high * PERIODS_PER_SECOND
    active_low = calm_s * profile.active_low * PERIODS_PER_SECOND
    periods = int(active_high + active_low)
    throttled = int(active_high * profile.throttled_high + active_low * profile.throttled_low)
    return round(usage, 6), periods, throttled, round(throttled * profile.throttled_s_per_period, 6)


def _stats_instant(now_s: float, interval_s: float, phase: float) -> float:
    """When cAdvisor last refreshed a cgroup's stats: every `interval_s`, at the cgroup's own phase (0–1)."""
    offset = phase * interval_s
    return math.floor((now_s - offset) / interval_s) * interval_s + offset


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(int(seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _node_ip(node: int) -> str:
    return f"10.{(node >> 16) & 255}.{(node >> 8) & 255}.{node & 255}"


def _condition(kind: str, status: str, reason: str, message: str, since: str) -> dict[str, str]:
    return {"lastHeartbeatTime": since, "lastTransitionTime": since, "message": message, "reason": reason,
            "status": status, "type": kind}  # fmt: skip


# ------------------------------------------------------------------------------------------------ scrape layout


_BASE_LABELS = ("container", "id", "image", "name", "namespace", "pod")
Variant = tuple[tuple[str, str], ...]  # extra labels of one line, e.g. (("cpu", "total"),)


@dataclass(slots=True)
class _Cgroup:
    kind: str  # container, pod, sandbox, node, root
    base: tuple[str, str, str, str, str, str]  # container, id, image, name, namespace, pod
    ts_s: float
    limited: bool
    values: dict[str, str]
    labels: dict[Variant, str] = field(default_factory=dict)
    ts_ms: str = ""

    def __post_init__(self) -> None:
        self.ts_ms = str(round(self.ts_s * 1000))

    @property
    def container(self) -> str:
        return self.base[0]

    @property
    def id(self) -> str:
        return self.base[1]


def _label_block(base: tuple[str, ...], variant: Variant) -> str:
    """`a="x",b="y"` with the base and extra labels in name order, as cAdvisor writes them."""
    template = _LABEL_TEMPLATES.get(variant)
    if template is None:
        names = sorted([*_BASE_LABELS, *(name for name, _ in variant)])
        extra = dict(variant)
        parts = []
        for name in names:
            if name in extra:
                parts.append(f'{name}="{extra[name]}"')
            else:
                parts.append(f'{name}="{{{_BASE_LABELS.index(name)}}}"')
        template = _LABEL_TEMPLATES[variant] = ",".join(parts)
    return template.format(*base)


_LABEL_TEMPLATES: dict[Variant, str] = {}  # built on first use: label values never hold braces to escape


@dataclass(frozen=True)
class _Family:
    name: str
    header: str
    cfs: bool  # only for cgroups with a CPU quota
    layout: dict[str, list[tuple[Variant, str]]]  # cgroup kind → (extra labels, value key) per line


_HELP = {
    "cadvisor_version_info": "A metric with a constant '1' value labeled by kernel version, OS version, docker version, cadvisor version & cadvisor revision.",
    "container_blkio_device_usage_total": "Blkio Device bytes usage",
    "container_cpu_cfs_periods_total": "Number of elapsed enforcement period intervals.",
    "container_cpu_cfs_throttled_periods_total": "Number of throttled period intervals.",
    "container_cpu_cfs_throttled_seconds_total": "Total time duration the container has been throttled.",
    "container_cpu_load_average_10s": "Value of container cpu load average over the last 10 seconds.",
    "container_cpu_load_d_average_10s": "Value of container cpu load.d average over the last 10 seconds.",
    "container_cpu_system_seconds_total": "Cumulative system cpu time consumed in seconds.",
    "container_cpu_usage_seconds_total": "Cumulative cpu time consumed in seconds.",
    "container_cpu_user_seconds_total": "Cumulative user cpu time consumed in seconds.",
    "container_file_descriptors": "Number of open file descriptors for the container.",
    "container_fs_inodes_free": "Number of available Inodes",
    "container_fs_inodes_total": "Number of Inodes",
    "container_fs_io_current": "Number of I/Os currently in progress",
    "container_fs_io_time_seconds_total": "Cumulative count of seconds spent doing I/Os",
    "container_fs_io_time_weighted_seconds_total": "Cumulative weighted I/O time in seconds",
    "container_fs_limit_bytes": "Number of bytes that can be consumed by the container on this filesystem.",
    "container_fs_read_seconds_total": "Cumulative count of seconds spent reading",
    "container_fs_reads_bytes_total": "Cumulative count of bytes read",
    "container_fs_reads_merged_total": "Cumulative count of reads merged",
    "container_fs_reads_total": "Cumulative count of reads completed",
    "container_fs_sector_reads_total": "Cumulative count of sector reads completed",
    "container_fs_sector_writes_total": "Cumulative count of sector writes completed",
    "container_fs_usage_bytes": "Number of bytes that are consumed by the container on this filesystem.",
    "container_fs_write_seconds_total": "Cumulative count of seconds spent writing",
    "container_fs_writes_bytes_total": "Cumulative count of bytes written",
    "container_fs_writes_merged_total": "Cumulative count of writes merged",
    "container_fs_writes_total": "Cumulative count of writes completed",
    "container_last_seen": "Last time a container was seen by the exporter",
    "container_memory_cache": "Number of bytes of page cache memory.",
    "container_memory_failcnt": "Number of memory usage hits limits",
    "container_memory_failures_total": "Cumulative count of memory allocation failures.",
    "container_memory_kernel_usage": "Size of kernel memory allocated in bytes.",
    "container_memory_mapped_file": "Size of memory mapped files in bytes.",
    "container_memory_max_usage_bytes": "Maximum memory usage recorded in bytes",
    "container_memory_rss": "Size of RSS in bytes.",
    "container_memory_swap": "Container swap usage in bytes.",
    "container_memory_total_active_file_bytes": "Current total active file in bytes.",
    "container_memory_total_inactive_file_bytes": "Current total inactive file in bytes.",
    "container_memory_usage_bytes": "Current memory usage in bytes, including all memory regardless of when it was accessed",
    "container_memory_working_set_bytes": "Current working set in bytes.",
    "container_network_receive_bytes_total": "Cumulative count of bytes received",
    "container_network_receive_errors_total": "Cumulative count of errors encountered while receiving",
    "container_network_receive_packets_dropped_total": "Cumulative count of packets dropped while receiving",
    "container_network_receive_packets_total": "Cumulative count of packets received",
    "container_network_transmit_bytes_total": "Cumulative count of bytes transmitted",
    "container_network_transmit_errors_total": "Cumulative count of errors encountered while transmitting",
    "container_network_transmit_packets_dropped_total": "Cumulative count of packets dropped while transmitting",
    "container_network_transmit_packets_total": "Cumulative count of packets transmitted",
    "container_oom_events_total": "Count of out of memory events observed for the container",
    "container_processes": "Number of processes running inside the container.",
    "container_scrape_error": "1 if there was an error while getting container metrics, 0 otherwise",
    "container_sockets": "Number of open sockets for the container.",
    "container_spec_cpu_period": "CPU period of the container.",
    "container_spec_cpu_quota": "CPU quota of the container.",
    "container_spec_cpu_shares": "CPU share of the container.",
    "container_spec_memory_limit_bytes": "Memory limit for the container.",
    "container_spec_memory_reservation_limit_bytes": "Memory reservation limit for the container.",
    "container_spec_memory_swap_limit_bytes": "Memory swap limit for the container.",
    "container_start_time_seconds": "Start time of the container since unix epoch in seconds.",
    "container_tasks_state": "Number of tasks in given state",
    "container_threads": "Number of threads running inside the container",
    "container_threads_max": "Maximum number of threads allowed inside the container, infinity if value is zero",
    "container_ulimits_soft": "Soft ulimit values for the container root process. Unlimited if -1, except priority and nice",
    "machine_cpu_cores": "Number of logical CPU cores.",
    "machine_cpu_physical_cores": "Number of physical CPU cores.",
    "machine_cpu_sockets": "Number of CPU sockets.",
    "machine_memory_bytes": "Amount of memory installed on the machine.",
    "machine_nvm_avg_power_budget_watts": "NVM power budget.",
    "machine_nvm_capacity": "NVM capacity value labeled by NVM mode (memory mode or app direct mode).",
    "machine_scrape_error": "1 if there was an error while getting machine metrics, 0 otherwise.",
    "machine_swap_bytes": "Amount of swap memory available on the machine.",
}  # fmt: skip

Line = tuple[Variant, str]  # one line of a family for a cgroup: its extra labels and the key of its value
_PLAIN: Variant = ()
_ALL = ("container", "pod", "sandbox", "node", "root")
_MEMORY_FAILURES: list[Line] = [
    ((("failure_type", failure), ("scope", scope)), "pgfault" if failure == "pgfault" else "zero")
    for failure in ("pgfault", "pgmajfault")
    for scope in ("container", "hierarchy")
]
_TASK_STATES: list[Line] = [((("state", state),), "zero") for state in ("iowaiting", "running", "sleeping", "stopped",
                                                             "uninterruptible")]  # fmt: skip
_BLKIO: list[Line] = [
    ((("device", "/dev/nvme0n1"), ("major", "259"), ("minor", "0"), ("operation", op)), key)
    for op, key in (("Read", "blkio_read"), ("Write", "blkio_write"))
]


def _single(key: str, kinds: Sequence[str] = _ALL) -> dict[str, list[tuple[Variant, str]]]:
    return {kind: [(_PLAIN, key)] for kind in kinds}


def _network(kind_key: str) -> dict[str, list[tuple[Variant, str]]]:
    lines: list[Line] = [((("interface", iface),), kind_key if iface == "eth0" else "zero") for iface in _INTERFACES]
    return {"sandbox": lines, "root": lines}


def _fs_own(key: str) -> dict[str, list[tuple[Variant, str]]]:
    """fs families every cgroup with a writable layer reports, on the node's disk; the root also per device."""
    own: list[Line] = [((("device", "/dev/nvme0n1"),), key)]
    per_device: list[Line] = [((("device", d),), key) for d in _NODE_DEVICES]
    return {"container": own, "pod": own, "node": own, "root": per_device}


def _fs_node(key: str) -> dict[str, list[Line]]:
    per_device: list[Line] = [((("device", d),), key) for d in _NODE_DEVICES]
    return {"root": per_device}


_CPU_TOTAL: list[Line] = [((("cpu", "total"),), "usage")]
_ULIMIT: list[Line] = [((("ulimit", "max_open_files"),), "ulimit")]


_LAYOUT: dict[str, tuple[dict[str, list[tuple[Variant, str]]], bool]] = {
    "cadvisor_version_info": ({}, False),
    "container_blkio_device_usage_total": ({kind: _BLKIO for kind in ("container", "pod", "node", "root")}, False),
    "container_cpu_cfs_periods_total": (_single("periods", ("container", "pod")), True),
    "container_cpu_cfs_throttled_periods_total": (_single("throttled", ("container", "pod")), True),
    "container_cpu_cfs_throttled_seconds_total": (_single("throttled_s", ("container", "pod")), True),
    "container_cpu_load_average_10s": (_single("zero"), False),
    "container_cpu_load_d_average_10s": (_single("zero"), False),
    "container_cpu_system_seconds_total": (_single("system"), False),
    "container_cpu_usage_seconds_total": ({kind: _CPU_TOTAL for kind in _ALL}, False),
    "container_cpu_user_seconds_total": (_single("user"), False),
    "container_file_descriptors": (_single("fds"), False),
    "container_fs_inodes_free": (_fs_node("inodes_free"), False),
    "container_fs_inodes_total": (_fs_node("inodes_total"), False),
    "container_fs_io_current": (_fs_node("zero"), False),
    "container_fs_io_time_seconds_total": (_fs_node("io_s"), False),
    "container_fs_io_time_weighted_seconds_total": (_fs_node("io_s"), False),
    "container_fs_limit_bytes": (_fs_node("fs_limit"), False),
    "container_fs_read_seconds_total": (_fs_node("io_s"), False),
    "container_fs_reads_bytes_total": (_fs_own("fs_read_bytes"), False),
    "container_fs_reads_merged_total": (_fs_node("zero"), False),
    "container_fs_reads_total": (_fs_own("fs_reads"), False),
    "container_fs_sector_reads_total": (_fs_node("fs_reads"), False),
    "container_fs_sector_writes_total": (_fs_node("fs_writes"), False),
    "container_fs_usage_bytes": (_fs_node("fs_usage"), False),
    "container_fs_write_seconds_total": (_fs_node("io_s"), False),
    "container_fs_writes_bytes_total": (_fs_own("fs_write_bytes"), False),
    "container_fs_writes_merged_total": (_fs_node("zero"), False),
    "container_fs_writes_total": (_fs_own("fs_writes"), False),
    "container_last_seen": (_single("last_seen"), False),
    "container_memory_cache": (_single("mem_cache"), False),
    "container_memory_failcnt": (_single("zero"), False),
    "container_memory_failures_total": ({kind: _MEMORY_FAILURES for kind in _ALL}, False),
    "container_memory_kernel_usage": (_single("mem_kernel"), False),
    "container_memory_mapped_file": (_single("mem_mapped"), False),
    "container_memory_max_usage_bytes": (_single("mem_max"), False),
    "container_memory_rss": (_single("mem_rss"), False),
    "container_memory_swap": (_single("zero"), False),
    "container_memory_total_active_file_bytes": (_single("mem_active_file"), False),
    "container_memory_total_inactive_file_bytes": (_single("mem_inactive_file"), False),
    "container_memory_usage_bytes": (_single("mem_usage"), False),
    "container_memory_working_set_bytes": (_single("mem_ws"), False),
    "container_network_receive_bytes_total": (_network("rx_bytes"), False),
    "container_network_receive_errors_total": (_network("zero"), False),
    "container_network_receive_packets_dropped_total": (_network("zero"), False),
    "container_network_receive_packets_total": (_network("rx_packets"), False),
    "container_network_transmit_bytes_total": (_network("tx_bytes"), False),
    "container_network_transmit_errors_total": (_network("zero"), False),
    "container_network_transmit_packets_dropped_total": (_network("zero"), False),
    "container_network_transmit_packets_total": (_network("tx_packets"), False),
    "container_oom_events_total": (_single("zero"), False),
    "container_processes": (_single("processes"), False),
    "container_scrape_error": ({}, False),
    "container_sockets": (_single("sockets"), False),
    "container_spec_cpu_period": (_single("period"), False),
    "container_spec_cpu_quota": (_single("quota", ("container", "pod")), True),
    "container_spec_cpu_shares": (_single("shares"), False),
    "container_spec_memory_limit_bytes": (_single("mem_limit"), False),
    "container_spec_memory_reservation_limit_bytes": (_single("zero"), False),
    "container_spec_memory_swap_limit_bytes": (_single("zero"), False),
    "container_start_time_seconds": (_single("start"), False),
    "container_tasks_state": ({kind: _TASK_STATES for kind in _ALL}, False),
    "container_threads": (_single("threads"), False),
    "container_threads_max": (_single("threads_max"), False),
    "container_ulimits_soft": ({kind: _ULIMIT for kind in ("container", "sandbox", "root")}, False),
    "machine_cpu_cores": ({}, False),
    "machine_cpu_physical_cores": ({}, False),
    "machine_cpu_sockets": ({}, False),
    "machine_memory_bytes": ({}, False),
    "machine_nvm_avg_power_budget_watts": ({}, False),
    "machine_nvm_capacity": ({}, False),
    "machine_scrape_error": ({}, False),
    "machine_swap_bytes": ({}, False),
}  # fmt: skip

_TYPES = {name: "counter" if name.endswith("_total") else "gauge" for name in _LAYOUT}
_FAMILIES = tuple(
    _Family(name, f"# HELP {name} {_HELP[name]}\n# TYPE {name} {_TYPES[name]}\n", cfs, layout)
    for name, (layout, cfs) in sorted(_LAYOUT.items())
)


def _machine_lines(family: str, pool: _Pool, boot_id: str, machine_id: str) -> str:
    ids = f'boot_id="{boot_id}",machine_id="{machine_id}",system_uuid="{machine_id}"'
    if family == "container_scrape_error":
        return "container_scrape_error 0\n"
    if family == "machine_scrape_error":
        return "machine_scrape_error 0\n"
    if family == "machine_nvm_capacity":
        return "".join(
            f'machine_nvm_capacity{{boot_id="{boot_id}",machine_id="{machine_id}",mode="{mode}",'
            f'system_uuid="{machine_id}"}} 0\n'
            for mode in ("app_direct_mode", "memory_mode")
        )
    value = {
        "machine_cpu_cores": pool.cpus,
        "machine_cpu_physical_cores": pool.cpus // 2,
        "machine_cpu_sockets": 1 if pool.cpus <= 32 else 2,
        "machine_memory_bytes": pool.memory_gib * 2**30,
        "machine_nvm_avg_power_budget_watts": 0,
        "machine_swap_bytes": 0,
    }[family]
    return f"{family}{{{ids}}} {go_float(value)}\n"


_CONSTANTS = {
    "zero": "0",
    "ulimit": go_float(1048576),
    "period": go_float(DEFAULT_PERIOD_US),
}


def _container_values(container: _ContainerSpec, state: CpuState, ts_s: float) -> dict[str, str]:
    usage = state.usage_seconds_total
    ws = container.working_set_bytes
    alive_s = max(0.0, ts_s - state.started_s)
    quota = quota_us_from_limit_mcpu(container.limit_mcpu)
    return {
        **_CONSTANTS,
        "usage": go_float(usage),
        "user": go_float(round(usage * 0.8, 6)),
        "system": go_float(round(usage * 0.2, 6)),
        "periods": go_float(state.periods_total or 0),
        "throttled": go_float(state.throttled_periods_total or 0),
        "throttled_s": go_float(state.throttled_seconds_total or 0.0),
        "quota": go_float(quota or 0),
        "shares": go_float(shares_from_request_mcpu(container.request_mcpu)),
        "start": go_float(round(state.started_s, 3)),
        "last_seen": go_float(math.floor(ts_s)),
        "fds": go_float(8 + container.threads // 2),
        "sockets": go_float(2 + container.threads // 8),
        "processes": go_float(1 + container.threads // 40),
        "threads": go_float(container.threads),
        "threads_max": go_float(0),
        **_memory_values(ws, container.memory_limit_bytes or 0),
        "pgfault": go_float(int(usage * 2000 + alive_s)),
        "blkio_read": go_float(4096 * int(alive_s / 600)),
        "blkio_write": go_float(4096 * int(alive_s / 60)),
        "fs_reads": go_float(int(alive_s / 600)),
        "fs_writes": go_float(int(alive_s / 60)),
        "fs_read_bytes": go_float(4096 * int(alive_s / 600)),
        "fs_write_bytes": go_float(4096 * int(alive_s / 60)),
    }


def _pod_values(
    usage: float,
    periods: int,
    throttled: int,
    throttled_s: float,
    request_mcpu: int,
    limit_mcpu: int | None,
    memory: float,
    created_s: float,
    ts_s: float,
    threads: int,
) -> dict[str, str]:
    ws = int(memory)
    alive_s = max(0.0, ts_s - created_s)
    return {
        **_CONSTANTS,
        "usage": go_float(round(usage, 6)),
        "user": go_float(round(usage * 0.8, 6)),
        "system": go_float(round(usage * 0.2, 6)),
        "periods": go_float(periods),
        "throttled": go_float(throttled),
        "throttled_s": go_float(round(throttled_s, 6)),
        "quota": go_float(quota_us_from_limit_mcpu(limit_mcpu) or 0),
        "shares": go_float(shares_from_request_mcpu(request_mcpu or None)),
        "start": go_float(round(created_s, 3)),
        "last_seen": go_float(math.floor(ts_s)),
        "fds": "0",
        "sockets": "0",
        "processes": go_float(2 + threads // 40),
        "threads": go_float(threads + 1),
        "threads_max": "0",
        **_memory_values(ws),
        "pgfault": go_float(int(usage * 2000 + alive_s)),
        "blkio_read": go_float(4096 * int(alive_s / 600)),
        "blkio_write": go_float(4096 * int(alive_s / 60)),
        "fs_reads": go_float(int(alive_s / 600)),
        "fs_writes": go_float(int(alive_s / 60)),
        "fs_read_bytes": go_float(4096 * int(alive_s / 600)),
        "fs_write_bytes": go_float(4096 * int(alive_s / 60)),
    }


def _sandbox_values(created_s: float, ts_s: float, alive_s: float, traffic: float) -> dict[str, str]:
    usage = round(0.00002 * alive_s, 6)
    bytes_per_s = 2_000 + 200_000 * traffic
    return {
        **_CONSTANTS,
        "usage": go_float(usage),
        "user": go_float(round(usage * 0.5, 6)),
        "system": go_float(round(usage * 0.5, 6)),
        "shares": "2",
        "start": go_float(round(created_s, 3)),
        "last_seen": go_float(math.floor(ts_s)),
        "fds": "3",
        "sockets": "0",
        "processes": "1",
        "threads": "1",
        "threads_max": "0",
        "mem_usage": go_float(1_200_000),
        "mem_ws": go_float(229_376),
        "mem_rss": go_float(49_152),
        "mem_cache": "0",
        "mem_max": go_float(1_343_488),
        "mem_mapped": "0",
        "mem_kernel": go_float(106_496),
        "mem_active_file": "0",
        "mem_inactive_file": "0",
        "mem_limit": "0",
        "pgfault": go_float(1148),
        "rx_bytes": go_float(int(bytes_per_s * alive_s)),
        "rx_packets": go_float(int(bytes_per_s * alive_s / 900)),
        "tx_bytes": go_float(int(bytes_per_s * alive_s * 0.7)),
        "tx_packets": go_float(int(bytes_per_s * alive_s * 0.7 / 900)),
    }


def _node_values(usage: float, memory: float, boot_s: float, ts_s: float, uptime_s: float, cpus: int) -> dict[str, str]:
    ws = int(memory)
    return {
        **_CONSTANTS,
        "usage": go_float(round(usage, 6)),
        "user": go_float(round(usage * 0.75, 6)),
        "system": go_float(round(usage * 0.25, 6)),
        "shares": go_float(cpus * 1024),
        "start": go_float(round(boot_s, 3)),
        "last_seen": go_float(math.floor(ts_s)),
        "fds": go_float(4000 + cpus * 10),
        "sockets": go_float(500),
        "processes": go_float(400),
        "threads": go_float(2500),
        "threads_max": "0",
        **_memory_values(ws),
        "pgfault": go_float(int(usage * 2000 + uptime_s)),
        "blkio_read": go_float(4096 * int(uptime_s / 10)),
        "blkio_write": go_float(4096 * int(uptime_s)),
        "fs_reads": go_float(int(uptime_s / 10)),
        "fs_writes": go_float(int(uptime_s)),
        "fs_read_bytes": go_float(4096 * int(uptime_s / 10)),
        "fs_write_bytes": go_float(4096 * int(uptime_s)),
        "inodes_free": go_float(6.67929e7),
        "inodes_total": go_float(6.7108864e7),
        "io_s": go_float(round(uptime_s / 1000, 3)),
        "fs_limit": go_float(1.081100128256e12),
        "fs_usage": go_float(3.5455520768e10),
        "rx_bytes": go_float(int(uptime_s * 1_500_000)),
        "rx_packets": go_float(int(uptime_s * 1_500)),
        "tx_bytes": go_float(int(uptime_s * 1_200_000)),
        "tx_packets": go_float(int(uptime_s * 1_300)),
    }


# ---------------------------------------------------------------------------------------------------- HTTP server


_NODE_PATH = re.compile(r"/api/v1/nodes/([^/]+)(?:/proxy(/.*))?")
_SELECTOR_TERM = re.compile(r"([A-Za-z.]+)\s*(!=|==|=)\s*(.*)")


@dataclass
class _Counters:
    """What the server answered, for benchmarks and tests (scrapes served, bytes sent, list pages)."""

    scrapes: int = 0
    scrape_bytes: int = 0
    scrape_seconds: float = 0.0
    list_pages: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class SimulatorServer:
    """Serves a SimulatedCluster on 127.0.0.1 (an ephemeral port unless `port`). Use as a context manager.

    `clock` gives "now" in Unix seconds (tests pass a fake one to step time).
    """

    def __init__(
        self,
        cluster: SimulatedCluster,
        *,
        token: str = DEFAULT_TOKEN,
        port: int = 0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.cluster = cluster
        self.token = token
        self.clock = clock
        self.counters = _Counters()
        self._port = port
        self._server: _SimServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    def start(self) -> SimulatorServer:
        """Bind and serve in a background thread. Idempotent."""
        if self._server is None:
            self.bind()
            thread = threading.Thread(target=self.serve_forever, name="simulator", daemon=True)
            thread.start()
            self._thread = thread
        return self

    def bind(self) -> None:
        """Bind the listening socket without serving yet (so forked processes can share it)."""
        self._stopping.clear()
        server = _SimServer(("127.0.0.1", self._port), _SimHandler)
        server.simulator = self
        self._server = server

    def serve_forever(self) -> None:
        assert self._server is not None, "bind() first"
        self._server.serve_forever(poll_interval=0.2)

    def stop(self) -> None:
        """Stop serving; hanging answers are cut short."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server.close_connections()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> SimulatorServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the simulator is not running: use it as a context manager or call start()")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def write_kubeconfig(self, path: str | Path, token: str | None = None) -> Path:
        """A kubeconfig pointing at this server (plain http, bearer token); returns the path."""
        return write_kubeconfig(path, self.url, self.token if token is None else token, name="simulator")


class _SimServer(ThreadedServer):
    simulator: SimulatorServer
    request_queue_size = 128  # a worker pool opening connections at once must not be refused


class _SimHandler(KubernetesHandler):
    server: _SimServer

    def do_GET(self) -> None:
        sim = self.server.simulator
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        if self.headers.get("Authorization", "") != f"Bearer {sim.token}":
            self._status(401, "Unauthorized", "Unauthorized")
            return
        try:
            if path == "/version":
                self._json(200, {"major": "1", "minor": KUBELET_VERSION.split(".")[1], "gitVersion": KUBELET_VERSION,
                                 "platform": "linux/amd64"})  # fmt: skip
            elif path in ("/api/v1/nodes", "/api/v1/pods"):
                self._list(path.rsplit("/", 1)[1], query)
            else:
                self._node(path)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (its timeout): nothing to answer
            return

    def _node(self, path: str) -> None:
        sim = self.server.simulator
        cluster = sim.cluster
        match = _NODE_PATH.fullmatch(path)
        if match is None:
            self._status(404, "NotFound", f"the server could not find the requested resource (get {path})")
            return
        name, proxied = match.groups()
        node = cluster.node_index(name)
        if node is None:
            self._status(404, "NotFound", f'nodes "{name}" not found')
            return
        if proxied is None:
            self._raw(200, "application/json", json.dumps(cluster.node_object(node)).encode())
            return
        if proxied not in ("/metrics/cadvisor", "/configz"):
            self._raw(404, "text/plain; charset=utf-8", b"404 page not found\n")
            return
        fault = cluster.node_fault(node)
        if fault == "hanging":
            sim._stopping.wait(cluster.config.hang_s)
            self.close_connection = True
            return
        if fault == "slow" and sim._stopping.wait(cluster.config.slow_delay_s):
            return
        if fault == "failing":
            message = f'Internal Error: failed to get cadvisor stats for node "{name}": context deadline exceeded\n'
            self._raw(500, "text/plain; charset=utf-8", message.encode())
            return
        if proxied == "/configz":
            self._json(200, {"kubeletconfig": cluster.kubelet_config(node)})
            return
        started = time.perf_counter()
        body = cluster.scrape(node, sim.clock())
        took = time.perf_counter() - started
        with sim.counters.lock:
            sim.counters.scrapes += 1
            sim.counters.scrape_bytes += len(body)
            sim.counters.scrape_seconds += took
        self._raw(200, PROMETHEUS_TEXT, body)

    def _list(self, resource: str, query: dict[str, str]) -> None:
        sim = self.server.simulator
        cluster = sim.cluster
        config = cluster.config
        now_s = sim.clock()
        selector = query.get("fieldSelector", "")
        try:
            predicate = _selector(resource, selector, cluster)
        except ValueError as error:
            self._status(400, "BadRequest", str(error))
            return
        limit_text = query.get("limit", "")
        limit = int(limit_text) if limit_text.isdigit() else 0
        start, issued_s = 0, now_s
        token = query.get("continue", "")
        if token:
            try:
                fields = read_continue_token(token, {"resource": resource, "selector": selector})
            except ValueError as error:
                self._status(400, "BadRequest", f"invalid continue token: {error}")
                return
            start, issued_s = int(fields["start"]), float(fields.get("issued_s", now_s))
            if now_s - issued_s > config.continue_ttl_s:  # etcd compacted the revision the list was reading
                self._status(410, "Expired", EXPIRED_MESSAGE)
                return
        per_node = config.pods_per_node
        total = config.nodes if resource == "nodes" else config.nodes * per_node
        items: list[str] = []
        index = start
        while index < total and (limit == 0 or len(items) < limit):
            if resource == "nodes":
                if predicate(index, 0):
                    items.append(json.dumps(cluster.node_object(index), separators=(",", ":")))
            else:
                node, slot = divmod(index, per_node)
                if predicate(node, slot):
                    items.append(json.dumps(cluster.pod_object(node, slot, now_s), separators=(",", ":")))
            index += 1
        metadata: dict[str, Any] = {"resourceVersion": str(int(issued_s))}
        if index < total:
            metadata["continue"] = continue_token(
                {"resource": resource, "selector": selector, "start": index, "issued_s": issued_s}
            )
            if not selector:
                metadata["remainingItemCount"] = total - index
        head = json.dumps({"kind": f"{resource[:-1].capitalize()}List", "apiVersion": "v1", "metadata": metadata})
        with sim.counters.lock:
            sim.counters.list_pages += 1
        self._raw(200, "application/json", (head[:-1] + ',"items":[' + ",".join(items) + "]}").encode())


def _selector(resource: str, selector: str, cluster: SimulatedCluster) -> Callable[[int, int], bool]:
    """A predicate (node, slot) → bool for the field selectors the real server supports on these lists."""
    terms: list[tuple[str, bool, str]] = []
    for term in filter(None, (t.strip() for t in selector.split(","))):
        match = _SELECTOR_TERM.fullmatch(term)
        if match is None:
            raise ValueError(f"invalid field selector term {term!r}")
        name, operator, value = match.groups()
        allowed = {"metadata.name"} if resource == "nodes" else {"metadata.name", "metadata.namespace",
                                                                  "status.phase", "spec.nodeName"}  # fmt: skip
        if name not in allowed:
            raise ValueError(f'field label not supported: "{name}"')
        terms.append((name, operator == "!=", value))

    def predicate(node: int, slot: int) -> bool:
        for name, negate, value in terms:
            if name == "status.phase":
                actual = cluster.pod_phase(node, slot)
            elif name == "spec.nodeName" or (resource == "nodes" and name == "metadata.name"):
                actual = cluster.node_name(node)
            elif name == "metadata.namespace":
                actual = cluster.pod_spec(node, slot).namespace
            else:
                actual = cluster.pod_spec(node, slot).name
            if (actual == value) == negate:
                return False
        return True

    return predicate


# ----------------------------------------------------------------------------------------------------------- CLI


def _iter_children(count: int) -> Iterator[int]:
    for _ in range(count):
        pid = os.fork()
        if pid == 0:
            yield 0
            return
        yield pid


def main(argv: Sequence[str] | None = None) -> int:
    """Run a simulator until interrupted; print its URL, write its kubeconfig."""
    parser = argparse.ArgumentParser(prog="python -m standins.simulator", description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods-per-node", type=int, default=30)
    parser.add_argument("--containers-per-pod", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--port", type=int, default=0, help="0: an ephemeral port")
    parser.add_argument("--kubeconfig", default="", help="where to write the kubeconfig (default: a temp file)")
    parser.add_argument("--processes", type=int, default=1, help="processes serving the one port (prefork)")
    parser.add_argument("--restart-fraction", type=float, default=0.02)
    parser.add_argument("--restart-every", type=float, default=600.0, help="seconds between a container's restarts")
    parser.add_argument("--slow-fraction", type=float, default=0.01)
    parser.add_argument("--slow-delay", type=float, default=2.0)
    parser.add_argument("--failing-fraction", type=float, default=0.005)
    parser.add_argument("--hanging-fraction", type=float, default=0.002)
    parser.add_argument("--hang", type=float, default=120.0)
    parser.add_argument("--start", type=float, default=None, help="t0 in Unix seconds (default: this hour)")
    args = parser.parse_args(argv)
    try:
        config = SimulatorConfig(
            nodes=args.nodes,
            pods_per_node=args.pods_per_node,
            containers_per_pod=args.containers_per_pod,
            seed=args.seed,
            restart_fraction=args.restart_fraction,
            restart_every_s=args.restart_every,
            slow_fraction=args.slow_fraction,
            slow_delay_s=args.slow_delay,
            failing_fraction=args.failing_fraction,
            hanging_fraction=args.hanging_fraction,
            hang_s=args.hang,
            start_s=args.start,
        )
    except ValueError as error:
        parser.error(str(error))
    if args.processes < 1:
        parser.error(f"--processes must be at least 1, got {args.processes}")
    server = SimulatorServer(SimulatedCluster(config), port=args.port)
    server.bind()
    kubeconfig = Path(args.kubeconfig or f"/tmp/cputune-simulator-{os.getpid()}.kubeconfig")  # noqa: S108 - a scratch file
    server.write_kubeconfig(kubeconfig)
    cluster = server.cluster
    faults = [cluster.node_fault(i) for i in range(config.nodes)]
    print(f"serving {config.nodes} nodes × {config.pods_per_node} pods × {config.containers_per_pod} containers "
          f"(seed {config.seed}; {faults.count('slow')} slow, {faults.count('failing')} failing, "
          f"{faults.count('hanging')} hanging) with {args.processes} process(es)", flush=True)  # fmt: skip
    print(f"kubeconfig {kubeconfig}", flush=True)
    print(server.url, flush=True)
    children: list[int] = []
    for pid in _iter_children(args.processes - 1):
        if pid == 0:  # a child: serve the shared socket until the parent stops it
            signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
            server.serve_forever()
            os._exit(0)
        children.append(pid)

    def stop(*_: object) -> None:
        for pid in children:
            os.kill(pid, signal.SIGTERM)
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
