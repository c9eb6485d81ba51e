"""cputune node agent: read the CPU cgroup counters of every Kubernetes container on this node and push them.

One file past 600 lines on purpose: it ships alone, the DaemonSet image (Dockerfile.agent) copies it and nothing else.

Standard library only (Python >= 3.11), no project imports. It runs as ``python cputune_agent.py`` (in the image,
``/agent/agent.py``) or ``python -m agent.cputune_agent``; ``python manage.py agent`` imports it and calls `run`, and
the lab source reads its cgroups with `collect`.

    python cputune_agent.py --server https://cputune.example --token TOKEN [--cgroup-root /sys/fs/cgroup]
                            [--interval 15] [--once] [--node NAME] [--period-sample-seconds 5]
                            [--period-sample-above 0.05] [--period-sample-max 16]

Without ``--cgroup-root`` the cpu controller is found from /proc/self/mountinfo. With it, the directory may hold a
cgroup v2 tree (``cgroup.controllers`` lists ``cpu``) or v1 mounts ``cpu,cpuacct``, ``cpuacct,cpu`` or separate
``cpu`` and ``cpuacct`` (in a DaemonSet, mount the host's /sys/fs/cgroup and point ``--cgroup-root`` at it).

Every ``--interval`` seconds the agent POSTs one JSON document to ``<server>/api/v1/ingest/`` with the header
``Authorization: Token <token>``:

    {
      "agent_version": "1",
      "node": {
        "name": str,                    # --node, else $NODE_NAME, else the hostname
        "kernel_version": str,          # uname -r
        "capacity_mcpu": int | null,    # CPUs in the root cgroup's cpuset (else os.cpu_count()) x 1000
        "cfs_slice_us": int | null,     # /proc/sys/kernel/sched_cfs_bandwidth_slice_us
        "cpufreq_governor": str         # cpu0's scaling_governor, "" when the node has no cpufreq
      },
      "cgroup_version": 1 | 2,
      "collected_at": str,              # ISO-8601 UTC, e.g. "2025-05-01T12:00:00.123+00:00"
      "containers": [
        {
          "pod_uid": str,               # with dashes, as in the pod's metadata.uid
          "container_id": str,          # runtime id without prefix; "" for the pod-level cgroup
          "qos_class": str,             # "Guaranteed" | "Burstable" | "BestEffort" ("" if the path does not say)
          "periods_total": int | null,              # nr_periods
          "throttled_periods_total": int | null,    # nr_throttled
          "throttled_seconds_total": float | null,  # throttled_time (ns) / throttled_usec (us), summed over threads
          "usage_seconds_total": float | null,      # cpuacct.usage (ns) / usage_usec (us)
          "threads": int | null,        # v2 pids.current, else lines of `tasks` (v1) / cgroup.threads (v2) in the subtree
          "quota_us": int | null,       # cpu.cfs_quota_us / cpu.max; null when there is no quota (-1 / "max")
          "period_us": int | null,      # cpu.cfs_period_us / cpu.max
          "shares": int | null,         # v1 cpu.shares (null on v2)
          "weight": int | null,         # v2 cpu.weight (null on v1)
          "burst_us": int | null,       # cpu.cfs_burst_us (v1) / cpu.max.burst (v2), kernel >= 5.14; 0 = no burst
          "bursts_total": int | null,               # nr_bursts (kernel >= 5.16)
          "burst_seconds_total": float | null,      # burst_time (ns) / burst_usec (us)
          "psi_some_total_seconds": float | null,   # v2 cpu.pressure "some ... total=" (us) / 1e6
          "psi_full_total_seconds": float | null,   # v2 cpu.pressure "full ... total=" (us) / 1e6
          "period_sample": {            # only for a container sampled this cycle (see below)
            "seconds": float,           # how long its cpu.stat was polled, right after collected_at
            "periods": int,             # periods counted meanwhile (nr_periods rose by this much)
            "throttled_us": [int]       # throttled time of each period that had some, us; the other periods had none
          }
        }
      ],
      "errors": [str],                  # one line per cgroup that could not be read; the others are still sent
      "sampler_cpu_seconds": float      # only when containers were sampled: CPU the agent spent polling them
    }

Counters are cumulative, exactly as the kernel reports them (deltas and resets are the server's job); null means the
cgroup does not report the value, never zero. A container's ``container_id`` can also be a pod sandbox (pause)
container: the cgroup does not say which is which, the server matches ids against the pod's container statuses.

Period sampling (`sample_periods`): after each collection, the containers throttled in more than
``--period-sample-above`` of their periods since the previous collection (at most ``--period-sample-max``, most
throttled first; none on the first collection or with ``--once``) have their cpu.stat polled every 4 ms for
``--period-sample-seconds`` (0: off; at most 30 and less than the interval), so the server gets one throttled-time
figure per CFS period rather than the window's totals. `collect` alone never samples.
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import re
import signal
import socket
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from types import FrameType
from typing import Any, NotRequired, TypedDict, TypeVar

AGENT_VERSION = "1"
INGEST_PATH = "/api/v1/ingest/"

# Mirrors apps/telemetry/counters.py (MAX_SANE, check_counter), which this file cannot import because it ships alone:
# a cumulative counter above 2**53 cannot be real (2**53 ns of throttled time is 104 days of every thread waiting) and
# is an overflowed or corrupt value such as 2**64 - 1. tests/agent/test_cputune_agent.py checks that both rules agree.
MAX_SANE_COUNTER = 2**53

NS_PER_SECOND = 1_000_000_000
US_PER_SECOND = 1_000_000

log = logging.getLogger("cputune.agent")


class CgroupFormatError(ValueError):
    """A cgroup file whose content is not what the kernel writes; the message names the file and the bad line."""


class CgroupSetupError(RuntimeError):
    """No usable cpu controller where the agent was told (or expected) to find one."""


class NodeFacts(TypedDict):
    name: str
    kernel_version: str
    capacity_mcpu: int | None
    cfs_slice_us: int | None
    cpufreq_governor: str


class PeriodSampleSummary(TypedDict):
    seconds: float
    periods: int
    throttled_us: list[int]


class ContainerSample(TypedDict):
    pod_uid: str
    container_id: str
    qos_class: str
    periods_total: int | None
    throttled_periods_total: int | None
    throttled_seconds_total: float | None
    usage_seconds_total: float | None
    threads: int | None
    quota_us: int | None
    period_us: int | None
    shares: int | None
    weight: int | None
    burst_us: int | None
    bursts_total: int | None
    burst_seconds_total: float | None
    psi_some_total_seconds: float | None
    psi_full_total_seconds: float | None
    period_sample: NotRequired[PeriodSampleSummary]


class Payload(TypedDict):
    agent_version: str
    node: NodeFacts
    cgroup_version: int
    collected_at: str
    containers: list[ContainerSample]
    errors: list[str]
    sampler_cpu_seconds: NotRequired[float]


# ---------------------------------------------------------------------------------------------------------------------
# Pure parsers: one per cgroup file. `source` is only used in error messages (pass the file's path).


def is_sane_counter(value: int) -> bool:
    """True when a cumulative counter value can be real: 0 <= value <= 2**53 (the rule of telemetry.counters)."""
    return 0 <= value <= MAX_SANE_COUNTER


_DIGITS = re.compile(r"[0-9]+")
_INTEGER = re.compile(r"-?[0-9]+")


def _counter(text: str, source: str, line: str) -> int:
    if not _DIGITS.fullmatch(text):
        raise CgroupFormatError(f"{source}: bad line {line!r}: {text!r} is not a non-negative integer")
    value = int(text)
    if not is_sane_counter(value):
        raise CgroupFormatError(f"{source}: bad line {line!r}: {value} is past 2**53, an overflowed or corrupt counter")
    return value


def parse_cpu_stat(text: str, source: str = "cpu.stat") -> dict[str, int]:
    """Parse a flat-keyed counter file (`cpu.stat` v1 or v2, `cpu.stat.local`) into {key: value}.

    Every key is kept, known or not (newer kernels add `nice_usec`, `core_sched.force_idle_usec`, ...); units are the
    kernel's (v1 times in ns, v2 in us). Blank lines are ignored. Raises CgroupFormatError for a line that is not
    "key integer" or a value past 2**53.
    """
    values: dict[str, int] = {}
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if not line:
            continue
        fields = line.split()
        if len(fields) != 2:
            raise CgroupFormatError(f"{source}: bad line {line!r}: expected 'key value'")
        key, value_text = fields
        values[key] = _counter(value_text, source, line)
    return values


def parse_int(text: str, source: str) -> int:
    """Parse a file holding one integer (cpu.shares, cpu.weight, cpu.cfs_period_us, pids.current, ...)."""
    stripped = text.strip()
    if not _INTEGER.fullmatch(stripped):
        raise CgroupFormatError(f"{source}: {stripped!r} is not an integer")
    return int(stripped)


def parse_cpu_usage_ns(text: str, source: str = "cpuacct.usage") -> int:
    """Parse v1 `cpuacct.usage`: the CPU time consumed by the cgroup and its children, in nanoseconds."""
    stripped = text.strip()
    return _counter(stripped, source, stripped)


def parse_cfs_quota_us(text: str, source: str = "cpu.cfs_quota_us") -> int | None:
    """Parse v1 `cpu.cfs_quota_us` in microseconds per period; -1 (no limit) gives None."""
    quota_us = parse_int(text, source)
    if quota_us == -1:
        return None
    if quota_us <= 0:
        raise CgroupFormatError(f"{source}: quota {quota_us} is neither -1 nor a positive number of microseconds")
    return quota_us


def parse_cpu_max(text: str, source: str = "cpu.max") -> tuple[int | None, int]:
    """Parse v2 `cpu.max` ("QUOTA PERIOD" or "max PERIOD", both in us) into (quota_us or None, period_us)."""
    fields = text.split()
    if len(fields) != 2:
        raise CgroupFormatError(f"{source}: {text.strip()!r} is not 'QUOTA PERIOD' or 'max PERIOD'")
    quota_text, period_text = fields
    if not _DIGITS.fullmatch(period_text) or int(period_text) == 0:
        raise CgroupFormatError(f"{source}: period {period_text!r} in {text.strip()!r} is not a positive integer")
    if quota_text == "max":
        return None, int(period_text)
    if not _DIGITS.fullmatch(quota_text) or int(quota_text) == 0:
        raise CgroupFormatError(
            f"{source}: quota {quota_text!r} in {text.strip()!r} is not 'max' or a positive integer"
        )
    return int(quota_text), int(period_text)


@dataclass(frozen=True)
class Pressure:
    """One line of a PSI file: share of wall time stalled (percent, averaged over 10/60/300 s) and the total in us."""

    avg10_pct: float
    avg60_pct: float
    avg300_pct: float
    total_us: int


def parse_pressure(text: str, source: str = "cpu.pressure") -> dict[str, Pressure]:
    """Parse a PSI file (`some avg10=.. avg60=.. avg300=.. total=..` and an optional `full` line) into {kind: Pressure}.

    Unknown keys on a line are ignored; a line missing avg10/avg60/avg300/total, or with a non-numeric value, raises
    CgroupFormatError. Kernels before 5.13 have no `full` line for cpu: the result then has only "some".
    """
    result: dict[str, Pressure] = {}
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if not line:
            continue
        kind, *pairs = line.split()
        values: dict[str, str] = {}
        for pair in pairs:
            key, sep, value = pair.partition("=")
            if not sep:
                raise CgroupFormatError(f"{source}: bad line {line!r}: {pair!r} is not key=value")
            values[key] = value
        missing = [key for key in ("avg10", "avg60", "avg300", "total") if key not in values]
        if missing:
            raise CgroupFormatError(f"{source}: bad line {line!r}: missing {', '.join(missing)}")
        try:
            averages = [float(values[key]) for key in ("avg10", "avg60", "avg300")]
        except ValueError:
            raise CgroupFormatError(f"{source}: bad line {line!r}: an average is not a number") from None
        total_us = _counter(values["total"], source, line)
        result[kind] = Pressure(averages[0], averages[1], averages[2], total_us)
    return result


def parse_cpu_list(text: str, source: str = "cpuset.cpus") -> set[int]:
    """Parse a cpuset list ("0-3,8,10-11") into CPU numbers; an empty file is an empty set."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        first, sep, last = part.partition("-")
        if not _DIGITS.fullmatch(first) or (sep and not _DIGITS.fullmatch(last)):
            raise CgroupFormatError(f"{source}: {part!r} in {text.strip()!r} is not a CPU number or range")
        cpus.update(range(int(first), int(last if sep else first) + 1))
    return cpus


