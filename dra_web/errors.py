"""Site-wide error views: JSON under /api/ (scripts parse it), Django's pages elsewhere."""

from __future__ import annotations

from django.http import JsonResponse
from django.views import defaults


def _is_api(request) -> bool:
    return request.path.startswith("/api/")


def not_found(request, exception=None):
    if _is_api(request):
        return JsonResponse({"detail": f"not found: {request.path}"}, status=404)
    return defaults.page_not_found(request, exception)


def bad_request(request, exception=None):
    if _is_api(request):
        return JsonResponse({"detail": "request: malformed request"}, status=400)
    return defaults.bad_request(request, exception)


def server_error(request):
    if _is_api(request):
        return JsonResponse(
            {"detail": "internal error: the request failed; the server logged the details"},
            status=500,
        )
    return defaults.server_error(request)
