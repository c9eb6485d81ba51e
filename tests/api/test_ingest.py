"""POST ingest/: real agent payloads (agent.cputune_agent.collect() over a cgroup tree built from the captured files in
tests/fixtures/cgroup/) are stored as samples; hostile payloads are refused with a 400 naming the field.

Counter figures are read off the fixture files: v1-linux-6.18-throttled/cpu.stat has nr_periods 33, nr_throttled 32,
throttled_time 1798447421 ns; its tasks file lists 5 threads; cpu.cfs_quota_us 50000 and cpu.cfs_period_us 100000.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from rest_framework.test import APIClient

from agent import cputune_agent as agent
from apps.api.models import ApiToken
from apps.api.services import create_token
from apps.clusters.models import Cluster, Container, Node
from apps.telemetry.ingest import ingest
from apps.telemetry.models import BurstReading, Sample
from apps.telemetry.readings import Batch, ContainerInfo, NodeInfo, PodInfo
from tests import factories as f

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cgroup"
URL = "/api/v1/ingest/"
UID_WEB = "6c1f2b0e-3d4a-4f5b-8c6d-7e8f90a1b2c3"
UID_STRANGER = "9a8b7c6d-5e4f-4a3b-9c2d-1e0f2a3b4c5d"


def runtime_id(label: str) -> str:
    return hashlib.sha256(label.encode()).hexdigest()


CID_WEB, CID_PAUSE, CID_STRANGER = runtime_id("web"), runtime_id("pause"), runtime_id("stranger")


def write(directory: Path, files: dict[str, str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text)


def build_v1_tree(root: Path) -> Path:
    """A combined cpu,cpuacct v1 mount in the cgroupfs layout: pod web (its container from the captured throttled
    cgroup, and its pause sandbox) and a BestEffort pod the inventory does not know."""
    write(root, {"cpu.shares": "1024\n", "cpuacct.usage": "99\n", "cpu.stat": "nr_periods 0\n"})
    pod = root / "kubepods" / "burstable" / f"pod{UID_WEB}"
    write(
        pod,
        {
            "cpu.stat": "nr_periods 40\nnr_throttled 1\nthrottled_time 2000000\n",
            "cpu.cfs_quota_us": "-1\n",
            "cpu.cfs_period_us": "100000\n",
            "cpu.shares": "256\n",
            "tasks": "",
            "cpuacct.usage": "3000000000\n",
        },
    )
    (pod / CID_WEB).mkdir()
    for file in (FIXTURES / "v1-linux-6.18-throttled").iterdir():
        shutil.copy(file, pod / CID_WEB / file.name)
    write(pod / CID_WEB, {"cpuacct.usage": "2500000000\n"})
    write(
        pod / CID_PAUSE,
        {"cpu.stat": "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n", "tasks": "1\n", "cpuacct.usage": "1000\n"},
    )
    stranger = root / "kubepods" / "besteffort" / f"pod{UID_STRANGER}"
    write(stranger, {"cpu.stat": "nr_periods 0\n", "tasks": "", "cpuacct.usage": "5\n"})
    write(
        stranger / CID_STRANGER,
        {"cpu.stat": "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n", "tasks": "1\n", "cpuacct.usage": "5\n"},
    )
    return root


def node_files(tmp_path: Path) -> tuple[str, str]:
    proc, sys = tmp_path / "proc", tmp_path / "sys"
    write(proc / "sys" / "kernel", {"sched_cfs_bandwidth_slice_us": "5000\n"})
    write(sys / "devices" / "system" / "cpu" / "cpu0" / "cpufreq", {"scaling_governor": "performance\n"})
    return str(proc), str(sys)


def collect(tmp_path: Path, when: datetime, node: str = "node-a") -> dict[str, Any]:
    proc, sys = node_files(tmp_path)
    payload = agent.collect(str(tmp_path / "cgroup"), node_name=node, proc_root=proc, sys_root=sys, now=when)
    return json.loads(json.dumps(payload))  # exactly what goes over the wire


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    return build_v1_tree(tmp_path / "cgroup")


@pytest.fixture()
def prod() -> Cluster:
    """The inventory the Kubernetes source would have stored: node-a, pod shop/web-1 with its container's runtime id."""
    cluster = f.cluster("prod")
    pod = PodInfo(
        namespace="shop",
        name="web-1",
        uid=UID_WEB,
        node="node-a",
        qos_class="Burstable",
        containers=(ContainerInfo(name="web", container_id=CID_WEB, request_mcpu=250, limit_mcpu=500),),
    )
    ingest(cluster, Batch(nodes=[NodeInfo(name="node-a", capacity_mcpu=8000, kernel_version="5.10.0")], pods=[pod]))
    return cluster