def count_lines(text: str) -> int:
    """Number of non-blank lines (thread ids in `tasks` / `cgroup.threads`)."""
    return sum(1 for line in text.splitlines() if line.strip())


# ---------------------------------------------------------------------------------------------------------------------
# Kubelet cgroup paths.

_UID = r"(?P<uid>[0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}|[0-9a-f]{32})"
_HEX64 = "[0-9a-f]{64}"
# cgroupfs driver: kubepods/[burstable|besteffort/]pod<uid>
_CGROUPFS_POD = re.compile(rf"pod{_UID}")
_CGROUPFS_QOS = {"kubepods": "Guaranteed", "burstable": "Burstable", "besteffort": "BestEffort"}
# systemd driver: kubepods-[burstable-|besteffort-]pod<uid with _ for ->.slice
_SYSTEMD_POD = re.compile(rf"kubepods(?:-(?P<qos>burstable|besteffort))?-pod{_UID}\.slice")
_SYSTEMD_QOS = {None: "Guaranteed", "burstable": "Burstable", "besteffort": "BestEffort"}
# A container: the bare id (cgroupfs driver; cri-o prefixes it with crio-) or a runtime scope (systemd driver).
# cri-o's crio-conmon-<id>.scope holds its monitor process, not the container, and matches neither on purpose.
_CONTAINER = re.compile(rf"(?:crio-)?(?P<bare>{_HEX64})|(?:cri-containerd|crio|docker)-(?P<scoped>{_HEX64})\.scope")
# containerd with systemd_cgroup misconfigured: one component "<pod slice>:cri-containerd:<id>".
_SLICE_AND_CONTAINER = re.compile(rf"(?P<slice>[^:/]+\.slice):(?:cri-containerd|crio|docker):(?P<id>{_HEX64})")


