from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from apps.api.models import ApiToken
from apps.api.services import create_token, revoke_token
from tests import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture()
def user():
    return get_user_model().objects.create_user("ops", password="a-long-password-1")


def client_with(key: str | None) -> APIClient:
    client = APIClient()
    if key:
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_clusters_endpoint_refuses_requests_without_a_token():
    response = client_with(None).get("/api/v1/clusters/")
    assert response.status_code in (401, 403)


def test_a_read_token_lists_clusters(user):
    f.cluster("prod")
    _, key = create_token(user, "read")

    response = client_with(key).get("/api/v1/clusters/")

    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 1 and body["results"][0]["name"] == "prod"


def test_an_ingest_token_cannot_read(user):
    _, key = create_token(user, "ingest", cluster=f.cluster("prod"))
    assert client_with(key).get("/api/v1/clusters/").status_code == 403


def test_a_revoked_token_stops_working(user):
    token, key = create_token(user, "read")
    revoke_token(token)
    assert client_with(key).get("/api/v1/clusters/").status_code == 401


def test_tokens_are_stored_hashed(user):
    token, key = create_token(user, "read")
    stored = ApiToken.objects.get(pk=token.pk)
    assert key not in (stored.key_hash, stored.prefix) and len(stored.key_hash) == 64


def test_create_token_prints_the_key_as_the_last_word(user):
    out = StringIO()
    call_command("create_token", "--user", "ops", "--scope", "read", stdout=out)
    key = out.getvalue().split()[-1]

    assert client_with(key).get("/api/v1/clusters/").status_code == 200


def test_create_token_for_an_unknown_user_is_a_clear_error():
    with pytest.raises(CommandError, match="no user named 'ghost'"):
        call_command("create_token", "--user", "ghost", "--scope", "read")


def test_pages_redirect_to_login_without_a_session(client):
    response = client.get("/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_login_page_and_overview_after_login(client, user):
    assert client.get("/accounts/login/").status_code == 200
    client.force_login(user)
    response = client.get("/")
    assert response.status_code == 200 and b"No cluster is registered yet" in response.content
