"""Page builders: for each page, everything its template shows, from the URL's names and the parsed query.

Views stay one call deep (parse, build, render). Lookups raise Http404 for unknown clusters, namespaces, pods and
nodes; report rows come from the selectors the API and the CSV use, so a page shows no figure the export does not.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.paginator import Paginator
from django.http import Http404
from django.utils import timezone

from apps.advisor.changes import VERDICT_WORDS, change_marks, change_rows, change_words, changes_of, transition_words
from apps.advisor.selectors import finding_pressure, findings, recommendation_rows
from apps.advisor.snippets import in_place_resize, resource_change
from apps.advisor.vocabulary import RECOMMENDATION_KINDS
from apps.clusters.models import SourceKind
from apps.clusters.visibility import Visibility
from apps.verify import results
from apps.words import plural

from . import charts, nodes, selectors
from .templatetags.report_tags import above_limit

PAGE_SIZE = 100
MAX_SHARE_BARS = 20  # pods drawn in the node's shares chart; the rest are summed into one bar
FILTERS = ("kind", "min_throttle_ratio", "node", "workload")
RECENT_CHANGES = timedelta(days=7)  # the namespace report's "recent changes": the API's default range
RECENT_CHANGES_SHOWN = 20


def overview_page(visibility: Visibility) -> dict[str, Any]:
    return {"o": selectors.overview(visibility=visibility), "limited": not visibility.everything}


def cluster_page(cluster: str, window: str, visibility: Visibility) -> dict[str, Any]:
    obj = selectors.get_cluster(cluster, visibility)
    return {
        "page": selectors.cluster_page(obj, window=window, visibility=visibility),
        "cluster": obj,
        "window": window,
        "sees_nodes": visibility.sees_whole_cluster(obj.pk),
    }


def namespace_page(
    cluster: str, namespace: str, q: dict[str, Any], csv_query: str, visibility: Visibility
) -> dict[str, Any]:
    """The namespace report: summary tiles, the window's status, one page of rows, the filter choices."""
    obj = selectors.get_cluster(cluster, visibility)
    selectors.require_visible_namespace(obj, namespace, visibility)
    summary = selectors.namespace_summary(obj, namespace, q["window"])
    if not summary.containers:
        selectors.require_namespace(obj, namespace)  # only asked when there is nothing to show
    page = Paginator(report_queryset(obj, namespace, q), PAGE_SIZE).get_page(q["page"] or 1)  # past the end: the last
    nodes, workloads = selectors.namespace_choices(obj, namespace)
    lines = selectors.report_lines(list(page.object_list))
    return {
        "cluster": obj,
        "namespace": namespace,
        "q": q,
        "window": q["window"],
        "summary": summary,
        # No finding in the namespace: whether the window was computed at all is the cluster's to say.
        "status": selectors.window_status(obj, q["window"], coverage=summary.coverage if summary.containers else None),
        "page": page,
        "lines": lines,
        "any_above_limit": any(above_limit(line.row) for line in lines),
        "target": selectors.throttle_target(),
        "kinds": RECOMMENDATION_KINDS,
        "nodes": nodes,
        "workloads": workloads,
        "filtered": any(q[k] not in (None, "") for k in FILTERS),
        "csv_query": csv_query,
        "sees_nodes": visibility.sees_whole_cluster(obj.pk),
        "changes": change_rows(changes_of(obj, namespace, timezone.now() - RECENT_CHANGES)[:RECENT_CHANGES_SHOWN]),
        "change_window": _duration_words(settings.CPUTUNE_CHANGE_WINDOW),
    }


def _duration_words(seconds: int) -> str:
    """3600 → "hour", 1800 → "30 min", 90 → "90 s": the length of a change's windows in the section's text."""
    if seconds == 3600:
        return "hour"
    return f"{seconds // 60} min" if seconds % 60 == 0 else f"{seconds} s"


def _change_marks(container_ids: list[int], since: datetime, until: datetime) -> dict[int, list[charts.ChangeMark]]:
    """container id → the marks of its changes on the chart's span, each labelled and with its group's effect to
    hover (a rollout's pod shows the rollout's)."""
    marks: dict[int, list[charts.ChangeMark]] = {}
    for container_id, seen_at, row in change_marks(container_ids, since, until):
        # Plotly reads annotation text as HTML: a name from the cluster (an image) is escaped.
        words = html.escape(change_words(row), quote=False)
        parts = [_mark_words(row), *(_mark_words(also) for also in row["also_changed"])]
        label = html.escape(f"{', '.join(parts)}, {VERDICT_WORDS[row['verdict']]}", quote=False)
        marks.setdefault(container_id, []).append(charts.ChangeMark(seen_at, label, words))
    return marks


def _mark_words(change: dict[str, Any]) -> str:
    """A value that changed, short enough for a chart: "limit 200m → 400m", "threads 2 → 5"; other kinds by name."""
    kind = change["kind"]
    return (
        transition_words(kind, change["before"], change["after"]) if kind in ("limit", "request", "threads") else kind
    )


