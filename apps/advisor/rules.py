"""Advice rules: from one container's facts and a window summary to recommendations. Pure Python.

Each rule says when it fires and what to say: it fires on the numbers in the facts, and its detail shows those
numbers and the arithmetic behind the suggestion. Every threshold is a field of Policy. A container with fewer than
`min_periods` periods is not judged on throttling, and no throttling rule fires when the ratio is undefined;
data_shortfalls() says what a container's data lacks for the rules that could not judge it yet.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from apps.advisor.cfs import DEFAULT_SLICE_US, quota_shape, stranded_quota
from apps.advisor.kernel import KernelVerdict
from apps.advisor.vocabulary import SEVERITY_RANK, THROTTLING_KINDS, Kind, Severity
from apps.advisor.windows import WindowSummary
from apps.clusters.kubelet import DEFAULT_PERIOD_US, MILLI_CPU_TO_CPU, quota_us_from_limit_mcpu
from apps.words import plural


@dataclass(frozen=True, slots=True)
class Policy:
    """Every threshold the rules use. Ratios and fractions are in [0, 1]; CPU in mcpu."""

    throttle_target: float = 0.10  # Indeed aims at 0–10 % throttled periods (its KubeCon 2019 talk)
    critical_throttle_ratio: float = 0.25  # kubernetes-mixin CPUThrottlingHigh fires above 25 %
    min_periods: int = 50  # fewer periods in the window: not judged on throttling
    headroom: float = 1.2  # new limit or request = observed usage × headroom
    min_raise_factor: float = 1.2  # a raised limit is at least this × the old one (usage is capped by the limit)
    burst_raise_factor: float = 2.0  # throttled by bursts the samples average away: a starting point, re-checked
    near_ceiling_fraction: float = 0.8  # p95 usage ≥ this × limit: the limit itself is the bottleneck
    well_below_quota_fraction: float = 0.6  # average usage ≤ this × limit while throttled: the kernel bug's symptom
    low_usage_fraction: float = 0.3  # max usage < this × request all window long: lower_request
    min_coverage_for_lower_request: float = 0.5  # share of the window the samples must cover
    min_samples_for_lower_request: int = 20
    thread_factor: float = 4.0  # threads > this × ceil(limit in CPUs): cut_threads
    # use_whole_cores: the node has at least this × ceil(limit) CPUs, so the threads can spread the quota over more
    # CPUs than the limit holds whole (on a 2-CPU node a 500m limit with 2 busy threads already does).
    spread_factor: int = 2
    upgrade_margin_mcpu_per_node_cpu: int = 10  # talk Q&A: until upgraded, raise limits by 10 × node CPUs millicores
    limit_step_mcpu: int = 50  # suggested limits and requests are rounded up to this
    request_step_mcpu: int = 50

    def __post_init__(self) -> None:
        for name in (
            "throttle_target",
            "critical_throttle_ratio",
            "near_ceiling_fraction",
            "well_below_quota_fraction",
            "low_usage_fraction",
            "min_coverage_for_lower_request",
        ):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"policy {name} = {value!r} is outside [0, 1]")
        for name in ("headroom", "min_raise_factor", "burst_raise_factor", "thread_factor"):
            value = getattr(self, name)
            if not value >= 1.0:
                raise ValueError(f"policy {name} = {value!r} must be at least 1")
        for name in (
            "min_periods",
            "min_samples_for_lower_request",
            "spread_factor",
            "upgrade_margin_mcpu_per_node_cpu",
            "limit_step_mcpu",
            "request_step_mcpu",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or value < (1 if name.endswith("step_mcpu") else 0):
                raise ValueError(f"policy {name} = {value!r} must be a non-negative integer (steps positive)")


@dataclass(frozen=True, slots=True)
class ContainerFacts:
    """What the advisor knows about one container: its resources, its node and its window. None means unknown."""

    window: WindowSummary
    request_mcpu: int | None = None
    limit_mcpu: int | None = None
    period_us: int = DEFAULT_PERIOD_US
    node_cpus: int | None = None  # whole CPUs the node has (capacity)
    node_allocatable_mcpu: int | None = None
    cpu_manager_policy: str = ""  # "static" | "none" | "" (the kubelet config was not read)
    qos_class: str = ""  # Guaranteed | Burstable | BestEffort
    kernel: KernelVerdict | None = None
    shares_floor_mcpu: int | None = None  # from cfs.pod_shares_floor / container_shares_floor
    node_total_shares: int | None = None  # Σ shares of every pod on the node, to show the floor's arithmetic
    cfs_slice_us: int | None = None  # sched_cfs_bandwidth_slice_us read on the node; None: the default 5000 assumed


@dataclass(frozen=True, slots=True)
class Recommendation:
    """One piece of advice: what to change (summary), why with the numbers (detail), and the values to set."""

    kind: Kind
    severity: Severity
    summary: str
    detail: str
    suggested_request_mcpu: int | None = None
    suggested_limit_mcpu: int | None = None


def format_mcpu(mcpu: float, *, with_cpus: bool = True) -> str:
    """600 → "600m", 1500 → "1,500m (1.5 CPUs)": millicores, with CPUs spelled out from one CPU up unless
    `with_cpus` is False ("1,500m", as table cells read). The pages' `mcpu` filter calls this too, so advice text
    and the figures beside it write the same number the same way."""
    rounded = round(mcpu)
    text = f"{rounded:,}m"
    if with_cpus and rounded >= MILLI_CPU_TO_CPU:
        cpus = rounded / MILLI_CPU_TO_CPU
        text += f" ({cpus:g} CPU{'' if cpus == 1 else 's'})"
    return text


def format_ms(us: float) -> str:
    """Microseconds as milliseconds without noise: 60000 → "60 ms", 33333 → "33.3 ms"."""
    return f"{us / 1000:.3g} ms" if us < 1_000_000 else f"{us / 1000:,.0f} ms"


def format_ratio(ratio: float) -> str:
    """0.4512 → "45%"; small non-zero ratios keep a decimal ("0.4%")."""
    percent = ratio * 100
    return f"{percent:.0f}%" if percent >= 10 or percent == 0 else f"{percent:.1f}%"


def round_up_mcpu(mcpu: float, step_mcpu: int) -> int:
    """Round up to a multiple of step (at least one step): 721 → 750 with 50, 1200 → 2000 with 1000."""
    return max(step_mcpu, math.ceil(round(mcpu, 6) / step_mcpu) * step_mcpu)


def _is_throttled(window: WindowSummary, policy: Policy) -> bool:
    ratio = window.throttle_ratio
    return (
        ratio is not None
        and window.periods is not None
        and window.periods >= policy.min_periods
        and ratio > policy.throttle_target
    )


def _usage_high_mcpu(window: WindowSummary) -> tuple[float | None, str]:
    """The usage figure to compare with the ceiling, and its name in the text."""
    if window.usage_p95_mcpu is not None:
        return window.usage_p95_mcpu, "p95 usage"
    if window.usage_active_mcpu is not None:
        return window.usage_active_mcpu, "usage per period it ran (lifetime)"
    return None, ""


def _usage_typical_mcpu(window: WindowSummary) -> tuple[float | None, str]:
    """The usage figure that shows the quota is not being used up (talk: 0.3 CPU average under a 0.6 limit)."""
    if window.usage_avg_mcpu is not None:
        return window.usage_avg_mcpu, "average usage"
    if window.usage_active_mcpu is not None:
        return window.usage_active_mcpu, "usage per period it ran (lifetime)"
    return None, ""


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def _throttle_evidence(window: WindowSummary, policy: Policy) -> str:
    scope = "since the container started (lifetime)" if window.lifetime else "in this window"
    return (
        f"throttled in {format_ratio(window.throttle_ratio or 0.0)} of {plural(window.periods or 0, 'period')} {scope} "
        f"({window.throttled_periods:,} / {window.periods:,}; target {format_ratio(policy.throttle_target)})"
    )


def _ratio_severity(window: WindowSummary, policy: Policy) -> Severity:
    ratio = window.throttle_ratio or 0.0
    return "critical" if ratio >= policy.critical_throttle_ratio else "warning"


def _quota_text(facts: ContainerFacts, limit_mcpu: int) -> str:
    quota_us = quota_us_from_limit_mcpu(limit_mcpu, facts.period_us) or 0
    slice_us = facts.cfs_slice_us or DEFAULT_SLICE_US
    shape = quota_shape(quota_us, facts.period_us, facts.node_cpus, slice_us)
    text = (
        f"limit {format_mcpu(limit_mcpu)} = {format_ms(quota_us)} per {format_ms(facts.period_us)} period; "
        f"the quota is {plural(shape.slices_per_period, 'slice')} of {format_ms(slice_us)}"
    )
    if facts.cfs_slice_us is None:
        text += " (default sched_cfs_bandwidth_slice_us assumed)"
    if shape.cpus_fed is not None:
        text += (
            f", so at most {shape.cpus_fed} of this node's {plural(facts.node_cpus or 0, 'CPU')} can hold quota at once"
        )
    return text


def _set_request(facts: ContainerFacts, policy: Policy) -> Recommendation | None:
    if facts.request_mcpu:
        return None
    window = facts.window
    floor = ""
    if facts.shares_floor_mcpu is not None and facts.node_total_shares:
        floor = (
            f" With 2 of the {facts.node_total_shares:,} shares on this node its floor is "
            f"{format_mcpu(facts.shares_floor_mcpu)} when every neighbour is busy."
        )
    suggested = None
    usage = ""
    if window.usage_p95_mcpu is not None:
        suggested = round_up_mcpu(window.usage_p95_mcpu * policy.headroom, policy.request_step_mcpu)
        usage = (
            f" Suggested request: p95 usage {format_mcpu(window.usage_p95_mcpu)} × {policy.headroom:g} headroom "
            f"= {format_mcpu(window.usage_p95_mcpu * policy.headroom)}, rounded up to {format_mcpu(suggested)}."
        )
    return Recommendation(
        kind="set_request",
        severity="warning",
        summary="Set a CPU request: without one the container is guaranteed almost nothing under contention",
        detail=(
            "No CPU request: the kubelet gives it the minimum of 2 cpu.shares (BestEffort), so when the node is busy "
            f"it gets ~0 CPU.{floor}{usage} A request also lets the scheduler place it where the CPU exists."
        ),
        suggested_request_mcpu=suggested,
    )


def _upgrade_kernel(facts: ContainerFacts, policy: Policy, throttled: bool) -> Recommendation | None:
    kernel = facts.kernel
    limit = facts.limit_mcpu
    if not throttled or kernel is None or not limit or kernel.verdict not in ("affected", "unknown"):
        return None
    window = facts.window
    usage, usage_name = _usage_typical_mcpu(window)
    if usage is None or usage > policy.well_below_quota_fraction * limit:
        return None
    severity = _ratio_severity(window, policy)
    fixed_in = ", ".join(kernel.fixed_in) if kernel.fixed_in else "5.4 or a stable release carrying de53fd7aedb1"
    if kernel.verdict == "affected":
        if kernel.bug == "clock_drift":
            bug = "the bandwidth-timer clock-drift bug (inadvertent throttling, fixed by 512ac999d275)"
        else:
            bug = "the per-CPU slice expiry bug (CVE-2019-19922, fixed by de53fd7aedb1)"
        verdict_text = f"Kernel {kernel.version} is affected by {bug}."
        summary = f"Upgrade the node kernel (fixed in {fixed_in}): it throttles this container while its usage is low"
    else:
        severity = "warning" if severity == "critical" else "info"
        verdict_text = (
            f"Kernel {kernel.version}: unknown whether it carries the fix (de53fd7aedb1, CVE-2019-19922); "
            "check with the vendor or run the kernel probe."
        )
        summary = "Check the node kernel: throttled at low usage, the slice expiry bug is possible (unknown kernel)"
    parts = [verdict_text]
    if kernel.reasons:
        parts.append(f"Evidence: {kernel.reasons[0]}")
    parts += [
        f"This container was {_throttle_evidence(window, policy)} while its {usage_name} was {format_mcpu(usage)}, "
        f"{format_ratio(usage / limit)} of its {format_mcpu(limit)} limit (at most "
        f"{format_ratio(policy.well_below_quota_fraction)} counts as well below): the quota is not being used up, "
        "yet it runs out.",
    ]
    if facts.node_cpus and kernel.bug != "clock_drift":
        quota_us = quota_us_from_limit_mcpu(limit, facts.period_us)
        stranded = stranded_quota(facts.node_cpus, window.threads_max, facts.period_us, quota_us)
        if window.threads_max:
            touching = f"(min({plural(facts.node_cpus, 'CPU')}, {plural(window.threads_max, 'thread')}) − 1)"
        else:
            touching = f"({plural(facts.node_cpus, 'CPU')} − 1, thread count unknown)"
        parts.append(
            f"On this {facts.node_cpus}-CPU node up to {touching} × 1 ms = "
            f"{format_ms(stranded.stranded_us_per_period)} of each {format_ms(facts.period_us)} period can expire "
            f"unused on per-CPU run queues, i.e. {format_mcpu(stranded.stranded_mcpu)} lost."
        )
    parts.append(f"Fixed in: {fixed_in}.")
    suggested_limit = None
    if facts.node_cpus:
        margin = policy.upgrade_margin_mcpu_per_node_cpu * facts.node_cpus
        suggested_limit = round_up_mcpu(limit + margin, policy.limit_step_mcpu)
        parts.append(
            f"Until then raise the limit by ~{policy.upgrade_margin_mcpu_per_node_cpu}m × "
            f"{plural(facts.node_cpus, 'CPU')} = {format_mcpu(margin)}: {format_mcpu(limit)} + {format_mcpu(margin)} = "
            f"{format_mcpu(limit + margin)}, rounded up to {format_mcpu(suggested_limit)}, or use whole cores."
        )
    else:
        parts.append("Until then raise the limit by ~10m per node CPU, or use whole cores.")
    return Recommendation(
        kind="upgrade_kernel",
        severity=severity,
        summary=summary,
        detail=" ".join(parts),
        suggested_limit_mcpu=suggested_limit,
    )


def _raise_limit(facts: ContainerFacts, policy: Policy, throttled: bool) -> Recommendation | None:
    limit = facts.limit_mcpu
    if not throttled or not limit:
        return None
    window = facts.window
    usage, usage_name = _usage_high_mcpu(window)
    if usage is None:
        return None
    if usage < policy.near_ceiling_fraction * limit:
        return _raise_limit_for_bursts(facts, policy)
    from_usage = usage * policy.headroom
    from_limit = limit * policy.min_raise_factor
    suggested = round_up_mcpu(max(from_usage, from_limit), policy.limit_step_mcpu)
    capped = ""
    if facts.node_cpus and suggested > facts.node_cpus * MILLI_CPU_TO_CPU:
        suggested = facts.node_cpus * MILLI_CPU_TO_CPU
        capped = f", capped at the node's {plural(facts.node_cpus, 'CPU')}"
    detail = (
        f"{_sentence(_throttle_evidence(window, policy))}; its {usage_name} {format_mcpu(usage)} is "
        f"{format_ratio(usage / limit)} of the limit (near the ceiling from "
        f"{format_ratio(policy.near_ceiling_fraction)}). {_sentence(_quota_text(facts, limit))}. "
        "Usage cannot exceed the limit, so the real demand is at least this. Suggested limit: max("
        f"{format_mcpu(usage)} × {policy.headroom:g}, {format_mcpu(limit)} × {policy.min_raise_factor:g}) = "
        f"{format_mcpu(max(from_usage, from_limit))}, rounded up to {format_mcpu(suggested)}{capped}; check the "
        "ratio again after the change. Where the node is not shared with other workloads, dropping the limit "
        "avoids throttling altogether (the request still sets the floor)."
    )
    return Recommendation(
        kind="raise_limit",
        severity=_ratio_severity(window, policy),
        summary=f"Raise the CPU limit from {format_mcpu(limit)} to {format_mcpu(suggested)}: it is used up",
        detail=detail,
        suggested_limit_mcpu=suggested,
    )


def _raise_limit_for_bursts(facts: ContainerFacts, policy: Policy) -> Recommendation | None:
    """Throttled while its sampled usage stays low, on a kernel known to be fixed: the quota is used up by bursts
    shorter than the sample interval (one-minute averages hide ten-second bursts; the ratio shows them).
    On an affected or unknown kernel the same picture points at the kernel first (upgrade_kernel)."""
    limit = facts.limit_mcpu
    window = facts.window
    if not limit or facts.kernel is None or facts.kernel.verdict != "fixed" or window.lifetime:
        return None
    usage, usage_name = _usage_typical_mcpu(window)
    if usage is None:
        return None
    suggested = round_up_mcpu(limit * policy.burst_raise_factor, policy.limit_step_mcpu)
    if facts.node_cpus and suggested > facts.node_cpus * MILLI_CPU_TO_CPU:
        suggested = facts.node_cpus * MILLI_CPU_TO_CPU
    detail = (
        f"{_sentence(_throttle_evidence(window, policy))}, yet its {usage_name} is only {format_mcpu(usage)}, "
        f"{format_ratio(usage / limit)} of the limit, on a kernel without the slice expiry bug "
        f"({facts.kernel.version}). So it runs in bursts that spend the whole quota inside single periods and "
        "then wait, shorter than the sample interval that averages them away: the throttle ratio, not the usage "
        f"graph, shows them. {_sentence(_quota_text(facts, limit))}. The bursts' height cannot be read from "
        f"averages: start at {format_mcpu(limit)} × {policy.burst_raise_factor:g} = {format_mcpu(suggested)} and "
        "check the ratio again; where the node is not shared, dropping the limit avoids the waits altogether."
    )
    return Recommendation(
        kind="raise_limit",
        severity=_ratio_severity(window, policy),
        summary=(
            f"Raise the CPU limit from {format_mcpu(limit)} to {format_mcpu(suggested)}: bursts hit it "
            f"though it averages {format_mcpu(usage)}"
        ),
        detail=detail,
        suggested_limit_mcpu=suggested,
    )


def _use_whole_cores(facts: ContainerFacts, policy: Policy, throttled: bool) -> Recommendation | None:
    limit = facts.limit_mcpu
    if not throttled or not limit or limit % MILLI_CPU_TO_CPU == 0:
        return None
    whole = math.ceil(limit / MILLI_CPU_TO_CPU) * MILLI_CPU_TO_CPU
    cores = whole // MILLI_CPU_TO_CPU
    if not facts.node_cpus or facts.node_cpus < max(2, policy.spread_factor * cores):
        return None
    threads = facts.window.threads_max
    if threads is None or threads <= cores:
        # Unknown, or no more threads than whole cores: no evidence that they spread the quota any wider.
        return None
    spread = min(facts.node_cpus, threads)
    conditions = (
        "exclusive cores need all three: kubelet cpuManagerPolicy static, a Guaranteed pod (requests equal "
        "limits for CPU and memory in every container) and an integer CPU request"
    )
    policy_name = facts.cpu_manager_policy
    if policy_name == "static":
        severity: Severity = "warning"
        where = (
            f"This node's CPU manager policy is static: with request = limit = {format_mcpu(whole)} in a Guaranteed "
            f"pod the container gets {plural(cores, 'exclusive core')}, its threads stay on them and so does its "
            "quota, so almost nothing can be stranded on other CPUs. Since Kubernetes 1.33 (DisableCPUQuotaWithExclusiveCPUs, "
            "on by default) such containers run without a quota at all; before 1.33 they keep one."
        )
        if facts.qos_class and facts.qos_class != "Guaranteed":
            where += f" The pod is {facts.qos_class}: every container's requests must equal its limits first."
    elif policy_name == "none":
        severity = "info"
        where = (
            "This node's CPU manager policy is none: whole cores are not exclusive here, the threads still run on "
            f"any of the {plural(facts.node_cpus, 'CPU')} and only the rounding adds quota; {conditions}."
        )
    else:
        severity = "info"
        where = (
            "This node's CPU manager policy is unknown (reading the kubelet config is opt-in); whole cores become "
            f"exclusive only under the static policy: {conditions}."
        )
    detail = (
        f"{_sentence(_throttle_evidence(facts.window, policy))}. {_sentence(_quota_text(facts, limit))}: with a "
        f"fractional limit on a {facts.node_cpus}-CPU node its threads can burn the quota on up to "
        f"{plural(spread, 'CPU')} at once, then every one of them waits for the next period. "
        f"Rounding up: ceil({format_mcpu(limit, with_cpus=False)} / 1,000m) = {plural(cores, 'CPU')}, request = limit "
        f"= {format_mcpu(whole)}. {where}"
    )
    return Recommendation(
        kind="use_whole_cores",
        severity=severity,
        summary=(
            f"Use whole cores: set request = limit = {format_mcpu(whole)} instead of a "
            f"{format_mcpu(limit, with_cpus=False)} limit"
        ),
        detail=detail,
        suggested_request_mcpu=whole,
        suggested_limit_mcpu=whole,
    )


_THREAD_KNOBS = (
    "Go: GOMAXPROCS={n} or go.uber.org/automaxprocs (Go ≥ 1.25 sets it from the CPU limit by itself, rounded up, "
    "at least 2; older Go uses every host CPU); JVM: -XX:ActiveProcessorCount={n} (JVM ≥ 8u191 reads the limit, "
    "but its pools can still be large); Node.js: UV_THREADPOOL_SIZE (default 4); .NET: DOTNET_PROCESSOR_COUNT={n}; "
    "Python: os.cpu_count() ignores cgroups, size pools from the limit (3.13+: PYTHON_CPU_COUNT={n}); and the "
    "application's own worker pool sizes"
)


def _cut_threads(facts: ContainerFacts, policy: Policy, throttled: bool) -> Recommendation | None:
    limit = facts.limit_mcpu
    threads = facts.window.threads_max
    if not throttled or not limit or not threads:
        return None
    cpus = math.ceil(limit / MILLI_CPU_TO_CPU)
    if threads <= policy.thread_factor * cpus:
        return None
    fed = ""
    if facts.node_cpus:
        quota_us = quota_us_from_limit_mcpu(limit, facts.period_us) or 0
        shape = quota_shape(quota_us, facts.period_us, facts.node_cpus, facts.cfs_slice_us or DEFAULT_SLICE_US)
        parallel = min(threads, shape.cpus_fed or threads)
        fed = (
            f" Up to {parallel} of them can run at once on this {facts.node_cpus}-CPU node and spend the "
            f"{format_ms(quota_us)} quota in about {format_ms(quota_us / parallel)}, then all wait for the next "
            f"{format_ms(facts.period_us)} period."
        )
    detail = (
        f"{_sentence(_throttle_evidence(facts.window, policy))} with up to {plural(threads, 'thread')}, more than "
        f"{policy.thread_factor:g} × ceil({format_mcpu(limit, with_cpus=False)} / 1,000m) = "
        f"{policy.thread_factor * cpus:g} for a "
        f"{format_mcpu(limit)} limit.{fed} Cap the runtime's parallelism at ceil(limit) = {cpus}: "
        f"{_THREAD_KNOBS.format(n=cpus)}. Fewer runnable threads use the quota more evenly (in Indeed's talk on "
        "CFS throttling, GOMAXPROCS 2–3 cut usage, throttling and latency together). The thread count includes idle "
        "threads: check how many actually run."
    )
    return Recommendation(
        kind="cut_threads",
        severity="warning",
        summary=f"Cut threads: {plural(threads, 'thread')} share a {format_mcpu(limit)} limit; cap parallelism at {cpus}",
        detail=detail,
    )


def _add_threads(facts: ContainerFacts, policy: Policy) -> Recommendation | None:
    request = facts.request_mcpu
    threads = facts.window.threads_max
    if not request or not threads or threads * MILLI_CPU_TO_CPU >= request:
        return None
    suggested = round_up_mcpu(threads * MILLI_CPU_TO_CPU, policy.request_step_mcpu)
    detail = (
        f"At most {plural(threads, 'thread')} {'was' if threads == 1 else 'were'} seen while it requests "
        f"{format_mcpu(request)}: a thread runs on one CPU at a time, so it can never use more than "
        f"{format_mcpu(threads * MILLI_CPU_TO_CPU)} and the rest of its request is reserved for nothing (a "
        "single-threaded service on a 2-CPU request has been seen answering in 62 ms instead of 50 ms). Give it at least as many worker threads "
        f"as requested CPUs, or lower the request to {format_mcpu(suggested)}."
    )
    return Recommendation(
        kind="add_threads",
        severity="info",
        summary=f"Add threads: {plural(threads, 'thread')} cannot use a {format_mcpu(request)} request",
        detail=detail,
        suggested_request_mcpu=suggested if suggested < request else None,
    )


def _lower_request(facts: ContainerFacts, policy: Policy) -> Recommendation | None:
    request = facts.request_mcpu
    window = facts.window
    usage_max = window.usage_max_mcpu
    if not request or window.lifetime or usage_max is None or window.window_start is None:
        return None
    if usage_max >= policy.low_usage_fraction * request:
        return None
    window_seconds = (window.window_end - window.window_start).total_seconds()
    covered = window.covered_seconds or 0.0
    if window.samples < policy.min_samples_for_lower_request or (
        window_seconds > 0 and covered < policy.min_coverage_for_lower_request * window_seconds
    ):
        return None
    base = max((window.usage_p95_mcpu or 0.0) * policy.headroom, usage_max)
    suggested = round_up_mcpu(base, policy.request_step_mcpu)
    if suggested >= request:
        return None
    detail = (
        f"Its highest usage in the window was {format_mcpu(usage_max)} (p95 "
        f"{format_mcpu(window.usage_p95_mcpu or 0.0)}, {plural(window.samples, 'sample')} over {covered / 60:.0f} min), below "
        f"{format_ratio(policy.low_usage_fraction)} of its {format_mcpu(request)} request. Suggested request: "
        f"max(p95 × {policy.headroom:g}, max) = {format_mcpu(base)}, rounded up to {format_mcpu(suggested)}; this "
        f"frees {format_mcpu(request - suggested)} of requested CPU, which raises the shares floor of its neighbours."
    )
    if facts.qos_class == "Guaranteed":
        detail += (
            " The pod is Guaranteed: a request below the limit makes it Burstable (and loses exclusive cores under "
            "the static CPU manager policy); lower the limit with it to stay Guaranteed."
        )
    return Recommendation(
        kind="lower_request",
        severity="info",
        summary=f"Lower the CPU request from {format_mcpu(request)} to {format_mcpu(suggested)}: it is not used",
        detail=detail,
        suggested_request_mcpu=suggested,
    )


def advise(facts: ContainerFacts, policy: Policy) -> tuple[Recommendation, ...]:
    """Every recommendation that applies to this container, most severe first (ties keep the table's order)."""
    throttled = _is_throttled(facts.window, policy)
    found: list[Recommendation] = []
    for recommendation in (
        _upgrade_kernel(facts, policy, throttled),
        _raise_limit(facts, policy, throttled),
        _use_whole_cores(facts, policy, throttled),
        _cut_threads(facts, policy, throttled),
        _add_threads(facts, policy),
        _lower_request(facts, policy),
        _set_request(facts, policy),
    ):
        if recommendation is not None:
            found.append(recommendation)
    if len(found) > 1:
        found.sort(key=lambda recommendation: SEVERITY_RANK[recommendation.severity])
    return tuple(found)


@dataclass(frozen=True, slots=True)
class Shortfall:
    """What a container's figures lack before some rules can judge it: `have` of the `need` units they ask for."""

    unit: Literal["minutes", "samples", "periods"]
    have: int
    need: int
    kinds: tuple[Kind, ...]  # the rules that could not judge for want of it

    @property
    def text(self) -> str:
        """ "7 of 30 minutes", "12 of 50 periods"."""
        return f"{self.have:,} of {plural(self.need, self.unit[:-1])}"


def data_shortfalls(facts: ContainerFacts, policy: Policy, window_seconds: float) -> tuple[Shortfall, ...]:
    """What the container's data is short of for the rules that apply to it, minutes first; () when every rule could
    judge. `window_seconds` is the window's length (lifetime figures have no start to measure it by).

    The throttling rules (a container with a limit) need `min_periods` periods. lower_request (a request) needs a
    window, not lifetime figures, whose samples cover `min_coverage_for_lower_request` of it and number
    `min_samples_for_lower_request` — unless its usage already rules it out: more samples only raise the maximum.
    The other rules judge on whatever there is.
    """
    window = facts.window
    found: list[Shortfall] = []
    request = facts.request_mcpu
    usage_max = window.usage_max_mcpu
    if request and not (usage_max is not None and usage_max >= policy.low_usage_fraction * request):
        if window.window_start is not None:
            window_seconds = (window.window_end - window.window_start).total_seconds()
        need_seconds = policy.min_coverage_for_lower_request * window_seconds
        covered_seconds = 0.0 if window.lifetime else window.covered_seconds or 0.0
        if window.lifetime or covered_seconds < need_seconds:
            need_minutes = math.ceil(round(need_seconds / 60, 6))
            found.append(Shortfall("minutes", int(covered_seconds // 60), need_minutes, ("lower_request",)))
        samples = 0 if window.lifetime else window.samples
        if samples < policy.min_samples_for_lower_request:
            found.append(Shortfall("samples", samples, policy.min_samples_for_lower_request, ("lower_request",)))
    periods = window.periods or 0
    if facts.limit_mcpu and periods < policy.min_periods:
        found.append(Shortfall("periods", periods, policy.min_periods, THROTTLING_KINDS))
    return tuple(found)


def shortfall_text(shortfalls: tuple[Shortfall, ...]) -> str:
    """ "not enough data yet (7 of 30 minutes)": the first shortfall, the one most data will fix; "" for none."""
    return f"not enough data yet ({shortfalls[0].text})" if shortfalls else ""
