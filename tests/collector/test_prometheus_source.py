"""The Prometheus source against a real Prometheus server scraping recorded cAdvisor and kube-state-metrics text.

Expected values never come from the adapter: counters are the recorded lines plus the exporter's known steps for the
body Prometheus scraped (identified by its sample stamp), readings are compared with the scrape parser's reading of
those very bytes, the inventory with the API objects of the same capture.

Prometheus 2.42 applies its targets about 5 s after it starts (its discovery manager sends updates at most every
5 s), so one server per recorded cluster is shared by the tests of this module.
"""

from __future__ import annotations

import base64
import dataclasses
import re
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from apps.clusters.models import POD_CGROUP, Cluster, Container, Node
from apps.clusters.services import register_cluster
from apps.collector.cadvisor import parse_cadvisor
from apps.collector.dump import import_dump
from apps.collector.inventory import list_items, nodes_from_objects, pods_from_objects
from apps.collector.models import CollectionRun
from apps.collector.services import collect_once
from apps.collector.sources.base import NodeScrapeError, SourceUnavailable
from apps.collector.sources.prometheus.client import PrometheusClient, PrometheusError
from apps.collector.sources.prometheus.convert import VectorSample, inventory_from_vectors
from apps.collector.sources.prometheus.source import PrometheusAdapter
from apps.telemetry.models import Sample
from apps.telemetry.readings import CounterReading

from .prometheus_server import CadvisorPlayback, Exporter, PrometheusServer, Steps, free_port, require_prometheus

FIXTURES = Path(__file__).parent.parent / "fixtures"
# name → (cAdvisor text, kube-state-metrics text or None); RESTARTED adds a dead cgroup to the 1.33 capture.
RECORDED = {
    "k8s-1.20-minikube": ("clusters/k8s-1.20-minikube/cadvisor.txt", "clusters/k8s-1.20-minikube/ksm.txt"),
    "k8s-1.31-minikube": ("clusters/k8s-1.31-minikube/cadvisor.txt", "clusters/k8s-1.31-minikube/ksm.txt"),
    "k8s-1.33-minikube": ("clusters/k8s-1.33-minikube/cadvisor.txt", "clusters/k8s-1.33-minikube/ksm.txt"),
    "k8s-1.34-minikube-psi": (
        "clusters/k8s-1.34-minikube-psi/cadvisor.txt",
        "clusters/k8s-1.34-minikube-psi/ksm.txt",
    ),
    "gke-2018-cos-docker": ("clusters/gke-2018-cos-docker/cadvisor.txt", None),
    "kind-1.16-containerd": ("cadvisor/kind-1.16-containerd.txt", None),
}
FIELDS = {
    "container_cpu_cfs_periods_total": ("periods_total", "periods"),
    "container_cpu_cfs_throttled_periods_total": ("throttled_periods_total", "throttled_periods"),
    "container_cpu_cfs_throttled_seconds_total": ("throttled_seconds_total", "throttled_seconds"),
    "container_cpu_usage_seconds_total": ("usage_seconds_total", "usage_seconds"),
}


RESTARTED = "k8s-1.33-minikube, php-apache restarted"
LIVE_PHP_ID = "831c488351c96d68732f0081b557f2ac01b182a87ae6628bfd09ce8112b7f7ef"  # grep 'container="php-apache"'


def _with_a_dead_predecessor(text: str) -> str:
    """The capture plus the cgroup of an earlier php-apache container that died 10 minutes after starting and is
    still reported (cAdvisor keeps a dead cgroup for a while): another id, an earlier start, larger counters."""
    dead_id = "dead" + LIVE_PHP_ID[4:]
    extra = []
    for line in text.splitlines():
        if LIVE_PHP_ID not in line or not line.startswith("container_"):
            continue
        head, tail = line.replace(LIVE_PHP_ID, dead_id).rsplit("}", 1)
        fields = tail.split()
        name = head.split("{", 1)[0]
        if name == "container_start_time_seconds":
            fields[0] = repr(float(fields[0]) - 600)
        elif name in FIELDS:
            fields[0] = repr(float(fields[0]) + 5000)
        extra.append(f"{head}}} {' '.join(fields)}")
    assert len(extra) > 10
    return text + "\n".join(extra) + "\n"


