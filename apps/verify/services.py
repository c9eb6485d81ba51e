"""`lab verify`: measure each lab container, ask the advisor for its plan, apply the plan to a fresh cgroup and let
the kernel say whether it worked (docs/domain.md#lab-verify).

For each container of the scenario with a CPU limit: a run as declared ("before"), the advisor's plan made from that
run's counters (the product's own rules, with the run's per-period throttled times as evidence), a run with the plan
applied (new quota, the thread cap as fewer worker processes, new request as shares), and, for a raised limit, a run
one third below the suggestion, which should miss the target if the suggestion is not padded. Where the plan on a
node with the static CPU manager policy would be whole cores, a second row applies them pinned with the cpuset
controller. A kernel upgrade cannot be applied here; the row says so.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta

from apps.advisor.facts import ContainerFacts, Policy, Recommendation
from apps.advisor.kernel import kernel_verdict
from apps.advisor.rules import advise
from apps.advisor.windows import WindowSummary, percentile
from apps.clusters.kubelet import MILLI_CPU_TO_CPU, quota_us_from_limit_mcpu, shares_from_request_mcpu
from apps.lab.cgroups import CpuController, detect_cpu_controller
from apps.lab.scenario import Container, Pod, Scenario, load_scenario
from apps.lab.workloads import KINDS, task_count
from apps.verify.runner import Run, measure
from apps.words import plural

# Workload parameters that set how many processes run at once: where a thread cap can be applied.
_PARALLELISM = {"burner": "processes", "bursty": "processes", "lightweb": "processes"}
APPLIED_KINDS = ("raise_limit", "use_whole_cores", "cut_threads", "set_request", "lower_request", "add_threads")


@dataclass(frozen=True, slots=True)
class Outcome:
    """One lab container's plan, applied and measured."""

    container: str  # namespace/pod/container
    limit_before_mcpu: int
    processes_before: int | None
    ratio_before: float | None
    usage_before_mcpu: float
    latency_p95_before_ms: float | None
    kind: str = ""  # the plan's primary action
    plan: tuple[str, ...] = ()  # every kind in the plan, primary first
    limit_after_mcpu: int | None = None
    processes_after: int | None = None
    expected_ratio_max: float | None = None
    expected_basis: str = ""
    ratio_after: float | None = None
    usage_after_mcpu: float | None = None
    latency_p95_after_ms: float | None = None
    lower_limit_mcpu: int | None = None  # one third below a raised limit
    ratio_at_lower_limit: float | None = None
    applied: bool = False
    note: str = ""

    def under_target(self, target: float) -> bool | None:
        return None if self.ratio_after is None else self.ratio_after <= target

    def within_bound(self) -> bool | None:
        if self.ratio_after is None or self.expected_ratio_max is None:
            return None
        return self.ratio_after <= self.expected_ratio_max

    def latency_worse(self) -> bool | None:
        """p95 response time up by more than noise: 1 ms or 20 %, whichever is more."""
        if self.latency_p95_before_ms is None or self.latency_p95_after_ms is None:
            return None
        return self.latency_p95_after_ms > self.latency_p95_before_ms + max(1.0, 0.2 * self.latency_p95_before_ms)

    def lower_limit_missed(self, target: float) -> bool | None:
        return None if self.ratio_at_lower_limit is None else self.ratio_at_lower_limit > target

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _summary(run: Run, now: datetime) -> WindowSummary:
    usage = sorted(run.usage_per_second_mcpu)
    return WindowSummary(
        window_start=now - timedelta(seconds=run.seconds),
        window_end=now,
        periods=run.periods,
        throttled_periods=run.throttled_periods,
        throttle_ratio=run.ratio,
        throttled_seconds_per_second=run.throttled_us / 1e6 / run.seconds if run.seconds else None,
        usage_avg_mcpu=run.usage_mcpu,
        usage_p95_mcpu=percentile(usage, 0.95) if usage else None,
        usage_p99_mcpu=percentile(usage, 0.99) if usage else None,
        usage_max_mcpu=usage[-1] if usage else None,
        threads_max=None,
        samples=len(usage),
        covered_seconds=run.seconds,
    )