def pod_page(cluster: str, namespace: str, pod: str, window: str, visibility: Visibility) -> dict[str, Any]:
    """Each container's figures, chart, recommendations with the change that applies them, and explanation."""
    obj = selectors.get_cluster(cluster, visibility)
    pod_obj = selectors.get_pod(obj, namespace, pod, visibility)
    detail = selectors.pod_detail(pod_obj, window=window)
    target = selectors.throttle_target()
    resources = [(c.container.name, c.container.request_mcpu, c.container.limit_mcpu) for c in detail.containers]
    marks = _change_marks([c.container.pk for c in detail.containers], detail.since, detail.until)
    containers = []
    for c in detail.containers:
        ceiling_mcpu = c.finding.quota_ceiling_mcpu if c.finding else None
        figure = charts.container_figure(
            c.points,
            since=detail.since,
            until=detail.until,
            shares_floor_mcpu=c.finding.shares_floor_mcpu if c.finding else None,
            quota_ceiling_mcpu=ceiling_mcpu,
            target_ratio=target,
            resolution=detail.resolution,
            pressure=c.finding is None or finding_pressure(c.finding).status != "not_measured",
            changes=marks.get(c.container.pk, ()),
        )
        recommendations = [
            {
                **rec,
                "change": resource_change(
                    namespace=namespace,
                    pod=pod_obj.name,
                    container=c.container.name,
                    workload_kind=pod_obj.workload_kind,
                    workload_name=pod_obj.workload_name,
                    request_mcpu=rec.get("suggested_request_mcpu"),
                    limit_mcpu=rec.get("suggested_limit_mcpu"),
                ),
                "resize": in_place_resize(
                    namespace=namespace,
                    pod=pod_obj.name,
                    container=c.container.name,
                    request_mcpu=rec.get("suggested_request_mcpu"),
                    limit_mcpu=rec.get("suggested_limit_mcpu"),
                    kubelet_version=pod_obj.node.kubelet_version if pod_obj.node else "",
                    qos_class=pod_obj.qos_class,
                    containers=resources,
                ),
            }
            for rec in (c.finding.recommendations if c.finding else [])
        ]
        containers.append(
            {
                "detail": c,
                "row": c.row,
                "recommendations": recommendations,
                "chart_json": charts.figure_json(figure) if c.points else None,
                "chart_note": charts.lone_point_note(c.points, detail.resolution),
                "chart_has_ratio": charts.has_quota(c.points, ceiling_mcpu),
                "spec_differs": _spec_differs(c.container),
                **_limit_curve(c, recommendations, target),
            }
        )
    return {
        "cluster": obj,
        "namespace": namespace,
        "pod": pod_obj,
        "detail": detail,
        "containers": containers,
        "window": window,
        "target": target,
        "sees_nodes": visibility.sees_whole_cluster(obj.pk),
    }


def _spec_differs(container: Any) -> bool:
    """Whether the spec asks other resources than the runtime applied (an in-place resize not yet done)."""
    spec = (container.spec_request_mcpu, container.spec_limit_mcpu)
    return spec != (None, None) and spec != (container.request_mcpu, container.limit_mcpu)


def _limit_curve(c: Any, recommendations: list[dict[str, Any]], target: float) -> dict[str, Any]:
    """The chart of what each higher limit should leave of the throttle ratio, and the plan's limit on it."""
    finding = c.finding
    limit = c.container.limit_mcpu or (finding.quota_ceiling_mcpu if finding else None)
    if finding is None or not finding.expected_curve or not limit:
        return {"curve_json": None}
    planned = next(
        (
            r
            for r in recommendations
            if r.get("suggested_limit_mcpu") and r.get("expected_throttle_ratio_max") is not None
        ),
        None,
    )
    figure = charts.limit_curve_figure(
        finding.expected_curve,
        limit,
        finding.throttle_ratio,
        planned["suggested_limit_mcpu"] if planned else None,
        target,
    )
    return {"curve_json": charts.figure_json(figure), "curve_plan": planned, "curve_limit_mcpu": limit}


def node_page(cluster: str, node: str, window: str, visibility: Visibility) -> dict[str, Any]:
    """The node's verdict, its share holders as a chart (the largest MAX_SHARE_BARS, the rest summed) and a table
    (the largest nodes.MAX_TABLE_ROWS), its most throttled containers and what the kernel probe measured."""
    obj = selectors.get_cluster(cluster, visibility)
    node_obj = selectors.get_node(obj, node, visibility)
    page = nodes.node_page(node_obj, window=window)
    shown = page.holders[:MAX_SHARE_BARS]
    labels = [f"{h.namespace}/{h.pod}" for h in shown]
    requests = [h.request_mcpu for h in shown]
    fractions = [h.fraction for h in shown]
    rest = page.holders[MAX_SHARE_BARS:]
    if rest:
        labels.append(f"{plural(len(rest), 'other pod')}")
        requests.append(sum(h.request_mcpu or 0 for h in rest))
        fractions.append(sum(h.fraction for h in rest))
    probe = node_obj.probe if isinstance(node_obj.probe, dict) else None
    return {
        "cluster": obj,
        "node": node_obj,
        "page": page,
        "window": window,
        "target": page.target,
        "holders_shown": page.holders[: nodes.MAX_TABLE_ROWS],
        "holders_more": max(0, len(page.holders) - nodes.MAX_TABLE_ROWS),
        "throttled_more": page.throttled_total - len(page.throttled),
        "chart_json": charts.figure_json(charts.shares_figure(labels, requests, fractions)) if shown else None,
        "probe": probe,
        "probe_figures": _probe_figures(probe) if probe else [],
    }


