"""Token lifecycle: create (the only moment the key is visible), revoke, authenticate."""

from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.utils import timezone

from apps.clusters.models import Cluster

from .models import ApiToken, hash_key

KEY_PREFIX = "ctk_"
LAST_USED_RESOLUTION_S = 60  # don't write on every request


def create_token(user: User, scope: str, name: str = "", cluster: Cluster | None = None) -> tuple[ApiToken, str]:
    """Create a token and return it with its key; only the key's hash is stored.

    `cluster` binds an ingest token to one cluster (its agents push there only); a read token cannot be bound.
    """
    if scope not in ApiToken.Scope.values:
        raise ValueError(f"scope {scope!r} is not one of {', '.join(ApiToken.Scope.values)}")
    if cluster is not None and scope != ApiToken.Scope.INGEST:
        raise ValueError(f"only ingest tokens can be bound to a cluster, not {scope!r} tokens")
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user, scope=scope, name=name, cluster=cluster, key_hash=hash_key(key), prefix=key[:12]
    )
    return token, key


def create_token_for_username(
    username: str, scope: str, name: str = "", cluster_name: str | None = None
) -> tuple[ApiToken, str]:
    """create_token for a user and cluster given by name; raises User.DoesNotExist / Cluster.DoesNotExist."""
    user = get_user_model().objects.get(**{get_user_model().USERNAME_FIELD: username})
    cluster = Cluster.objects.get(name=cluster_name) if cluster_name is not None else None
    return create_token(user, scope, name, cluster)


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
