"""The Kubernetes source, through the official client, against the local API-server stand-in playing real payloads."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from apps.collector import inventory
from apps.collector.sources.base import NodeScrapeError, SourceError
from apps.collector.sources.kubernetes.client import KubernetesSource, kubelet_base_url
from standins.apiserver import ApiServerStandin, Faults

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CLUSTER = FIXTURES / "clusters" / "k8s-1.33-minikube"
NODE = "datagen-1-33"


def recorded_pods() -> list[dict]:
    return yaml.safe_load((CLUSTER / "pods.yaml").read_text())["items"]


def unfinished_pod_names() -> set[str]:
    return {p["metadata"]["name"] for p in recorded_pods() if p["status"]["phase"] not in ("Succeeded", "Failed")}


@pytest.fixture
def standin() -> Iterator[ApiServerStandin]:
    with ApiServerStandin(CLUSTER) as server:
        yield server


def source_for(server: ApiServerStandin, tmp_path: Path, **options: object) -> KubernetesSource:
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    return KubernetesSource(kubeconfig=str(kubeconfig), **options)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------------------ lists


def test_pods_are_listed_page_by_page_until_the_server_has_no_more(standin: ApiServerStandin, tmp_path: Path) -> None:
    expected = unfinished_pod_names()
    assert len(expected) == 19  # 24 recorded, 4 Failed, 1 Succeeded

    pods, problems = source_for(standin, tmp_path, page_size=5).list_pods()

    assert problems == []
    assert sorted(pod.name for pod in pods) == sorted(expected)
    pages = standin.requests_to("/api/v1/pods")
    assert len(pages) == 4  # 5 + 5 + 5 + 4
    assert [page.query["limit"] for page in pages] == ["5"] * 4
    assert "continue" not in pages[0].query
    assert all("continue" in page.query for page in pages[1:])


def test_finished_pods_are_listed_too_when_asked(standin: ApiServerStandin, tmp_path: Path) -> None:
    pods, _ = source_for(standin, tmp_path, skip_finished_pods=False).list_pods()

    assert len(pods) == 24
    assert "fieldSelector" not in standin.requests_to("/api/v1/pods")[0].query


def test_listed_pods_carry_requests_limits_and_workloads(standin: ApiServerStandin, tmp_path: Path) -> None:
    pods, _ = source_for(standin, tmp_path, page_size=7).list_pods()
    by_name = {pod.name: pod for pod in pods}

    coredns = by_name["coredns-674b8bbfcf-lj26m"]
    assert (coredns.workload_kind, coredns.workload_name) == ("Deployment", "coredns")
    assert [(c.request_mcpu, c.limit_mcpu) for c in coredns.containers] == [(100, None)]
    assert (by_name["kube-proxy-xgf96"].workload_kind, by_name["kube-proxy-xgf96"].qos_class) == (
        "DaemonSet",
        "BestEffort",
    )


def test_nodes_are_listed_with_their_cpus_and_kernel(standin: ApiServerStandin, tmp_path: Path) -> None:
    nodes, problems = source_for(standin, tmp_path, page_size=1).list_nodes()

    assert problems == []
    assert [(n.name, n.capacity_mcpu, n.kernel_version) for n in nodes] == [(NODE, 10_000, "6.10.14-linuxkit")]


def test_every_request_carries_the_bearer_token_from_the_kubeconfig(standin: ApiServerStandin, tmp_path: Path) -> None:
    source = source_for(standin, tmp_path, page_size=10, read_kubelet_config=True)
    source.list_nodes()
    source.list_pods()
    source.scrape_cadvisor(NODE)
    source.kubelet_config(NODE)

    seen = standin.requests
    assert len(seen) == 1 + 2 + 1 + 1
    assert {request.authorization for request in seen} == {f"Bearer {standin.token}"}


def test_a_wrong_token_is_a_clear_error(standin: ApiServerStandin, tmp_path: Path) -> None:
    kubeconfig = standin.write_kubeconfig(tmp_path / "kubeconfig", token="not-the-token")

    with pytest.raises(SourceError, match=r"listing nodes from http://127\.0\.0\.1:\d+: HTTP 401: Unauthorized"):
        KubernetesSource(kubeconfig=str(kubeconfig)).list_nodes()


def test_an_expired_continue_token_restarts_the_list_once_and_loses_nothing(tmp_path: Path) -> None:
    with ApiServerStandin(CLUSTER, Faults(expired_continues={"pods": 1})) as server:
        pods, _ = source_for(server, tmp_path, page_size=5).list_pods()
        pages = server.requests_to("/api/v1/pods")

    assert sorted(pod.name for pod in pods) == sorted(unfinished_pod_names())  # each pod once
    assert len(pages) == 2 + 4  # first page, the 410, then the whole list again
    assert [("continue" in page.query) for page in pages] == [False, True, False, True, True, True]


def test_a_continue_token_expiring_twice_fails_clearly(tmp_path: Path) -> None:
    with ApiServerStandin(CLUSTER, Faults(expired_continues={"pods": 2})) as server:
        source = source_for(server, tmp_path, page_size=5)

        with pytest.raises(SourceError, match=r"listing pods .*expired again \(HTTP 410\)"):
            source.list_pods()
        assert len(server.requests_to("/api/v1/pods")) == 4


def test_an_api_server_slower_than_the_timeout_fails_the_list_within_the_timeout(tmp_path: Path) -> None:
    with ApiServerStandin(CLUSTER, Faults(delay_s=30)) as server:
        source = source_for(server, tmp_path, request_timeout_s=0.5)
        started = time.monotonic()

        with pytest.raises(SourceError, match=r"listing nodes .*no complete answer within 0\.5 s"):
            source.list_nodes()
        assert time.monotonic() - started < 3


def test_a_slow_api_server_within_the_timeout_still_answers(tmp_path: Path) -> None:
    with ApiServerStandin(CLUSTER, Faults(delay_s=0.2)) as server:
        nodes, _ = source_for(server, tmp_path, request_timeout_s=5).list_nodes()

    assert [node.name for node in nodes] == [NODE]


def test_an_unreachable_api_server_is_a_clear_error(tmp_path: Path) -> None:
    with ApiServerStandin(CLUSTER) as server:
        kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")  # the port is closed once the server stops
    source = KubernetesSource(kubeconfig=str(kubeconfig), request_timeout_s=2)

    with pytest.raises(SourceError, match=r"listing nodes .*cannot connect"):
        source.list_nodes()


# ---------------------------------------------------------------------------------------------------------- scrapes


def test_the_scrape_through_the_api_server_proxy_is_the_kubelets_text(
    standin: ApiServerStandin, tmp_path: Path
) -> None:
    scrape = source_for(standin, tmp_path).scrape_cadvisor(NODE)

    assert scrape == (CLUSTER / "cadvisor.txt").read_bytes()
    assert [r.path for r in standin.requests] == [f"/api/v1/nodes/{NODE}/proxy/metrics/cadvisor"]


def test_a_gzipped_scrape_is_unpacked(tmp_path: Path) -> None:
    with ApiServerStandin(CLUSTER, gzip_scrapes=True) as server:
        scrape = source_for(server, tmp_path).scrape_cadvisor(NODE)

    assert scrape == (CLUSTER / "cadvisor.txt").read_bytes()


def test_a_500_from_one_node_fails_that_node_only(tmp_path: Path) -> None:
    with ApiServerStandin(CLUSTER, replicas=3) as server:
        broken = server.node_names[1]
        server.faults.scrape_status[broken] = 500
        source = source_for(server, tmp_path)

        with pytest.raises(NodeScrapeError) as caught:
            source.scrape_cadvisor(broken)
        healthy = [source.scrape_cadvisor(name) for name in server.node_names if name != broken]

    assert caught.value.node == broken
    assert caught.value.status == 500
    assert f"node {broken}:" in str(caught.value)
    assert "HTTP 500" in str(caught.value)
    assert "failed to get cadvisor stats" in str(caught.value)  # the kubelet's own words are kept
    assert all(b"container_cpu_cfs_throttled_periods_total" in scrape for scrape in healthy)


def test_a_hanging_node_times_out_within_the_configured_timeout(tmp_path: Path) -> None:
    with ApiServerStandin(CLUSTER, Faults(hang_s={NODE: 60})) as server:
        source = source_for(server, tmp_path, request_timeout_s=1)
        started = time.monotonic()

        with pytest.raises(NodeScrapeError, match=rf"node {NODE}: .*no complete answer within 1 s") as caught:
            source.scrape_cadvisor(NODE)
        elapsed = time.monotonic() - started

    assert 0.9 <= elapsed < 3
    assert caught.value.status is None
    assert len(server.requests_to(f"/api/v1/nodes/{NODE}/proxy/metrics/cadvisor")) == 1  # not retried


def test_a_node_dribbling_its_scrape_is_cut_off_at_the_timeout(tmp_path: Path) -> None:
    with ApiServerStandin(CLUSTER, Faults(drip_s={NODE: 10})) as server:
        source = source_for(server, tmp_path, request_timeout_s=1)
        started = time.monotonic()

        with pytest.raises(NodeScrapeError, match=r"no complete answer within 1 s: the answer did not finish"):
            source.scrape_cadvisor(NODE)

    assert time.monotonic() - started < 4  # the deadline, plus at most one socket read


def test_binary_garbage_labelled_as_text_is_not_taken_for_metrics(tmp_path: Path) -> None:
    with (
        ApiServerStandin(CLUSTER, Faults(garbage={NODE})) as server,
        pytest.raises(NodeScrapeError, match=rf"node {NODE}: the scrape holds binary bytes"),
    ):
        source_for(server, tmp_path).scrape_cadvisor(NODE)


def test_an_answer_that_is_not_text_is_refused(tmp_path: Path) -> None:
    faults = Faults(garbage={NODE}, garbage_content_type="application/octet-stream")
    with (
        ApiServerStandin(CLUSTER, faults) as server,
        pytest.raises(NodeScrapeError, match="answered application/octet-stream, not text"),
    ):
        source_for(server, tmp_path).scrape_cadvisor(NODE)


def test_an_unknown_node_is_a_scrape_error_with_the_api_servers_message(
    standin: ApiServerStandin, tmp_path: Path
) -> None:
    with pytest.raises(NodeScrapeError, match=r'node gone-node: .*HTTP 404: nodes "gone-node" not found'):
        source_for(standin, tmp_path).scrape_cadvisor("gone-node")


# -------------------------------------------------------------------------------------------------- kubelet config


def test_the_kubelet_config_is_not_read_unless_enabled(standin: ApiServerStandin, tmp_path: Path) -> None:
    assert source_for(standin, tmp_path).kubelet_config(NODE) is None
    assert standin.requests == []


def test_the_kubelet_config_names_the_cpu_manager_policy_and_cfs_settings(
    standin: ApiServerStandin, tmp_path: Path
) -> None:
    source = source_for(standin, tmp_path, read_kubelet_config=True)
    config = source.kubelet_config(NODE)
    nodes, _ = source.list_nodes()

    assert config is not None
    assert (config["cpuManagerPolicy"], config["cpuCFSQuota"], config["cpuCFSQuotaPeriod"]) == ("none", True, "100ms")
    assert config["cgroupDriver"] == "cgroupfs"  # the recorded scrape's cgroups are /kubepods/burstable/pod…
    assert inventory.node_with_kubelet_config(nodes[0], config).cpu_manager_policy == "none"
    assert standin.requests[0].path == f"/api/v1/nodes/{NODE}/proxy/configz"


def test_a_forbidden_kubelet_config_says_which_permission_is_missing(tmp_path: Path) -> None:
    with ApiServerStandin(CLUSTER, Faults(configz_status={NODE: 403})) as server:
        source = source_for(server, tmp_path, read_kubelet_config=True)

        with pytest.raises(NodeScrapeError, match=r"HTTP 403 \(the credentials need get on nodes/proxy\)") as caught:
            source.kubelet_config(NODE)

    assert caught.value.status == 403


# ---------------------------------------------------------------------------------------------------- kubelet direct


@pytest.mark.parametrize(
    ("address", "port", "scheme", "url"),
    [
        ("192.168.67.2", 10250, "https", "https://192.168.67.2:10250"),
        ("fd00:10:244::5", 10250, "https", "https://[fd00:10:244::5]:10250"),
        ("ip-10-0-0-5.ec2.internal", 10250, "https", "https://ip-10-0-0-5.ec2.internal:10250"),
        ("127.0.0.1", 41234, "http", "http://127.0.0.1:41234"),
    ],
)
def test_kubelet_urls_bracket_ipv6_and_keep_port_and_scheme(address: str, port: int, scheme: str, url: str) -> None:
    assert kubelet_base_url(address, port, scheme) == url


def test_kubelet_direct_goes_to_the_nodes_internal_ip_on_the_port_it_reports(
    standin: ApiServerStandin, tmp_path: Path
) -> None:
    source = source_for(standin, tmp_path, kubelet_direct=True)
    source.list_nodes()

    assert source.kubelet_url(NODE) == "https://192.168.67.2:10250"
    assert len(standin.requests) == 1  # the address came from the node list, no extra read


def test_kubelet_direct_reads_the_node_when_it_was_not_listed_yet(standin: ApiServerStandin, tmp_path: Path) -> None:
    source = source_for(standin, tmp_path, kubelet_direct=True, kubelet_port=10255)

    assert source.kubelet_url(NODE) == "https://192.168.67.2:10255"
    assert [r.path for r in standin.requests] == [f"/api/v1/nodes/{NODE}"]


def test_kubelet_direct_scrapes_each_kubelet_with_the_same_bearer_token(tmp_path: Path) -> None:
    with ApiServerStandin(CLUSTER, replicas=2, kubelet_servers=True) as server:
        source = source_for(server, tmp_path, kubelet_direct=True, kubelet_scheme="http", read_kubelet_config=True)
        source.list_nodes()
        scrapes = {name: source.scrape_cadvisor(name) for name in server.node_names}
        config = source.kubelet_config(server.node_names[0])

        for name in server.node_names:
            assert source.kubelet_url(name) == f"http://127.0.0.1:{server.kubelet_ports[name]}"
            [request] = server.requests_to("/metrics/cadvisor", server=f"kubelet/{name}")
            assert request.authorization == f"Bearer {server.token}"
            assert scrapes[name] == server.scrape_of(name)
        assert not [r for r in server.requests if "/proxy/" in r.path]  # the API server proxy was never used
        assert config is not None and config["cpuManagerPolicy"] == "none"


def test_a_hanging_kubelet_times_out_when_reached_directly(tmp_path: Path) -> None:
    with ApiServerStandin(CLUSTER, Faults(hang_s={NODE: 60}), kubelet_servers=True) as server:
        source = source_for(server, tmp_path, kubelet_direct=True, kubelet_scheme="http", request_timeout_s=1)
        source.list_nodes()
        started = time.monotonic()

        with pytest.raises(NodeScrapeError, match=rf"node {NODE}: GET http://127\.0\.0\.1:\d+/metrics/cadvisor"):
            source.scrape_cadvisor(NODE)

    assert time.monotonic() - started < 3


# ----------------------------------------------------------------------------------------------------- credentials


def test_a_missing_kubeconfig_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"cannot load kubeconfig .*nowhere\.yaml"):
        KubernetesSource(kubeconfig=str(tmp_path / "nowhere.yaml"))


def test_an_unknown_context_is_a_clear_error(standin: ApiServerStandin, tmp_path: Path) -> None:
    kubeconfig = standin.write_kubeconfig(tmp_path / "kubeconfig")

    with pytest.raises(SourceError, match="context 'prod'"):
        KubernetesSource(kubeconfig=str(kubeconfig), context="prod")


def test_in_cluster_outside_a_pod_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)

    with pytest.raises(SourceError, match="cannot load the in-cluster service account"):
        KubernetesSource(in_cluster=True)


@pytest.mark.parametrize(
    "options",
    [{"in_cluster": True, "kubeconfig": "x"}, {"page_size": 0}, {"request_timeout_s": 0}, {"kubelet_scheme": "ftp"}],
)
def test_nonsensical_settings_are_refused(options: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        KubernetesSource(**options)  # type: ignore[arg-type]
