"""Inventory from real recorded Kubernetes objects: nodes, pods, containers, QoS and workloads.

Expected values were read by hand from the fixtures (and their SOURCE.md `kubectl get nodes -o wide` output), not
from this code's output.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from apps.collector import inventory
from apps.collector.inventory import InventoryError
from apps.telemetry.readings import NodeInfo, PodInfo

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CLUSTERS = ("k8s-1.20-minikube", "k8s-1.31-minikube", "k8s-1.33-minikube")


@cache
def _document(relative: str) -> Any:
    path = FIXTURES / relative
    if path.suffix == ".json":
        return json.loads(path.read_text())
    return yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506


def objects(relative: str) -> list[dict[str, Any]]:
    """A fresh deep copy of a fixture's objects, so a test may edit them."""
    return copy.deepcopy(cast(list[dict[str, Any]], inventory.list_items(_document(relative))))


def pods_of(relative: str) -> dict[str, PodInfo]:
    items, problems = inventory.pods_from_objects(objects(relative))
    assert problems == []
    return {pod.name: pod for pod in items}


def raw_pod(relative: str, name: str) -> dict[str, Any]:
    return next(pod for pod in objects(relative) if pod["metadata"]["name"] == name)


# ------------------------------------------------------------------------------------------------------------ nodes


@pytest.mark.parametrize(
    ("cluster", "cpus", "kernel", "kubelet", "runtime", "os_image"),
    [
        ("k8s-1.20-minikube", 5, "5.15.49-linuxkit", "v1.20.15", "containerd://1.6.20", "Ubuntu 20.04.5 LTS"),
        ("k8s-1.31-minikube", 10, "6.10.14-linuxkit", "v1.31.0", "containerd://1.7.27", "Ubuntu 22.04.5 LTS"),
        ("k8s-1.33-minikube", 10, "6.10.14-linuxkit", "v1.33.0", "containerd://1.7.27", "Ubuntu 22.04.5 LTS"),
    ],
)
def test_each_cluster_node_reports_its_cpus_kernel_and_versions(
    cluster: str, cpus: int, kernel: str, kubelet: str, runtime: str, os_image: str
) -> None:
    nodes, problems = inventory.nodes_from_objects(objects(f"clusters/{cluster}/nodes.yaml"))

    assert problems == []
    assert nodes == [
        NodeInfo(
            name=f"datagen-{cluster[4:8].replace('.', '-')}",
            capacity_mcpu=cpus * 1000,
            allocatable_mcpu=cpus * 1000,
            kernel_version=kernel,
            os_image=os_image,
            container_runtime=runtime,
            kubelet_version=kubelet,
        )
    ]


def test_a_node_with_an_unreadable_cpu_capacity_is_skipped_and_named_while_the_others_are_kept() -> None:
    good = objects("clusters/k8s-1.33-minikube/nodes.yaml")[0]
    broken = copy.deepcopy(good)
    broken["metadata"]["name"] = "broken-node"
    broken["status"]["capacity"]["cpu"] = "ten"

    nodes, problems = inventory.nodes_from_objects([broken, good])

    assert [node.name for node in nodes] == ["datagen-1-33"]
    assert len(problems) == 1
    assert "node broken-node" in problems[0]
    assert "'ten'" in problems[0]


def test_a_node_without_capacity_has_unknown_cpus_not_zero() -> None:
    node = objects("clusters/k8s-1.33-minikube/nodes.yaml")[0]
    del node["status"]["capacity"]
    del node["status"]["allocatable"]

    info = inventory.node_from_object(node)

    assert info.capacity_mcpu is None
    assert info.allocatable_mcpu is None


def test_the_kubelet_endpoint_is_the_internal_ip_and_the_port_the_node_reports() -> None:
    node = objects("clusters/k8s-1.33-minikube/nodes.yaml")[0]

    assert inventory.kubelet_endpoint(node) == ("192.168.67.2", 10250)

    node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] = 10255
    node["status"]["addresses"] = [{"type": "Hostname", "address": "datagen-1-33"}]
    assert inventory.kubelet_endpoint(node) == ("datagen-1-33", 10255)

    node["status"]["addresses"] = []
    assert inventory.kubelet_endpoint(node) is None


def test_the_kubelet_config_sets_the_cpu_manager_policy() -> None:
    node = inventory.node_from_object(objects("clusters/k8s-1.33-minikube/nodes.yaml")[0])

    assert inventory.node_with_kubelet_config(node, {"cpuManagerPolicy": "static"}).cpu_manager_policy == "static"
    assert inventory.node_with_kubelet_config(node, {"cgroupDriver": "systemd"}).cpu_manager_policy == ""


