"""A read token cannot ingest; an ingest token cannot read. Logged-in dashboard users (session) can read."""

from __future__ import annotations

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from .models import ApiToken


def _scope(request: Request) -> str | None:
    if isinstance(request.auth, ApiToken):
        return request.auth.scope
    if request.user and request.user.is_authenticated:
        return "session"
    return None


class CanRead(BasePermission):
    message = "This endpoint needs a token with the read scope (an ingest token cannot read)."

    def has_permission(self, request: Request, view: object) -> bool:
        return _scope(request) in {"read", "session"}


class CanIngest(BasePermission):
    message = "This endpoint needs a token with the ingest scope."

    def has_permission(self, request: Request, view: object) -> bool:
        return _scope(request) == "ingest"
