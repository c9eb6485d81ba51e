"""What a new CPU limit should do to a container's throttle ratio, from the kernel's own counters. Pure Python.

In a throttled period the container used its whole quota and then waited; the kernel adds to throttled time, per CPU,
how long that CPU's run queue stayed throttled with runnable threads (docs/domain.md#expected-effect). So the CPU a
throttled period wanted is at most quota + that period's throttled time, and no container can run more threads at
once than it has, or than its node has CPUs. Three claims follow, each with what it rests on:

- "threads": a limit of at least min(threads, node CPUs) cores cannot be used up within a period.
- "periods": with one throttled-time figure per period (the lab's and the node agent's period sampler), a new limit
  still throttles at most the periods whose throttled time exceeds the quota it adds.
- "average": with window totals only, the suggestion covers the average throttled period's demand with headroom;
  the counters alone guarantee no more than Markov's bound (at most Θ / ΔQ periods can have throttled time above ΔQ),
  which the basis line states beside it.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

from apps.advisor.cfs import MIN_CFS_RQ_RUNTIME_US
from apps.clusters.kubelet import MILLI_CPU_TO_CPU
from apps.telemetry.counters import throttle_ratio, throttled_us_per_period


@dataclass(frozen=True, slots=True)
class Evidence:
    """A throttled container's counters over one window, and what caps how many threads it can run at once."""

    limit_mcpu: int
    period_us: int
    periods: int
    throttled_periods: int
    throttled_us: float | None  # Σ throttled time over the window (every CPU's); None when not collected
    threads: int | None  # most threads seen; None when not collected
    node_cpus: int | None
    # One entry per period, throttled time in µs (0 for a period that was not throttled): the fine evidence.
    period_throttled_us: tuple[float, ...] | None = None

    @property
    def parallel(self) -> int | None:
        """How many CPUs the container can use at once: its threads, its node's CPUs, whichever is fewer."""
        known = [n for n in (self.threads, self.node_cpus) if n]
        return min(known) if known else None

    @property
    def ratio(self) -> float:
        return throttle_ratio(self.throttled_periods, self.periods) or 0.0

    @property
    def mean_demand_mcpu(self) -> float | None:
        """CPU an average throttled period wanted: limit + its throttled time per period, capped by `parallel`."""
        if self.throttled_us is None or not self.throttled_periods:
            return None
        waited_us = throttled_us_per_period(self.throttled_us, self.throttled_periods)
        demand = self.limit_mcpu + waited_us * MILLI_CPU_TO_CPU / self.period_us
        cap = self.parallel
        return min(demand, cap * MILLI_CPU_TO_CPU) if cap else demand


@dataclass(frozen=True, slots=True)
class Expected:
    """The throttle ratio a change should leave (at most `ratio_max`; None: no claim) and, in one line, why."""

    ratio_max: float | None
    basis: str


def _slack_us(evidence: Evidence) -> float:
    # Each other CPU the threads run on can keep min_cfs_rq_runtime (1 ms) of quota it does not use this period.
    return MIN_CFS_RQ_RUNTIME_US * max(0, (evidence.parallel or 1) - 1)


def _markov(evidence: Evidence, added_us: float) -> float:
    """At most Θ / ΔQ periods can have throttled time above ΔQ: a bound on any distribution of the counters."""
    assert evidence.throttled_us is not None
    still = min(evidence.throttled_periods, evidence.throttled_us / added_us)
    return throttle_ratio(still, evidence.periods) or 0.0


def expected_after_limit(evidence: Evidence, new_limit_mcpu: int, target: float, headroom: float) -> Expected:
    """The throttle ratio `new_limit_mcpu` should leave, as a bound with its basis: the tightest of the claims the
    evidence supports (so a higher limit never reads worse than a lower one). The same offered load is assumed: work
    that waited under the old limit runs on time under a higher one, so no period wants more."""
    if new_limit_mcpu <= evidence.limit_mcpu or not evidence.periods:
        return Expected(None, "no claim: the limit does not rise")
    claims: list[Expected] = []  # in order of preference when two say the same
    parallel = evidence.parallel
    if parallel and new_limit_mcpu >= parallel * MILLI_CPU_TO_CPU:
        what = "threads" if evidence.threads and evidence.threads <= (evidence.node_cpus or math.inf) else "node CPUs"
        claims.append(
            Expected(
                target,
                f"threads: at most {parallel} {what} can run at once, so a {new_limit_mcpu:,}m limit cannot be used "
                f"up within a period (under {target:.0%}, allowing for the kernel's 1 ms slices)",
            )
        )
    added_us = (new_limit_mcpu - evidence.limit_mcpu) * evidence.period_us / MILLI_CPU_TO_CPU
    if evidence.period_throttled_us:
        # A period stays throttled if its throttled time exceeds the quota added, less what other CPUs may keep.
        values = sorted(evidence.period_throttled_us)
        still = len(values) - bisect.bisect_right(values, max(0.0, added_us - _slack_us(evidence)))
        claims.append(
            Expected(
                still / len(values),
                f"periods: {still:,} of {len(values):,} sampled periods wanted more than the "
                f"{added_us / 1000:.3g} ms per period this limit adds",
            )
        )
    elif evidence.throttled_us is not None:
        markov = _markov(evidence, added_us)
        mean = evidence.mean_demand_mcpu
        if mean is not None and new_limit_mcpu >= mean * headroom and markov > target:
            claims.append(
                Expected(
                    target,
                    f"average: a throttled period wanted {mean:,.0f}m on average (limit + throttled time per period); "
                    f"{new_limit_mcpu:,}m is {headroom:g}× that, under {target:.0%} if the throttled periods are alike "
                    f"(the counters alone guarantee at most {markov:.0%})",
                )
            )
        claims.append(
            Expected(
                markov,
                f"throttled time: at most Θ / ΔQ = {markov:.0%} of periods can still run out (any spread of the "
                "counters)",
            )
        )
    if not claims:
        return Expected(
            None, "no claim: throttled time is not collected, so the CPU the throttled periods wanted is unknown"
        )
    return min(claims, key=lambda claim: claim.ratio_max or 0.0)


