"""Review API paths; included at the site root, so they carry their full /api/ prefix."""

from django.urls import path

from dra_web.reviews import apis

app_name = "reviews"

urlpatterns = [
    path("api/runs/<int:run_id>/reviews/", apis.RunReviewsApi.as_view(), name="run-reviews"),
    path(
        "api/runs/<int:run_id>/pods/<str:namespace>/<str:name>/review/",
        apis.PodReviewApi.as_view(),
        name="pod-review",
    ),
    path(
        "api/runs/<int:run_id>/pods/<str:namespace>/<str:name>/review/comments/",
        apis.PodReviewCommentsApi.as_view(),
        name="pod-review-comments",
    ),
]