def _components(path: str) -> list[str]:
    # "/../../" appears in paths seen from inside a cgroup namespace: the part above is hidden, not meaningful.
    return [part for part in path.split("/") if part not in ("", ".", "..")]


def _match_pod(components: list[str], index: int) -> tuple[str, str] | None:
    """(pod uid with dashes, qos class) when components[index] is a kubelet pod cgroup."""
    name = components[index]
    systemd = _SYSTEMD_POD.fullmatch(name)
    if systemd:
        return systemd["uid"].replace("_", "-"), _SYSTEMD_QOS[systemd["qos"]]
    cgroupfs = _CGROUPFS_POD.fullmatch(name)
    if cgroupfs:
        if index == 0:
            return cgroupfs["uid"], ""  # the qos level is above a cgroup namespace's root: unknown
        parent_qos = _CGROUPFS_QOS.get(components[index - 1])
        if parent_qos is not None:
            return cgroupfs["uid"], parent_qos
    return None


def _match_container(name: str) -> str | None:
    match = _CONTAINER.fullmatch(name)
    if not match:
        return None
    return match["bare"] or match["scoped"]


def parse_container_cgroup_path(path: str) -> tuple[str, str, str] | None:
    """Map a kubelet container cgroup path to (pod uid with dashes, container id, qos class), or None.

    Handles the cgroupfs and systemd drivers, docker/containerd/cri-o scopes, the misconfigured containerd form
    `...-pod<uid>.slice:cri-containerd:<id>` and cgroup-namespace paths starting with `/../`. A path below a container
    (a process in a sub-cgroup) maps to that container. None for pod-level cgroups, cri-o conmon scopes and anything
    that is not a Kubernetes container. qos is "" only when the path does not include the qos level.
    """
    components = _components(path)
    for index, name in enumerate(components):
        misconfigured = _SLICE_AND_CONTAINER.fullmatch(name)
        if misconfigured:
            pod = _SYSTEMD_POD.fullmatch(misconfigured["slice"])
            if pod is None:
                return None
            return pod["uid"].replace("_", "-"), misconfigured["id"], _SYSTEMD_QOS[pod["qos"]]
        pod_match = _match_pod(components, index)
        if pod_match is not None:
            if index + 1 >= len(components):
                return None
            container_id = _match_container(components[index + 1])
            if container_id is None:
                return None
            return pod_match[0], container_id, pod_match[1]
    return None


def parse_pod_cgroup_path(path: str) -> tuple[str, str] | None:
    """Map a kubelet pod-level cgroup path (ending at `pod<uid>` or `...-pod<uid>.slice`) to (pod uid, qos class)."""
    components = _components(path)
    if not components:
        return None
    return _match_pod(components, len(components) - 1)


# ---------------------------------------------------------------------------------------------------------------------
# Finding the cpu controller.


@dataclass(frozen=True)
class CgroupRoots:
    """Where the cpu controller's tree is. v1: `cpu` (cpu.stat, quota) and `cpuacct` (cpuacct.usage) may be the same
    directory or two mounts (None: not mounted, usage unknown). v2: `cpu` is the unified root, `cpuacct` is None."""

    version: int
    cpu: str
    cpuacct: str | None = None
    cpuset_cpus_file: str | None = None  # lists the root's CPUs, for the node's capacity


@dataclass(frozen=True)
class Mount:
    mount_point: str
    root: str
    fs_type: str
    super_options: frozenset[str]


def _unescape_mount_field(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \040, \011, \012, \134.
    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), field)


