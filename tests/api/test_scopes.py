"""Who can call what: read tokens read, ingest tokens ingest, sessions read; nothing without credentials."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from apps.api.models import ApiToken
from apps.api.services import create_token, revoke_token
from tests import factories as f

pytestmark = pytest.mark.django_db

READ_URLS = [
    "/api/v1/clusters/",
    "/api/v1/clusters/demo/",
    "/api/v1/clusters/demo/nodes/",
    "/api/v1/clusters/demo/namespaces/",
    "/api/v1/clusters/demo/namespaces/shop/containers/",
    "/api/v1/clusters/demo/namespaces/shop/pods/api-0/series/",
    "/api/v1/clusters/demo/namespaces/shop/summary/",
    "/api/v1/recommendations/",
    "/api/v1/recommendations/?format=csv",
    "/api/v1/kernel-check/?version=5.4.0",
    "/metrics",
]
INGEST_URL = "/api/v1/ingest/"


@pytest.mark.parametrize("url", READ_URLS)
def test_read_endpoints_answer_a_read_token(reader, demo, url):
    assert reader.get(url).status_code == 200


@pytest.mark.parametrize("url", READ_URLS)
def test_read_endpoints_refuse_an_ingest_token(client_for, ingest_key, demo, url):
    response = client_for(ingest_key).get(url)
    assert response.status_code == 403
    assert "read scope" in response.json()["detail"]


@pytest.mark.parametrize("url", [*READ_URLS, INGEST_URL])
def test_nothing_is_reachable_without_credentials(client_for, demo, url):
    response = client_for(None).get(url) if url != INGEST_URL else client_for(None).post(url, {}, format="json")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"


def bearer(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


@pytest.mark.parametrize("url", ["/api/v1/clusters/demo/namespaces/shop/containers/", "/metrics"])
def test_a_read_token_sent_as_bearer_reads_like_one_sent_as_token(read_key, demo, url):
    assert bearer(read_key).get(url).status_code == 200


def test_a_bearer_ingest_token_keeps_its_scope(ingest_key, read_key, demo):
    denied = bearer(ingest_key).get(READ_URLS[0])
    assert denied.status_code == 403 and "read scope" in denied.json()["detail"]
    refused = bearer(read_key).post(INGEST_URL, {}, format="json")
    assert refused.status_code == 403 and "ingest scope" in refused.json()["detail"]


@pytest.mark.parametrize(
    "header",
    ["Bearer", "Bearer ", "Bearer a b", "Bearer ctk_not-a-key", "bearer ctk_not-a-key", "Bearer\tctk_\xff"],
)
def test_a_malformed_or_unknown_bearer_header_is_a_401(demo, header):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get(READ_URLS[0])
    assert response.status_code == 401 and response["WWW-Authenticate"] == "Token"
    assert "token" in response.json()["detail"].lower()


def test_a_revoked_token_sent_as_bearer_is_refused(api_user, demo):
    token, key = create_token(api_user, "read")
    assert bearer(key).get(READ_URLS[0]).status_code == 200
    revoke_token(token)
    response = bearer(key).get(READ_URLS[0])
    assert response.status_code == 401 and response.json() == {"detail": "Invalid or revoked token."}


def test_the_schema_documents_both_token_schemes(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    schemes = schema["components"]["securitySchemes"]
    assert schemes["bearerAuth"] == {"type": "http", "scheme": "bearer"}
    assert "Token" in schemes["tokenAuth"]["description"]
    assert {"tokenAuth": []} in schema["paths"]["/api/v1/clusters/"]["get"]["security"]
    assert {"bearerAuth": []} in schema["paths"]["/api/v1/clusters/"]["get"]["security"]


@pytest.mark.parametrize("url", [READ_URLS[0], INGEST_URL])
def test_a_revoked_token_is_refused(client_for, api_user, demo, url):
    for scope in ("read", "ingest"):
        token, key = create_token(api_user, scope, cluster=demo if scope == "ingest" else None)
        revoke_token(token)
        client = client_for(key)
        response = client.get(url) if url != INGEST_URL else client.post(url, {}, format="json")
        assert response.status_code == 401 and response.json() == {"detail": "Invalid or revoked token."}


def test_ingest_refuses_a_read_token_and_a_session(client, reader, api_user):
    response = reader.post(INGEST_URL, {}, format="json")
    assert response.status_code == 403 and "ingest scope" in response.json()["detail"]
    client.force_login(api_user)
    assert client.post(INGEST_URL, {}, content_type="application/json").status_code == 403


def test_a_logged_in_dashboard_user_can_read(client, api_user, demo):
    client.force_login(api_user)
    assert client.get("/api/v1/clusters/demo/namespaces/shop/containers/").status_code == 200
    assert client.get("/metrics").status_code == 200


def test_schema_and_docs_are_public(client):
    assert client.get("/api/schema/").status_code == 200
    assert client.get("/api/docs/").status_code == 200


# --- binding ingest tokens to a cluster ---------------------------------------------------------------------------


def test_create_token_binds_an_ingest_token_to_a_cluster(api_user):
    f.cluster("prod")
    out = StringIO()
    call_command("create_token", "--user", "bot", "--scope", "ingest", "--cluster", "prod", stdout=out)
    key = out.getvalue().split()[-1]
    token = ApiToken.objects.get(prefix=key[:12])
    assert token.cluster is not None and token.cluster.name == "prod" and token.scope == "ingest"
    assert "bound to cluster prod" in out.getvalue()


def test_create_token_refuses_an_ingest_token_without_a_cluster(api_user):
    with pytest.raises(CommandError, match=r"an ingest token belongs to one cluster: name it \(--cluster NAME\)"):
        call_command("create_token", "--user", "bot", "--scope", "ingest")
    assert not ApiToken.objects.exists()


def test_create_token_binds_an_ingest_token_to_one_node(api_user):
    f.cluster("prod")
    out = StringIO()
    call_command(
        "create_token", "--user", "bot", "--scope", "ingest", "--cluster", "prod", "--node", "node-a", stdout=out
    )
    token = ApiToken.objects.get(prefix=out.getvalue().split()[-1][:12])
    assert token.cluster is not None and (token.cluster.name, token.node_name) == ("prod", "node-a")
    assert "bound to cluster prod, node node-a" in out.getvalue()
    with pytest.raises(CommandError, match="is not a Kubernetes node name"):
        call_command("create_token", "--user", "bot", "--scope", "ingest", "--cluster", "prod", "--node", "Node A\n")


def test_create_token_refuses_an_unknown_cluster_and_a_read_token_bound_to_a_node(api_user):
    with pytest.raises(CommandError, match="no cluster named 'ghost'"):
        call_command("create_token", "--user", "bot", "--scope", "ingest", "--cluster", "ghost")
    f.cluster("prod")
    with pytest.raises(CommandError, match="only ingest tokens can be bound to a node, not 'read' tokens"):
        call_command("create_token", "--user", "bot", "--scope", "read", "--cluster", "prod", "--node", "node-a")
    assert not ApiToken.objects.exists()


def test_admin_form_refuses_a_read_token_bound_to_a_node(api_user):
    from apps.api.admin import ApiTokenForm

    cluster = f.cluster("prod")
    form = ApiTokenForm(data={"user": api_user.pk, "scope": "read", "cluster": cluster.pk, "node_name": "node-a"})
    assert not form.is_valid()
    assert form.errors["node_name"] == ["Only ingest tokens can be bound to a node, not 'read' tokens."]
    form = ApiTokenForm(data={"user": api_user.pk, "scope": "ingest", "name": ""})
    assert not form.is_valid()
    assert form.errors["cluster"] == ["An ingest token belongs to one cluster: name it (--cluster NAME)."]
    form = ApiTokenForm(data={"user": api_user.pk, "scope": "ingest", "cluster": cluster.pk, "name": ""})
    assert form.is_valid(), form.errors
