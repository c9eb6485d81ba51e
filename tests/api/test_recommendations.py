"""GET recommendations/: one row per (container, recommendation), as JSON pages or streamed CSV."""

from __future__ import annotations

import csv
import io
from datetime import datetime
from email.message import Message
from typing import Any
from urllib.parse import quote

import pytest

from apps.advisor.models import Finding
from apps.advisor.snippets import resource_change
from apps.clusters.models import Pod
from tests.builders import build_cluster

pytestmark = pytest.mark.django_db

URL = "/api/v1/recommendations/"


def all_json(reader, **params) -> list[dict]:
    rows: list[dict] = []
    url: str | None = URL
    query: dict[str, Any] | None = {"page_size": 4, **params}
    while url:
        response = reader.get(url, query)
        assert response.status_code == 200, response.content
        body = response.json()
        rows += body["results"]
        url, query = body["next"], None
    return rows


def all_csv(reader, **params) -> list[dict]:
    response = reader.get(URL, {"format": "csv", **params})
    assert response.status_code == 200
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def stored_count(**filters) -> int:
    return sum(len(f.recommendations) for f in Finding.objects.filter(window="1h", **filters))


def test_json_pages_hold_the_same_rows_as_the_csv_in_the_same_order(reader, demo):
    json_rows = all_json(reader)
    csv_rows = all_csv(reader)
    assert len(json_rows) == len(csv_rows) == stored_count()
    assert [(r["pod"], r["kind"]) for r in json_rows] == [(r["pod"], r["kind"]) for r in csv_rows]


def test_page_boundaries_can_split_one_containers_recommendations(reader, demo):
    """api-0 has two recommendations and api-1 two; pages of 3 split api-1's across pages without losing or
    repeating any."""
    first = reader.get(URL, {"page_size": 3}).json()
    second = reader.get(URL, {"page_size": 3, "page": 2}).json()
    pairs = [(r["pod"], r["kind"]) for r in first["results"] + second["results"]]
    assert pairs[:4] == [
        ("api-0", "raise_limit"),
        ("api-0", "cut_threads"),
        ("api-1", "raise_limit"),
        ("api-1", "cut_threads"),
    ]
    assert first["count"] == stored_count()


def test_kind_keeps_only_rows_of_that_kind(reader, demo):
    rows = all_json(reader, kind="cut_threads")
    assert {r["kind"] for r in rows} == {"cut_threads"}
    assert {r["pod"] for r in rows} == {"api-0", "api-1", "worker-0", "worker-1"}
    assert reader.get(URL, {"kind": "cut_threads"}).json()["count"] == 4
    assert {r["kind"] for r in all_csv(reader, kind="set_request")} == {"set_request"}


def test_cluster_and_namespace_narrow_the_rows(reader, demo):
    build_cluster("other", per_pattern=1)
    both = all_json(reader)
    assert {r["cluster"] for r in both} == {"demo", "other"}
    assert [r["cluster"] for r in both] == sorted(r["cluster"] for r in both)  # by cluster, then worst first
    only_other = all_json(reader, cluster="other")
    assert {r["cluster"] for r in only_other} == {"other"}
    assert len(only_other) == stored_count(cluster__name="other")
    batch = all_json(reader, cluster="demo", namespace="batch")
    assert {(r["cluster"], r["namespace"]) for r in batch} == {("demo", "batch")} and len(batch) == 2


def test_csv_file_name_says_what_it_holds_including_the_window(reader, demo):
    response = reader.get(URL, {"format": "csv", "cluster": "demo", "namespace": "shop"})
    assert response["Content-Disposition"] == 'attachment; filename="cputune-demo-shop-1h-recommendations.csv"'
    response = reader.get(URL, {"format": "csv", "cluster": "demo", "window": "24h"})
    assert response["Content-Disposition"] == 'attachment; filename="cputune-demo-24h-recommendations.csv"'


def test_the_api_and_the_page_name_the_same_csv_alike(client, api_user, demo):
    client.force_login(api_user)
    for window in ("1h", "7d"):
        api = client.get(URL, {"format": "csv", "cluster": "demo", "namespace": "shop", "window": window})
        page = client.get("/c/demo/ns/shop/recommendations.csv", {"window": window})
        assert api.status_code == page.status_code == 200
        assert api["Content-Disposition"] == page["Content-Disposition"]


HOSTILE_NAMESPACE = "a\";filename*=UTF-8''evil.cmd;b=\""


def saved_name(content_disposition: str) -> str | None:
    """The file name a browser saves, read the way an RFC 6266 parser reads it (filename* would win)."""
    message = Message()
    message["Content-Disposition"] = content_disposition
    return message.get_filename()


def test_a_hostile_namespace_cannot_choose_the_saved_file_name(reader, client, api_user, demo):
    Pod.objects.filter(cluster=demo, namespace="batch").update(namespace=HOSTILE_NAMESPACE)
    Finding.objects.filter(cluster=demo, namespace="batch").update(namespace=HOSTILE_NAMESPACE)
    client.force_login(api_user)
    api = reader.get(URL, {"format": "csv", "cluster": "demo", "namespace": HOSTILE_NAMESPACE})
    page = client.get(f"/c/demo/ns/{quote(HOSTILE_NAMESPACE, safe='')}/recommendations.csv")
    for response in (api, page):
        assert response.status_code == 200
        header = response["Content-Disposition"]
        assert header == 'attachment; filename="cputune-demo-a_filename_UTF-8_evil.cmd_b_-1h-recommendations.csv"'
        assert saved_name(header) == "cputune-demo-a_filename_UTF-8_evil.cmd_b_-1h-recommendations.csv"
        assert "filename*" not in header


