"""What the lab's runtime reports: its containers, its state and the outcome of up, down and status. No Django."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from apps.lab.workloads import Demand, ParamValue, estimated_demand
from apps.telemetry.readings import ContainerInfo, NodeInfo, PodInfo


class LabError(RuntimeError):
    """The lab cannot start, stop or report; the message says why and what was left in place."""


@dataclass(frozen=True, slots=True)
class LabContainer:
    """One lab container as a collector sees it: identity, resources, workload, and where its counters are.

    Paths: ``cgroup_relpath`` is relative to the hierarchy mount (e.g. ``cputune-lab/kubepods/burstable/pod<uid>/<id>``);
    ``cpu_dir`` holds cpu.stat (throttling), ``usage_dir`` holds cpuacct.usage (v1) or cpu.stat (v2), None if absent.
    """

    namespace: str
    pod: str
    container: str
    pod_uid: str
    container_id: str
    request_mcpu: int | None
    limit_mcpu: int | None
    qos_class: str
    workload_kind: str  # the pod's owner kind (Deployment, …) or ""
    workload_name: str
    workload: str  # the lab workload running in it (burner, fibtest, …)
    workload_params: Mapping[str, ParamValue]
    cgroup_relpath: str
    cpu_dir: str
    usage_dir: str | None
    pod_cgroup_relpath: str
    pod_cpu_dir: str
    pod_usage_dir: str | None
    pids: tuple[int, ...]  # the workload leader (its workers are found in the cgroup's cgroup.procs)
    restarts: int = 0  # restarts since `lab up` (`lab set --processes`), as a container status's restartCount

    def container_info(self) -> ContainerInfo:
        return ContainerInfo(
            self.container, self.container_id, self.request_mcpu, self.limit_mcpu, restarts=self.restarts
        )


@dataclass(frozen=True, slots=True)
class LabInventory:
    """Everything a collector needs from a running lab: the node facts, the containers and where they live."""

    node: NodeInfo
    cgroup_version: int
    cpu_mount: str
    cpuacct_mount: str | None
    root: str
    period_us: int
    containers: tuple[LabContainer, ...]

    def demand(self) -> Demand:
        """The CPU the containers' workloads use together, each capped at its limit: average and peak (the peaks
        are summed, an upper bound: bursts need not coincide)."""
        parts = [
            estimated_demand(c.workload, c.workload_params, c.limit_mcpu / 1000 if c.limit_mcpu else None)
            for c in self.containers
        ]
        return Demand(sum(d.average_cores for d in parts), sum(d.peak_cores for d in parts))

    def pods(self) -> tuple[PodInfo, ...]:
        """The pods as readings.PodInfo values, containers in scenario order."""
        grouped: dict[tuple[str, str], list[LabContainer]] = {}
        for c in self.containers:
            grouped.setdefault((c.namespace, c.pod), []).append(c)
        return tuple(
            PodInfo(
                namespace=namespace,
                name=pod,
                uid=items[0].pod_uid,
                node=self.node.name,
                qos_class=items[0].qos_class,
                workload_kind=items[0].workload_kind,
                workload_name=items[0].workload_name,
                containers=tuple(c.container_info() for c in items),
            )
            for (namespace, pod), items in grouped.items()
        )


@dataclass(frozen=True, slots=True)
class CleanupReport:
    """What lab_up (or lab_down) found and removed from an earlier run."""

    stale_pids: tuple[int, ...] = ()  # processes signalled: leaders from the state file, and any found in the root
    removed_cgroups: tuple[str, ...] = ()
    leftover: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LabState:
    """A running lab, as lab_up leaves it."""

    root: str
    state_file: str
    scenario_path: str
    boot: int
    started_at: datetime
    inventory: LabInventory
    cleanup: CleanupReport

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["started_at"] = self.started_at.isoformat()
        return data


@dataclass(frozen=True, slots=True)
class LabDownReport:
    was_running: bool
    root: str
    stopped_pids: tuple[int, ...]  # processes the lab signalled: workload leaders, and anything still in the tree
    removed_cgroups: tuple[str, ...]
    leftover: tuple[str, ...]  # cgroups that could not be removed, with the reason; empty when all went well
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class ContainerStatus:
    namespace: str
    pod: str
    container: str
    leader_alive: bool
    tasks: int  # processes in the container's cgroup now
    expected_tasks: int  # what its workload starts: fewer running means part of it died
    nr_periods: int | None
    nr_throttled: int | None
    throttled_seconds: float | None
    usage_seconds: float | None
    request_mcpu: int | None = None  # what the lab applies now (`lab set` changes them)
    limit_mcpu: int | None = None
    qos_class: str = ""
    restarts: int = 0


@dataclass(frozen=True, slots=True)
class LabStatus:
    running: bool
    root: str
    boot: int
    started_at: datetime | None
    scenario_path: str
    containers: tuple[ContainerStatus, ...] = ()
    problems: tuple[str, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["started_at"] = self.started_at.isoformat() if self.started_at else None
        return data


@dataclass(frozen=True, slots=True)
class LabChange:
    """What `lab set` did to one container: an in-place resize, a restart with another process count, or both.

    ``*_before`` / ``*_after`` are the container's request and limit (mcpu, None for none) and its workload's
    ``processes``; the quota and shares are what its cgroup and its pod's hold afterwards (quota None: unlimited).
    """

    namespace: str
    pod: str
    container: str
    qos_class: str  # unchanged: a change of QoS class is refused
    request_before: int | None
    request_after: int | None
    limit_before: int | None
    limit_after: int | None
    processes_before: int | None  # None: the workload kind has no processes
    processes_after: int | None
    resized: bool
    restarted: bool
    restarts: int  # the container's restart count afterwards
    container_id_before: str
    container_id_after: str  # a new id (and cgroup) when restarted
    cgroup_relpath: str  # the container's cgroup afterwards, relative to the hierarchy mount
    pids_before: tuple[int, ...]
    pids_after: tuple[int, ...]  # the same as before unless restarted
    quota_us: int | None
    shares: int
    pod_quota_us: int | None
    pod_shares: int
    period_us: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
