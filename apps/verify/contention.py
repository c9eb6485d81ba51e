"""`lab verify --contention`: every lab container busy at once, measured against the shares floor the advisor
computes for it (docs/domain.md#lab-contention).

Each scenario container runs a burner with at least as many processes as this machine has CPUs, in the kubelet's
own layout (apps.lab.cgroups.kubelet_layout: kubepods, the burstable and besteffort QoS levels, pod cgroups with
their shares and quotas) rebuilt under ``cputune-verify/contention-<pid>``. One run keeps every quota; then the
quotas (container and pod) are lifted and the same processes are measured again. CPU is cpuacct.usage over the run.

With quotas a container is owed min(floor, limit): a limit below its floor caps it there, and the CPU it leaves
goes to the others, who then measure above their floors. Without quotas, all busy, the kernel's split is the floor's
arithmetic itself over the CPUs the pods get: the shares-proportional part.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from apps.advisor.cfs import SharesFloor, container_shares_floor, pod_shares_floor
from apps.clusters.kubelet import MAX_SHARES, MILLI_CPU_TO_CPU
from apps.lab import cgroups
from apps.lab.cgroups import CgroupError, CpuController, detect_cpu_controller
from apps.lab.runtime import node_facts
from apps.lab.scenario import Scenario, load_scenario
from apps.lab.workloads import REPO_ROOT, child_env, command_line, stop_child
from apps.verify.runner import VERIFY_ROOT, RunError

FLOOR_SHARE = 0.85  # measured with quotas ≥ 85 % of min(floor, limit)
PROPORTIONAL_TOLERANCE = 0.15  # measured without quotas within ±15 % of the shares-proportional part
# A part under 1 % of a CPU is a few scheduler slices a second: the kernel hands CPU out in slices of a millisecond
# or more, so a 2-share BestEffort group's 0.9m gets 1.2–1.3m over a minute. Its floor (≈0) is still checked.
RESOLVABLE_MCPU = 10.0
_JOIN_TIMEOUT_S = 30.0
_SETTLE_S = 1.0  # a group's shares are spread over the CPUs by load averages (32 ms half-life): let them settle
_MICRO_PER_MILLI = 1000
_NODE = ""  # the parent's own usage, beside the containers' labels


@dataclass(frozen=True, slots=True)
class ContentionRow:
    """One container under full contention: what the product computes beside what the kernel gave it."""

    container: str  # namespace/pod/container
    shares: int
    floor_mcpu: int  # the advisor's shares floor on the scenario's allocatable CPU
    limit_mcpu: int | None
    measured_with_quota_mcpu: float
    proportional_mcpu: float  # the floor's arithmetic over this machine's CPUs, unrounded
    measured_without_quota_mcpu: float

    @property
    def guaranteed_mcpu(self) -> int:
        return guaranteed_mcpu(self.floor_mcpu, self.limit_mcpu)

    @property
    def floor_held(self) -> bool:
        return floor_held(self.measured_with_quota_mcpu, self.floor_mcpu, self.limit_mcpu)

    @property
    def proportional_held(self) -> bool | None:
        return proportional_held(self.measured_without_quota_mcpu, self.proportional_mcpu)

    @property
    def passed(self) -> bool:
        return self.floor_held and self.proportional_held is not False

    def missed(self) -> list[str]:
        return [
            what
            for what, held in (("floor", self.floor_held), ("proportional", self.proportional_held))
            if held is False
        ]

    def as_dict(self) -> dict[str, object]:
        return asdict(self) | {
            "guaranteed_mcpu": self.guaranteed_mcpu,
            "floor_held": self.floor_held,
            "proportional_held": self.proportional_held,
            "passed": self.passed,
        }


@dataclass(frozen=True, slots=True)
class Contention:
    """Both runs: the rows, and what the node's pods got in all (every CPU, unless something else took some)."""

    rows: tuple[ContentionRow, ...]
    cpus: int
    allocatable_mcpu: int
    processes: int  # burner processes per container
    seconds: float  # length of each run
    node_with_quota_mcpu: float
    node_without_quota_mcpu: float

    def as_dict(self) -> dict[str, object]:
        return {
            "cpus": self.cpus,
            "allocatable_mcpu": self.allocatable_mcpu,
            "processes": self.processes,
            "seconds": self.seconds,
            "node_with_quota_mcpu": self.node_with_quota_mcpu,
            "node_without_quota_mcpu": self.node_without_quota_mcpu,
            "rows": [row.as_dict() for row in self.rows],
        }


def guaranteed_mcpu(floor_mcpu: int, limit_mcpu: int | None) -> int:
    """What a busy container is owed under full contention: its floor, or its limit when the quota caps it lower."""
    return floor_mcpu if limit_mcpu is None else min(floor_mcpu, limit_mcpu)