def smallest_limit_under_target(
    evidence: Evidence, target: float, headroom: float, step_mcpu: int, cap_mcpu: int | None, min_mcpu: float = 0
) -> tuple[int, Expected] | None:
    """The smallest limit, a multiple of `step_mcpu` and at most `cap_mcpu`, whose expected ratio is ≤ `target`,
    and that expectation; at the cap when none below it makes the claim (its Expected says how far it gets).
    None when the counters support no figure (neither throttled time nor per-period figures)."""
    candidates: list[float] = []
    if evidence.throttled_us is None and not evidence.period_throttled_us:
        return None  # threads alone would suggest a core per thread: no measure of what the throttled periods wanted
    parallel = evidence.parallel
    if parallel and evidence.threads:
        candidates.append(parallel * MILLI_CPU_TO_CPU)
    if evidence.period_throttled_us:
        values = sorted(evidence.period_throttled_us)
        allowed = math.floor(target * len(values))  # periods that may stay throttled
        needed_us = values[len(values) - allowed - 1] if allowed < len(values) else 0.0
        candidates.append(
            evidence.limit_mcpu + (needed_us + _slack_us(evidence)) * MILLI_CPU_TO_CPU / evidence.period_us
        )
    elif evidence.throttled_us is not None:
        mean = evidence.mean_demand_mcpu
        if mean is not None:
            candidates.append(mean * headroom)
        if target > 0:
            # Markov: Θ / (ΔQ × P) ≤ target.
            added_us = throttled_us_per_period(evidence.throttled_us, evidence.periods) / target
            candidates.append(evidence.limit_mcpu + added_us * MILLI_CPU_TO_CPU / evidence.period_us)
    if not candidates:
        return None
    floor_mcpu = max(evidence.limit_mcpu + 1, min_mcpu)
    for raw in sorted(candidates):
        limit = max(step_mcpu, math.ceil(max(raw, floor_mcpu) / step_mcpu) * step_mcpu)
        if cap_mcpu is not None and limit > cap_mcpu:
            continue
        expected = expected_after_limit(evidence, limit, target, headroom)
        if expected.ratio_max is not None and expected.ratio_max <= target:
            return limit, expected
    limit = cap_mcpu if cap_mcpu is not None else math.ceil(max(*candidates, floor_mcpu) / step_mcpu) * step_mcpu
    return limit, expected_after_limit(evidence, limit, target, headroom)


MAX_CURVE_POINTS = 40


def expected_curve(
    evidence: Evidence,
    target: float,
    headroom: float,
    step_mcpu: int,
    cap_mcpu: int | None,
    marks: tuple[int, ...] = (),
) -> tuple[tuple[int, float], ...]:
    """(limit, expected ratio at most) for limits above the current one, up to twice the marked limits or four
    times the current one (at most the cap), in whole multiples of `step_mcpu`; limits where no claim is made are
    left out. The marked limits (the plan's) are points themselves, so the curve says there what the plan says."""
    top = 2 * max((*marks, evidence.limit_mcpu * 2))
    if cap_mcpu is not None:
        top = min(top, cap_mcpu)
    span = top - evidence.limit_mcpu
    if span <= 0:
        return ()
    step = step_mcpu * max(1, math.ceil(span / step_mcpu / MAX_CURVE_POINTS))
    first = (evidence.limit_mcpu // step + 1) * step
    limits = sorted({*range(first, top + 1, step), *(m for m in marks if evidence.limit_mcpu < m <= top)})
    points = []
    for limit in limits:
        ratio = expected_after_limit(evidence, limit, target, headroom).ratio_max
        if ratio is not None:
            points.append((limit, ratio))
    return tuple(points)
