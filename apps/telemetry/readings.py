"""The plain values every source yields and the ingest service stores. Pure Python: no Django import.

CPU is in millicores (mcpu), counters are cumulative as the kernel reports them, times are seconds, instants are
timezone-aware UTC datetimes. `None` means "not reported by this source", never zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    capacity_mcpu: int | None = None
    allocatable_mcpu: int | None = None
    kernel_version: str = ""
    os_image: str = ""
    container_runtime: str = ""
    kubelet_version: str = ""
    cpu_manager_policy: str = ""  # "static" | "none" | "" (unknown: the kubelet config was not read)
    cfs_slice_us: int | None = None  # /proc/sys/kernel/sched_cfs_bandwidth_slice_us, from the node agent
    cpufreq_governor: str = ""


@dataclass(frozen=True, slots=True)
class ContainerInfo:
    name: str
    container_id: str = ""  # runtime id without the "containerd://" prefix
    request_mcpu: int | None = None
    limit_mcpu: int | None = None
    restarts: int = 0


@dataclass(frozen=True, slots=True)
class PodInfo:
    namespace: str
    name: str
    uid: str = ""
    node: str = ""
    qos_class: str = ""  # Guaranteed | Burstable | BestEffort
    workload_kind: str = ""  # Deployment, StatefulSet, DaemonSet, Job, CronJob, ... or "" for a bare pod
    workload_name: str = ""
    containers: tuple[ContainerInfo, ...] = ()


@dataclass(frozen=True, slots=True)
class CounterReading:
    """One container's cumulative counters at one instant (cAdvisor, Prometheus, cgroupfs or a dump)."""

    namespace: str
    pod: str
    container: str
    ts: datetime
    periods_total: int | None = None  # nr_periods
    throttled_periods_total: int | None = None  # nr_throttled
    throttled_seconds_total: float | None = None  # throttled_time, summed over threads
    usage_seconds_total: float | None = None  # CPU time consumed
    threads: int | None = None
    period_us: int | None = None  # cpu.cfs_period_us as read, when the source reports it
    quota_us: int | None = None  # cpu.cfs_quota_us as read (None: no quota)
    node: str = ""


@dataclass(slots=True)
class Batch:
    """What one source produced for one cluster in one go: inventory and readings, either may be empty."""

    nodes: list[NodeInfo] = field(default_factory=list)
    pods: list[PodInfo] = field(default_factory=list)
    readings: list[CounterReading] = field(default_factory=list)
