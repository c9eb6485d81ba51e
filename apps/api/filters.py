"""Query parameters of the report collections, declared with django-filter.

The FilterSets parse and validate (a bad value is a 400 naming the parameter); the lookups themselves are
advisor.selectors.findings(), which the dashboard uses too, so `kind=raise_limit` selects the same containers on a page
and in the API. SelectorFilterBackend joins the two: it validates the FilterSet and hands the cleaned values to the
view's `select()`.
"""

from __future__ import annotations

from typing import Any

import django_filters
from django_filters.rest_framework import DjangoFilterBackend
from django_filters.utils import translate_validation
from drf_spectacular.utils import extend_schema_field
from rest_framework.request import Request

from apps.advisor.models import Finding, Window
from apps.advisor.vocabulary import RECOMMENDATION_KINDS

from .selectors import ORDERINGS

WINDOW_ERROR = f"window must be one of {', '.join(Window.values)}, not '%(value)s'."
KIND_ERROR = f"kind must be one of {', '.join(RECOMMENDATION_KINDS)}, not '%(value)s'."
ORDERING_ERROR = f"ordering must be one of {', '.join(ORDERINGS)}, not '%(value)s'."
RATIO_ERROR = "min_throttle_ratio must be a number from 0 to 1."
NAME_MAX = 253  # Kubernetes object names (DNS subdomains) are at most 253 characters


class _ParsedOnly:
    """Parsed and validated by the FilterSet, applied by the view's selector (see SelectorFilterBackend)."""

    def filter(self, qs: Any, value: Any) -> Any:
        return qs


class ParsedChoiceFilter(_ParsedOnly, django_filters.ChoiceFilter):
    pass


class ParsedCharFilter(_ParsedOnly, django_filters.CharFilter):
    pass


class ParsedNumberFilter(_ParsedOnly, django_filters.NumberFilter):
    pass


def _window_filter() -> ParsedChoiceFilter:
    return ParsedChoiceFilter(
        choices=Window.choices,
        help_text="The window the figures cover, ending now (default 1h).",
        error_messages={"invalid_choice": WINDOW_ERROR},
    )


def _kind_filter() -> ParsedChoiceFilter:
    return ParsedChoiceFilter(
        choices=[(kind, kind) for kind in RECOMMENDATION_KINDS],
        help_text="Only containers with a recommendation of this kind.",
        error_messages={"invalid_choice": KIND_ERROR},
    )


def _name_filter(parameter: str, help_text: str) -> ParsedCharFilter:
    return ParsedCharFilter(
        max_length=NAME_MAX,
        help_text=help_text,
        error_messages={"max_length": f"{parameter} is at most {NAME_MAX} characters long."},
    )


class _Params(django_filters.FilterSet):
    def params(self) -> dict[str, Any]:
        """The cleaned values, with empty ones as None and the window defaulting to 1h."""
        cleaned = {name: (value if value not in ("", None) else None) for name, value in self.form.cleaned_data.items()}
        cleaned["window"] = cleaned.get("window") or Window.HOUR
        return cleaned


class ContainerFilter(_Params):
    window = _window_filter()
    min_throttle_ratio = extend_schema_field({"type": "number", "minimum": 0, "maximum": 1})(
        ParsedNumberFilter(
            min_value=0,
            max_value=1,
            help_text="Only containers throttled in at least this share of periods (0-1).",
            error_messages={"invalid": RATIO_ERROR, "min_value": RATIO_ERROR, "max_value": RATIO_ERROR},
        )
    )
    kind = _kind_filter()
    node = _name_filter("node", "Only containers on this node.")
    ordering = ParsedChoiceFilter(
        choices=[(key, key) for key in ORDERINGS],
        help_text="Sort order (default -throttle_ratio: worst first; unknown values always last).",
        error_messages={"invalid_choice": ORDERING_ERROR},
    )

    class Meta:
        model = Finding
        fields: list[str] = []


class RecommendationFilter(_Params):
    cluster = _name_filter("cluster", "Only this cluster (default: every cluster).")
    namespace = _name_filter("namespace", "Only this namespace.")
    kind = _kind_filter()
    window = _window_filter()

    class Meta:
        model = Finding
        fields: list[str] = []


class SelectorFilterBackend(DjangoFilterBackend):
    """Validates the view's FilterSet (400 naming the parameter) and returns `view.select(params)`."""

    def filter_queryset(self, request: Request, queryset: Any, view: Any) -> Any:
        filterset = self.get_filterset(request, queryset, view)
        if filterset is None:
            return queryset
        if not filterset.is_valid():
            raise translate_validation(filterset.errors)
        return view.select(filterset.params())
