"""HTML pages. Each view parses its input, calls one selector and renders."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from . import selectors


def overview(request: HttpRequest) -> HttpResponse:
    return render(request, "dashboard/overview.html", {"clusters": selectors.cluster_overview()})
