"""Changes the inventory sees on stored containers, from two inventories of real pod lists: an in-place resize
applied between them, a new image, a restart, a pod on another node, a rollout; and how they group into one change
an operator made (docs/domain.md#change-groups). Both upsert paths (the ORM's; PostgreSQL's SQL over the load
tables) must record the same changes."""

from __future__ import annotations

import copy
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db.models import F

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


def groups() -> list[list[tuple[str, str, str, str]]]:
    """Each group's changes as (pod, kind, before, after), the one standing for it first; groups oldest first."""
    leads = ContainerChange.objects.filter(group_id=F("id")).order_by("seen_at", "id")
    return [
        [
            (c.container.pod.name, c.kind, c.before, c.after)
            for c in sorted(lead.members.all(), key=lambda c: (c != lead, c.pk))
        ]
        for lead in leads
    ]


def in_workload(pod: dict[str, Any], name: str, kind: str = "Deployment", workload: str = "web") -> dict[str, Any]:
    pod = copy.deepcopy(pod)
    pod["metadata"]["name"] = name
    pod["metadata"]["uid"] = f"uid-{name}"
    pod["metadata"]["ownerReferences"] = [{"kind": kind, "name": workload, "controller": True, "uid": "u1"}]
    return pod


def with_limit(pod: dict[str, Any], limit: str) -> dict[str, Any]:
    """The pod with its container's CPU limit at `limit`, in the spec and applied."""
    pod = copy.deepcopy(pod)
    for resources in (pod["spec"]["containers"][0]["resources"], pod["status"]["containerStatuses"][0]["resources"]):
        resources["limits"]["cpu"] = limit
    return pod


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
    # It happened after the inventory before, which still saw 200m applied.
    assert change.since == f.T0 + timedelta(minutes=1)
    # One act: the limit stands for the resize, its request beside it.
    assert groups() == [[("resized-pod", "limit", "200", "500"), ("resized-pod", "request", "200", "500")]]


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
def test_a_rollout_is_one_change_over_the_new_pods_against_the_workloads_earlier_pod(method):
    from apps.clusters.models import Container

    cluster = f.cluster("deploying")
    old = in_workload(resized_pod(), "web-5d8f-abcde")
    store(cluster, [old], 0, method)
    # The template's limit went from 500m to 800m: the ReplicaSet's new pod runs it, the old one still runs.
    new = with_limit(in_workload(old, "web-7c9a-fghij"), "800m")
    store(cluster, [old, new], 1, method)
    [change] = ContainerChange.objects.all()
    assert (change.kind, change.before, change.after) == ("limit", "200", "800")  # the old pod runs 200m applied
    assert change.container.pod.name == "web-7c9a-fghij"
    assert change.previous == Container.objects.get(pod__name="web-5d8f-abcde")
    # The rollout's next pod, a collection later, is one more pod of the same change (its earlier pod, the first new
    # one, runs what it runs), against the same earlier pod.
    third = in_workload(new, "web-7c9a-klmno")
    store(cluster, [new, third], 2, method)
    assert groups() == [[("web-7c9a-fghij", "limit", "200", "800"), ("web-7c9a-klmno", "limit", "200", "800")]]
    assert set(ContainerChange.objects.values_list("previous__pod__name", flat=True)) == {"web-5d8f-abcde"}
    # Long after the rollout, a new pod like the others (a scale-up) is no change.
    store(cluster, [new, third, in_workload(new, "web-7c9a-pqrst")], 40, method)
    assert ContainerChange.objects.count() == 2


@pytest.mark.parametrize("method", METHODS)
def test_a_rollout_over_pods_that_keep_their_names_is_one_change(method):
    cluster = f.cluster("stateful")
    pods = [in_workload(resized_pod(), f"db-{i}", "StatefulSet", "db") for i in range(3)]
    store(cluster, pods, 0, method)
    # A StatefulSet replaces its pods one at a time, the highest ordinal first, each under its own name.
    for minute, ordinal in ((1, 2), (3, 1), (5, 0)):
        pods[ordinal] = with_limit(pods[ordinal], "1")
        store(cluster, pods, minute, method)
    assert groups() == [[(f"db-{i}", "limit", "200", "1000") for i in (2, 1, 0)]]
    # A different change of the workload afterwards is a change of its own.
    pods[2] = with_limit(pods[2], "2")
    store(cluster, pods, 6, method)
    assert [group[0] for group in groups()] == [("db-2", "limit", "200", "1000"), ("db-2", "limit", "1000", "2000")]


@pytest.mark.parametrize("method", METHODS)
def test_pods_of_no_workload_and_of_two_workloads_do_not_group(method):
    cluster = f.cluster("apart")
    loose = [resized_pod(), in_workload(resized_pod(), "a-1", workload="a"), in_workload(resized_pod(), "b-1",
             workload="b")]  # fmt: skip
    other = copy.deepcopy(loose[0])
    other["metadata"]["name"] = "loose-2"
    loose.append(other)
    store(cluster, loose, 0, method)
    store(cluster, [with_limit(p, "900m") for p in loose], 1, method)
    assert sorted(group[0][0] for group in groups()) == ["a-1", "b-1", "loose-2", "resized-pod"]
    assert all(len(group) == 1 for group in groups())


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
    assert change.since == f.T0  # the node was seen on its old kernel then
    assert change.group == change


