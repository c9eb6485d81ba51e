from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from .models import ApiToken
from .services import authenticate_key


class ScopedTokenAuthentication(authentication.TokenAuthentication):
    """`Authorization: Token <key>`; request.auth is the ApiToken, whose scope the permissions check."""

    keyword = "Token"

    def authenticate_credentials(self, key: str) -> tuple[object, ApiToken]:
        token = authenticate_key(key)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        return token.user, token


class ScopedBearerAuthentication(ScopedTokenAuthentication):
    """`Authorization: Bearer <key>`, the scheme most HTTP clients and bots send: the same keys, hashing and scopes.

    A class of its own, listed after the Token one, so DRF parses the header as it does for Token (a bare or
    malformed `Bearer` header is a 401) and the 401's WWW-Authenticate still names Token, the first scheme.
    """

    keyword = "Bearer"


class BearerScheme(OpenApiAuthenticationExtension):
    """OpenAPI: a `bearerAuth` scheme beside drf-spectacular's `tokenAuth` (which would match this subclass too)."""

    target_class = ScopedBearerAuthentication
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {"type": "http", "scheme": "bearer"}
