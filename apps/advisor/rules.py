"""Advice rules: from one container's facts and a window summary to recommendations. Pure Python.

Each rule says when it fires and what to say: it fires on the numbers in the facts, and its detail shows those
numbers and the arithmetic behind the suggestion. Every threshold is a field of Policy. A container with fewer than
`min_periods` periods is not judged on throttling, and no throttling rule fires when the ratio is undefined;
data_shortfalls() says what a container's data lacks for the rules that could not judge it yet.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal

from apps.advisor.cfs import DEFAULT_SLICE_US, quota_shape, stranded_quota
from apps.advisor.effect import (
    Evidence,
    Expected,
    expected_after_limit,
    expected_curve,
    smallest_limit_under_target,
)
from apps.advisor.facts import (
    ContainerFacts,
    Policy,
    Recommendation,
    expected_text,
    format_mcpu,
    format_ms,
    format_ratio,
    is_throttled,
    quota_text,
    ratio_severity,
    round_up_mcpu,
    sentence,
    thread_knob_text,
    throttle_evidence,
    usage_high_mcpu,
    usage_typical_mcpu,
)
from apps.advisor.pod_quota import BEYOND_CONTAINERS
from apps.advisor.pressure import pressure_of
from apps.advisor.request_rules import add_threads, lower_request, set_request
from apps.advisor.versions import EXCLUSIVE_CPUS_NO_QUOTA, dotted
from apps.advisor.vocabulary import SEVERITY_RANK, THROTTLING_KINDS, Kind, Severity
from apps.clusters.kubelet import (
    MILLI_CPU_TO_CPU,
    quota_us_from_limit_mcpu,
)
from apps.words import plural


def _upgrade_kernel(facts: ContainerFacts, policy: Policy, throttled: bool) -> Recommendation | None:
    kernel = facts.kernel
    limit = facts.limit_mcpu
    if not throttled or kernel is None or not limit or kernel.verdict not in ("affected", "unknown"):
        return None
    window = facts.window
    usage, usage_name = usage_typical_mcpu(window)
    if usage is None or usage > policy.well_below_quota_fraction * limit:
        return None
    severity = ratio_severity(window, policy)
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
        f"This container was {throttle_evidence(window, policy)} while its {usage_name} was {format_mcpu(usage)}, "
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
    evidence = evidence_of(facts)
    if suggested_limit is not None and evidence is not None:
        interim = expected_after_limit(evidence, suggested_limit, policy.throttle_target, policy.headroom)
        expected = Expected(interim.ratio_max, f"until the upgrade, with the raised limit: {interim.basis}")
    else:
        expected = Expected(None, "no claim: the upgrade returns the stranded quota, which the lab cannot test here")
    parts.append(
        expected_text(expected) + " The upgrade itself cannot be applied in the lab; the kernel probe measures a node."
    )
    return Recommendation(
        kind="upgrade_kernel",
        severity=severity,
        summary=summary,
        detail=" ".join(parts),
        suggested_limit_mcpu=suggested_limit,
        expected_throttle_ratio_max=expected.ratio_max,
        expected_basis=expected.basis,
    )


@dataclass(frozen=True, slots=True)
class _Raise:
    """The one limit a throttled container's plan sets, what it should do, and how it was found (a sentence)."""

    limit_mcpu: int
    expected: Expected
    how: str


def evidence_of(facts: ContainerFacts) -> Evidence | None:
    """The counters the expected effect rests on; None without a limit or periods."""
    window = facts.window
    if not facts.limit_mcpu or not window.periods or window.throttled_periods is None:
        return None
    throttled_us = None
    if window.throttled_seconds_per_second is not None and window.covered_seconds:
        throttled_us = window.throttled_seconds_per_second * window.covered_seconds * 1e6
    return Evidence(
        limit_mcpu=facts.limit_mcpu,
        period_us=facts.period_us,
        periods=window.periods,
        throttled_periods=window.throttled_periods,
        throttled_us=throttled_us,
        threads=window.threads_max,
        node_cpus=facts.node_cpus,
        period_throttled_us=facts.period_throttled_us,
    )


