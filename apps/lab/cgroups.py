"""Real cgroups laid out like a kubelet's (cgroupfs driver), under a dedicated root in the cpu controller. No Django.

The lab writes only below ``<mount>/<root>`` (default root ``cputune-lab``) in the cpu hierarchy and, when cpuacct
is a separate cgroup v1 hierarchy, in the same relative paths there (for ``cpuacct.usage``). The one write outside
the root is cgroup v2 only: enabling the ``cpu`` controller in ``cgroup.subtree_control`` of the root's ancestors
when it is not already enabled (a child cgroup cannot get ``cpu.max`` otherwise).

Layout, mirroring pkg/kubelet/cm (cgroupfs driver; container directories named by runtime container id)::

    <root>/kubepods                          shares = allocatable (node allocatable), no quota
    <root>/kubepods/burstable                shares = MilliCPUToShares(Σ requests of Burstable pods)
    <root>/kubepods/besteffort               shares = 2
    <root>/kubepods/pod<uid>                 a Guaranteed pod
    <root>/kubepods/burstable/pod<uid>       a Burstable pod; <root>/kubepods/besteffort/pod<uid> a BestEffort one
    …/pod<uid>/<container id>                a container: shares from its request, quota from its limit

Pod cgroups (ResourceConfigForPod): shares from the sum of the containers' requests; a quota of the sum of limits for
Guaranteed pods and for Burstable pods whose every container has a limit; BestEffort pods get 2 shares.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import signal
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from apps.clusters.kubelet import (
    MAX_SHARES,
    MIN_SHARES,
    quota_us_from_limit_mcpu,
    shares_from_request_mcpu,
    weight_from_shares,
)
from apps.lab.scenario import QOS_BEST_EFFORT, QOS_BURSTABLE, QOS_GUARANTEED, Container, Pod, Scenario, container_id

DEFAULT_ROOT = "cputune-lab"
KUBEPODS = "kubepods"
# Kernel probe cgroups under the root are named probe-<pid>-…: the lab's cleanup leaves them alone while that pid lives.
PROBE_PREFIX = "probe-"

_ROOT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
_PROC_MOUNTS = "/proc/mounts"


class CgroupError(Exception):
    """A cgroup could not be created, configured or removed; the message names the path."""


@dataclass(frozen=True, slots=True)
class CpuController:
    """Where the cpu controller lives on this machine.

    ``cpu_mount`` holds the cpu.* files (a v1 hierarchy with the ``cpu`` option, or the v2 unified mount).
    ``cpuacct_mount`` (v1 only) holds cpuacct.usage: the same path as ``cpu_mount`` when they are co-mounted
    (``cpu,cpuacct``), another hierarchy when mounted separately, None when cpuacct is not mounted or on v2
    (v2 reports usage in cpu.stat).
    """

    version: int  # 1 or 2
    cpu_mount: str
    cpuacct_mount: str | None = None

    @property
    def hierarchies(self) -> tuple[str, ...]:
        """Mounts in which the lab mirrors its tree: the cpu one, plus a separate cpuacct one."""
        if self.cpuacct_mount and self.cpuacct_mount != self.cpu_mount:
            return (self.cpu_mount, self.cpuacct_mount)
        return (self.cpu_mount,)

    def cpu_dir(self, relpath: str) -> str:
        """Absolute directory holding cpu.stat / cpu.cfs_quota_us (or cpu.max) for a path relative to the mount."""
        return os.path.join(self.cpu_mount, relpath)

    def usage_dir(self, relpath: str) -> str | None:
        """Absolute directory holding the usage counter (cpuacct.usage on v1, cpu.stat on v2); None if unavailable."""
        if self.version == 2:
            return self.cpu_dir(relpath)
        return os.path.join(self.cpuacct_mount, relpath) if self.cpuacct_mount else None


@dataclass(frozen=True, slots=True)
class CgroupSettings:
    """What one cgroup of the layout gets. ``relpath`` is relative to the lab root; quota None means unlimited."""

    relpath: str
    shares: int
    quota_us: int | None
    period_us: int


@dataclass(frozen=True, slots=True)
class Placement:
    """Where one scenario container lives: its runtime id and the relative paths of its pod and container cgroups."""

    pod: Pod
    container: Container
    container_id: str
    pod_relpath: str  # relative to the lab root
    relpath: str  # relative to the lab root


@dataclass(frozen=True, slots=True)
class KubeletLayout:
    cgroups: tuple[CgroupSettings, ...]  # parents before children
    placements: tuple[Placement, ...]


@dataclass(frozen=True, slots=True)
class RemovalReport:
    """What remove_tree did: pids it signalled, cgroup directories it removed, and any it could not."""

    killed_pids: tuple[int, ...] = ()
    removed: tuple[str, ...] = ()
    leftover: tuple[str, ...] = ()

    def merged(self, other: RemovalReport) -> RemovalReport:
        return RemovalReport(
            tuple(sorted(set(self.killed_pids) | set(other.killed_pids))),
            self.removed + other.removed,
            self.leftover + other.leftover,
        )


# --- detection -------------------------------------------------------------------------------------------------


def _unescape_mount_field(field: str) -> str:
    # /proc/mounts escapes space, tab, newline and backslash as octal (\040 …).
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def detect_cpu_controller(mounts_text: str | None = None) -> CpuController | None:
    """Find the cpu controller from /proc/mounts (or the text given): v1 if a v1 hierarchy has it, else v2.

    Returns None when no v1 mount carries the ``cpu`` option and no cgroup2 mount lists ``cpu`` in its
    cgroup.controllers (a controller is bound to one hierarchy at a time, so at most one of the two applies).
    """
    if mounts_text is None:
        try:
            mounts_text = Path(_PROC_MOUNTS).read_text()
        except OSError:
            return None
    cpu_v1: str | None = None
    cpuacct_v1: str | None = None
    unified: list[str] = []
    for line in mounts_text.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        mount_point, fstype, options = _unescape_mount_field(fields[1]), fields[2], set(fields[3].split(","))
        if fstype == "cgroup":
            if "cpu" in options and cpu_v1 is None:
                cpu_v1 = mount_point
            if "cpuacct" in options and cpuacct_v1 is None:
                cpuacct_v1 = mount_point
        elif fstype == "cgroup2":
            unified.append(mount_point)
    if cpu_v1 is not None:
        return CpuController(1, cpu_v1, cpuacct_v1)
    for mount_point in unified:
        try:
            controllers = Path(mount_point, "cgroup.controllers").read_text().split()
        except OSError:
            continue
        if "cpu" in controllers:
            return CpuController(2, mount_point, None)
    return None


def can_run_lab(root: str = DEFAULT_ROOT, controller: CpuController | None = None) -> tuple[bool, str]:
    """Whether the lab can run here: (True, what it will use) or (False, why not).

    Reasons: not root; no cpu controller mounted; the controller not writable (tried by creating a throwaway
    cgroup under the root and setting a quota on it, then removing it).
    """
    euid = os.geteuid()
    if euid != 0:
        return False, f"not root (euid {euid}): the lab creates cgroups and moves processes into them"
    controller = controller or detect_cpu_controller()
    if controller is None:
        return False, (
            "no cgroup cpu controller found: no cgroup v1 mount with the 'cpu' option "
            "and no cgroup2 mount listing 'cpu' in cgroup.controllers"
        )
    try:
        check_root_name(root)
    except CgroupError as exc:
        return False, str(exc)
    root_dir = controller.cpu_dir(root)
    created_root = not os.path.isdir(root_dir)
    check_rel = f"lab-check-{os.getpid()}"
    check_dir = os.path.join(root_dir, check_rel)
    try:
        ensure_root(controller, root)
        _mkdir_cgroup(controller, root, check_rel)
        write_settings(controller, check_dir, CgroupSettings(check_rel, 1024, 50_000, 100_000))
    except (OSError, CgroupError) as exc:
        return False, f"cpu controller not writable at {controller.cpu_mount}: {exc}"
    finally:
        for mount in reversed(controller.hierarchies):
            with contextlib.suppress(OSError):
                os.rmdir(os.path.join(mount, root, check_rel))
            if created_root:
                with contextlib.suppress(OSError):
                    os.rmdir(os.path.join(mount, root))
    usage = f", usage from cpuacct at {controller.cpuacct_mount}" if controller.version == 1 else ""
    return True, f"cgroup v{controller.version} cpu controller at {controller.cpu_mount}{usage}"


def check_root_name(root: str) -> str:
    """The lab root must be one plain directory name, so nothing it removes can lie outside it."""
    if not _ROOT_NAME.match(root) or root in (".", ".."):
        raise CgroupError(f"lab root {root!r} must be a single directory name of letters, digits, '.', '_' or '-'")
    return root


# --- the kubelet's layout ---------------------------------------------------------------------------------------


def pod_relpath(pod: Pod) -> str:
    """The pod cgroup relative to the lab root: kubepods/pod<uid> (Guaranteed) or kubepods/<qos>/pod<uid>."""
    qos = pod.qos_class
    if qos == QOS_GUARANTEED:
        return f"{KUBEPODS}/pod{pod.uid}"
    return f"{KUBEPODS}/{qos.lower()}/pod{pod.uid}"


def qos_settings(pods: Iterable[Pod], allocatable_mcpu: int, period_us: int) -> tuple[CgroupSettings, ...]:
    """kubepods and its burstable and besteffort levels, as the kubelet's QoS manager writes them for ``pods``."""
    burstable_request_mcpu = sum(p.request_mcpu for p in pods if p.qos_class == QOS_BURSTABLE)
    return (
        CgroupSettings(KUBEPODS, shares_from_request_mcpu(allocatable_mcpu), None, period_us),
        CgroupSettings(f"{KUBEPODS}/burstable", shares_from_request_mcpu(burstable_request_mcpu), None, period_us),
        CgroupSettings(f"{KUBEPODS}/besteffort", MIN_SHARES, None, period_us),
    )


