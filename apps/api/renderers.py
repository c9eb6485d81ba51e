"""Renderers and content negotiation for the non-JSON answers: chat summaries, CSV, and ?format= handling."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from rest_framework.exceptions import ValidationError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request

from apps.advisor.export import stream_csv


def _error_text(data: Any) -> str:
    """Errors (a dict from DRF's exception handler) as lines of text, for a text renderer that gets one anyway."""
    if isinstance(data, Mapping):
        return "\n".join(f"{key}: {_error_text(value)}" for key, value in data.items())
    if isinstance(data, list):
        return "; ".join(_error_text(item) for item in data)
    return str(data)


class PlainTextRenderer(BaseRenderer):
    media_type = "text/plain"
    format = "text"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        text = data if isinstance(data, str) else _error_text(data)
        return text.encode(self.charset)


class MarkdownRenderer(PlainTextRenderer):
    media_type = "text/markdown"
    format = "markdown"


class SlackRenderer(JSONRenderer):
    """Slack Block Kit JSON: plain JSON, selected with ?format=slack or Accept: application/json."""

    format = "slack"


class CSVRenderer(BaseRenderer):
    """text/csv for ?format=csv or Accept: text/csv. Views stream CSV themselves (StreamingHttpResponse); this renders
    a list of rows when given one."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        if isinstance(data, list) and data and isinstance(data[0], Mapping):
            return b"".join(stream_csv(data, list(data[0])))
        return json.dumps(data).encode()


class FormatFirstNegotiation(DefaultContentNegotiation):
    """Like DRF's, except that an explicit ?format= wins over the Accept header, and an unknown format is a 400 naming
    the parameter (DRF answers 404)."""

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        renderers = list(renderers)
        fmt = format_suffix or request.query_params.get(self.settings.URL_FORMAT_OVERRIDE or "format")
        if fmt:
            for renderer in renderers:
                if renderer.format == fmt:
                    return renderer, renderer.media_type
            formats = ", ".join(r.format for r in renderers)
            raise ValidationError({"format": [f"format must be one of {formats}, not {fmt[:40]!r}."]})
        return super().select_renderer(request, renderers, format_suffix)


class FirstRendererNegotiation(DefaultContentNegotiation):
    """Always the view's first renderer, whatever the Accept header says (for /metrics, whose scrapers ask for
    text/plain or OpenMetrics and get what prometheus_client negotiates itself)."""

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        first = next(iter(renderers))
        return first, first.media_type