def _planned_raise(facts: ContainerFacts, policy: Policy) -> _Raise | None:
    """The smallest limit whose expected ratio is under the target (docs/domain.md#expected-effect); without
    throttled time or threads, the p95 usage rule with no claim."""
    limit = facts.limit_mcpu
    evidence = evidence_of(facts)
    if not limit or evidence is None:
        return None
    cap = facts.node_cpus * MILLI_CPU_TO_CPU if facts.node_cpus else None
    found = smallest_limit_under_target(
        evidence, policy.throttle_target, policy.headroom, policy.limit_step_mcpu, cap, limit * policy.min_raise_factor
    )
    if found is not None:
        suggested, expected = found
        capped = f", the node's {plural(facts.node_cpus or 0, 'CPU')}" if cap is not None and suggested == cap else ""
        return _Raise(
            suggested,
            expected,
            f"the smallest limit in {policy.limit_step_mcpu}m steps expected to leave it under the target{capped}",
        )
    usage, usage_name = usage_high_mcpu(facts.window)
    base = max((usage or 0.0) * policy.headroom, limit * policy.min_raise_factor)
    suggested = round_up_mcpu(base, policy.limit_step_mcpu)
    if cap is not None:
        suggested = min(suggested, cap)
    how = (
        f"max({usage_name or 'usage'} × {policy.headroom:g}, limit × {policy.min_raise_factor:g}) = {format_mcpu(base)}, "
        f"rounded up to {format_mcpu(suggested)}"
    )
    return _Raise(
        suggested,
        Expected(
            None,
            "no claim: without throttled time or threads the CPU the throttled periods wanted is unknown; check the ratio again after the change",
        ),
        how,
    )


def _raise_limit(
    facts: ContainerFacts, policy: Policy, throttled: bool, planned: _Raise | None
) -> Recommendation | None:
    limit = facts.limit_mcpu
    if not throttled or not limit or planned is None:
        return None
    window = facts.window
    usage, usage_name = usage_high_mcpu(window)
    if usage is None:
        return None
    if usage < policy.near_ceiling_fraction * limit:
        return _raise_limit_for_bursts(facts, policy, planned)
    detail = (
        f"{sentence(throttle_evidence(window, policy))}; its {usage_name} {format_mcpu(usage)} is "
        f"{format_ratio(usage / limit)} of the limit (near the ceiling from "
        f"{format_ratio(policy.near_ceiling_fraction)}). {sentence(quota_text(facts, limit))}. "
        "Usage cannot exceed the limit, so the real demand is at least this; throttled time says how much more "
        f"it wanted. Suggested limit {format_mcpu(planned.limit_mcpu)}: {planned.how}. {expected_text(planned.expected)} "
        "Where the node is not shared with other workloads, dropping the limit avoids throttling altogether (the "
        "request still sets the floor)."
    )
    return Recommendation(
        kind="raise_limit",
        severity=ratio_severity(window, policy),
        summary=f"Raise the CPU limit from {format_mcpu(limit)} to {format_mcpu(planned.limit_mcpu)}: it is used up",
        detail=detail,
        suggested_limit_mcpu=planned.limit_mcpu,
        expected_throttle_ratio_max=planned.expected.ratio_max,
        expected_basis=planned.expected.basis,
    )


def _raise_limit_for_bursts(facts: ContainerFacts, policy: Policy, planned: _Raise) -> Recommendation | None:
    """Throttled while its sampled usage stays low, on a kernel known to be fixed: the quota is used up by bursts
    shorter than the sample interval (one-minute averages hide ten-second bursts; the ratio shows them).
    On an affected or unknown kernel the same picture points at the kernel first (upgrade_kernel)."""
    limit = facts.limit_mcpu
    window = facts.window
    if not limit or facts.kernel is None or facts.kernel.verdict != "fixed" or window.lifetime:
        return None
    usage, usage_name = usage_typical_mcpu(window)
    if usage is None:
        return None
    detail = (
        f"{sentence(throttle_evidence(window, policy))}, yet its {usage_name} is only {format_mcpu(usage)}, "
        f"{format_ratio(usage / limit)} of the limit, on a kernel without the slice expiry bug "
        f"({facts.kernel.version}). So it runs in bursts that spend the whole quota inside single periods and "
        "then wait, shorter than the sample interval that averages them away: the throttle ratio, not the usage "
        f"graph, shows them. {sentence(quota_text(facts, limit))}. The bursts' height is the quota plus the "
        f"throttled time of each throttled period, not the average. Suggested limit {format_mcpu(planned.limit_mcpu)}: "
        f"{planned.how}. {expected_text(planned.expected)} Where the node is not shared, dropping the limit avoids "
        "the waits altogether."
    )
    return Recommendation(
        kind="raise_limit",
        severity=ratio_severity(window, policy),
        summary=(
            f"Raise the CPU limit from {format_mcpu(limit)} to {format_mcpu(planned.limit_mcpu)}: bursts hit it "
            f"though it averages {format_mcpu(usage)}"
        ),
        detail=detail,
        suggested_limit_mcpu=planned.limit_mcpu,
        expected_throttle_ratio_max=planned.expected.ratio_max,
        expected_basis=planned.expected.basis,
    )