def pod_settings(pod: Pod, period_us: int) -> CgroupSettings:
    """The pod cgroup as the kubelet configures it (ResourceConfigForPod): see the module docstring."""
    pod_quota_us = None
    if pod.qos_class in (QOS_GUARANTEED, QOS_BURSTABLE):
        # limit_mcpu is None unless every container has a limit: then the kubelet sets no pod quota.
        pod_quota_us = quota_us_from_limit_mcpu(pod.limit_mcpu, period_us)
    pod_shares = shares_from_request_mcpu(pod.request_mcpu) if pod.qos_class != QOS_BEST_EFFORT else MIN_SHARES
    return CgroupSettings(pod_relpath(pod), pod_shares, pod_quota_us, period_us)


def container_settings(pod: Pod, container: Container, cid: str, period_us: int) -> CgroupSettings:
    """A container cgroup (named by its runtime id under its pod's): shares from its request, quota from its limit."""
    return CgroupSettings(
        f"{pod_relpath(pod)}/{cid}",
        shares_from_request_mcpu(container.request_mcpu),
        quota_us_from_limit_mcpu(container.limit_mcpu, period_us),
        period_us,
    )


def kubelet_layout(scenario: Scenario, boot: int, allocatable_mcpu: int) -> KubeletLayout:
    """Every cgroup a kubelet would make for the scenario's pods, parents first, with the values it would write.

    ``boot`` (lab starts so far, ≥ 1) goes into the container ids; ``allocatable_mcpu`` sets kubepods' shares.
    """
    period_us = scenario.period_us
    cgroups = list(qos_settings(scenario.pods, allocatable_mcpu, period_us))
    placements: list[Placement] = []
    for pod in scenario.pods:
        pod_cgroup = pod_settings(pod, period_us)
        cgroups.append(pod_cgroup)
        for container in pod.containers:
            cid = container_id(pod.uid, container.name, boot)
            settings = container_settings(pod, container, cid, period_us)
            cgroups.append(settings)
            placements.append(Placement(pod, container, cid, pod_cgroup.relpath, settings.relpath))
    return KubeletLayout(tuple(cgroups), tuple(placements))