def parse_mountinfo(text: str) -> list[Mount]:
    """The cgroup and cgroup2 mounts listed in a /proc/<pid>/mountinfo text; other mounts are skipped."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 10:
            continue
        separator = fields.index("-", 6)
        fs_type = fields[separator + 1]
        if fs_type not in ("cgroup", "cgroup2"):
            continue
        super_options = frozenset(fields[separator + 3].split(",")) if len(fields) > separator + 3 else frozenset()
        mounts.append(
            Mount(
                mount_point=_unescape_mount_field(fields[4]),
                root=_unescape_mount_field(fields[3]),
                fs_type=fs_type,
                super_options=super_options,
            )
        )
    return mounts


def _read_controllers(v2_root: str) -> set[str]:
    try:
        with open(os.path.join(v2_root, "cgroup.controllers")) as file:
            return set(file.read().split())
    except OSError:
        return set()


def find_cgroup_roots(mountinfo_path: str = "/proc/self/mountinfo") -> CgroupRoots:
    """Find the cpu controller from the mount table: cgroup2 when its root lists `cpu`, else the v1 mounts.

    Raises CgroupSetupError when neither has the cpu controller.
    """
    with open(mountinfo_path) as file:
        mounts = parse_mountinfo(file.read())
    # Prefer mounts of the hierarchy's own root: inside a cgroup namespace a mount can show only a subtree.
    mounts.sort(key=lambda mount: mount.root != "/")
    for mount in mounts:
        if mount.fs_type == "cgroup2" and "cpu" in _read_controllers(mount.mount_point):
            return CgroupRoots(2, mount.mount_point, None, os.path.join(mount.mount_point, "cpuset.cpus.effective"))
    v1_by_controller: dict[str, str] = {}
    for mount in mounts:
        if mount.fs_type == "cgroup":
            for controller in ("cpu", "cpuacct", "cpuset"):
                if controller in mount.super_options:
                    v1_by_controller.setdefault(controller, mount.mount_point)
    if "cpu" not in v1_by_controller:
        raise CgroupSetupError(f"no cgroup v1 or v2 mount with the cpu controller in {mountinfo_path}")
    cpuset = v1_by_controller.get("cpuset")
    return CgroupRoots(
        1,
        v1_by_controller["cpu"],
        v1_by_controller.get("cpuacct"),
        os.path.join(cpuset, "cpuset.effective_cpus") if cpuset else None,
    )


def resolve_cgroup_root(path: str) -> CgroupRoots:
    """Find the cpu controller under a directory laid out like /sys/fs/cgroup (or a copy of it).

    Looks for, in order: a v2 tree whose cgroup.controllers lists cpu (at `path` or `path/unified`), v1 `cpu,cpuacct`
    or `cpuacct,cpu`, separate `cpu` and `cpuacct`, and `path` itself being a v1 cpu hierarchy. Raises CgroupSetupError.
    """
    for v2_root in (path, os.path.join(path, "unified")):
        if "cpu" in _read_controllers(v2_root):
            return CgroupRoots(2, v2_root, None, os.path.join(v2_root, "cpuset.cpus.effective"))
    cpuset_file = os.path.join(path, "cpuset", "cpuset.effective_cpus")
    cpuset = cpuset_file if os.path.exists(cpuset_file) else None
    for combined in ("cpu,cpuacct", "cpuacct,cpu"):
        combined_root = os.path.join(path, combined)
        if os.path.isdir(combined_root):
            return CgroupRoots(1, combined_root, combined_root, cpuset)
    cpu_root = os.path.join(path, "cpu")
    if os.path.exists(os.path.join(cpu_root, "cpu.shares")):
        cpuacct_root = os.path.join(path, "cpuacct")
        if os.path.exists(os.path.join(cpu_root, "cpuacct.usage")):
            cpuacct_root = cpu_root  # `cpu` is a symlink to or a mount of the combined hierarchy
        return CgroupRoots(1, cpu_root, cpuacct_root if os.path.isdir(cpuacct_root) else None, cpuset)
    if os.path.exists(os.path.join(path, "cpu.shares")):
        combined_here = os.path.exists(os.path.join(path, "cpuacct.usage"))
        return CgroupRoots(1, path, path if combined_here else None, None)
    raise CgroupSetupError(
        f"no cpu controller under {path}: expected cgroup.controllers listing cpu (v2), "
        "cpu,cpuacct or cpu/ and cpuacct/ (v1)"
    )


# ---------------------------------------------------------------------------------------------------------------------
# Reading one cgroup.

# Errors that mean "this file is not there for this cgroup": not mounted, controller not enabled, PSI switched off.
_ABSENT_ERRNOS = {errno.ENOENT, errno.EOPNOTSUPP, errno.ENODEV, errno.ESRCH}


class _Vanished(Exception):
    """The cgroup went away while it was being read (its container exited)."""


def _read_text(path: str) -> str:
    with open(path) as file:
        return file.read()


def _read_required(path: str, cgroup_dir: str) -> str:
    try:
        return _read_text(path)
    except ProcessLookupError:
        raise _Vanished(cgroup_dir) from None
    except FileNotFoundError:
        if not os.path.isdir(cgroup_dir):
            raise _Vanished(cgroup_dir) from None
        raise


def _read_optional(path: str) -> str | None:
    try:
        return _read_text(path)
    except OSError as exc:
        if exc.errno in _ABSENT_ERRNOS:
            return None
        raise


def _seconds(value: int | None, per_second: int) -> float | None:
    return None if value is None else value / per_second


def _count_subtree_lines(cgroup_dir: str, file_name: str) -> int:
    """Thread ids listed in `file_name` of the cgroup and every cgroup below it (`tasks` is not hierarchical)."""
    total = count_lines(_read_required(os.path.join(cgroup_dir, file_name), cgroup_dir))
    for dir_path, _dir_names, _files in os.walk(cgroup_dir):
        if dir_path == cgroup_dir:
            continue
        text = _read_optional(os.path.join(dir_path, file_name))
        total += count_lines(text) if text is not None else 0
    return total


def _empty_sample(pod_uid: str, container_id: str, qos_class: str) -> ContainerSample:
    return ContainerSample(
        pod_uid=pod_uid,
        container_id=container_id,
        qos_class=qos_class,
        periods_total=None,
        throttled_periods_total=None,
        throttled_seconds_total=None,
        usage_seconds_total=None,
        threads=None,
        quota_us=None,
        period_us=None,
        shares=None,
        weight=None,
        burst_us=None,
        bursts_total=None,
        burst_seconds_total=None,
        psi_some_total_seconds=None,
        psi_full_total_seconds=None,
    )


def _optional_int(path: str) -> int | None:
    """A one-integer file that older kernels lack (cpu.cfs_burst_us, cpu.max.burst): None when absent."""
    text = _read_optional(path)
    return parse_int(text, path) if text is not None else None


def _read_v1_cgroup(sample: ContainerSample, cpu_dir: str, cpuacct_dir: str | None) -> None:
    """Fill `sample` from a v1 cpu cgroup (times in ns) and, when mounted, its cpuacct twin. Raises _Vanished."""
    stat_path = os.path.join(cpu_dir, "cpu.stat")
    stat = parse_cpu_stat(_read_required(stat_path, cpu_dir), stat_path)
    sample["periods_total"] = stat.get("nr_periods")
    sample["throttled_periods_total"] = stat.get("nr_throttled")
    sample["throttled_seconds_total"] = _seconds(stat.get("throttled_time"), NS_PER_SECOND)
    sample["bursts_total"] = stat.get("nr_bursts")
    sample["burst_seconds_total"] = _seconds(stat.get("burst_time"), NS_PER_SECOND)

    quota_path = os.path.join(cpu_dir, "cpu.cfs_quota_us")
    quota_text = _read_optional(quota_path)
    sample["quota_us"] = parse_cfs_quota_us(quota_text, quota_path) if quota_text is not None else None
    period_path = os.path.join(cpu_dir, "cpu.cfs_period_us")
    period_text = _read_optional(period_path)
    sample["period_us"] = parse_int(period_text, period_path) if period_text is not None else None
    shares_path = os.path.join(cpu_dir, "cpu.shares")
    shares_text = _read_optional(shares_path)
    sample["shares"] = parse_int(shares_text, shares_path) if shares_text is not None else None
    sample["burst_us"] = _optional_int(os.path.join(cpu_dir, "cpu.cfs_burst_us"))

    if cpuacct_dir is not None:
        usage_path = os.path.join(cpuacct_dir, "cpuacct.usage")
        usage_text = _read_optional(usage_path)
        if usage_text is not None:
            sample["usage_seconds_total"] = _seconds(parse_cpu_usage_ns(usage_text, usage_path), NS_PER_SECOND)
    sample["threads"] = _count_subtree_lines(cpu_dir, "tasks")


def _read_v2_cgroup(sample: ContainerSample, cgroup_dir: str) -> None:
    """Fill `sample` from a v2 cgroup (times in us). Keys of cpu.stat that need the cpu controller enabled on the
    parent (nr_periods, ...) stay None when it is not. Raises _Vanished."""
    stat_path = os.path.join(cgroup_dir, "cpu.stat")
    stat = parse_cpu_stat(_read_required(stat_path, cgroup_dir), stat_path)
    sample["usage_seconds_total"] = _seconds(stat.get("usage_usec"), US_PER_SECOND)
    sample["periods_total"] = stat.get("nr_periods")
    sample["throttled_periods_total"] = stat.get("nr_throttled")
    sample["throttled_seconds_total"] = _seconds(stat.get("throttled_usec"), US_PER_SECOND)
    sample["bursts_total"] = stat.get("nr_bursts")
    sample["burst_seconds_total"] = _seconds(stat.get("burst_usec"), US_PER_SECOND)

    max_path = os.path.join(cgroup_dir, "cpu.max")
    max_text = _read_optional(max_path)
    if max_text is not None:
        sample["quota_us"], sample["period_us"] = parse_cpu_max(max_text, max_path)
    weight_path = os.path.join(cgroup_dir, "cpu.weight")
    weight_text = _read_optional(weight_path)
    sample["weight"] = parse_int(weight_text, weight_path) if weight_text is not None else None
    sample["burst_us"] = _optional_int(os.path.join(cgroup_dir, "cpu.max.burst"))

    pressure_path = os.path.join(cgroup_dir, "cpu.pressure")
    pressure_text = _read_optional(pressure_path)
    if pressure_text is not None:
        pressure = parse_pressure(pressure_text, pressure_path)
        some, full = pressure.get("some"), pressure.get("full")
        sample["psi_some_total_seconds"] = _seconds(some.total_us if some else None, US_PER_SECOND)
        sample["psi_full_total_seconds"] = _seconds(full.total_us if full else None, US_PER_SECOND)

    pids_path = os.path.join(cgroup_dir, "pids.current")
    pids_text = _read_optional(pids_path)  # only there when the pids controller is enabled for this cgroup
    if pids_text is not None:
        sample["threads"] = parse_int(pids_text, pids_path)
    else:
        sample["threads"] = _count_subtree_lines(cgroup_dir, "cgroup.threads")


def iter_kubelet_cgroups(root: str) -> Iterator[tuple[str, str, str, str]]:
    """Walk a cgroup tree and yield (relative path, pod uid, container id or "" for the pod level, qos class).

    Sorted, so payloads are stable. Sub-cgroups of a container are not yielded separately (they belong to it).
    """
    for dir_path, dir_names, _files in os.walk(root):
        dir_names.sort()
        relative = os.path.relpath(dir_path, root)
        if relative == ".":
            continue
        container = parse_container_cgroup_path(relative)
        if container is not None:
            dir_names.clear()
            pod_uid, container_id, qos_class = container
            yield relative, pod_uid, container_id, qos_class
            continue
        pod = parse_pod_cgroup_path(relative)
        if pod is not None:
            yield relative, pod[0], "", pod[1]


# ---------------------------------------------------------------------------------------------------------------------
# Node facts.


def read_node_facts(
    node_name: str | None = None,
    *,
    cpuset_cpus_file: str | None = None,
    proc_root: str = "/proc",
    sys_root: str = "/sys",
) -> NodeFacts:
    """What the node says about itself. Name: `node_name`, else $NODE_NAME, else the hostname. Capacity is the CPUs
    in the root cpuset (os.cpu_count() when unreadable) x 1000; the slice (us) is None and the governor "" when the
    kernel does not expose them (no CFS bandwidth control / no cpufreq driver, as in most VMs)."""
    cpus: int | None = None
    if cpuset_cpus_file is not None:
        cpuset_text = _read_optional(cpuset_cpus_file)
        if cpuset_text is not None and cpuset_text.strip():
            cpus = len(parse_cpu_list(cpuset_text, cpuset_cpus_file))
    if cpus is None:
        cpus = os.cpu_count()

    slice_path = os.path.join(proc_root, "sys", "kernel", "sched_cfs_bandwidth_slice_us")
    slice_text = _read_optional(slice_path)
    governor_path = os.path.join(sys_root, "devices", "system", "cpu", "cpu0", "cpufreq", "scaling_governor")
    governor_text = _read_optional(governor_path)
    return NodeFacts(
        name=node_name or os.environ.get("NODE_NAME") or socket.gethostname(),
        kernel_version=os.uname().release,
        capacity_mcpu=cpus * 1000 if cpus else None,
        cfs_slice_us=parse_int(slice_text, slice_path) if slice_text is not None else None,
        cpufreq_governor=governor_text.strip() if governor_text is not None else "",
    )


# ---------------------------------------------------------------------------------------------------------------------
# One collection.


def collect(
    cgroup_root_v1_cpu: str | None = None,
    cgroup_root_v1_cpuacct: str | None = None,
    cgroup_root_v2: str | None = None,
    node_name: str | None = None,
    *,
    cpuset_cpus_file: str | None = None,
    proc_root: str = "/proc",
    sys_root: str = "/sys",
    now: datetime | None = None,
) -> Payload:
    """Read every kubelet pod and container cgroup under the given root(s) and build the ingest payload.

    Give a v2 root, or a v1 cpu root (plus the cpuacct root when it is a separate mount; when omitted, the cpu root is
    used if it holds cpuacct.usage, else usage is null). With no root at all the mount table decides. A container that
    vanishes mid-read is left out quietly; a cgroup that cannot be read adds a line to "errors" and the rest is kept.
    Raises CgroupSetupError when no root is given and none is mounted, ValueError when both v1 and v2 roots are given.
    """
    if cgroup_root_v2 is not None and (cgroup_root_v1_cpu is not None or cgroup_root_v1_cpuacct is not None):
        raise ValueError("give either cgroup v1 roots or a cgroup v2 root, not both")
    if cgroup_root_v2 is not None:
        roots = CgroupRoots(2, cgroup_root_v2, None, cpuset_cpus_file)
    elif cgroup_root_v1_cpu is not None:
        roots = CgroupRoots(1, cgroup_root_v1_cpu, cgroup_root_v1_cpuacct, cpuset_cpus_file)
    elif cgroup_root_v1_cpuacct is not None:
        raise ValueError("a cgroup v1 cpuacct root needs the cpu root too")
    else:
        found = find_cgroup_roots()
        roots = CgroupRoots(found.version, found.cpu, found.cpuacct, cpuset_cpus_file or found.cpuset_cpus_file)
    return _collect(roots, node_name, proc_root=proc_root, sys_root=sys_root, now=now)[0]


def _collect(
    roots: CgroupRoots,
    node_name: str | None,
    *,
    proc_root: str = "/proc",
    sys_root: str = "/sys",
    now: datetime | None = None,
) -> tuple[Payload, dict[tuple[str, str], str]]:
    """`collect` on resolved roots, with each container's cpu cgroup directory by (pod uid, container id)."""
    if roots.version == 1 and roots.cpuacct is None and os.path.exists(os.path.join(roots.cpu, "cpuacct.usage")):
        roots = CgroupRoots(1, roots.cpu, roots.cpu, roots.cpuset_cpus_file)  # a combined mount given as cpu only
    collected_at = (now or datetime.now(UTC)).astimezone(UTC)
    containers: list[ContainerSample] = []
    errors: list[str] = []
    cpu_dirs: dict[tuple[str, str], str] = {}
    for relative, pod_uid, container_id, qos_class in iter_kubelet_cgroups(roots.cpu):
        cgroup_dir = os.path.join(roots.cpu, relative)
        sample = _empty_sample(pod_uid, container_id, qos_class)
        try:
            if roots.version == 2:
                _read_v2_cgroup(sample, cgroup_dir)
            else:
                cpuacct_dir = os.path.join(roots.cpuacct, relative) if roots.cpuacct is not None else None
                _read_v1_cgroup(sample, cgroup_dir, cpuacct_dir)
        except _Vanished:
            log.debug("cgroup %s went away while being read", cgroup_dir)
            continue
        except Exception as exc:  # one bad cgroup must not cost the node's other containers
            errors.append(f"{cgroup_dir}: {exc}" if cgroup_dir not in str(exc) else str(exc))
            continue
        if not os.path.isdir(cgroup_dir):
            continue  # vanished after its required file was read: its optional values may be missing, drop it
        containers.append(sample)
        if container_id:
            cpu_dirs[(pod_uid, container_id)] = cgroup_dir

    payload = Payload(
        agent_version=AGENT_VERSION,
        node=read_node_facts(
            node_name, cpuset_cpus_file=roots.cpuset_cpus_file, proc_root=proc_root, sys_root=sys_root
        ),
        cgroup_version=roots.version,
        collected_at=collected_at.isoformat(timespec="milliseconds"),
        containers=containers,
        errors=errors,
    )
    return payload, cpu_dirs


