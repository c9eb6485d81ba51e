"""API tokens: revocable, scoped (read or ingest), stored hashed — the key itself is shown once, at creation."""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.db import models

NAMESPACES_MAX_LENGTH = 2000


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class ApiToken(models.Model):
    class Scope(models.TextChoices):
        READ = "read", "read (reports, recommendations, summaries)"
        INGEST = "ingest", "ingest (node agents push readings)"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True)
    scope = models.CharField(max_length=8, choices=Scope.choices)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(max_length=12, editable=False, help_text="The key's first characters, to recognise it.")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # Every ingest token belongs to one cluster and pushes there only (a token made before that rule, with no
    # cluster, is refused). Deleting the cluster deletes its tokens rather than silently unbinding them.
    cluster = models.ForeignKey(
        "clusters.Cluster",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="api_tokens",
        help_text="Ingest tokens: the cluster their node agents push into (required). Read tokens: the one cluster "
        "they may read (empty: every cluster their user may read).",
    )
    node_name = models.CharField(
        max_length=253,
        blank=True,
        help_text="Ingest tokens, optional: the one node that may push with this token (empty: any node of the cluster).",
    )

    namespaces = models.CharField(
        max_length=NAMESPACES_MAX_LENGTH,
        blank=True,
        help_text="Read tokens, optional: the namespaces they may read, comma-separated (empty: all their user may).",
    )

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        state = "revoked" if self.revoked_at else self.scope
        return f"{self.prefix}… ({self.user}, {state})"

    @property
    def namespace_list(self) -> list[str]:
        return [ns for ns in (part.strip() for part in self.namespaces.split(",")) if ns]

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None
