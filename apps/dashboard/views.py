"""HTML pages and the recommendations CSV. Each view parses its query, calls selectors and renders.

Bad query parameters are a 400 page naming the parameter and value (forms.BadQuery); unknown clusters, namespaces,
pods and nodes are a 404 (the selectors' get_* raise Http404).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, HttpResponseBase, StreamingHttpResponse
from django.shortcuts import render
from django.utils.http import content_disposition_header

from apps.advisor.export import recommendations_csv_filename, stream_csv
from apps.advisor.selectors import RECOMMENDATION_FIELDS, findings, recommendation_rows
from apps.advisor.snippets import resource_change
from apps.advisor.vocabulary import RECOMMENDATION_KINDS
from apps.words import plural

from . import charts, selectors
from .forms import BadQuery, ReportForm, WindowForm, parse
from .templatetags.report_tags import above_limit

PAGE_SIZE = 100
MAX_SHARE_BARS = 20  # pods drawn in the node's shares chart; the rest are summed into one bar

View = Callable[..., HttpResponseBase]


def bad_query_is_400(view: View) -> View:
    """Turn a BadQuery raised while parsing the query string into a 400 page with its message."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        try:
            return view(request, *args, **kwargs)
        except BadQuery as exc:
            return render(request, "dashboard/bad_request.html", {"message": str(exc)}, status=400)

    return wrapper


def overview(request: HttpRequest) -> HttpResponse:
    return render(request, "dashboard/overview.html", {"o": selectors.overview()})


@bad_query_is_400
def cluster(request: HttpRequest, cluster: str) -> HttpResponse:
    obj = selectors.get_cluster(cluster)
    window = parse(WindowForm, request.GET)["window"]
    page = selectors.cluster_page(obj, window=window)
    return render(request, "dashboard/cluster.html", {"page": page, "cluster": obj, "window": window})


@bad_query_is_400
def namespace(request: HttpRequest, cluster: str, namespace: str) -> HttpResponse:
    obj = selectors.get_cluster(cluster)
    q = parse(ReportForm, request.GET)
    summary = selectors.namespace_summary(obj, namespace, q["window"])
    if not summary.containers:
        selectors.require_namespace(obj, namespace)  # only asked when there is nothing to show
    rows = _report_queryset(obj, namespace, q)
    paginator = Paginator(rows, PAGE_SIZE)
    page = paginator.get_page(q["page"] or 1)  # past the end: the last page
    nodes, workloads = selectors.namespace_choices(obj, namespace)
    filtered = any(q[k] not in (None, "") for k in ("kind", "min_throttle_ratio", "node", "workload"))
    lines = selectors.report_lines(list(page.object_list))
    return render(
        request,
        "dashboard/namespace.html",
        {
            "cluster": obj,
            "namespace": namespace,
            "q": q,
            "window": q["window"],
            "summary": summary,
            # No finding in the namespace: whether the window was computed at all is the cluster's to say.
            "status": selectors.window_status(
                obj, q["window"], coverage=summary.coverage if summary.containers else None
            ),
            "page": page,
            "lines": lines,
            "any_above_limit": any(above_limit(line.row) for line in lines),
            "target": selectors.throttle_target(),
            "kinds": RECOMMENDATION_KINDS,
            "nodes": nodes,
            "workloads": workloads,
            "filtered": filtered,
            "csv_query": _csv_query(request),
        },
    )