# ---------------------------------------------------------------------------------------------------------------------
# Period sampling: one throttled-time figure per CFS period for the containers that are being throttled.

PERIOD_POLL_S = 0.004  # a 100 ms period is seen in ~25 polls; a poll that sees two new periods is rare
MAX_PERIOD_SAMPLE_SECONDS = 30.0
MAX_PERIOD_SAMPLED_CONTAINERS = 64
_Key = TypeVar("_Key")


@dataclass(frozen=True)
class PeriodSample:
    """What one cgroup's cpu.stat showed period by period: `throttled_us` has one entry per period counted while
    it was polled (0: no throttled time), over `seconds` of wall time."""

    seconds: float
    throttled_us: tuple[int, ...]

    def summary(self) -> PeriodSampleSummary:
        """The payload form: the periods count and only the periods that had throttled time."""
        return PeriodSampleSummary(
            seconds=round(self.seconds, 3),
            periods=len(self.throttled_us),
            throttled_us=[value for value in self.throttled_us if value > 0],
        )


def split_throttled_us(new_periods: int, new_throttled: int, throttled_us: int) -> list[int]:
    """One figure per period for a poll that saw `new_periods` counted (`new_throttled` of them throttled) and
    `throttled_us` more throttled time: the time shared evenly by the throttled ones (by one period when the kernel
    added time without counting a throttled period), zeros for the rest. The figures sum to `throttled_us`."""
    if new_periods <= 0:
        return []
    if throttled_us <= 0:
        return [0] * new_periods
    shared_by = min(max(new_throttled, 1), new_periods)
    share, extra = divmod(throttled_us, shared_by)
    return [share + 1] * extra + [share] * (shared_by - extra) + [0] * (new_periods - shared_by)


