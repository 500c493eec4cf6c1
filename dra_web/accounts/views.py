"""The login form with the failed-login throttle in front (template: registration/login.html)."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.http import HttpResponse

from dra_web.accounts import throttle


class ThrottledLoginView(auth_views.LoginView):
    def post(self, request, *args, **kwargs):
        wait = throttle.retry_after(request)
        if wait is not None:
            response = HttpResponse(
                f"Too many failed logins from this address: try again in {wait} s.\n",
                status=429,
                content_type="text/plain; charset=utf-8",
            )
            response["Retry-After"] = str(wait)
            return response
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form):
        throttle.record_failure(self.request)
        return super().form_invalid(form)
