"""Changes the inventory sees on stored containers, from two inventories of real pod lists: an in-place resize
applied between them, a new image, a restart, a pod on another node. Both upsert paths (the ORM's; PostgreSQL's SQL
over the load tables) must record the same changes."""

from __future__ import annotations

import copy
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from apps.clusters.inventory import upsert_nodes, upsert_pods
from apps.clusters.models import ContainerChange
from apps.collector.inventory import pods_from_objects
from tests import factories as f

pytestmark = pytest.mark.django_db
RESIZE = Path(__file__).parent.parent / "fixtures" / "kubelet" / "pods-in-place-resize.json"
METHODS = [pytest.param("orm", id="orm"), pytest.param("sql", id="sql", marks=pytest.mark.postgres)]


def resized_pod() -> dict[str, Any]:
    [pod] = json.loads(RESIZE.read_text())["items"]
    return pod


def store(cluster, pod_objects: list[dict[str, Any]], minute: int, method: str) -> None:
    pods, problems = pods_from_objects(json.loads(json.dumps(pod_objects)))
    assert problems == []
    nodes = [f.node_info(name) for name in {p.node for p in pods}]
    now = f.T0 + timedelta(minutes=minute)
    upsert_pods(cluster, pods, now, upsert_nodes(cluster, nodes, now), method=method)


def changes() -> list[tuple[str, str, str, str]]:
    return [(c.container.name, c.kind, c.before, c.after) for c in ContainerChange.objects.order_by("kind")]


@pytest.mark.parametrize("method", METHODS)
def test_an_in_place_resize_is_one_change_when_the_status_applies_it(method):
    cluster = f.cluster("resizing")
    before = resized_pod()  # the spec asks 500m / 500m, the status still reports 200m / 200m applied
    store(cluster, [before], 0, method)
    store(cluster, [before], 1, method)  # the same inventory again: nothing changed
    assert changes() == []

    after = copy.deepcopy(before)
    [status] = after["status"]["containerStatuses"]
    status["resources"] = copy.deepcopy(after["spec"]["containers"][0]["resources"])  # the kubelet applied it
    store(cluster, [after], 2, method)
    assert changes() == [
        ("resized-container", "limit", "200", "500"),
        ("resized-container", "request", "200", "500"),
    ]
    [change] = ContainerChange.objects.filter(kind="limit")
    assert change.seen_at == f.T0 + timedelta(minutes=2)


@pytest.mark.parametrize("method", METHODS)
def test_a_new_image_a_restart_and_another_node_are_changes_and_a_first_sight_is_not(method):
    cluster = f.cluster("rolling")
    pod = resized_pod()
    store(cluster, [pod], 0, method)
    moved = copy.deepcopy(pod)
    moved["spec"]["nodeName"] = "other-node"
    moved["spec"]["containers"][0]["image"] = "registry.example/app:2.0"
    [status] = moved["status"]["containerStatuses"]
    status["restartCount"] = status.get("restartCount", 0) + 1
    newcomer = copy.deepcopy(pod)
    newcomer["metadata"]["name"] = "new-pod"
    store(cluster, [moved, newcomer], 1, method)
    assert sorted(changes()) == sorted(
        [
            ("resized-container", "image", pod["spec"]["containers"][0]["image"], "registry.example/app:2.0"),
            ("resized-container", "node", pod["spec"]["nodeName"], "other-node"),
            ("resized-container", "restart", str(status["restartCount"] - 1), str(status["restartCount"])),
        ]
    )


@pytest.mark.parametrize("method", METHODS)
def test_a_rollout_is_a_change_on_the_new_pods_against_the_workloads_earlier_pod(method):
    from apps.clusters.models import Container

    cluster = f.cluster("deploying")
    old = resized_pod()
    old["metadata"]["name"] = "web-5d8f-abcde"
    old["metadata"]["ownerReferences"] = [{"kind": "Deployment", "name": "web", "controller": True, "uid": "u1"}]
    store(cluster, [old], 0, method)
    # The template's limit went from 500m to 800m: the ReplicaSet's new pod runs it, the old one still runs.
    new = copy.deepcopy(old)
    new["metadata"]["name"] = "web-7c9a-fghij"
    new["metadata"]["uid"] = "uid-new"
    for resources in (new["spec"]["containers"][0]["resources"], new["status"]["containerStatuses"][0]["resources"]):
        resources["limits"]["cpu"] = "800m"
    store(cluster, [old, new], 1, method)
    [change] = ContainerChange.objects.all()
    assert (change.kind, change.before, change.after) == ("limit", "200", "800")  # the old pod runs 200m applied
    assert change.container.pod.name == "web-7c9a-fghij"
    assert change.previous == Container.objects.get(pod__name="web-5d8f-abcde")
    # A third pod like the new one is no change.
    third = copy.deepcopy(new)
    third["metadata"]["name"] = "web-7c9a-klmno"
    store(cluster, [new, third], 2, method)
    assert ContainerChange.objects.count() == 1


def test_new_pods_are_told_from_stored_ones_in_chunks_of_names(monkeypatch):
    from apps.clusters import changes as module

    cluster = f.cluster("many")
    pods = []
    for name in ("a", "b", "c"):
        pod = resized_pod()
        pod["metadata"]["name"] = name
        pods.append(pod)
    store(cluster, pods[:2], 0, "orm")
    monkeypatch.setattr(module, "NAMES_PER_QUERY", 2)  # three names: two queries
    infos, _ = pods_from_objects(json.loads(json.dumps(pods)))
    assert module.new_pod_keys(cluster, infos) == {("default", "c")}


@pytest.mark.parametrize("method", METHODS)
def test_a_nodes_new_kernel_is_a_change_on_each_container_it_runs(method):
    cluster = f.cluster("upgrading")
    pod = resized_pod()
    other = copy.deepcopy(pod)
    other["metadata"]["name"] = "elsewhere"
    other["spec"]["nodeName"] = "node-b"
    store(cluster, [pod, other], 0, method)  # both nodes on 5.15.0-1034-aws (the factory's kernel)
    upgraded = [f.node_info(pod["spec"]["nodeName"], kernel="6.18.44-fc"), f.node_info("node-b")]
    upsert_nodes(cluster, upgraded, f.T0 + timedelta(minutes=5), method=method)
    upsert_nodes(cluster, upgraded, f.T0 + timedelta(minutes=6), method=method)  # the same again: nothing new
    assert changes() == [("resized-container", "kernel", "5.15.0-1034-aws", "6.18.44-fc")]
    [change] = ContainerChange.objects.all()
    assert change.container.pod.name == "resized-pod" and change.seen_at == f.T0 + timedelta(minutes=5)