def read_period_counters(cpu_dir: str) -> tuple[int, int, int] | None:
    """(nr_periods, nr_throttled, throttled time in whole us) from a v1 or v2 cpu.stat; None when the cgroup is gone
    or counts no periods (no cpu controller enabled). Raises CgroupFormatError for a garbled file."""
    path = os.path.join(cpu_dir, "cpu.stat")
    try:
        return _period_counters(parse_cpu_stat(_read_text(path), path))
    except (FileNotFoundError, ProcessLookupError):
        return None


def _period_counters(stat: Mapping[str, int]) -> tuple[int, int, int] | None:
    if "nr_periods" not in stat:
        return None
    # Whole us of the cumulative value, so the per-poll differences add up to the counter's own difference.
    throttled_us = stat["throttled_time"] // 1000 if "throttled_time" in stat else stat.get("throttled_usec", 0)
    return stat["nr_periods"], stat.get("nr_throttled", 0), throttled_us


def sample_periods(
    cpu_dirs: Mapping[_Key, str],
    seconds: float,
    poll_s: float = PERIOD_POLL_S,
    stop: threading.Event | None = None,
) -> dict[_Key, PeriodSample]:
    """Poll each cgroup's cpu.stat every `poll_s` for `seconds` (less if `stop` is set) and record each new
    period's throttled time. The kernel adds a period's throttled time when it refills the quota, the moment it
    counts the period, so time read with no new period belongs to the next one counted. A cgroup that goes away or
    turns garbled is left out of the result."""
    files: dict[_Key, int] = {}
    last: dict[_Key, tuple[int, int, int]] = {}
    figures: dict[_Key, list[int]] = {}
    try:
        for key, cpu_dir in cpu_dirs.items():
            try:
                # Kept open and re-read from offset 0 (the kernel regenerates it): a tenth of open-read-close's CPU.
                files[key] = os.open(os.path.join(cpu_dir, "cpu.stat"), os.O_RDONLY)
            except OSError:
                continue
            counters = _poll(files[key], cpu_dir)
            if counters is not None:
                last[key], figures[key] = counters, []
        started = time.monotonic()
        ticks = 0
        while last and not (stop is not None and stop.is_set()):
            # A slow round skips ticks rather than piling them up; sleep, not Event.wait: half its CPU per call.
            ticks = max(ticks + 1, int((time.monotonic() - started) / poll_s))
            delay = started + ticks * poll_s - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            for key in list(last):
                counters = _poll(files[key], cpu_dirs[key])
                if counters is None or counters[0] < last[key][0]:  # gone, or recreated with fresh counters
                    del last[key], figures[key]
                    continue
                previous = last[key]
                if counters[0] > previous[0]:
                    figures[key] += split_throttled_us(
                        counters[0] - previous[0], counters[1] - previous[1], counters[2] - previous[2]
                    )
                    last[key] = counters
            if time.monotonic() - started >= seconds:
                break
        elapsed = time.monotonic() - started
    finally:
        for fd in files.values():
            os.close(fd)
    return {key: PeriodSample(elapsed, tuple(values)) for key, values in figures.items()}


