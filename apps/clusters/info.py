"""What a source reports of a cluster's inventory: plain values that apps/clusters/inventory.py stores as Node, Pod
and Container rows. Pure Python: no Django import (the advisor's domain modules read them through
apps/telemetry/readings.py, which re-exports them beside the readings).

CPU is in millicores (mcpu). Empty text or `None` means "not reported by this source", never zero.
"""

from __future__ import annotations

from dataclasses import dataclass

# The name under which a pod's own cgroup is stored: its CFS counters throttle the whole pod (a pod-level quota). No
# container can have it (Kubernetes names are non-empty).
POD_CGROUP = ""

# The pod-spec env vars that set a runtime's CPU count or thread pools (docs/domain.md#runtime-detection); only these
# are kept, literal values only, each cut to MAX_CPU_ENV_CHARS (a JVM options string can be long).
CPU_ENV_KEYS = (
    "GOMAXPROCS",
    "JAVA_TOOL_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "_JAVA_OPTIONS",
    "DOTNET_PROCESSOR_COUNT",
    "UV_THREADPOOL_SIZE",
    "PYTHON_CPU_COUNT",
)
MAX_CPU_ENV_CHARS = 500
CUT_MARK = "…"  # ends a value cut to MAX_CPU_ENV_CHARS


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
    request_mcpu: int | None = None  # applied: the container status's resources when reported, else the spec's
    limit_mcpu: int | None = None
    restarts: int = 0
    # The spec's values while they differ from the applied ones the status reports (an in-place resize pending or
    # in progress); None otherwise.
    spec_request_mcpu: int | None = None
    spec_limit_mcpu: int | None = None
    image: str = ""  # the spec's image reference, as written
    cpu_env: tuple[tuple[str, str], ...] = ()  # (name, value) of CPU_ENV_KEYS set in the spec, sorted by name


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
    resize_status: str = ""  # an in-place resize not yet done: "Pending (Deferred)", "In progress", …; "" for none
    resize_message: str = ""
    # Pod-level resources (spec.resources, PodLevelResources): the pod cgroup's quota and shares when given.
    request_mcpu: int | None = None
    limit_mcpu: int | None = None
    # The init phase, which the kubelet's pod quota also covers (resource.PodLimits): the largest CPU limit of an
    # init container plus the sidecars started before it; None without (non-sidecar) init containers.
    # `init_unlimited`: an init container declares no CPU limit, so a Burstable pod gets no pod-level quota.
    init_limit_mcpu: int | None = None
    init_unlimited: bool = False
