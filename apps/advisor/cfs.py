"""CFS arithmetic: what a request guarantees, what a limit allows, and what the slice bug can strand. Pure Python.

Requests become cpu.shares (cgroup v1) or cpu.weight (v2): a floor under contention. Limits become a quota per period:
a ceiling. The conversions from Kubernetes quantities are the kubelet's, in apps.clusters.kubelet; this module adds
the floor and ceiling, the slice arithmetic and the latency model of
Indeed's KubeCon 2019 talk on CFS throttling ("the talk" below).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from apps.clusters.kubelet import (
    DEFAULT_PERIOD_US,
    MILLI_CPU_TO_CPU,
    MIN_SHARES,
    WeightFormula,
    shares_from_request_mcpu,
    weight_from_shares,
)

DEFAULT_SLICE_US = 5000  # /proc/sys/kernel/sched_cfs_bandwidth_slice_us default
MIN_CFS_RQ_RUNTIME_US = 1000  # kernel min_cfs_rq_runtime: what each per-CPU run queue keeps when the slack timer runs


@dataclass(frozen=True, slots=True)
class SharesFloor:
    """What a cgroup is guaranteed when every neighbour wants CPU too: budget × shares / Σ shares."""

    shares: int
    total_shares: int  # this cgroup's plus every neighbour's at the same level
    budget_mcpu: int  # what the level divides: the node's allocatable CPU for pods, the pod's floor for containers
    floor_mcpu: int


def shares_floor(own_shares: int, neighbour_shares: Iterable[int], budget_mcpu: int) -> SharesFloor:
    """Split `budget_mcpu` in proportion to shares (or v2 weights: the arithmetic is the same); rounds down.

    `neighbour_shares` excludes the cgroup itself. The floor never exceeds the budget. On cgroup v2 with the
    quadratic mapping the kernel divides by weights, which are not proportional to requests (2048 shares → 174,
    1024 → 100): pass weights here to get that split. Raises ValueError for non-positive shares or a negative budget.
    """
    if own_shares <= 0:
        raise ValueError(f"shares {own_shares!r} must be positive")
    if budget_mcpu < 0:
        raise ValueError(f"CPU budget {budget_mcpu!r} mcpu is negative")
    total = own_shares
    for shares in neighbour_shares:
        if shares <= 0:
            raise ValueError(f"neighbour shares {shares!r} must be positive")
        total += shares
    return SharesFloor(
        shares=own_shares,
        total_shares=total,
        budget_mcpu=budget_mcpu,
        floor_mcpu=budget_mcpu * own_shares // total,
    )


def pod_shares_floor(
    pod_request_mcpu: int | None,
    neighbour_pod_requests_mcpu: Iterable[int | None],
    allocatable_mcpu: int,
) -> SharesFloor:
    """A pod's CPU floor on its node: allocatable × shares / Σ shares of every pod there (the kubepods budget).

    Requests are the pods' summed container CPU requests in mcpu; None or 0 (BestEffort) counts as 2 shares, the
    kubelet's minimum. Flat over the node: the kubelet gives the Burstable and BestEffort QoS cgroups the sum of
    their pods' shares, so this equals the kernel's split, except that all BestEffort pods together get 2 shares
    (each gets even less than shown: ~0 either way).
    """
    return shares_floor(
        shares_from_request_mcpu(pod_request_mcpu),
        (shares_from_request_mcpu(request) for request in neighbour_pod_requests_mcpu),
        allocatable_mcpu,
    )


def container_shares_floor(
    pod_floor: SharesFloor,
    container_request_mcpu: int | None,
    sibling_container_requests_mcpu: Iterable[int | None],
    mapping: WeightFormula | None = None,
) -> SharesFloor:
    """A container's share of its pod's floor, split by the containers' own shares (siblings exclude itself), or by
    their cgroup v2 weights under `mapping`."""

    def weigh(request: int | None) -> int:
        shares = shares_from_request_mcpu(request)
        return weight_from_shares(shares, mapping) if mapping else shares

    return shares_floor(
        weigh(container_request_mcpu),
        (weigh(request) for request in sibling_container_requests_mcpu),
        pod_floor.floor_mcpu,
    )


def weighted_pod_floors(
    pods: Mapping[int, tuple[str, int | None]], allocatable_mcpu: int, mapping: WeightFormula
) -> dict[int, SharesFloor]:
    """Each pod's floor on a cgroup v2 node whose runtime maps shares to weights by `mapping`; pods maps an id to
    (QoS class, summed request).

    The kernel splits by weight level by level, as the kubelet builds them: Guaranteed pods sit under kubepods
    beside the Burstable slice (the weight of the summed shares of its pods) and the BestEffort slice (2 shares);
    each slice's share is then split among its pods. With the linear mapping this is close to the flat split by
    shares; with the quadratic one it is not (docs/domain.md#weight-mapping). `total_shares` is the total weight
    at the pod's own level; `budget_mcpu` what that level divides.
    """
    weight = {
        pod_id: weight_from_shares(shares_from_request_mcpu(request), mapping) for pod_id, (_, request) in pods.items()
    }
    slices: dict[str, list[int]] = {"Guaranteed": [], "Burstable": [], "BestEffort": []}
    for pod_id, (qos, request) in pods.items():
        slices[qos if qos in slices else ("Burstable" if request else "BestEffort")].append(pod_id)
    burstable_shares = shares_from_request_mcpu(sum(pods[p][1] or 0 for p in slices["Burstable"]) or None)
    slice_weight = {
        "Burstable": weight_from_shares(burstable_shares, mapping) if slices["Burstable"] else 0,
        "BestEffort": weight_from_shares(MIN_SHARES, mapping) if slices["BestEffort"] else 0,
    }
    top = sum(weight[p] for p in slices["Guaranteed"]) + sum(slice_weight.values())
    floors: dict[int, SharesFloor] = {}
    for pod_id in slices["Guaranteed"]:
        floors[pod_id] = SharesFloor(weight[pod_id], top, allocatable_mcpu, allocatable_mcpu * weight[pod_id] // top)
    for qos in ("Burstable", "BestEffort"):
        if not slices[qos]:
            continue
        budget = allocatable_mcpu * slice_weight[qos] // top
        level = sum(weight[p] for p in slices[qos])
        for pod_id in slices[qos]:
            floors[pod_id] = SharesFloor(weight[pod_id], level, budget, budget * weight[pod_id] // level)
    return floors


def _check_quota(quota_us: int, period_us: int) -> None:
    if period_us <= 0:
        raise ValueError(f"CFS period {period_us!r} µs must be positive")
    if quota_us <= 0:
        raise ValueError(f"CFS quota {quota_us!r} µs must be positive (no quota is None, not {quota_us!r})")


def quota_ceiling_mcpu(quota_us: int, period_us: int = DEFAULT_PERIOD_US) -> int:
    """The most CPU a quota allows on average, in mcpu, rounded down: quota_us × 1000 / period_us."""
    _check_quota(quota_us, period_us)
    return quota_us * MILLI_CPU_TO_CPU // period_us


def slices_per_period(quota_us: int, slice_us: int = DEFAULT_SLICE_US) -> float:
    """How many bandwidth slices a period's quota holds (talk: 100 ms / 5 ms = 20). Raises on non-positive input."""
    if slice_us <= 0:
        raise ValueError(f"sched_cfs_bandwidth_slice_us {slice_us!r} must be positive")
    if quota_us <= 0:
        raise ValueError(f"CFS quota {quota_us!r} µs must be positive")
    return quota_us / slice_us


def cpus_fed_at_once(quota_us: int, node_cpus: int, slice_us: int = DEFAULT_SLICE_US) -> int:
    """The most CPUs that can hold quota at the same time: one slice each (a last partial slice counts), ≤ node CPUs."""
    if node_cpus <= 0:
        raise ValueError(f"node CPU count {node_cpus!r} must be positive")
    return min(node_cpus, math.ceil(slices_per_period(quota_us, slice_us)))


@dataclass(frozen=True, slots=True)
class QuotaShape:
    """A quota seen from the scheduler: its ceiling, how many slices it splits into and how many CPUs they can feed."""

    quota_us: int
    period_us: int
    slice_us: int
    node_cpus: int | None
    ceiling_mcpu: int
    slices_per_period: float
    cpus_fed: int | None  # None when the node's CPU count is unknown


def quota_shape(
    quota_us: int,
    period_us: int = DEFAULT_PERIOD_US,
    node_cpus: int | None = None,
    slice_us: int = DEFAULT_SLICE_US,
) -> QuotaShape:
    """Ceiling, slices and fed CPUs of one quota, e.g. 100 ms per 100 ms on 88 CPUs → 1000m, 20 slices, 20 CPUs."""
    return QuotaShape(
        quota_us=quota_us,
        period_us=period_us,
        slice_us=slice_us,
        node_cpus=node_cpus,
        ceiling_mcpu=quota_ceiling_mcpu(quota_us, period_us),
        slices_per_period=slices_per_period(quota_us, slice_us),
        cpus_fed=cpus_fed_at_once(quota_us, node_cpus, slice_us) if node_cpus else None,
    )


@dataclass(frozen=True, slots=True)
class StrandedQuota:
    """Upper bound of the quota that expiring per-CPU slices can waste each period on an affected kernel."""

    cpus_touching: int  # min(node CPUs, runnable threads)
    stranded_us_per_period: int
    stranded_mcpu: int
    period_us: int


def stranded_quota(
    node_cpus: int,
    runnable_threads: int | None = None,
    period_us: int = DEFAULT_PERIOD_US,
    quota_us: int | None = None,
) -> StrandedQuota:
    """(min(CPUs, runnable threads) − 1) × 1 ms per period, and the same in mcpu (talk: 88 CPUs → 87 ms → 870m).

    One CPU is the one whose thread got throttled, so it strands nothing. Unknown threads count as every CPU.
    With `quota_us` the bound is capped at the quota: only handed-out quota can be stranded. Applies to kernels
    with the slice-expiry bug only (see apps.advisor.kernel); on fixed kernels nothing expires.
    """
    if node_cpus <= 0:
        raise ValueError(f"node CPU count {node_cpus!r} must be positive")
    if period_us <= 0:
        raise ValueError(f"CFS period {period_us!r} µs must be positive")
    if runnable_threads is not None and runnable_threads < 0:
        raise ValueError(f"runnable thread count {runnable_threads!r} is negative")
    touching = node_cpus if runnable_threads is None else min(node_cpus, runnable_threads)
    stranded_us = max(0, touching - 1) * MIN_CFS_RQ_RUNTIME_US
    if quota_us is not None:
        _check_quota(quota_us, period_us)
        stranded_us = min(stranded_us, quota_us)
    return StrandedQuota(
        cpus_touching=touching,
        stranded_us_per_period=stranded_us,
        stranded_mcpu=stranded_us * MILLI_CPU_TO_CPU // period_us,
        period_us=period_us,
    )


@dataclass(frozen=True, slots=True)
class ThrottledResponse:
    """When a single-threaded request needing `work_ms` of CPU answers under a quota (talk: 200 ms → 440 ms)."""

    work_ms: float
    quota_ms: float
    period_ms: float
    response_ms: float
    periods_throttled: int  # times the request waited for the next period
    usage_mcpu_over_periods: float  # CPU used over the whole periods it spans: what a usage graph shows (talk: 0.4)
    usage_mcpu_while_answering: float  # work / response time


def throttled_response(
    work_ms: float, quota_ms: float, period_ms: float = DEFAULT_PERIOD_US / 1000
) -> ThrottledResponse:
    """The talk's latency model for one thread starting at a period boundary with the full quota available.

    response ≈ (ceil(W/Q) − 1) × P + (W − (ceil(W/Q) − 1) × Q). A quota of at least one period cannot throttle one
    thread, so the response is the work itself. Raises ValueError for negative work or non-positive quota/period.
    """
    if work_ms < 0 or not math.isfinite(work_ms):
        raise ValueError(f"work {work_ms!r} ms must be a finite non-negative number")
    if quota_ms <= 0 or period_ms <= 0:
        raise ValueError(f"quota {quota_ms!r} ms and period {period_ms!r} ms must be positive")
    if work_ms == 0:
        return ThrottledResponse(work_ms, quota_ms, period_ms, 0.0, 0, 0.0, 0.0)
    per_period_ms = min(quota_ms, period_ms)
    # Rounding to 9 places keeps 1.1 / 0.1 = 11.000000000000002 from counting a twelfth period.
    periods_needed = max(1, math.ceil(round(work_ms / per_period_ms, 9)))
    if quota_ms >= period_ms:
        response_ms = work_ms
        throttled = 0
    else:
        throttled = periods_needed - 1
        response_ms = throttled * period_ms + (work_ms - throttled * quota_ms)
    return ThrottledResponse(
        work_ms=work_ms,
        quota_ms=quota_ms,
        period_ms=period_ms,
        response_ms=response_ms,
        periods_throttled=throttled,
        usage_mcpu_over_periods=work_ms / (periods_needed * period_ms) * MILLI_CPU_TO_CPU,
        usage_mcpu_while_answering=work_ms / response_ms * MILLI_CPU_TO_CPU,
    )
