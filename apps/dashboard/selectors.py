"""Reads for the pages, shaped for templates.

Report rows come from the advisor's selectors (`findings()`, `report_row()`), the same ones the API and the CSV use,
so a page cannot show a figure the export does not. This module adds what only pages need: the overview's
aggregates, per-namespace summaries, sorting, the node's share holders and the pod page's per-container bundle.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, F, Max, OuterRef, Q, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Coalesce, NullIf
from django.http import Http404
from django.utils import timezone

from apps.advisor.kernel import KernelVerdict, kernel_verdict
from apps.advisor.models import WINDOW_SECONDS, ChangeAdvice, Finding, Window
from apps.advisor.pod_quota import PodQuota
from apps.advisor.rules import shortfall_text
from apps.advisor.selectors import (
    Coverage,
    coverage_aggregates,
    coverage_from,
    explanation,
    findings,
    pod_quota,
    report_row,
    shortfalls,
    window_coverage,
)
from apps.advisor.vocabulary import VERDICTS
from apps.clusters.models import Cluster, Container, Node, Pod
from apps.clusters.visibility import EVERYTHING, Visibility
from apps.collector.models import CollectionRun
from apps.telemetry.selectors import SeriesPoint, container_series

# Sortable report columns: the `?sort=` key (a contract field name, `-` for descending) → database fields.
# Unknown numbers sort last in both directions; pod then container break ties so pages are stable.
SORT_FIELDS: dict[str, tuple[str, ...]] = {
    "pod": ("container__pod__name", "container__name"),
    "container": ("container__name", "container__pod__name"),
    "node": ("container__pod__node__name",),
    "workload_name": ("container__pod__workload_name",),
    "request_mcpu": ("container__request_mcpu",),
    "limit_mcpu": ("container__limit_mcpu",),
    "shares_floor_mcpu": ("shares_floor_mcpu",),
    "quota_ceiling_mcpu": ("quota_ceiling_mcpu",),
    "usage_avg_mcpu": ("usage_avg_mcpu",),
    "usage_p95_mcpu": ("usage_p95_mcpu",),
    "throttle_ratio": ("throttle_ratio",),
    "throttled_seconds_per_second": ("throttled_seconds_per_second",),
    # The impact of throttling where CPU pressure is collected: the share of the time the container waited.
    "pressure_waiting_per_second": ("pressure_waiting_per_second",),
    "threads": ("threads",),
    "kernel_verdict": ("kernel_verdict",),
    # Most severe first when ascending: severity_rank is 0 critical … 2 info, 9 none.
    "severity": ("severity_rank",),
}
SORT_CHOICES = tuple(key for name in SORT_FIELDS for key in (name, f"-{name}"))
# A finding with a figure to show: window_coverage's "measured".
MEASURED = Q(throttle_ratio__isnull=False) | Q(usage_avg_mcpu__isnull=False)


def throttle_target() -> float:
    """The throttle ratio (0–1) above which a container counts as over target (settings.CPUTUNE_THROTTLE_TARGET)."""
    return float(settings.CPUTUNE_THROTTLE_TARGET)


@dataclass(frozen=True)
class WindowStatus:
    """What a page's window figures rest on, so an empty or young window never reads as good news."""

    coverage: Coverage
    next_refresh_at: datetime | None  # the coverage's; before any finding, the cluster's next collection

    @property
    def lifetime_only(self) -> bool:
        """Every figure is a lifetime one: one reading so far, nothing spans time yet."""
        return self.coverage.computed and self.coverage.lifetime > 0 and not self.coverage.covered_seconds


def window_status(
    cluster: Cluster,
    window: str,
    *,
    namespace: str | None = None,
    container_ids: Iterable[int] | None = None,
    coverage: Coverage | None = None,
) -> WindowStatus:
    """The findings' coverage (window_coverage, or `coverage` when the page read it already) and when the next
    figures are due: the coverage's next refresh, or with no finding yet the cluster's next collection."""
    if coverage is None:
        coverage = window_coverage(cluster, window, namespace=namespace, container_ids=container_ids)
    next_at = coverage.next_refresh_at
    if next_at is None:
        last = CollectionRun.objects.filter(cluster=cluster).order_by("-started_at").values_list("started_at")[:1]
        started = [row[0] for row in last]
        if started:
            next_at = started[0] + timedelta(seconds=int(settings.CPUTUNE_COLLECT_INTERVAL))
    return WindowStatus(coverage, next_at)