def lab_verify_page(cluster: str, visibility: Visibility) -> dict[str, Any]:
    """The last `lab verify` on this machine, judged by its goals: only the lab cluster has one."""
    obj = selectors.get_cluster(cluster, visibility)
    if not visibility.sees_whole_cluster(obj.pk):
        raise Http404(f"No cluster named {cluster!r}.")
    if obj.source != SourceKind.LAB:
        raise Http404(f"{obj.name} is not the lab: only the lab's own cgroups can be verified.")
    last, error = results.load()
    return {
        "cluster": obj,
        "last": last,
        "error": error,
        "goals": [
            *(results.advice_goals(last.outcomes, last.target) if last and last.outcomes else []),
            *(results.contention_goals(last.contention.rows) if last and last.contention else []),
        ],
    }


def namespace_recommendations(
    cluster: str, namespace: str, q: dict[str, Any], visibility: Visibility
) -> tuple[str, Iterator[dict[str, Any]]]:
    """The cluster's name and the namespace's recommendation rows, filtered and sorted as its report is."""
    obj = selectors.get_cluster(cluster, visibility)
    selectors.require_namespace(obj, namespace, visibility)
    rows = report_queryset(obj, namespace, q).iterator(chunk_size=500)
    return obj.name, _only_kind(recommendation_rows(rows), q["kind"])


def cluster_recommendations(
    cluster: str, q: dict[str, Any], visibility: Visibility
) -> tuple[str, Iterator[dict[str, Any]]]:
    """The cluster's name and its recommendation rows across the namespaces the viewer sees, filtered."""
    obj = selectors.get_cluster(cluster, visibility)
    rows = findings(
        obj,
        window=q["window"],
        kind=q["kind"] or None,
        min_throttle_ratio=q["min_throttle_ratio"],
        node=q["node"] or None,
        workload=q["workload"] or None,
    )
    rows = visibility.filter(rows)
    return obj.name, _only_kind(recommendation_rows(rows.iterator(chunk_size=500)), q["kind"])


def report_queryset(obj: Any, namespace: str, q: dict[str, Any]) -> Any:
    return selectors.report_queryset(
        obj,
        namespace,
        window=q["window"],
        sort=q["sort"],
        kind=q["kind"] or None,
        min_throttle_ratio=q["min_throttle_ratio"],
        node=q["node"] or None,
        workload=q["workload"] or None,
    )


def _only_kind(rows: Iterable[dict[str, Any]], kind: str) -> Iterator[dict[str, Any]]:
    """With a kind filter, only that kind's rows: a container matched by it may also carry other advice."""
    return (r for r in rows if not kind or r["kind"] == kind)


# The probe's headline figures, in reading order: (key in Node.probe, label, unit).
PROBE_FIGURES = (
    ("kernel_release", "kernel", ""),
    ("cpus", "CPUs", ""),
    ("cgroup_version", "cgroup version", ""),
    ("fibtest_cpu_ms", "fibtest CPU obtained", "ms"),
    ("fibtest_expected_cpu_ms", "fibtest CPU the quota allows", "ms"),
    ("fibtest_cpu_ratio", "obtained / allowed", "ratio"),
    ("fibtest_nr_throttled", "fibtest throttled periods", ""),
    ("fibtest_periods", "fibtest periods", ""),
    ("workloop_wall_p50_ms", "work loop p50", "ms"),
    ("workloop_wall_p99_ms", "work loop p99", "ms"),
    ("workloop_wall_max_ms", "work loop max", "ms"),
    ("workloop_throttled_iterations", "work loop iterations ≥ 50 ms", ""),
    ("workloop_iterations", "work loop iterations", ""),
    ("max_stranded_ms_per_period", "most quota the bug can strand per period here", "ms"),
)


def _probe_figures(probe: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, formatted value) for the headline figures the probe recorded; missing keys are left out."""
    out = []
    for key, label, unit in PROBE_FIGURES:
        value = probe.get(key)
        if value is None:
            continue
        if unit == "ratio" and isinstance(value, int | float):
            text = f"{value:.0%}"
        elif isinstance(value, float):
            text = f"{value:,.1f}"
        else:
            text = f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)
        out.append((label, f"{text} {unit}" if unit and unit != "ratio" else text))
    return out