@dataclass
class Served:
    exporter: Exporter
    playback: CadvisorPlayback
    prometheus: PrometheusServer
    ksm: bytes | None

    def cluster(self, name: str = "prom") -> Cluster:
        """An unsaved cluster pointing at this Prometheus (for adapter calls that need no database)."""
        return Cluster(name=name, source="prometheus", prometheus_url=self.prometheus.url)

    def swap_ksm(self, text: bytes) -> None:
        self.exporter.routes["/metrics"] = lambda: text


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], Served]]:
    started: dict[str, Served] = {}
    with ExitStack() as stack:

        def start(name: str) -> Served:
            if name in started:
                return started[name]
            require_prometheus()
            cadvisor_path, ksm_path = RECORDED[name if name != RESTARTED else "k8s-1.33-minikube"]
            text = (FIXTURES / cadvisor_path).read_text()
            playback = CadvisorPlayback(_with_a_dead_predecessor(text) if name == RESTARTED else text, Steps())
            ksm = (FIXTURES / ksm_path).read_bytes() if ksm_path else None
            routes: dict = {"/metrics/cadvisor": playback.render}
            if ksm is not None:
                routes["/metrics"] = lambda: ksm
            exporter = stack.enter_context(Exporter(routes))
            jobs = {"kubelet-cadvisor": exporter.url("/metrics/cadvisor")}
            if ksm is not None:
                jobs["kube-state-metrics"] = exporter.url("/metrics")
            prometheus = stack.enter_context(PrometheusServer(tmp_path_factory.mktemp(name), jobs))
            prometheus.wait_for_targets()
            prometheus.wait_for("container_cpu_usage_seconds_total")
            if ksm is not None:
                prometheus.wait_for("kube_pod_info")
            started[name] = Served(exporter, playback, prometheus, ksm)
            return started[name]

        yield start


def ms(instant: datetime) -> int:
    return round(instant.timestamp() * 1000)


def samples_by_container(cluster: Cluster) -> dict[tuple[str, str, str], list[Sample]]:
    out: dict[tuple[str, str, str], list[Sample]] = {}
    rows = Sample.objects.filter(container__pod__cluster=cluster).exclude(container__name=POD_CGROUP)
    rows = rows.select_related("container__pod").order_by("ts")
    for sample in rows:
        c = sample.container
        out.setdefault((c.pod.namespace, c.pod.name, c.name), []).append(sample)
    return out


def assert_same_reading(got: CounterReading, want: CounterReading, *, compare_ts: bool = True) -> None:
    for f in dataclasses.fields(CounterReading):
        if f.name == "node" or (f.name == "ts" and not compare_ts):
            continue
        mine, theirs = getattr(got, f.name), getattr(want, f.name)
        if isinstance(theirs, float):
            # Per-CPU usage is summed by Prometheus and by the parser in different orders.
            assert mine == pytest.approx(theirs, rel=1e-12), (got.pod, got.container, f.name)
        else:
            assert mine == theirs, (got.pod, got.container, f.name)


# --------------------------------------------------------------------------------- no server needed: errors


@pytest.mark.django_db
def test_a_cluster_without_a_prometheus_url_cannot_be_collected():
    cluster = Cluster.objects.create(name="prom", source="prometheus")
    run = collect_once(cluster)
    assert run.status == CollectionRun.Status.FAILED
    assert "has no Prometheus URL" in run.problems.get().message


@pytest.mark.django_db
def test_an_unreachable_prometheus_fails_the_run_naming_it():
    url = f"http://127.0.0.1:{free_port()}"
    cluster, _ = register_cluster("prom", "prometheus", prometheus_url=url)
    run = collect_once(cluster)
    assert run.status == CollectionRun.Status.FAILED
    message = run.problems.get().message
    assert f"cannot reach Prometheus at {url}" in message
    assert "refused" in message.lower()


def _stub(answer: Callable[[], bytes | tuple[int, str, bytes]]) -> Exporter:
    return Exporter({"/prefix/api/v1/query": answer})


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ((200, "text/html", b"<html><body>Grafana</body></html>"), r"HTTP 200 .* body that is not JSON .*base URL"),
        (
            (400, "application/json", b'{"status":"error","errorType":"bad_data","error":"parse error at char 5"}'),
            r"answered HTTP 400 to query .*: bad_data: parse error at char 5",
        ),
        ((503, "text/plain", b"Service Unavailable"), r"answered HTTP 503 .*Service Unavailable"),
        ((200, "application/json", b'{"status":"success","data":{"resultType":"matrix","result":[]}}'), r"a matrix"),
    ],
    ids=["html", "api-error", "unavailable", "not-a-vector"],
)
def test_answers_that_are_not_a_prometheus_vector_are_refused_with_the_reason(answer, message):
    with _stub(lambda: answer) as stub:
        client = PrometheusClient(stub.url("/prefix/"), timeout_s=5)
        with pytest.raises(PrometheusError, match=message):
            client.query("up", datetime.now(UTC))