# --- writing ---------------------------------------------------------------------------------------------------


def _write(path: str, value: str) -> None:
    try:
        with open(path, "w") as handle:
            handle.write(value)
    except OSError as exc:
        raise CgroupError(f"cannot write {value!r} to {path}: {exc.strerror or exc}") from None


def write_settings(controller: CpuController, cpu_dir: str, settings: CgroupSettings) -> None:
    """Write shares/quota/period into an existing cgroup directory of the cpu hierarchy (v1 or v2 files)."""
    if controller.version == 1:
        _write(os.path.join(cpu_dir, "cpu.shares"), str(settings.shares))
        _write(os.path.join(cpu_dir, "cpu.cfs_period_us"), str(settings.period_us))
        quota = -1 if settings.quota_us is None else settings.quota_us
        _write(os.path.join(cpu_dir, "cpu.cfs_quota_us"), str(quota))
    else:
        _write(os.path.join(cpu_dir, "cpu.weight"), str(weight_from_shares(settings.shares)))
        quota_text = "max" if settings.quota_us is None else str(settings.quota_us)
        _write(os.path.join(cpu_dir, "cpu.max"), f"{quota_text} {settings.period_us}")


def _enable_cpu_v2(cgroup_dir: str) -> None:
    """cgroup v2: let the children of ``cgroup_dir`` have the cpu controller (no-op when already enabled)."""
    control = os.path.join(cgroup_dir, "cgroup.subtree_control")
    try:
        enabled = Path(control).read_text().split()
    except OSError as exc:
        raise CgroupError(f"cannot read {control}: {exc.strerror or exc}") from None
    if "cpu" not in enabled:
        _write(control, "+cpu")


