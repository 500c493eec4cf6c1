"""Page-number pagination with a client-chosen page size (``?page=2&page_size=200``)."""

from rest_framework.pagination import PageNumberPagination


class Pagination(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = 1000
