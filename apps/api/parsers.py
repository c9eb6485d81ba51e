"""The ingest endpoint's JSON parser: bounded in size and nesting, strict about NaN and Infinity."""

from __future__ import annotations

import json
from typing import Any

from rest_framework import status
from rest_framework.exceptions import APIException, ParseError
from rest_framework.parsers import BaseParser

# 5,000 containers of ~700 bytes each (the agent's compact JSON) is 3.5 MB; twice that leaves room for long errors.
MAX_INGEST_BYTES = 8 * 1024 * 1024


class PayloadTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = (
        f"The body is larger than {MAX_INGEST_BYTES // (1024 * 1024)} MiB: send fewer containers per batch."
    )
    default_code = "payload_too_large"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number (send null for an unknown value)")


class BoundedJSONParser(BaseParser):
    """Reads at most MAX_INGEST_BYTES (whatever Content-Length claims) and turns every decoding failure, including
    nesting too deep for the decoder, into a 400.

    Not a JSONParser subclass on purpose: DRF reads a JSONParser's body through request.body, which applies the
    site-wide DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB) and answers an HTML 400; this endpoint has its own limit, in JSON.
    """

    media_type = "application/json"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        parser_context = parser_context or {}
        encoding = parser_context.get("encoding", "utf-8")
        body = stream.read(MAX_INGEST_BYTES + 1) if stream is not None else b""
        if len(body) > MAX_INGEST_BYTES:
            raise PayloadTooLarge()
        try:
            return json.loads(body.decode(encoding), parse_constant=_reject_constant)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ParseError(f"JSON parse error: {exc}") from None
        except RecursionError:
            raise ParseError("JSON parse error: nested too deeply") from None