# --- lookups that 404 --------------------------------------------------------------------------------------------


# Outside the viewer's scope, a lookup answers as if nothing were there: the 404 says no more than for a typo.


def get_cluster(name: str, visibility: Visibility = EVERYTHING) -> Cluster:
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None or not visibility.sees_cluster(cluster.pk):
        raise Http404(f"No cluster named {name!r}.")
    return cluster


def require_visible_namespace(cluster: Cluster, namespace: str, visibility: Visibility) -> None:
    if not visibility.sees_namespace(cluster.pk, namespace):
        raise Http404(f"No namespace {namespace!r} in cluster {cluster.name!r}.")


def require_namespace(cluster: Cluster, namespace: str, visibility: Visibility = EVERYTHING) -> None:
    """404 unless the viewer sees `namespace` and some pod of the cluster was ever seen in it."""
    require_visible_namespace(cluster, namespace, visibility)
    if not Pod.objects.filter(cluster=cluster, namespace=namespace).exists():
        raise Http404(f"No namespace {namespace!r} in cluster {cluster.name!r}.")


def get_pod(cluster: Cluster, namespace: str, name: str, visibility: Visibility = EVERYTHING) -> Pod:
    require_visible_namespace(cluster, namespace, visibility)
    try:
        return Pod.objects.select_related("node").get(cluster=cluster, namespace=namespace, name=name)
    except Pod.DoesNotExist:
        raise Http404(f"No pod {namespace}/{name} in cluster {cluster.name!r}.") from None


def get_node(cluster: Cluster, name: str, visibility: Visibility = EVERYTHING) -> Node:
    """A node page lists every namespace's pods on the node: it needs the whole cluster."""
    node = Node.objects.filter(cluster=cluster, name=name).first()
    if node is None or not visibility.sees_whole_cluster(cluster.pk):
        raise Http404(f"No node {name!r} in cluster {cluster.name!r}.")
    return node


# --- overview ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterRow:
    cluster: Cluster
    last_run: CollectionRun | None
    nodes: int
    pods: int
    problems: int  # problems recorded by the last run
    next_run_at: datetime | None  # last run's start + the collection interval: when beat should run it next
    overdue: bool  # the next run is more than one interval late: is a worker running?
    verdicts: dict[str, int]  # nodes per kernel verdict
    last_seen: datetime | None  # the newest node sighting: data can arrive without runs (imports, node agents)
    status: WindowStatus  # what the last hour's figures rest on


@dataclass(frozen=True)
class WorkloadRow:
    cluster: str
    namespace: str
    workload_kind: str
    workload_name: str
    containers: int
    worst_ratio: float
    throttled_seconds_per_second: float | None
    lifetime: bool  # the worst ratio is a lifetime figure: counters since the container started, not this hour
    lifetime_periods: int | None = None  # the most periods a lifetime figure of the group counts


@dataclass(frozen=True)
class Overview:
    clusters: list[ClusterRow]
    workloads: list[WorkloadRow]
    verdicts: dict[str, int]
    target: float
    interval_s: int
    record: AdviceRecord | None = None

    @property
    def measured(self) -> bool:
        """Some cluster has last-hour figures: without any, "nothing throttled" would be a guess."""
        return any(row.status.coverage.computed for row in self.clusters)

    @property
    def young(self) -> bool:
        """Some cluster's last-hour figures rest on part of the hour, or on lifetime counters."""
        return any(
            row.status.coverage.computed and (row.status.coverage.partial or row.status.coverage.lifetime)
            for row in self.clusters
        )


