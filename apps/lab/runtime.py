"""The lab's runtime: start a scenario's workloads in kubelet-style cgroups, report on them, stop them. No Django.

``lab_up`` always starts from a clean root: whatever a previous run left (the pids in its state file, checked to
still be the same processes, and any process found in the lab root) is stopped and its cgroups removed first, so a
second ``lab_up`` after a crash, or without a ``lab_down``, is safe. ``lab_down`` stops every workload (SIGTERM, then
SIGKILL after a short grace) and removes every cgroup under the root. Nothing outside the root is touched.

The lab root is weighted ``root_shares`` (default 10240, ten CPUs' worth) against the rest of the machine. On a real
node kubepods competes only with a few system slices; here it competes with every process of everyone using the
machine, and at the default 1024 a load of 11 from other work left the whole default scenario ~0.3 CPU, so no
container even reached its quota and nothing was throttled. The scenario's limits cap what the weight can take
(the default scenario ≈1.3 cores on average, 1.46 at most), so other work keeps the rest, and a quiet machine
sees no difference at all.

State lives in ``<state_dir>/state.json`` (written atomically; a lock file serialises up/down/set on one state dir)
and survives ``lab_down`` with ``running: false`` so the boot counter keeps growing: a restarted container gets a new
id. Each container's entry holds what the lab applies now: ``lab set`` (apps/lab/changes.py) rewrites its request,
limit, workload parameters, processes and ``restarts``, and after a restart its container id and cgroup path.
Workload output goes to ``<state_dir>/logs/<namespace>.<pod>.<container>.log``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from apps.lab import cgroups
from apps.lab.cgroups import DEFAULT_ROOT, PROBE_PREFIX, CgroupError, CpuController
from apps.lab.reports import (
    CleanupReport,
    ContainerStatus,
    LabContainer,
    LabDownReport,
    LabError,
    LabInventory,
    LabState,
    LabStatus,
)
from apps.lab.scenario import Scenario, ScenarioError, load_scenario, parse_scenario
from apps.lab.workloads import command_line, task_count
from apps.telemetry.readings import NodeInfo

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_STATE_DIR = REPO_ROOT / "var" / "lab"
STATE_FILE = "state.json"
STATE_VERSION = 1
WORKLOAD_MARKER = "apps.lab.workloads"  # in every workload's command line: how a stale pid is recognised as ours

DEFAULT_ROOT_SHARES = 10_240
_START_TIMEOUT_S = 15.0
_STOP_GRACE_S = 2.0

# Workload leaders this process started: kept so they can be reaped (no zombie) and to avoid Popen's
# "still running" warning when the objects would otherwise be dropped.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


# --- process identity ------------------------------------------------------------------------------------------


def process_start_ticks(pid: int) -> int | None:
    """Start time of a process in clock ticks since boot (/proc/<pid>/stat field 22); None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: split after the last ')'.
    fields = text[text.rfind(")") + 2 :].split()
    return int(fields[19])


def _is_live(pid: int) -> bool:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return text[text.rfind(")") + 2 :].split()[0] not in ("Z", "X")  # a zombie runs nothing


def _is_our_workload(pid: int, start_ticks: int | None) -> bool:
    """True only for the very process recorded (same start time) that still runs a lab workload: pids get reused."""
    if start_ticks is None or process_start_ticks(pid) != start_ticks or not _is_live(pid):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    return WORKLOAD_MARKER in cmdline


# --- state file ------------------------------------------------------------------------------------------------


def _state_path(state_dir: str | Path) -> Path:
    return Path(state_dir) / STATE_FILE


def _read_state(state_dir: str | Path) -> tuple[dict[str, Any] | None, str]:
    """The state dict, or None and a note saying why there is none (missing, unreadable, corrupt)."""
    path = _state_path(state_dir)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None, ""
    except (OSError, ValueError) as exc:
        return None, f"ignored an unreadable state file {path}: {exc}"
    if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
        return None, f"ignored a state file {path} of an unknown format"
    return data, ""


def _write_state(state_dir: str | Path, data: Mapping[str, Any]) -> None:
    path = _state_path(state_dir)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
    os.replace(tmp, path)


