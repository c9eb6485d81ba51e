"""How numbers read on the pages: units on every figure, a dash for unknown, ratio cells coloured against the target."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.template import Context, Template
from django.test import RequestFactory
from django.utils import timezone

from apps.advisor.facts import format_mcpu
from apps.advisor.selectors import Coverage
from apps.dashboard.templatetags.report_tags import (
    above_limit,
    age,
    coverage_span,
    mcpu,
    pct,
    plain,
    ratio_level,
    span,
    throttled_s,
)


@pytest.mark.parametrize(
    ("ratio", "text"), [(None, "—"), (0.0, "0%"), (0.004, "0.4%"), (0.0994, "9.9%"), (0.6, "60%"), (1.0, "100%")]
)
def test_ratios_read_as_percentages(ratio: float | None, text: str) -> None:
    assert pct(ratio) == text


def test_millicores_carry_their_unit_and_unknown_is_a_dash_not_zero() -> None:
    assert (mcpu(1385), mcpu(0), mcpu(None), mcpu(489.6)) == ("1,385m", "0m", "—", "490m")


@pytest.mark.parametrize(
    ("ratio", "level"),
    [(None, "ratio-none"), (0.02, "ratio-ok"), (0.06, "ratio-near"), (0.1, "ratio-near"), (0.11, "ratio-over")],
)
def test_ratio_cells_are_over_only_above_the_target(ratio: float | None, level: str) -> None:
    assert ratio_level(ratio, 0.1) == level


def test_ages_are_short_and_say_past_or_future() -> None:
    now = timezone.now()
    assert age(now - timedelta(seconds=30)) == "30 s ago"
    assert age(now - timedelta(minutes=12)) == "12 min ago"
    assert age(now + timedelta(seconds=41)).startswith("in 4")


def render_sort(query: str, column: str) -> str:
    request = RequestFactory().get(f"/c/x/ns/y/?{query}")
    return Template("{% load report_tags %}{% sort_url col %}").render(Context({"request": request, "col": column}))


def test_sort_links_flip_the_direction_and_drop_the_page_but_keep_filters() -> None:
    assert render_sort("kind=cut_threads&page=3", "throttle_ratio") == "?kind=cut_threads&amp;sort=throttle_ratio"
    assert render_sort("sort=throttle_ratio", "throttle_ratio") == "?sort=-throttle_ratio"
    assert render_sort("", "pod") == "?sort=pod"  # names A→Z first
    assert render_sort("", "usage_p95_mcpu") == "?sort=-usage_p95_mcpu"  # numbers biggest first


def test_millicores_on_pages_are_written_as_the_advice_writes_them() -> None:
    for value in (0, 200, 1000, 1385, 15_800, 489.6):
        assert mcpu(value) == format_mcpu(value, with_cpus=False)
    assert mcpu(1000) == "1,000m"


def test_a_window_names_the_end_date_only_when_it_is_another_day() -> None:
    end = datetime(2025, 12, 1, 18, 50, tzinfo=UTC)
    assert span(end - timedelta(hours=1), end) == "12-01 17:50–18:50"
    assert span(end - timedelta(hours=24), end) == "11-30 18:50 – 12-01 18:50"
    assert span(None, end) == "12-01 18:50"


def coverage(window: str, covered_s: float | None) -> Coverage:
    seconds = {"1h": 3600, "24h": 86_400, "7d": 604_800}[window]
    return Coverage(window, seconds, 8, 8, 0, timezone.now(), covered_s, None)


@pytest.mark.parametrize(
    ("window", "covered_s", "text"),
    [
        ("1h", 7 * 60, "7 of 60 min"),
        ("1h", 3600, "60 of 60 min"),
        ("24h", 7 * 60, "7 min of 24 h"),
        ("24h", 23 * 3600, "23 of 24 h"),
        ("7d", 30 * 3600, "30 h of 7 d"),
        ("7d", 5 * 86_400, "5 of 7 d"),
        ("1h", None, "0 of 60 min"),
    ],
)
def test_coverage_reads_in_the_windows_own_unit(window: str, covered_s: float | None, text: str) -> None:
    assert coverage_span(coverage(window, covered_s)) == text


def test_throttled_seconds_need_a_known_ratio() -> None:
    assert throttled_s({"throttle_ratio": None, "throttled_seconds_per_second": 0.0}) == "—"
    assert throttled_s({"throttle_ratio": 0.6, "throttled_seconds_per_second": 0.3}) == "0.30"


def test_usage_above_the_limit_is_flagged_as_the_page_rounds_it() -> None:
    assert above_limit({"usage_p95_mcpu": 201.0, "limit_mcpu": 200})
    assert not above_limit({"usage_p95_mcpu": 200.4, "limit_mcpu": 200})  # reads "200m": not above
    assert not above_limit({"usage_p95_mcpu": 900.0, "limit_mcpu": None})
    assert not above_limit({"usage_p95_mcpu": None, "limit_mcpu": 200})


def test_form_numbers_drop_a_trailing_zero() -> None:
    assert (plain(50.0), plain(12.5), plain(None)) == ("50", "12.5", "")
