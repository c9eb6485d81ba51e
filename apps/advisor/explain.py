"""Plain-language explanation of one container's CPU: its floor, its ceiling, what its throttling costs, and why
each piece of advice follows. Pure Python; the page and the chat summaries show this text as is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from apps.advisor.cfs import DEFAULT_SLICE_US, quota_shape, throttled_response
from apps.advisor.facts import ContainerFacts, Policy, Recommendation, format_mcpu, format_ms, format_ratio
from apps.advisor.pressure import pressure_of
from apps.advisor.rules import data_shortfalls
from apps.advisor.versions import TASK_BASED_THROTTLE, dotted, kernel_at_least
from apps.clusters.kubelet import MIN_SHARES, quota_us_from_limit_mcpu, shares_from_request_mcpu, weight_from_shares
from apps.words import plural


def _data_paragraph(facts: ContainerFacts) -> str:
    window = facts.window
    if window.lifetime:
        return (
            f"Only one reading so far (at {window.window_end:%Y-%m-%d %H:%M} UTC): the counters below are since the "
            "container started (lifetime), not for a recent window. A second reading gives window figures."
        )
    if window.samples == 0:
        return "No usable samples in this window: nothing can be judged yet" + (
            f" ({plural(window.gaps_ignored, 'sample')} followed gaps and {'was' if window.gaps_ignored == 1 else 'were'}"
            " ignored)."
            if window.gaps_ignored
            else "."
        )
    covered = window.covered_seconds or 0.0
    text = f"{plural(window.samples, 'sample')} covering {covered / 60:.0f} min"
    if window.window_start is not None:
        start, end = window.window_start, window.window_end
        end_text = f"{end:%H:%M}" if start.date() == end.date() else f"{end:%Y-%m-%d %H:%M}"
        text += f" of the window {start:%Y-%m-%d %H:%M}–{end_text} UTC"
    if window.gaps_ignored:
        text += (
            f"; {plural(window.gaps_ignored, 'sample')} after a gap in collection "
            f"{'was' if window.gaps_ignored == 1 else 'were'} ignored rather than spread"
        )
    return text + "."


def _weight_clause(facts: ContainerFacts, shares: int) -> str:
    """How a cgroup v2 runtime writes `shares` as cpu.weight on this node, with the arithmetic; "" on v1."""
    if facts.cgroup_version != 2:
        return ""
    if facts.weight_mapping == "linear":
        weight = weight_from_shares(shares, "linear")
        return (
            f", which the runtime writes as cpu.weight {weight:,} by the linear mapping of runc before 1.3.2 "
            f"(1 + ({shares:,} − 2) × 9999 / 262142, rounded down; seen on this node)"
        )
    if facts.weight_mapping == "quadratic":
        weight = weight_from_shares(shares, "quadratic")
        log2 = math.log2(max(MIN_SHARES, shares))
        return (
            f", which the runtime writes as cpu.weight {weight:,} by the mapping of runc ≥ 1.3.2 / crun ≥ 1.23 "
            f"(10^((l² + 125·l) / 612 − 7/34) rounded up, l = log2 {shares:,} = {log2:.2f}; seen on this node), "
            "which is not proportional to requests: 2 CPUs weigh 174, not twice 1 CPU's 100"
        )
    return (
        ", which the runtime writes as cpu.weight by a mapping not seen on this node yet (linear before runc 1.3.2, "
        "log-quadratic from runc 1.3.2 / crun 1.23), so the floor below assumes the split follows shares"
    )


def _floor_paragraph(facts: ContainerFacts) -> str:
    request = facts.request_mcpu
    unit = "cpu.weight" if facts.weight_formula else "shares"
    if not request:
        floor = ""
        if facts.shares_floor_mcpu is not None:
            floor = f" ({format_mcpu(facts.shares_floor_mcpu)} on this node)"
        return (
            f"Floor: no CPU request, so it has the minimum of 2 cpu.shares{_weight_clause(facts, MIN_SHARES)}. When "
            f"the node is busy CPU time is split in proportion to {unit}, and the minimum is next to nothing{floor}: it "
            "runs only on CPU others leave idle."
        )
    shares = shares_from_request_mcpu(request)
    text = (
        f"Floor: its request of {format_mcpu(request)} becomes {shares:,} cpu.shares "
        f"({format_mcpu(request, with_cpus=False)} × 1024 / 1000){_weight_clause(facts, shares)}."
    )
    if facts.shares_floor_mcpu is not None and facts.node_total_shares and facts.node_allocatable_mcpu:
        if facts.weight_formula:
            text += (
                " CPU time is split by cpu.weight when every pod wants CPU, level by level as the kubelet nests "
                "them (Guaranteed pods beside the Burstable and BestEffort slices, then the pods in each; "
                f"{facts.node_total_shares:,} weight at its pod's level): "
                f"{format_mcpu(facts.node_allocatable_mcpu, with_cpus=False)} allocatable comes to "
                f"{format_mcpu(facts.shares_floor_mcpu)} guaranteed under full contention"
            )
        else:
            text += (
                " CPU time is split in proportion to shares when every pod wants CPU: "
                f"{format_mcpu(facts.node_allocatable_mcpu, with_cpus=False)} allocatable × its share of the {facts.node_total_shares:,} shares on the node = "
                f"{format_mcpu(facts.shares_floor_mcpu)} guaranteed under full contention"
            )
        if facts.shares_floor_mcpu > request:
            text += " (more than its request: the node is not fully requested)"
        elif facts.weight_formula == "quadratic" and facts.shares_floor_mcpu < request:
            text += " (less than its request: the weight mapping favours larger requests)"
        text += "; when neighbours are idle it can use more, up to " + (
            "its limit." if facts.limit_mcpu else "the whole node."
        )
    else:
        text += " What that guarantees under contention depends on its neighbours' shares, which are not known here."
    return text


def _quota_files(facts: ContainerFacts, quota_us: int) -> str:
    """The quota as the node's cgroup files write it."""
    if facts.cgroup_version == 2:
        return f'cpu.max "{quota_us} {facts.period_us}"'
    v1 = f"cpu.cfs_quota_us {quota_us} / cpu.cfs_period_us {facts.period_us}"
    return v1 if facts.cgroup_version == 1 else f'{v1}; on cgroup v2 cpu.max "{quota_us} {facts.period_us}"'