@contextlib.contextmanager
def _locked(state_dir: str | Path) -> Iterator[None]:
    Path(state_dir).mkdir(parents=True, exist_ok=True)
    with open(Path(state_dir) / "lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LabError(f"another lab command is running on {state_dir}") from None
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


# --- node facts ------------------------------------------------------------------------------------------------


def _read_first_line(path: str) -> str:
    try:
        return Path(path).read_text().splitlines()[0].strip()
    except (OSError, IndexError):
        return ""


def _os_image() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.partition("=")[2].strip().strip('"')
    except OSError:
        pass
    return ""


def node_facts(scenario: Scenario, controller: CpuController) -> NodeInfo:
    """This machine as a node: real CPU count (os.cpu_count), ``uname -r``, CFS slice, cpufreq governor."""
    cpus = os.cpu_count() or 1
    slice_text = _read_first_line("/proc/sys/kernel/sched_cfs_bandwidth_slice_us")
    return NodeInfo(
        name=scenario.node_name or socket.gethostname(),
        capacity_mcpu=cpus * 1000,
        allocatable_mcpu=scenario.allocatable_mcpu or cpus * 1000,
        kernel_version=os.uname().release,
        os_image=_os_image(),
        container_runtime=f"cputune-lab (cgroup v{controller.version}, cgroupfs layout)",
        kubelet_version="",
        cpu_manager_policy="none",  # the lab never pins CPUs
        cfs_slice_us=int(slice_text) if slice_text.isdigit() else None,
        cpufreq_governor=_read_first_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
    )


# --- cleanup ---------------------------------------------------------------------------------------------------


def _live_probe(name: str) -> bool:
    """A probe cgroup (probe-<pid>-…) whose probe process still runs: belongs to a concurrent kernel probe."""
    if not name.startswith(PROBE_PREFIX):
        return False
    pid_text = name[len(PROBE_PREFIX) :].split("-", 1)[0]
    return pid_text.isdigit() and _is_live(int(pid_text))


def _clean_root(controller: CpuController, root: str, grace_s: float) -> cgroups.RemovalReport:
    """Stop and remove everything under the root except a running probe's cgroups; the root goes if left empty."""
    report = cgroups.RemovalReport()
    for name in cgroups.children(controller, root):
        if not _live_probe(name):
            report = report.merged(cgroups.remove_tree(controller, root, name, grace_s=grace_s))
    # Processes sitting directly in the root (not put there by the lab, but inside its root) go too.
    if _root_has_own_tasks(controller, root):
        killed = cgroups.stop_tasks(controller, root, "", grace_s=0, timeout_s=5)
        report = report.merged(cgroups.RemovalReport(killed_pids=killed))
    if not cgroups.children(controller, root):
        cgroups.remove_root_if_empty(controller, root)
    return report


def _root_has_own_tasks(controller: CpuController, root: str) -> bool:
    return any(cgroups.read_pids(os.path.join(mount, root)) for mount in controller.hierarchies)


def _stop_recorded(state: Mapping[str, Any], grace_s: float) -> list[int]:
    """SIGTERM (then SIGKILL) the leaders a state file records, but only those that are still the same process."""
    leaders: list[int] = []
    for container in state.get("containers", []):
        for entry in container.get("processes", []):
            try:
                pid, start_ticks = int(entry["pid"]), entry.get("start_ticks")
            except (KeyError, TypeError, ValueError):
                continue  # a damaged entry: the root scan that follows still finds the process if it is ours
            if _is_our_workload(pid, start_ticks):
                leaders.append(pid)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in leaders:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + (grace_s if sig == signal.SIGTERM else 2.0)
        while time.monotonic() < deadline and any(_is_live(pid) for pid in leaders):
            _reap_children(leaders)
            time.sleep(0.02)
    _reap_children(leaders)
    return leaders


def _reap_children(pids: list[int]) -> None:
    for pid in pids:
        child = _CHILDREN.get(pid)
        if child is not None and child.poll() is not None:
            del _CHILDREN[pid]
    cgroups.reap(pid for pid in pids if pid not in _CHILDREN)


def _cleanup(controller: CpuController, state: Mapping[str, Any] | None, root: str, grace_s: float) -> CleanupReport:
    stale: set[int] = set()
    removed: list[str] = []
    leftover: list[str] = []
    roots = [root]
    if state is not None:
        stale.update(_stop_recorded(state, grace_s))
        previous_root = state.get("root")
        if isinstance(previous_root, str) and previous_root != root:
            roots.append(previous_root)
    for each_root in roots:
        try:
            report = _clean_root(controller, each_root, grace_s)
        except CgroupError as exc:
            leftover.append(str(exc))
            continue
        stale.update(report.killed_pids)
        removed.extend(report.removed)
        leftover.extend(report.leftover)
    _reap_children(list(_CHILDREN))
    return CleanupReport(tuple(sorted(stale)), tuple(removed), tuple(leftover))


# --- up / down / status ----------------------------------------------------------------------------------------


def _require_controller(root: str) -> CpuController:
    controller = cgroups.detect_cpu_controller()
    ok, reason = cgroups.can_run_lab(root, controller)
    if not ok or controller is None:
        raise LabError(f"the lab cannot run here: {reason}")
    return controller


def _start_workload(
    controller: CpuController, root: str, placement: cgroups.Placement, log_dir: Path
) -> subprocess.Popen[bytes]:
    container = placement.container
    argv = command_line(
        container.workload.kind,
        dict(container.workload.params),
        cgroups.procs_files(controller, root, placement.relpath),
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    log_path = log_dir / f"{placement.pod.namespace}.{placement.pod.name}.{container.name}.log"
    with open(log_path, "wb") as log:
        # A new session: the workload outlives the command that started it and ignores its terminal's Ctrl-C.
        child = subprocess.Popen(
            argv,
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    _CHILDREN[child.pid] = child
    return child


def _wait_joined(controller: CpuController, root: str, started: list[tuple[cgroups.Placement, Any]]) -> None:
    """Wait until every workload leader sits in its container's cgroup; LabError naming the first that died."""
    deadline = time.monotonic() + _START_TIMEOUT_S
    pending = list(started)
    while pending:
        still: list[tuple[cgroups.Placement, Any]] = []
        for placement, child in pending:
            # The leader joins the hierarchies in order (cpu first): present in all means settled.
            dirs = [os.path.dirname(path) for path in cgroups.procs_files(controller, root, placement.relpath)]
            if all(child.pid in cgroups.read_pids(directory) for directory in dirs):
                continue
            if child.poll() is not None:
                raise LabError(
                    f"workload {placement.container.workload.kind!r} of {placement.pod.namespace}/"
                    f"{placement.pod.name}/{placement.container.name} exited with status {child.returncode} "
                    "before joining its cgroup (see its log in the state dir)"
                )
            still.append((placement, child))
        pending = still
        if pending and time.monotonic() > deadline:
            names = ", ".join(f"{p.pod.name}/{p.container.name}" for p, _ in pending)
            raise LabError(f"workloads did not join their cgroups within {_START_TIMEOUT_S:g} s: {names}")
        if pending:
            time.sleep(0.02)


def _container_entry(controller: CpuController, root: str, placement: cgroups.Placement, pid: int) -> dict[str, Any]:
    pod, container = placement.pod, placement.container
    return {
        "namespace": pod.namespace,
        "pod": pod.name,
        "container": container.name,
        "pod_uid": pod.uid,
        "container_id": placement.container_id,
        "request_mcpu": container.request_mcpu,
        "limit_mcpu": container.limit_mcpu,
        "qos_class": pod.qos_class,
        "workload_kind": pod.workload_kind,
        "workload_name": pod.workload_name,
        "workload": container.workload.kind,
        "workload_params": dict(container.workload.params),
        "cgroup_relpath": os.path.join(root, placement.relpath),
        "pod_cgroup_relpath": os.path.join(root, placement.pod_relpath),
        "processes": [{"pid": pid, "start_ticks": process_start_ticks(pid)}],
        "restarts": 0,
    }


def lab_up(
    scenario_path: str | Path | None = None,
    root: str = DEFAULT_ROOT,
    state_dir: str | Path = DEFAULT_STATE_DIR,
    root_shares: int = DEFAULT_ROOT_SHARES,
) -> LabState:
    """Start the scenario (default: scenarios/default.yaml) under ``root``, after cleaning up any earlier run.

    ``root_shares`` weighs the whole lab against the rest of the machine (see the module docstring).

    Raises ScenarioError for a bad scenario (before anything is touched) and LabError when the lab cannot run
    here or a workload fails to start (then everything this call made is removed again).
    """
    cgroups.check_root_name(root)
    scenario = load_scenario(scenario_path)
    scenario_text = Path(scenario.source).read_text(encoding="utf-8")
    controller = _require_controller(root)
    with _locked(state_dir):
        previous, note = _read_state(state_dir)
        cleanup = _cleanup(controller, previous, root, _STOP_GRACE_S)
        if note:
            cleanup = CleanupReport(cleanup.stale_pids, cleanup.removed_cgroups, cleanup.leftover, (note,))
        if cleanup.leftover:
            raise LabError(f"could not clean up an earlier run: {'; '.join(cleanup.leftover)}")
        boot = int(previous.get("boot", 0)) + 1 if previous else 1
        node = node_facts(scenario, controller)
        layout = cgroups.kubelet_layout(scenario, boot, node.allocatable_mcpu or 1000)
        started_at = datetime.now(UTC)
        state: dict[str, Any] = {
            "version": STATE_VERSION,
            "running": True,
            "root": root,
            "boot": boot,
            "started_at": started_at.isoformat(),
            "scenario_path": scenario.source,
            "scenario_text": scenario_text,
            "controller": asdict(controller),
            "containers": [],
        }
        _write_state(state_dir, state)  # before any process starts: a crash from here on is still cleaned up
        log_dir = Path(state_dir) / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        try:
            cgroups.ensure_root(controller, root)
            cgroups.set_root_shares(controller, root, root_shares)
            cgroups.create_layout(controller, root, layout)
            started = [(p, _start_workload(controller, root, p, log_dir)) for p in layout.placements]
            _wait_joined(controller, root, started)
        except (CgroupError, OSError, LabError) as exc:
            report = _clean_root(controller, root, grace_s=0)
            _reap_children(list(_CHILDREN))
            state["running"] = False
            _write_state(state_dir, state)
            left = f" (left behind: {'; '.join(report.leftover)})" if report.leftover else ""
            if isinstance(exc, LabError):
                raise LabError(f"{exc}; the lab was stopped again{left}") from exc
            raise LabError(f"could not start the lab: {exc}; the lab was stopped again{left}") from exc
        state["containers"] = [_container_entry(controller, root, p, child.pid) for p, child in started]
        _write_state(state_dir, state)
        return LabState(
            root=root,
            state_file=str(_state_path(state_dir)),
            scenario_path=scenario.source,
            boot=boot,
            started_at=started_at,
            inventory=_inventory(state, controller, scenario),
            cleanup=cleanup,
        )


def lab_down(state_dir: str | Path = DEFAULT_STATE_DIR, root: str | None = None) -> LabDownReport:
    """Stop every workload and remove every cgroup of the lab recorded in ``state_dir`` (or under ``root``).

    Idempotent: with nothing running it reports ``was_running=False`` and removes nothing. Never touches anything
    outside the lab root. Cgroups that could not be removed are listed in ``leftover``.
    """
    with _locked(state_dir):
        state, note = _read_state(state_dir)
        lab_root = root or (state or {}).get("root") or DEFAULT_ROOT
        cgroups.check_root_name(lab_root)
        controller = cgroups.detect_cpu_controller()
        if controller is None:
            raise LabError("no cgroup cpu controller found: nothing the lab made can exist here")
        was_running = bool(state and state.get("running")) or bool(cgroups.children(controller, lab_root))
        cleanup = _cleanup(controller, state, lab_root, _STOP_GRACE_S)
        if state is not None:
            state = dict(state, running=False, containers=[])
            _write_state(state_dir, state)
        return LabDownReport(
            was_running=was_running,
            root=lab_root,
            stopped_pids=cleanup.stale_pids,
            removed_cgroups=cleanup.removed_cgroups,
            leftover=cleanup.leftover,
            notes=(note,) if note else (),
        )


def _inventory(state: Mapping[str, Any], controller: CpuController, scenario: Scenario) -> LabInventory:
    containers = []
    for c in state["containers"]:
        relpath, pod_relpath = c["cgroup_relpath"], c["pod_cgroup_relpath"]
        containers.append(
            LabContainer(
                namespace=c["namespace"],
                pod=c["pod"],
                container=c["container"],
                pod_uid=c["pod_uid"],
                container_id=c["container_id"],
                request_mcpu=c["request_mcpu"],
                limit_mcpu=c["limit_mcpu"],
                qos_class=c["qos_class"],
                workload_kind=c["workload_kind"],
                workload_name=c["workload_name"],
                workload=c["workload"],
                workload_params=dict(c["workload_params"]),
                cgroup_relpath=relpath,
                cpu_dir=controller.cpu_dir(relpath),
                usage_dir=controller.usage_dir(relpath),
                pod_cgroup_relpath=pod_relpath,
                pod_cpu_dir=controller.cpu_dir(pod_relpath),
                pod_usage_dir=controller.usage_dir(pod_relpath),
                pids=tuple(int(p["pid"]) for p in c["processes"]),
                restarts=int(c.get("restarts", 0)),  # absent from a state file written before `lab set`
            )
        )
    return LabInventory(
        node=node_facts(scenario, controller),
        cgroup_version=controller.version,
        cpu_mount=controller.cpu_mount,
        cpuacct_mount=controller.cpuacct_mount,
        root=state["root"],
        period_us=scenario.period_us,
        containers=tuple(containers),
    )


def _running_state(state_dir: str | Path) -> tuple[dict[str, Any], CpuController, Scenario]:
    state, note = _read_state(state_dir)
    if state is None or not state.get("running"):
        raise LabError(f"the lab is not up (state dir {state_dir}){': ' + note if note else ''}")
    controller = CpuController(**state["controller"])
    try:
        scenario = parse_scenario(state["scenario_text"], source=state["scenario_path"])
    except ScenarioError as exc:  # the state holds the text that was valid at start: only a hand edit gets here
        raise LabError(f"the lab's state file is damaged: {exc}") from None
    return state, controller, scenario


def lab_inventory(state_dir: str | Path = DEFAULT_STATE_DIR) -> LabInventory:
    """What a collector needs from the running lab: node facts and, per container, identity and cgroup paths.

    Raises LabError when the lab is not up. Reads the state file only; counters are for the caller to read.
    """
    state, controller, scenario = _running_state(state_dir)
    return _inventory(state, controller, scenario)


def lab_status(state_dir: str | Path = DEFAULT_STATE_DIR) -> LabStatus:
    """Whether the lab is up, and per container: leader alive, processes in its cgroup, counters so far.

    Never raises for a lab that is down: it reports ``running=False``. ``problems`` names dead workloads and
    missing cgroups.
    """
    state, note = _read_state(state_dir)
    if state is None or not state.get("running"):
        return LabStatus(
            running=False,
            root=(state or {}).get("root", ""),
            boot=int((state or {}).get("boot", 0)),
            started_at=None,
            scenario_path=(state or {}).get("scenario_path", ""),
            problems=(note,) if note else (),
        )
    inventory = lab_inventory(state_dir)
    controller = CpuController(inventory.cgroup_version, inventory.cpu_mount, inventory.cpuacct_mount)
    statuses: list[ContainerStatus] = []
    problems: list[str] = []
    entries = {(c["namespace"], c["pod"], c["container"]): c for c in state["containers"]}
    for c in inventory.containers:
        name = f"{c.namespace}/{c.pod}/{c.container}"
        entry = entries[(c.namespace, c.pod, c.container)]
        # No process recorded: a restart by `lab set` whose new workload did not start.
        alive = bool(entry["processes"]) and all(
            _is_our_workload(p["pid"], p.get("start_ticks")) for p in entry["processes"]
        )
        if not alive:
            problems.append(f"{name}: workload {c.workload!r} is not running")
        stat: dict[str, int] = {}
        usage_s: float | None = None
        try:
            stat = cgroups.read_cpu_stat(c.cpu_dir)
            usage_s = cgroups.read_usage_ns(controller, c.cgroup_relpath) / 1e9
        except (OSError, CgroupError, KeyError) as exc:
            problems.append(f"{name}: cannot read its cgroup {c.cpu_dir}: {exc}")
        throttled = stat.get("throttled_time")
        throttled_s = throttled / 1e9 if throttled is not None else None
        if throttled_s is None and "throttled_usec" in stat:
            throttled_s = stat["throttled_usec"] / 1e6
        statuses.append(
            ContainerStatus(
                namespace=c.namespace,
                pod=c.pod,
                container=c.container,
                leader_alive=alive,
                tasks=len(cgroups.read_pids(c.cpu_dir)),
                expected_tasks=task_count(c.workload, c.workload_params),
                nr_periods=stat.get("nr_periods"),
                nr_throttled=stat.get("nr_throttled"),
                throttled_seconds=throttled_s,
                usage_seconds=usage_s,
                request_mcpu=c.request_mcpu,
                limit_mcpu=c.limit_mcpu,
                qos_class=c.qos_class,
                restarts=c.restarts,
            )
        )
    return LabStatus(
        running=True,
        root=inventory.root,
        boot=int(state["boot"]),
        started_at=datetime.fromisoformat(state["started_at"]),
        scenario_path=state["scenario_path"],
        containers=tuple(statuses),
        problems=tuple(problems),
    )
