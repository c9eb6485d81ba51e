"""What the advice rules read and write: the policy, one container's facts, a recommendation, and the few phrases and
number formats every rule shares. Pure Python."""

from __future__ import annotations

import math
from dataclasses import dataclass

from apps.advisor.cfs import DEFAULT_SLICE_US, quota_shape
from apps.advisor.effect import Expected
from apps.advisor.kernel import KernelVerdict
from apps.advisor.runtimes import Purpose, thread_knob
from apps.advisor.vocabulary import Kind, Severity
from apps.advisor.windows import WindowSummary
from apps.clusters.cgroup_scheme import weight_formula
from apps.clusters.kubelet import (
    DEFAULT_PERIOD_US,
    MILLI_CPU_TO_CPU,
    WeightFormula,
    quota_us_from_limit_mcpu,
    weight_from_shares,
)
from apps.words import plural


@dataclass(frozen=True, slots=True)
class Policy:
    """Every threshold the rules use. Ratios and fractions are in [0, 1]; CPU in mcpu."""

    throttle_target: float = 0.10  # Indeed aims at 0–10 % throttled periods (its KubeCon 2019 talk)
    critical_throttle_ratio: float = 0.25  # kubernetes-mixin CPUThrottlingHigh fires above 25 %
    min_periods: int = 50  # fewer periods in the window: not judged on throttling
    headroom: float = 1.2  # new limit or request = observed usage × headroom
    min_raise_factor: float = 1.2  # a raised limit is at least this × the old one (usage is capped by the limit)
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
        for name in ("headroom", "min_raise_factor", "thread_factor"):
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
    cgroup_version: int | None = None  # the node's, as detected (apps/clusters/cgroup_scheme.py); None: not known
    weight_mapping: str = ""  # cgroup v2 shares→weight mapping seen on the node: linear | quadratic | "" unknown
    # The CFS burst setting and its totals since the container started, as the node agent last read them; None: not
    # read (no agent, or a kernel before 5.14).
    burst_us: int | None = None
    bursts_total: int | None = None
    burst_seconds_total: float | None = None
    # The pod cgroup's own window (a pod-level quota's counters) and that quota's ceiling and where it comes from
    # (pod_quota.pod_ceiling); None: no pod-level counters stored, or no pod-level quota.
    pod_window: WindowSummary | None = None
    pod_ceiling_mcpu: int | None = None
    pod_ceiling_from: str = ""
    # Throttled time of each sampled period in the window, µs (the node agent's or the lab's period sampler; zeros
    # for periods without throttled time); None: window totals only.
    period_throttled_us: tuple[float, ...] | None = None
    # What tells the runtime, for the thread rules' knob (apps/advisor/runtimes.py): the spec's image, its CPU env
    # vars as sorted (name, value) pairs (runtimes.env_pairs), and the pod-level limit (spec.resources).
    image: str = ""
    cpu_env: tuple[tuple[str, str], ...] = ()
    pod_limit_mcpu: int | None = None

    @property
    def weight_formula(self) -> WeightFormula | None:
        """The cgroup v2 mapping the floor was split by; None when it was split by shares."""
        return weight_formula(self.cgroup_version, self.weight_mapping)

    def floor_weight(self, shares: int) -> int:
        """What `shares` weigh in this node's floor split: the v2 weight under its mapping, else the shares."""
        formula = self.weight_formula
        return weight_from_shares(shares, formula) if formula else shares


@dataclass(frozen=True, slots=True)
class Recommendation:
    """One piece of advice: what to change (summary), why with the numbers (detail), and the values to set."""

    kind: Kind
    severity: Severity
    summary: str
    detail: str
    suggested_request_mcpu: int | None = None
    suggested_limit_mcpu: int | None = None
    suggested_pod_limit_mcpu: int | None = None  # raise_pod_limit: the pod's, not the container's
    # What the change should do: the throttle ratio it should leave at most (None: no claim), and why in a line.
    expected_throttle_ratio_max: float | None = None
    expected_basis: str = ""


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


def is_throttled(window: WindowSummary, policy: Policy) -> bool:
    ratio = window.throttle_ratio
    return (
        ratio is not None
        and window.periods is not None
        and window.periods >= policy.min_periods
        and ratio > policy.throttle_target
    )


def usage_high_mcpu(window: WindowSummary) -> tuple[float | None, str]:
    """The usage figure to compare with the ceiling, and its name in the text."""
    if window.usage_p95_mcpu is not None:
        return window.usage_p95_mcpu, "p95 usage"
    if window.usage_active_mcpu is not None:
        return window.usage_active_mcpu, "usage per period it ran (lifetime)"
    return None, ""


def usage_typical_mcpu(window: WindowSummary) -> tuple[float | None, str]:
    """The usage figure that shows the quota is not being used up (talk: 0.3 CPU average under a 0.6 limit)."""
    if window.usage_avg_mcpu is not None:
        return window.usage_avg_mcpu, "average usage"
    if window.usage_active_mcpu is not None:
        return window.usage_active_mcpu, "usage per period it ran (lifetime)"
    return None, ""


def round_figure(value: float | None, digits: int) -> float | None:
    """A figure rounded for rows and pages; None (unknown) stays None, never 0."""
    return None if value is None else round(value, digits)


def sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def throttle_evidence(window: WindowSummary, policy: Policy, subject: str = "the container") -> str:
    scope = f"since {subject} started (lifetime)" if window.lifetime else "in this window"
    return (
        f"throttled in {format_ratio(window.throttle_ratio or 0.0)} of {plural(window.periods or 0, 'period')} {scope} "
        f"({window.throttled_periods:,} / {window.periods:,}; target {format_ratio(policy.throttle_target)})"
    )


def ratio_severity(window: WindowSummary, policy: Policy) -> Severity:
    ratio = window.throttle_ratio or 0.0
    return "critical" if ratio >= policy.critical_throttle_ratio else "warning"


def quota_text(facts: ContainerFacts, limit_mcpu: int) -> str:
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


def thread_knob_text(facts: ContainerFacts, cpus: int, purpose: Purpose, limit_mcpu: int | None = None) -> str:
    """The knob of the container's runtime for the thread rules, with `cpus` as its value; `limit_mcpu` is the
    limit the plan leaves (the current one by default)."""
    return thread_knob(
        facts.image,
        dict(facts.cpu_env),
        cpus=cpus,
        purpose=purpose,
        limit_mcpu=limit_mcpu if limit_mcpu is not None else facts.limit_mcpu,
        pod_limit_mcpu=facts.pod_limit_mcpu,
    )


def expected_text(expected: Expected) -> str:
    if expected.ratio_max is None:
        return f"Expected effect: {expected.basis}."
    return f"Expected after the change: throttled in at most {format_ratio(expected.ratio_max)} of periods ({expected.basis})."
