"""GET /healthz/: liveness for container health checks (database reachable), no login."""

from __future__ import annotations

from django.db import connection
from django.http import JsonResponse


def healthz(request):
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # report, do not raise: this is what a health check asks
        return JsonResponse({"status": "error", "database": str(exc)}, status=503)
    return JsonResponse({"status": "ok"})
