"""Formatting for the pages: units on every number, a dash for unknown values (never 0), sort links."""

from __future__ import annotations

from datetime import datetime

from django import template
from django.http import HttpRequest
from django.utils import timezone

from apps.advisor.models import Window

register = template.Library()

DASH = "—"
# Text columns sort A→Z on the first click; numbers biggest first, as the question is usually "which is worst".
_ASCENDING_FIRST = {"pod", "container", "node", "workload_name", "kernel_verdict", "severity"}
DEFAULT_SORT = "-throttle_ratio"  # findings() order when no ?sort= is given


@register.filter
def mcpu(value: float | int | None) -> str:
    """1385 → "1,385m"; None → "—"."""
    if value is None:
        return DASH
    return f"{value:,.0f}m"


@register.filter
def pct(ratio: float | None) -> str:
    """A 0–1 ratio as a percentage: one decimal under 10 % (where the target sits), whole numbers above."""
    if ratio is None:
        return DASH
    percent = ratio * 100
    if percent == 0:
        return "0%"
    return f"{percent:.1f}%" if percent < 10 else f"{percent:.0f}%"


@register.filter
def num(value: float | int | None, digits: int = 0) -> str:
    if value is None:
        return DASH
    return f"{value:,.{int(digits)}f}"


@register.filter
def ratio_level(ratio: float | None, target: float) -> str:
    """CSS class for a throttle ratio cell: over the target, above half of it, below, or unknown."""
    if ratio is None:
        return "ratio-none"
    if ratio > target:
        return "ratio-over"
    if ratio > target / 2:
        return "ratio-near"
    return "ratio-ok"


@register.filter
def kind_label(kind: str) -> str:
    return kind.replace("_", " ")


@register.filter
def cpus(mcpu_value: int | None) -> str:
    """Millicores as CPUs: 16000 → "16", 1500 → "1.5"."""
    if mcpu_value is None:
        return DASH
    return f"{mcpu_value / 1000:g}"


@register.filter
def utc(ts: datetime | None, fmt: str = "%Y-%m-%d %H:%M") -> str:
    if ts is None:
        return DASH
    return timezone.localtime(ts, timezone.get_fixed_timezone(0)).strftime(fmt)


@register.filter
def age(ts: datetime | None) -> str:
    """How long ago, compactly: "45 s ago", "12 min ago", "3 h ago", "2 d ago"; in the future: "in 40 s"."""
    if ts is None:
        return DASH
    seconds = (timezone.now() - ts).total_seconds()
    future = seconds < 0
    seconds = abs(seconds)
    if seconds < 90:
        text = f"{seconds:.0f} s"
    elif seconds < 90 * 60:
        text = f"{seconds / 60:.0f} min"
    elif seconds < 36 * 3600:
        text = f"{seconds / 3600:.0f} h"
    else:
        text = f"{seconds / 86400:.0f} d"
    return f"in {text}" if future else f"{text} ago"


def _current_sort(request: HttpRequest) -> str:
    return request.GET.get("sort") or DEFAULT_SORT


@register.simple_tag(takes_context=True)
def sort_url(context: template.Context, column: str) -> str:
    """The query string that sorts by `column`, flipping the direction when it is already sorted by it."""
    request: HttpRequest = context["request"]
    current = _current_sort(request)
    if current.lstrip("-") == column:
        new = column if current.startswith("-") else f"-{column}"
    else:
        new = column if column in _ASCENDING_FIRST else f"-{column}"
    query = request.GET.copy()
    query["sort"] = new
    query.pop("page", None)
    return "?" + query.urlencode()


@register.simple_tag(takes_context=True)
def sort_state(context: template.Context, column: str) -> str:
    """ "descending", "ascending" or "none", for aria-sort and the arrow."""
    current = _current_sort(context["request"])
    if current.lstrip("-") != column:
        return "none"
    return "descending" if current.startswith("-") else "ascending"


@register.simple_tag(takes_context=True)
def page_url(context: template.Context, number: int) -> str:
    query = context["request"].GET.copy()
    query["page"] = str(number)
    return "?" + query.urlencode()


@register.simple_tag
def window_choices() -> list[tuple[str, str]]:
    """(value, label) of every report window: 1h, 24h, 7d."""
    return [(w.value, w.label) for w in Window]


@register.simple_tag(takes_context=True)
def window_url(context: template.Context, window: str) -> str:
    """The current page's query with another window; filters and sort stay, the page number resets."""
    query = context["request"].GET.copy()
    query["window"] = window
    query.pop("page", None)
    return "?" + query.urlencode()