def ensure_root(controller: CpuController, root: str) -> None:
    """Create ``<mount>/<root>`` in each hierarchy if missing (v2: with the cpu controller enabled down to it)."""
    check_root_name(root)
    if controller.version == 2:
        _enable_cpu_v2(controller.cpu_mount)
    for mount in controller.hierarchies:
        try:
            os.makedirs(os.path.join(mount, root), exist_ok=True)
        except OSError as exc:
            raise CgroupError(f"cannot create {os.path.join(mount, root)}: {exc.strerror or exc}") from None


def set_root_shares(controller: CpuController, root: str, shares: int) -> None:
    """Weigh the lab root against the rest of the machine (v1 cpu.shares, v2 the equivalent cpu.weight)."""
    root_dir = controller.cpu_dir(check_root_name(root))
    if controller.version == 1:
        _write(os.path.join(root_dir, "cpu.shares"), str(max(MIN_SHARES, min(MAX_SHARES, shares))))
    else:
        _write(os.path.join(root_dir, "cpu.weight"), str(weight_from_shares(shares)))


def _mkdir_cgroup(controller: CpuController, root: str, relpath: str) -> None:
    parent_rel = os.path.dirname(relpath)
    if controller.version == 2:
        _enable_cpu_v2(os.path.join(controller.cpu_mount, root, parent_rel))
    for mount in controller.hierarchies:
        path = os.path.join(mount, root, relpath)
        try:
            os.mkdir(path)
        except FileExistsError:
            pass
        except OSError as exc:
            raise CgroupError(f"cannot create {path}: {exc.strerror or exc}") from None


def create_cgroup(controller: CpuController, root: str, settings: CgroupSettings) -> str:
    """Create one cgroup (parent must exist) in every hierarchy and configure it; returns its cpu directory."""
    _mkdir_cgroup(controller, root, settings.relpath)
    cpu_dir = controller.cpu_dir(os.path.join(root, settings.relpath))
    write_settings(controller, cpu_dir, settings)
    return cpu_dir


