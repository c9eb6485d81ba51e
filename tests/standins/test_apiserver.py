"""The API-server stand-in itself: what it serves must look like a real API server's answers, also when it
replicates the recorded cluster into many nodes for scale runs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from apps.collector.sources.kubernetes.client import KubernetesSource
from standins.apiserver import ApiServerStandin

CLUSTER = Path(__file__).resolve().parents[1] / "fixtures" / "clusters" / "k8s-1.33-minikube"


def get(server: ApiServerStandin, path: str, token: str | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(server.url + path)
    request.add_header("Authorization", f"Bearer {server.token if token is None else token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            body = answer.read()
            kind = answer.headers.get("Content-Type", "")
            return answer.status, json.loads(body) if kind.startswith("application/json") else body
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_a_replicated_cluster_has_distinct_nodes_pods_uids_and_container_ids(tmp_path: Path) -> None:
    with ApiServerStandin(CLUSTER, replicas=3) as server:
        source = KubernetesSource(kubeconfig=str(server.write_kubeconfig(tmp_path / "kc")), skip_finished_pods=False)
        nodes, _ = source.list_nodes()
        pods, problems = source.list_pods()

    assert problems == []
    assert [node.name for node in nodes] == ["datagen-1-33-00000", "datagen-1-33-00001", "datagen-1-33-00002"]
    assert len(pods) == 3 * 24
    assert len({(pod.namespace, pod.name) for pod in pods}) == len(pods)
    assert len({pod.uid for pod in pods}) == len(pods)
    container_ids = [c.container_id for pod in pods for c in pod.containers if c.container_id]
    assert len(set(container_ids)) == len(container_ids) == 3 * 23  # the never-started pod has no container id
    # every node runs a copy of every pod, and the copies keep their workloads
    assert Counter(pod.node for pod in pods) == {"": 3, **{node.name: 23 for node in nodes}}
    etcds = [pod for pod in pods if pod.workload_kind == "StaticPod" and pod.workload_name == "etcd"]
    assert sorted(pod.name for pod in etcds) == [f"etcd-{node.name}" for node in nodes]
    assert len([pod for pod in pods if (pod.workload_kind, pod.workload_name) == ("Deployment", "coredns")]) == 3


def test_each_replica_scrape_names_that_nodes_pods_uids_and_containers(tmp_path: Path) -> None:
    recorded = (CLUSTER / "cadvisor.txt").read_text()
    with ApiServerStandin(CLUSTER, replicas=2) as server:
        source = KubernetesSource(kubeconfig=str(server.write_kubeconfig(tmp_path / "kc")))
        pods, _ = source.list_pods()
        node = server.node_names[1]
        scrape = source.scrape_cadvisor(node).decode()

    assert scrape.count("\n") == recorded.count("\n")
    assert scrape != recorded
    coredns = next(pod for pod in pods if pod.node == node and pod.workload_name == "coredns")
    # the same number of series as the recorded coredns pod, under the replica's names and ids
    assert scrape.count(f'pod="{coredns.name}"') == recorded.count('pod="coredns-674b8bbfcf-lj26m"') > 0
    assert f"/kubepods/burstable/pod{coredns.uid}/{coredns.containers[0].container_id}" in scrape
    etcd = next(pod for pod in pods if pod.node == node and pod.workload_name == "etcd")
    assert f"/kubepods/burstable/pod{etcd.uid}" in scrape  # the static pod's dashless cgroup uid follows too
    recorded_pods = yaml.safe_load((CLUSTER / "pods.yaml").read_text())["items"]
    for pod in recorded_pods:  # nothing of the recorded pods is left over
        metadata = pod["metadata"]
        originals = [
            f'pod="{metadata["name"]}"',
            metadata["uid"],
            metadata.get("annotations", {}).get("kubernetes.io/config.mirror"),
        ]
        originals += [
            c["containerID"].split("://")[1] for c in pod["status"].get("containerStatuses", []) if "containerID" in c
        ]
        assert not [token for token in originals if token and token in scrape], metadata["name"]


def test_five_thousand_nodes_are_listed_in_pages(tmp_path: Path) -> None:
    with ApiServerStandin(CLUSTER, replicas=5000) as server:
        source = KubernetesSource(kubeconfig=str(server.write_kubeconfig(tmp_path / "kc")), page_size=500)
        nodes, problems = source.list_nodes()
        pages = server.requests_to("/api/v1/nodes")

    assert problems == []
    assert len({node.name for node in nodes}) == 5000
    assert len(pages) == 10


def test_a_list_page_says_how_many_items_remain(tmp_path: Path) -> None:
    with ApiServerStandin(CLUSTER) as server:
        status, page = get(server, "/api/v1/pods?limit=10")
        _, last = get(server, f"/api/v1/pods?limit=10&continue={page['metadata']['continue']}")
        _, rest = get(server, f"/api/v1/pods?limit=10&continue={last['metadata']['continue']}")

    assert status == 200
    assert page["kind"] == "PodList"
    assert (len(page["items"]), page["metadata"]["remainingItemCount"]) == (10, 14)
    assert (len(rest["items"]), "continue" in rest["metadata"]) == (4, False)


@pytest.mark.parametrize(
    ("path", "status", "reason"),
    [
        ("/api/v1/pods?fieldSelector=spec.schedulerName%3Ddefault", 400, "BadRequest"),
        ("/api/v1/pods?limit=5&continue=bm90LWEtdG9rZW4=", 400, "BadRequest"),
        ("/api/v1/nodes/no-such-node", 404, "NotFound"),
        ("/apis/apps/v1/deployments", 404, "NotFound"),
    ],
)
def test_bad_requests_get_a_kubernetes_status_answer(path: str, status: int, reason: str) -> None:
    with ApiServerStandin(CLUSTER) as server:
        code, body = get(server, path)

    assert code == status
    assert (body["kind"], body["reason"], body["code"]) == ("Status", reason, status)


def test_requests_without_the_token_are_unauthorized() -> None:
    with ApiServerStandin(CLUSTER) as server:
        code, body = get(server, "/api/v1/nodes", token="guess")
        recorded = server.requests

    assert (code, body["reason"]) == (401, "Unauthorized")
    assert recorded[0].authorization == "Bearer guess"


def test_the_version_is_the_recorded_kubelets() -> None:
    with ApiServerStandin(CLUSTER) as server:
        _, version = get(server, "/version")

    assert (version["major"], version["minor"], version["gitVersion"]) == ("1", "33", "v1.33.0")


def test_field_selectors_filter_pods_by_phase() -> None:
    with ApiServerStandin(CLUSTER) as server:
        _, failed = get(server, "/api/v1/pods?fieldSelector=status.phase%3DFailed")

    names = [pod["metadata"]["name"] for pod in failed["items"]]
    assert len(names) == 4
    assert all(re.fullmatch(r"e2e-failjob-\w{5}", name) for name in names)


def test_the_standin_refuses_more_kubelet_servers_than_it_can_run() -> None:
    with pytest.raises(ValueError, match="one server per node"):
        ApiServerStandin(CLUSTER, replicas=1000, kubelet_servers=True)


def test_the_source_inventory_and_standin_modules_import_no_django() -> None:
    # Django services call these modules; the benchmark and manual trials run them without Django settings.
    code = (
        "import sys\n"
        "import apps.collector.inventory, apps.collector.sources.kubernetes.client, standins.apiserver\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'celery', 'rest_framework')))\n"
    )
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)

    assert result.stdout.strip() == "[]"