@pytest.mark.parametrize(
    ("params", "status", "body"),
    [
        ({"cluster": "nope"}, 404, {"detail": "no cluster named 'nope'"}),
        ({"namespace": "nope"}, 404, {"detail": "no namespace 'nope' in any cluster"}),
        ({"cluster": "demo", "namespace": "nope"}, 404, {"detail": "no namespace 'nope' in cluster 'demo'"}),
        ({"kind": "nope"}, 400, None),
        ({"window": "2w"}, 400, {"window": ["window must be one of 1h, 24h, 7d, not '2w'."]}),
        ({"format": "xml"}, 400, {"format": ["format must be one of json, csv, not 'xml'."]}),
        ({"page": "0"}, 400, {"page": ["page must be a whole number from 1, not '0'."]}),
    ],
)
def test_bad_input_is_a_json_error_naming_it(reader, demo, params, status, body):
    response = reader.get(URL, params)
    assert response.status_code == status
    assert response["Content-Type"] == "application/json"
    if body is not None:
        assert response.json() == body
    else:
        assert "kind must be one of" in response.json()["kind"][0]


def test_csv_errors_are_json_too(reader, demo):
    response = reader.get(URL, {"format": "csv", "cluster": "nope"})
    assert response.status_code == 404 and response.json() == {"detail": "no cluster named 'nope'"}


@pytest.mark.parametrize("params", [{"page": "-8833643509"}, {"page_size": "0"}, {"page_size": "5000"}])
def test_the_csv_is_not_paged_but_a_malformed_page_is_still_a_400(reader, demo, params):
    response = reader.get(URL, {"format": "csv", **params})
    assert response.status_code == 400 and response["Content-Type"] == "application/json"
    assert list(response.json()) == list(params)
    whole = reader.get(URL, {"format": "csv", "page": "2", "page_size": "1"})
    assert whole.status_code == 200
    assert b"".join(whole.streaming_content) == b"".join(reader.get(URL, {"format": "csv"}).streaming_content)


def test_no_clusters_is_an_empty_list_and_a_header_only_csv(reader):
    assert reader.get(URL).json() == {"count": 0, "next": None, "previous": None, "results": []}
    response = reader.get(URL, {"format": "csv"})
    assert b"".join(response.streaming_content).decode().count("\r\n") == 1


def test_rows_say_what_window_and_periods_they_rest_on_and_how_to_apply_them(reader, demo):
    findings = {
        f.container.pod.name: f
        for f in Finding.objects.filter(cluster=demo, window="1h").select_related("container__pod")
    }
    json_rows, csv_rows = all_json(reader), all_csv(reader)
    assert len(json_rows) == len(csv_rows) > 0
    for as_json, as_csv in zip(json_rows, csv_rows, strict=True):
        finding = findings[as_json["pod"]]
        pod = finding.container.pod
        rec = next(r for r in finding.recommendations if r["kind"] == as_json["kind"])
        change = resource_change(
            namespace=pod.namespace,
            pod=pod.name,
            container=finding.container.name,
            workload_kind=pod.workload_kind,
            workload_name=pod.workload_name,
            request_mcpu=rec["suggested_request_mcpu"],
            limit_mcpu=rec["suggested_limit_mcpu"],
        )
        assert finding.window_start is not None
        assert datetime.fromisoformat(as_json["window_start"]) == finding.window_start
        assert datetime.fromisoformat(as_json["window_end"]) == finding.window_end
        assert datetime.fromisoformat(as_json["computed_at"]) == finding.computed_at
        assert datetime.fromisoformat(as_csv["window_start"]) == finding.window_start
        assert datetime.fromisoformat(as_csv["window_end"]) == finding.window_end
        assert datetime.fromisoformat(as_csv["computed_at"]) == finding.computed_at
        assert as_json["periods"] == finding.periods
        assert as_csv["periods"] == ("" if finding.periods is None else str(finding.periods))
        assert as_json["kubectl_command"] == (change.kubectl if change else None)
        assert as_csv["kubectl_command"] == (change.kubectl if change else "")
    api = next(r for r in json_rows if r["pod"] == "api-0" and r["kind"] == "raise_limit")
    assert api["periods"] == 30 * 600
    assert api["kubectl_command"] == "kubectl set resources deployment/api -c main --limits=cpu=1200m -n shop"
    assert next(r for r in json_rows if r["kind"] == "cut_threads")["kubectl_command"] is None  # nothing to set


def test_lifetime_rows_have_no_window_start(reader, demo):
    Finding.objects.filter(cluster=demo, window="1h", namespace="batch").update(lifetime=True, window_start=None)
    rows = all_csv(reader, namespace="batch")
    assert rows and all(row["window_start"] == "" and row["window_end"] for row in rows)
    assert all(row["window_start"] is None for row in all_json(reader, namespace="batch"))