def _raise_pod_limit(facts: ContainerFacts, policy: Policy) -> Recommendation | None:
    """The pod's own quota throttles beyond this container's own (or the container has none): raising the
    container's limit alone does not lift it (docs/domain.md#pod-level-quota). Sized like a container's raise, on the
    pod cgroup's counters: one formula for both."""
    pod, ceiling = facts.pod_window, facts.pod_ceiling_mcpu
    if pod is None or ceiling is None or pod.throttle_ratio is None or not is_throttled(pod, policy):
        return None
    own = facts.window.throttle_ratio if facts.limit_mcpu else None
    if own is not None and pod.throttle_ratio <= own + BEYOND_CONTAINERS:
        return None  # its own quota explains the throttling: raise_limit's case
    planned = _planned_raise(replace(facts, window=pod, limit_mcpu=ceiling, period_throttled_us=None), policy)
    if planned is None:
        return None
    new = planned.limit_mcpu
    if facts.pod_limit_mcpu is not None:
        fix = (
            f"raise the pod's limit (spec.resources.limits.cpu) from {format_mcpu(facts.pod_limit_mcpu)} to "
            f"{format_mcpu(new)}"
        )
    else:
        fix = (
            f"raise its containers' limits so that they add up to {format_mcpu(new)} (now {format_mcpu(ceiling)}), "
            f"or set a pod-level limit of {format_mcpu(new)} (spec.resources.limits.cpu)"
        )
    if own is not None:
        own_text = f"this container's own quota only {format_ratio(own)} of its periods"
    elif facts.limit_mcpu:
        own_text = "no throttling is reported for this container's own quota"
    else:
        own_text = "this container has no quota of its own"
    detail = (
        f"The pod's own quota ({format_mcpu(ceiling)}, {facts.pod_ceiling_from}) {throttle_evidence(pod, policy, 'the pod')}, "
        f"while {own_text}: every container of the pod waits when the pod's quota is spent. Raising this container's "
        f"limit alone does not lift it: {fix}. Suggested pod limit {format_mcpu(new)}: {planned.how} (on the pod "
        f"cgroup's counters). {expected_text(planned.expected)}"
    )
    return Recommendation(
        kind="raise_pod_limit",
        severity=ratio_severity(pod, policy),
        summary=(
            f"Raise the pod's CPU limit from {format_mcpu(ceiling)} to {format_mcpu(new)}: the pod's own quota "
            "throttles it"
        ),
        detail=detail,
        suggested_pod_limit_mcpu=new,
        expected_throttle_ratio_max=planned.expected.ratio_max,
        expected_basis=f"the pod cgroup's own ratio: {planned.expected.basis}",
    )


def _use_whole_cores(
    facts: ContainerFacts, policy: Policy, throttled: bool, planned: _Raise | None
) -> Recommendation | None:
    limit = facts.limit_mcpu
    if not throttled or not limit or limit % MILLI_CPU_TO_CPU == 0:
        return None
    # Whole cores that also hold the planned raise: one limit for the container, rounded up, not two.
    wanted = max(limit, planned.limit_mcpu if planned else 0)
    whole = math.ceil(wanted / MILLI_CPU_TO_CPU) * MILLI_CPU_TO_CPU
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
            "quota, so almost nothing can be stranded on other CPUs. Since Kubernetes "
            f"{dotted(EXCLUSIVE_CPUS_NO_QUOTA)} (DisableCPUQuotaWithExclusiveCPUs, on by default) such containers run "
            f"without a quota at all; before {dotted(EXCLUSIVE_CPUS_NO_QUOTA)} they keep one."
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
    evidence = evidence_of(facts)
    expected = (
        expected_after_limit(evidence, whole, policy.throttle_target, policy.headroom)
        if evidence is not None
        else Expected(None, "no claim: no periods counted")
    )
    rounded = format_mcpu(wanted, with_cpus=False)
    what = "the limit" if wanted == limit else f"the {rounded} the throttled periods call for"
    detail = (
        f"{sentence(throttle_evidence(facts.window, policy))}. {sentence(quota_text(facts, limit))}: with a "
        f"fractional limit on a {facts.node_cpus}-CPU node its threads can burn the quota on up to "
        f"{plural(spread, 'CPU')} at once, then every one of them waits for the next period. "
        f"Rounding {what} up: ceil({rounded} / 1,000m) = {plural(cores, 'CPU')}, request = limit "
        f"= {format_mcpu(whole)}. {expected_text(expected)} {where}"
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
        expected_throttle_ratio_max=expected.ratio_max,
        expected_basis=expected.basis,
    )


