"""Did the change work, on recorded real data: the real Kubernetes 1.34 dump imported twice around an in-place
resize of its most throttled pod (the resize as the kubelet reports one: the spec and the status's applied
resources, the shape of the real in-place-resize pod list) gives one change — limit and request together — with
the figures two imports can give: before, the real counters since the container started; after, too soon."""

from __future__ import annotations

import copy
import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command
from django.utils import timezone

from apps.advisor.changes import change_rows, changes_of
from apps.clusters.models import Cluster, ContainerChange

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).parent.parent / "fixtures"
PSI = FIXTURES / "clusters" / "k8s-1.34-minikube-psi"
POD, CONTAINER = "e2e-deployment-667b4749d4-4tjwb", "compute-pi-digits"


def scrape_counter(family: str) -> int:
    """The container's counter as the real scrape has it."""
    for line in (PSI / "cadvisor.txt").read_text().splitlines():
        if line.startswith(family + "{") and f'pod="{POD}"' in line and f'container="{CONTAINER}"' in line:
            return int(line.rsplit("}", 1)[1].split()[0])
    raise AssertionError(f"{family} of {POD}/{CONTAINER} is not in the scrape")


def resized(pods: dict[str, Any], limit: str, request: str) -> dict[str, Any]:
    """The pod list with the pod resized in place and the kubelet done applying it: the spec and the status's
    `resources` both hold the new values (as in the real in-place-resize pod list, where the status still held
    the old ones while the resize was in progress)."""
    [real] = json.loads((FIXTURES / "kubelet" / "pods-in-place-resize.json").read_text())["items"]
    assert "resources" in real["status"]["containerStatuses"][0]  # where the kubelet reports what it applied
    pods = copy.deepcopy(pods)
    [pod] = [p for p in pods["items"] if p["metadata"]["name"] == POD]
    [spec] = [c for c in pod["spec"]["containers"] if c["name"] == CONTAINER]
    [status] = [c for c in pod["status"]["containerStatuses"] if c["name"] == CONTAINER]
    for resources in (spec["resources"], status["resources"]):
        resources["limits"]["cpu"], resources["requests"]["cpu"] = limit, request
    return pods


def import_at(pods_path: Path, at: str) -> None:
    node = yaml.safe_load((PSI / "nodes.yaml").read_text())["items"][0]["metadata"]["name"]
    call_command("import_dump", "--cluster", "mk", "--nodes", str(PSI / "nodes.yaml"), "--pods", str(pods_path),
                 "--metrics", f"{node}={PSI / 'cadvisor.txt'}", "--at", at)  # fmt: skip


def test_two_imports_around_an_in_place_resize_give_one_change_with_its_effect(tmp_path: Path):
    first = timezone.now().replace(microsecond=0) - timedelta(minutes=10)
    import_at(PSI / "pods.yaml", first.isoformat())
    after = tmp_path / "pods-resized.yaml"
    after.write_text(yaml.safe_dump(resized(yaml.safe_load((PSI / "pods.yaml").read_text()), "200m", "100m")))
    import_at(after, (first + timedelta(minutes=1)).isoformat())

    cluster = Cluster.objects.get(name="mk")
    assert ContainerChange.objects.count() == 2  # the limit and the request, nothing else of the 24 pods
    [row] = change_rows(changes_of(cluster, "scraper", first - timedelta(hours=1)))
    assert (row["pod"], row["container"], row["kind"], row["before"], row["after"]) == (POD, CONTAINER, "limit",
                                                                                        "80", "200")  # fmt: skip
    assert row["also_changed"] == [{"kind": "request", "before": "40", "after": "100"}]
    assert (row["pods"], row["workload_kind"], row["workload_name"]) == (1, "Deployment", "e2e-deployment")
    assert row["seen_at"] == first + timedelta(minutes=1)
    # Before: the real counters since the container started (392 of 392 periods throttled), read once.
    periods = scrape_counter("container_cpu_cfs_periods_total")
    throttled = scrape_counter("container_cpu_cfs_throttled_periods_total")
    assert (row["before_periods"], row["before_throttle_ratio"]) == (periods, round(throttled / periods, 4))
    # After: the second import's reading spans the change (its interval began before the resize was seen).
    assert row["after_periods"] is None and row["after_throttle_ratio"] is None
    assert row["verdict"] == "no_data" and re.search(r"only counters since the container started", row["note"])
