"""GET recommendations/: one row per (container, recommendation), as JSON pages or streamed CSV."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest

from apps.advisor.models import Finding
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
    """api-0 has three recommendations; pages of 2 split them across pages without losing or repeating any."""
    first = reader.get(URL, {"page_size": 2}).json()
    second = reader.get(URL, {"page_size": 2, "page": 2}).json()
    pairs = [(r["pod"], r["kind"]) for r in first["results"] + second["results"]]
    assert pairs[:3] == [("api-0", "raise_limit"), ("api-0", "cut_threads"), ("api-0", "use_whole_cores")]
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


def test_csv_file_name_says_what_it_holds(reader, demo):
    response = reader.get(URL, {"format": "csv", "cluster": "demo", "namespace": "shop"})
    assert response["Content-Disposition"] == 'attachment; filename="cputune-recommendations-demo-shop.csv"'


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