def test_credentials_in_the_url_are_sent_but_never_shown():
    with _stub(lambda: (401, "text/plain", b"Unauthorized")) as stub:
        url = stub.url("/prefix").replace("http://", "http://viewer:s3cret%21@")
        with pytest.raises(PrometheusError) as raised:
            PrometheusClient(url, timeout_s=5).query("up", datetime.now(UTC))
    assert "s3cret" not in str(raised.value) and "viewer" not in str(raised.value)
    assert "HTTP 401" in str(raised.value)
    sent = stub.requests[0]
    assert sent.headers["Authorization"] == "Basic " + base64.b64encode(b"viewer:s3cret!").decode()
    assert sent.method == "POST" and b"query=up" in sent.body


def test_a_hanging_prometheus_costs_at_most_the_timeout():
    def hang() -> bytes:
        time.sleep(4)
        return b"{}"

    with _stub(hang) as stub:
        started = time.monotonic()
        with pytest.raises(PrometheusError, match=r"no complete answer within 1 s"):
            PrometheusClient(stub.url("/prefix"), timeout_s=1).query("up", datetime.now(UTC))
    assert time.monotonic() - started < 3


@pytest.mark.django_db(transaction=True)
def test_when_the_cycles_counter_query_fails_every_node_fails_with_its_reason_asked_once():
    node_info = (
        b'{"status":"success","data":{"resultType":"vector","result":['
        b'{"metric":{"__name__":"kube_node_info","node":"n1"},"value":[1,"1"]},'
        b'{"metric":{"__name__":"kube_node_info","node":"n2"},"value":[1,"1"]}]}}'
    )
    empty = b'{"status":"success","data":{"resultType":"vector","result":[]}}'
    too_many = b'{"status":"error","errorType":"execution","error":"query processing would load too many samples"}'

    def answer() -> tuple[int, str, bytes]:
        query = stub.requests[-1].body.decode()
        if "container_cpu_" in query:
            return 422, "application/json", too_many
        return 200, "application/json", node_info if "query=kube_node_info&" in query else empty

    with _stub(answer) as stub:
        cluster, _ = register_cluster("prom", "prometheus", prometheus_url=stub.url("/prefix"))
        run = collect_once(cluster)

    assert (run.status, run.nodes_total, run.nodes_failed) == (CollectionRun.Status.FAILED, 2, 2)
    for result in run.node_results.all():
        assert "HTTP 422" in result.error and "too many samples" in result.error
    assert sum(1 for r in stub.requests if b"container_cpu_" in r.body) == 1
    assert Node.objects.filter(cluster=cluster).count() == 2  # the inventory was stored all the same


def test_a_url_that_is_not_http_is_refused_before_any_request():
    with pytest.raises(SourceUnavailable, match=r"'ftp://prom:9090' is not an http:// or https:// URL"):
        PrometheusAdapter(Cluster(name="x", source="prometheus", prometheus_url="ftp://prom:9090"))


# ------------------------------------------------------------------------------------------ a real Prometheus


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_two_cycles_store_the_counters_prometheus_scraped_and_their_exact_deltas(serve):
    served = serve("k8s-1.33-minikube")
    playback, steps = served.playback, served.playback.steps
    cluster, _ = register_cluster("prom", "prometheus", prometheus_url=served.prometheus.url)

    first = collect_once(cluster)
    time.sleep(2.5)  # Prometheus scrapes every second: the counters advance two or three steps
    second = collect_once(cluster)

    for run in (first, second):
        assert (run.status, run.nodes_total, run.nodes_ok) == (CollectionRun.Status.OK, 1, 1)
    stored = samples_by_container(cluster)
    assert set(stored) == playback.containers()
    for (namespace, pod, container), samples in stored.items():
        assert len(samples) == 2
        # Each stored instant is the stamp of a body the exporter served; the values are that body's.
        served_n = [playback.served[ms(s.ts)] for s in samples]
        assert served_n[1] > served_n[0]
        for sample, n in zip(samples, served_n, strict=True):
            for family, (field, step_name) in FIELDS.items():
                try:
                    recorded = playback.recorded(family, namespace, pod, container)
                except KeyError:  # no CFS series: the container has no limit
                    assert getattr(sample, field) is None
                    continue
                assert getattr(sample, field) == pytest.approx(recorded + n * getattr(steps, step_name), rel=1e-12)
        earlier, later = samples
        steps_between = served_n[1] - served_n[0]
        assert later.interval_s == pytest.approx((later.ts - earlier.ts).total_seconds())
        assert later.usage_seconds_delta == pytest.approx(steps_between * steps.usage_seconds)
        if later.periods_total is not None:
            assert later.periods_delta == steps_between * steps.periods
            assert later.throttled_periods_delta == steps_between * steps.throttled_periods
            assert later.throttled_seconds_delta == pytest.approx(steps_between * steps.throttled_seconds)

    # The inventory comes from kube-state-metrics: kube_node_info and the php-apache limit line (0.5 core).
    node = Node.objects.get(cluster=cluster)
    assert (node.name, node.kernel_version, node.capacity_mcpu) == ("datagen-1-33", "6.10.14-linuxkit", 10_000)
    assert node.has_cfs_counters is True
    php = Container.objects.get(pod__cluster=cluster, name="php-apache")
    assert (php.limit_mcpu, php.pod.workload_kind, php.pod.workload_name) == (500, "Deployment", "e2e-hpa")


