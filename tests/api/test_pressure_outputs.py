"""CPU pressure in every output: the containers API, the recommendations CSV, the pod series and /metrics carry the
same figure, computed by the real ingest and refresh from the pushed totals, and no output shows a zero that was
not measured."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.builders import Pattern, build_cluster

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
PATTERNS = (
    Pattern("hot", "shop", 250, 500, 490.0, 0.6, 8, pressure=0.3),  # throttled and waiting: the impact
    Pattern("dark", "shop", 250, 500, 490.0, 0.6, 8, pressure=0.0),  # throttled, PSI reads 0: not measured
    Pattern("calm", "shop", 500, 1000, 200.0, 0.0, 4, pressure=0.02),  # not throttled, waits on its neighbours
    Pattern("old", "shop", 250, 500, 490.0, 0.6, 8),  # a source without pressure
)
EXPECTED = {"hot-0": ("measured", 0.3), "dark-0": ("not_measured", None), "calm-0": ("measured", 0.02),
            "old-0": ("not_exported", None)}  # fmt: skip


@pytest.fixture()
def psi(db):
    return build_cluster("psi", patterns=PATTERNS, per_pattern=1, now=NOW)


def test_the_containers_api_gives_each_container_its_pressure_and_status(reader, psi):
    response = reader.get("/api/v1/clusters/psi/namespaces/shop/containers/")
    assert response.status_code == 200, response.content
    rows = {row["pod"]: row for row in response.json()["results"]}
    for pod, (status, waiting) in EXPECTED.items():
        row = rows[pod]
        assert row["pressure_status"] == status, pod
        assert row["pressure_waiting_per_second"] == (None if waiting is None else pytest.approx(waiting)), pod
        assert row["pressure_stalled_per_second"] == (None if waiting is None else pytest.approx(waiting / 2)), pod
        assert row["cpu_pressure_waiting_seconds_per_second"] == row["pressure_waiting_per_second"], pod
        assert row["cpu_pressure_stalled_seconds_per_second"] == row["pressure_stalled_per_second"], pod


def test_sorting_by_pressure_puts_the_most_waiting_first_and_the_unmeasured_last(reader, psi):
    response = reader.get(
        "/api/v1/clusters/psi/namespaces/shop/containers/", {"ordering": "-pressure_waiting_per_second"}
    )
    assert response.status_code == 200, response.content
    order = [row["pod"] for row in response.json()["results"]]
    assert order[:2] == ["hot-0", "calm-0"]
    assert set(order[2:]) == {"dark-0", "old-0"}


def test_worst_first_puts_the_throttled_container_that_waits_before_equal_ratios(reader, psi):
    response = reader.get("/api/v1/clusters/psi/namespaces/shop/containers/")
    assert response.json()["results"][0]["pod"] == "hot-0"  # hot, dark, old: all 60 %


def test_the_recommendations_csv_carries_pressure_columns(reader, psi):
    response = reader.get("/api/v1/recommendations/", {"format": "csv", "cluster": "psi"})
    assert response.status_code == 200
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    by_pod = {row["pod"]: row for row in rows}
    assert set(by_pod) >= {"hot-0", "dark-0", "old-0"}  # the throttled ones have advice
    for pod in ("hot-0", "dark-0", "old-0"):
        status, waiting = EXPECTED[pod]
        assert by_pod[pod]["pressure_status"] == status
        assert by_pod[pod]["pressure_waiting_per_second"] == ("" if waiting is None else str(waiting))


def test_the_pod_series_points_carry_pressure_per_second(reader, psi):
    since, until = (t.isoformat().replace("+00:00", "Z") for t in (NOW - timedelta(hours=1), NOW))
    for pod, waiting in (("hot-0", 0.3), ("dark-0", 0.0), ("old-0", None)):
        body = reader.get(
            f"/api/v1/clusters/psi/namespaces/shop/pods/{pod}/series/", {"since": since, "until": until}
        ).json()
        [main] = body["containers"]
        points = main["points"]
        assert len(points) == 30
        for point in points:
            if waiting is None:
                assert point["pressure_waiting_per_second"] is None
            else:
                assert point["pressure_waiting_per_second"] == pytest.approx(waiting)
                assert point["pressure_stalled_per_second"] == pytest.approx(waiting / 2)


def test_metrics_export_pressure_only_where_it_is_measured(reader, psi):
    response = reader.get("/metrics")
    assert response.status_code == 200
    families = {f.name: f.samples for f in text_string_to_metric_families(response.content.decode())}
    samples = {s.labels["pod"]: s.value for s in families["cputune_container_cpu_pressure_waiting_ratio"]}
    assert samples == {"hot-0": pytest.approx(0.3), "calm-0": pytest.approx(0.02)}