def _ceiling_paragraph(facts: ContainerFacts) -> str:
    limit = facts.limit_mcpu
    if not limit:
        return (
            "Ceiling: no CPU limit, so no CFS quota of its own: it is never throttled by one and can use any idle "
            "CPU on the node (a pod-level quota, set when every container of the pod has a limit, can still apply)."
        )
    quota_us = quota_us_from_limit_mcpu(limit, facts.period_us) or 0
    slice_us = facts.cfs_slice_us or DEFAULT_SLICE_US
    shape = quota_shape(quota_us, facts.period_us, facts.node_cpus, slice_us)
    text = (
        f"Ceiling: its limit of {format_mcpu(limit)} is a quota of {format_ms(quota_us)} of CPU time per "
        f"{format_ms(facts.period_us)} period ({_quota_files(facts, quota_us)}), "
        "shared by all its threads. Once they have used it, every one of them waits for the next period. The "
        f"quota is handed to CPUs in slices of {format_ms(slice_us)}: {plural(shape.slices_per_period, 'slice')}"
    )
    if shape.cpus_fed is not None:
        text += (
            f", so it can run on at most {shape.cpus_fed} of this node's {plural(facts.node_cpus or 0, 'CPU')} at once"
        )
    return text + "." + _burst_sentence(facts, quota_us)