def plan_for(
    run: Run, pod: Pod, container: Container, policy: Policy, cpu_manager_policy: str = "none"
) -> tuple[Recommendation, ...]:
    """The advisor's plan for a container measured by `run`, on this machine (as a node with the given CPU manager
    policy: "static" gives whole cores their own CPUs)."""
    cpus = os.cpu_count() or 1
    workload = container.workload
    window = replace(_summary(run, datetime.now(UTC)), threads_max=task_count(workload.kind, workload.params) + 1)
    facts = ContainerFacts(
        window=window,
        request_mcpu=container.request_mcpu,
        limit_mcpu=container.limit_mcpu,
        node_cpus=cpus,
        node_allocatable_mcpu=cpus * MILLI_CPU_TO_CPU,
        cpu_manager_policy=cpu_manager_policy,
        qos_class=pod.qos_class,
        kernel=kernel_verdict(os.uname().release),
        period_throttled_us=run.period_throttled_us,
    )
    return advise(facts, policy)


def _processes(container: Container) -> int | None:
    key = _PARALLELISM.get(container.workload.kind)
    return int(container.workload.params[key]) if key else None


def _apply(container: Container, plan: tuple[Recommendation, ...]) -> tuple[int | None, int | None, int | None, str]:
    """The plan's limit, request and process count for the run after; and what could not be applied."""
    limit = next((r.suggested_limit_mcpu for r in plan if r.suggested_limit_mcpu is not None), container.limit_mcpu)
    request = next(
        (r.suggested_request_mcpu for r in plan if r.suggested_request_mcpu is not None), container.request_mcpu
    )
    processes = _processes(container)
    notes = []
    for r in plan:
        if r.kind == "cut_threads":
            cap = math.ceil((limit or container.limit_mcpu or MILLI_CPU_TO_CPU) / MILLI_CPU_TO_CPU)
            if processes is None:
                notes.append(f"no thread cap for a {container.workload.kind} workload")
            else:
                processes = min(processes, cap)
        elif r.kind == "upgrade_kernel":
            notes.append("a kernel upgrade cannot be applied in the lab")
    return limit, request, processes, "; ".join(notes)


def _run(controller: CpuController, container: Container, limit: int | None, request: int | None,
         processes: int | None, period_us: int, seconds: float, name: str, pinned: int | None = None) -> Run:  # fmt: skip
    params = dict(container.workload.params)
    key = _PARALLELISM.get(container.workload.kind)
    if key and processes is not None:
        params[key] = processes
    return measure(
        controller,
        container.workload.kind,
        params,
        quota_us_from_limit_mcpu(limit, period_us),
        period_us,
        shares_from_request_mcpu(request),
        seconds,
        name=name,
        pinned_cpus=pinned,
    )


def candidates(scenario: Scenario, only: Iterable[str] = ()) -> Iterator[tuple[Pod, Container]]:
    """The scenario's containers with a CPU limit (the ones a plan can change the ratio of), optionally by name."""
    wanted = set(only)
    for pod in scenario.pods:
        for container in pod.containers:
            label = f"{pod.namespace}/{pod.name}/{container.name}"
            if container.limit_mcpu is None or container.workload.kind not in KINDS:
                continue
            if wanted and not ({label, container.name, pod.name} & wanted):
                continue
            yield pod, container


def verify(
    *,
    seconds: float = 10.0,
    only: Iterable[str] = (),
    scenario_path: str | None = None,
    policy: Policy | None = None,
    controller: CpuController | None = None,
) -> list[Outcome]:
    """Measure, plan, apply and measure again for each candidate container, one at a time (nothing else of the lab
    should run meanwhile: two runs would share the CPUs and each would see the other's contention)."""
    policy = policy or Policy()
    controller = controller or detect_cpu_controller()
    if controller is None:
        raise RuntimeError("no writable cgroup cpu controller on this machine")
    scenario = load_scenario(scenario_path)
    outcomes = []
    for pod, container in candidates(scenario, only):
        outcomes.extend(_verify_one(controller, scenario, pod, container, seconds, policy))
    return outcomes