@pytest.fixture()
def ingest_cluster(prod) -> Cluster:
    return prod


@pytest.fixture()
def pusher(client_for, ingest_key):
    return client_for(ingest_key)


def post(client, payload: Any):
    return client.post(URL, json.dumps(payload), content_type="application/json")


def web_samples() -> list[Sample]:
    return list(Sample.objects.filter(container__name="web").order_by("ts"))


# --- real payloads ----------------------------------------------------------------------------------------------------


def test_a_real_agent_payload_is_matched_and_stored(pusher, prod, tree, tmp_path):
    when = timezone.now().replace(microsecond=0) - timedelta(minutes=2)
    response = post(pusher, collect(tmp_path, when))

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["cluster"] == "prod" and body["node"] == "node-a"
    assert body["accepted"] == 1 and body["samples_written"] == 1 and body["duplicates"] == 0
    assert body["pod_level"] == 2  # the web pod's and the stranger pod's own cgroups
    assert body["sandboxes"] == 1  # web-1's pause container: every inventoried container of the pod was matched
    [unknown] = body["unknown"]
    assert unknown["pod_uid"] == UID_STRANGER and unknown["container_id"] == CID_STRANGER
    assert "no pod with uid" in unknown["reason"]
    [sample] = web_samples()
    assert sample.ts == when
    assert sample.periods_total == 33 and sample.throttled_periods_total == 32
    assert sample.throttled_seconds_total == pytest.approx(1.798447421)
    assert sample.usage_seconds_total == pytest.approx(2.5)
    assert sample.threads == 5


def test_a_second_push_gives_window_deltas(pusher, prod, tree, tmp_path):
    t0 = timezone.now().replace(microsecond=0) - timedelta(minutes=3)
    assert post(pusher, collect(tmp_path, t0)).status_code == 200
    container = tree / "kubepods" / "burstable" / f"pod{UID_WEB}" / CID_WEB
    # A minute later: 600 more periods, 360 of them throttled, 18 s more throttled time, 29.4 s more CPU (490m).
    write(
        container,
        {
            "cpu.stat": "nr_periods 633\nnr_throttled 392\nthrottled_time 19798447421\n",
            "cpuacct.usage": "31900000000\n",
        },
    )
    assert post(pusher, collect(tmp_path, t0 + timedelta(seconds=60))).status_code == 200

    _first, second = web_samples()
    assert second.interval_s == 60
    assert second.periods_delta == 600 and second.throttled_periods_delta == 360
    assert second.throttled_seconds_delta == pytest.approx(18.0)
    assert second.usage_seconds_delta == pytest.approx(29.4)
    assert not second.reset


def test_the_same_batch_twice_is_stored_once(pusher, prod, tree, tmp_path):
    payload = collect(tmp_path, timezone.now().replace(microsecond=0) - timedelta(minutes=1))
    post(pusher, payload)
    again = post(pusher, payload).json()
    assert again["accepted"] == 1 and again["samples_written"] == 0 and again["duplicates"] == 1
    assert len(web_samples()) == 1


def test_the_agent_fills_node_facts_the_inventory_lacks_and_keeps_the_rest(pusher, prod, tree, tmp_path):
    Node.objects.filter(cluster=prod, name="node-a").update(capacity_mcpu=None)
    post(pusher, collect(tmp_path, timezone.now() - timedelta(minutes=1)))
    node = Node.objects.get(cluster=prod, name="node-a")
    assert node.kernel_version == "5.10.0"  # the inventory's (the Kubernetes API's), not the agent's uname -r
    assert node.cfs_slice_us == 5000 and node.cpufreq_governor == "performance"  # only the agent reads these
    assert node.capacity_mcpu == (os.cpu_count() or 0) * 1000  # a gap, filled by the agent's cpuset count

    Node.objects.filter(cluster=prod, name="node-a").update(kernel_version="")
    post(pusher, collect(tmp_path, timezone.now() - timedelta(seconds=30)))
    assert Node.objects.get(cluster=prod, name="node-a").kernel_version == os.uname().release