def floor_held(measured_mcpu: float, floor_mcpu: int, limit_mcpu: int | None) -> bool:
    return measured_mcpu >= FLOOR_SHARE * guaranteed_mcpu(floor_mcpu, limit_mcpu)


def proportional_held(measured_mcpu: float, proportional_mcpu: float) -> bool | None:
    """Within the tolerance of the part; None (not judged) for a part too small for the scheduler to resolve."""
    if proportional_mcpu < RESOLVABLE_MCPU:
        return None
    return abs(measured_mcpu - proportional_mcpu) <= PROPORTIONAL_TOLERANCE * proportional_mcpu


def container_floors(scenario: Scenario, budget: int) -> dict[str, SharesFloor]:
    """Each container's floor (label → SharesFloor) exactly as the advisor computes it: the pod's floor on the
    node, then the container's part of it by its own shares against its siblings'."""
    floors: dict[str, SharesFloor] = {}
    for pod in scenario.pods:
        others = [p.request_mcpu for p in scenario.pods if p is not pod]
        pod_floor = pod_shares_floor(pod.request_mcpu, others, budget)
        for container in pod.containers:
            siblings = [c.request_mcpu for c in pod.containers if c is not container]
            label = f"{pod.namespace}/{pod.name}/{container.name}"
            floors[label] = container_shares_floor(pod_floor, container.request_mcpu, siblings)
    return floors


def proportional_parts(scenario: Scenario, cpus: int) -> dict[str, float]:
    """Each container's shares-proportional part of `cpus` CPUs in mcpu: the floor's arithmetic, run in µcpu so
    that its rounding down does not make a 2-share container's part 0."""
    floors = container_floors(scenario, cpus * MILLI_CPU_TO_CPU * _MICRO_PER_MILLI)
    return {label: floor.floor_mcpu / _MICRO_PER_MILLI for label, floor in floors.items()}


@contextlib.contextmanager
def _weighted_root(controller: CpuController) -> Iterator[None]:
    """cputune-verify weighted as much as cgroup v1 allows for the run, then back to what it was."""
    shares_file = Path(controller.cpu_dir(VERIFY_ROOT), "cpu.shares")
    before = int(shares_file.read_text())
    # On v1 every process in the root cgroup is an entity of weight 1024 beside this root: at the default 1024 two
    # busy processes of someone else's tests would take two thirds of the machine. At 262144 they get under 1 %
    # (measured: beside 4 busy loops the pods got 1.49 of 2 CPUs unweighted, 1.97 weighted).
    cgroups.set_root_shares(controller, VERIFY_ROOT, MAX_SHARES)
    try:
        yield
    finally:
        cgroups.set_root_shares(controller, VERIFY_ROOT, before)


def _usage(controller: CpuController, relpaths: dict[str, str]) -> dict[str, int]:
    return {label: cgroups.read_usage_ns(controller, f"{VERIFY_ROOT}/{rel}") for label, rel in relpaths.items()}


def _measure(controller: CpuController, relpaths: dict[str, str], seconds: float) -> dict[str, float]:
    """mcpu each cgroup used over `seconds`, after the settling time."""
    time.sleep(_SETTLE_S)
    first, started = _usage(controller, relpaths), time.monotonic()
    time.sleep(seconds)
    last, ended = _usage(controller, relpaths), time.monotonic()
    return {label: (last[label] - first[label]) / 1e6 / (ended - started) for label in relpaths}


def _wait_joined(controller: CpuController, dirs: list[str], tasks: int, children: list[subprocess.Popen[str]]) -> None:
    deadline = time.monotonic() + _JOIN_TIMEOUT_S
    while any(len(cgroups.read_pids(d)) < tasks for d in dirs):
        stopped = [c for c in children if c.poll() is not None]
        if stopped:
            raise RunError(f"a burner stopped before the run (exit status {stopped[0].returncode})")
        if time.monotonic() > deadline:
            raise RunError(f"the burners did not all start within {_JOIN_TIMEOUT_S:g} s")
        time.sleep(0.05)