# ------------------------------------------------------------------------------------------------------------- pods


@pytest.mark.parametrize(
    ("cluster", "count"), [("k8s-1.20-minikube", 28), ("k8s-1.31-minikube", 24), ("k8s-1.33-minikube", 24)]
)
def test_every_pod_of_every_cluster_is_read(cluster: str, count: int) -> None:
    pods, problems = inventory.pods_from_objects(objects(f"clusters/{cluster}/pods.yaml"))

    assert problems == []
    assert len(pods) == count
    unscheduled = {pod.name for pod in pods if pod.node == ""}
    assert unscheduled == {"e2e-container-pending"}  # Pending, never scheduled: no spec.nodeName
    assert {pod.node for pod in pods} - {""} == {f"datagen-{cluster[4:8].replace('.', '-')}"}


def test_a_coredns_pod_belongs_to_the_coredns_deployment_with_a_100m_request_and_no_cpu_limit() -> None:
    pod = pods_of("clusters/k8s-1.33-minikube/pods.yaml")["coredns-674b8bbfcf-lj26m"]

    assert (pod.namespace, pod.workload_kind, pod.workload_name, pod.qos_class) == (
        "kube-system",
        "Deployment",
        "coredns",
        "Burstable",
    )
    assert pod.uid == "323e9f63-81d7-42ba-b135-bad3e40a7bc7"
    [container] = pod.containers
    assert container.name == "coredns"
    assert (container.request_mcpu, container.limit_mcpu) == (100, None)
    assert container.container_id == "f6d4912bc628f976ffb03ffc8f993d7c60158cfe967454646c24c4229e5229c7"


def test_kube_proxy_belongs_to_its_daemonset_and_without_resources_is_best_effort() -> None:
    pod = pods_of("clusters/k8s-1.31-minikube/pods.yaml")["kube-proxy-dhhlf"]

    assert (pod.workload_kind, pod.workload_name, pod.qos_class) == ("DaemonSet", "kube-proxy", "BestEffort")
    assert [(c.request_mcpu, c.limit_mcpu) for c in pod.containers] == [(None, None)]


def test_kindnet_with_equal_requests_and_limits_is_guaranteed() -> None:
    pod = pods_of("clusters/k8s-1.20-minikube/pods.yaml")["kindnet-6zlwv"]

    assert pod.qos_class == "Guaranteed"
    assert [(c.name, c.request_mcpu, c.limit_mcpu) for c in pod.containers] == [("kindnet-cni", 100, 100)]


def test_the_hpa_example_requests_200m_and_is_limited_to_500m() -> None:
    pod = pods_of("clusters/k8s-1.33-minikube/pods.yaml")["e2e-hpa-87b6cf96-2rdfp"]

    assert (pod.workload_kind, pod.workload_name) == ("Deployment", "e2e-hpa")
    assert [(c.request_mcpu, c.limit_mcpu) for c in pod.containers] == [(200, 500)]


def test_statefulset_pods_belong_to_their_statefulset() -> None:
    pods = pods_of("clusters/k8s-1.31-minikube/pods.yaml")

    assert {(pods[n].workload_kind, pods[n].workload_name) for n in ("e2e-statefulset-0", "e2e-statefulset-1")} == {
        ("StatefulSet", "e2e-statefulset")
    }
    assert [(c.request_mcpu, c.limit_mcpu) for c in pods["e2e-statefulset-0"].containers] == [(40, 80)]


def test_control_plane_static_pods_are_one_workload_per_component_known_by_their_cgroup_uid() -> None:
    pod = pods_of("clusters/k8s-1.33-minikube/pods.yaml")["etcd-datagen-1-33"]
    scrape = (FIXTURES / "clusters/k8s-1.33-minikube/cadvisor.txt").read_text()

    assert (pod.workload_kind, pod.workload_name) == ("StaticPod", "etcd")
    # the node knows the pod by the kubelet's config hash: that is the uid in the cgroup path cAdvisor reports
    assert pod.uid == "b10ec186d39d4240d66dfcf41206f775"
    assert f'id="/kubepods/burstable/pod{pod.uid}"' in scrape
    assert "63858221-c30b-499c-99e2-1270890d8fb1" not in scrape  # the mirror object's own API uid


