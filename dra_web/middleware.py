"""Request checks that hold for every view, API and page alike."""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from dra_web.problems import problem_json


class RejectNulMiddleware:
    """A NUL in the path or the query string is a 400: PostgreSQL cannot compare text with a
    NUL in it, so letting it through makes any filter on it a 500."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        query = request.META.get("QUERY_STRING", "")
        if "\x00" in request.path or b"\x00" in unquote_to_bytes(query.replace("+", " ")):
            return problem_json(
                400, "request: NUL characters are not allowed in the path or query string"
            )
        return self.get_response(request)
