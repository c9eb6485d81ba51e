"""The releases a behaviour starts at, in one place: Kubernetes, Linux, the OCI runtimes and the language runtimes
the advice depends on, each with its source (docs/domain.md has the facts at length). Pure Python.

The slice-expiry bug's fixed releases are not here: they are the kernel verdict's own table, vendor builds and all
(apps/advisor/kernel/facts.py).
"""

from __future__ import annotations

import re

from apps.advisor.kernel import parse_kernel_version

Release = tuple[int, ...]

# --- Kubernetes (the node's kubelet) --------------------------------------------------------------------------------
# In-place resize of a running pod (`kubectl patch pod … --subresource resize`): beta and on by default, GA in 1.35
# (KEP-1287).
IN_PLACE_RESIZE = (1, 33)
IN_PLACE_RESIZE_GA = (1, 35)
# CPU pressure per container from the kubelet: alpha behind KubeletPSI, on by default from 1.34, GA in 1.36
# (KEP-4205). cgroup v2 only.
KUBELET_PSI = (1, 33)
KUBELET_PSI_DEFAULT = (1, 34)
# Pod-level `spec.resources`: alpha 1.32, beta and on by default 1.34 (KEP-2837).
POD_LEVEL_RESOURCES = (1, 32)
POD_LEVEL_RESOURCES_DEFAULT = (1, 34)
# Containers with exclusive CPUs (static CPU manager policy) run without a CFS quota (DisableCPUQuotaWithExclusiveCPUs,
# on by default; kubernetes/kubernetes#127525).
EXCLUSIVE_CPUS_NO_QUOTA = (1, 33)
# The kubelet refuses to start on cgroup v1 unless told otherwise (`failCgroupV1`, KEP-5573).
CGROUP_V1_REFUSED = (1, 35)

# --- Linux ------------------------------------------------------------------------------------------------------------
PSI = (4, 20)  # pressure stall information (commit eb414681d5a0)
# CFS burst: cpu.cfs_burst_us / cpu.max.burst (commit f4183717b370); its nr_bursts / burst_time statistics a release
# later.
CFS_BURST = (5, 14)
CFS_BURST_STATS = (5, 16)
# Task-based throttle model: a task out of quota is throttled when it returns to user space, not where it stands
# ("sched/fair: Switch to task based throttle model", Aaron Lu, queued for the 6.18 merge window; the 6.18 kernel
# of this project's CI has its throttle_cfs_rq_work).
TASK_BASED_THROTTLE = (6, 18)

# --- OCI runtimes -----------------------------------------------------------------------------------------------------
# cgroup v2 cpu.weight by the log-quadratic mapping of shares (opencontainers/runc PR #4785; crun as reported).
RUNC_QUADRATIC_WEIGHT = (1, 3, 2)
CRUN_QUADRATIC_WEIGHT = (1, 23)

# --- Languages --------------------------------------------------------------------------------------------------------
# Go sets GOMAXPROCS from the container's own CPU limit (its leaf cgroup only; golang/go#73193, go.dev/doc/go1.25).
GO_CGROUP_GOMAXPROCS = (1, 25)
# Python's PYTHON_CPU_COUNT / -X cpu_count override os.cpu_count() (docs.python.org/3.13/whatsnew).
PYTHON_CPU_COUNT = (3, 13)

_KUBERNETES_VERSION = re.compile(r"v?(\d{1,4})\.(\d{1,4})")


def kubernetes_version(text: str) -> tuple[int, int] | None:
    """(major, minor) of a kubelet version string such as "v1.34.1" or "v1.33.2-eks-1234"; None when unreadable."""
    match = _KUBERNETES_VERSION.match(text.strip())
    return (int(match.group(1)), int(match.group(2))) if match else None


def kernel_line(text: str) -> tuple[int, int] | None:
    """(major, minor) of a node's kernelVersion ("6.18.44-fc", "5.15.0-1034-aws"); None when it is no Linux release."""
    release = parse_kernel_version(text)
    return (release.major, release.minor) if release else None


def kubelet_at_least(kubelet_version: str, gate: Release) -> bool:
    """Whether a kubelet version string is at or past `gate`; False when it cannot be read (nothing is assumed)."""
    version = kubernetes_version(kubelet_version)
    return version is not None and version >= gate


def kernel_at_least(kernel_version: str, gate: Release) -> bool:
    """Whether a node's kernelVersion is at or past `gate`; False when it is no Linux release."""
    line = kernel_line(kernel_version)
    return line is not None and line >= gate


def dotted(release: Release) -> str:
    """(1, 33) → "1.33", for the text users read: the number in the sentence is the gate's."""
    return ".".join(str(part) for part in release)