PRESSURE = {
    "container_pressure_cpu_waiting_seconds_total": ("pressure_waiting_seconds_total", "pressure_waiting_seconds"),
    "container_pressure_cpu_stalled_seconds_total": ("pressure_stalled_seconds_total", "pressure_stalled_seconds"),
}


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_cpu_pressure_through_prometheus_is_the_scraped_lines_and_their_deltas(serve):
    """The real 1.34 capture (cgroup v2, PSI on) behind a real Prometheus: each container's pressure totals are the
    body's lines, the deltas the exporter's steps, and the window shows pressure per second."""
    served = serve("k8s-1.34-minikube-psi")
    playback, steps = served.playback, served.playback.steps
    cluster, _ = register_cluster("prom", "prometheus", prometheus_url=served.prometheus.url)

    collect_once(cluster)
    time.sleep(2.5)
    second = collect_once(cluster)

    assert (second.status, second.nodes_ok) == (CollectionRun.Status.OK, 1)
    checked = 0
    for (namespace, pod, container), samples in samples_by_container(cluster).items():
        later = samples[1]
        served_n = [playback.served[ms(s.ts)] for s in samples]
        for sample, n in zip(samples, served_n, strict=True):
            for family, (field, step_name) in PRESSURE.items():
                recorded = playback.recorded(family, namespace, pod, container)
                assert getattr(sample, field) == pytest.approx(recorded + n * getattr(steps, step_name), rel=1e-12)
        between = served_n[1] - served_n[0]
        assert later.pressure_waiting_seconds_delta == pytest.approx(between * steps.pressure_waiting_seconds)
        assert later.pressure_stalled_seconds_delta == pytest.approx(between * steps.pressure_stalled_seconds)
        checked += 1
    assert checked >= 10
    assert Node.objects.get(cluster=cluster).has_pressure is True
    assert Node.objects.filter(cluster__name="prom", has_pressure=False).count() == 0
    # PSI exists on cgroup v2 only; Prometheus carries no spec shares here, so the mapping stays unknown.
    node = Node.objects.get(cluster=cluster)
    assert (node.cgroup_version, node.weight_mapping) == (2, "") and "PSI" in node.cgroup_evidence
    # The pod cgroups' own CFS series came in the same query and are stored as the pods' own (not advancing in the
    # playback, so equal to the recorded lines): e.g. e2e-container-creating, 43 of 59 periods, no container series.
    pod_cgroups = Sample.objects.filter(container__pod__cluster=cluster, container__name=POD_CGROUP)
    assert pod_cgroups.values("container").distinct().count() == 8
    for sample in pod_cgroups.select_related("container__pod"):
        owner = sample.container.pod
        for family, (field, _) in FIELDS.items():
            if field != "usage_seconds_total":
                recorded = playback.recorded(family, owner.namespace, owner.name, POD_CGROUP)
                assert getattr(sample, field) == pytest.approx(recorded), (owner.name, field)
    creating = pod_cgroups.filter(container__pod__name="e2e-container-creating").latest("ts")
    assert (creating.throttled_periods_total, creating.periods_total) == (43, 59)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_prometheus_without_pressure_series_says_the_node_exports_none(serve):
    served = serve("k8s-1.33-minikube")
    cluster, _ = register_cluster("prom", "prometheus", prometheus_url=served.prometheus.url)
    collect_once(cluster)
    assert Node.objects.get(cluster=cluster).has_pressure is False
    assert not Sample.objects.filter(container__pod__cluster=cluster, pressure_waiting_seconds_total__isnull=False)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_stored_deltas_equal_prometheus_increase_over_the_same_interval(serve):
    """Prometheus' increase() over [t1, t2] is the raw difference t2 − t1 only when the window starts and ends on
    samples: it extrapolates the sampled span to the window's edges (when the gap is under 1.1 × the average sample
    spacing), scaling the difference by window / sampled span. Prometheus 2.x includes a sample exactly at the window
    start (3.x does not: there the aligned window needs 1 ms more). A window 0.4 s longer than the span therefore gives
    exactly delta × (span + 0.4) / span — the gap between cputune's deltas and the kubernetes-mixin's figures.
    """
    served = serve("k8s-1.33-minikube")
    cluster, _ = register_cluster("prom", "prometheus", prometheus_url=served.prometheus.url)
    collect_once(cluster)
    time.sleep(2.5)
    collect_once(cluster)
    adapter = PrometheusAdapter(cluster)

    checked = 0
    for key, (earlier, later) in samples_by_container(cluster).items():
        if later.periods_total is None:
            continue
        assert later.periods_delta is not None and later.throttled_periods_delta is not None
        span_s = (later.ts - earlier.ts).total_seconds()
        aligned = adapter.throttle_figures(span_s, at=later.ts)[key]
        assert aligned.periods == later.periods_delta
        assert aligned.throttled_periods == later.throttled_periods_delta
        assert aligned.throttled_seconds == pytest.approx(later.throttled_seconds_delta, rel=1e-9)
        assert aligned.throttle_ratio == pytest.approx(later.throttled_periods_delta / later.periods_delta)

        wider = adapter.throttle_figures(span_s + 0.4, at=later.ts)[key]
        assert wider.periods == pytest.approx(later.periods_delta * (span_s + 0.4) / span_s, rel=1e-9)
        assert wider.periods is not None and wider.periods > later.periods_delta

        lifetime = adapter.throttle_figures(None, at=later.ts)[key]
        assert (lifetime.periods, lifetime.throttled_periods) == (later.periods_total, later.throttled_periods_total)
        assert lifetime.window_s is None
        checked += 1
    assert checked == 7  # the CFS containers of the 1.33 capture (grep -c 'cfs_periods_total{container="[^"]')