def test_the_agent_pushes_over_http_to_a_live_server(live_server, transactional_db, tree, tmp_path):
    owner = get_user_model().objects.create_user("agent-owner")
    cluster = f.cluster("prod")
    pod = PodInfo(namespace="shop", name="web-1", uid=UID_WEB, node="node-a",
                  containers=(ContainerInfo(name="web", container_id=CID_WEB),))  # fmt: skip
    ingest(cluster, Batch(nodes=[NodeInfo(name="node-a")], pods=[pod]))
    _, key = create_token(owner, "ingest", cluster=cluster)

    pushed = agent.push(collect(tmp_path, timezone.now() - timedelta(minutes=1)), live_server.url, key, attempts=1)

    assert pushed is True
    assert len(web_samples()) == 1


# --- which cluster ----------------------------------------------------------------------------------------------------


def test_a_token_pushes_into_its_own_cluster_even_when_another_has_the_node(client_for, api_user, prod, tree, tmp_path):
    staging = f.cluster("staging")
    Node.objects.create(cluster=staging, name="node-a")
    _, key = create_token(api_user, "ingest", cluster=staging)
    body = post(client_for(key), collect(tmp_path, timezone.now() - timedelta(minutes=1))).json()
    assert body["cluster"] == "staging" and body["accepted"] == 0  # prod's container is not staging's
    assert not web_samples()


def test_a_disabled_cluster_refuses_pushes(pusher, prod, tree, tmp_path):
    Cluster.objects.filter(pk=prod.pk).update(enabled=False)
    response = post(pusher, collect(tmp_path, timezone.now() - timedelta(minutes=1)))
    assert response.status_code == 400 and "cluster 'prod' is disabled" in response.json()["detail"]


def test_a_container_of_a_known_pod_with_an_unknown_id_is_reported_not_guessed(pusher, prod, tree, tmp_path):
    from apps.clusters.models import Container

    Container.objects.create(pod=prod.pods.get(name="web-1"), name="sidecar", container_id=runtime_id("sidecar"))
    body = post(pusher, collect(tmp_path, timezone.now() - timedelta(minutes=1))).json()
    # The sidecar was not seen, so the pause container cannot be told from a new container: it is reported.
    reasons = {u["container_id"]: u["reason"] for u in body["unknown"]}
    assert body["sandboxes"] == 0
    assert "pod shop/web-1 has no container with this id" in reasons[CID_PAUSE]


# --- hostile payloads -------------------------------------------------------------------------------------------------


@pytest.fixture()
def payload(prod, tree, tmp_path) -> dict[str, Any]:
    return collect(tmp_path, timezone.now().replace(microsecond=0) - timedelta(minutes=1))


def web_index(payload: dict[str, Any]) -> int:
    return next(i for i, c in enumerate(payload["containers"]) if c["container_id"] == CID_WEB)


@pytest.mark.parametrize(
    ("field", "value", "path", "message"),
    [
        ("periods_total", "33", "periods_total", "periods_total must be a whole number from 0 to 9007199254740992"),
        ("periods_total", -1, "periods_total", "periods_total must be a whole number"),
        ("periods_total", 2**60, "periods_total", "periods_total must be a whole number"),
        ("periods_total", 33.5, "periods_total", "periods_total must be a whole number"),
        ("throttled_seconds_total", -0.5, "throttled_seconds_total", "throttled_seconds_total must be a finite number"),
        ("throttled_seconds_total", True, "throttled_seconds_total", "throttled_seconds_total must be a finite number"),
        ("usage_seconds_total", "NaN", "usage_seconds_total", "usage_seconds_total must be a finite number"),
        ("usage_seconds_total", 1e300, "usage_seconds_total", "usage_seconds_total must be a finite number"),
        ("threads", 10**7, "threads", "threads must be a whole number from 0 to 4194304"),
        ("period_us", 10, "period_us", "period_us must be a whole number from 1000 to 1000000"),
        ("container_id", "../../etc/passwd", "container_id", "container_id must be a runtime container id"),
        ("container_id", "a" * 129, "container_id", "container_id must be a string of at most 128 characters"),
        ("pod_uid", "", "pod_uid", "pod_uid must not be empty"),
        ("pod_uid", 42, "pod_uid", "pod_uid must be a string"),
        ("qos_class", "Gold", "qos_class", "qos_class must be one of Guaranteed, Burstable, BestEffort or empty"),
        (
            "throttled_periods_total",
            34,
            "throttled_periods_total",
            "throttled periods (34) exceed periods (33)",
        ),
    ],
)
def test_a_bad_container_field_is_a_400_naming_it_and_nothing_is_stored(pusher, payload, field, value, path, message):
    index = web_index(payload)
    payload["containers"][index][field] = value
    response = post(pusher, payload)
    assert response.status_code == 400
    body = response.json()
    key = f"containers[{index}].{path}"
    assert body["errors"].get(key, [""])[0].startswith(message), body
    assert body["detail"].startswith(f"{key}: ")
    assert not web_samples()


