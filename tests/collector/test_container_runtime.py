"""What the inventory keeps of a container's runtime: the spec's image and its CPU-related env vars (literal values
of the known names only, bounded), from real recorded pod lists through the real import and upsert."""

from __future__ import annotations

import copy
import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command
from django.utils import timezone

from apps.clusters.info import CUT_MARK, MAX_CPU_ENV_CHARS
from apps.clusters.inventory import upsert_pods
from apps.clusters.models import Container
from apps.collector.inventory import cpu_env, pods_from_objects
from tests import factories

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PSI = FIXTURES / "clusters" / "k8s-1.34-minikube-psi"
CASSANDRA = FIXTURES / "kubelet" / "pods-requests-limits.json"


def kubelet_pods(path: Path) -> list[dict[str, Any]]:
    return copy.deepcopy(json.loads(path.read_text())["items"])


def store(objects: list[dict[str, Any]], problems: list[str] | None = None) -> None:
    pods, pod_problems = pods_from_objects(objects)
    assert pod_problems == []
    upsert_pods(factories.cluster(), pods, timezone.now(), {}, problems)


def test_the_real_dump_stores_each_containers_image_as_its_spec_writes_it():
    node = yaml.safe_load((PSI / "nodes.yaml").read_text())["items"][0]["metadata"]["name"]
    call_command(
        "import_dump", "--cluster", "mk", "--nodes", str(PSI / "nodes.yaml"), "--pods", str(PSI / "pods.yaml"),
        "--metrics", f"{node}={PSI / 'cadvisor.txt'}", stdout=StringIO(),
    )  # fmt: skip
    images = {(c.pod.name, c.name): c.image for c in Container.objects.select_related("pod")}
    # Read by hand from pods.yaml: a tag, a tag with a digest, an image with neither.
    assert images[("kube-proxy-hlzvp", "kube-proxy")] == "registry.k8s.io/kube-proxy:v1.34.0"
    assert images[("metrics-server-85b7d694d7-l2g2v", "metrics-server")] == (
        "registry.k8s.io/metrics-server/metrics-server:v0.8.0"
        "@sha256:89258156d0e9af60403eafd44da9676fd66f600c7934d468ccc17e42b199aee2"
    )
    assert images[("e2e-scraper-865fc9f866-hvxr2", "e2e-scraper")] == "alpine"
    assert all(images.values())
    # Its env vars (HOST_IP from the downward API, POD_SUBNET, NODE_NAME) set no CPU count: none is kept.
    assert [env for env in Container.objects.values_list("cpu_env", flat=True) if env != {}] == []


def test_a_real_kubelet_pod_list_keeps_only_literal_cpu_env_values_of_the_known_names():
    objects = kubelet_pods(CASSANDRA)
    spec = objects[0]["spec"]["containers"][0]
    # The fixture's own env (MAX_HEAP_SIZE, CASSANDRA_SEEDS, POD_IP from valueFrom) plus CPU knobs set three ways.
    spec["env"] += [
        {"name": "JAVA_TOOL_OPTIONS", "value": "-Xss1m -XX:ActiveProcessorCount=4"},
        {"name": "GOMAXPROCS", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
        {"name": "UV_THREADPOOL_SIZE", "value": "8"},
        {"name": "UV_THREADPOOL_SIZE", "value": "16"},  # set twice: the last one holds, as in the kubelet
        {"name": "PYTHON_CPU_COUNT", "value": "4"},
        {"name": "PYTHON_CPU_COUNT", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},  # holds: unknown
    ]
    store(objects)

    container = Container.objects.get(name="cassandra")
    assert container.image == "gcr.io/google-samples/cassandra:v13"
    assert container.cpu_env == {"JAVA_TOOL_OPTIONS": "-Xss1m -XX:ActiveProcessorCount=4", "UV_THREADPOOL_SIZE": "16"}


def test_hostile_env_and_image_are_bounded_or_left_out_and_the_pod_is_still_stored():
    objects = kubelet_pods(CASSANDRA)
    spec = objects[0]["spec"]["containers"][0]
    huge = "-XX:ActiveProcessorCount=1 " + "x" * 1_000_000
    spec["env"] = [
        {"name": "JAVA_TOOL_OPTIONS", "value": huge},
        {"name": "GOMAXPROCS", "value": "2\x00\u202e\ud800"},
        {"name": "gomaxprocs", "value": "3"},  # env names are case-sensitive
        {"name": "GOMAXPROCS\n", "value": "4"},
        {"name": "DOTNET_PROCESSOR_COUNT", "value": {"nested": "object"}},
        {"name": "PYTHON_CPU_COUNT", "value": 4},
        {"name": ["UV_THREADPOOL_SIZE"], "value": "5"},
        {"name": "_JAVA_OPTIONS", "value": "-Xmx1g", "valueFrom": {"configMapKeyRef": {"name": "x", "key": "y"}}},
        "UV_THREADPOOL_SIZE=6",
        None,
    ]
    spec["image"] = "registry.example/" + "a" * 10_000
    problems: list[str] = []
    store(objects, problems)

    container = Container.objects.get(name="cassandra")
    assert set(container.cpu_env) == {"JAVA_TOOL_OPTIONS", "GOMAXPROCS"}
    assert len(container.cpu_env["JAVA_TOOL_OPTIONS"]) == MAX_CPU_ENV_CHARS + len(CUT_MARK)
    assert container.cpu_env["JAVA_TOOL_OPTIONS"].endswith(CUT_MARK)
    assert container.cpu_env["GOMAXPROCS"] == "2\\x00\\u202e\\ud800"  # escaped: storable and printable
    assert container.image == ""  # too long for its column: stored as unknown, and said
    assert any("image" in p and "stored as unknown" in p for p in problems), problems


@pytest.mark.parametrize("env", [None, "GOMAXPROCS=2", {"GOMAXPROCS": "2"}, 7, [[1, 2]]])
def test_an_env_that_is_not_a_list_of_entries_keeps_nothing(env: Any):
    assert cpu_env(env) == ()
