"""The pages' query parameters, parsed with Django forms so a bad value becomes a 400 naming it, never a 500."""

from __future__ import annotations

from typing import Any

from django import forms
from django.http import QueryDict

from apps.advisor.models import Window
from apps.advisor.vocabulary import RECOMMENDATION_KINDS

from .selectors import SORT_CHOICES

WINDOW_CHOICES = [(w.value, w.label) for w in Window]


class BadQuery(ValueError):
    """A query parameter the page cannot use; the message names the parameter and the value."""


def _choice_error(name: str, allowed: list[str] | tuple[str, ...]) -> dict[str, str]:
    return {"invalid_choice": f"{name} %(value)r is not one of: {', '.join(allowed)}."}


class WindowForm(forms.Form):
    window = forms.ChoiceField(
        choices=WINDOW_CHOICES,
        required=False,
        error_messages=_choice_error("window", [w.value for w in Window]),
    )

    def clean_window(self) -> str:
        return self.cleaned_data.get("window") or Window.HOUR


class ReportForm(WindowForm):
    """The namespace report's GET form: window, filters, sort and page."""

    kind = forms.ChoiceField(
        choices=[("", "any recommendation"), *[(k, k.replace("_", " ")) for k in RECOMMENDATION_KINDS]],
        required=False,
        error_messages=_choice_error("kind", RECOMMENDATION_KINDS),
    )
    min_throttle_ratio = forms.FloatField(
        required=False,
        min_value=0.0,
        max_value=1.0,
        label="min throttle ratio",
        error_messages={
            "invalid": "min_throttle_ratio must be a number between 0 and 1 (e.g. 0.1 for 10 percent).",
            "min_value": "min_throttle_ratio must be between 0 and 1 (e.g. 0.1 for 10 percent).",
            "max_value": "min_throttle_ratio must be between 0 and 1 (e.g. 0.1 for 10 percent).",
        },
    )
    # The page's filter is in percent, as every page shows ratios; min_throttle_ratio (0–1) keeps old links working.
    min_throttle_pct = forms.FloatField(
        required=False,
        min_value=0.0,
        max_value=100.0,
        label="min throttle ratio, %",
        error_messages={
            "invalid": "min_throttle_pct must be a number of percent between 0 and 100 (e.g. 10).",
            "min_value": "min_throttle_pct must be between 0 and 100 percent (e.g. 10).",
            "max_value": "min_throttle_pct must be between 0 and 100 percent (e.g. 10).",
        },
    )
    node = forms.CharField(required=False, max_length=253)
    workload = forms.CharField(required=False, max_length=253)
    sort = forms.ChoiceField(
        choices=[("", "worst first"), *[(k, k) for k in SORT_CHOICES]],
        required=False,
        error_messages={"invalid_choice": "sort %(value)r is not a report column; sort by e.g. -throttle_ratio."},
    )
    page = forms.IntegerField(
        required=False,
        min_value=1,
        error_messages={
            "invalid": "page must be a whole number from 1.",
            "min_value": "page must be a whole number from 1.",
        },
    )

    def clean(self) -> dict[str, Any]:
        """The minimum ratio in both spellings, each filled from the other: min_throttle_pct (the page's field) wins
        over min_throttle_ratio (0–1, from older links)."""
        data = super().clean() or {}
        percent = data.get("min_throttle_pct")
        if percent is not None:
            data["min_throttle_ratio"] = percent / 100
        elif data.get("min_throttle_ratio") is not None:
            data["min_throttle_pct"] = data["min_throttle_ratio"] * 100
        return data


def parse(form_class: type[forms.Form], data: QueryDict) -> dict[str, Any]:
    """Clean `data` with `form_class`; raises BadQuery with every error message (parameter and value) joined."""
    form = form_class(data)
    if not form.is_valid():
        messages = [str(message) for errors in form.errors.values() for message in errors]
        raise BadQuery(" ".join(messages))
    return form.cleaned_data