@pytest.mark.slow
@pytest.mark.parametrize("name", list(RECORDED))
def test_every_reading_equals_the_scrape_parsers_reading_of_the_served_text(serve, name):
    served = serve(name)
    adapter = PrometheusAdapter(served.cluster())

    readings, problems = adapter.cluster_readings(datetime.now(UTC))
    pod_cgroups = {(r.namespace, r.pod): r for r in readings if r.container == POD_CGROUP}
    readings = [r for r in readings if r.container != POD_CGROUP]

    assert readings and problems == []
    timed = served.playback.timed
    for reading in readings:
        if timed:  # the body Prometheus scraped, identified by its stamp, parsed again
            n = served.playback.served[ms(reading.ts)]
            body = served.playback.body(n, ms(reading.ts))
        else:  # no stamps: Prometheus used its scrape time; nothing advances in this capture
            body = served.playback.body(0, 0)
        parsed = {(r.namespace, r.pod, r.container): r for r in parse_cadvisor(body, default_ts=reading.ts).readings}
        assert_same_reading(reading, parsed.pop((reading.namespace, reading.pod, reading.container)), compare_ts=timed)
    scrape = parse_cadvisor(body, default_ts=datetime.now(UTC))
    assert {(r.namespace, r.pod, r.container) for r in readings} == {
        (r.namespace, r.pod, r.container) for r in scrape.readings
    }
    # The pod cgroups with a quota: the same CFS counters as the parser reads (Prometheus is asked for those only).
    # Only the current label scheme is asked: the pre-1.16 capture (pod_name, container_name) gives none.
    wanted = {(r.namespace, r.pod): r for r in scrape.pod_quota_readings()}
    if name == "gke-2018-cos-docker":
        assert pod_cgroups == {}
        return
    assert pod_cgroups.keys() == wanted.keys()
    for key, got in pod_cgroups.items():
        want = wanted[key]
        assert (got.periods_total, got.throttled_periods_total) == (want.periods_total, want.throttled_periods_total)
        assert got.throttled_seconds_total == pytest.approx(want.throttled_seconds_total, rel=1e-12)


@pytest.mark.slow
def test_a_dead_cgroup_next_to_its_restarted_successor_is_not_counted(serve):
    served = serve(RESTARTED)

    readings, problems = PrometheusAdapter(served.cluster()).cluster_readings(datetime.now(UTC))

    php = [r for r in readings if r.container == "php-apache"]
    assert len(php) == 1
    n = served.playback.served[ms(php[0].ts)]
    assert php[0].periods_total == 9 + n * served.playback.steps.periods  # the live cgroup's 9 periods, not 5009
    assert any("php-apache: 2 cgroups report this container" in p and LIVE_PHP_ID in p for p in problems)
    parsed = parse_cadvisor(served.playback.body(n, ms(php[0].ts)), default_ts=php[0].ts)
    assert_same_reading(php[0], next(r for r in parsed.readings if r.container == "php-apache"))


