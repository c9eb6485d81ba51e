"""API test setup: users, read and ingest tokens, clients, and a stored cluster with history (tests.builders)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from apps.api.services import create_token
from apps.clusters.models import Cluster
from tests.builders import build_cluster


@pytest.fixture()
def api_user(db):
    return get_user_model().objects.create_user("bot")  # no password: hashing one costs ~1 s


@pytest.fixture()
def read_key(api_user) -> str:
    return create_token(api_user, "read")[1]


@pytest.fixture()
def ingest_cluster(demo) -> Cluster:
    """The cluster `ingest_key` belongs to (every ingest token has one); modules that push override it."""
    return demo


@pytest.fixture()
def ingest_key(api_user, ingest_cluster) -> str:
    return create_token(api_user, "ingest", cluster=ingest_cluster)[1]


@pytest.fixture()
def client_for() -> Callable[[str | None], APIClient]:
    def make(key: str | None) -> APIClient:
        client = APIClient()
        if key:
            client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        return client

    return make


@pytest.fixture()
def reader(client_for, read_key) -> APIClient:
    return client_for(read_key)


@pytest.fixture()
def demo(db) -> Cluster:
    """The builder's cluster "demo": shop (api-*, worker-* throttled; cache-*, web-*) and batch (batch-*)."""
    return build_cluster("demo")
