"""GET clusters/, clusters/<cluster>/, clusters/<cluster>/nodes/ and clusters/<cluster>/namespaces/."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from apps.advisor.models import Finding
from apps.clusters.models import Node

pytestmark = pytest.mark.django_db


def test_clusters_list_and_one_cluster(reader, demo):
    assert [c["name"] for c in reader.get("/api/v1/clusters/").json()["results"]] == ["demo"]
    one = reader.get("/api/v1/clusters/demo/").json()
    assert one["name"] == "demo" and one["source"] == "kubernetes" and one["enabled"] is True
    missing = reader.get("/api/v1/clusters/nope/")
    assert missing.status_code == 404 and missing.json() == {"detail": "no cluster named 'nope'"}


def test_nodes_carry_cpus_kernel_verdict_policy_and_probe(reader, demo):
    Node.objects.filter(cluster=demo, name="demo-node-0").update(
        kernel_version="4.14.133-113.105.amzn2.x86_64",
        cfs_slice_us=5000,
        cpufreq_governor="performance",
        probe={"verdict": "affected", "seconds_per_iteration": 0.1},
        probe_at=datetime(2026, 11, 30, 9, 0, tzinfo=UTC),
    )
    rows = {n["name"]: n for n in reader.get("/api/v1/clusters/demo/nodes/").json()["results"]}
    assert set(rows) == {"demo-node-0", "demo-node-1"}
    node = rows["demo-node-0"]
    assert node["cpus"] == 16 and node["capacity_mcpu"] == 16000 and node["allocatable_mcpu"] == 15800
    assert node["cpu_manager_policy"] == "none"
    assert node["cfs_slice_us"] == 5000 and node["cpufreq_governor"] == "performance"
    # Amazon Linux 2 4.14.133: past 512ac999d275 (4.14.97-90.72.amzn2), before the fix (4.14.154-128.181.amzn2).
    assert node["kernel"]["verdict"] == "affected" and node["kernel"]["bug"] == "slice_expiry"
    assert any(v.startswith("4.14.154") for v in node["kernel"]["fixed_in"])
    assert node["kernel"]["reasons"]
    assert node["probe"] == {"verdict": "affected", "seconds_per_iteration": 0.1}
    assert node["probe_at"] == "2026-11-30T09:00:00Z"
    assert node["pods"] == 5 and node["last_seen"] is not None
    # Not reported: null, not an empty string.
    assert rows["demo-node-1"]["cfs_slice_us"] is None and rows["demo-node-1"]["cpufreq_governor"] is None
    assert rows["demo-node-1"]["probe"] is None


def test_a_node_without_a_kernel_version_has_an_unknown_verdict(reader, demo):
    Node.objects.filter(cluster=demo, name="demo-node-1").update(kernel_version="")
    node = {n["name"]: n for n in reader.get("/api/v1/clusters/demo/nodes/").json()["results"]}["demo-node-1"]
    assert node["kernel_version"] is None and node["kernel"]["verdict"] == "unknown"


def test_namespaces_carry_counts_for_the_window(reader, demo):
    body = reader.get("/api/v1/clusters/demo/namespaces/").json()
    rows = {row["namespace"]: row for row in body["results"]}
    assert body["count"] == 2
    shop = rows["shop"]
    assert shop["pods"] == 8 and shop["containers"] == 8
    assert shop["containers_over_target"] == 4  # api-* (60%) and worker-* (40%) over the 10% target
    assert shop["containers_with_recommendations"] == 6  # plus cache-* (lower_request); web-* is healthy
    assert shop["worst_throttle_ratio"] == pytest.approx(0.6)
    assert shop["throttle_target"] == pytest.approx(0.1) and shop["window"] == "1h"
    batch = rows["batch"]
    assert batch["containers_over_target"] == 0 and batch["worst_throttle_ratio"] is None


def test_namespaces_follow_the_window_parameter(reader, demo):
    Finding.objects.filter(cluster=demo, window="7d", namespace="shop").update(throttle_ratio=0.05)
    shop = {
        r["namespace"]: r for r in reader.get("/api/v1/clusters/demo/namespaces/", {"window": "7d"}).json()["results"]
    }
    assert shop["shop"]["containers_over_target"] == 0 and shop["shop"]["window"] == "7d"


@pytest.mark.parametrize(
    ("url", "status", "body"),
    [
        ("/api/v1/clusters/nope/nodes/", 404, {"detail": "no cluster named 'nope'"}),
        ("/api/v1/clusters/nope/namespaces/", 404, {"detail": "no cluster named 'nope'"}),
        (
            "/api/v1/clusters/demo/namespaces/?window=2w",
            400,
            {"window": ["window must be one of 1h, 24h, 7d, not '2w'."]},
        ),
        ("/api/v1/clusters/demo/nodes/?page=-1", 400, {"page": ["page must be a whole number from 1, not '-1'."]}),
    ],
)
def test_bad_input(reader, demo, url, status, body):
    response = reader.get(url)
    assert (response.status_code, response.json()) == (status, body)