def run_contention(
    *,
    seconds: float = 5.0,
    processes: int | None = None,
    scenario_path: str | None = None,
    controller: CpuController | None = None,
) -> Contention:
    """Both runs over the scenario (default: the lab's): every container's CPU with quotas, then without.

    `processes` per container defaults to this machine's CPU count. Nothing else of the lab should run meanwhile.
    """
    controller = controller or detect_cpu_controller()
    if controller is None:
        raise RuntimeError("no writable cgroup cpu controller on this machine")
    if controller.version != 1:
        # The lab writes v2 weights with a coarse linear mapping (204 shares → weight 8): not the shares' ratios.
        raise RuntimeError("the contention check needs cgroup v1 cpu.shares (this machine has cgroup v2)")
    scenario = load_scenario(scenario_path)
    cpus = os.cpu_count() or 1
    processes = processes or cpus
    allocatable = node_facts(scenario, controller).allocatable_mcpu or cpus * MILLI_CPU_TO_CPU
    floors = container_floors(scenario, allocatable)
    parts = proportional_parts(scenario, cpus)
    layout = cgroups.kubelet_layout(scenario, 1, allocatable)
    period_us = scenario.period_us
    parent = f"contention-{os.getpid()}"  # two runs at once (tests in parallel) never share a cgroup
    placements = {f"{p.pod.namespace}/{p.pod.name}/{p.container.name}": p for p in layout.placements}
    relpaths = {label: f"{parent}/{p.relpath}" for label, p in placements.items()}
    root_existed = os.path.isdir(controller.cpu_dir(VERIFY_ROOT))
    children: list[subprocess.Popen[str]] = []
    try:
        cgroups.ensure_root(controller, VERIFY_ROOT)
        # The parent stands for the node: at the top of cputune-verify's weight, it wins over lab verify's
        # throwaway cgroups there as the root, weighted below, wins over the rest of the machine.
        cgroups.create_cgroup(controller, VERIFY_ROOT, cgroups.CgroupSettings(parent, MAX_SHARES, None, period_us))
        nested = [replace(s, relpath=f"{parent}/{s.relpath}") for s in layout.cgroups]
        for settings in nested:
            cgroups.create_cgroup(controller, VERIFY_ROOT, settings)
        for rel in relpaths.values():
            procs = cgroups.procs_files(controller, VERIFY_ROOT, rel)
            argv = command_line("burner", {"processes": processes}, procs)
            children.append(subprocess.Popen(argv, cwd=REPO_ROOT, env=child_env(), text=True))
        dirs = [controller.cpu_dir(f"{VERIFY_ROOT}/{rel}") for rel in relpaths.values()]
        _wait_joined(controller, dirs, 1 + processes, children)
        everything = relpaths | {_NODE: parent}
        # Weighted only once every burner has joined: a process starts in the machine's root cgroup, where it
        # would wait behind the weighted burners for its whole start.
        with _weighted_root(controller):
            with_quota = _measure(controller, everything, seconds)
            for settings in nested:
                lifted = replace(settings, quota_us=None)
                cgroups.write_settings(controller, controller.cpu_dir(f"{VERIFY_ROOT}/{settings.relpath}"), lifted)
            without_quota = _measure(controller, everything, seconds)
    finally:
        for child in children:
            stop_child(child)
        report = cgroups.remove_tree(controller, VERIFY_ROOT, parent)
        if not root_existed and not cgroups.children(controller, VERIFY_ROOT):
            cgroups.remove_root_if_empty(controller, VERIFY_ROOT)
    if report.leftover:
        raise CgroupError(f"could not remove the contention cgroups: {'; '.join(report.leftover)}")
    written = {settings.relpath: settings.shares for settings in layout.cgroups}
    rows = tuple(
        ContentionRow(
            container=label,
            shares=written[placement.relpath],
            floor_mcpu=floors[label].floor_mcpu,
            limit_mcpu=placement.container.limit_mcpu,
            measured_with_quota_mcpu=with_quota[label],
            proportional_mcpu=parts[label],
            measured_without_quota_mcpu=without_quota[label],
        )
        for label, placement in placements.items()
    )
    return Contention(
        rows=rows,
        cpus=cpus,
        allocatable_mcpu=allocatable,
        processes=processes,
        seconds=seconds,
        node_with_quota_mcpu=with_quota[_NODE],
        node_without_quota_mcpu=without_quota[_NODE],
    )


def table(result: Contention) -> list[str]:
    """The rows as aligned lines, then what the node's pods got in all."""

    def limit(row: ContentionRow) -> str:
        return "—" if row.limit_mcpu is None else f"{row.limit_mcpu}m"

    lines = [
        f"{'container':44} {'shares':>6} {'floor':>6} {'limit':>6} {'quota':>7} {'part':>7} {'no quota':>8}  result"
    ]
    for r in result.rows:
        verdict = "FAIL: " + ", ".join(r.missed()) if r.missed() else "pass"
        if r.proportional_held is None:
            verdict += f" (part not judged: under {RESOLVABLE_MCPU:g}m, a few scheduler slices a second)"
        lines.append(
            f"{r.container[:44]:44} {r.shares:>6} {r.floor_mcpu:>5}m {limit(r):>6} "
            f"{r.measured_with_quota_mcpu:>6.1f}m {r.proportional_mcpu:>6.1f}m {r.measured_without_quota_mcpu:>7.1f}m"
            f"  {verdict}"
        )
    lines.append(
        f"node: {result.cpus} CPUs, {result.processes} burner processes per container, {result.seconds:g} s per run; "
        f"the pods got {result.node_with_quota_mcpu:.0f}m with quotas, {result.node_without_quota_mcpu:.0f}m without"
    )
    return lines
