"""An ingest token writes only what its own nodes measure: its cluster, nodes the inventory holds, the containers the
inventory places on the pushing node; never a node's inventory facts; at a bounded rate per node.

Payloads are real agent collections over the captured cgroup tree of tests/api/test_ingest.py (pod shop/web-1 on
node-a, its container's runtime id CID_WEB).
"""

from __future__ import annotations

import importlib
from datetime import timedelta

import pytest
from django.apps import apps as django_apps
from django.test import override_settings
from django.utils import timezone

from apps.api.models import ApiToken, hash_key
from apps.api.services import create_token
from apps.clusters.models import POD_CGROUP, Cluster, Node
from apps.telemetry.ingest import ingest
from apps.telemetry.models import Sample
from apps.telemetry.readings import Batch, ContainerInfo, NodeInfo, PodInfo
from tests import factories as f
from tests.api.test_ingest import CID_WEB, UID_WEB, build_v1_tree, collect, post

pytestmark = pytest.mark.django_db


@pytest.fixture()
def prod() -> Cluster:
    """node-a (kernel 5.10.0 from the Kubernetes API) runs shop/web-1; node-b is another node of the cluster."""
    cluster = f.cluster("prod")
    pod = PodInfo(namespace="shop", name="web-1", uid=UID_WEB, node="node-a", qos_class="Burstable",
                  containers=(ContainerInfo(name="web", container_id=CID_WEB, limit_mcpu=500),))  # fmt: skip
    nodes = [NodeInfo(name="node-a", capacity_mcpu=8000, kernel_version="5.10.0"), NodeInfo(name="node-b")]
    ingest(cluster, Batch(nodes=nodes, pods=[pod]))
    return cluster


@pytest.fixture()
def ingest_cluster(prod) -> Cluster:
    return prod


@pytest.fixture()
def pusher(client_for, ingest_key):
    return client_for(ingest_key)


@pytest.fixture()
def payload(tmp_path, prod):
    build_v1_tree(tmp_path / "cgroup")
    return lambda node="node-a", ago_s=60: collect(tmp_path, timezone.now() - timedelta(seconds=ago_s), node=node)


def stored() -> int:
    return Sample.objects.filter(container__name="web").count()


def test_a_push_for_a_node_the_inventory_lacks_is_refused_and_creates_nothing(pusher, prod, payload):
    for n in range(20):  # the attack made 200 phantom nodes in 2 s
        response = post(pusher, payload(node=f"ghost-node-{n}"))
        assert response.status_code == 400
        assert "is not in cluster 'prod''s inventory" in response.json()["detail"]
    assert sorted(Node.objects.filter(cluster=prod).values_list("name", flat=True)) == ["node-a", "node-b"]


def test_a_push_never_rewrites_the_kernel_the_inventory_reported(pusher, prod, payload):
    body = payload()
    body["node"]["kernel_version"] = "4.14.100"  # an affected kernel: it would turn the verdict and the advice
    assert post(pusher, body).status_code == 200
    assert Node.objects.get(cluster=prod, name="node-a").kernel_version == "5.10.0"


def test_a_node_cannot_write_readings_for_a_container_on_another_node(pusher, prod, payload):
    body = post(pusher, payload(node="node-b")).json()  # node-b's agent claims node-a's container id
    assert body["accepted"] == 0 and stored() == 0
    [reason] = [u["reason"] for u in body["unknown"] if u["container_id"] == CID_WEB]
    assert reason == "the inventory places shop/web-1 on node node-a, not on node-b: not stored"
    assert post(pusher, payload(node="node-a")).json()["accepted"] == 1 and stored() == 1


def test_a_pod_cgroup_with_a_quota_is_stored_as_its_pods_own_series_only_from_its_node(pusher, prod, payload):
    def with_pod_quota(body):
        [pod_cgroup] = [c for c in body["containers"] if c["pod_uid"] == UID_WEB and not c["container_id"]]
        pod_cgroup.update(periods_total=100, throttled_periods_total=60, throttled_seconds_total=3.0, quota_us=50_000,
                          period_us=100_000)  # fmt: skip
        return body

    elsewhere = post(pusher, with_pod_quota(payload(node="node-b")))  # web-1 runs on node-a
    assert elsewhere.status_code == 200 and elsewhere.json()["pod_cgroups_written"] == 0
    assert not Sample.objects.filter(container__name=POD_CGROUP).exists()
    response = post(pusher, with_pod_quota(payload(node="node-a")))
    assert response.status_code == 200
    assert (response.json()["accepted"], response.json()["pod_cgroups_written"]) == (1, 1)
    [sample] = Sample.objects.filter(container__pod__name="web-1", container__name=POD_CGROUP)
    assert (sample.periods_total, sample.throttled_periods_total, sample.throttled_seconds_total) == (100, 60, 3.0)


def test_a_token_of_one_cluster_cannot_push_into_another(client_for, api_user, prod, payload):
    staging = f.cluster("staging")
    Node.objects.create(cluster=staging, name="node-a")
    _, key = create_token(api_user, "ingest", cluster=staging)
    body = post(client_for(key), payload()).json()
    assert body["cluster"] == "staging" and body["accepted"] == 0 and stored() == 0


def test_a_token_without_a_cluster_is_refused_with_what_to_do(client_for, api_user, prod, payload):
    key = "ctk_made-before-every-ingest-token-had-a-cluster"
    ApiToken.objects.create(user=api_user, scope="ingest", key_hash=hash_key(key), prefix=key[:12])
    response = post(client_for(key), payload())
    assert response.status_code == 403
    assert response.json()["detail"].startswith("this ingest token belongs to no cluster")
    assert "create_token --scope ingest --cluster NAME" in response.json()["detail"]
    assert stored() == 0


def test_a_token_bound_to_one_node_pushes_for_that_node_only(client_for, api_user, prod, payload):
    _, key = create_token(api_user, "ingest", cluster=prod, node="node-b")
    response = post(client_for(key), payload(node="node-a"))
    assert response.status_code == 403
    assert response.json()["detail"] == "this ingest token pushes for node 'node-b' only, not for 'node-a'"
    assert stored() == 0
    assert post(client_for(key), payload(node="node-b")).status_code == 200


@override_settings(CPUTUNE_INGEST_RATE="3/min")
def test_pushes_per_node_are_rate_limited_and_other_nodes_are_not(pusher, prod, payload):
    for ago_s in (50, 40, 30):
        assert post(pusher, payload(ago_s=ago_s)).status_code == 200
    refused = post(pusher, payload(ago_s=20))
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert "throttled" in refused.json()["detail"].lower()
    assert stored() == 3  # the refused push stored nothing
    assert post(pusher, payload(node="node-b")).status_code == 200


def test_the_migration_binds_old_ingest_tokens_when_one_cluster_makes_it_unambiguous(api_user, prod):
    migration = importlib.import_module("apps.api.migrations.0003_token_node")
    old = ApiToken.objects.create(user=api_user, scope="ingest", key_hash="a" * 64, prefix="ctk_old")
    migration.bind_unbound_ingest_tokens(django_apps, None)
    old.refresh_from_db()
    assert old.cluster == prod

    f.cluster("staging")
    older = ApiToken.objects.create(user=api_user, scope="ingest", key_hash="b" * 64, prefix="ctk_older")
    migration.bind_unbound_ingest_tokens(django_apps, None)
    older.refresh_from_db()
    assert older.cluster is None  # two clusters: nothing says which; the push answers 403 with what to do
