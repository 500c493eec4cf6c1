"""Review API paths; included at the site root, so they carry their full /api/ prefix.

Pod names are matched with ``path``: any name reverses and resolves (a name with ``/`` too);
the view joins namespace and name again, so where the split falls does not matter."""

from django.urls import path, re_path

from dra_web.reviews import apis

app_name = "reviews"

urlpatterns = [
    path("api/runs/<int:run_id>/reviews/", apis.RunReviewsApi.as_view(), name="run-reviews"),
    # Any pod name (slashes, newlines, spaces ...) reverses and resolves.
    re_path(
        r"^api/runs/(?P<run_id>[0-9]+)/pods/(?P<namespace>[\s\S]+)/(?P<name>[\s\S]+)/review/$",
        apis.PodReviewApi.as_view(),
        name="pod-review",
    ),
    re_path(
        r"^api/runs/(?P<run_id>[0-9]+)/pods/(?P<namespace>[\s\S]+)/(?P<name>[\s\S]+)/review/comments/$",
        apis.PodReviewCommentsApi.as_view(),
        name="pod-review-comments",
    ),
]