@pytest.mark.parametrize("method", METHODS)
def test_a_reboot_into_a_new_kernel_is_one_change_with_its_restarts_on_each_workload(method):
    cluster = f.cluster("rebooting")
    replicas = [in_workload(resized_pod(), f"web-{i}") for i in range(2)]
    store(cluster, replicas, 0, method)
    now = f.T0 + timedelta(minutes=1)
    upsert_nodes(cluster, [f.node_info(replicas[0]["spec"]["nodeName"], kernel="6.18.44-fc")], now, method=method)
    for pod in replicas:  # the reboot restarted their containers
        pod["status"]["containerStatuses"][0]["restartCount"] = 1
    store(cluster, replicas, 1, method)
    assert groups() == [
        [("web-0", "kernel", "5.15.0-1034-aws", "6.18.44-fc"), ("web-1", "kernel", "5.15.0-1034-aws", "6.18.44-fc"),
         ("web-0", "restart", "0", "1"), ("web-1", "restart", "0", "1")],
    ]  # fmt: skip


@pytest.mark.parametrize("method", METHODS)
def test_a_pod_read_before_it_was_listed_is_first_seen_at_its_listing(method):
    from apps.telemetry.ingest import ingest_readings

    cluster = f.cluster("early")
    old = in_workload(resized_pod(), "web-5d8f-abcde")
    store(cluster, [old], 0, method)
    # The scrape names two pods the inventory has not listed yet (they started between the pod list and the scrape):
    # stored bare, with no limit or request known.
    early = [with_limit(in_workload(old, "web-7c9a-fghij"), "800m"), in_workload(resized_pod(), "loner")]
    readings = [f.reading(1, periods=10, throttled=0, usage_s=1.0, pod=p["metadata"]["name"], namespace="default",
                          container="resized-container") for p in early]  # fmt: skip
    ingest_readings(cluster, readings, now=f.T0 + timedelta(minutes=1))
    assert ContainerChange.objects.count() == 0
    store(cluster, [old, *early], 2, method)
    # The loner's limit is not a change from "none"; the workload's new pod is a rollout against its earlier pod.
    assert groups() == [[("web-7c9a-fghij", "limit", "200", "800")]]


def with_env(pod: dict[str, Any], **env: str) -> dict[str, Any]:
    pod = copy.deepcopy(pod)
    pod["spec"]["containers"][0]["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return pod


@pytest.mark.parametrize("method", METHODS)
def test_a_rollout_that_only_sets_gomaxprocs_is_a_change_of_cpu_env_vars(method):
    cluster = f.cluster("knobs")
    old = with_env(in_workload(resized_pod(), "api-5d8f-abcde", workload="api"), GOMAXPROCS="8", HOME="/root")
    store(cluster, [old], 0, method)
    # The template's GOMAXPROCS went from 8 to 2 (and a JVM option came in); a variable that is no CPU knob is not
    # kept, so changing it is no change.
    new = with_env(in_workload(old, "api-7c9a-fghij", workload="api"), GOMAXPROCS="2", HOME="/home/app",
                   JAVA_TOOL_OPTIONS="-XX:ActiveProcessorCount=2")  # fmt: skip
    store(cluster, [old, new], 1, method)
    assert groups() == [[("api-7c9a-fghij", "env", "GOMAXPROCS=8",
                          "GOMAXPROCS=2; JAVA_TOOL_OPTIONS=-XX:ActiveProcessorCount=2")]]  # fmt: skip
    # In place, on a pod that keeps its name: dropped altogether.
    store(cluster, [old, with_env(new, HOME="/root")], 2, method)
    assert groups()[-1] == [("api-7c9a-fghij", "env", "GOMAXPROCS=2; JAVA_TOOL_OPTIONS=-XX:ActiveProcessorCount=2", "")]


@pytest.mark.parametrize("method", METHODS)
def test_a_nodes_new_kernel_is_no_change_for_pods_gone_from_it(method):
    cluster = f.cluster("gone")
    pod = resized_pod()
    gone = copy.deepcopy(pod)
    gone["metadata"]["name"] = "replaced-long-ago"
    store(cluster, [pod, gone], 0, method)
    store(cluster, [pod], 10, method)  # the other pod is no longer listed; its row stays for its series
    node = pod["spec"]["nodeName"]
    upsert_nodes(cluster, [f.node_info(node)], f.T0 + timedelta(minutes=10), method=method)
    upsert_nodes(cluster, [f.node_info(node, kernel="6.18.44-fc")], f.T0 + timedelta(minutes=11), method=method)
    assert [(c.container.pod.name, c.kind) for c in ContainerChange.objects.all()] == [("resized-pod", "kernel")]