@pytest.mark.slow
@pytest.mark.parametrize("version", ["1.20", "1.31", "1.33"])
def test_the_inventory_from_kube_state_metrics_matches_the_api_objects(serve, version):
    folder = FIXTURES / "clusters" / f"k8s-{version}-minikube"
    served = serve(folder.name)

    inventory = PrometheusAdapter(served.cluster()).inventory()

    nodes, _ = nodes_from_objects(list_items(yaml.safe_load((folder / "nodes.yaml").read_text())))
    pod_objects = list_items(yaml.safe_load((folder / "pods.yaml").read_text()))
    live = [p for p in pod_objects if p["status"]["phase"] not in ("Succeeded", "Failed")]
    pods, _ = pods_from_objects(live)
    assert inventory.nodes == nodes
    from_api = {(p.namespace, p.name): p for p in pods}
    from_ksm = {(p.namespace, p.name): p for p in inventory.pods}
    assert from_api.keys() == from_ksm.keys()
    api_uid = {(p["metadata"]["namespace"], p["metadata"]["name"]): p["metadata"]["uid"] for p in live}
    for key, api in from_api.items():
        ksm = from_ksm[key]
        if api.workload_kind == "StaticPod":
            # kube-state-metrics shows the mirror pod's API uid; the API objects' cgroup uid is the config hash.
            assert ksm.uid == api_uid[key] != api.uid
            ksm = dataclasses.replace(ksm, uid=api.uid)
        if key == ("scraper", "e2e-container-pending"):
            # Unscheduled, no resources, no status: kube-state-metrics has no series naming its container.
            assert ksm.containers == () and len(api.containers) == 1
            ksm = dataclasses.replace(ksm, containers=api.containers)
        assert ksm == api, key


@pytest.mark.slow
def test_the_older_kube_state_metrics_names_give_the_same_inventory(serve):
    """kube-state-metrics 1.x named CPU and memory per resource (`kube_pod_container_resource_requests_cpu_cores`,
    `kube_node_status_allocatable_cpu_cores`, … — release-1.9 docs) and had no QoS series: the 1.33 capture rewritten
    that way must give the same pods, QoS classes derived from requests and limits."""
    served = serve("k8s-1.33-minikube")
    adapter = PrometheusAdapter(served.cluster())
    current = adapter.inventory()
    assert served.ksm is not None
    old = _as_kube_state_metrics_1x(served.ksm.decode())
    served.swap_ksm(old.encode())
    try:
        served.prometheus.wait_for("kube_pod_container_resource_limits_cpu_cores")
        _wait_gone(served.prometheus, "kube_pod_status_qos_class")
        older = PrometheusAdapter(served.cluster()).inventory()
    finally:
        served.swap_ksm(served.ksm)
        served.prometheus.wait_for("kube_pod_status_qos_class")
    assert older.nodes == current.nodes
    assert older.pods == current.pods


def _as_kube_state_metrics_1x(text: str) -> str:
    out = []
    resource = re.compile(
        r'^(kube_pod_container_resource_(?:requests|limits)|kube_node_status_(?:allocatable|capacity))\{(.*),resource="([a-z_]+)",unit="[a-z]+"\}(.*)$'
    )
    for line in text.splitlines():
        if line.startswith("kube_pod_status_qos_class"):
            continue
        match = resource.match(line)
        if match:
            name, labels, kind, rest = match.groups()
            if kind not in ("cpu", "memory"):
                continue
            line = f"{name}_{'cpu_cores' if kind == 'cpu' else 'memory_bytes'}{{{labels}}}{rest}"
        out.append(line)
    return "\n".join(out) + "\n"


