from __future__ import annotations

from typing import Any

from django.core.paginator import Paginator
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request


def _positive_int(request: Request, name: str, maximum: int | None = None) -> int | None:
    """The query parameter as a whole number from 1 (to `maximum`); None when absent; a 400 naming it otherwise."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    limit = f" from 1 to {maximum}" if maximum is not None else " from 1"
    if not raw.isascii() or not raw.isdigit() or int(raw) < 1:
        raise ValidationError({name: [f"{name} must be a whole number{limit}, not {raw[:40]!r}."]})
    value = int(raw)
    if maximum is not None and value > maximum:
        raise ValidationError({name: [f"{name} must be a whole number{limit}, not {value}."]})
    return value


class Pagination(PageNumberPagination):
    """DRF-style pages: {count, next, previous, results}; ?page= from 1 and ?page_size= from 1 to 1000.

    Unlike DRF's default, a malformed page or page_size is a 400 naming the parameter instead of being ignored; a page
    past the last one is a 404.
    """

    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000
    invalid_page_message = "page {page_number} does not exist: {message}"

    def get_page_size(self, request: Request) -> int:
        size = _positive_int(request, self.page_size_query_param, self.max_page_size)
        return self.page_size if size is None else size

    def get_page_number(self, request: Request, paginator: Paginator) -> Any:
        if request.query_params.get(self.page_query_param) in self.last_page_strings:
            return paginator.num_pages
        return _positive_int(request, self.page_query_param) or 1

    def validate_parameters(self, request: Request) -> None:
        """A 400 for a malformed page or page_size, where the response is not paged (a CSV of the whole list)."""
        if request.query_params.get(self.page_query_param) not in self.last_page_strings:
            _positive_int(request, self.page_query_param)
        self.get_page_size(request)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_query_param:
                parameter["schema"] = {"type": "integer", "minimum": 1}
            elif parameter["name"] == self.page_size_query_param:
                parameter["schema"] = {"type": "integer", "minimum": 1, "maximum": self.max_page_size}
        return parameters
