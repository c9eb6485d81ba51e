"""GET clusters/<cluster>/namespaces/<ns>/pods/<pod>/series/: points per container and reference lines."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from apps.advisor.models import Finding

pytestmark = pytest.mark.django_db

URL = "/api/v1/clusters/demo/namespaces/shop/pods/{pod}/series/"
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.fixture()
def demo(db):
    from tests.builders import build_cluster

    return build_cluster("demo", now=NOW)


def iso(when: datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


def test_default_is_the_last_hour_of_raw_points(reader, demo, monkeypatch):
    monkeypatch.setattr("django.utils.timezone.now", lambda: NOW + timedelta(minutes=1))
    body = reader.get(URL.format(pod="api-0")).json()
    assert body["resolution"] == "raw"
    assert body["since"] == "2026-11-30T11:01:00Z" and body["until"] == "2026-11-30T12:01:00Z"
    [main] = body["containers"]
    assert main["container"] == "main" and main["request_mcpu"] == 250 and main["limit_mcpu"] == 500
    # 30 minutes of readings every 60 s: 31 readings, the first has no interval before it.
    assert len(main["points"]) == 30
    point = main["points"][-1]
    assert point["ts"] == "2026-11-30T12:00:00Z"
    assert point["usage_mcpu"] == pytest.approx(490.0)
    assert point["throttle_ratio"] == pytest.approx(0.6)
    assert point["periods"] == 600 and point["throttled_periods"] == 360 and point["threads"] == 8


def test_reference_lines_are_the_findings_floor_and_ceiling(reader, demo):
    body = reader.get(URL.format(pod="api-0"), {"since": iso(NOW - timedelta(hours=1)), "until": iso(NOW)}).json()
    finding = Finding.objects.get(container__pod__name="api-0", window="1h")
    [main] = body["containers"]
    assert main["shares_floor_mcpu"] == finding.shares_floor_mcpu
    assert main["quota_ceiling_mcpu"] == 500  # the 500m limit


def test_a_narrower_range_has_fewer_points(reader, demo):
    body = reader.get(URL.format(pod="worker-0"), {"since": iso(NOW - timedelta(minutes=10)), "until": iso(NOW)}).json()
    points = body["containers"][0]["points"]
    assert points[0]["ts"] == "2026-11-30T11:50:00Z" and len(points) == 11
    assert all(p["throttle_ratio"] == pytest.approx(0.4) for p in points)


def test_ranges_over_two_days_read_hourly_rollups(reader, demo):
    body = reader.get(URL.format(pod="api-0"), {"since": iso(NOW - timedelta(days=3)), "until": iso(NOW)}).json()
    assert body["resolution"] == "hourly"
    points = body["containers"][0]["points"]
    assert points and all(p["usage_p95_mcpu"] == pytest.approx(490.0) for p in points)


def test_a_time_without_offset_is_utc(reader, demo):
    body = reader.get(URL.format(pod="api-0"), {"since": "2026-11-30T11:00:00", "until": "2026-11-30T12:00:00"}).json()
    assert body["since"] == "2026-11-30T11:00:00Z"


def test_a_pod_without_containers_has_no_series(reader, demo):
    from apps.clusters.models import Container

    Container.objects.filter(pod__name="web-0").delete()
    assert reader.get(URL.format(pod="web-0")).json()["containers"] == []


@pytest.mark.parametrize(
    ("params", "parameter", "message"),
    [
        ({"since": "yesterday"}, "since", "since must be an ISO 8601 date and time"),
        ({"until": "2026-13-01T00:00:00Z"}, "until", "until must be an ISO 8601 date and time"),
        ({"since": "2026-11-30T12:00:00Z", "until": "2026-11-30T11:00:00Z"}, "since", "since must be before until."),
        ({"since": "2026-11-30T12:00:00Z", "until": "2026-11-30T12:00:00Z"}, "since", "since must be before until."),
        (
            {"since": "2026-09-01T00:00:00Z", "until": "2026-11-30T00:00:00Z"},
            "since",
            "since and until must be at most 31 days apart.",
        ),
        ({"until": "0001-01-01T00:00:00Z"}, "until", "until must lie between the years 1970 and 9000."),
    ],
)
def test_bad_times_are_a_400_naming_the_parameter(reader, demo, params, parameter, message):
    response = reader.get(URL.format(pod="api-0"), params)
    assert response.status_code == 400
    assert response.json()[parameter][0].startswith(message)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("/api/v1/clusters/nope/namespaces/shop/pods/api-0/series/", "no cluster named 'nope'"),
        ("/api/v1/clusters/demo/namespaces/nope/pods/api-0/series/", "no namespace 'nope' in cluster 'demo'"),
        (
            "/api/v1/clusters/demo/namespaces/shop/pods/nope/series/",
            "no pod 'nope' in namespace 'shop' of cluster 'demo'",
        ),
        (
            "/api/v1/clusters/demo/namespaces/batch/pods/api-0/series/",
            "no pod 'api-0' in namespace 'batch' of cluster 'demo'",
        ),
    ],
)
def test_unknown_cluster_namespace_or_pod_is_a_404(reader, demo, url, message):
    response = reader.get(url)
    assert (response.status_code, response.json()) == (404, {"detail": message})


def test_an_offset_beyond_what_postgresql_stores_is_read_as_utc(reader, demo):
    # ISO 8601 allows +18:23; PostgreSQL's timestamptz refuses offsets past ±15:59 (found by schemathesis as a 500).
    response = reader.get(URL.format(pod="api-0"), {"since": "2026-11-30T22:00:00+18:23", "until": iso(NOW)})
    assert response.status_code == 200, response.content
    assert response.json()["since"] == "2026-11-30T03:37:00Z"
