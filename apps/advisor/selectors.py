"""Reading findings for pages, CSV, API and chat: querysets and the contract's row shapes (DESIGN.md "Contract").

Report rows and recommendation rows are built here once, so the page, the CSV export and the API cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from django.db.models import QuerySet

from apps.clusters.models import Cluster

from .models import Finding, Window

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
)

# Recommendations CSV (page and API): one row per (container, recommendation), in this order.
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
)

RECOMMENDATION_KEYS = (
    "kind",
    "severity",
    "summary",
    "detail",
    "suggested_request_mcpu",
    "suggested_limit_mcpu",
)

REPORT_UNUSED = ("explanation", "container__pod__node__probe")

RECOMMENDATION_KINDS = (
    "upgrade_kernel",
    "raise_limit",
    "use_whole_cores",
    "cut_threads",
    "add_threads",
    "lower_request",
    "set_request",
)


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

    # A report row never shows the explanation (kilobytes of text per row) nor the node's probe figures.
    qs = (
        Finding.objects.filter(cluster=cluster, window=window)
        .select_related("container", "container__pod", "container__pod__node", "cluster")
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
    return qs.order_by(
        F("throttle_ratio").desc(nulls_last=True), "namespace", "container__pod__name", "container__name"
    )


def report_row(finding: Finding) -> dict[str, Any]:
    """One report row with the contract's field names; unknown numbers are None, never 0."""
    container = finding.container
    pod = container.pod
    node = pod.node
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
        "usage_avg_mcpu": _round(finding.usage_avg_mcpu, 1),
        "usage_p95_mcpu": _round(finding.usage_p95_mcpu, 1),
        "throttle_ratio": _round(finding.throttle_ratio, 4),
        "throttled_seconds_per_second": _round(finding.throttled_seconds_per_second, 4),
        "periods": finding.periods,
        "throttled_periods": finding.throttled_periods,
        "threads": finding.threads,
        "kernel_version": finding.kernel_version or None,
        "kernel_verdict": finding.kernel_verdict or None,
        "window_start": finding.window_start,
        "window_end": finding.window_end,
        # In contract key order: PostgreSQL's jsonb gives keys back in its own order.
        "recommendations": [{key: rec.get(key) for key in RECOMMENDATION_KEYS} for rec in finding.recommendations],
    }


def recommendation_rows(rows: Iterable[Finding]) -> Iterator[dict[str, Any]]:
    """One row per (container, recommendation) with the recommendations CSV's columns."""
    for finding in rows:
        base = report_row(finding)
        for rec in finding.recommendations:
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
            }


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _number(value: float | None) -> float | int | None:
    if value is None:
        return None
    return int(value) if float(value).is_integer() else value
