"""Site-wide error views: JSON in the API's one shape under /api/ (scripts parse it), Django's
pages elsewhere."""

from __future__ import annotations

from django.views import defaults

from dra_web.exceptions import INTERNAL_ERROR
from dra_web.problems import problem_json


def _is_api(request) -> bool:
    return request.path.startswith("/api/")


def not_found(request, exception=None):
    if _is_api(request):
        return problem_json(404, f"not found: {request.path}")
    return defaults.page_not_found(request, exception)


def bad_request(request, exception=None):
    if _is_api(request):
        return problem_json(400, "request: malformed request")
    return defaults.bad_request(request, exception)


def server_error(request):
    if _is_api(request):
        return problem_json(500, INTERNAL_ERROR)
    return defaults.server_error(request)
