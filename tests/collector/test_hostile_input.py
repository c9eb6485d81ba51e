"""Hostile input through the real pipeline: the API-server stand-in, the real Kubernetes client, the cAdvisor parser
and the ingest into the database (`collect_once`). Every hostile thing ends as a clear problem on the run, the rest is
stored, and the worker neither crashes nor needs memory out of proportion to what it keeps.

Memory is measured in a subprocess (a peak is only honest in a process of its own): the peak resident set while one
node is read or the inventory listed, above the resident set just before. Bounds are stated where they are used.
"""

from __future__ import annotations

import copy
import gzip
import itertools
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from hypothesis import given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from apps.advisor.models import Finding
from apps.api.services import create_token
from apps.clusters.models import POD_CGROUP, Container, Node, Pod
from apps.clusters.services import register_cluster
from apps.collector.cadvisor import MAX_LINE_BYTES
from apps.collector.models import CollectionRun
from apps.collector.services import collect_once
from apps.collector.sources.kubernetes import client as kubernetes_source
from apps.collector.sources.kubernetes.client import MAX_SCRAPE_BYTES, MAX_SCRAPE_LINE_BYTES
from apps.dashboard.selectors import pod_detail
from apps.telemetry.models import Sample
from standins.apiserver import ApiServerStandin, ClusterObjects, Faults

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "clusters" / "k8s-1.33-minikube"
REAL = ClusterObjects.from_fixture(FIXTURE)
REAL_NODE = REAL.nodes[0]["metadata"]["name"]  # datagen-1-33
REAL_SCRAPE = REAL.scrapes[REAL_NODE]
HOSTILE_NODE = "hostile-node"
# The php-apache container of the fixture's HPA pod is the template of every synthetic container: its 49 real
# series (every cAdvisor family, in the kubelet's order and format) and its pod object. Its figures, read off the
# fixture's text by hand: 9 periods, 3 of them throttled, 6 threads, quota 50000 µs per 100000 µs.
HPA_NAME = "e2e-hpa-87b6cf96-2rdfp"
HPA_POD = next(p for p in REAL.pods if p["metadata"]["name"] == HPA_NAME)
HPA_CID = HPA_POD["status"]["containerStatuses"][0]["containerID"].split("://")[1]
HPA_LINES = [line for line in REAL_SCRAPE.decode().splitlines() if 'container="php-apache"' in line]
HPA_PERIODS, HPA_THROTTLED, HPA_THREADS = 9, 3, 6
_serial = itertools.count()


# --- building hostile clusters from the real one ---------------------------------------------------------------------


def escape(value: str) -> str:
    """A label value as the exposition format writes it: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def container_series(namespace: str, pod: str, container: str, cid: str = HPA_CID) -> str:
    """The real php-apache series relabelled for another container (label values escaped as cAdvisor does)."""
    text = "\n".join(HPA_LINES) + "\n"
    text = text.replace(HPA_CID, cid)
    text = text.replace('container="php-apache"', f'container="{escape(container)}"')
    text = text.replace('namespace="scraper"', f'namespace="{escape(namespace)}"')
    return text.replace(f'pod="{HPA_NAME}"', f'pod="{escape(pod)}"')


def pod_object(
    namespace: str, name: str, containers: list[str], node: str = HOSTILE_NODE, cpu_limit: Any = "500m"
) -> dict[str, Any]:
    """The fixture's HPA pod object renamed, with one php-apache-like container per name (200m request)."""
    pod = copy.deepcopy(HPA_POD)
    pod["metadata"].update(name=name, namespace=namespace, uid=f"00000000-0000-4000-8000-{next(_serial):012d}")
    pod["spec"]["nodeName"] = node
    template, status = pod["spec"]["containers"][0], pod["status"]["containerStatuses"][0]
    resources = {"requests": {"cpu": "200m"}, "limits": {"cpu": cpu_limit}}
    pod["spec"]["containers"] = [{**copy.deepcopy(template), "name": c, "resources": resources} for c in containers]
    pod["status"]["containerStatuses"] = [
        {**copy.deepcopy(status), "name": c, "resources": resources} for c in containers
    ]
    return pod


def node_object(name: str) -> dict[str, Any]:
    node = copy.deepcopy(REAL.nodes[0])
    node["metadata"]["name"] = name
    return node


def with_hostile_node(scrape: bytes, pods: list[dict[str, Any]], node: str = HOSTILE_NODE) -> ClusterObjects:
    """The real recorded node with its pods and scrape, plus a second node serving `scrape` for `pods`."""
    return ClusterObjects(
        nodes=[*REAL.nodes, node_object(node)],
        pods=[*REAL.pods, *pods],
        scrapes={REAL_NODE: REAL_SCRAPE, node: scrape},
    )


def shop(*names: str) -> tuple[bytes, list[dict[str, Any]]]:
    """Pods `names` of namespace shop, one container `app` each: their scrape and their objects."""
    scrape = "".join(container_series("shop", name, "app") for name in names).encode()
    return scrape, [pod_object("shop", name, ["app"]) for name in names]