def _cut_threads(
    facts: ContainerFacts, policy: Policy, throttled: bool, planned: _Raise | None
) -> Recommendation | None:
    limit = facts.limit_mcpu
    threads = facts.window.threads_max
    if not throttled or not limit or not threads:
        return None
    if threads <= policy.thread_factor * math.ceil(limit / MILLI_CPU_TO_CPU):
        return None
    # With a raise in the plan, the cap follows the new limit: threads ≤ ceil(new limit) is one plan, not two.
    new_limit = planned.limit_mcpu if planned is not None else limit
    cpus = math.ceil(new_limit / MILLI_CPU_TO_CPU)
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
    if planned is not None and planned.limit_mcpu > limit:
        expected = Expected(
            planned.expected.ratio_max, f"with the limit at {format_mcpu(planned.limit_mcpu)}: {planned.expected.basis}"
        )
        cap_text = f"ceil(new limit {format_mcpu(new_limit, with_cpus=False)}) = {cpus}"
    else:
        before = stranded_quota(facts.node_cpus or threads, threads, facts.period_us, None).stranded_us_per_period
        after = stranded_quota(facts.node_cpus or cpus, cpus, facts.period_us, None).stranded_us_per_period
        expected = Expected(
            None,
            f"no claim on the ratio: fewer threads touch fewer CPUs' run queues, so at most {format_ms(after)} instead "
            f"of {format_ms(before)} of quota can be left on them per period",
        )
        cap_text = f"ceil(limit) = {cpus}"
    detail = (
        f"{sentence(throttle_evidence(facts.window, policy))} with up to {plural(threads, 'thread')}, more than "
        f"{policy.thread_factor:g} × ceil({format_mcpu(limit, with_cpus=False)} / 1,000m) = "
        f"{policy.thread_factor * math.ceil(limit / MILLI_CPU_TO_CPU):g} for a "
        f"{format_mcpu(limit)} limit.{fed} Cap the runtime's parallelism at {cap_text}. {thread_knob_text(facts, cpus, 'cap', new_limit)}. Fewer runnable threads use the quota more evenly (in Indeed's talk on "
        "CFS throttling, GOMAXPROCS 2–3 cut usage, throttling and latency together), but fewer threads do not make "
        "CPU-bound work need less CPU: where usage fills the limit, the limit is what changes the ratio. The "
        f"thread count includes idle threads: check how many actually run. {expected_text(expected)}"
    )
    return Recommendation(
        kind="cut_threads",
        severity="warning",
        summary=f"Cut threads: {plural(threads, 'thread')} share a {format_mcpu(limit)} limit; cap parallelism at {cpus}",
        detail=detail,
        expected_throttle_ratio_max=expected.ratio_max,
        expected_basis=expected.basis,
    )


