"""Failed logins counted per client address, shared by the login form and the token endpoint:
after DRA_WEB_LOGIN_MAX_FAILURES failures within DRA_WEB_LOGIN_WINDOW_SECONDS, further
attempts from that address are refused (429) until the window has passed."""

from __future__ import annotations

import time

from django.conf import settings
from django.core.cache import cache
from rest_framework.throttling import BaseThrottle


def client_address(request) -> str:
    return request.META.get("REMOTE_ADDR") or "unknown"


def _key(request) -> str:
    return f"dra-web:login-failures:{client_address(request)}"


def _failures(request) -> list[float]:
    now = time.time()
    window = settings.DRA_WEB_LOGIN_WINDOW_SECONDS
    return [t for t in cache.get(_key(request), []) if now - t < window]


def retry_after(request) -> int | None:
    """Seconds until this address may try again; None when it may now."""
    failures = _failures(request)
    if len(failures) < settings.DRA_WEB_LOGIN_MAX_FAILURES:
        return None
    window = settings.DRA_WEB_LOGIN_WINDOW_SECONDS
    return max(1, int(failures[0] + window - time.time()) + 1)


def record_failure(request) -> None:
    failures = _failures(request)
    failures.append(time.time())
    limit = settings.DRA_WEB_LOGIN_MAX_FAILURES
    cache.set(_key(request), failures[-limit:], timeout=settings.DRA_WEB_LOGIN_WINDOW_SECONDS)


class LoginFailureThrottle(BaseThrottle):
    """DRF throttle of the token endpoint (the view records failures)."""

    def allow_request(self, request, view) -> bool:
        self._wait = retry_after(request)
        return self._wait is None

    def wait(self) -> float | None:
        return self._wait