def overview(*, now: datetime | None = None, top: int = 10, visibility: Visibility = EVERYTHING) -> Overview:
    """Every cluster the viewer sees, with its last run and node verdicts, and the `top` most throttled workloads of
    the last hour (counts and verdicts over what the viewer sees)."""
    now = now or timezone.now()
    interval_s = int(settings.CPUTUNE_COLLECT_INTERVAL)
    latest = CollectionRun.objects.filter(cluster=OuterRef("pk")).order_by("-started_at").values("pk")[:1]
    node_q = visibility.node_q()
    clusters = list(
        visibility.clusters(Cluster.objects.all()).annotate(
            node_count=Subquery(_count_of(Node, node_q)),
            pod_count=Subquery(_count_of(Pod, visibility.q())),
            last_run_id=Subquery(latest),
            last_seen=Subquery(
                Node.objects.filter(cluster=OuterRef("pk"))
                .filter(node_q)
                .order_by(F("last_seen").desc(nulls_last=True))
                .values("last_seen")[:1]
            ),
        )
    )
    run_ids = [c.last_run_id for c in clusters if c.last_run_id]
    last_runs = {
        run.cluster_id: run
        for run in CollectionRun.objects.filter(pk__in=run_ids).annotate(problem_count=Count("problems"))
    }
    per_cluster_verdicts = node_verdict_counts(visibility=visibility)
    rows = []
    for cluster in clusters:
        run = last_runs.get(cluster.pk)
        next_at = run.started_at + timedelta(seconds=interval_s) if run else None
        rows.append(
            ClusterRow(
                cluster=cluster,
                last_run=run,
                nodes=cluster.node_count or 0,
                pods=cluster.pod_count or 0,
                problems=getattr(run, "problem_count", 0) if run else 0,
                next_run_at=next_at,
                overdue=bool(cluster.enabled and next_at and now - next_at > timedelta(seconds=interval_s)),
                verdicts=per_cluster_verdicts.get(cluster.pk, dict.fromkeys(VERDICTS, 0)),
                last_seen=cluster.last_seen,
                status=_overview_status(cluster, run, interval_s),
            )
        )
    total: Counter[str] = Counter()
    for counts in per_cluster_verdicts.values():
        total.update(counts)
    return Overview(
        clusters=rows,
        workloads=most_throttled_workloads(top=top, visibility=visibility),
        verdicts={v: total.get(v, 0) for v in VERDICTS},
        target=throttle_target(),
        interval_s=interval_s,
        record=advice_record(now=now, visibility=visibility),
    )


@dataclass(frozen=True)
class AdviceRecord:
    """cputune's own record over RECORD_DAYS: changes that carried out its advice, and how they turned out."""

    followed: int
    worked: int
    did_not: int
    unjudged: int = 0  # windows that ended without the figures to judge (no periods before, or too few after)

    @property
    def pending(self) -> int:
        return self.followed - self.worked - self.did_not - self.unjudged


RECORD_DAYS = 30


def advice_record(*, now: datetime, visibility: Visibility = EVERYTHING) -> AdviceRecord | None:
    """The record over what the viewer sees; None when no change followed the advice in RECORD_DAYS."""
    rows = ChangeAdvice.objects.exclude(kind="").filter(checked_at__gte=now - timedelta(days=RECORD_DAYS))
    rows = visibility.filter(
        rows, cluster="change__container__pod__cluster_id", namespace="change__container__pod__namespace"
    )
    # Aliases unlike the fields: an aggregate cannot share a name with the field it filters on.
    counts = rows.aggregate(
        n_followed=Count("pk"),
        n_worked=Count("pk", filter=Q(worked=True)),
        n_did_not=Count("pk", filter=Q(worked=False)),
        n_unjudged=Count("pk", filter=Q(worked__isnull=True) & ~Q(verdict="")),
    )
    if not counts["n_followed"]:
        return None
    return AdviceRecord(
        followed=counts["n_followed"],
        worked=counts["n_worked"],
        did_not=counts["n_did_not"],
        unjudged=counts["n_unjudged"],
    )