def collect(
    objects: ClusterObjects, tmp_path: Path, faults: Faults | None = None, refresh: bool = False, **standin: Any
) -> CollectionRun:
    """One whole collection cycle of `objects` through the stand-in and the real client."""
    with ApiServerStandin(objects, faults, **standin) as server:
        kubeconfig = server.write_kubeconfig(tmp_path / f"kubeconfig-{next(_serial)}")
        cluster, _ = register_cluster(f"hostile-{next(_serial)}", "kubernetes", kubeconfig_path=str(kubeconfig))
        return collect_once(cluster, refresh=refresh)


def problems(run: CollectionRun, node: str = HOSTILE_NODE) -> list[str]:
    return list(run.problems.filter(node=node).values_list("message", flat=True))


def node_error(run: CollectionRun, node: str = HOSTILE_NODE) -> str:
    return run.node_results.get(node=node).error


def stored(run: CollectionRun, node: str = HOSTILE_NODE) -> dict[tuple[str, str, str], tuple[int | None, int | None]]:
    """(namespace, pod, container) → (periods, threads) of the samples stored for the node's containers."""
    samples = Sample.objects.filter(container__pod__cluster=run.cluster, container__pod__node__name=node)
    rows = samples.exclude(container__name=POD_CGROUP).values_list(
        "container__pod__namespace", "container__pod__name", "container__name", "periods_total", "threads"
    )
    return {(ns, pod, c): (periods, threads) for ns, pod, c, periods, threads in rows}


def assert_real_node_stored(run: CollectionRun) -> None:
    """The recorded node was read as usual next to the hostile one: php-apache's figures as the kubelet gave them."""
    assert run.node_results.get(node=REAL_NODE).ok
    assert stored(run, REAL_NODE)[("scraper", HPA_NAME, "php-apache")] == (HPA_PERIODS, HPA_THREADS)


def api_reader(username: str) -> APIClient:
    """An API client holding a read token of a new user."""
    _, key = create_token(get_user_model().objects.create_user(username), "read")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return api


def api_rows(run: CollectionRun, namespace: str) -> list[tuple[str, str, str]]:
    """(namespace, pod, container) of the API's report rows for a namespace, as a client reads them."""
    response = api_reader(f"reader-{next(_serial)}").get(
        f"/api/v1/clusters/{run.cluster.name}/namespaces/{namespace}/containers/"
    )
    assert response.status_code == 200, response.content
    return [(row["namespace"], row["pod"], row["container"]) for row in response.json()["results"]]


def with_value(scrape: bytes, family: str, pod: str, value: str) -> bytes:
    """The scrape with the value of `family`'s line for `pod` replaced (its timestamp kept)."""
    line = re.compile(rb"^(%s\{[^\n]*pod=\"%s\"[^\n]*\} )(\S+)" % (family.encode(), pod.encode()), re.M)
    changed, count = line.subn(lambda match: match.group(1) + value.encode(), scrape, count=1)
    assert count == 1, f"no {family} line for {pod}"
    return changed


def line_number_of(body: bytes, fragment: bytes) -> int:
    return body[: body.index(fragment)].count(b"\n") + 1


# --- memory, measured in a subprocess ---------------------------------------------------------------------------------

_MEASURE = r"""
import json, re, sys, time, tracemalloc
import django

django.setup()
from datetime import UTC, datetime

from apps.clusters.models import Cluster
from apps.collector.sources.kubernetes.source import KubernetesAdapter


def status_kb(key):
    return int(re.search(key + r":\s+(\d+)", open("/proc/self/status").read()).group(1))


kubeconfig, what, node, warm_node = sys.argv[1:5]
adapter = KubernetesAdapter(Cluster(name="measured", kubeconfig_path=kubeconfig))
if warm_node:  # the first request's lazy imports and connection are not what is measured
    adapter.read_node(warm_node, datetime.now(UTC))
try:  # forget the peak so far (imports): the kernel resets VmHWM to the current resident set
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")
    tracing = False
except OSError:
    tracemalloc.start()
    tracing = True
before_kb = status_kb("VmRSS")
started = time.perf_counter()
if what == "node":
    read = adapter.read_node(node, datetime.now(UTC))
    result = {"readings": len(read.readings), "problems": read.problems}
else:
    inventory = adapter.inventory()
    result = {"pods": len(inventory.pods), "problems": inventory.problems[:5], "problem_count": len(inventory.problems)}
result["seconds"] = time.perf_counter() - started
grown_kb = tracemalloc.get_traced_memory()[1] / 1024 if tracing else status_kb("VmHWM") - before_kb
result["peak_mb"] = grown_kb / 1024
print(json.dumps(result))
"""


def measured(server: ApiServerStandin, tmp_path: Path, what: str, node: str = "", warm_node: str = "") -> dict:
    """Read `node` (what="node") or list the inventory (what="inventory") in a fresh process; its figures."""
    kubeconfig = server.write_kubeconfig(tmp_path / f"kubeconfig-{next(_serial)}")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "cputune.settings"}
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(kubeconfig), what, node, warm_node],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- 1. a 50 MB scrape ------------------------------------------------------------------------------------------------


