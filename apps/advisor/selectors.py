"""Reading findings for pages, CSV, API and chat: querysets and the contract's row shapes.

Report rows and recommendation rows are built here once, so the page, the CSV export and the API cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db.models import Aggregate, Count, Max, Q, QuerySet

from apps.clusters.kubelet import DEFAULT_PERIOD_US
from apps.clusters.models import POD_CGROUP, Cluster, Container, Pod
from apps.telemetry.models import BurstReading

from .explain import explain_paragraphs
from .facts import round_figure
from .kernel import kernel_verdict
from .models import WINDOW_SECONDS, Finding, Window
from .pod_quota import PodQuota, judge_pod_quota
from .policy import policy_from_settings
from .pressure import Pressure, pressure_of
from .rules import ContainerFacts, Policy, Recommendation, Shortfall, data_shortfalls
from .runtimes import env_pairs, guess_runtime
from .services import next_refresh_at, summaries_of
from .snippets import kubectl_command
from .windows import WindowSummary

# Report row fields, in the contract's order: JSON keys and CSV columns.
REPORT_FIELDS = (
    "cluster",
    "namespace",
    "pod",
    "container",
    "node",
    "workload_kind",
    "workload_name",
    "qos_class",
    "request_mcpu",
    "limit_mcpu",
    "node_cpus",
    "shares",
    "shares_floor_mcpu",
    "quota_ceiling_mcpu",
    "period_us",
    "usage_avg_mcpu",
    "usage_p95_mcpu",
    "throttle_ratio",
    "throttled_seconds_per_second",
    "periods",
    "throttled_periods",
    "threads",
    "kernel_version",
    "kernel_verdict",
    "window_start",
    "window_end",
    "recommendations",
    "pressure_waiting_per_second",
    "pressure_stalled_per_second",
    "pressure_status",
    # The names the published contract plans for the same two figures, and the pod-level limit (spec.resources).
    "cpu_pressure_waiting_seconds_per_second",
    "cpu_pressure_stalled_seconds_per_second",
    "pod_limit_mcpu",
    # The container's image and the runtime it suggests (runtimes.guess_runtime), for the thread advice's knob.
    "image",
    "runtime",
    # The pod cgroup's own throttle ratio in the window (a pod-level quota); null when none is stored.
    "pod_throttle_ratio",
)

# Recommendations CSV (page and API): one row per (container, recommendation), in this order. Columns are a contract:
# new ones go at the end, none is renamed or moved.
RECOMMENDATION_FIELDS = (
    "cluster",
    "namespace",
    "workload_kind",
    "workload_name",
    "pod",
    "container",
    "node",
    "kind",
    "severity",
    "summary",
    "throttle_ratio",
    "usage_p95_mcpu",
    "request_mcpu",
    "limit_mcpu",
    "suggested_request_mcpu",
    "suggested_limit_mcpu",
    "kernel_verdict",
    "window_start",
    "window_end",
    "computed_at",
    "periods",
    "kubectl_command",
    "expected_throttle_ratio_max",
    "expected_basis",
    "pressure_waiting_per_second",
    "pressure_status",
    "suggested_pod_limit_mcpu",
)

RECOMMENDATION_KEYS = (
    "kind",
    "severity",
    "summary",
    "detail",
    "suggested_request_mcpu",
    "suggested_limit_mcpu",
    "expected_throttle_ratio_max",
    "expected_basis",
    "suggested_pod_limit_mcpu",
)

REPORT_UNUSED = ("container__pod__node__probe",)


def findings(
    cluster: Cluster,
    *,
    window: str = Window.HOUR,
    namespace: str | None = None,
    kind: str | None = None,
    min_throttle_ratio: float | None = None,
    node: str | None = None,
    workload: str | None = None,
) -> QuerySet[Finding]:
    """The findings of a cluster (or one namespace) for a window, with what a report row needs joined in.

    Ordered worst first: highest throttle ratio (unknown ratios last), then namespace, pod, container.
    """
    from django.db.models import F

    # A report row never shows the node's probe figures.
    qs = (
        Finding.objects.filter(cluster=cluster, window=window)
        .select_related("container", "container__pod", "container__pod__node", "container__burst", "cluster")
        .defer(*REPORT_UNUSED)
    )
    if namespace is not None:
        qs = qs.filter(namespace=namespace)
    if kind:
        qs = qs.filter(kinds__contains=f",{kind},")
    if min_throttle_ratio is not None:
        qs = qs.filter(throttle_ratio__gte=min_throttle_ratio)
    if node:
        qs = qs.filter(container__pod__node__name=node)
    if workload:
        qs = qs.filter(container__pod__workload_name=workload)
    # Among equal ratios, the container whose work waited most (CPU pressure) first: the throttling that hurts.
    return qs.order_by(
        F("throttle_ratio").desc(nulls_last=True),
        F("pressure_waiting_per_second").desc(nulls_last=True),
        "namespace",
        "container__pod__name",
        "container__name",
    )


@dataclass(frozen=True)
class Coverage:
    """What a window's findings rest on, so a page or a message never passes missing data off as good news: when
    they were computed, how much of the window their data spans, and when the next refresh is due."""

    window: str
    window_seconds: int
    containers: int  # containers with a finding for the window
    measured: int  # of which with a throttle ratio or a usage figure
    lifetime: int  # of which with lifetime figures: one reading, counters since the container started
    computed_at: datetime | None
    covered_seconds: float | None  # the longest span any container's data covers in the window
    next_refresh_at: datetime | None

    @property
    def computed(self) -> bool:
        """Some figure exists: False before the window's first refresh with data (every ratio would read "—")."""
        return self.measured > 0

    @property
    def covered_minutes(self) -> int:
        return int((self.covered_seconds or 0) // 60)

    @property
    def window_minutes(self) -> int:
        return self.window_seconds // 60

    @property
    def partial(self) -> bool:
        """The data spans less than 90 % of the window: say how much ("7 of 60 min")."""
        return (self.covered_seconds or 0) < 0.9 * self.window_seconds


def coverage_aggregates() -> dict[str, Aggregate]:
    """What window_coverage aggregates, for a page that reads other aggregates of the same findings in one query;
    coverage_from() turns the result into a Coverage."""
    return {
        "coverage_containers": Count("id"),
        "coverage_measured": Count("id", filter=Q(throttle_ratio__isnull=False) | Q(usage_avg_mcpu__isnull=False)),
        "coverage_lifetime": Count("id", filter=Q(lifetime=True)),
        "coverage_computed_at": Max("computed_at"),
        "coverage_covered": Max("covered_seconds"),
    }


def coverage_from(window: str, agg: dict[str, Any]) -> Coverage:
    """The Coverage of an aggregate that included coverage_aggregates()."""
    computed_at = agg["coverage_computed_at"]
    covered = agg["coverage_covered"]
    return Coverage(
        window=window,
        window_seconds=WINDOW_SECONDS[Window(window)],
        containers=agg["coverage_containers"],
        measured=agg["coverage_measured"],
        lifetime=agg["coverage_lifetime"],
        computed_at=computed_at,
        covered_seconds=covered,
        next_refresh_at=next_refresh_at(window, computed_at, covered) if computed_at else None,
    )


def window_coverage(
    cluster: Cluster, window: str, *, namespace: str | None = None, container_ids: Iterable[int] | None = None
) -> Coverage:
    """The Coverage of a cluster's (or a namespace's, or some containers') findings for `window`, in one query."""
    qs = Finding.objects.filter(cluster=cluster, window=window)
    if namespace is not None:
        qs = qs.filter(namespace=namespace)
    if container_ids is not None:
        qs = qs.filter(container_id__in=list(container_ids))
    return coverage_from(window, qs.aggregate(**coverage_aggregates()))


def finding_pressure(finding: Finding) -> Pressure:
    """The finding's CPU pressure as pressure_of judges it (zeros on a throttled container are not figures)."""
    return pressure_of(finding_window(finding))


def report_row(finding: Finding) -> dict[str, Any]:
    """One report row with the contract's field names; unknown numbers are None, never 0."""
    container = finding.container
    pod = container.pod
    node = pod.node
    pressure = finding_pressure(finding)
    return {
        "cluster": finding.cluster.name,
        "namespace": finding.namespace,
        "pod": pod.name,
        "container": container.name,
        "node": node.name if node else None,
        "workload_kind": pod.workload_kind or None,
        "workload_name": pod.workload_name or None,
        "qos_class": pod.qos_class or None,
        "request_mcpu": container.request_mcpu,
        "limit_mcpu": container.limit_mcpu,
        "node_cpus": _number(finding.node_cpus),
        "shares": finding.shares,
        "shares_floor_mcpu": finding.shares_floor_mcpu,
        "quota_ceiling_mcpu": finding.quota_ceiling_mcpu,
        "period_us": finding.period_us,
        "usage_avg_mcpu": round_figure(finding.usage_avg_mcpu, 1),
        "usage_p95_mcpu": round_figure(finding.usage_p95_mcpu, 1),
        "throttle_ratio": round_figure(finding.throttle_ratio, 4),
        "throttled_seconds_per_second": round_figure(finding.throttled_seconds_per_second, 4),
        "periods": finding.periods,
        "throttled_periods": finding.throttled_periods,
        "threads": finding.threads,
        "kernel_version": finding.kernel_version or None,
        "kernel_verdict": finding.kernel_verdict or None,
        "window_start": finding.window_start,
        "window_end": finding.window_end,
        # In contract key order: PostgreSQL's jsonb gives keys back in its own order.
        "recommendations": [{key: rec.get(key) for key in RECOMMENDATION_KEYS} for rec in finding.recommendations],
        "pressure_waiting_per_second": round_figure(pressure.waiting_per_second, 4),
        "pressure_stalled_per_second": round_figure(pressure.stalled_per_second, 4),
        "pressure_status": pressure.status,
        "cpu_pressure_waiting_seconds_per_second": round_figure(pressure.waiting_per_second, 4),
        "cpu_pressure_stalled_seconds_per_second": round_figure(pressure.stalled_per_second, 4),
        "pod_limit_mcpu": pod.limit_mcpu,
        "image": container.image or None,
        "runtime": guess_runtime(container.image, dict(env_pairs(container.cpu_env))).runtime,
        "pod_throttle_ratio": round_figure(finding.pod_throttle_ratio, 4),
    }


def recommendation_rows(rows: Iterable[Finding]) -> Iterator[dict[str, Any]]:
    """One row per (container, recommendation) with the recommendations CSV's columns. `window_start` is None for
    lifetime figures; `kubectl_command` sets the suggested request and/or limit on the pod's owner (None when the
    recommendation suggests neither, e.g. upgrade_kernel)."""
    for finding in rows:
        base = report_row(finding)
        for rec in finding.recommendations:
            command = kubectl_command(
                namespace=base["namespace"],
                pod=base["pod"],
                container=base["container"],
                workload_kind=base["workload_kind"],
                workload_name=base["workload_name"],
                request_mcpu=rec.get("suggested_request_mcpu"),
                limit_mcpu=rec.get("suggested_limit_mcpu"),
            )
            yield {
                "cluster": base["cluster"],
                "namespace": base["namespace"],
                "workload_kind": base["workload_kind"],
                "workload_name": base["workload_name"],
                "pod": base["pod"],
                "container": base["container"],
                "node": base["node"],
                "kind": rec["kind"],
                "severity": rec["severity"],
                "summary": rec["summary"],
                "throttle_ratio": base["throttle_ratio"],
                "usage_p95_mcpu": base["usage_p95_mcpu"],
                "request_mcpu": base["request_mcpu"],
                "limit_mcpu": base["limit_mcpu"],
                "suggested_request_mcpu": rec["suggested_request_mcpu"],
                "suggested_limit_mcpu": rec["suggested_limit_mcpu"],
                "kernel_verdict": base["kernel_verdict"],
                "window_start": base["window_start"],
                "window_end": base["window_end"],
                "computed_at": finding.computed_at,
                "periods": base["periods"],
                "kubectl_command": command[0] if command is not None else None,
                "expected_throttle_ratio_max": rec.get("expected_throttle_ratio_max"),
                "expected_basis": rec.get("expected_basis"),
                "pressure_waiting_per_second": base["pressure_waiting_per_second"],
                "pressure_status": base["pressure_status"],
                "suggested_pod_limit_mcpu": rec.get("suggested_pod_limit_mcpu"),
            }


def _number(value: float | None) -> float | int | None:
    if value is None:
        return None
    return int(value) if float(value).is_integer() else value


def explanation(finding: Finding, policy: Policy | None = None) -> tuple[str, ...]:
    """The finding's explanation paragraphs, rebuilt from what the finding stores and its container and node (loaded
    with it: select_related "container__pod__node" and "container__burst") — the same text the advisor would have written at refresh.

    Request, limit and node figures are the current ones: after a resize they may be newer than the finding's.
    """
    return explain_paragraphs(container_facts(finding), _recommendations(finding), policy or policy_from_settings())


def shortfalls(finding: Finding, policy: Policy | None = None) -> tuple[Shortfall, ...]:
    """What the finding's data is short of for the rules that could not judge it yet (rules.data_shortfalls)."""
    return data_shortfalls(
        container_facts(finding), policy or policy_from_settings(), WINDOW_SECONDS[Window(finding.window)]
    )


def finding_window(finding: Finding) -> WindowSummary:
    """The WindowSummary the advisor judged the finding on, as the finding stored it."""
    return WindowSummary(
        window_start=finding.window_start,
        window_end=finding.window_end,
        periods=finding.periods,
        throttled_periods=finding.throttled_periods,
        throttle_ratio=finding.throttle_ratio,
        throttled_seconds_per_second=finding.throttled_seconds_per_second,
        usage_avg_mcpu=finding.usage_avg_mcpu,
        usage_p95_mcpu=finding.usage_p95_mcpu,
        usage_p99_mcpu=None,
        usage_max_mcpu=finding.usage_max_mcpu,
        threads_max=finding.threads,
        samples=finding.samples,
        covered_seconds=finding.covered_seconds,
        lifetime=finding.lifetime,
        gaps_ignored=finding.gaps_ignored,
        usage_active_mcpu=finding.usage_active_mcpu,
        pressure_waiting_per_second=finding.pressure_waiting_per_second,
        pressure_stalled_per_second=finding.pressure_stalled_per_second,
        throttled_seconds_total=finding.throttled_seconds_total,
        pressure_waiting_seconds_total=finding.pressure_waiting_seconds_total,
    )


def _burst_of(container: Container) -> BurstReading | None:
    """The node agent's last burst reading of the container (loaded with it: select_related "container__burst")."""
    try:
        return container.burst
    except BurstReading.DoesNotExist:
        return None


def container_facts(finding: Finding) -> ContainerFacts:
    """The ContainerFacts the advisor judged the finding on, from the finding, its container and its node."""
    container = finding.container
    node = container.pod.node
    summary = finding_window(finding)
    burst = _burst_of(container)
    facts = ContainerFacts(
        window=summary,
        request_mcpu=container.request_mcpu,
        limit_mcpu=container.limit_mcpu,
        period_us=finding.period_us or DEFAULT_PERIOD_US,
        node_cpus=int(finding.node_cpus) if finding.node_cpus else None,
        node_allocatable_mcpu=node.allocatable_mcpu if node else None,
        cpu_manager_policy=node.cpu_manager_policy if node else "",
        qos_class=container.pod.qos_class,
        kernel=kernel_verdict(finding.kernel_version) if finding.kernel_version else None,
        shares_floor_mcpu=finding.shares_floor_mcpu,
        node_total_shares=finding.node_total_shares,
        cfs_slice_us=node.cfs_slice_us if node else None,
        cgroup_version=finding.cgroup_version,
        weight_mapping=finding.weight_mapping,
        image=container.image,
        cpu_env=env_pairs(container.cpu_env),
        pod_limit_mcpu=container.pod.limit_mcpu,
        burst_us=burst.burst_us if burst else None,
        bursts_total=burst.bursts_total if burst else None,
        burst_seconds_total=burst.burst_seconds_total if burst else None,
    )
    return facts


def _recommendations(finding: Finding) -> list[Recommendation]:
    return [
        Recommendation(
            kind=r["kind"],
            severity=r["severity"],
            summary=r["summary"],
            detail=r["detail"],
            suggested_request_mcpu=r.get("suggested_request_mcpu"),
            suggested_limit_mcpu=r.get("suggested_limit_mcpu"),
            expected_throttle_ratio_max=r.get("expected_throttle_ratio_max"),
            expected_basis=r.get("expected_basis") or "",
            suggested_pod_limit_mcpu=r.get("suggested_pod_limit_mcpu"),
        )
        for r in finding.recommendations
    ]


def findings_glance(cluster: Cluster, computed_at: datetime, *, top: int = 5) -> list[str]:
    """The cluster's 1-hour findings at a glance, as lines for a command to print: how many containers, how many
    with a ratio (and from lifetime counters), over the target, the `top` most throttled, the advice by kind."""
    target = float(policy_from_settings().throttle_target)
    containers = lifetime = with_ratio = throttled = 0
    kinds: dict[str, int] = {}
    ranked: list[tuple[str, float, int | None, bool]] = []
    for finding in Finding.objects.filter(cluster=cluster, window=Window.HOUR).select_related("container__pod"):
        containers += 1
        lifetime += finding.lifetime
        for recommendation in finding.recommendations or []:
            kind = str(recommendation.get("kind"))
            kinds[kind] = kinds.get(kind, 0) + 1
        if finding.throttle_ratio is None:
            continue
        with_ratio += 1
        throttled += finding.throttle_ratio >= target
        pod = finding.container.pod
        name = f"{pod.namespace}/{pod.name}/{finding.container.name}"
        ranked.append((name, finding.throttle_ratio, finding.periods, finding.lifetime))
    ranked.sort(key=lambda row: (-row[1], -(row[2] or 0), row[0]))
    lines = [
        f"Findings (last hour to {computed_at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC): {containers} container(s), "
        f"{with_ratio} with a throttle ratio ({lifetime} from lifetime counters); "
        f"{throttled} at or above the {target:.0%} target."
    ]
    for name, ratio, periods, is_lifetime in ranked[:top]:
        scope = "since the container started" if is_lifetime else "in the window"
        lines.append(f"  {ratio:6.1%} of {periods if periods is not None else '?'} periods throttled {scope}: {name}")
    if kinds:
        by_count = sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))
        lines.append("  Recommendations: " + ", ".join(f"{kind} ×{n}" for kind, n in by_count))
    else:
        lines.append("  No recommendations.")
    return lines