@bad_query_is_400
def pod(request: HttpRequest, cluster: str, namespace: str, pod: str) -> HttpResponse:
    obj = selectors.get_cluster(cluster)
    pod_obj = selectors.get_pod(obj, namespace, pod)
    window = parse(WindowForm, request.GET)["window"]
    detail = selectors.pod_detail(pod_obj, window=window)
    target = selectors.throttle_target()
    containers = []
    for c in detail.containers:
        figure_ceiling_mcpu = c.finding.quota_ceiling_mcpu if c.finding else None
        figure = charts.container_figure(
            c.points,
            since=detail.since,
            until=detail.until,
            shares_floor_mcpu=c.finding.shares_floor_mcpu if c.finding else None,
            quota_ceiling_mcpu=figure_ceiling_mcpu,
            target_ratio=target,
            resolution=detail.resolution,
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
                "chart_has_ratio": charts.has_quota(c.points, figure_ceiling_mcpu),
            }
        )
    return render(
        request,
        "dashboard/pod.html",
        {
            "cluster": obj,
            "namespace": namespace,
            "pod": pod_obj,
            "detail": detail,
            "containers": containers,
            "window": window,
            "target": target,
        },
    )


@bad_query_is_400
def node(request: HttpRequest, cluster: str, node: str) -> HttpResponse:
    obj = selectors.get_cluster(cluster)
    node_obj = selectors.get_node(obj, node)
    window = parse(WindowForm, request.GET)["window"]
    page = selectors.node_page(node_obj, window=window)
    shown = page.holders[:MAX_SHARE_BARS]
    labels = [f"{h.namespace}/{h.pod}" for h in shown]
    requests = [h.request_mcpu for h in shown]
    fractions = [h.fraction for h in shown]
    rest = page.holders[MAX_SHARE_BARS:]
    if rest:
        labels.append(f"{plural(len(rest), 'other pod')}")
        requests.append(sum(h.request_mcpu or 0 for h in rest))
        fractions.append(sum(h.fraction for h in rest))
    chart_json = charts.figure_json(charts.shares_figure(labels, requests, fractions)) if shown else None
    probe = node_obj.probe if isinstance(node_obj.probe, dict) else None
    return render(
        request,
        "dashboard/node.html",
        {
            "cluster": obj,
            "node": node_obj,
            "page": page,
            "window": window,
            "target": page.target,
            "chart_json": chart_json,
            "probe": probe,
            "probe_figures": _probe_figures(probe) if probe else [],
        },
    )


@bad_query_is_400
def namespace_csv(request: HttpRequest, cluster: str, namespace: str) -> StreamingHttpResponse:
    obj = selectors.get_cluster(cluster)
    selectors.require_namespace(obj, namespace)
    q = parse(ReportForm, request.GET)
    rows = _report_queryset(obj, namespace, q).iterator(chunk_size=500)
    name = recommendations_csv_filename(cluster=obj.name, namespace=namespace, window=q["window"])
    return _csv_response(_only_kind(recommendation_rows(rows), q["kind"]), name)


@bad_query_is_400
def cluster_csv(request: HttpRequest, cluster: str) -> StreamingHttpResponse:
    obj = selectors.get_cluster(cluster)
    q = parse(ReportForm, request.GET)
    rows = findings(
        obj,
        window=q["window"],
        kind=q["kind"] or None,
        min_throttle_ratio=q["min_throttle_ratio"],
        node=q["node"] or None,
        workload=q["workload"] or None,
    )
    name = recommendations_csv_filename(cluster=obj.name, window=q["window"])
    return _csv_response(_only_kind(recommendation_rows(rows.iterator(chunk_size=500)), q["kind"]), name)


# --- helpers -----------------------------------------------------------------------------------------------------


def _report_queryset(obj: Any, namespace: str, q: dict[str, Any]) -> Any:
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


def _csv_response(rows: Iterable[dict[str, Any]], filename: str) -> StreamingHttpResponse:
    response = StreamingHttpResponse(stream_csv(rows, RECOMMENDATION_FIELDS), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = content_disposition_header(True, filename)
    return response


def _csv_query(request: HttpRequest) -> str:
    """The page's filters for the Download CSV link (every row of every page: no page number)."""
    query = request.GET.copy()
    query.pop("page", None)
    encoded = query.urlencode()
    return f"?{encoded}" if encoded else ""


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
