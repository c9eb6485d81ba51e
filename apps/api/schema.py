"""OpenAPI additions: every operation documents its error answers, so clients (and schema checks) know them."""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from rest_framework import serializers


class ErrorSerializer(serializers.Serializer):
    """`detail` says what went wrong; a 400 also names each bad parameter or field as a key listing its messages."""

    detail = serializers.CharField(required=False)


ERRORS = {
    "400": "A query parameter or the request body is invalid; the message names it.",
    "401": "No token (or session), or the token is unknown or revoked.",
    "403": "The token's scope does not allow this endpoint (a read token cannot ingest, an ingest token cannot read).",
    "404": "No such cluster, namespace, pod or page; the message says which.",
}


class ApiSchema(AutoSchema):
    """drf-spectacular's AutoSchema, plus the JSON error answers every cputune endpoint can give."""

    extra_errors: dict[str, str] = {}

    def _get_parameters(self) -> Any:
        parameters = super()._get_parameters()
        for parameter in parameters:
            # An optional query parameter sent empty (?kind=&namespace=) means "not given", as in the contract's
            # `recommendations/?cluster=&namespace=&kind=`.
            if parameter.get("in") == "query" and not parameter.get("required"):
                parameter["allowEmptyValue"] = True
        return parameters

    def _get_response_bodies(self, direction: Any = "response") -> Any:
        responses = super()._get_response_bodies(direction)
        for code, description in {**ERRORS, **self.extra_errors}.items():
            if code not in responses:
                responses[code] = {**self._get_response_for_code(ErrorSerializer, code), "description": description}
        return responses


class IngestSchema(ApiSchema):
    extra_errors = {
        "403": "Not an ingest token, or the token has no cluster, or it is bound to another node than the body names.",
        "413": "The body is larger than the ingest limit.",
        "429": "More pushes from this token and node than CPUTUNE_INGEST_RATE allows; Retry-After says when to retry.",
    }