def _poll(fd: int, cpu_dir: str) -> tuple[int, int, int] | None:
    try:
        return _period_counters(parse_cpu_stat(os.pread(fd, 4096, 0).decode(), cpu_dir))
    except (OSError, CgroupFormatError, UnicodeDecodeError) as exc:  # a removed cgroup's open file reads ENODEV
        log.debug("stopped sampling %s: %s", cpu_dir, exc)
        return None


def _period_counts(payload: Payload) -> dict[tuple[str, str], tuple[int, int]]:
    return {
        (row["pod_uid"], row["container_id"]): (row["periods_total"], row["throttled_periods_total"])
        for row in payload["containers"]
        if row["container_id"] and row["periods_total"] is not None and row["throttled_periods_total"] is not None
    }


def throttle_ratio(throttled_periods: int, periods: int) -> float | None:
    """Mirrors apps/telemetry/counters.throttle_ratio, the one formula (this file ships alone): Δnr_throttled /
    Δnr_periods clamped to [0, 1], None when no period elapsed. tests/agent/test_cputune_agent.py checks they agree."""
    if periods <= 0:
        return None
    return min(1.0, max(0.0, throttled_periods / periods))


def pick_throttled(
    current: Mapping[_Key, tuple[int, int]], previous: Mapping[_Key, tuple[int, int]], above: float, most: int
) -> list[_Key]:
    """The keys whose throttle ratio between two collections (Δnr_throttled / Δnr_periods) is above `above`,
    most throttled first, at most `most`. A key without a previous reading, or whose counters went back, is skipped."""
    ratios: list[tuple[float, _Key]] = []
    for key, (periods, throttled) in current.items():
        before = previous.get(key)
        if before is None or periods <= before[0] or throttled < before[1]:
            continue
        ratio = throttle_ratio(throttled - before[1], periods - before[0])
        if ratio is not None and ratio > above:
            ratios.append((ratio, key))
    ratios.sort(key=lambda pair: -pair[0])  # stable: ties keep the collection's (sorted) order
    return [key for _, key in ratios[:most]]


def add_period_samples(
    payload: Payload,
    cpu_dirs: Mapping[tuple[str, str], str],
    previous: Mapping[tuple[str, str], tuple[int, int]],
    options: AgentOptions,
    stop: threading.Event | None = None,
) -> dict[tuple[str, str], tuple[int, int]]:
    """Sample the containers `pick_throttled` chooses and add their summaries and the CPU it cost to `payload`.
    Returns this collection's period counts, the `previous` of the next call."""
    current = _period_counts(payload)
    if options.period_sample_seconds <= 0:
        return current
    chosen = pick_throttled(current, previous, options.period_sample_above, options.period_sample_max)
    if chosen:
        cpu_before = time.thread_time()  # this thread's CPU only: the sampler's own cost
        samples = sample_periods({key: cpu_dirs[key] for key in chosen}, options.period_sample_seconds, stop=stop)
        payload["sampler_cpu_seconds"] = round(time.thread_time() - cpu_before, 4)
        for row in payload["containers"]:
            sample = samples.get((row["pod_uid"], row["container_id"]))
            if sample is not None:
                row["period_sample"] = sample.summary()
        log.info(
            "sampled %d throttled container(s) period by period for %.1f s: %.3f s of CPU",
            len(samples),
            options.period_sample_seconds,
            payload["sampler_cpu_seconds"],
        )
    return current


# ---------------------------------------------------------------------------------------------------------------------
# Pushing.


def ingest_url(server: str) -> str:
    """`<server>/api/v1/ingest/`, keeping any path prefix of `server`. Raises ValueError for a non-http(s) URL."""
    parsed = urllib.parse.urlsplit(server)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(f"server {server!r} is not an http:// or https:// URL")
    return server.rstrip("/") + INGEST_PATH


def push(
    payload: Mapping[str, Any],
    server: str,
    token: str,
    *,
    timeout_s: float = 10.0,
    attempts: int = 4,
    backoff_s: float = 1.0,
    stop: threading.Event | None = None,
) -> bool:
    """POST the payload as JSON to `<server>/api/v1/ingest/`; True once the server answers 2xx.

    Retries connection errors, timeouts (each attempt waits at most `timeout_s` per socket operation), 429 and 5xx,
    waiting backoff_s x 1, 2, 4, ... in between; a 4xx other than 429 (bad token, rejected payload) is not retried.
    Every failure is logged with its cause; nothing is raised. Returns early (False) when `stop` is set.
    """
    url = ingest_url(server)
    body = json.dumps(payload, separators=(",", ":")).encode()
    headers = {
        "Content-Type": "application/json",
        "Authorization": f"Token {token}",
        "User-Agent": f"cputune-agent/{AGENT_VERSION}",
    }
    for attempt in range(1, attempts + 1):
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")  # noqa: S310 (http(s) only)
        started = time.monotonic()
        retriable = True
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310 (scheme checked above)
                response.read()
                log.info(
                    "pushed %d containers (%d errors) to %s: HTTP %d in %.2f s",
                    len(payload.get("containers", [])),
                    len(payload.get("errors", [])),
                    url,
                    response.status,
                    time.monotonic() - started,
                )
                return True
        except urllib.error.HTTPError as exc:
            try:
                detail = exc.read(300).decode("utf-8", "replace").strip()
            except OSError:
                detail = ""
            cause = f"HTTP {exc.code} {exc.reason}: {detail}" if detail else f"HTTP {exc.code} {exc.reason}"
            retriable = exc.code == 429 or exc.code >= 500
        except urllib.error.URLError as exc:
            cause = f"cannot connect: {exc.reason}"
        except TimeoutError:
            cause = f"no answer within {timeout_s:g} s"
        except OSError as exc:  # connection reset mid-answer and the like
            cause = f"{type(exc).__name__}: {exc}"
        if not retriable:
            log.error("push to %s rejected, not retrying: %s", url, cause)
            return False
        log.warning("push to %s failed (attempt %d of %d): %s", url, attempt, attempts, cause)
        if attempt < attempts:
            delay_s = backoff_s * 2 ** (attempt - 1)
            if stop is not None:
                if stop.wait(delay_s):
                    return False
            else:
                time.sleep(delay_s)
    log.error("gave up pushing to %s after %d attempts; the next cycle sends fresh counters", url, attempts)
    return False


# ---------------------------------------------------------------------------------------------------------------------
# The loop.


