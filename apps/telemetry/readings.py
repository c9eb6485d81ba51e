"""The plain values every source yields and the ingest service stores. Pure Python: no Django import.

NodeInfo, PodInfo and ContainerInfo belong to the clusters app, which stores them (apps/clusters/info.py); they are
re-exported here so that a source finds everything it yields in one module.

CPU is in millicores (mcpu), counters are cumulative as the kernel reports them, times are seconds, instants are
timezone-aware UTC datetimes. `None` means "not reported by this source", never zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from apps.clusters.info import ContainerInfo, NodeInfo, PodInfo

__all__ = ["Batch", "ContainerInfo", "CounterReading", "NodeInfo", "PeriodReading", "PodInfo"]


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
    # CPU pressure (PSI, cgroup v2 cpu.pressure): time some task waited for CPU ("some"), time all non-idle tasks
    # did ("full"); the kubelet's container_pressure_cpu_waiting/stalled_seconds_total.
    pressure_waiting_seconds_total: float | None = None
    pressure_stalled_seconds_total: float | None = None
    threads: int | None = None
    period_us: int | None = None  # cpu.cfs_period_us as read, when the source reports it
    quota_us: int | None = None  # cpu.cfs_quota_us as read (None: no quota)
    node: str = ""


@dataclass(frozen=True, slots=True)
class PeriodReading:
    """A few seconds of one stored container polled period by period (the node agent's sampler), from `ts` on."""

    container_id: int
    ts: datetime
    seconds: float
    periods: int  # periods counted while polled
    throttled_us: tuple[int, ...]  # the throttled time of each period that had some (at most `periods` entries)
    period_us: int
    quota_us: int | None


@dataclass(slots=True)
class Batch:
    """What one source produced for one cluster in one go: inventory and readings, either may be empty."""

    nodes: list[NodeInfo] = field(default_factory=list)
    pods: list[PodInfo] = field(default_factory=list)
    readings: list[CounterReading] = field(default_factory=list)
