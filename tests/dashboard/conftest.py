"""Dashboard fixtures: a logged-in client and a stored cluster built through the real ingest and advisor."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.test import Client

from apps.clusters.models import Cluster, Container
from apps.telemetry.models import HourlyRollup, Sample
from tests.builders import build_cluster

PASSWORD = "a-long-password-1"


@pytest.fixture()
def user(db: None) -> User:
    return get_user_model().objects.create_user("ops", password=PASSWORD)


@pytest.fixture()
def ops(client: Client, user: User) -> Client:
    """The test client, logged in."""
    client.force_login(user)
    return client


def delete_cluster(cluster: Cluster) -> None:
    """Remove a cluster and its series (samples and rollups have no database foreign key, so no cascade)."""
    ids = list(Container.objects.filter(pod__cluster=cluster).values_list("pk", flat=True))
    Sample.objects.filter(container_id__in=ids).delete()
    HourlyRollup.objects.filter(container_id__in=ids).delete()
    cluster.delete()


@pytest.fixture(scope="module")
def shared_demo(django_db_setup: None, django_db_blocker) -> Iterator[Cluster]:
    """Built once per module (about a second each time) and committed; each test's own changes roll back."""
    with django_db_blocker.unblock():
        cluster = build_cluster("demo")
    yield cluster
    with django_db_blocker.unblock():
        delete_cluster(cluster)


@pytest.fixture()
def demo(db: None, shared_demo: Cluster) -> Cluster:
    """Two nodes on a kernel with an unknown verdict; namespaces `shop` (api, worker, cache, web) and `batch`."""
    return shared_demo
