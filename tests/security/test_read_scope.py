"""Read scope: users and read tokens limited to clusters and namespaces see nothing outside them, on any endpoint.

On aec48c8 every read token and user read every cluster. Cluster "prod" has namespaces `public` (pods shown-0,
shown-1) and `vault` (hidden-0, hidden-1) on nodes prod-node-0 and prod-node-1, plus prod-idle-node running nothing;
cluster "elsewhere" is a second cluster. The viewers below may read prod/public only; no response they get names
vault, a hidden pod, the idle node or the other cluster, and every page of those is a 404 (as for a typo).
"""

from __future__ import annotations

from io import StringIO
from urllib.parse import quote

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone
from rest_framework.test import APIClient

from apps.api.models import ApiToken
from apps.api.services import create_token
from apps.clusters.models import Cluster, Pod, ReadGrant
from apps.clusters.visibility import for_user
from apps.collector.models import CollectionRun
from apps.dashboard.selectors import overview
from apps.telemetry.ingest import ingest
from apps.telemetry.readings import Batch, NodeInfo
from tests.builders import Pattern, build_cluster

pytestmark = pytest.mark.django_db
PATTERNS = (
    Pattern("shown", "public", 250, 500, 490.0, 0.6, 8),
    Pattern("hidden", "vault", 250, 500, 490.0, 0.6, 8),
)
FORBIDDEN = ("vault", "hidden-", "elsewhere", "prod-idle-node")
SHOWN = ("prod", "public", "shown-0", "shown-1")


@pytest.fixture()
def prod() -> Cluster:
    cluster = build_cluster("prod", patterns=PATTERNS)
    ingest(cluster, Batch(nodes=[NodeInfo(name="prod-idle-node", capacity_mcpu=4000)]))
    elsewhere = build_cluster("elsewhere", patterns=PATTERNS)
    for other in (cluster, elsewhere):  # a finished run each: /metrics and the pages show collection health
        now = timezone.now()
        run = CollectionRun.objects.create(
            cluster=other, source="kubernetes", started_at=now, finished_at=now, status="ok"
        )
        run.problems.create(node=f"{other.name}-node-0", message="vault/hidden-0/main: a reading came back malformed")
    return cluster


@pytest.fixture()
def user(prod):
    """A dashboard user granted prod/public only."""
    alice = get_user_model().objects.create_user("alice")
    ReadGrant.objects.create(user=alice, cluster=prod, namespace="public")
    return alice