def _overview_status(cluster: Cluster, run: CollectionRun | None, interval_s: int) -> WindowStatus:
    """The last hour's coverage of one cluster; its last run is known already, so no second look for it."""
    coverage = window_coverage(cluster, Window.HOUR)
    next_at = coverage.next_refresh_at
    if next_at is None and run is not None:
        next_at = run.started_at + timedelta(seconds=interval_s)
    return WindowStatus(coverage, next_at)


def _count_of(model: type[Node] | type[Pod], visible: Q) -> QuerySet:
    """A correlated count of the cluster's rows of `model` the viewer sees (avoids joining nodes × pods in one
    GROUP BY)."""
    rows = model.objects.filter(cluster=OuterRef("pk")).filter(visible)
    return rows.order_by().values("cluster").annotate(n=Count("pk")).values("n")


def node_verdict_counts(
    cluster: Cluster | None = None, visibility: Visibility = EVERYTHING
) -> dict[int, dict[str, int]]:
    """Nodes the viewer sees per kernel verdict, per cluster id. One query over distinct kernel versions; verdicts
    are cached."""
    qs = Node.objects.all() if cluster is None else Node.objects.filter(cluster=cluster)
    qs = qs.filter(visibility.node_q())
    out: dict[int, dict[str, int]] = defaultdict(lambda: dict.fromkeys(VERDICTS, 0))
    for cluster_id, version, n in qs.values_list("cluster_id", "kernel_version").annotate(n=Count("id")):
        out[cluster_id][kernel_verdict(version).verdict] += n
    return dict(out)


def most_throttled_workloads(
    *, top: int = 10, window: str = Window.HOUR, visibility: Visibility = EVERYTHING
) -> list[WorkloadRow]:
    """Workloads (pods grouped by owner; a bare pod stands for itself) by their worst container's throttle ratio.

    Only workloads with a ratio above 0 are listed; ties go to the one losing more seconds per second.
    """
    workload = Coalesce(NullIf(F("container__pod__workload_name"), Value("")), F("container__pod__name"))
    qs = (
        visibility.filter(Finding.objects.filter(window=window, throttle_ratio__gt=0))
        .values("cluster__name", "namespace", "container__pod__workload_kind")
        .annotate(
            workload=workload,
            containers=Count("id"),
            worst=Max("throttle_ratio"),
            worst_in_window=Max("throttle_ratio", filter=Q(lifetime=False)),
            lifetime_periods=Max("periods", filter=Q(lifetime=True)),
            lost=Sum("throttled_seconds_per_second"),
        )
        .order_by("-worst", F("lost").desc(nulls_last=True), "cluster__name", "namespace", "workload")[:top]
    )
    return [
        WorkloadRow(
            cluster=r["cluster__name"],
            namespace=r["namespace"],
            workload_kind=r["container__pod__workload_kind"] or "Pod",
            workload_name=r["workload"],
            containers=r["containers"],
            worst_ratio=r["worst"],
            throttled_seconds_per_second=r["lost"],
            lifetime=_worst_is_lifetime(r["worst"], r["worst_in_window"]),
            lifetime_periods=r["lifetime_periods"],
        )
        for r in qs
    ]


def _worst_is_lifetime(worst: float | None, worst_in_window: float | None) -> bool:
    """Whether the worst ratio of a group comes from lifetime figures: no window figure reaches it."""
    return worst is not None and (worst_in_window is None or worst_in_window < worst)


# --- cluster -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NamespaceRow:
    namespace: str
    containers: int
    over_target: int
    worst_ratio: float | None
    critical: int  # containers with a critical recommendation
    measured: int = 0  # containers with a ratio or a usage figure: none, and "0 over target" says nothing
    lifetime: bool = False  # the worst ratio is a lifetime figure


@dataclass(frozen=True)
class NodeRow:
    node: Node
    verdict: KernelVerdict
    pods: int


@dataclass(frozen=True)
class ClusterPage:
    cluster: Cluster
    namespaces: list[NamespaceRow]
    nodes: list[NodeRow]
    runs: list[CollectionRun]
    target: float
    next_run_at: datetime | None
    status: WindowStatus