@dataclass(frozen=True)
class AgentOptions:
    server: str
    token: str
    cgroup_root: str | None = None  # None: find the cpu controller in /proc/self/mountinfo
    interval_s: float = 15.0
    once: bool = False
    node: str | None = None
    timeout_s: float = 10.0
    attempts: int = 4
    period_sample_seconds: float = 5.0  # 0: no period sampling
    period_sample_above: float = 0.05
    period_sample_max: int = 16

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> AgentOptions:
        """Build from parsed arguments (argparse namespace vars or a Django command's options)."""
        return cls(
            server=options["server"],
            token=options["token"],
            cgroup_root=options.get("cgroup_root"),
            interval_s=float(options.get("interval") or 15.0),
            once=bool(options.get("once")),
            node=options.get("node"),
            timeout_s=float(options.get("timeout") or 10.0),
            attempts=int(options.get("attempts") or 4),
            period_sample_seconds=float(_given(options, "period_sample_seconds", 5.0)),
            period_sample_above=float(_given(options, "period_sample_above", 0.05)),
            period_sample_max=int(_given(options, "period_sample_max", 16)),
        )

    def problem(self) -> str | None:
        """Why these options cannot run (a message naming the option), or None."""
        if not 0 <= self.period_sample_seconds <= MAX_PERIOD_SAMPLE_SECONDS:
            return (
                f"--period-sample-seconds {self.period_sample_seconds:g} is outside 0 to {MAX_PERIOD_SAMPLE_SECONDS:g}"
            )
        if self.period_sample_seconds and self.period_sample_seconds >= self.interval_s:
            return (
                f"--period-sample-seconds {self.period_sample_seconds:g} must be less than --interval "
                f"{self.interval_s:g} (0 turns period sampling off)"
            )
        if not 0 <= self.period_sample_above < 1:
            return f"--period-sample-above {self.period_sample_above:g} is not a throttle ratio from 0 up to 1"
        if not 1 <= self.period_sample_max <= MAX_PERIOD_SAMPLED_CONTAINERS:
            return f"--period-sample-max {self.period_sample_max} is outside 1 to {MAX_PERIOD_SAMPLED_CONTAINERS}"
        return None


def _given(options: Mapping[str, Any], name: str, default: float) -> Any:
    # 0 is a real value here (sampling off, any throttling): only a missing option takes the default.
    value = options.get(name)
    return default if value is None else value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not zero or a positive number")
    return value


def _positive_int(text: str) -> int:
    if not text.isascii() or not text.isdigit() or int(text) == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return int(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The agent's command-line options, shared by `python agent.py` and `manage.py agent`."""
    token_from_env = os.environ.get("CPUTUNE_AGENT_TOKEN")
    parser.add_argument("--server", required=True, help="cputune base URL, e.g. https://cputune.example")
    parser.add_argument(
        "--token",
        default=token_from_env,
        required=token_from_env is None,
        help="API token with the ingest scope (default: $CPUTUNE_AGENT_TOKEN)",
    )
    parser.add_argument(
        "--cgroup-root",
        default=None,
        help="directory laid out like /sys/fs/cgroup (default: find the cpu controller in /proc/self/mountinfo)",
    )
    parser.add_argument("--interval", type=_positive_float, default=15.0, help="seconds between pushes (default 15)")
    parser.add_argument("--once", action="store_true", help="collect and push once, exit 0 on success, 1 on failure")
    parser.add_argument("--node", default=None, help="node name (default: $NODE_NAME, else the hostname)")
    parser.add_argument("--timeout", type=_positive_float, default=10.0, help="HTTP timeout in seconds (default 10)")
    parser.add_argument("--attempts", type=_positive_int, default=4, help="HTTP attempts per push (default 4)")
    parser.add_argument(
        "--period-sample-seconds",
        type=_non_negative_float,
        default=5.0,
        help="after each collection, poll throttled containers' cpu.stat for this long to record each period's "
        f"throttled time (default 5; 0: off; at most {MAX_PERIOD_SAMPLE_SECONDS:g} and less than --interval)",
    )
    parser.add_argument(
        "--period-sample-above",
        type=_non_negative_float,
        default=0.05,
        help="sample containers throttled in more than this share of periods since the last collection (default 0.05)",
    )
    parser.add_argument(
        "--period-sample-max",
        type=_positive_int,
        default=16,
        help=f"sample at most this many containers per cycle, most throttled first (default 16, at most "
        f"{MAX_PERIOD_SAMPLED_CONTAINERS})",
    )


def _ensure_logging() -> None:
    if not logging.getLogger().hasHandlers():
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if log.getEffectiveLevel() > logging.INFO:
        log.setLevel(logging.INFO)


def run(options: AgentOptions) -> int:
    """Collect and push every `interval_s` until SIGTERM/SIGINT (exit 0), or once (exit 0 pushed, 1 not).

    Exit 2 when the server URL is unusable or no cpu controller is found. A failing cycle is logged and the loop goes on.
    """
    _ensure_logging()
    try:
        ingest_url(options.server)
        problem = options.problem()
        if problem is not None:
            raise ValueError(problem)
        roots = resolve_cgroup_root(options.cgroup_root) if options.cgroup_root else find_cgroup_roots()
    except (ValueError, CgroupSetupError, OSError) as exc:
        log.error("cannot start: %s", exc)
        return 2
    log.info(
        "agent %s: cgroup v%d at %s, pushing to %s every %g s",
        AGENT_VERSION,
        roots.version,
        roots.cpu,
        ingest_url(options.server),
        options.interval_s,
    )
    stop = threading.Event()
    previous: dict[tuple[str, str], tuple[int, int]] = {}

    def request_stop(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s, stopping", signal.Signals(signum).name)
        stop.set()

    previous_handlers = {}
    if threading.current_thread() is threading.main_thread():  # signal handlers can only be set there
        for signum in (signal.SIGTERM, signal.SIGINT):
            previous_handlers[signum] = signal.signal(signum, request_stop)
    try:
        while not stop.is_set():
            started = time.monotonic()
            pushed = False
            try:
                payload, cpu_dirs = _collect(roots, options.node)
                previous = add_period_samples(payload, cpu_dirs, previous, options, stop)
            except Exception:  # a broken cycle must not end the DaemonSet pod; the next one may work
                log.exception("collection failed")
            else:
                for error in payload["errors"]:
                    log.warning("cgroup read error: %s", error)
                pushed = push(
                    payload,
                    options.server,
                    options.token,
                    timeout_s=options.timeout_s,
                    attempts=options.attempts,
                    stop=stop,
                )
            if options.once:
                return 0 if pushed else 1
            stop.wait(max(0.0, options.interval_s - (time.monotonic() - started)))
        return 0
    finally:
        for signum, handler in previous_handlers.items():
            signal.signal(signum, handler)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run the agent; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="cputune-agent", description="Push this node's container CPU cgroup counters to cputune."
    )
    add_arguments(parser)
    return run(AgentOptions.from_mapping(vars(parser.parse_args(argv))))


if __name__ == "__main__":
    sys.exit(main())
