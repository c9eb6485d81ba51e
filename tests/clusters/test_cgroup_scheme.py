"""The node's cgroup version and shares→weight mapping, judged from what the readings show: the real captures'
`container_spec_cpu_shares` against their pods' requests, the agent's own cpu.weight / cpu.shares, and the floors
and explanations that follow from them."""

from __future__ import annotations

import re
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command

from apps.advisor.cfs import weighted_pod_floors
from apps.advisor.explain import explain
from apps.advisor.facts import ContainerFacts
from apps.clusters.cgroup_scheme import CgroupScheme, judge_cgroup_scheme, shares_from_weight_as_cadvisor
from apps.clusters.kubelet import WeightFormula, shares_from_request_mcpu, weight_from_shares
from apps.clusters.models import Node
from tests.advisor.test_explain import THROTTLED

CLUSTERS = Path(__file__).parent.parent / "fixtures" / "clusters"
_LABEL = re.compile(r'([a-z_]+)="([^"]*)"')


def spec_shares_line(capture: str, pod_prefix: str, container: str) -> int:
    for line in (CLUSTERS / capture / "cadvisor.txt").read_text().splitlines():
        if line.startswith("container_spec_cpu_shares{"):
            labels = dict(_LABEL.findall(line.rsplit("}", 1)[0]))
            if labels.get("container") == container and labels.get("pod", "").startswith(pod_prefix):
                return int(line.rsplit("}", 1)[1].split()[0])
    raise AssertionError(f"no spec shares line for {pod_prefix}/{container} in {capture}")


# --- the arithmetic -------------------------------------------------------------------------------------------------


def test_both_mappings_give_the_weights_runc_reported_for_a_real_container():
    # opencontainers/runc#4896: a container with 2000 shares had weight 77 before the change and 170 after.
    assert weight_from_shares(2000, "linear") == 77
    assert weight_from_shares(2000, "quadratic") == 170


def test_cadvisor_reads_a_weight_back_as_the_1_34_capture_shows_for_its_root_cgroup():
    # The root cgroup keeps the kernel's default weight, 100; the capture's "/" line says 2597.
    [root] = [
        line
        for line in (CLUSTERS / "k8s-1.34-minikube-psi" / "cadvisor.txt").read_text().splitlines()
        if line.startswith('container_spec_cpu_shares{container="",id="/",')
    ]
    assert int(root.rsplit(" ", 1)[1]) == shares_from_weight_as_cadvisor(100) == 2597


# --- judging ----------------------------------------------------------------------------------------------------------


def judged(*args: Any, **kwargs: Any) -> CgroupScheme:
    scheme = judge_cgroup_scheme(*args, **kwargs)
    assert scheme is not None
    return scheme


def scrape_pairs(requests: list[int], mapping: WeightFormula | None) -> list[tuple[int, int]]:
    """(kubelet shares, what cAdvisor would report) for containers with these requests; mapping None: cgroup v1."""
    pairs = []
    for request in requests:
        shares = shares_from_request_mcpu(request)
        seen = shares if mapping is None else shares_from_weight_as_cadvisor(weight_from_shares(shares, mapping))
        pairs.append((shares, seen))
    return pairs


@pytest.mark.parametrize(
    ("mapping", "version"), [(None, 1), ("linear", 2), ("quadratic", 2)], ids=["v1", "linear", "quadratic"]
)
def test_the_scheme_is_told_from_the_reported_shares(mapping, version):
    scheme = judged(scrape_pairs([100, 250, 1000, 2500], mapping), "cadvisor_shares")
    assert scheme is not None
    assert (scheme.version, scheme.mapping) == (version, mapping or "")
    assert "4 containers with a request: 4 fit" in scheme.evidence


def test_a_minority_that_fits_another_scheme_does_not_flip_the_verdict_and_a_split_decides_nothing():
    pairs = scrape_pairs([100, 250, 1000], "quadratic") + scrape_pairs([500], "linear")
    assert judged(pairs, "cadvisor_shares").mapping == "quadratic"
    split = scrape_pairs([100, 250], "quadratic") + scrape_pairs([500, 1000], "linear")
    assert judge_cgroup_scheme(split, "cadvisor_shares") is None
    assert judged(split, "cadvisor_shares", has_pressure=True).version == 2


def test_one_fit_among_containers_that_fit_no_scheme_is_no_verdict():
    # A runtime that writes weights of its own: 1 of 3 fitting is not a majority.
    pairs = [*scrape_pairs([100], "quadratic"), (shares_from_request_mcpu(500), 7), (shares_from_request_mcpu(900), 9)]
    assert judge_cgroup_scheme(pairs, "cadvisor_shares") is None
    assert judge_cgroup_scheme(pairs[:1] + pairs[1:2], "cadvisor_shares") is None


def test_containers_without_a_request_tell_nothing_and_pressure_alone_says_v2():
    assert judge_cgroup_scheme([(2, 2), (2, 2)], "cadvisor_shares") is None
    scheme = judged([(2, 2)], "cadvisor_shares", has_pressure=True)
    assert (scheme.version, scheme.mapping) == (2, "") and "PSI" in scheme.evidence


