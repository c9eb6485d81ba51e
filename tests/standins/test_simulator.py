"""The simulated cluster: deterministic, read by the real Kubernetes client, scrapes that parse like real ones, counters
that advance (and reset on restarts), faulty nodes, and a whole collection cycle against it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from apps.advisor.kernel import kernel_verdict
from apps.collector import inventory
from apps.collector.cadvisor import parse_cadvisor
from apps.collector.sources.base import NodeScrapeError
from apps.collector.sources.kubernetes.client import KubernetesSource
from standins.simulator import SimulatedCluster, SimulatorConfig, SimulatorServer, go_float
from tests.collector.test_cadvisor import reference_readings

ROOT = Path(__file__).resolve().parents[2]
RECORDED_SCRAPE = ROOT / "tests" / "fixtures" / "clusters" / "k8s-1.33-minikube" / "cadvisor.txt"
START_S = 1_767_225_600.0  # 2026-01-01T00:00:00Z: t0 of every simulated cluster here
NO_FAULTS = {"slow_fraction": 0.0, "failing_fraction": 0.0, "hanging_fraction": 0.0}


def cluster(**overrides: Any) -> SimulatedCluster:
    settings: dict[str, Any] = {"nodes": 20, "seed": 7, "start_s": START_S, **NO_FAULTS, **overrides}
    return SimulatedCluster(SimulatorConfig(**settings))


class Clock:
    """A wall clock the test moves by hand."""

    def __init__(self, now_s: float) -> None:
        self.now_s = now_s

    def __call__(self) -> float:
        return self.now_s


def get(server: SimulatorServer, path: str, token: str | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(server.url + path)
    request.add_header("Authorization", f"Bearer {server.token if token is None else token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def cgroup_bytes(body: bytes) -> dict[str, float]:
    """Bytes of sample lines per cgroup, by kind (container, pod-level, sandbox, node-level), read from the text."""
    totals: Counter[str] = Counter()
    ids: dict[str, set[bytes]] = {}
    for line in body.split(b"\n"):
        if not line or line.startswith(b"#"):
            continue
        labels = dict(re.findall(rb'([a-z_]+)="([^"]*)"', line.split(b"}")[0]))
        if b"id" not in labels:  # machine_* and version lines belong to no cgroup
            continue
        if not labels.get(b"pod"):
            kind = "node"
        elif labels.get(b"container"):
            kind = "container"
        elif labels.get(b"image"):
            kind = "sandbox"
        else:
            kind = "pod"
        totals[kind] += len(line) + 1
        ids.setdefault(kind, set()).add(labels[b"id"])
    return {kind: totals[kind] / len(ids[kind]) for kind in totals}


# ------------------------------------------------------------------------------------------------ determinism


def test_the_same_seed_gives_the_same_objects_and_scrapes_and_another_seed_different_ones() -> None:
    one, same, other = cluster(), cluster(), cluster(seed=8)
    at = START_S + 5000

    assert one.scrape(3, at) == same.scrape(3, at)
    assert one.pod_object(3, 7, at) == same.pod_object(3, 7, at)
    assert one.node_object(3) == same.node_object(3)
    assert one.scrape(3, at) != other.scrape(3, at)
    assert one.pod_object(3, 7, at)["metadata"]["uid"] != other.pod_object(3, 7, at)["metadata"]["uid"]


def test_counter_trajectories_depend_on_the_seed_and_the_instant_only() -> None:
    # A simulator built later (another process, another run) serves the same bytes for the same instant.
    first = cluster().scrape(11, START_S + 7200)
    time.sleep(0.01)
    assert cluster().scrape(11, START_S + 7200) == first
    assert cluster().scrape(11, START_S + 7260) != first


# -------------------------------------------------------------------------------------------- objects and lists


def test_the_kubernetes_source_lists_every_node_and_pod_in_pages(tmp_path: Path) -> None:
    sim = cluster(nodes=12)
    with SimulatorServer(sim, clock=Clock(START_S + 3600)) as server:
        source = KubernetesSource(kubeconfig=str(server.write_kubeconfig(tmp_path / "kc")), page_size=50)
        nodes, node_problems = source.list_nodes()
        pods, pod_problems = source.list_pods()
        pages = server.counters.list_pages
        scrape = source.scrape_cadvisor(nodes[4].name)

    assert node_problems == pod_problems == []
    assert [node.name for node in nodes] == sim.node_names
    assert len(pods) == 12 * 30
    assert pages == 1 + 8  # one page of nodes, 360 pods in pages of 50
    assert len({(pod.namespace, pod.name) for pod in pods}) == len({pod.uid for pod in pods}) == 360
    assert Counter(pod.node for pod in pods) == {node.name: 30 for node in nodes}
    assert all(len(pod.containers) == 2 for pod in pods)
    # Container ids in the list are the ones the node's cgroups carry.
    on_node = [pod for pod in pods if pod.node == nodes[4].name]
    for pod in on_node:
        for container in pod.containers:
            assert f"/pod{pod.uid}/{container.container_id}".encode() in scrape


def test_pods_are_shaped_like_real_ones_owners_qos_and_resources() -> None:
    sim = cluster(nodes=60)
    objects = [sim.pod_object(node, slot, START_S) for node in range(60) for slot in range(30)]
    pods, problems = inventory.pods_from_objects(objects)

    assert problems == []
    kinds = Counter(pod.workload_kind for pod in pods)
    assert set(kinds) == {"DaemonSet", "Deployment", "StatefulSet", "CronJob", ""}
    assert kinds["DaemonSet"] == 3 * 60  # three DaemonSets, one pod on every node
    # The QoS class the objects state is the one Kubernetes computes from their resources.
    assert all(inventory.qos_class(obj["spec"]) == obj["status"]["qosClass"] for obj in objects)
    assert {pod.qos_class for pod in pods} == {"Guaranteed", "Burstable", "BestEffort"}
    containers = [c for pod in pods for c in pod.containers]
    assert any(c.limit_mcpu is None and c.request_mcpu for c in containers)  # a request without a CPU limit
    assert any(c.request_mcpu is None for c in containers)  # BestEffort
    deployment = next(obj for obj in objects if obj["metadata"].get("labels", {}).get("pod-template-hash"))
    owner = deployment["metadata"]["ownerReferences"][0]
    assert owner["kind"] == "ReplicaSet"
    assert owner["name"].endswith("-" + deployment["metadata"]["labels"]["pod-template-hash"])


def test_nodes_carry_a_kernel_mix_with_affected_and_fixed_kernels() -> None:
    sim = cluster(nodes=600)
    kernels = Counter(sim.node_object(node)["status"]["nodeInfo"]["kernelVersion"] for node in range(0, 600, 10))
    verdicts = {kernel_verdict(kernel).verdict for kernel in kernels}

    assert {"4.14.133-113.105.amzn2.x86_64", "4.19.76"} <= set(kernels)
    assert {"affected", "fixed"} <= verdicts
    node = inventory.node_from_object(sim.node_object(5))
    assert node.capacity_mcpu is not None and node.allocatable_mcpu is not None
    assert 0 < node.allocatable_mcpu < node.capacity_mcpu


def test_an_expired_continue_token_answers_410_and_a_foreign_one_400() -> None:
    clock = Clock(START_S)
    with SimulatorServer(cluster(nodes=4), clock=clock) as server:
        status, first = get(server, "/api/v1/pods?limit=10")
        token = first["metadata"]["continue"]
        _, second = get(server, f"/api/v1/pods?limit=10&continue={token}")
        clock.now_s += 301  # past the 300 s the real server keeps a list's revision
        expired, gone = get(server, f"/api/v1/pods?limit=10&continue={token}")
        foreign, bad = get(server, f"/api/v1/nodes?limit=1&continue={token}")
        unauthorized, _ = get(server, "/api/v1/nodes", token="guess")

    assert (status, len(first["items"]), first["metadata"]["remainingItemCount"]) == (200, 10, 110)
    assert second["items"][0]["metadata"]["name"] != first["items"][0]["metadata"]["name"]
    assert (expired, gone["reason"]) == (410, "Expired")
    assert (foreign, bad["reason"]) == (400, "BadRequest")
    assert unauthorized == 401


# -------------------------------------------------------------------------------------------------- the scrapes


def test_a_scrape_parses_the_same_with_prometheus_client_and_the_cadvisor_parser() -> None:
    body = cluster().scrape(2, START_S + 3600)
    scrape = parse_cadvisor(body, node="n2", default_ts=datetime.now(UTC))
    readings, pod_readings, has_cfs = reference_readings(body, node="n2")

    assert scrape.problems == []
    assert (scrape.readings, scrape.pod_readings, scrape.has_cfs_counters) == (readings, pod_readings, has_cfs)
    assert len(scrape.readings) == 60 and len(scrape.pod_readings) == 30
    # Every line is valid exposition text: prometheus-client reads one sample per non-comment line.
    samples = sum(len(family.samples) for family in text_string_to_metric_families(body.decode()))
    assert samples == sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    # Sample timestamps are milliseconds, at most one housekeeping interval old.
    assert all(START_S + 3590 <= r.ts.timestamp() <= START_S + 3600 for r in scrape.readings)


def test_each_cgroup_weighs_what_the_recorded_scrape_does_within_30_percent() -> None:
    recorded = cgroup_bytes(RECORDED_SCRAPE.read_bytes())
    simulated = cgroup_bytes(cluster().scrape(0, START_S + 3600))

    assert set(simulated) == {"container", "pod", "sandbox", "node"}
    for kind, size in recorded.items():
        assert 0.7 * size <= simulated[kind] <= 1.3 * size, (kind, size, simulated[kind])


def test_only_containers_with_a_cpu_limit_report_cfs_counters() -> None:
    sim = cluster()
    body = sim.scrape(1, START_S + 3600)
    scrape = parse_cadvisor(body, node="n1", default_ts=datetime.now(UTC))
    limits = {
        (spec.namespace, spec.name, c.name): c.limit_mcpu
        for spec in (sim.pod_spec(1, slot) for slot in range(30))
        for c in spec.containers
    }

    for reading in scrape.readings:
        limit = limits[(reading.namespace, reading.pod, reading.container)]
        assert (reading.periods_total is not None) == (limit is not None)
        if limit is not None:
            assert reading.quota_us == limit * 100  # 100 ms period: quota µs = mcpu × 100
            assert reading.periods_total is not None and reading.throttled_periods_total is not None
            assert reading.throttled_periods_total <= reading.periods_total
            # usage never exceeds what the quota allowed over the periods the cgroup ran
            assert reading.usage_seconds_total is not None
            assert reading.usage_seconds_total <= reading.periods_total * limit / 10_000 + 1e-6


def test_counters_advance_between_scrapes_and_restarting_containers_start_again() -> None:
    sim = cluster(restart_fraction=0.3, restart_every_s=600)
    t1 = START_S + 3 * 3600 + 30
    t2 = t1 + 300  # half the restart interval: a container that restarted in between counts 300 s less
    node = 6
    before = {(r.namespace, r.pod, r.container): r for r in parse_cadvisor(
        sim.scrape(node, t1), default_ts=datetime.now(UTC)).readings}  # fmt: skip
    after = {(r.namespace, r.pod, r.container): r for r in parse_cadvisor(
        sim.scrape(node, t2), default_ts=datetime.now(UTC)).readings}  # fmt: skip
    restarted: set[tuple[str, str, str]] = set()
    for slot in range(30):
        spec = sim.pod_spec(node, slot)
        for k, container in enumerate(spec.containers):
            key = (spec.namespace, spec.name, container.name)
            # The pod as the API showed it when each scrape's stats were taken.
            was, now = (
                sim.pod_object(node, slot, reading.ts.timestamp())["status"]["containerStatuses"][k]
                for reading in (before[key], after[key])
            )
            if now["restartCount"] != was["restartCount"]:
                assert now["restartCount"] == was["restartCount"] + 1
                assert now["containerID"] != was["containerID"]
                restarted.add(key)

    assert before.keys() == after.keys()
    assert 0 < len(restarted) < len(before)
    for key, old_reading in before.items():
        new_reading = after[key]
        assert new_reading.ts.timestamp() - old_reading.ts.timestamp() == pytest.approx(300)
        counters = ("usage_seconds_total", "periods_total", "throttled_periods_total", "throttled_seconds_total")
        for name in counters:
            old_value, new_value = getattr(old_reading, name), getattr(new_reading, name)
            if old_value is None:
                assert new_value is None
            elif key in restarted:
                assert new_value <= old_value, (key, name)
            else:
                assert new_value >= old_value, (key, name)
        assert new_reading.usage_seconds_total is not None and old_reading.usage_seconds_total is not None
        assert (new_reading.usage_seconds_total < old_reading.usage_seconds_total) == (key in restarted)


def test_go_float_writes_numbers_as_cadvisor_does() -> None:
    # Figures and their spelling taken from the recorded scrape.
    assert [go_float(v) for v in (1048576.0, 579811294.0, 35455520768.0, 4096, 0.365, 86.311536, 0)] == [
        "1.048576e+06", "5.79811294e+08", "3.5455520768e+10", "4096", "0.365", "86.311536", "0",
    ]  # fmt: skip
    assert go_float(1e-05) == "1e-05"
    assert go_float(1e6) == "1e+06"


# ---------------------------------------------------------------------------------------------------- faults


def test_failing_slow_and_hanging_nodes_are_chosen_by_seed_and_behave_as_configured(tmp_path: Path) -> None:
    faults = {"slow_fraction": 0.1, "failing_fraction": 0.1, "hanging_fraction": 0.05}
    sim = cluster(slow_delay_s=0.6, hang_s=30, **faults)
    chosen = Counter(sim.node_fault(node) for node in range(20))
    by_fault = {fault: sim.node_names[next(i for i in range(20) if sim.node_fault(i) == fault)] for fault in chosen}

    assert chosen == {"ok": 15, "slow": 2, "failing": 2, "hanging": 1}
    assert [cluster(**faults).node_fault(i) for i in range(20)] == [sim.node_fault(i) for i in range(20)]
    with SimulatorServer(sim, clock=Clock(START_S + 60)) as server:
        source = KubernetesSource(kubeconfig=str(server.write_kubeconfig(tmp_path / "kc")), request_timeout_s=2)
        timings = {}
        for fault in ("ok", "slow"):
            started = time.monotonic()
            assert source.scrape_cadvisor(by_fault[fault]).startswith(b"# HELP")
            timings[fault] = time.monotonic() - started
        with pytest.raises(NodeScrapeError, match="HTTP 500") as failing:
            source.scrape_cadvisor(by_fault["failing"])
        started = time.monotonic()
        with pytest.raises(NodeScrapeError, match="no complete answer within 2 s"):
            source.scrape_cadvisor(by_fault["hanging"])
        hung = time.monotonic() - started

    assert timings["slow"] >= 0.6 > timings["ok"]
    assert failing.value.status == 500
    assert 2 <= hung < 6


def test_bad_settings_are_refused_with_the_offending_value() -> None:
    with pytest.raises(ValueError, match=r"restart_fraction must be between 0 and 1, got 1\.5"):
        SimulatorConfig(restart_fraction=1.5)
    with pytest.raises(ValueError, match="pods_per_node 111"):
        SimulatorConfig(pods_per_node=111)
    with pytest.raises(ValueError, match="nodes must be at least 1, got 0"):
        SimulatorConfig(nodes=0)


def test_the_command_prints_its_url_writes_a_kubeconfig_and_imports_no_django(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc"
    code = (
        "import sys, runpy\n"
        "sys.argv = ['simulator', '--nodes', '3', '--kubeconfig', sys.argv[1]]\n"
        "import standins.simulator\n"
        "print('frameworks', sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'celery')), flush=True)\n"
        "runpy.run_module('standins.simulator', run_name='__main__')\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(kubeconfig)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline().strip() for _ in range(4)]
        url = lines[-1]
        request = urllib.request.Request(url + "/api/v1/nodes")
        request.add_header("Authorization", "Bearer simulator-token-not-a-secret")
        with urllib.request.urlopen(request, timeout=10) as answer:
            names = [item["metadata"]["name"] for item in json.loads(answer.read())["items"]]
    finally:
        proc.terminate()
        proc.wait(timeout=10)

    assert lines[0] == "frameworks []"
    assert url.startswith("http://127.0.0.1:")
    assert len(names) == 3
    assert url in kubeconfig.read_text()


# ------------------------------------------------------------------------------------------ a collection cycle


@pytest.mark.django_db(transaction=True)
def test_collect_once_stores_every_healthy_node_and_reports_the_failing_ones(tmp_path: Path, settings: Any) -> None:
    from apps.clusters.models import POD_CGROUP, Container
    from apps.clusters.services import register_cluster
    from apps.collector.models import CollectionRun
    from apps.collector.services import collect_once
    from apps.telemetry.models import Sample

    settings.CPUTUNE_NODE_TIMEOUT = 2
    sim = cluster(failing_fraction=0.1, hanging_fraction=0.05, hang_s=30)
    bad = {sim.node_name(i): sim.node_fault(i) for i in range(20) if sim.node_fault(i) != "ok"}
    with SimulatorServer(sim) as server:
        kubeconfig = server.write_kubeconfig(tmp_path / "kc")
        registered, _ = register_cluster("simulated", "kubernetes", kubeconfig_path=str(kubeconfig))
        run = collect_once(registered)

    assert sorted(bad.values()) == ["failing", "failing", "hanging"]
    assert run.status == CollectionRun.Status.PARTIAL
    assert (run.nodes_total, run.nodes_ok, run.nodes_failed) == (20, 17, 3)
    errors = dict(run.node_results.filter(ok=False).values_list("node", "error"))
    assert errors.keys() == bad.keys()
    for node, fault in bad.items():
        assert ("HTTP 500" if fault == "failing" else "no complete answer within 2 s") in errors[node]
    containers = Sample.objects.exclude(container__name=POD_CGROUP)
    stored = Counter(containers.values_list("container__pod__node__name", flat=True))
    assert stored == {sim.node_name(i): 60 for i in range(20) if sim.node_name(i) not in bad}
    # And the pod cgroups with a pod-level quota (every container limited): stored as their pods' own series.
    pod_cgroups = Sample.objects.filter(container__name=POD_CGROUP).count()
    assert pod_cgroups > 0
    assert run.samples_written == 17 * 60 + pod_cgroups
    assert Container.objects.filter(pod__cluster=registered).count() == 20 * 60