def create_layout(controller: CpuController, root: str, layout: KubeletLayout) -> None:
    """Create the root and every cgroup of ``layout``, parents first."""
    ensure_root(controller, root)
    for settings in layout.cgroups:
        create_cgroup(controller, root, settings)


def procs_files(controller: CpuController, root: str, relpath: str) -> list[str]:
    """The ``cgroup.procs`` files a workload writes itself into: the cpu one first, then a separate cpuacct one."""
    return [os.path.join(mount, root, relpath, "cgroup.procs") for mount in controller.hierarchies]


# --- reading ---------------------------------------------------------------------------------------------------


def read_pids(cgroup_dir: str) -> list[int]:
    """Process ids in one cgroup (not its children); [] when the directory is gone."""
    try:
        text = Path(cgroup_dir, "cgroup.procs").read_text()
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        if exc.errno == errno.ENODEV:  # the cgroup is being removed
            return []
        raise
    return [int(line) for line in text.split()]


def read_cpu_stat(cpu_dir: str) -> dict[str, int]:
    """cpu.stat as a dict (v1: nr_periods, nr_throttled, throttled_time ns, …; v2: usage_usec, throttled_usec, …).

    Unknown keys are kept; a value that is not an integer raises CgroupError naming the file and the line.
    """
    path = Path(cpu_dir, "cpu.stat")
    stat: dict[str, int] = {}
    for line in path.read_text().splitlines():
        key, _, value = line.strip().partition(" ")
        if not key:
            continue
        try:
            stat[key] = int(value)
        except ValueError:
            raise CgroupError(f"{path}: line {line!r} is not '<key> <integer>'") from None
    return stat


def read_usage_ns(controller: CpuController, relpath: str) -> int:
    """CPU time used by a cgroup and its children in ns (v1 cpuacct.usage, v2 cpu.stat usage_usec × 1000).

    ``relpath`` is relative to the mount. Raises CgroupError when this machine has no usage counter.
    """
    usage_dir = controller.usage_dir(relpath)
    if usage_dir is None:
        raise CgroupError("no cpuacct hierarchy is mounted: CPU usage cannot be read")
    if controller.version == 2:
        return read_cpu_stat(usage_dir)["usage_usec"] * 1000
    return int(Path(usage_dir, "cpuacct.usage").read_text())


# --- removal ---------------------------------------------------------------------------------------------------


def _tree_dirs(top: str) -> list[str]:
    """Every cgroup directory under ``top`` (included), children before parents; [] when ``top`` is missing."""
    if not os.path.isdir(top):
        return []
    found: list[str] = []
    for dirpath, _dirnames, _files in os.walk(top, topdown=False, followlinks=False):
        found.append(dirpath)
    return found


def _inside(path: str, root_dir: str) -> bool:
    real, real_root = os.path.realpath(path), os.path.realpath(root_dir)
    return real == real_root or real.startswith(real_root + os.sep)


def tree_pids(controller: CpuController, root: str, relpath: str = "") -> list[int]:
    """Every process in the lab root's subtree at ``relpath`` ("" = the whole root), across all hierarchies."""
    pids: set[int] = set()
    for mount in controller.hierarchies:
        for directory in _tree_dirs(os.path.join(mount, root, relpath)):
            pids.update(read_pids(directory))
    return sorted(pids)