def cluster_page(
    cluster: Cluster, *, window: str = Window.HOUR, runs: int = 5, visibility: Visibility = EVERYTHING
) -> ClusterPage:
    """Namespaces (containers, over target, worst ratio), nodes with kernel verdicts, and the last `runs` runs —
    what the viewer sees of them (runs, whose problems name any namespace, only with the whole cluster)."""
    target = throttle_target()
    namespaces = [
        NamespaceRow(
            namespace=r["namespace"],
            containers=r["containers"],
            over_target=r["over"],
            worst_ratio=r["worst"],
            critical=r["critical"],
            measured=r["measured"],
            lifetime=_worst_is_lifetime(r["worst"], r["worst_in_window"]),
        )
        for r in visibility.filter(Finding.objects.filter(cluster=cluster, window=window))
        .values("namespace")
        .annotate(
            containers=Count("id"),
            over=Count("id", filter=Q(throttle_ratio__gt=target)),
            worst=Max("throttle_ratio"),
            worst_in_window=Max("throttle_ratio", filter=Q(lifetime=False)),
            critical=Count("id", filter=Q(severity_rank=0)),
            measured=Count("id", filter=MEASURED),
        )
        .order_by(F("worst").desc(nulls_last=True), "namespace")
    ]
    # Namespaces whose pods have no finding in this window (not seen since it started) still get a row.
    known = {row.namespace for row in namespaces}
    pods = visibility.filter(Pod.objects.filter(cluster=cluster))
    for ns in pods.values_list("namespace", flat=True).distinct().order_by("namespace"):
        if ns not in known:
            namespaces.append(NamespaceRow(ns, 0, 0, None, 0))
    nodes = [
        NodeRow(node=node, verdict=kernel_verdict(node.kernel_version), pods=node.pod_count)
        for node in visibility.nodes(cluster.pk)
    ]
    last_runs = (
        list(CollectionRun.objects.filter(cluster=cluster).prefetch_related("problems")[:runs])
        if visibility.sees_whole_cluster(cluster.pk)
        else []
    )
    next_at = last_runs[0].started_at + timedelta(seconds=int(settings.CPUTUNE_COLLECT_INTERVAL)) if last_runs else None
    coverage = window_coverage(cluster, window)
    status = WindowStatus(coverage, coverage.next_refresh_at or next_at)
    return ClusterPage(cluster, namespaces, nodes, last_runs, target, next_at, status)


# --- namespace report --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReportLine:
    row: dict[str, Any]  # report_row(): the contract's fields
    lifetime: bool  # a single reading: counters since the container started, no window
    shortfall: str = ""  # without advice: "not enough data yet (7 of 30 minutes)" when some rule could not judge


@dataclass(frozen=True)
class NamespaceSummary:
    containers: int
    over_target: int
    worst_ratio: float | None
    window_start: datetime | None
    window_end: datetime | None
    coverage: Coverage
    worst_lifetime: bool = False  # the worst ratio is a lifetime figure


def report_queryset(
    cluster: Cluster,
    namespace: str,
    *,
    window: str = Window.HOUR,
    sort: str = "",
    kind: str | None = None,
    min_throttle_ratio: float | None = None,
    node: str | None = None,
    workload: str | None = None,
) -> QuerySet[Finding]:
    """The namespace report's rows: `findings()` with its filters, re-ordered by `sort` (a SORT_CHOICES key).

    An empty `sort` keeps findings()' order (worst throttle ratio first). Raises ValueError for an unknown key.
    """
    qs = findings(
        cluster,
        window=window,
        namespace=namespace,
        kind=kind,
        min_throttle_ratio=min_throttle_ratio,
        node=node,
        workload=workload,
    )
    if not sort:
        return qs
    descending = sort.startswith("-")
    fields = SORT_FIELDS.get(sort.lstrip("-"))
    if fields is None:
        raise ValueError(f"cannot sort by {sort!r}: use one of {', '.join(SORT_CHOICES)}")
    order = [F(f).desc(nulls_last=True) if descending else F(f).asc(nulls_last=True) for f in fields]
    return qs.order_by(*order, "container__pod__name", "container__name")