def advise(facts: ContainerFacts, policy: Policy) -> tuple[Recommendation, ...]:
    """One plan for the container (docs/domain.md#one-plan): the action that removes the cause first, then what adds
    to it, with one request and one limit across every row; rules whose values contradict the plan are left out.

    The kernel comes before a limit, exclusive whole cores (static CPU manager) before a fractional raise, and a
    thread cap follows the plan's limit. While throttled, lower_request is left out: its one-minute averages are what hides the bursts.
    """
    throttled = is_throttled(facts.window, policy)
    planned = _planned_raise(facts, policy) if throttled else None
    kernel = _upgrade_kernel(facts, policy, throttled)
    whole = None if kernel else _use_whole_cores(facts, policy, throttled, planned)
    raised = None if kernel else _raise_limit(facts, policy, throttled, planned)
    if whole is not None and raised is not None:
        # Whole cores remove the cause when they are exclusive (the static CPU manager policy): they hold the raise,
        # rounded up, with its severity. Elsewhere they only round the limit up and reserve it as a request too:
        # the raise says what the limit needs.
        if facts.cpu_manager_policy == "static":
            if SEVERITY_RANK[raised.severity] < SEVERITY_RANK[whole.severity]:
                whole = replace(whole, severity=raised.severity)
            raised = None
        else:
            whole = None
    limit_row = kernel or whole or raised
    new_limit = limit_row.suggested_limit_mcpu if limit_row else None
    plan_raise = None
    if limit_row is not None and new_limit is not None and facts.limit_mcpu and new_limit > facts.limit_mcpu:
        plan_raise = _Raise(
            new_limit,
            Expected(limit_row.expected_throttle_ratio_max, limit_row.expected_basis),
            "",
        )
    cut = _cut_threads(facts, policy, throttled, plan_raise if not kernel else None)
    lower = None if limit_row is not None or whole else lower_request(facts, policy)
    # The pod's quota is a cause of its own, after the kernel: its value is the pod's, not this container's.
    rows: list[Recommendation | None] = [kernel, None if kernel else _raise_pod_limit(facts, policy)]
    # A raise the usage calls for comes before a thread cap; otherwise the threads are the cause and come first.
    rows += [raised, cut] if raised is not None else [cut, whole]
    rows += [
        None if whole else set_request(facts, policy),
        None if whole else add_threads(facts, policy, lower.suggested_request_mcpu if lower else None),
        lower,
    ]
    plan = _one_value_each([row for row in rows if row is not None])
    if plan:
        note = _qos_note(facts, plan)
        if throttled and (pressure := pressure_of(facts.window)).status == "measured":
            note = f"{note} {pressure.note}".strip()  # the impact of the throttling the plan addresses
        if note:
            plan[0] = replace(plan[0], detail=f"{plan[0].detail} {note}")
    return tuple(plan)


def limit_curve(
    facts: ContainerFacts, policy: Policy, plan: tuple[Recommendation, ...]
) -> tuple[tuple[int, float], ...]:
    """What each limit above the current one should leave of the throttle ratio, for a throttled container with
    the counters to say it (empty otherwise); the plan's limit is one of the points."""
    evidence = evidence_of(facts)
    if evidence is None or not is_throttled(facts.window, policy):
        return ()
    marks = tuple(
        r.suggested_limit_mcpu
        for r in plan
        if r.suggested_limit_mcpu is not None and r.expected_throttle_ratio_max is not None
    )
    cap = facts.node_cpus * MILLI_CPU_TO_CPU if facts.node_cpus else None
    return expected_curve(evidence, policy.throttle_target, policy.headroom, policy.limit_step_mcpu, cap, marks[:1])


def _one_value_each(rows: list[Recommendation]) -> list[Recommendation]:
    """Drop any row whose request or limit differs from an earlier row's: never two values for one container."""
    request = limit = None
    kept: list[Recommendation] = []
    for row in rows:
        if (
            row.suggested_request_mcpu is not None and request is not None and row.suggested_request_mcpu != request
        ) or (row.suggested_limit_mcpu is not None and limit is not None and row.suggested_limit_mcpu != limit):
            continue
        request = row.suggested_request_mcpu if row.suggested_request_mcpu is not None else request
        limit = row.suggested_limit_mcpu if row.suggested_limit_mcpu is not None else limit
        kept.append(row)
    return kept


def _qos_note(facts: ContainerFacts, plan: list[Recommendation]) -> str:
    """What the plan does to the pod's QoS class, when it changes it (in-place resize refuses such a change)."""
    request = next((r.suggested_request_mcpu for r in plan if r.suggested_request_mcpu is not None), facts.request_mcpu)
    limit = next((r.suggested_limit_mcpu for r in plan if r.suggested_limit_mcpu is not None), facts.limit_mcpu)
    if (request, limit) == (facts.request_mcpu, facts.limit_mcpu):
        return ""
    if facts.qos_class == "Guaranteed" and limit is not None and request != limit:
        return (
            f"QoS: with request {format_mcpu(request or 0)} and limit {format_mcpu(limit or 0)} the pod leaves "
            f"Guaranteed for Burstable (a resize in place is refused for that); to stay Guaranteed set both to "
            f"{format_mcpu(max(request or 0, limit or 0))}."
        )
    if facts.qos_class == "Burstable" and request is not None and request == limit:
        return (
            "QoS: request = limit here makes the pod Guaranteed if every container's CPU and memory requests equal "
            "their limits (a resize in place is refused for a change of QoS class)."
        )
    return ""


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