def pod_quota(pod: Pod, window: str, since: datetime, until: datetime, findings: Iterable[Finding]) -> PodQuota | None:
    """The pod cgroup's own throttling over (since, until] beside its containers' findings (`findings`), or None when
    no pod-level counters are stored (no pod-level quota, or a source that does not read the pod cgroup)."""
    cgroup = Container.with_pod_cgroups.filter(pod=pod, name=POD_CGROUP).values_list("pk", "period_us").first()
    if cgroup is None:
        return None
    cid, period_us = cgroup
    findings = list(findings)
    # The refresh's instant, not the containers' window end: a lifetime finding ends at its own reading, and the
    # pod cgroup's reading of the same scrape can be a few seconds later.
    span = until - since
    until = max([until, *(f.computed_at for f in findings if f.computed_at)])
    summary = summaries_of({cid: period_us}, window, until - span, until).get(cid)
    if summary is None:
        return None
    return judge_pod_quota(
        summary,
        pod_limit_mcpu=pod.limit_mcpu,
        container_limits=[c.limit_mcpu for c in pod.containers.all()],
        container_ratios=[f.throttle_ratio for f in findings],
        target=policy_from_settings().throttle_target,
        init_limit_mcpu=pod.init_limit_mcpu,
        init_unlimited=pod.init_unlimited,
    )