def replicated_node(copies: int) -> tuple[bytes, list[dict[str, Any]]]:
    """The recorded node's pods `copies` times over on one node (each copy's pods prefixed `r<i>-`): the scrape (node-
    level series once, every pod's series per copy) and the pod objects."""
    lines = REAL_SCRAPE.split(b"\n")
    per_pod = [line for line in lines if re.search(rb'[{,]pod="[^"]', line)]
    node_level = [line for line in lines if line not in set(per_pod)]
    pod_text = b"\n".join(per_pod) + b"\n"
    scrape = (
        b"\n".join(node_level) + b"\n" + b"".join(pod_text.replace(b'pod="', b'pod="r%d-' % i) for i in range(copies))
    )
    pods = []
    for i in range(copies):
        for pod in REAL.pods:
            twin = copy.deepcopy(pod)
            twin["metadata"]["name"] = f"r{i}-{pod['metadata']['name']}"
            twin["metadata"]["uid"] = f"{i:08d}-{pod['metadata']['uid'][9:]}"
            twin["spec"]["nodeName"] = HOSTILE_NODE
            pods.append(twin)
    return scrape, pods


def containers_in(scrape: bytes) -> set[tuple[bytes, bytes, bytes]]:
    """(namespace, pod, container) of every real container with a usage series, found with a plain regex."""
    found = set()
    for labels in re.findall(rb"^container_cpu_usage_seconds_total\{(.*)\}", scrape, re.M):
        pairs = dict(re.findall(rb'(\w+)="([^"]*)"', labels))
        if pairs.get(b"pod") and pairs.get(b"container") not in (None, b"", b"POD"):
            found.add((pairs[b"namespace"], pairs[b"pod"], pairs[b"container"]))
    return found


BIG_COPIES = 40  # the recorded node's 19 running pods 40 times over: 760 pods on one node, 51 MB of scrape


@pytest.mark.slow
def test_a_51_mb_scrape_of_760_pods_on_one_node_is_parsed_and_every_container_stored(tmp_path: Path) -> None:
    scrape, pods = replicated_node(BIG_COPIES)
    assert 50_000_000 < len(scrape) < MAX_SCRAPE_BYTES

    run = collect(with_hostile_node(scrape, pods), tmp_path)

    assert run.status == CollectionRun.Status.OK, problems(run)
    expected = {(ns.decode(), pod.decode(), c.decode()) for ns, pod, c in containers_in(scrape)}
    assert len(expected) == BIG_COPIES * len(containers_in(REAL_SCRAPE))
    samples = stored(run)
    assert samples.keys() == expected
    assert {samples[("scraper", f"r{i}-{HPA_NAME}", "php-apache")] for i in range(BIG_COPIES)} == {
        (HPA_PERIODS, HPA_THREADS)
    }
    assert_real_node_stored(run)


@pytest.mark.slow
def test_reading_a_51_mb_scrape_needs_little_more_memory_than_the_scrape_itself(tmp_path: Path) -> None:
    """The parser works on the whole text, so holding the body once (1×) is the floor; its own structures grow with
    the containers (760 pods), not the bytes. 1.5× the body allows for the allocator; joining the chunks into a copy
    and decoding the body whole, as before, peaked at 1.94×."""
    scrape, pods = replicated_node(BIG_COPIES)
    with ApiServerStandin(with_hostile_node(scrape, pods)) as server:
        figures = measured(server, tmp_path, "node", HOSTILE_NODE, warm_node=REAL_NODE)

    print(f"\n51 MB scrape: read and parsed in {figures['seconds']:.2f} s, peak +{figures['peak_mb']:.0f} MB")
    assert figures["readings"] == BIG_COPIES * len(containers_in(REAL_SCRAPE))
    assert figures["peak_mb"] < 1.5 * len(scrape) / 2**20


@pytest.mark.slow
def test_a_scrape_over_the_64_mib_cap_fails_its_node_naming_the_cap_and_the_rest_is_stored(tmp_path: Path) -> None:
    scrape, pods = replicated_node(53)
    assert len(scrape) > MAX_SCRAPE_BYTES == 64 * 2**20

    run = collect(with_hostile_node(scrape, pods[: len(REAL.pods)]), tmp_path)

    assert run.status == CollectionRun.Status.PARTIAL
    assert "the answer is larger than 67108864 bytes (64 MiB), the most accepted" in node_error(run)
    assert stored(run) == {}
    assert_real_node_stored(run)


# --- 2. endless lines -------------------------------------------------------------------------------------------------


def test_a_line_of_a_million_labels_is_refused_by_its_number_and_the_rest_of_the_scrape_stored(tmp_path: Path) -> None:
    scrape, pods = shop("web-0", "web-1")
    monster = b"container_cpu_cfs_throttled_periods_total{" + b",".join(b'l%d="v"' % i for i in range(10**6)) + b"} 1\n"
    middle = scrape.index(b"container_cpu_usage_seconds_total", scrape.index(b'pod="web-1"'))
    body = scrape[:middle] + monster + scrape[middle:]

    run = collect(with_hostile_node(body, pods), tmp_path)

    number = line_number_of(body, monster)
    assert problems(run) == [
        f"line {number}: container_cpu_cfs_throttled_periods_total line longer than {MAX_LINE_BYTES} bytes, skipped"
    ]
    assert stored(run) == {("shop", "web-0", "app"): (9, 6), ("shop", "web-1", "app"): (9, 6)}
    assert_real_node_stored(run)


