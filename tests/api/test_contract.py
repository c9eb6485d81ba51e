"""The contract (docs/contract.md): report row field names, recommendations CSV columns, values as stored.

The expected field lists are copied from the contract text, not from the code, so a renamed or reordered field fails.
"""

from __future__ import annotations

import csv
import io

import pytest

from apps.advisor.models import Finding
from apps.clusters.models import Pod

pytestmark = pytest.mark.django_db

CONTRACT_REPORT_FIELDS = [
    "cluster", "namespace", "pod", "container", "node", "workload_kind", "workload_name", "qos_class", "request_mcpu",
    "limit_mcpu", "node_cpus", "shares", "shares_floor_mcpu", "quota_ceiling_mcpu", "period_us", "usage_avg_mcpu",
    "usage_p95_mcpu", "throttle_ratio", "throttled_seconds_per_second", "periods", "throttled_periods", "threads",
    "kernel_version", "kernel_verdict", "window_start", "window_end", "recommendations",
    # Added at the end (2026-12): CPU pressure.
    "pressure_waiting_per_second", "pressure_stalled_per_second", "pressure_status",
    "cpu_pressure_waiting_seconds_per_second", "cpu_pressure_stalled_seconds_per_second", "pod_limit_mcpu",
    # Added at the end (2026-12): what tells the container's runtime.
    "image", "runtime",
    # Added at the end (2026-12): the pod cgroup's own ratio (a pod-level quota).
    "pod_throttle_ratio",
]  # fmt: skip
CONTRACT_RECOMMENDATION_KEYS = [
    "kind", "severity", "summary", "detail", "suggested_request_mcpu", "suggested_limit_mcpu",
    "expected_throttle_ratio_max", "expected_basis",
    # Added at the end (2026-12): raise_pod_limit's value, the pod's.
    "suggested_pod_limit_mcpu",
]  # fmt: skip
CONTRACT_CSV_COLUMNS = [
    "cluster", "namespace", "workload_kind", "workload_name", "pod", "container", "node", "kind", "severity", "summary",
    "throttle_ratio", "usage_p95_mcpu", "request_mcpu", "limit_mcpu", "suggested_request_mcpu", "suggested_limit_mcpu",
    "kernel_verdict",
    # Added at the end, as the contract allows: earlier columns keep their names and places.
    "window_start", "window_end", "computed_at", "periods", "kubectl_command", "expected_throttle_ratio_max",
    "expected_basis", "pressure_waiting_per_second", "pressure_status", "suggested_pod_limit_mcpu",
]  # fmt: skip

CONTAINERS = "/api/v1/clusters/demo/namespaces/{ns}/containers/"


def rows_of(reader, ns: str = "shop", **params) -> list[dict]:
    response = reader.get(CONTAINERS.format(ns=ns), {"page_size": 1000, **params})
    assert response.status_code == 200, response.content
    return response.json()["results"]


def csv_of(reader, **params) -> tuple[list[str], list[dict[str, str]]]:
    response = reader.get("/api/v1/recommendations/", {"format": "csv", **params})
    assert response.status_code == 200
    assert response.streaming, "the CSV must be streamed"
    assert response["Content-Type"].startswith("text/csv")
    text = b"".join(response.streaming_content).decode()
    table = list(csv.reader(io.StringIO(text)))
    return table[0], [dict(zip(table[0], line, strict=True)) for line in table[1:]]


def test_report_rows_have_exactly_the_contract_fields_in_order(reader, demo):
    for row in rows_of(reader):
        assert list(row) == CONTRACT_REPORT_FIELDS
        for recommendation in row["recommendations"]:
            assert list(recommendation) == CONTRACT_RECOMMENDATION_KEYS


def test_report_row_values_are_the_stored_findings(reader, demo):
    rows = {row["pod"]: row for row in rows_of(reader)}
    assert set(rows) == {"api-0", "api-1", "worker-0", "worker-1", "cache-0", "cache-1", "web-0", "web-1"}
    for finding in Finding.objects.filter(cluster=demo, namespace="shop", window="1h").select_related(
        "container__pod__node"
    ):
        row = rows[finding.container.pod.name]
        assert row["container"] == finding.container.name == "main"
        node = finding.container.pod.node
        assert node is not None and row["node"] == node.name
        assert row["request_mcpu"] == finding.container.request_mcpu
        assert row["limit_mcpu"] == finding.container.limit_mcpu
        assert row["shares"] == finding.shares
        assert row["shares_floor_mcpu"] == finding.shares_floor_mcpu
        assert row["periods"] == finding.periods
        assert row["throttled_periods"] == finding.throttled_periods
        assert row["recommendations"] == finding.recommendations


def test_report_row_figures_match_what_the_builder_stored(reader, demo):
    """api-* run 490m under a 500m limit, throttled in 60% of periods, on 16-CPU nodes, 8 threads (tests/builders.py);
    30 minutes of 60 s readings give 30 intervals of 600 periods (100 ms period)."""
    api = {row["pod"]: row for row in rows_of(reader)}["api-0"]
    assert api["request_mcpu"] == 250 and api["limit_mcpu"] == 500
    assert api["quota_ceiling_mcpu"] == 500
    assert api["shares"] == 256  # 250m × 1024 / 1000
    assert api["node_cpus"] == 16
    assert api["period_us"] == 100_000
    assert api["throttle_ratio"] == pytest.approx(0.6)
    assert api["periods"] == 30 * 600 and api["throttled_periods"] == 30 * 360
    assert api["usage_avg_mcpu"] == pytest.approx(490.0)
    assert api["threads"] == 8
    assert api["kernel_version"] == "4.19.76-linuxkit"
    assert api["workload_kind"] == "Deployment" and api["workload_name"] == "api" and api["qos_class"] == "Burstable"
    assert "raise_limit" in [r["kind"] for r in api["recommendations"]]


