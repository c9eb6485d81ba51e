"""HTML pages and the recommendations CSV. Each view parses its query, calls one page builder (pages.py), renders.

Bad query parameters are a 400 page naming the parameter and value (forms.BadQuery); unknown clusters, namespaces,
pods and nodes are a 404 (the selectors' get_* raise Http404).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseBase, StreamingHttpResponse
from django.shortcuts import render
from django.utils.http import content_disposition_header

from apps.advisor.export import recommendations_csv_filename, stream_csv
from apps.advisor.selectors import RECOMMENDATION_FIELDS
from apps.clusters.visibility import for_user

from . import pages
from .forms import BadQuery, ReportForm, WindowForm, parse

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
    return render(request, "dashboard/overview.html", pages.overview_page(for_user(request.user)))


@bad_query_is_400
def cluster(request: HttpRequest, cluster: str) -> HttpResponse:
    window = parse(WindowForm, request.GET)["window"]
    return render(request, "dashboard/cluster.html", pages.cluster_page(cluster, window, for_user(request.user)))


@bad_query_is_400
def namespace(request: HttpRequest, cluster: str, namespace: str) -> HttpResponse:
    q = parse(ReportForm, request.GET)
    return render(
        request,
        "dashboard/namespace.html",
        pages.namespace_page(cluster, namespace, q, _csv_query(request), for_user(request.user)),
    )


@bad_query_is_400
def pod(request: HttpRequest, cluster: str, namespace: str, pod: str) -> HttpResponse:
    window = parse(WindowForm, request.GET)["window"]
    return render(
        request, "dashboard/pod.html", pages.pod_page(cluster, namespace, pod, window, for_user(request.user))
    )


def lab_verify(request: HttpRequest, cluster: str) -> HttpResponse:
    return render(request, "dashboard/lab_verify.html", pages.lab_verify_page(cluster, for_user(request.user)))


@bad_query_is_400
def node(request: HttpRequest, cluster: str, node: str) -> HttpResponse:
    window = parse(WindowForm, request.GET)["window"]
    return render(request, "dashboard/node.html", pages.node_page(cluster, node, window, for_user(request.user)))


@bad_query_is_400
def namespace_csv(request: HttpRequest, cluster: str, namespace: str) -> StreamingHttpResponse:
    q = parse(ReportForm, request.GET)
    name, rows = pages.namespace_recommendations(cluster, namespace, q, for_user(request.user))
    return _csv_response(rows, recommendations_csv_filename(cluster=name, namespace=namespace, window=q["window"]))


@bad_query_is_400
def cluster_csv(request: HttpRequest, cluster: str) -> StreamingHttpResponse:
    q = parse(ReportForm, request.GET)
    name, rows = pages.cluster_recommendations(cluster, q, for_user(request.user))
    return _csv_response(rows, recommendations_csv_filename(cluster=name, window=q["window"]))


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
