"""The pod's own quota: when every container of a pod has a CPU limit, or the pod sets `spec.resources`, the kubelet
gives the pod cgroup a CFS quota too, and it throttles all of the pod's containers together
(docs/domain.md#pod-level-quota). Pure Python: the figures come from the pod cgroup's stored counters.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from apps.clusters.kubelet import quota_us_from_limit_mcpu

from .cfs import quota_ceiling_mcpu
from .facts import format_mcpu
from .windows import WindowSummary

# The pod's ratio must exceed its worst container's by this much to count as the pod's own throttling.
BEYOND_CONTAINERS = 0.05


@dataclass(frozen=True, slots=True)
class PodQuota:
    ceiling_mcpu: int | None  # the pod cgroup's quota in millicores, None when the pod has none
    ceiling_from: str  # where it comes from, for a person
    window: WindowSummary  # the pod cgroup's own counters
    worst_container_ratio: float | None
    throttles_beyond_containers: bool
    note: str


def pod_ceiling(
    pod_limit_mcpu: int | None,
    container_limits: Sequence[int | None],
    init_limit_mcpu: int | None = None,
    init_unlimited: bool = False,
) -> tuple[int | None, str]:
    """The most CPU the pod cgroup's quota allows, as the kubelet sets it (ResourceConfigForPod, resource.PodLimits):
    from the pod-level limit, else, when every container and init container has a limit, from the larger of the
    containers' sum and the init phase's limit (the kubelet's 1 ms minimum quota applies); else none."""
    if pod_limit_mcpu is not None:
        limit, source = pod_limit_mcpu, "the pod's own limit (spec.resources.limits.cpu)"
    elif container_limits and all(limit is not None for limit in container_limits) and not init_unlimited:
        limit, source = sum(lim for lim in container_limits if lim is not None), "the sum of its containers' limits"
        if init_limit_mcpu is not None and init_limit_mcpu > limit:
            limit, source = init_limit_mcpu, "its largest init container's limit (with the sidecars started before it)"
    else:
        return None, ""
    quota = quota_us_from_limit_mcpu(limit)
    return (quota_ceiling_mcpu(quota) if quota else None), source


def judge_pod_quota(
    window: WindowSummary,
    *,
    pod_limit_mcpu: int | None,
    container_limits: Sequence[int | None],
    container_ratios: Sequence[float | None],
    target: float,
    init_limit_mcpu: int | None = None,
    init_unlimited: bool = False,
) -> PodQuota | None:
    """What the pod cgroup's throttling says beside its containers'; None when it has no CFS counters."""
    ratio = window.throttle_ratio
    if ratio is None or window.periods is None:
        return None
    ceiling, source = pod_ceiling(pod_limit_mcpu, container_limits, init_limit_mcpu, init_unlimited)
    measured = [r for r in container_ratios if r is not None]
    worst = max(measured, default=None)
    beyond = ratio > target and (worst is None or ratio > worst + BEYOND_CONTAINERS)
    when = "since the pod started" if window.lifetime else "in this window"
    quota = f"{format_mcpu(ceiling)}, {source}" if ceiling is not None else "its pod cgroup's quota"
    figures = f"throttled in {ratio:.0%} of its periods {when} ({window.throttled_periods} of {window.periods})"
    if beyond:
        containers = (
            "none of its containers reported throttling" if worst is None else f"its worst container {worst:.0%}"
        )
        fix = (
            "raise the pod's limit (spec.resources.limits.cpu)"
            if pod_limit_mcpu is not None
            else "raise its containers' limits together (their sum is the pod's quota), or set a pod-level limit"
        )
        note = (
            f"The pod's own quota ({quota}) {figures}; {containers}. Raising one container's limit does not lift "
            f"it: {fix}."
        )
    elif ratio > target:
        note = f"The pod's own quota ({quota}) {figures}, as its containers' own quotas do (worst {worst or 0:.0%})."
    else:
        note = f"The pod's own quota ({quota}) {figures}: under the {target:.0%} target."
    return PodQuota(ceiling, source, window, worst, beyond, note)