def test_the_kubelets_own_static_pods_without_owner_references_are_static_pods_too() -> None:
    pods = pods_of("clusters/gke-2018-cos-docker/kubelet-pods.json")

    assert (
        pods["kube-proxy-gke-haissam-default-pool-be5066f1-wnvn"].workload_kind,
        pods["static-web-chk"].workload_kind,
    ) == (
        "StaticPod",
        "StaticPod",
    )
    assert pods["kube-proxy-gke-haissam-default-pool-be5066f1-wnvn"].workload_name == "kube-proxy"
    assert pods["static-web-chk"].workload_name == "static-web"  # its node is called "chk"


def test_cronjob_pods_belong_to_the_cronjob_in_both_job_naming_schemes() -> None:
    # 1.20's controller named Jobs <cronjob>-<unix seconds>, 1.21+ use <cronjob>-<unix minutes>
    old = pods_of("clusters/k8s-1.20-minikube/pods.yaml")["e2e-cronjob-1685500200-gc6ss"]
    new = pods_of("clusters/k8s-1.33-minikube/pods.yaml")["e2e-cronjob-29371389-6qx6l"]

    assert (old.workload_kind, old.workload_name) == ("CronJob", "e2e-cronjob")
    assert (new.workload_kind, new.workload_name) == ("CronJob", "e2e-cronjob")
    assert [(c.request_mcpu, c.limit_mcpu) for c in new.containers] == [(40, 80)]
    assert [(c.request_mcpu, c.limit_mcpu) for c in old.containers] == [(400, 800)]


def test_a_plain_job_stays_a_job() -> None:
    pod = pods_of("clusters/k8s-1.33-minikube/pods.yaml")["e2e-failjob-4hk6r"]

    assert (pod.workload_kind, pod.workload_name) == ("Job", "e2e-failjob")


def test_a_job_named_with_a_date_that_is_not_its_start_time_stays_a_job() -> None:
    pod = raw_pod("clusters/k8s-1.33-minikube/pods.yaml", "e2e-failjob-4hk6r")
    pod["metadata"]["ownerReferences"][0]["name"] = "db-migrate-20240101"  # created in 2025, "20240101" is not then

    assert inventory.workload_of(pod) == ("Job", "db-migrate-20240101")


def test_a_known_job_owner_wins_over_the_name_rule() -> None:
    pod = raw_pod("clusters/k8s-1.33-minikube/pods.yaml", "e2e-cronjob-29371389-6qx6l")

    jobs = {("scraper", "e2e-cronjob-29371389"): ("CronJob", "pi-every-minute")}
    assert inventory.workload_of(pod, jobs=jobs) == ("CronJob", "pi-every-minute")
    assert inventory.workload_of(pod, jobs={("scraper", "e2e-cronjob-29371389"): ("", "")}) == (
        "Job",
        "e2e-cronjob-29371389",
    )


def test_a_known_replicaset_owner_wins_over_the_template_hash_rule() -> None:
    pod = raw_pod("clusters/k8s-1.33-minikube/pods.yaml", "coredns-674b8bbfcf-lj26m")

    rollouts = {("kube-system", "coredns-674b8bbfcf"): ("Rollout", "coredns-canary")}
    assert inventory.workload_of(pod, replicasets=rollouts) == ("Rollout", "coredns-canary")
    standalone = {("kube-system", "coredns-674b8bbfcf"): ("", "")}
    assert inventory.workload_of(pod, replicasets=standalone) == ("ReplicaSet", "coredns-674b8bbfcf")


def test_a_replicaset_pod_without_a_template_hash_belongs_to_the_replicaset() -> None:
    pod = raw_pod("clusters/k8s-1.33-minikube/pods.yaml", "coredns-674b8bbfcf-lj26m")
    del pod["metadata"]["labels"]["pod-template-hash"]

    assert inventory.workload_of(pod) == ("ReplicaSet", "coredns-674b8bbfcf")


def test_a_2018_deployment_is_found_through_the_encoded_template_hash() -> None:
    # Kubernetes < 1.11: label pod-template-hash=704167236, ReplicaSet demo-app-success-c485bc67b
    pod = pods_of("clusters/gke-2018-cos-docker/kubelet-pods.json")["demo-app-success-c485bc67b-klj45"]

    assert (pod.workload_kind, pod.workload_name) == ("Deployment", "demo-app-success")


def test_a_bare_pod_has_no_workload_kind_and_is_its_own_workload() -> None:
    pod = pods_of("clusters/k8s-1.33-minikube/pods.yaml")["storage-provisioner"]

    assert (pod.workload_kind, pod.workload_name) == ("", "storage-provisioner")