def test_unknown_numbers_are_null_not_zero(reader, demo):
    cache = {row["pod"]: row for row in rows_of(reader)}["cache-0"]  # request 2000m, no limit: no quota
    assert cache["limit_mcpu"] is None
    assert cache["quota_ceiling_mcpu"] is None
    assert cache["throttle_ratio"] is None and cache["periods"] is None
    web = {row["pod"]: row for row in rows_of(reader)}["web-0"]  # measured, never throttled: a real zero
    assert web["throttle_ratio"] == 0 and web["throttled_periods"] == 0


def test_recommendations_csv_header_is_the_contract_in_order(reader, demo):
    header, _ = csv_of(reader)
    assert header == CONTRACT_CSV_COLUMNS


def test_recommendations_csv_has_one_row_per_stored_recommendation_with_its_values(reader, demo):
    _, rows = csv_of(reader)
    stored = {
        (f.container.pod.name, r["kind"]): (f, r)
        for f in Finding.objects.filter(cluster=demo, window="1h").select_related("container__pod__node")
        for r in f.recommendations
    }
    assert len(rows) == len(stored) > 0
    for row in rows:
        finding, recommendation = stored[(row["pod"], row["kind"])]
        container = finding.container
        assert row["cluster"] == "demo" and row["namespace"] == finding.namespace
        assert row["workload_name"] == container.pod.workload_name
        node = container.pod.node
        assert node is not None and row["node"] == node.name
        assert row["severity"] == recommendation["severity"]
        assert row["summary"] == recommendation["summary"]
        assert row["request_mcpu"] == ("" if container.request_mcpu is None else str(container.request_mcpu))
        assert row["limit_mcpu"] == ("" if container.limit_mcpu is None else str(container.limit_mcpu))
        suggested = recommendation["suggested_limit_mcpu"]
        assert row["suggested_limit_mcpu"] == ("" if suggested is None else str(suggested))
        ratio = finding.throttle_ratio
        assert row["throttle_ratio"] == ("" if ratio is None else str(round(ratio, 4)))


def test_recommendations_csv_leaves_unknown_cells_empty(reader, demo):
    _, rows = csv_of(reader, namespace="batch")
    assert {row["pod"] for row in rows} == {"batch-0", "batch-1"}
    for row in rows:  # BestEffort: no request, no limit, no quota so no ratio
        assert row["kind"] == "set_request"
        assert row["request_mcpu"] == "" and row["limit_mcpu"] == "" and row["throttle_ratio"] == ""
        assert row["suggested_limit_mcpu"] == ""
        assert int(row["suggested_request_mcpu"]) > 0


def test_recommendations_csv_neutralises_formulas_from_cluster_data(reader, demo):
    Pod.objects.filter(cluster=demo, name="batch-0").update(workload_name='=HYPERLINK("http://x")')
    Pod.objects.filter(cluster=demo, name="batch-1").update(workload_name="@SUM(1+1)")
    _, rows = csv_of(reader, namespace="batch")
    names = {row["pod"]: row["workload_name"] for row in rows}
    assert names == {"batch-0": '\'=HYPERLINK("http://x")', "batch-1": "'@SUM(1+1)"}


def test_recommendations_csv_by_accept_header(reader, demo):
    response = reader.get("/api/v1/recommendations/", HTTP_ACCEPT="text/csv")
    assert response.status_code == 200 and response.streaming
    assert b"".join(response.streaming_content).decode().splitlines()[0] == ",".join(CONTRACT_CSV_COLUMNS)
    assert response["Content-Disposition"] == 'attachment; filename="cputune-1h-recommendations.csv"'


def test_the_report_row_is_declared_once_and_every_shape_follows_the_declaration(demo):
    """advisor.selectors declares the report row, its recommendations and the CSV columns; the contract lists them;
    report_row(), recommendation_rows() and the API serializers are held to the declaration."""
    from apps.advisor.selectors import (
        RECOMMENDATION_FIELDS,
        RECOMMENDATION_KEYS,
        REPORT_FIELDS,
        recommendation_rows,
        report_row,
    )
    from apps.api.serializers import RecommendationSerializer, ReportRowSerializer

    assert list(REPORT_FIELDS) == CONTRACT_REPORT_FIELDS
    assert list(RECOMMENDATION_KEYS) == CONTRACT_RECOMMENDATION_KEYS
    assert list(RECOMMENDATION_FIELDS) == CONTRACT_CSV_COLUMNS
    assert list(ReportRowSerializer().fields) == list(REPORT_FIELDS)
    assert list(RecommendationSerializer().fields) == list(RECOMMENDATION_KEYS)
    findings = list(Finding.objects.filter(cluster__name="demo", window="1h").select_related("container__pod__node"))
    assert findings and all(list(report_row(f)) == list(REPORT_FIELDS) for f in findings)
    rows = list(recommendation_rows(findings))
    assert rows and all(list(row) == list(RECOMMENDATION_FIELDS) for row in rows)
