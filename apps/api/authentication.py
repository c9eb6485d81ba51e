from __future__ import annotations

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