def _wait_gone(prometheus: PrometheusServer, promql: str, timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while prometheus.query(promql):
        assert time.monotonic() < deadline, f"{promql} still answers after {timeout_s} s"
        time.sleep(0.1)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_node_without_cadvisor_series_fails_alone_and_the_others_are_stored(serve):
    served = serve("k8s-1.33-minikube")
    assert served.ksm is not None
    ghost = (
        'kube_node_info{node="ghost-node",kernel_version="6.1.0",os_image="Debian",'
        'container_runtime_version="containerd://1.7",kubelet_version="v1.33.0"} 1\n'
        'kube_pod_info{namespace="shop",pod="web-1",uid="0d0e",node="ghost-node",created_by_kind="",created_by_name=""} 1\n'
        'kube_pod_status_phase{namespace="shop",pod="web-1",uid="0d0e",phase="Running"} 1\n'
        'kube_pod_container_info{namespace="shop",pod="web-1",uid="0d0e",container="web",container_id="containerd://ab"} 1\n'
    )
    served.swap_ksm(served.ksm + ghost.encode())
    cluster, _ = register_cluster("prom", "prometheus", prometheus_url=served.prometheus.url)
    try:
        served.prometheus.wait_for('kube_pod_container_info{pod="web-1"}')
        run = collect_once(cluster)
        with pytest.raises(
            NodeScrapeError, match=r"node ghost-node: .*no cAdvisor series for any of the 1 running pod"
        ):
            PrometheusAdapter(cluster).read_node("ghost-node", datetime.now(UTC))  # a per-node task says the same
    finally:
        served.swap_ksm(served.ksm)
        _wait_gone(served.prometheus, 'kube_node_info{node="ghost-node"}')

    assert (run.status, run.nodes_ok, run.nodes_failed) == (CollectionRun.Status.PARTIAL, 1, 1)
    failure = run.node_results.get(ok=False)
    assert failure.node == "ghost-node"
    assert "is this node's kubelet /metrics/cadvisor scraped" in failure.error
    assert set(Sample.objects.values_list("container__pod__node__name", flat=True).distinct()) == {"datagen-1-33"}


@pytest.mark.slow
def test_a_node_task_on_a_fresh_adapter_reads_what_the_whole_cycle_reads(serve):
    served = serve("k8s-1.33-minikube")
    at = datetime.now(UTC)
    cycle = PrometheusAdapter(served.cluster())
    cycle.inventory()

    whole = cycle.read_node("datagen-1-33", at)
    alone = PrometheusAdapter(served.cluster()).read_node("datagen-1-33", at)

    assert len(whole.readings) == len(served.playback.containers())
    assert alone.readings == whole.readings
    assert alone.has_cfs_counters is whole.has_cfs_counters is True
    # A node kube-state-metrics does not know has nothing to read, and nothing is wrong with it.
    assert cycle.read_node("no-such-node", at).readings == []


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_kubelet_without_cfs_series_is_reported_not_stored_as_zero(serve):
    served = serve("k8s-1.20-minikube")
    cluster, _ = register_cluster("prom", "prometheus", prometheus_url=served.prometheus.url)

    run = collect_once(cluster)

    assert run.status == CollectionRun.Status.OK
    assert Node.objects.get(cluster=cluster).has_cfs_counters is False
    assert any("no container_cpu_cfs_* series" in p.message for p in run.problems.all())
    samples = Sample.objects.filter(container__pod__cluster=cluster)
    assert samples.count() > 10
    assert not samples.filter(periods_total__isnull=False).exists()
    assert not samples.filter(usage_seconds_total__isnull=True).exists()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_dump_and_prometheus_store_the_same_numbers_for_the_same_scrape(serve, tmp_path):
    served = serve("k8s-1.33-minikube")
    folder = FIXTURES / "clusters" / "k8s-1.33-minikube"
    cluster, _ = register_cluster("from-prometheus", "prometheus", prometheus_url=served.prometheus.url)
    collect_once(cluster)
    stamps = set(Sample.objects.filter(container__pod__cluster=cluster).values_list("ts", flat=True))
    assert len(stamps) == 1
    stamp_ms = ms(stamps.pop())
    scrape = tmp_path / "cadvisor.txt"
    scrape.write_bytes(served.playback.body(served.playback.served[stamp_ms], stamp_ms))  # what Prometheus scraped

    import_dump("from-dump", folder / "nodes.yaml", folder / "pods.yaml", {"datagen-1-33": scrape})

    def counters(name: str) -> dict[tuple, tuple]:
        # Containers only: both store the pod cgroups too, but this source reads only their CFS counters.
        samples = Sample.objects.filter(container__pod__cluster__name=name).exclude(container__name=POD_CGROUP)
        rows = samples.values_list(
            "container__pod__namespace", "container__pod__name", "container__name", "ts", "periods_total",
            "throttled_periods_total", "throttled_seconds_total", "usage_seconds_total", "threads",
        )  # fmt: skip
        return {row[:3]: row[3:] for row in rows}

    def containers(name: str) -> set[tuple]:
        return set(
            Container.objects.filter(pod__cluster__name=name).values_list(
                "pod__namespace", "pod__name", "pod__qos_class", "pod__workload_kind", "pod__workload_name",
                "pod__node__name", "name", "container_id", "request_mcpu", "limit_mcpu", "restarts",
            )
        )  # fmt: skip

    assert counters("from-prometheus") == counters("from-dump")
    assert len(counters("from-dump")) == len(served.playback.containers())
    only_in_dump = containers("from-dump") - containers("from-prometheus")
    assert {(row[1], row[6]) for row in only_in_dump} == {("e2e-container-pending", "alpine")}
    assert containers("from-prometheus") <= containers("from-dump")


@pytest.mark.slow
def test_a_prometheus_that_does_not_scrape_kube_state_metrics_is_unavailable(serve):
    served = serve("kind-1.16-containerd")
    with pytest.raises(SourceUnavailable, match=r"has no kube_node_info series: does it scrape kube-state-metrics"):
        PrometheusAdapter(served.cluster()).inventory()


def test_without_owner_series_deployments_are_named_from_the_hash_and_sidecars_are_kept():
    """Label shapes as kube-state-metrics documents them (docs/pod-metrics.md); no kube_replicaset_owner series,
    no QoS series: the rules the API objects would give still hold."""
    pod = {"namespace": "shop", "pod": "web-7d4b9c8f6d-x2x9q", "uid": "1f0c", "node": "n1"}
    bare_rs = {"namespace": "shop", "pod": "legacy-frontend-4kq2z", "uid": "2a1d", "node": "n1"}

    def c(labels: dict[str, str], container: str, value: float = 1, **extra: str) -> VectorSample:
        return VectorSample({**labels, "container": container, **extra}, value)

    vectors = {
        "node_info": [VectorSample({"node": "n1", "kernel_version": "6.1.0-18-amd64"}, 1)],
        "allocatable": [VectorSample({"node": "n1"}, 3.9)],
        "pod_info": [
            VectorSample({**pod, "created_by_kind": "ReplicaSet", "created_by_name": "web-7d4b9c8f6d"}, 1),
            VectorSample({**bare_rs, "created_by_kind": "ReplicaSet", "created_by_name": "legacy-frontend"}, 1),
        ],
        "container_info": [c(pod, "app", container_id="containerd://aa11"), c(bare_rs, "nginx")],
        "sidecar_info": [c(pod, "proxy", container_id="containerd://bb22", restart_policy="Always")],
        "requests": [c(pod, "app", 0.25, resource="cpu"), c(pod, "app", 2**27, resource="memory")],
        "limits": [c(pod, "app", 0.25, resource="cpu"), c(pod, "app", 2**27, resource="memory")],
        "init_limits": [c(pod, "proxy", 0.1, resource="cpu"), c(pod, "proxy", 2**25, resource="memory")],
    }

    nodes, pods, problems = inventory_from_vectors(vectors)

    assert problems == []
    assert [(n.name, n.allocatable_mcpu, n.capacity_mcpu) for n in nodes] == [("n1", 3900, None)]
    web, legacy = sorted(pods, key=lambda p: p.name, reverse=True)
    assert (web.workload_kind, web.workload_name) == ("Deployment", "web")
    # The sidecar comes first, as the kubelet starts it; its request defaults to its limit; every container has
    # equal CPU and memory requests and limits, so the pod is Guaranteed.
    assert [(x.name, x.request_mcpu, x.limit_mcpu, x.container_id) for x in web.containers] == [
        ("proxy", 100, 100, "bb22"),
        ("app", 250, 250, "aa11"),
    ]
    assert web.qos_class == "Guaranteed"
    # "frontend" is no pod-template-hash (vowels are not in its alphabet): the ReplicaSet stays the workload.
    assert (legacy.workload_kind, legacy.workload_name, legacy.qos_class) == (
        "ReplicaSet",
        "legacy-frontend",
        "BestEffort",
    )


@pytest.mark.django_db
def test_every_counter_family_of_a_cycle_comes_from_one_query_so_from_one_scrape(serve):
    """Each family queried apart let a scrape land between two queries: a reading got the timestamp of one scrape
    and the values of the previous one (seen as 92 where the served body said 102). One query, evaluated against one
    view of Prometheus' head, cannot mix scrapes; its answer still holds every family."""
    from apps.collector.sources.prometheus.client import PrometheusClient
    from apps.collector.sources.prometheus.convert import COUNTER_QUERIES
    from apps.collector.sources.prometheus.source import PrometheusAdapter

    served = serve("k8s-1.33-minikube")
    cluster, _ = register_cluster("prom-one-query", "prometheus", prometheus_url=served.prometheus.url)
    adapter = PrometheusAdapter(cluster)
    asked: list[str] = []
    real_query = PrometheusClient.query

    def counted(self, promql, at):
        asked.append(promql)
        return real_query(self, promql, at)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(PrometheusClient, "query", counted)
        readings, _ = adapter.cluster_readings(datetime.now(UTC))
    assert len(asked) == 1 and all(f'"{family}"' in asked[0] for family in COUNTER_QUERIES)
    with_cfs = [r for r in readings if r.periods_total is not None and r.container != POD_CGROUP]
    assert with_cfs and all(
        r.throttled_periods_total is not None and r.usage_seconds_total is not None for r in with_cfs
    )
    pod_cgroups = [r for r in readings if r.container == POD_CGROUP]  # their CFS counters only
    assert pod_cgroups and all(r.throttled_periods_total is not None for r in pod_cgroups)