def _signal_all(pids: Iterable[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


def reap(pids: Iterable[int]) -> None:
    """Collect exit statuses of any of ``pids`` that are our own finished children (so no zombie stays)."""
    for pid in pids:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


def stop_tasks(
    controller: CpuController, root: str, relpath: str = "", grace_s: float = 2.0, timeout_s: float = 10.0
) -> tuple[int, ...]:
    """Stop every process in the subtree: SIGTERM, then SIGKILL after ``grace_s``; returns every pid signalled.

    Keeps killing until the subtree has no process left (a process may fork while it is being killed) or
    ``timeout_s`` passes; the caller then finds the leftover cgroups busy.
    """
    check_root_name(root)
    signalled: set[int] = set()
    started = time.monotonic()
    pids = tree_pids(controller, root, relpath)
    if pids and grace_s > 0:
        _signal_all(pids, signal.SIGTERM)
        signalled.update(pids)
        while time.monotonic() - started < grace_s:
            reap(signalled)
            pids = tree_pids(controller, root, relpath)
            if not pids:
                break
            time.sleep(0.02)
    while pids and time.monotonic() - started < timeout_s:
        _signal_all(pids, signal.SIGKILL)
        signalled.update(pids)
        time.sleep(0.01)
        reap(signalled)
        pids = tree_pids(controller, root, relpath)
    reap(signalled)
    return tuple(sorted(signalled))


def remove_tree(
    controller: CpuController, root: str, relpath: str = "", grace_s: float = 0.0, timeout_s: float = 10.0
) -> RemovalReport:
    """Stop every process in ``<root>/<relpath>`` and remove its cgroups leaf-first, in every hierarchy.

    ``relpath`` "" removes the root itself. Idempotent: a missing tree gives an empty report. Refuses (CgroupError)
    any path that resolves outside ``<mount>/<root>``. Directories still busy after ``timeout_s`` are reported
    as leftover, not raised.
    """
    check_root_name(root)
    for mount in controller.hierarchies:
        if not _inside(os.path.join(mount, root, relpath), os.path.join(mount, root)):
            raise CgroupError(f"refusing to remove {os.path.join(mount, root, relpath)}: it is outside the lab root")
    killed = stop_tasks(controller, root, relpath, grace_s=grace_s, timeout_s=timeout_s)
    removed: list[str] = []
    leftover: list[str] = []
    deadline = time.monotonic() + timeout_s
    for mount in controller.hierarchies:
        for directory in _tree_dirs(os.path.join(mount, root, relpath)):
            while True:
                try:
                    os.rmdir(directory)
                    removed.append(directory)
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    # EBUSY: a task is still exiting (or was just forked into it): kill again and retry.
                    if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                        leftover.append(f"{directory}: {exc.strerror or exc}")
                        break
                    _signal_all(read_pids(directory), signal.SIGKILL)
                    time.sleep(0.01)
    return RemovalReport(killed, tuple(removed), tuple(leftover))


def children(controller: CpuController, root: str) -> list[str]:
    """Names of the cgroups directly under the lab root in any hierarchy, sorted; [] when the root is missing."""
    check_root_name(root)
    names: set[str] = set()
    for mount in controller.hierarchies:
        with contextlib.suppress(FileNotFoundError):
            names.update(e.name for e in os.scandir(os.path.join(mount, root)) if e.is_dir(follow_symlinks=False))
    return sorted(names)


def remove_root_if_empty(controller: CpuController, root: str) -> bool:
    """Remove ``<mount>/<root>`` from every hierarchy when it has no child cgroups left; True when it is gone."""
    check_root_name(root)
    gone = True
    for mount in reversed(controller.hierarchies):
        try:
            os.rmdir(os.path.join(mount, root))
        except FileNotFoundError:
            pass
        except OSError:
            gone = False
    return gone


@contextlib.contextmanager
def temporary_cgroup(
    controller: CpuController, root: str, name: str, quota_us: int | None, period_us: int, shares: int = 1024
) -> Iterator[str]:
    """A throwaway cgroup ``<root>/<name>`` with the given quota; yields its cpu directory, removes it (and its
    processes, and the root if it was created here and is empty) on the way out."""
    check_root_name(root)
    if "/" in name or name in ("", ".", ".."):
        raise CgroupError(f"temporary cgroup name {name!r} must be a single directory name")
    root_existed = os.path.isdir(controller.cpu_dir(root))
    ensure_root(controller, root)
    try:
        yield create_cgroup(controller, root, CgroupSettings(name, shares, quota_us, period_us))
    finally:
        report = remove_tree(controller, root, name)
        if not root_existed and not children(controller, root):
            remove_root_if_empty(controller, root)
        if report.leftover:
            raise CgroupError(f"could not remove temporary cgroup {name}: {'; '.join(report.leftover)}")