def token_client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def session_client(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


@pytest.fixture(params=["user", "user's token", "token limited by cluster and namespace", "token by namespace"])
def viewer(request, prod, user) -> APIClient:
    """Four ways to be limited to prod/public: the user's grant (by session, or through a plain token of theirs);
    an unlimited user's token narrowed to prod and public; a token narrowed to namespace public (which "elsewhere"
    has too) of a user granted all of prod."""
    bot = get_user_model().objects.create_user("bot")
    if request.param == "user":
        return session_client(user)
    if request.param == "user's token":
        return token_client(create_token(user, "read")[1])
    if request.param == "token limited by cluster and namespace":
        return token_client(create_token(bot, "read", cluster=prod, namespaces=["public"])[1])
    ReadGrant.objects.create(user=bot, cluster=prod)  # the user may read prod; the token narrows it to public
    return token_client(create_token(bot, "read", namespaces=["public"])[1])


# Every URL pattern, with how this test reaches it: a new endpoint fails this test until it is walked here.
WALKED = {
    "api:clusters",
    "api:cluster",
    "api:nodes",
    "api:namespaces",
    "api:containers",
    "api:changes",
    "api:pod-series",
    "api:summary",
    "api:recommendations",
    "metrics",
    "dashboard:overview",
    "dashboard:cluster",
    "dashboard:cluster_csv",
    "dashboard:node",
    "dashboard:lab_verify",
    "dashboard:namespace",
    "dashboard:namespace_csv",
    "dashboard:pod",
}
NO_CLUSTER_DATA = {"api:kernel-check", "api:ingest", "api:schema", "api:docs"}


def named_patterns(resolver: URLResolver, prefix: str = "") -> set[str]:
    names = set()
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            names |= named_patterns(entry, f"{entry.namespace}:" if entry.namespace else prefix)
        elif isinstance(entry, URLPattern) and entry.name:
            names.add(prefix + entry.name)
    return names


def test_every_endpoint_with_cluster_data_is_walked():
    ours = {n for n in named_patterns(get_resolver()) if n.split(":")[0] in {"api", "dashboard", "metrics"}}
    assert ours - NO_CLUSTER_DATA == WALKED


def urls(cluster: str, namespace: str, pods: list[str], nodes: list[str]) -> list[str]:
    c, ns = quote(cluster), quote(namespace)
    api = f"/api/v1/clusters/{c}/namespaces/{ns}/"
    return [
        f"/api/v1/clusters/{c}/",
        f"/api/v1/clusters/{c}/nodes/",
        f"/api/v1/clusters/{c}/namespaces/",
        f"{api}containers/",
        f"{api}changes/",
        f"{api}changes/?format=csv",
        *(f"{api}pods/{quote(p)}/series/" for p in pods),
        *(f"{api}summary/?format={fmt}" for fmt in ("text", "markdown", "slack", "json")),
        f"/api/v1/recommendations/?cluster={c}&namespace={ns}",
        f"/api/v1/recommendations/?cluster={c}&namespace={ns}&format=csv",
        f"/c/{c}/",
        f"/c/{c}/recommendations.csv",
        *(f"/c/{c}/node/{quote(n)}/" for n in nodes),
        f"/c/{c}/lab-verify/",
        f"/c/{c}/ns/{ns}/",
        f"/c/{c}/ns/{ns}/recommendations.csv",
        *(f"/c/{c}/ns/{ns}/pod/{quote(p)}/" for p in pods),
    ]


def dashboard(url: str) -> bool:
    return not url.startswith(("/api/", "/metrics"))


def get(viewer: APIClient, url: str):
    """The response, or None for a page a token cannot open (the dashboard wants a login: it redirects)."""
    response = viewer.get(url)
    if dashboard(url) and not viewer.session.get("_auth_user_id"):
        assert response.status_code == 302, url
        return None
    return response


def body(response) -> str:
    content = b"".join(response.streaming_content) if response.streaming else response.content
    return content.decode()


def test_a_limited_viewer_sees_its_namespace_and_nothing_else(viewer):
    shown = {}
    for url in [
        "/api/v1/clusters/",
        "/api/v1/recommendations/",
        "/api/v1/recommendations/?format=csv",
        "/metrics",
        "/",
    ]:
        if (response := get(viewer, url)) is not None:
            assert response.status_code == 200, url
            shown[url] = body(response)
    for url in urls("prod", "public", ["shown-0", "shown-1"], []):
        if (response := get(viewer, url)) is not None:
            assert response.status_code == 200 or url.endswith("/lab-verify/"), url  # prod is no lab: 404
            shown[url] = body(response)
    for url, text in shown.items():
        leaked = [word for word in FORBIDDEN if word in text]
        assert leaked == [], f"{url} shows {leaked}"
    assert "shown-0" in shown["/api/v1/recommendations/?format=csv"] and "shown-1" in shown["/metrics"]
    assert "prod-node-0" in shown["/api/v1/clusters/prod/nodes/"]  # the nodes its pods run on, not the idle one

    outside = [
        *urls("prod", "vault", ["hidden-0", "shown-0"], ["prod-node-0", "prod-idle-node"]),
        *urls("elsewhere", "public", ["shown-0"], ["elsewhere-node-0"]),
        "/api/v1/recommendations/?cluster=elsewhere",
        "/api/v1/recommendations/?namespace=vault",
    ]
    for url in outside:
        if url.endswith(("/prod/", "/prod/nodes/", "/prod/namespaces/", "/c/prod/", "/c/prod/recommendations.csv")):
            continue  # prod itself is in scope: walked above
        if (response := get(viewer, url)) is None:
            continue
        assert response.status_code == 404, url
        leaked = [word for word in FORBIDDEN if word in body(response) and word not in url]
        assert leaked == [], f"{url} shows {leaked}"


def test_the_pages_of_a_limited_user_show_its_namespace_and_link_no_node_page(prod, user):
    client = session_client(user)
    front = body(client.get("/"))
    assert "prod" in front and 'id="read-scope"' in front and "shown-0" in body(client.get("/c/prod/ns/public/"))
    page = body(client.get("/c/prod/"))
    assert "public" in page and "prod-node-0" in page and "/c/prod/node/" not in page
    # The overview counts what the user sees: prod's 2 public pods on 2 nodes (not vault's, not the idle node).
    [row] = overview(visibility=for_user(user)).clusters
    assert (row.cluster.name, row.pods, row.nodes, sum(row.verdicts.values())) == ("prod", 2, 2, 2)
    # And each node's pods are the user's: one public pod on each (vault has one more on each).
    nodes = {n["name"]: n["pods"] for n in client.get("/api/v1/clusters/prod/nodes/").json()["results"]}
    assert nodes == {"prod-node-0": 1, "prod-node-1": 1}
    assert "/c/prod/node/" not in body(session_client(user).get("/c/prod/ns/public/pod/shown-0/"))


def test_unlimited_viewers_still_see_everything(prod):
    bot = get_user_model().objects.create_user("bot")
    client = token_client(create_token(bot, "read")[1])
    names = [c["name"] for c in client.get("/api/v1/clusters/").json()["results"]]
    assert names == ["elsewhere", "prod"]
    metrics = body(client.get("/metrics"))
    assert 'namespace="vault"' in metrics and 'cputune_collection_last_run_nodes{cluster="elsewhere"' in metrics
    admin = get_user_model().objects.create_superuser("root", password="x")
    ReadGrant.objects.create(user=admin, cluster=prod, namespace="public")  # a superuser reads everything anyway
    assert session_client(admin).get("/c/prod/node/prod-idle-node/").status_code == 200


def test_a_token_cannot_read_more_than_its_user(prod, user):
    client = token_client(create_token(user, "read", cluster=Cluster.objects.get(name="elsewhere"))[1])
    assert client.get("/api/v1/clusters/").json()["results"] == []
    assert client.get("/api/v1/clusters/prod/").status_code == 404


def test_create_token_and_the_admin_set_the_scope(prod, user):
    out = StringIO()
    call_command(
        "create_token", "--user", "alice", "--scope", "read", "--cluster", "prod", "--namespace", "public", stdout=out
    )
    token = ApiToken.objects.get(prefix=out.getvalue().split()[-1][:12])
    assert (token.cluster, token.namespace_list) == (prod, ["public"])
    assert "limited to cluster prod, namespaces public" in out.getvalue()
    with pytest.raises(CommandError, match="'Vault/x' is not a Kubernetes namespace name"):
        call_command("create_token", "--user", "alice", "--scope", "read", "--namespace", "Vault/x")
    with pytest.raises(CommandError, match="an ingest token pushes for its nodes, whatever the namespace"):
        call_command("create_token", "--user", "alice", "--scope", "ingest", "--cluster", "prod", "--namespace", "a")

    from apps.api.admin import ApiTokenForm

    form = ApiTokenForm(data={"user": user.pk, "scope": "read", "cluster": prod.pk, "namespaces": " public , vault ,"})
    assert form.is_valid(), form.errors
    assert form.cleaned_data["namespaces"] == "public,vault"
    form = ApiTokenForm(data={"user": user.pk, "scope": "read", "namespaces": "a;b"})
    assert not form.is_valid() and "is not a Kubernetes namespace name" in form.errors["namespaces"][0]


def test_the_admin_lists_grants(prod, user):
    admin = get_user_model().objects.create_superuser("root", password="x")
    page = body(session_client(admin).get("/admin/clusters/readgrant/"))
    assert "alice reads prod/public" in page
    assert Pod.objects.filter(cluster=prod, namespace="vault").count() == 2
