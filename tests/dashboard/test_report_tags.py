"""How numbers read on the pages: units on every figure, a dash for unknown, ratio cells coloured against the target."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.template import Context, Template
from django.test import RequestFactory
from django.utils import timezone

from apps.dashboard.templatetags.report_tags import age, mcpu, pct, ratio_level


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