def test_restart_counts_and_container_ids_come_from_the_container_statuses() -> None:
    pods = pods_of("clusters/k8s-1.20-minikube/pods.yaml")

    [creating] = pods["e2e-container-creating"].containers
    assert (creating.restarts, creating.request_mcpu, creating.limit_mcpu) == (5, 5, 5)
    assert creating.container_id == "30fa7f469e44a9fd932711b57d34a0eb0902e16feb6b435aaa8f964d340d3e95"
    [pending] = pods["e2e-container-pending"].containers  # not started: no status yet
    assert (pending.container_id, pending.restarts) == ("", 0)


@pytest.mark.parametrize("prefix", ["containerd://", "docker://", "cri-o://", ""])
def test_container_ids_lose_their_runtime_prefix(prefix: str) -> None:
    assert inventory.container_id_without_runtime(f"{prefix}6d8c6a05731b") == "6d8c6a05731b"


# ---------------------------------------------------------------------------------------------------------- QoS class


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_the_computed_qos_class_matches_what_the_api_server_recorded_for_every_pod(cluster: str) -> None:
    for pod in objects(f"clusters/{cluster}/pods.yaml"):
        recorded = pod["status"].pop("qosClass")

        assert inventory.pod_from_object(pod).qos_class == recorded, pod["metadata"]["name"]


def test_kubelet_pods_without_a_recorded_qos_class_get_one_computed() -> None:
    pods = pods_of("clusters/gke-2018-cos-docker/kubelet-pods.json")

    assert pods["kube-proxy-gke-haissam-default-pool-be5066f1-wnvn"].qos_class == "Burstable"  # requests cpu only
    assert pods["static-web-chk"].qos_class == "BestEffort"  # no resources at all


def test_a_memory_limit_missing_from_one_container_makes_the_pod_burstable() -> None:
    pod = raw_pod("clusters/k8s-1.33-minikube/pods.yaml", "kindnet-xdhkr")
    del pod["status"]["qosClass"]
    del pod["spec"]["containers"][0]["resources"]["limits"]["memory"]

    assert inventory.pod_from_object(pod).qos_class == "Burstable"


def test_an_init_container_with_a_request_makes_an_otherwise_best_effort_pod_burstable() -> None:
    pod = raw_pod("clusters/k8s-1.33-minikube/pods.yaml", "kube-proxy-xgf96")
    del pod["status"]["qosClass"]
    pod["spec"]["initContainers"] = [{"name": "setup", "image": "busybox", "resources": {"requests": {"cpu": "10m"}}}]

    assert inventory.pod_from_object(pod).qos_class == "Burstable"


def test_limits_alone_make_a_guaranteed_pod_because_requests_default_to_limits() -> None:
    pod = raw_pod("clusters/k8s-1.33-minikube/pods.yaml", "kindnet-xdhkr")
    del pod["status"]["qosClass"]
    del pod["spec"]["containers"][0]["resources"]["requests"]

    info = inventory.pod_from_object(pod)

    assert info.qos_class == "Guaranteed"
    assert [(c.request_mcpu, c.limit_mcpu) for c in info.containers] == [(100, 100)]


def test_a_bad_memory_quantity_is_reported_when_the_qos_class_must_be_computed() -> None:
    pod = raw_pod("clusters/k8s-1.33-minikube/pods.yaml", "kindnet-xdhkr")
    del pod["status"]["qosClass"]
    pod["spec"]["containers"][0]["resources"]["limits"]["memory"] = "50 megs"

    with pytest.raises(InventoryError, match="'50 megs'"):
        inventory.pod_from_object(pod)


# ------------------------------------------------------------------------------------------ resources from the kubelet


def test_a_pod_resized_in_place_reports_the_resources_the_kubelet_applied() -> None:
    # spec asks 500m/500m, the status says the container runs with 200m/200m: the quota follows the status
    pod = pods_of("kubelet/pods-in-place-resize.json")["resized-pod"]

    assert pod.qos_class == "Guaranteed"
    assert [(c.name, c.request_mcpu, c.limit_mcpu, c.container_id) for c in pod.containers] == [
        ("resized-container", 200, 200, "resized-container-id")
    ]


def test_requests_and_limits_of_a_statefulset_container() -> None:
    pod = pods_of("kubelet/pods-requests-limits.json")["cassandra-0"]

    assert (pod.workload_kind, pod.workload_name, pod.qos_class) == ("StatefulSet", "cassandra", "Guaranteed")
    [container] = pod.containers
    assert (container.request_mcpu, container.limit_mcpu) == (500, 500)
    assert container.container_id == "6d8c6a05731b52195998c438fdca271b967b171f6c894f11ba59aa2f4deff10c"


