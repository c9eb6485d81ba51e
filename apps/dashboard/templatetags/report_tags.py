"""Formatting for the pages: units on every number, a dash for unknown values (never 0), sort links."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import template
from django.http import HttpRequest
from django.utils import timezone

from apps.advisor.facts import format_mcpu
from apps.advisor.models import Window
from apps.advisor.selectors import Coverage

register = template.Library()

DASH = "—"
# Text columns sort A→Z on the first click; numbers biggest first, as the question is usually "which is worst".
_ASCENDING_FIRST = {"pod", "container", "node", "workload_name", "kernel_verdict", "severity"}
DEFAULT_SORT = "-throttle_ratio"  # findings() order when no ?sort= is given


@register.filter
def mcpu(value: float | int | None) -> str:
    """1385 → "1,385m"; None → "—". The advice text's formatter, so a card's figures and its advice agree."""
    if value is None:
        return DASH
    return format_mcpu(value, with_cpus=False)


@register.filter
def throttled_s(row: dict[str, Any]) -> str:
    """A report row's throttled seconds per second, "—" when its throttle ratio is unknown: without quota periods
    a 0.00 beside a "—" ratio would read as measured."""
    if row.get("throttle_ratio") is None:
        return DASH
    return num(row.get("throttled_seconds_per_second"), 2)


@register.filter
def waiting(row: dict[str, Any]) -> str:
    """A report row's CPU pressure as a share of the time: "—" where the source has none, "not measured" where it
    reads 0 on a throttled container (see advisor.pressure), never a zero that was not measured."""
    status = row.get("pressure_status")
    if status == "not_measured":
        return "not measured"
    value = row.get("pressure_waiting_per_second")
    if status != "measured" or value is None:
        return DASH
    return f"{value * 100:.1f}%"


@register.filter
def above_limit(row: dict[str, Any]) -> bool:
    """Whether the row's p95 usage reads above its limit.

    Shown as measured and explained on the page rather than clamped: a sample divides the CPU time used by the time
    between two readings, so a reading taken a little late makes one interval read slightly above the quota
    (jitter), and clamping in one view would make the page disagree with the CSV and the API.
    """
    p95, limit = row.get("usage_p95_mcpu"), row.get("limit_mcpu")
    return p95 is not None and bool(limit) and round(p95) > limit


@register.filter
def span(start: datetime | None, end: datetime | None) -> str:
    """A window as "12-01 17:50–18:50" (UTC), or "11-30 18:50 – 12-01 18:50" when it ends on another day."""
    if end is None:
        return utc(start, "%m-%d %H:%M")
    if start is None:
        return utc(end, "%m-%d %H:%M")
    same_day = utc(start, "%Y-%m-%d") == utc(end, "%Y-%m-%d")
    if same_day:
        return f"{utc(start, '%m-%d %H:%M')}–{utc(end, '%H:%M')}"
    return f"{utc(start, '%m-%d %H:%M')} – {utc(end, '%m-%d %H:%M')}"


@register.filter
def coverage_span(coverage: Coverage) -> str:
    """How much of the window the figures' data spans: "7 of 60 min", "7 min of 24 h", "30 h of 7 d"."""
    covered_min = coverage.covered_minutes
    window_min = coverage.window_minutes
    window_text, window_unit = (f"{window_min:,}", "min") if window_min <= 60 else _in_hours_or_days(window_min)
    if covered_min < 120 or window_unit == "min":
        covered_text, covered_unit = f"{covered_min:,}", "min"
    else:
        covered_text, covered_unit = _in_hours_or_days(covered_min, days=window_unit == "d" and covered_min >= 2880)
    if covered_unit == window_unit:
        return f"{covered_text} of {window_text} {window_unit}"
    return f"{covered_text} {covered_unit} of {window_text} {window_unit}"


def _in_hours_or_days(minutes: int, *, days: bool | None = None) -> tuple[str, str]:
    """Minutes as whole hours, or whole days from two days up (or as `days` says)."""
    if days is None:
        days = minutes >= 2880
    return (f"{minutes // 1440}", "d") if days else (f"{minutes // 60}", "h")


@register.filter
def plain(value: float | None) -> str:
    """A number for a form field: 50.0 → "50", 12.5 → "12.5", None → ""."""
    return "" if value is None else f"{value:g}"


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