def report_lines(page_rows: Iterable[Finding]) -> list[ReportLine]:
    """Report rows with their lifetime flag and, for a row without advice, what its data is short of."""
    return [
        ReportLine(
            row=report_row(f),
            lifetime=f.lifetime,
            shortfall="" if f.recommendations else shortfall_text(shortfalls(f)),
        )
        for f in page_rows
    ]


def namespace_summary(cluster: Cluster, namespace: str, window: str) -> NamespaceSummary:
    """Containers, how many are over the throttle target, the worst ratio, the window's span and what the figures
    rest on (window_coverage's aggregates), in one query."""
    agg = Finding.objects.filter(cluster=cluster, namespace=namespace, window=window).aggregate(
        containers=Count("id"),
        over=Count("id", filter=Q(throttle_ratio__gt=throttle_target())),
        worst=Max("throttle_ratio"),
        worst_in_window=Max("throttle_ratio", filter=Q(lifetime=False)),
        end=Max("window_end"),
        start=Max("window_start"),
        **coverage_aggregates(),
    )
    return NamespaceSummary(
        agg["containers"],
        agg["over"],
        agg["worst"],
        agg["start"],
        agg["end"],
        coverage_from(window, agg),
        _worst_is_lifetime(agg["worst"], agg["worst_in_window"]),
    )


def namespace_choices(cluster: Cluster, namespace: str) -> tuple[list[str], list[str]]:
    """The namespace's node names and workload names, for the filter form's drop-downs."""
    pairs = (
        Pod.objects.filter(cluster=cluster, namespace=namespace)
        .order_by()  # the model's ordering would join the DISTINCT
        .values_list("node__name", "workload_name")
        .distinct()
    )
    nodes: set[str] = set()
    workloads: set[str] = set()
    for node, workload in pairs:
        if node:
            nodes.add(node)
        if workload:
            workloads.add(workload)
    return sorted(nodes), sorted(workloads)


# --- pod detail --------------------------------------------------------------------------------------------------


@dataclass
class ContainerDetail:
    container: Container
    finding: Finding | None
    row: dict[str, Any] | None
    points: list[SeriesPoint] = field(default_factory=list)
    explanation: tuple[str, ...] = ()  # paragraphs
    shortfall: str = ""  # without advice: what its data is short of ("not enough data yet (7 of 30 minutes)")


@dataclass(frozen=True)
class PodDetail:
    pod: Pod
    containers: list[ContainerDetail]
    since: datetime
    until: datetime
    resolution: str  # "raw" (one point per collection) or "hourly"
    status: WindowStatus
    pod_quota: PodQuota | None = None  # the pod cgroup's own throttling, where it is stored


def pod_detail(pod: Pod, *, window: str = Window.HOUR, now: datetime | None = None) -> PodDetail:
    """Every container of the pod with its finding for `window` and its series over the same span.

    The span ends at the findings' window end (the last refresh) so charts and figures describe the same time;
    without findings it ends now.
    """
    containers = list(pod.containers.all())
    by_container = {
        f.container_id: f
        for f in Finding.objects.filter(container__pod=pod, window=window).select_related(
            "container", "container__pod", "container__pod__node", "container__burst", "cluster"
        )
    }
    ends = [f.window_end for f in by_container.values() if f.window_end]
    until = max(ends) if ends else (now or timezone.now())
    since = until - timedelta(seconds=WINDOW_SECONDS[Window(window)])
    resolution, series = container_series([c.pk for c in containers], since, until)
    details = []
    for c in containers:
        finding = by_container.get(c.pk)
        details.append(
            ContainerDetail(
                container=c,
                finding=finding,
                row=report_row(finding) if finding else None,
                points=series.get(c.pk, []),
                explanation=explanation(finding) if finding else (),
                shortfall=shortfall_text(shortfalls(finding)) if finding and not finding.recommendations else "",
            )
        )
    status = window_status(pod.cluster, window, container_ids=[c.pk for c in containers])
    quota = pod_quota(pod, window, since, until, by_container.values())
    return PodDetail(pod, details, since, until, resolution, status, quota)
