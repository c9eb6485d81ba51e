"""The sources' convert modules on captured payloads: kubelet scrapes (tests/fixtures/clusters, tests/fixtures/cadvisor)
and the agent's payload over a cgroup tree built from tests/fixtures/cgroup, named through a lab inventory.

Expected figures are read off the fixture files: v2-opencontainers/cpu.stat has nr_periods 100, nr_throttled 10,
throttled_usec 50000 and usage_usec 1000000.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent import cputune_agent
from apps.collector.cadvisor import parse_cadvisor
from apps.collector.sources.base import NodeScrapeError
from apps.collector.sources.kubernetes import convert as kubernetes_convert
from apps.collector.sources.lab import convert as lab_convert
from apps.lab.runtime import LabContainer, LabInventory
from apps.telemetry.readings import NodeInfo
from tests.agent.test_cputune_agent import UID_BURSTABLE, UID_GUARANTEED, build_v2_tree, container_id

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SCRAPES = sorted([*FIXTURES.glob("clusters/*/cadvisor.txt"), *FIXTURES.glob("cadvisor/*.txt")])
NOW = datetime(2025, 5, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize("path", SCRAPES, ids=[p.parent.name if p.name == "cadvisor.txt" else p.stem for p in SCRAPES])
def test_every_captured_scrape_passes_the_metrics_text_checks(path: Path) -> None:
    kubernetes_convert.check_metrics_text("n1", path.read_bytes())


@pytest.mark.parametrize("body", [b"", b" \n\n", b"\x1f\x8b\x08\x00gzip", b"<html>login</html>\n", b"caf\xe9 1\n"])
def test_what_is_not_metrics_text_is_refused_naming_the_node(body: bytes) -> None:
    with pytest.raises(NodeScrapeError, match=r"^node n1: the scrape"):
        kubernetes_convert.check_metrics_text("n1", body)


def test_a_node_read_holds_the_parsed_scrape_of_a_kubelet_with_cfs_counters() -> None:
    body = (FIXTURES / "clusters/k8s-1.33-minikube/cadvisor.txt").read_bytes()
    read = kubernetes_convert.node_read("minikube", body, NOW)
    parsed = parse_cadvisor(body, node="minikube", default_ts=NOW)
    assert read.node == "minikube" and read.has_cfs_counters is True
    assert read.readings == parsed.readings and read.readings
    assert read.problems == parsed.problems


def test_a_kubelet_without_cfs_counters_is_said_so_and_its_usage_kept() -> None:
    body = (FIXTURES / "clusters/k8s-1.20-minikube/cadvisor.txt").read_bytes()
    read = kubernetes_convert.node_read("minikube", body, NOW)
    assert read.has_cfs_counters is False
    assert read.readings and all(r.periods_total is None for r in read.readings)
    assert any(r.usage_seconds_total for r in read.readings)
    assert any("exposes no container_cpu_cfs_* series" in p for p in read.problems)


def test_the_kubelet_config_gives_the_cpu_manager_policy() -> None:
    info = kubernetes_convert.node_info_from_kubelet_config("n1", {"cpuManagerPolicy": "Static", "cgroupDriver": "x"})
    assert info == NodeInfo(name="n1", cpu_manager_policy="static")


def lab_container(pod: str, container: str, pod_uid: str, runtime_id: str) -> LabContainer:
    return LabContainer(
        namespace="lab",
        pod=pod,
        container=container,
        pod_uid=pod_uid,
        container_id=runtime_id,
        request_mcpu=100,
        limit_mcpu=500,
        qos_class="Burstable",
        workload_kind="Deployment",
        workload_name=pod,
        workload="burner",
        workload_params={},
        cgroup_relpath="",
        cpu_dir="",
        usage_dir=None,
        pod_cgroup_relpath="",
        pod_cpu_dir="",
        pod_usage_dir=None,
        pids=(),
    )


def test_the_agent_payload_becomes_readings_named_through_the_lab(tmp_path: Path) -> None:
    root = build_v2_tree(tmp_path / "cgroup", "cgroupfs")
    payload = cputune_agent.collect(cgroup_root_v2=str(root), node_name="lab-node", now=NOW)
    node = NodeInfo(name="lab-node", capacity_mcpu=4000)
    lab = LabInventory(
        node=node,
        cgroup_version=2,
        cpu_mount=str(tmp_path),
        cpuacct_mount=None,
        root="cgroup",
        period_us=100_000,
        containers=(
            lab_container("web-1", "web", UID_BURSTABLE, container_id("web")),
            lab_container("db-1", "db", UID_GUARANTEED, container_id("db")),
            lab_container("gone-1", "gone", UID_BURSTABLE, container_id("gone")),
        ),
    )
    read = lab_convert.node_read(lab, "lab-node", payload)

    by_name = {(r.pod, r.container): r for r in read.readings}
    assert sorted(by_name) == [("db-1", "db"), ("web-1", "web")]  # pod-level cgroups and the BestEffort pod left out
    web = by_name[("web-1", "web")]
    assert (web.namespace, web.node, web.ts) == ("lab", "lab-node", NOW)
    assert (web.periods_total, web.throttled_periods_total) == (100, 10)
    assert web.throttled_seconds_total == pytest.approx(0.05) and web.usage_seconds_total == pytest.approx(1.0)
    assert (web.quota_us, web.period_us, web.threads) == (50_000, 100_000, 7)
    assert read.node_info == node and read.has_cfs_counters is True
    assert read.problems == ["1 lab container(s) had no cgroup to read (stopped or removed)"]