def _verify_one(
    controller: CpuController, scenario: Scenario, pod: Pod, container: Container, seconds: float, policy: Policy
) -> list[Outcome]:
    """The container's plan applied and measured; where its node ran the static CPU manager policy the plan would be
    whole cores instead, a second row with those cores pinned (cpuset), as the kubelet gives them."""
    label = f"{pod.namespace}/{pod.name}/{container.name}"
    period = scenario.period_us
    # Long enough for the rules to judge: min_periods periods, and a margin for the warm-up.
    seconds = max(seconds, (policy.min_periods + 20) * period / 1e6)
    processes_before = _processes(container)
    before = _run(controller, container, container.limit_mcpu, container.request_mcpu, processes_before, period,
                  seconds, "before")  # fmt: skip
    base = Outcome(
        container=label,
        limit_before_mcpu=container.limit_mcpu or 0,
        processes_before=processes_before,
        ratio_before=before.ratio,
        usage_before_mcpu=before.usage_mcpu,
        latency_p95_before_ms=before.latency_p95_ms(),
    )
    plan = plan_for(before, pod, container, policy)
    if not plan:
        return [replace(base, note="no advice")]
    outcomes = [_applied(controller, container, plan, base, period, seconds)]
    static = plan_for(before, pod, container, policy, cpu_manager_policy="static")
    if static and static[0].kind == "use_whole_cores":
        outcomes.append(_applied(controller, container, static, base, period, seconds, pin=True))
    return outcomes


def _applied(controller: CpuController, container: Container, plan: tuple[Recommendation, ...], base: Outcome,
             period: int, seconds: float, pin: bool = False) -> Outcome:  # fmt: skip
    """`base` with the plan applied and measured, and a raise checked one third lower."""
    primary = plan[0]
    limit, request, processes, note = _apply(container, plan)
    applied = primary.kind in APPLIED_KINDS
    cores = math.ceil(limit / MILLI_CPU_TO_CPU) if pin and limit else None
    if cores:
        note = "; ".join(filter(None, [note, f"pinned to {plural(cores, 'CPU')} (cpuset), as the static policy does"]))
    after = _run(controller, container, limit, request, processes, period, seconds, "after", cores) if applied else None
    lower_limit = ratio_lower = None
    if applied and primary.kind == "raise_limit" and limit is not None and limit > base.limit_before_mcpu:
        lower_limit = max(base.limit_before_mcpu + 1, round(limit * 2 / 3))
        lower = _run(controller, container, lower_limit, request, processes, period, seconds, "lower")
        ratio_lower = lower.ratio
    return replace(
        base,
        kind=primary.kind,
        plan=tuple(r.kind for r in plan),
        limit_after_mcpu=limit,
        processes_after=processes,
        expected_ratio_max=primary.expected_throttle_ratio_max,
        expected_basis=primary.expected_basis,
        ratio_after=after.ratio if after else None,
        usage_after_mcpu=after.usage_mcpu if after else None,
        latency_p95_after_ms=after.latency_p95_ms() if after else None,
        lower_limit_mcpu=lower_limit,
        ratio_at_lower_limit=ratio_lower,
        applied=applied,
        note=note,
    )


def table(outcomes: list[Outcome], target: float) -> list[str]:
    """The outcomes as aligned lines: what was applied, before, expected, after, latency before/after."""

    def pct(value: float | None) -> str:
        return "—" if value is None else f"{value:.0%}"

    def ms(value: float | None) -> str:
        return "—" if value is None else f"{value:.1f}"

    lines = [
        f"{'container':44} {'plan':28} {'limit':>13} {'before':>6} {'expect':>6} {'after':>6} "
        f"{'p95 ms':>13} {'at 2/3':>12}"
    ]
    for o in outcomes:
        limit = f"{o.limit_before_mcpu}→{o.limit_after_mcpu}m" if o.limit_after_mcpu else f"{o.limit_before_mcpu}m"
        latency = f"{ms(o.latency_p95_before_ms)}→{ms(o.latency_p95_after_ms)}"
        lower = f"{o.lower_limit_mcpu}m {pct(o.ratio_at_lower_limit)}" if o.lower_limit_mcpu else "—"
        lines.append(
            f"{o.container[:44]:44} {'+'.join(o.plan)[:28] or '—':28} {limit:>13} {pct(o.ratio_before):>6} "
            f"{'≤' + pct(o.expected_ratio_max) if o.expected_ratio_max is not None else '—':>6} "
            f"{pct(o.ratio_after):>6} {latency:>13} {lower:>12}" + (f"  ({o.note})" if o.note else "")
        )
    return lines