def test_the_agents_weights_are_judged_as_weights_on_the_version_it_read():
    shares = shares_from_request_mcpu(500)
    scheme = judged([(shares, weight_from_shares(shares, "quadratic"))], "weight", cgroup_version=2)
    assert (scheme.version, scheme.mapping) == (2, "quadratic")
    unclear = judged([(shares, 3)], "weight", cgroup_version=2)
    assert (unclear.version, unclear.mapping) == (2, "")
    v1 = judged([(shares, shares)], "cadvisor_shares", cgroup_version=1)
    assert (v1.version, v1.mapping) == (1, "")


# --- the real captures --------------------------------------------------------------------------------------------


def import_capture(name: str) -> Node:
    capture = CLUSTERS / name
    node = yaml.safe_load((capture / "nodes.yaml").read_text())["items"][0]["metadata"]["name"]
    call_command(
        "import_dump", "--cluster", "c", "--nodes", str(capture / "nodes.yaml"), "--pods", str(capture / "pods.yaml"),
        "--metrics", f"{node}={capture / 'cadvisor.txt'}", stdout=StringIO(),
    )  # fmt: skip
    return Node.objects.get(cluster__name="c", name=node)


@pytest.mark.django_db
@pytest.mark.parametrize("capture", ["k8s-1.31-minikube", "k8s-1.33-minikube", "k8s-1.34-minikube-psi"])
def test_the_real_v2_captures_are_read_as_cgroup_v2_with_the_linear_mapping(capture):
    # etcd requests 100m: 102 shares; linear weight 1 + 100 × 9999 // 262142 = 4; cAdvisor reports
    # 2 + 3 × 262142 // 9999 = 80. Cgroup v1 would report 102, the quadratic mapping (weight 17) 421.
    assert spec_shares_line(capture, "etcd-", "etcd") == 80
    node = import_capture(capture)
    assert (node.cgroup_version, node.weight_mapping) == (2, "linear")
    assert "fit the linear shares→weight mapping" in node.cgroup_evidence


@pytest.mark.django_db
def test_a_capture_whose_cadvisor_reports_no_shares_leaves_the_scheme_unknown():
    # Kubernetes 1.20's cAdvisor reports 0 for every container there: nothing to judge by, so nothing is claimed.
    assert spec_shares_line("k8s-1.20-minikube", "etcd-", "etcd") == 0
    node = import_capture("k8s-1.20-minikube")
    assert (node.cgroup_version, node.weight_mapping, node.cgroup_evidence) == (None, "", "")


# --- what follows from it -----------------------------------------------------------------------------------------


def test_floors_on_a_quadratic_node_follow_the_weights_level_by_level():
    floors = weighted_pod_floors(
        {1: ("Guaranteed", 1000), 2: ("Burstable", 500), 3: ("Burstable", 1500), 4: ("BestEffort", None)},
        4000,
        "quadratic",
    )
    # Top level: the Guaranteed pod (1024 shares → 100), the Burstable slice (2000m: 2048 shares → 174) and the
    # BestEffort slice (2 shares → 1): 275. The slice's 4000 × 174 // 275 = 2530 is split 59 : 138 (512 and 1536
    # shares). Split flat by shares the Guaranteed pod would get 4000 × 1024 // 3074 = 1332.
    assert floors[1].floor_mcpu == 4000 * 100 // 275 == 1454
    assert floors[2].floor_mcpu == 2530 * 59 // 197 and floors[3].floor_mcpu == 2530 * 138 // 197
    assert floors[4].budget_mcpu == 4000 * 1 // 275


def facts(version: int | None, mapping: str) -> ContainerFacts:
    return ContainerFacts(
        window=THROTTLED,
        request_mcpu=100,
        limit_mcpu=200,
        node_cpus=4,
        cgroup_version=version,
        weight_mapping=mapping,
    )


def test_the_explanation_names_the_files_and_the_weight_of_the_nodes_cgroup_version():
    quadratic = explain(facts(2, "quadratic"), [])
    assert 'cpu.max "20000 100000"' in quadratic and "cfs_quota_us" not in quadratic
    assert "cpu.weight 17" in quadratic and "l = log2 102 = 6.67" in quadratic
    linear = explain(facts(2, "linear"), [])
    assert "cpu.weight 4 by the linear mapping" in linear and "1 + (102 − 2) × 9999 / 262142" in linear
    v1 = explain(facts(1, ""), [])
    assert "cpu.cfs_quota_us 20000 / cpu.cfs_period_us 100000" in v1 and "cpu.max" not in v1
    assert "cpu.weight" not in v1
    unknown_mapping = explain(facts(2, ""), [])
    assert "a mapping not seen on this node yet" in unknown_mapping


def test_a_worker_judges_a_nodes_scheme_at_most_once_an_hour(monkeypatch):
    from apps.collector import services

    clock = [1000.0]
    monkeypatch.setattr(services.time, "monotonic", lambda: clock[0])
    assert services._cgroup_check_due(1, "node-a") is True
    assert services._cgroup_check_due(1, "node-a") is False
    assert services._cgroup_check_due(1, "node-b") is True  # per node
    clock[0] += services.CGROUP_CHECK_EVERY_S
    assert services._cgroup_check_due(1, "node-a") is True
