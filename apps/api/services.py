"""Token lifecycle: create (the only moment the key is visible), revoke, authenticate."""

from __future__ import annotations

import secrets
from collections.abc import Sequence

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.utils import timezone

from apps.clusters.models import Cluster
from apps.clusters.names import name_problem
from apps.clusters.visibility import Visibility, for_user
from apps.words import printable

from .models import NAMESPACES_MAX_LENGTH, ApiToken, hash_key

KEY_PREFIX = "ctk_"
LAST_USED_RESOLUTION_S = 60  # don't write on every request


def create_token(
    user: User,
    scope: str,
    name: str = "",
    cluster: Cluster | None = None,
    node: str = "",
    namespaces: Sequence[str] = (),
) -> tuple[ApiToken, str]:
    """Create a token and return it with its key; only the key's hash is stored.

    An ingest token belongs to `cluster` (required: its agents push there only) and, given `node`, to that one node.
    A read token may be limited to `cluster` and to `namespaces` (within what its user may read). Raises ValueError
    saying what is wrong.
    """
    problem = token_binding_problem(scope, cluster, node, namespaces)
    if problem:
        raise ValueError(problem[1])
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        scope=scope,
        name=name,
        cluster=cluster,
        node_name=node,
        namespaces=",".join(namespaces),
        key_hash=hash_key(key),
        prefix=key[:12],
    )
    return token, key


def token_binding_problem(
    scope: str, cluster: Cluster | None, node: str, namespaces: Sequence[str] = ()
) -> tuple[str, str] | None:
    """(field, why) when this scope cannot have this binding, else None: the command, the admin and create_token
    share the rules."""
    if scope not in ApiToken.Scope.values:
        return "scope", f"scope {scope!r} is not one of {', '.join(ApiToken.Scope.values)}"
    if scope == ApiToken.Scope.INGEST and cluster is None:
        return "cluster", "an ingest token belongs to one cluster: name it (--cluster NAME)"
    if scope == ApiToken.Scope.INGEST and namespaces:
        return "namespaces", "an ingest token pushes for its nodes, whatever the namespace: it takes no namespaces"
    if scope != ApiToken.Scope.INGEST and node:
        return "node_name", f"only ingest tokens can be bound to a node, not {scope!r} tokens"
    for namespace in namespaces:
        if problem := name_problem("namespace", namespace):
            return "namespaces", f"{printable(namespace)!r} {problem}"
    if len(",".join(namespaces)) > NAMESPACES_MAX_LENGTH:
        return "namespaces", "too many namespaces for one token: give it a whole cluster, or the user grants"
    if node and (problem := name_problem("node", node)):
        return "node_name", f"{printable(node)!r} {problem}"
    return None


def create_token_for_username(
    username: str,
    scope: str,
    name: str = "",
    cluster_name: str | None = None,
    node: str = "",
    namespaces: Sequence[str] = (),
) -> tuple[ApiToken, str]:
    """create_token for a user and cluster given by name; raises User.DoesNotExist / Cluster.DoesNotExist."""
    user = get_user_model().objects.get(**{get_user_model().USERNAME_FIELD: username})
    cluster = Cluster.objects.get(name=cluster_name) if cluster_name is not None else None
    return create_token(user, scope, name, cluster, node, namespaces)


def token_visibility(token: ApiToken) -> Visibility:
    """What a read token may read: its user's grants, narrowed to the token's cluster and namespaces."""
    return for_user(token.user).narrowed(token.cluster_id, token.namespace_list)


def revoke_token(token: ApiToken) -> None:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])


def authenticate_key(key: str) -> ApiToken | None:
    """The active token for a key, or None. Records when it was last used (at most once a minute)."""
    token = (
        ApiToken.objects.select_related("user", "cluster")
        .filter(key_hash=hash_key(key), revoked_at__isnull=True, user__is_active=True)
        .first()
    )
    if token is None:
        return None
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > LAST_USED_RESOLUTION_S:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token