@pytest.mark.parametrize(
    ("drop", "expected"),
    [
        ("requests", (500, 500)),  # a limit alone: the request defaults to it
        ("limits", (500, None)),  # a request alone: no quota
        ("both", (None, None)),
    ],
)
def test_containers_with_and_without_requests_and_limits(drop: str, expected: tuple[int | None, int | None]) -> None:
    pod = raw_pod("kubelet/pods-requests-limits.json", "cassandra-0")
    resources = pod["spec"]["containers"][0]["resources"]
    for key in ("requests", "limits") if drop == "both" else (drop,):
        del resources[key]

    [container] = inventory.pod_from_object(pod).containers

    assert (container.request_mcpu, container.limit_mcpu) == expected


def test_a_cpu_limit_of_zero_means_no_limit() -> None:
    pod = raw_pod("clusters/k8s-1.33-minikube/pods.yaml", "e2e-hpa-87b6cf96-2rdfp")
    pod["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "0"
    pod["status"]["containerStatuses"][0]["resources"]["limits"]["cpu"] = "0"

    [container] = inventory.pod_from_object(pod).containers

    assert (container.request_mcpu, container.limit_mcpu) == (200, None)


def test_ordinary_init_containers_are_not_running_containers() -> None:
    pod = pods_of("clusters/gke-2018-cos-docker/kubelet-pods.json")["fluentd-gcp-v2.0.10-9q9t4"]

    assert [c.name for c in pod.containers] == ["fluentd-gcp", "prometheus-to-sd-exporter"]


def test_sidecar_init_containers_run_for_the_pods_life_and_are_counted() -> None:
    pod = raw_pod("clusters/gke-2018-cos-docker/kubelet-pods.json", "fluentd-gcp-v2.0.10-9q9t4")
    pod["spec"]["initContainers"][0]["restartPolicy"] = "Always"

    containers = inventory.pod_from_object(pod).containers

    assert [c.name for c in containers] == ["init", "fluentd-gcp", "prometheus-to-sd-exporter"]
    assert (containers[0].request_mcpu, containers[0].limit_mcpu) == (50, None)
    assert containers[0].container_id == "1d1f139dc1c9d49010512744df34740abcfaadf9930d3afd85afbf5fccfadbd6"


# --------------------------------------------------------------------------------------------------- malformed input


def test_a_pod_with_an_unreadable_cpu_quantity_is_skipped_and_named_while_the_rest_are_kept() -> None:
    pods = objects("clusters/k8s-1.33-minikube/pods.yaml")
    coredns = next(p for p in pods if p["metadata"]["name"] == "coredns-674b8bbfcf-lj26m")
    coredns["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"] = "lots"

    items, problems = inventory.pods_from_objects(pods)

    assert len(items) == 23
    assert "coredns-674b8bbfcf-lj26m" not in {pod.name for pod in items}
    assert len(problems) == 1
    assert "pod kube-system/coredns-674b8bbfcf-lj26m container coredns" in problems[0]
    assert "'lots'" in problems[0]


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda pod: pod["metadata"].pop("name"), "without metadata.name"),
        (lambda pod: pod["metadata"].pop("namespace"), "metadata.namespace is missing"),
        (lambda pod: pod["spec"].pop("containers"), "spec.containers is missing"),
        (lambda pod: pod["status"]["containerStatuses"][0].update(restartCount="twice"), "restartCount 'twice'"),
        (lambda pod: pod.update(spec="nonsense"), "spec is a str"),
    ],
)
def test_malformed_pods_are_reported_with_what_is_wrong(damage: Any, message: str) -> None:
    pods = objects("clusters/k8s-1.31-minikube/pods.yaml")
    damage(pods[0])

    items, problems = inventory.pods_from_objects(pods)

    assert len(items) == len(pods) - 1
    assert len(problems) == 1
    assert message in problems[0]


def test_lists_bare_lists_and_single_objects_are_all_accepted() -> None:
    document = _document("clusters/k8s-1.33-minikube/nodes.yaml")
    node = document["items"][0]

    assert inventory.list_items(document) == [node]
    assert inventory.list_items([node]) == [node]
    assert inventory.list_items(node) == [node]
    assert inventory.list_items({"kind": "PodList", "items": None}) == []


@pytest.mark.parametrize("document", ["pods", 42, {"apiVersion": "v1"}, {"items": "none"}, [1, 2]])
def test_documents_that_are_not_kubernetes_objects_are_refused(document: Any) -> None:
    with pytest.raises(InventoryError):
        inventory.list_items(document)