def _burst_sentence(facts: ContainerFacts, quota_us: int) -> str:
    """The CFS burst allowance as the node agent read it, with how much it was used; "" when not read or not set."""
    if not facts.burst_us:
        return ""
    setting = "cpu.max.burst" if facts.cgroup_version == 2 else "cpu.cfs_burst_us"
    text = (
        f" Burst: {setting} {facts.burst_us} lets a period spend up to {format_ms(facts.burst_us)} of quota left "
        f"unused in earlier periods, so one period can reach {format_ms(quota_us + facts.burst_us)} of CPU time; "
        "the average over many periods stays the limit (Kubernetes has no field for it: the runtime set it)."
    )
    if facts.bursts_total is not None and facts.burst_seconds_total is not None:
        text += (
            f" Since the container started it used the burst in {plural(facts.bursts_total, 'period')}, "
            f"{facts.burst_seconds_total:.2f} s of CPU beyond the quota in all (node agent)."
        )
    return text


def _latency_paragraph(facts: ContainerFacts, policy: Policy) -> str:
    window = facts.window
    if window.periods is None:
        if facts.limit_mcpu:
            return (
                "Throttling: no CFS counters for this container (the source exposes none, or it has not run under "
                "its quota yet), so its throttling is unknown, not zero."
            )
        return "Throttling: none possible without a quota."
    if window.throttle_ratio is None:
        return (
            "Throttling: no enforcement periods in this window (it did not run under its quota), so the throttle "
            "ratio is undefined rather than 0."
        )
    scope = "since it started" if window.lifetime else "in this window"
    text = (
        f"Throttling: it ran out of quota in {window.throttled_periods:,} of the {plural(window.periods, 'period')} it "
        f"was runnable {scope}, a throttle ratio of {format_ratio(window.throttle_ratio)} (target "
        f"{format_ratio(policy.throttle_target)})."
    )
    if window.periods < policy.min_periods:
        text += f" That is too few periods to judge (at least {policy.min_periods} needed), so no advice rests on it."
    if window.throttled_seconds_per_second is not None:
        text += (
            f" Its threads spent {window.throttled_seconds_per_second:.2f} s per second waiting in total; that sum "
            "grows with the thread count, which is why the ratio is the figure to rank by."
        )
    if facts.kernel is not None and kernel_at_least(facts.kernel.version, TASK_BASED_THROTTLE):
        text += (
            f" This node runs Linux {facts.kernel.version}: from {dotted(TASK_BASED_THROTTLE)} on a thread out of "
            "quota is stopped when it next returns to user space rather than at once, so none waits holding a "
            "kernel lock, and throttled time runs from the first of the group's threads being stopped until the "
            "group is unthrottled. Periods and throttled periods count as before: across such a kernel upgrade "
            "compare throttle ratios, not throttled seconds (docs/domain.md#task-based-throttle)."
        )
    if facts.limit_mcpu and window.throttle_ratio > 0:
        period_ms = facts.period_us / 1000
        text += (
            f" A request that runs out of quota waits for the next period: with a {format_ms(facts.period_us)} "
            f"period its latency percentiles plateau at about {period_ms:g} ms and {2 * period_ms:g} ms above normal "
            "(one or two periods of waiting)."
        )
        quota_ms = (quota_us_from_limit_mcpu(facts.limit_mcpu, facts.period_us) or 0) / 1000
        if quota_ms < period_ms:
            work_ms = 2 * period_ms
            response = throttled_response(work_ms, quota_ms, period_ms)
            text += (
                f" For example a single-threaded request needing {work_ms:g} ms of CPU gets {quota_ms:g} ms per "
                f"period and answers after {response.response_ms:g} ms, not {work_ms:g} ms, while usage graphs show "
                f"only {format_mcpu(response.usage_mcpu_over_periods)}."
            )
        else:
            text += (
                f" One thread alone cannot use {quota_ms:g} ms in a {period_ms:g} ms period, so throttling here "
                f"means several threads ran at once: n threads spend the quota in {quota_ms:g}/n ms."
            )
    return text