@pytest.mark.parametrize(
    ("change", "key", "message"),
    [
        (lambda p: p["node"].update(name="Node_A"), "node.name", "node.name must be a Kubernetes node name"),
        (lambda p: p["node"].update(name="n" * 254), "node.name", "node.name must be a string of at most 253"),
        (
            lambda p: p["node"].update(kernel_version=["5.4"]),
            "node.kernel_version",
            "node.kernel_version must be a string",
        ),
        (lambda p: p["node"].update(cfs_slice_us=0), "node.cfs_slice_us", "node.cfs_slice_us must be a whole number"),
        (lambda p: p.pop("node"), "node", "This field is required."),
        (lambda p: p.update(node=None), "node", "This field may not be null."),
        (lambda p: p.update(cgroup_version=3), "cgroup_version", "cgroup_version must be 1 or 2."),
        (
            lambda p: p.update(collected_at="yesterday"),
            "collected_at",
            "collected_at must be an ISO 8601 date and time",
        ),
        (
            lambda p: p.update(collected_at="2026-11-30T10:00:00"),
            "collected_at",
            "collected_at must include a UTC offset",
        ),
        (
            lambda p: p.update(collected_at=(timezone.now() + timedelta(days=1)).isoformat()),
            "collected_at",
            "collected_at",
        ),
        (
            lambda p: p.update(collected_at="2001-01-01T00:00:00+00:00"),
            "collected_at",
            "collected_at 2001-01-01T00:00:00+00:00 is older than",
        ),
        (lambda p: p.update(containers={"a": 1}), "containers", "Expected a list of items"),
        (
            lambda p: p.update(containers=[p["containers"][0]] * 5001),
            "containers",
            "containers holds at most 5000 cgroups per batch.",
        ),
        (lambda p: p.update(errors=["x\x00y"]), "errors[0]", "Null characters are not allowed."),
        (lambda p: p.update(errors="oops"), "errors", 'Expected a list of items but got type "str".'),
    ],
)
def test_a_bad_payload_field_is_a_400_naming_it(pusher, payload, change, key, message):
    change(payload)
    response = post(pusher, payload)
    assert response.status_code == 400
    body = response.json()
    assert body["errors"].get(key, [""])[0].startswith(message), body
    assert not web_samples()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "JSON parse error"),
        (b'{"containers": [{"usage_seconds_total": NaN}]}', "JSON parse error: NaN is not a JSON number"),
        (b'{"x": Infinity}', "JSON parse error: Infinity is not a JSON number"),
        (b"[" * 100_000 + b"]" * 100_000, "JSON parse error"),
        (b'{"x": ' + b"9" * 5000 + b"}", "JSON parse error"),
        (b"\xff\xfe", "JSON parse error"),
    ],
)
def test_bodies_that_are_not_json_are_a_400(pusher, prod, body, message):
    response = pusher.post(URL, body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["detail"].startswith(message)


def test_a_json_list_instead_of_an_object_is_a_400(pusher, prod):
    response = post(pusher, [])
    assert response.status_code == 400 and "Expected a dictionary" in response.json()["detail"]


def test_a_body_over_the_limit_is_a_413(pusher, prod, payload):
    payload["errors"] = ["x" * 4000] * 2200  # ~8.8 MB
    response = post(pusher, payload)
    assert response.status_code == 413
    assert "larger than 8 MiB" in response.json()["detail"]


def test_unknown_keys_from_a_newer_agent_are_ignored(pusher, payload):
    payload["future_field"] = {"x": 1}
    payload["containers"][web_index(payload)]["cpu_idle"] = 0
    assert post(pusher, payload).status_code == 200


def test_a_full_batch_over_django_s_default_upload_limit_is_accepted(pusher, payload):
    """5,000 cgroups and a page of read errors is more than DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB): the endpoint's own
    limit (8 MiB) applies instead."""
    web = payload["containers"][web_index(payload)]
    payload["containers"] = [web] + [
        dict(web, pod_uid=UID_STRANGER, container_id=runtime_id(str(i)), qos_class="BestEffort") for i in range(4999)
    ]
    payload["errors"] = ["/sys/fs/cgroup/kubepods/podX: " + "e" * 4000] * 100
    body = json.dumps(payload)
    assert len(body) > 2_621_440
    started = time.perf_counter()
    response = pusher.post(URL, body, content_type="application/json")
    print(f"5000-cgroup batch: {len(body) / 1e6:.1f} MB in {time.perf_counter() - started:.2f} s")
    assert response.status_code == 200
    assert response.json()["accepted"] == 1 and len(response.json()["unknown"]) == 4999


def test_an_ingest_token_sent_as_bearer_pushes(api_user, prod, tree, tmp_path):
    _, key = create_token(api_user, "ingest", cluster=prod)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    response = post(client, collect(tmp_path, timezone.now().replace(microsecond=0) - timedelta(minutes=1)))
    assert response.status_code == 200, response.content
    assert response.json()["cluster"] == "prod" and response.json()["samples_written"] == 1


def test_wrong_content_type_is_refused(pusher, prod):
    response = pusher.post(URL, "a=b", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 415


def test_ingest_tokens_keep_their_cluster_binding_through_authentication(api_user, prod):
    _, key = create_token(api_user, "ingest", cluster=prod)
    from apps.api.services import authenticate_key

    token = authenticate_key(key)
    assert isinstance(token, ApiToken) and token.cluster == prod


def test_the_agents_own_cpu_shares_and_weights_tell_the_nodes_cgroup_scheme(pusher, prod, tree, tmp_path):
    # The captured v1 container's cpu.shares is 512: a request of 500m, as the inventory now says.
    Container.objects.filter(name="web").update(request_mcpu=500)
    payload = collect(tmp_path, timezone.now().replace(microsecond=0) - timedelta(minutes=3))
    assert post(pusher, payload).status_code == 200
    node = Node.objects.get(cluster=prod, name="node-a")
    assert (node.cgroup_version, node.weight_mapping) == (1, "")
    assert node.cgroup_evidence.startswith("the node agent: cpu.shares of 1 container with a request: 1 fit cgroup v1")

    # The same container on a v2 node whose runtime wrote the quadratic weight of 512 shares (59).
    web = payload["containers"][web_index(payload)]
    web.update(shares=None, weight=59)
    payload.update(cgroup_version=2, collected_at=(timezone.now() - timedelta(minutes=2)).isoformat())
    assert post(pusher, payload).status_code == 200
    node.refresh_from_db()
    assert (node.cgroup_version, node.weight_mapping) == (2, "quadratic")


def test_the_agents_burst_setting_and_counters_are_kept_and_an_older_push_does_not_replace_them(
    pusher, prod, tree, tmp_path
):

    payload = collect(tmp_path, timezone.now().replace(microsecond=0) - timedelta(minutes=2))
    web = payload["containers"][web_index(payload)]
    # The captured cgroup has cpu.cfs_burst_us 0 and nr_bursts / burst_time 0: read as they are.
    assert (web["burst_us"], web["bursts_total"], web["burst_seconds_total"]) == (0, 0, 0.0)
    web.update(burst_us=20_000, bursts_total=3, burst_seconds_total=0.05)
    assert post(pusher, payload).status_code == 200
    stored = BurstReading.objects.get(container__name="web")
    assert (stored.burst_us, stored.bursts_total, stored.burst_seconds_total) == (20_000, 3, 0.05)

    older = collect(tmp_path, timezone.now().replace(microsecond=0) - timedelta(minutes=5))
    assert post(pusher, older).status_code == 200
    assert BurstReading.objects.get(container__name="web").burst_us == 20_000
