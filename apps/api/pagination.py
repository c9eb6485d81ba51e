from rest_framework.pagination import PageNumberPagination


class Pagination(PageNumberPagination):
    """DRF-style pages: {count, next, previous, results}; ?page= and ?page_size= up to 1000."""

    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000
