"""Review API paths; included at the site root, so they carry their full /api/ prefix.

Pod names are matched with ``path``: any name reverses and resolves (a name with ``/`` too);
the view joins namespace and name again, so where the split falls does not matter."""

from django.urls import path

from dra_web.reviews import apis

app_name = "reviews"

urlpatterns = [
    path("api/runs/<int:run_id>/reviews/", apis.RunReviewsApi.as_view(), name="run-reviews"),
    path(
        "api/runs/<int:run_id>/pods/<path:namespace>/<path:name>/review/",
        apis.PodReviewApi.as_view(),
        name="pod-review",
    ),
    path(
        "api/runs/<int:run_id>/pods/<path:namespace>/<path:name>/review/comments/",
        apis.PodReviewCommentsApi.as_view(),
        name="pod-review-comments",
    ),
]
