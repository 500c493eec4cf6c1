"""Root URLs: the REST API under /api/, login under /accounts/, the pages at /."""

from django.conf import settings
from django.contrib import admin
from django.urls import include, path, re_path
from django.views.static import serve
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from dra_web.accounts.views import ThrottledLoginView
from dra_web.health import healthz

api_patterns = [
    path("", include("dra_web.snapshots.urls")),
    path("", include("dra_web.runs.urls")),
    path("", include("dra_web.accounts.urls")),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path(
        "docs/",
        SpectacularSwaggerView.as_view(url_name="api-schema", template_name="pages/api_docs.html"),
        name="api-docs",
    ),
    path("redoc/", SpectacularRedocView.as_view(url_name="api-schema"), name="api-redoc"),
]

handler400 = "dra_web.errors.bad_request"
handler404 = "dra_web.errors.not_found"
handler500 = "dra_web.errors.server_error"

urlpatterns = [
    path("api/", include(api_patterns)),
    # The login form with the failed-login throttle; the rest of Django's auth views as is.
    path("accounts/login/", ThrottledLoginView.as_view(), name="login"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("healthz/", healthz, name="healthz"),
]

# The team review app (its paths carry their /api/ prefix) and the pages, both at the root.
urlpatterns += [
    path("", include("dra_web.reviews.urls")),
    path("", include("dra_web.pages.urls")),
]

if settings.DEBUG:
    from django.contrib.staticfiles.urls import staticfiles_urlpatterns

    urlpatterns += staticfiles_urlpatterns()
elif settings.DRA_WEB_SERVE_STATIC:
    # A single container without a front proxy (docker-compose): serve collectstatic's output.
    urlpatterns += [
        re_path(r"^static/(?P<path>.*)$", serve, {"document_root": settings.STATIC_ROOT}),
    ]
