"""Reads the API needs beyond advisor.selectors: namespace aggregates, nodes, pod series, chat summaries, metric rows.

Report rows and recommendation rows always come from advisor.selectors (report_row, recommendation_rows), the
functions the dashboard uses too, so a page, a CSV file and an API response show the same figures.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, overload

from django.db.models import Count, F, Max, Q, QuerySet
from django.utils import timezone

from apps.advisor.changes import change_rows, changes_of
from apps.advisor.models import Finding, Window
from apps.advisor.selectors import Coverage, findings, recommendation_rows, report_row, window_coverage
from apps.clusters.models import Cluster, Container, Node, Pod
from apps.clusters.visibility import EVERYTHING, Visibility
from apps.collector.models import CollectionRun
from apps.telemetry.selectors import container_series


def cluster_named(name: str) -> Cluster | None:
    return Cluster.objects.filter(name=name).first()


def namespace_exists(cluster: Cluster, namespace: str) -> bool:
    """A namespace exists for cputune when a pod of the cluster was seen in it."""
    return Pod.objects.filter(cluster=cluster, namespace=namespace).exists()


def pod_named(cluster: Cluster, namespace: str, name: str) -> Pod | None:
    return Pod.objects.filter(cluster=cluster, namespace=namespace, name=name).first()


# ?ordering= values of the report rows and the columns they sort by; "-" sorts descending. Unknown (null) values
# always sort last, in both directions, so `-throttle_ratio` starts with the worst measured container.
_ORDER_COLUMNS = {
    "throttle_ratio": "throttle_ratio",
    "throttled_seconds_per_second": "throttled_seconds_per_second",
    "pressure_waiting_per_second": "pressure_waiting_per_second",
    "usage_p95_mcpu": "usage_p95_mcpu",
    "usage_avg_mcpu": "usage_avg_mcpu",
    "request_mcpu": "container__request_mcpu",
    "limit_mcpu": "container__limit_mcpu",
    "threads": "threads",
    "pod": "container__pod__name",
    "node": "container__pod__node__name",
}
ORDERINGS = tuple(f"{sign}{key}" for key in _ORDER_COLUMNS for sign in ("-", ""))
_TIE_BREAK = ("namespace", "container__pod__name", "container__name")


def order_findings(queryset: QuerySet[Finding], ordering: str | None) -> QuerySet[Finding]:
    """Reorder report findings by one of ORDERINGS (None keeps the selector's worst-first order); ties by namespace,
    pod and container so pages are stable. Raises ValueError for an ordering not in ORDERINGS."""
    if ordering is None:
        return queryset
    if ordering not in ORDERINGS:
        raise ValueError(f"ordering {ordering!r} is not one of {', '.join(ORDERINGS)}")
    column = F(_ORDER_COLUMNS[ordering.lstrip("-")])
    key = column.desc(nulls_last=True) if ordering.startswith("-") else column.asc(nulls_last=True)
    return queryset.order_by(key, *_TIE_BREAK)


def nodes(cluster: Cluster, visibility: Visibility = EVERYTHING) -> QuerySet[Node]:
    """The cluster's nodes the viewer sees, by name, each with `pod_count` (pods last seen on it)."""
    return visibility.nodes(cluster.pk).order_by("name")


def namespace_rows(cluster: Cluster, *, window: str, throttle_target: float) -> list[dict[str, Any]]:
    """One row per namespace with pods in the cluster, by name: pods, containers, and for `window` the containers over
    the throttle target (ratio > target), those with any recommendation, and the worst ratio (None when unknown)."""
    pods = dict(
        Pod.objects.filter(cluster=cluster).values("namespace").annotate(n=Count("id")).values_list("namespace", "n")
    )
    containers = dict(
        Container.objects.filter(pod__cluster=cluster)
        .values("pod__namespace")
        .annotate(n=Count("id"))
        .values_list("pod__namespace", "n")
    )
    stats: dict[str, dict[str, Any]] = {
        row["namespace"]: dict(row)
        for row in Finding.objects.filter(cluster=cluster, window=window)
        .values("namespace")
        .annotate(
            over=Count("id", filter=Q(throttle_ratio__gt=throttle_target)),
            advised=Count("id", filter=~Q(kinds="")),
            worst=Max("throttle_ratio"),
        )
    }
    rows = []
    for namespace in sorted(pods):
        row = stats.get(namespace, {})
        worst = row.get("worst")
        rows.append(
            {
                "namespace": namespace,
                "pods": pods[namespace],
                "containers": containers.get(namespace, 0),
                "containers_over_target": row.get("over", 0),
                "containers_with_recommendations": row.get("advised", 0),
                "worst_throttle_ratio": None if worst is None else round(worst, 4),
                "throttle_target": throttle_target,
                "window": window,
            }
        )
    return rows


# --- pod series -----------------------------------------------------------------------------------------------------


def pod_series(pod: Pod, since: datetime, until: datetime) -> dict[str, Any]:
    """Per container of `pod`, its points in [since, until] (telemetry.container_series: raw up to 48 h, hourly beyond)
    and its reference lines: request and limit (mcpu) and, from the last-hour finding, the shares floor and quota
    ceiling (None when not computed yet)."""
    containers = list(Container.objects.filter(pod=pod).order_by("name"))
    resolution, points = container_series([c.pk for c in containers], since, until)
    lines = {
        cid: (floor, ceiling)
        for cid, floor, ceiling in Finding.objects.filter(container__in=containers, window=Window.HOUR).values_list(
            "container_id", "shares_floor_mcpu", "quota_ceiling_mcpu"
        )
    }
    return {
        "cluster": pod.cluster.name,
        "namespace": pod.namespace,
        "pod": pod.name,
        "since": since,
        "until": until,
        "resolution": resolution,
        "containers": [
            {
                "container": c.name,
                "request_mcpu": c.request_mcpu,
                "limit_mcpu": c.limit_mcpu,
                "shares_floor_mcpu": lines.get(c.pk, (None, None))[0],
                "quota_ceiling_mcpu": lines.get(c.pk, (None, None))[1],
                "points": points.get(c.pk, []),
            }
            for c in containers
        ],
    }


# --- chat summaries -------------------------------------------------------------------------------------------------


CHAT_CHANGES = 5
CHAT_CHANGES_SINCE = timedelta(hours=24)


@dataclass(frozen=True)
class NamespaceSummary:
    cluster: str
    namespace: str
    window: str
    throttle_target: float  # ratio, 0–1
    coverage: Coverage  # what the window's findings rest on: computed yet, how much of the window, lifetime figures
    as_of: datetime  # when the summary was read, to tell a refresh still due from one overdue
    containers: int  # containers with a finding for the window
    over_target: int  # of which throttled above the target
    worst: list[dict[str, Any]]  # report rows of the worst over-target containers, worst first, at most `limit`
    advised: list[dict[str, Any]]  # then report rows of containers not over the target with recommendations
    top: dict[str, Any] | None  # the highest-ratio row when none is over the target (None when no ratio is known)
    advised_below_target: int  # containers not over the target that still have recommendations (all, not listed)
    # Change rows (advisor.changes.change_rows) seen in the last CHAT_CHANGES_SINCE, newest first, at most CHAT_CHANGES.
    changes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def hidden_over_target(self) -> int:
        return self.over_target - len(self.worst)

    @property
    def hidden_advised(self) -> int:
        return self.advised_below_target - len(self.advised)


def namespace_summary(
    cluster: Cluster, namespace: str, *, window: str, throttle_target: float, limit: int
) -> NamespaceSummary:
    """What a chat message says about a namespace: the window's coverage, counts, and up to `limit` containers with
    every recommendation of each: those over the target first (worst first), then those with recommendations that are
    not over it (most severe first)."""
    coverage = window_coverage(cluster, window, namespace=namespace)
    qs = findings(cluster, window=window, namespace=namespace)
    over = Q(throttle_ratio__gt=throttle_target)
    advised = ~over & ~Q(kinds="")  # ~over keeps the unknown ratios: NOT (ratio > target AND ratio IS NOT NULL)
    counts = qs.aggregate(containers=Count("id"), over=Count("id", filter=over), advised=Count("id", filter=advised))
    worst = [report_row(f) for f in qs.filter(over)[:limit]]
    rest = limit - len(worst)
    below = (
        qs.filter(advised).order_by(
            "severity_rank", F("throttle_ratio").desc(nulls_last=True), "container__pod__name", "container__name"
        )[:rest]
        if rest > 0
        else []
    )
    top = None
    if not worst:
        first = qs.filter(throttle_ratio__isnull=False).first()
        top = report_row(first) if first is not None else None
    return NamespaceSummary(
        cluster=cluster.name,
        namespace=namespace,
        window=window,
        throttle_target=throttle_target,
        coverage=coverage,
        as_of=timezone.now(),
        containers=counts["containers"],
        over_target=counts["over"],
        worst=worst,
        advised=[report_row(f) for f in below],
        top=top,
        advised_below_target=counts["advised"],
        changes=change_rows(changes_of(cluster, namespace, timezone.now() - CHAT_CHANGES_SINCE)[:CHAT_CHANGES]),
    )


# --- recommendation rows --------------------------------------------------------------------------------------------


def _kinds(kinds: str) -> list[str]:
    return [k for k in kinds.split(",") if k]


class RecommendationRows(Sequence[dict[str, Any]]):
    """Recommendation rows (advisor.selectors.recommendation_rows) over one or more clusters, as a sliceable sequence,
    so a page of JSON reads only the findings it shows.

    Its length comes from each finding's `kinds` (one light query per cluster); a slice loads just the findings that
    cover it. With `kind`, only rows of that kind are included. Rows are ordered by cluster name, then worst first.
    """

    def __init__(
        self,
        clusters: Sequence[Cluster],
        *,
        window: str,
        namespace: str | None = None,
        kind: str | None = None,
        visibility: Visibility = EVERYTHING,
    ) -> None:
        self.clusters = list(clusters)
        self.visibility = visibility
        self.window = window
        self.namespace = namespace
        self.kind = kind
        self._index: list[tuple[int, int]] | None = None  # (finding id, rows it contributes), in row order

    def _querysets(self) -> Iterator[QuerySet[Finding]]:
        for cluster in self.clusters:
            yield self.visibility.filter(
                findings(cluster, window=self.window, namespace=self.namespace, kind=self.kind)
            )

    def _rows_of(self, finding_kinds: str) -> int:
        kinds = _kinds(finding_kinds)
        return len(kinds) if self.kind is None else kinds.count(self.kind)

    def _ensure_index(self) -> list[tuple[int, int]]:
        if self._index is None:
            self._index = [
                (pk, self._rows_of(kinds))
                for qs in self._querysets()
                for pk, kinds in qs.values_list("id", "kinds").iterator(chunk_size=5000)
            ]
        return self._index

    def __len__(self) -> int:
        return sum(n for _, n in self._ensure_index())

    def _filtered(self, rows: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        return rows if self.kind is None else (r for r in rows if r["kind"] == self.kind)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """Every row, reading findings in chunks (for CSV streaming: nothing is held in memory)."""
        for qs in self._querysets():
            yield from self._filtered(recommendation_rows(qs.iterator(chunk_size=2000)))

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, int):
            rows = self[index : index + 1] if index >= 0 else self[index:][:1]
            if not rows:
                raise IndexError(index)
            return rows[0]
        start, stop, step = index.indices(len(self))
        if start >= stop:
            return []
        wanted: list[int] = []
        skip = 0  # rows of the first wanted finding that fall before `start`
        position = 0
        for pk, n in self._ensure_index():
            if position + n > start and position < stop:
                if not wanted:
                    skip = start - position
                wanted.append(pk)
            position += n
            if position >= stop:
                break
        loaded = {f.pk: f for f in Finding.objects.filter(pk__in=wanted).select_related(*_FINDING_RELATED)}
        rows = list(self._filtered(recommendation_rows(loaded[pk] for pk in wanted if pk in loaded)))
        return rows[skip : skip + (stop - start)][::step]


_FINDING_RELATED = ("container", "container__pod", "container__pod__node", "container__burst", "cluster")


# --- /metrics -------------------------------------------------------------------------------------------------------


def metric_findings(window: str = Window.HOUR, visibility: Visibility = EVERYTHING) -> Iterator[tuple[Any, ...]]:
    """(cluster, namespace, pod, container, recommendations, throttle_ratio, usage_p95_mcpu, limit_mcpu,
    request_mcpu, pressure_waiting_per_second, throttled_seconds_per_second) for every finding of `window` the viewer sees, streamed from the database; recommendations as
    stored (a list of dicts with kind and severity)."""
    return (
        visibility.filter(Finding.objects.filter(window=window))
        .order_by("cluster__name", "namespace", "container__pod__name", "container__name")
        .values_list(
            "cluster__name",
            "namespace",
            "container__pod__name",
            "container__name",
            "recommendations",
            "throttle_ratio",
            "usage_p95_mcpu",
            "container__limit_mcpu",
            "container__request_mcpu",
            "pressure_waiting_per_second",
            "throttled_seconds_per_second",
        )
        .iterator(chunk_size=5000)
    )


@dataclass(frozen=True)
class CollectionHealth:
    cluster: str
    last_success: datetime | None  # when the last run that stored data (ok or partial) finished
    last_run_nodes_ok: int | None
    last_run_nodes_failed: int | None
    last_run_duration_s: float | None


def collection_health(visibility: Visibility = EVERYTHING) -> list[CollectionHealth]:
    """Per cluster the viewer sees whole: the last successful collection and the outcome of the last finished run
    (None: never ran)."""
    rows = []
    for cluster in Cluster.objects.order_by("name"):
        if not visibility.sees_whole_cluster(cluster.pk):
            continue
        runs = CollectionRun.objects.filter(cluster=cluster, finished_at__isnull=False)
        last = runs.order_by("-started_at").first()
        success = (
            runs.filter(status__in=[CollectionRun.Status.OK, CollectionRun.Status.PARTIAL])
            .order_by("-finished_at")
            .values_list("finished_at", flat=True)
            .first()
        )
        rows.append(
            CollectionHealth(
                cluster=cluster.name,
                last_success=success,
                last_run_nodes_ok=last.nodes_ok if last else None,
                last_run_nodes_failed=last.nodes_failed if last else None,
                last_run_duration_s=last.duration_s if last else None,
            )
        )
    return rows
