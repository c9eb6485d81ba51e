"""The rules about requests: set one, fit it to the threads, lower an unused one. A request sets no quota; what it
changes is the shares floor, which each suggestion states. Pure Python."""

from __future__ import annotations

import math

from apps.advisor.cfs import shares_floor
from apps.advisor.effect import Expected
from apps.advisor.facts import (
    ContainerFacts,
    Policy,
    Recommendation,
    format_mcpu,
    format_ratio,
    round_up_mcpu,
    thread_knob_text,
)
from apps.clusters.kubelet import MILLI_CPU_TO_CPU, shares_from_request_mcpu
from apps.words import plural


def request_expected(facts: ContainerFacts, new_request_mcpu: int) -> Expected:
    """A request changes no quota: what it changes is the shares floor (its pod's, when every neighbour is busy)."""
    usage = facts.window.usage_p95_mcpu
    fit = ""
    if usage is not None:
        verb = "fits within" if usage <= new_request_mcpu else "is above"
        fit = f"; p95 usage {format_mcpu(usage)} {verb} the new request"
    total, budget = facts.node_total_shares, facts.node_allocatable_mcpu
    if not total or not budget:
        return Expected(None, f"requests set no quota: the ratio stays as it is{fit}")
    old = facts.floor_weight(shares_from_request_mcpu(facts.request_mcpu))
    new = facts.floor_weight(shares_from_request_mcpu(new_request_mcpu))
    before = facts.shares_floor_mcpu if facts.shares_floor_mcpu is not None else budget * old // total
    if facts.weight_formula and facts.shares_floor_mcpu:
        # Split by weight level by level: what its level divides, from the floor it has there now.
        budget = facts.shares_floor_mcpu * total // old
    after = shares_floor(new, [total - old] if total > old else [], budget).floor_mcpu
    return Expected(
        None,
        f"requests set no quota, so the ratio stays as it is; the pod's shares floor goes from {format_mcpu(before)} to "
        f"{format_mcpu(after)} when every neighbour is busy{fit}",
    )


def set_request(facts: ContainerFacts, policy: Policy) -> Recommendation | None:
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
        expected_basis=(
            request_expected(facts, suggested).basis
            if suggested
            else "no claim: no usage figures to size a request from"
        ),
    )


def request_basis(expected: Expected | None) -> str:
    return expected.basis if expected is not None else "no claim: the request stays as it is"


def add_threads(facts: ContainerFacts, policy: Policy, planned_request: int | None) -> Recommendation | None:
    request = facts.request_mcpu
    threads = facts.window.threads_max
    if not request or not threads or threads * MILLI_CPU_TO_CPU >= request:
        return None
    # The plan's request when lower_request measured one (usage, not the thread count): one value per container.
    suggested = planned_request or round_up_mcpu(threads * MILLI_CPU_TO_CPU, policy.request_step_mcpu)
    detail = (
        f"At most {plural(threads, 'thread')} {'was' if threads == 1 else 'were'} seen while it requests "
        f"{format_mcpu(request)}: a thread runs on one CPU at a time, so it can never use more than "
        f"{format_mcpu(threads * MILLI_CPU_TO_CPU)} and the rest of its request is reserved for nothing (a "
        "single-threaded service on a 2-CPU request has been seen answering in 62 ms instead of 50 ms). Give it at least as many worker threads "
        f"as requested CPUs, or lower the request to {format_mcpu(suggested)}. "
        f"{thread_knob_text(facts, math.ceil(request / MILLI_CPU_TO_CPU), 'fill')}."
    )
    return Recommendation(
        kind="add_threads",
        severity="info",
        summary=f"Add threads: {plural(threads, 'thread')} cannot use a {format_mcpu(request)} request",
        detail=detail,
        suggested_request_mcpu=suggested if suggested < request else None,
        expected_basis=request_basis(request_expected(facts, suggested) if suggested < request else None),
    )


def lower_request(facts: ContainerFacts, policy: Policy) -> Recommendation | None:
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
        expected_basis=request_basis(request_expected(facts, suggested)),
    )