@pytest.mark.slow
@pytest.mark.parametrize("gzipped", [False, True], ids=["plain", "gzip"])
def test_a_100_mb_line_is_cut_on_arrival_refused_by_its_number_and_costs_no_100_mb(
    tmp_path: Path, gzipped: bool
) -> None:
    """Gzipped, the 100 MB line travels as 0.4 MB: the client must not inflate it whole either."""
    scrape, pods = shop("web-0", "web-1")
    line = b'container_threads{namespace="shop",pod="web-0",container="app",id="' + b"x" * 100_000_000 + b'"} 7\n'
    middle = scrape.index(b"container_cpu_usage_seconds_total", scrape.index(b'pod="web-1"'))
    body = scrape[:middle] + line + scrape[middle:]
    del line
    number = line_number_of(body, b'container_threads{namespace="shop",pod="web-0",container="app",id="xx')

    with ApiServerStandin(with_hostile_node(body, pods), gzip_scrapes=gzipped) as server:
        figures = measured(server, tmp_path, "node", HOSTILE_NODE)
    run = collect(with_hostile_node(body, pods), tmp_path, gzip_scrapes=gzipped)

    # A line is kept up to MAX_SCRAPE_LINE_BYTES (128 KiB), so what is held is the other lines (35 KB) and that: the
    # bound leaves room for the first request's own costs, and is a sixth of the line it turns away.
    kind = "gzip" if gzipped else "plain"
    print(f"\n100 MB line, {kind}: {figures['seconds']:.2f} s, peak +{figures['peak_mb']:.1f} MB")
    assert figures["peak_mb"] < 16
    assert problems(run) == [f"line {number}: container_threads line longer than {MAX_LINE_BYTES} bytes, skipped"]
    assert stored(run) == {("shop", "web-0", "app"): (9, 6), ("shop", "web-1", "app"): (9, 6)}
    assert_real_node_stored(run)


def cut_reference(body: bytes, max_line_bytes: int) -> bytes:
    """What cutting long lines means, written the plain way: every line kept up to `max_line_bytes`."""
    return b"\n".join(line[:max_line_bytes] for line in body.split(b"\n"))


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(st.integers(min_value=0, max_value=40), max_size=12),
    unterminated=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=500), max_size=8),
    max_line_bytes=st.integers(min_value=1, max_value=12),
)
def test_long_lines_are_cut_the_same_whatever_the_chunks_they_arrive_in(
    lines: list[int], unterminated: bool, cuts: list[int], max_line_bytes: int
) -> None:
    body = b"".join(bytes([97 + i % 26]) * length + b"\n" for i, length in enumerate(lines))
    if unterminated:
        body += b"z" * 17
    chunks = [body[a:b] for a, b in itertools.pairwise([0, *sorted(c % (len(body) + 1) for c in cuts), len(body)])]

    cutter = kubernetes_source._LongLines(max_line_bytes)
    got = b"".join(cutter.feed(chunk) for chunk in chunks)

    assert got == cut_reference(body, max_line_bytes)


def test_long_lines_inside_big_chunks_are_found_however_they_fall_on_the_grid() -> None:
    limit = MAX_SCRAPE_LINE_BYTES
    rng = random.Random(7)
    for _ in range(40):
        lengths = [
            rng.choice([0, 10, 300, limit - 1, limit, limit + 1, 2 * limit + rng.randrange(999)]) for _ in range(8)
        ]
        body = b"".join(b"q" * length + b"\n" for length in lengths)
        cutter = kubernetes_source._LongLines(limit)
        got = b"".join(cutter.feed(body[i : i + 256 * 1024]) for i in range(0, len(body), 256 * 1024))
        assert got == cut_reference(body, limit)


