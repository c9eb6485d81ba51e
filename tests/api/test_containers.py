"""GET clusters/<cluster>/namespaces/<ns>/containers/: filters, ordering, pagination, window, and bad input."""

from __future__ import annotations

import pytest

from apps.advisor.models import Finding

pytestmark = pytest.mark.django_db

URL = "/api/v1/clusters/demo/namespaces/shop/containers/"


def pods(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [row["pod"] for row in response.json()["results"]]


def test_rows_come_worst_first_with_unknown_ratios_last(reader, demo):
    order = pods(reader.get(URL))
    assert order[:4] == ["api-0", "api-1", "worker-0", "worker-1"]  # 60%, 60%, 40%, 40%
    assert set(order[4:6]) == {"web-0", "web-1"}  # measured 0%
    assert set(order[6:]) == {"cache-0", "cache-1"}  # no quota: ratio unknown


def test_min_throttle_ratio_keeps_containers_at_or_above_it(reader, demo):
    assert pods(reader.get(URL, {"min_throttle_ratio": "0.5"})) == ["api-0", "api-1"]
    assert set(pods(reader.get(URL, {"min_throttle_ratio": "0.4"}))) == {"api-0", "api-1", "worker-0", "worker-1"}
    assert len(pods(reader.get(URL, {"min_throttle_ratio": "0"}))) == 6  # unknown ratios are not "at least 0"


def test_kind_keeps_containers_with_that_recommendation(reader, demo):
    assert set(pods(reader.get(URL, {"kind": "raise_limit"}))) == {"api-0", "api-1"}
    assert set(pods(reader.get(URL, {"kind": "lower_request"}))) == {"cache-0", "cache-1"}
    assert pods(reader.get(URL, {"kind": "add_threads"})) == []


def test_node_keeps_containers_on_that_node(reader, demo):
    on_node_1 = pods(reader.get(URL, {"node": "demo-node-1"}))
    assert set(on_node_1) == {"api-1", "worker-1", "cache-1", "web-1"}


def test_filters_combine(reader, demo):
    assert pods(reader.get(URL, {"kind": "cut_threads", "node": "demo-node-0", "min_throttle_ratio": "0.3"})) == [
        "api-0",
        "worker-0",
    ]


def test_ordering_by_usage_and_by_name(reader, demo):
    by_usage = pods(reader.get(URL, {"ordering": "-usage_p95_mcpu"}))
    assert by_usage[:2] == ["api-0", "api-1"] and by_usage[-2:] == ["cache-0", "cache-1"]  # 490m ... 30m
    assert pods(reader.get(URL, {"ordering": "pod"})) == sorted(by_usage)
    ascending = pods(reader.get(URL, {"ordering": "throttle_ratio"}))
    assert ascending[:2] == ["web-0", "web-1"] and set(ascending[-2:]) == {"cache-0", "cache-1"}  # nulls stay last


def test_pages_cover_every_row_once(reader, demo):
    first = reader.get(URL, {"page_size": 3}).json()
    assert first["count"] == 8 and len(first["results"]) == 3 and first["previous"] is None
    seen = [row["pod"] for row in first["results"]]
    following = first["next"]
    while following:
        page = reader.get(following).json()
        seen += [row["pod"] for row in page["results"]]
        following = page["next"]
    assert sorted(seen) == sorted(pods(reader.get(URL)))


def test_window_selects_the_stored_findings_of_that_window(reader, demo):
    Finding.objects.filter(cluster=demo, window="24h", container__pod__name="api-0").update(throttle_ratio=0.99)
    assert pods(reader.get(URL, {"window": "24h"}))[0] == "api-0"
    row = reader.get(URL, {"window": "24h"}).json()["results"][0]
    assert row["throttle_ratio"] == 0.99
    assert reader.get(URL).json()["results"][0]["throttle_ratio"] == pytest.approx(0.6)  # 1h is the default


@pytest.mark.parametrize(
    ("params", "parameter", "message"),
    [
        ({"window": "2w"}, "window", "window must be one of 1h, 24h, 7d, not '2w'."),
        ({"min_throttle_ratio": "abc"}, "min_throttle_ratio", "min_throttle_ratio must be a number from 0 to 1."),
        ({"min_throttle_ratio": "1.5"}, "min_throttle_ratio", "min_throttle_ratio must be a number from 0 to 1."),
        ({"min_throttle_ratio": "-0.1"}, "min_throttle_ratio", "min_throttle_ratio must be a number from 0 to 1."),
        ({"min_throttle_ratio": "NaN"}, "min_throttle_ratio", "min_throttle_ratio must be a number from 0 to 1."),
        ({"kind": "nope"}, "kind", "kind must be one of upgrade_kernel, raise_limit"),
        ({"ordering": "password"}, "ordering", "ordering must be one of -throttle_ratio"),
        ({"page": "0"}, "page", "page must be a whole number from 1, not '0'."),
        ({"page": "x"}, "page", "page must be a whole number from 1"),
        ({"page_size": "0"}, "page_size", "page_size must be a whole number from 1 to 1000"),
        ({"page_size": "1001"}, "page_size", "page_size must be a whole number from 1 to 1000, not 1001."),
        ({"node": "n" * 254}, "node", "node is at most 253 characters long."),
    ],
)
def test_bad_parameters_are_a_400_naming_the_parameter(reader, demo, params, parameter, message):
    response = reader.get(URL, params)
    assert response.status_code == 400
    [text] = response.json()[parameter]
    assert text.startswith(message)


def test_a_page_past_the_last_is_a_404(reader, demo):
    response = reader.get(URL, {"page": "2"})
    assert response.status_code == 404
    assert response.json()["detail"].startswith("page 2 does not exist")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("/api/v1/clusters/nope/namespaces/shop/containers/", "no cluster named 'nope'"),
        ("/api/v1/clusters/demo/namespaces/nope/containers/", "no namespace 'nope' in cluster 'demo'"),
    ],
)
def test_unknown_cluster_or_namespace_is_a_404_saying_which(reader, demo, url, message):
    response = reader.get(url)
    assert response.status_code == 404
    assert response.json() == {"detail": message}


def test_a_namespace_without_findings_yet_is_an_empty_list(reader, demo):
    Finding.objects.filter(cluster=demo, namespace="batch").delete()
    response = reader.get("/api/v1/clusters/demo/namespaces/batch/containers/")
    assert response.status_code == 200 and response.json()["count"] == 0


@pytest.mark.parametrize(
    ("url", "status"),
    [
        ("/api/v1/clusters/a%00b/nodes/", 404),
        ("/api/v1/clusters/demo/namespaces/a%00/containers/", 404),
        ("/api/v1/clusters/demo/namespaces/shop/pods/a%00/series/", 404),
        ("/api/v1/clusters/demo/namespaces/shop/containers/?node=a%00", 400),
        ("/api/v1/recommendations/?cluster=a%00", 400),
        ("/api/v1/recommendations/?namespace=a%00", 400),
        ("/api/v1/kernel-check/?version=a%00", 400),
    ],
)
def test_a_nul_byte_in_a_name_is_refused_not_a_server_error(reader, demo, url, status):
    """PostgreSQL cannot compare text with NUL bytes; such a name cannot exist, so it is a 404 (path) or 400 (query)."""
    assert reader.get(url).status_code == status