def _usage_paragraph(facts: ContainerFacts) -> str | None:
    window = facts.window
    if window.usage_avg_mcpu is not None:
        parts = [f"average {format_mcpu(window.usage_avg_mcpu)}"]
        if window.usage_p95_mcpu is not None:
            parts.append(f"p95 {format_mcpu(window.usage_p95_mcpu)}")
        if window.usage_max_mcpu is not None:
            parts.append(f"max {format_mcpu(window.usage_max_mcpu)}")
        text = "Usage: " + ", ".join(parts) + " (per sample interval: bursts shorter than that are averaged away)."
    elif window.usage_active_mcpu is not None:
        text = (
            f"Usage: {format_mcpu(window.usage_active_mcpu)} on average over the periods it ran since it started "
            "(lifetime CPU time ÷ those periods)."
        )
    else:
        return None
    if facts.limit_mcpu and window.usage_p95_mcpu is not None:
        text += f" Its p95 is {format_ratio(window.usage_p95_mcpu / facts.limit_mcpu)} of its limit."
    if window.threads_max:
        text += f" Up to {plural(window.threads_max, 'thread')}."
    return text


def _shortfall_paragraph(facts: ContainerFacts, policy: Policy) -> str | None:
    """Which rules could not judge the window yet, and what each still lacks; None when every rule could."""
    window = facts.window
    if window.window_start is None:
        return None
    shortfalls = data_shortfalls(facts, policy, (window.window_end - window.window_start).total_seconds())
    if not shortfalls:
        return None
    needs: dict[str, list[str]] = {}  # who needs it → what, in the order the shortfalls come
    for shortfall in shortfalls:
        if shortfall.unit == "periods":
            who, what = "the throttling rules need", f"{plural(shortfall.need, 'period')} run under the quota"
        elif shortfall.unit == "minutes":
            who, what = "lower request needs", f"samples over {plural(shortfall.need, 'minute')} of the window"
        else:
            who, what = "lower request needs", plural(shortfall.need, "sample")
        needs.setdefault(who, []).append(f"{what} ({shortfall.have:,} so far)")
    clauses = [f"{who} {' and '.join(whats)}" for who, whats in needs.items()]
    return f"No change suggested yet, but not every rule could judge this window: {'; '.join(clauses)}."


def explain_paragraphs(
    facts: ContainerFacts, recommendations: Sequence[Recommendation], policy: Policy | None = None
) -> tuple[str, ...]:
    """The explanation as paragraphs: data, floor, ceiling, throttling and latency, usage, then each advice's reason
    (or, without advice, whether every rule could judge)."""
    policy = policy or Policy()
    paragraphs = [_data_paragraph(facts), _floor_paragraph(facts), _ceiling_paragraph(facts)]
    if facts.window.samples or facts.window.lifetime:
        paragraphs.append(_latency_paragraph(facts, policy))
        usage = _usage_paragraph(facts)
        if usage:
            paragraphs.append(usage)
        paragraphs.append(pressure_of(facts.window).note)
    if recommendations:
        for recommendation in recommendations:
            paragraphs.append(f"Why {recommendation.kind.replace('_', ' ')}: {recommendation.detail}")
    elif facts.window.lifetime:
        paragraphs.append("No change suggested from lifetime counters alone; a window of samples adds usage figures.")
    elif facts.window.samples:
        paragraphs.append(
            _shortfall_paragraph(facts, policy) or "No change suggested: nothing in this window crosses a threshold."
        )
    return tuple(paragraphs)


def explain(facts: ContainerFacts, recommendations: Sequence[Recommendation], policy: Policy | None = None) -> str:
    """Plain text, paragraphs separated by blank lines. Handles no limit, no request, no data and lifetime data."""
    return "\n\n".join(explain_paragraphs(facts, recommendations, policy))