def test_a_scrape_that_goes_on_past_what_is_read_fails_its_node_in_bounded_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cut lines cost no memory but still take time to receive: past MAX_SCRAPE_RECEIVED_BYTES (256 MiB, four times
    the cap; 2 MiB here) the read stops."""
    monkeypatch.setattr(kubernetes_source, "MAX_SCRAPE_RECEIVED_BYTES", 2 * 2**20)
    scrape, pods = shop("web-0")
    body = scrape + b"container_threads{" + b"x" * 3 * 2**20 + b"\n"

    run = collect(with_hostile_node(body, pods), tmp_path)

    assert "the answer goes on past 2097152 bytes" in node_error(run)
    assert_real_node_stored(run)


# --- 3. a pod of 500 containers ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_pod_of_500_containers_is_stored_advised_and_listed_page_by_page(tmp_path: Path) -> None:
    names = [f"worker-{i:03d}" for i in range(500)]
    scrape = "".join(
        container_series("batch", "wide-0", name, cid=f"{i:064x}") for i, name in enumerate(names)
    ).encode()

    run = collect(with_hostile_node(scrape, [pod_object("batch", "wide-0", names)]), tmp_path, refresh=True)

    assert run.status == CollectionRun.Status.OK, problems(run)
    pod = Pod.objects.get(cluster=run.cluster, namespace="batch", name="wide-0")
    assert sorted(pod.containers.values_list("name", flat=True)) == names
    assert set(pod.containers.values_list("request_mcpu", "limit_mcpu")) == {(200, 500)}
    assert stored(run) == {("batch", "wide-0", name): (HPA_PERIODS, HPA_THREADS) for name in names}
    assert Finding.objects.filter(container__pod=pod, window="1h").count() == 500
    assert len(pod_detail(pod).containers) == 500

    api = api_reader("wide")
    url = f"/api/v1/clusters/{run.cluster.name}/namespaces/batch/containers/?page_size=100"
    listed, pages = [], 0
    while url:
        page = api.get(url).json()
        assert page["count"] == 500
        listed += [row["container"] for row in page["results"]]
        url, pages = page["next"], pages + 1
    assert (pages, sorted(listed)) == (5, names)

    browser = Client()
    browser.force_login(get_user_model().objects.get(username="wide"))
    response = browser.get(f"/c/{run.cluster.name}/ns/batch/pod/wide-0/")
    assert response.status_code == 200
    html = response.content.decode()
    assert all(name in html for name in names)


# --- 4. names at (and past) the limits --------------------------------------------------------------------------------


def dns_subdomain(label: str) -> str:
    """The longest DNS subdomain Kubernetes accepts (253 characters): labels of 63 joined by dots, cut to fit."""
    return ".".join([(label * 63)[:63]] * 4)[:253]


NAMESPACE_63 = "n" * 63  # a DNS label
POD_253 = dns_subdomain("p")
CONTAINER_63 = "c" * 63
NODE_253 = dns_subdomain("node")


def test_names_at_the_kubernetes_length_limits_are_stored_whole(tmp_path: Path) -> None:
    assert (len(NAMESPACE_63), len(POD_253), len(CONTAINER_63), len(NODE_253)) == (63, 253, 63, 253)
    scrape = container_series(NAMESPACE_63, POD_253, CONTAINER_63).encode()
    pods = [pod_object(NAMESPACE_63, POD_253, [CONTAINER_63], node=NODE_253)]

    run = collect(with_hostile_node(scrape, pods, node=NODE_253), tmp_path, refresh=True)

    assert run.status == CollectionRun.Status.OK, problems(run, NODE_253)
    assert stored(run, NODE_253) == {(NAMESPACE_63, POD_253, CONTAINER_63): (HPA_PERIODS, HPA_THREADS)}
    assert run.node_results.get(node=NODE_253).ok
    assert api_rows(run, NAMESPACE_63) == [(NAMESPACE_63, POD_253, CONTAINER_63)]


UNICODE_NAMESPACE = "ns-日本-🙂"
UNICODE_POD = "pod-שלום-עולם-中文-🚀"  # Hebrew runs right to left
ESCAPED_CONTAINER = 'say "hi"\\n or \\ back\nslash'  # a quote, a backslash before n, a backslash, a newline


def test_names_no_kubernetes_cluster_can_have_are_refused_with_a_problem_each(tmp_path: Path) -> None:
    """Kubernetes names are DNS names, so only a broken or forged source sends these: they would break URLs,
    headers and downloads further on. Each reading is refused with a problem naming it (escaped); the rest stored."""
    scrape = (
        container_series("shop", "web-0", "app") + container_series(UNICODE_NAMESPACE, UNICODE_POD, ESCAPED_CONTAINER)
    ).encode()
    assert b'container="say \\"hi\\"\\\\n or \\\\ back\\nslash"' in scrape  # as the exposition format writes it

    run = collect(with_hostile_node(scrape, []), tmp_path, refresh=True)

    assert stored(run) == {("shop", "web-0", "app"): (HPA_PERIODS, HPA_THREADS)}
    [problem] = [p for p in problems(run) if UNICODE_NAMESPACE in p]
    assert problem.startswith(f'reading of {UNICODE_NAMESPACE}/{UNICODE_POD}/say "hi"\\n or \\ back\\nslash: namespace')
    assert problem.endswith(
        "is not a Kubernetes namespace name (lowercase letters, digits and '-', at most 63 characters); not stored"
    )
    assert not Pod.objects.filter(cluster=run.cluster, namespace=UNICODE_NAMESPACE).exists()


def test_values_past_the_column_limits_are_refused_each_with_a_problem_and_the_rest_stored(tmp_path: Path) -> None:
    """Garbage from a broken source: PostgreSQL refuses such a value and aborts the transaction it is in, which took
    the whole inventory (or the node's readings) down with it. Now each is refused on its own; a value that does not
    name anything (a kernel version) is stored as unknown instead."""
    long_namespace, long_pod, long_container, long_node = "n" * 64, "p" * 254, "c" * 254, "m" * 254
    scrape = (
        container_series("shop", "web-0", "app")
        + container_series(long_namespace, "web-1", "app")
        + container_series("shop", long_pod, "app")
        + container_series("shop", "web-2", long_container)
    ).encode()
    pods = [
        pod_object("shop", "web-0", ["app"]),
        pod_object(long_namespace, "web-1", ["app"]),
        pod_object("shop", long_pod, ["app"]),
        pod_object("shop", "web-2", [long_container, "sidecar"]),
    ]
    objects = with_hostile_node(scrape, pods)
    objects.nodes[1]["status"]["nodeInfo"]["kernelVersion"] = "k" * 300
    objects.nodes.append(node_object(long_node))

    run = collect(objects, tmp_path)

    assert run.status == CollectionRun.Status.OK
    cut = "…"
    too_long = "characters long, more than the"
    assert problems(run, "") == [
        f"node {HOSTILE_NODE}: kernel_version {'k' * 60!r}{cut} is 300 {too_long} 200 stored; stored as unknown",
        f"node {'m' * 60}{cut}: name {'m' * 60!r}{cut} is 254 {too_long} 253 stored; not stored",
        f"pod {'n' * 60}{cut}/web-1: namespace {'n' * 60!r}{cut} is 64 {too_long} 63 stored; not stored",
        f"pod shop/{'p' * 60}{cut}: name {'p' * 60!r}{cut} is 254 {too_long} 253 stored; not stored",
        f"pod shop/web-2 container {'c' * 60}{cut}: name {'c' * 60!r}{cut} is 254 {too_long} 253 stored; not stored",
    ]
    assert problems(run) == [
        f"reading of {'n' * 60}{cut}/web-1/app: namespace {'n' * 60!r}{cut} is 64 {too_long} 63 stored; not stored",
        f"reading of shop/{'p' * 60}{cut}/app: pod {'p' * 60!r}{cut} is 254 {too_long} 253 stored; not stored",
        f"reading of shop/web-2/{'c' * 60}{cut}: container {'c' * 60!r}{cut} is 254 {too_long} 253 stored; not stored",
    ]
    assert stored(run) == {("shop", "web-0", "app"): (HPA_PERIODS, HPA_THREADS)}
    assert set(Container.objects.filter(pod__name="web-2").values_list("name", flat=True)) == {"sidecar"}
    assert Node.objects.get(cluster=run.cluster, name=HOSTILE_NODE).kernel_version == ""
    assert not Node.objects.filter(name=long_node).exists()
    assert run.nodes_total == 2
    assert_real_node_stored(run)


# --- 5. bodies that are not a clean scrape ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"<!DOCTYPE html>\n<html><body><h1>502 Bad Gateway</h1></body></html>\n", "does not look like metrics text"),
        (b'{"kind":"Status","apiVersion":"v1","status":"Failure","code":500}', "does not look like metrics text"),
        (gzip.compress(shop("web-0")[0]), "holds binary bytes, not metrics text"),  # no Content-Encoding said so
    ],
    ids=["html", "json", "gzip-bytes"],
)
def test_a_body_that_is_not_metrics_text_fails_its_node_clearly_and_the_rest_is_stored(
    tmp_path: Path, body: bytes, expected: str
) -> None:
    run = collect(with_hostile_node(body, shop("web-0")[1]), tmp_path)

    assert run.status == CollectionRun.Status.PARTIAL
    assert expected in node_error(run)
    assert_real_node_stored(run)


def test_a_scrape_that_is_not_utf8_fails_its_node_naming_the_line_and_the_rest_is_stored(tmp_path: Path) -> None:
    """As Prometheus does: invalid UTF-8 in a label value fails the scrape, rather than store a mangled name."""
    scrape, pods = shop("web-0", "web-1")
    body = scrape.replace(b'pod="web-1"', b'pod="caf\xe9-1"')

    run = collect(with_hostile_node(body, pods), tmp_path)

    number = line_number_of(body, b"caf\xe9")
    assert f"the scrape is not UTF-8 text: line {number}, byte {body.index(b'caf') + 3}: " in node_error(run)
    assert "caf\\xe9-1" in node_error(run)
    assert_real_node_stored(run)


def test_nan_and_infinite_counters_are_dropped_with_a_problem_and_the_other_values_stored(tmp_path: Path) -> None:
    scrape, pods = shop("web-0", "web-1")
    body = with_value(scrape, "container_cpu_cfs_periods_total", "web-0", "NaN")
    body = with_value(body, "container_threads", "web-0", "+Inf")

    run = collect(with_hostile_node(body, pods), tmp_path)

    assert problems(run) == [
        f"line {line_number_of(body, b'} NaN')}: shop/web-0/app: container_cpu_cfs_periods_total is nan, not a finite "
        "number; value dropped",
        f"line {line_number_of(body, b'} +Inf')}: shop/web-0/app: container_threads is inf, not a finite number; "
        "value dropped",
    ]
    assert stored(run) == {("shop", "web-0", "app"): (None, None), ("shop", "web-1", "app"): (9, 6)}
    throttled = Sample.objects.get(container__pod__cluster=run.cluster, container__pod__name="web-0")
    assert throttled.throttled_periods_total == HPA_THROTTLED


def test_a_connection_dropped_mid_scrape_fails_its_node_and_stores_none_of_it(tmp_path: Path) -> None:
    scrape, pods = shop("web-0", "web-1")
    faults = Faults(cut_after_bytes={HOSTILE_NODE: len(scrape) // 2})

    run = collect(with_hostile_node(scrape, pods), tmp_path, faults)

    assert f"IncompleteRead({len(scrape) // 2} bytes read" in node_error(run)
    assert stored(run) == {}
    assert_real_node_stored(run)


def test_a_body_cut_inside_its_last_value_drops_that_line_rather_than_store_a_wrong_counter(tmp_path: Path) -> None:
    """A kubelet (or proxy) that ends the body mid-line with a consistent length: "115517" would arrive as "115", a
    counter gone backwards — a reset and a false burst of throttling at the next reading. No final newline tells."""
    scrape, pods = shop("web-0", "web-1")
    periods_line = next(
        line
        for line in container_series("shop", "web-2", "app").splitlines()
        if line.startswith("container_cpu_cfs_periods")
    )
    body = scrape + periods_line.replace("} 9 1762283371530", "} 115517 1762283371530")[:-17].encode()
    assert body.endswith(b"} 115")

    run = collect(with_hostile_node(body, [*pods, pod_object("shop", "web-2", ["app"])]), tmp_path)

    number = body.count(b"\n") + 1
    assert problems(run) == [
        f"line {number}: container_cpu_cfs_periods_total: the body ends inside this line (cut short?), skipped"
    ]
    assert ("shop", "web-2", "app") not in stored(run)
    assert stored(run)[("shop", "web-1", "app")] == (9, 6)


def test_duplicate_series_keep_the_last_value_with_a_problem_per_line(tmp_path: Path) -> None:
    scrape, pods = shop("web-0")
    again = with_value(scrape, "container_cpu_cfs_periods_total", "web-0", "12")

    run = collect(with_hostile_node(scrape + again, pods), tmp_path)

    found = problems(run)
    assert found[0] == (
        f"line {len(HPA_LINES) + 3}: duplicate container_cpu_cfs_periods_total series for shop/web-0/app; kept the last"
    )
    assert len(found) == 9  # the nine CPU families the parser reads, each seen twice
    assert stored(run) == {("shop", "web-0", "app"): (12, 6)}


def test_series_with_an_unknown_label_set_are_counted_in_one_problem(tmp_path: Path) -> None:
    """A cAdvisor outside Kubernetes (or a renamed label) gives series without namespace and pod: said, not silent."""
    known, pods = shop("web-0")
    unknown = (
        container_series("shop", "web-1", "app").replace('namespace="shop",', "").replace('pod="web-1"', 'k8s="x"')
    )

    run = collect(with_hostile_node(known + unknown.encode(), pods), tmp_path)

    (problem,) = problems(run)
    assert problem.startswith('9 container_* series name no namespace or pod, e.g. {container="app",id=')
    assert problem.endswith("not a kubelet's label set, skipped")
    assert stored(run) == {("shop", "web-0", "app"): (9, 6)}


def test_threads_and_periods_no_column_can_hold_are_stored_as_unknown(tmp_path: Path) -> None:
    """Sane to the parser (below 2**53) but past PostgreSQL's integer columns, which would abort the node's write."""
    scrape, pods = shop("web-0", "web-1")
    body = with_value(scrape, "container_threads", "web-0", "9999999999999")
    body = with_value(body, "container_spec_cpu_period", "web-0", "100000000000")

    run = collect(with_hostile_node(body, pods), tmp_path)

    found = problems(run)
    assert len(found) == 2
    assert "reading of shop/web-0/app: threads 9999999999999 is outside -2147483648 to 2147483647" in found[0]
    assert "period_us 100000000000 is outside 0 to 2147483647; stored as unknown" in found[1]
    assert stored(run) == {("shop", "web-0", "app"): (9, None), ("shop", "web-1", "app"): (9, 6)}
    assert Container.objects.get(pod__cluster=run.cluster, pod__name="web-1").period_us == 100000


# --- 6. hostile objects in the lists ----------------------------------------------------------------------------------


def test_hostile_pod_objects_are_skipped_each_with_a_problem_and_the_rest_stored(tmp_path: Path) -> None:
    scrape, good = shop("web-0")
    nameless = pod_object("shop", "x", ["app"])
    del nameless["metadata"]
    huge_name = pod_object("shop", "huge", ["c" * 10_000_000, "app"])
    quantities = {
        "overflow": "1e309",
        "negative": "-5",
        "nan": "NaN",
        "slow": "1e999000",  # took 41 s to become an int of millicores
        "backtracking": "1" * 20_000 + "xyz",  # took 40 s in the quantity patterns
    }
    bad_cpu = [pod_object("shop", name, ["app"], cpu_limit=value) for name, value in quantities.items()]
    json_nan = pod_object("shop", "json-nan", ["app"], cpu_limit=float("nan"))
    nul = pod_object("shop", "nul\x00pod", ["app"])
    surrogate = pod_object("shop", "bad\ud800pod", ["app"])
    twice = [pod_object("shop", "twin", ["app"]), pod_object("shop", "twin", ["app", "extra"])]
    restarted = pod_object("shop", "restarted", ["app"])
    restarted["status"]["containerStatuses"][0]["restartCount"] = 10**12
    pods = [*good, nameless, huge_name, *bad_cpu, json_nan, nul, surrogate, *twice, restarted]

    run = collect(with_hostile_node(scrape, pods), tmp_path)

    assert run.status == CollectionRun.Status.OK
    found = problems(run, "")
    assert "pod without metadata.name" in found
    for name in quantities:
        assert any(p.startswith(f"pod shop/{name} container app: status limits.cpu") for p in found), (name, found)
    assert any(
        p.startswith("pod shop/json-nan container app: status limits.cpu: CPU quantity nan is not finite")
        for p in found
    )
    assert any("10000000 characters long, more than the 253 stored; not stored" in p for p in found)
    assert any(p.startswith("pod shop/nul\\x00pod: name 'nul\\x00pod' holds a NUL character") for p in found)
    assert any("bad\\ud800pod" in p and "lone surrogate" in p for p in found)
    assert "pod shop/twin is listed twice; the last one kept" in found
    assert (
        "pod shop/restarted container app: restarts 1000000000000 is outside 0 to 2147483647; stored as unknown"
        in found
    )
    assert all(len(p) <= 2000 for p in found)
    stored_pods = set(Pod.objects.filter(cluster=run.cluster, namespace="shop").values_list("name", flat=True))
    assert stored_pods == {"web-0", "huge", "twin", "restarted"}
    assert set(Container.objects.filter(pod__cluster=run.cluster, pod__name="huge").values_list("name", flat=True)) == {
        "app"
    }
    assert set(Container.objects.filter(pod__cluster=run.cluster, pod__name="twin").values_list("name", flat=True)) == {
        "app",
        "extra",
    }
    assert stored(run) == {("shop", "web-0", "app"): (9, 6)}
    assert_real_node_stored(run)


def test_a_node_listed_twice_is_read_once_and_the_run_closes(tmp_path: Path) -> None:
    scrape, pods = shop("web-0")
    objects = with_hostile_node(scrape, pods)
    objects.nodes.append(node_object(HOSTILE_NODE))

    run = collect(objects, tmp_path)

    assert (run.status, run.nodes_total, run.nodes_ok) == (CollectionRun.Status.OK, 2, 2)
    assert stored(run) == {("shop", "web-0", "app"): (HPA_PERIODS, HPA_THREADS)}


def test_a_pod_list_whose_continue_token_expires_twice_stores_no_half_list_and_keeps_the_readings(
    tmp_path: Path,
) -> None:
    """The API server answering 410 Gone mid-list, again after the restart: no half pod list is stored, the run
    says why and is partial, and the nodes (listed first, read meanwhile) keep their readings."""
    objects = ClusterObjects(nodes=REAL.nodes, pods=compact_pods(1200), scrapes={REAL_NODE: REAL_SCRAPE})

    run = collect(objects, tmp_path, Faults(expired_continues={"pods": 2}))

    assert (run.status, run.pods) == (CollectionRun.Status.PARTIAL, CollectionRun.PodsStatus.FAILED)
    (problem,) = problems(run, "")
    assert "pods not listed, the ones stored before are kept" in problem
    assert "the continue token expired again (HTTP 410) after restarting the list" in problem
    assert Node.objects.filter(cluster=run.cluster, name=REAL_NODE).exists()
    assert not Pod.objects.filter(cluster=run.cluster, name__startswith="p0").exists()  # none of the half list
    assert run.nodes_ok == 1 and run.samples_written > 0


def compact_pods(count: int) -> list[dict[str, Any]]:
    """Small but complete pod objects (an API answer without the optional fields), made as JSON text at C speed."""
    template = (
        '{"metadata": {"name": "p%(i)06d", "namespace": "ns%(ns)d", "uid": "00000000-0000-4000-8000-%(i)012d"}, '
        '"spec": {"nodeName": "%(node)s", "containers": [{"name": "app", "resources": '
        '{"requests": {"cpu": "100m"}, "limits": {"cpu": "1"}}}]}, '
        '"status": {"phase": "Running", "qosClass": "Burstable", '
        '"containerStatuses": [{"name": "app", "restartCount": 0}]}}'
    )
    return json.loads("[" + ",".join(template % {"i": i, "ns": i % 50, "node": REAL_NODE} for i in range(count)) + "]")


@pytest.mark.slow
def test_100000_pods_are_listed_page_by_page_in_bounded_memory_with_the_hostile_ones_skipped(tmp_path: Path) -> None:
    """What the worker keeps is a converted pod per pod (under a kilobyte) and one page of objects: 67 MB measured
    here. Kept as dicts until the list ended, these pods peaked at 269 MB (and the fixture's 3.5 KB pods at 1.6 GB),
    which the bound of 2 KB a pod turns away."""
    pods = compact_pods(100_000)
    for index in range(0, 100_000, 10_000):
        pods[index]["metadata"].pop("name")
    objects = ClusterObjects(nodes=REAL.nodes, pods=pods, scrapes={REAL_NODE: REAL_SCRAPE})

    with ApiServerStandin(objects) as server:
        figures = measured(server, tmp_path, "inventory")
        pages = len(server.requests_to("/api/v1/pods"))

    print(f"\n100,000 pods: listed in {figures['seconds']:.1f} s, peak +{figures['peak_mb']:.0f} MB")
    assert figures["pods"] == 99_990
    assert figures["problem_count"] == 10
    assert (
        figures["problems"][0]
        == "pod without metadata.name (namespace='ns0', uid='00000000-0000-4000-8000-000000000000')"
    )
    assert pages == 200  # 500 a page
    assert figures["peak_mb"] < 100_000 * 2 / 1024  # 2 KB a pod
