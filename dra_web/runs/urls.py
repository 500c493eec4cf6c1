from django.urls import path

from dra_web.runs import apis

urlpatterns = [
    path("runs/", apis.RunListCreateApi.as_view(), name="api-runs"),
    path("runs/<int:run_id>/", apis.RunDetailApi.as_view(), name="api-run"),
    path("runs/<int:run_id>/cancel/", apis.RunCancelApi.as_view(), name="api-run-cancel"),
    path("runs/<int:run_id>/trace/", apis.RunTraceApi.as_view(), name="api-run-trace"),
    path("runs/<int:run_id>/diff/<int:other_id>/", apis.RunDiffApi.as_view(), name="api-run-diff"),
    path(
        "snapshots/<int:snapshot_id>/variants/",
        apis.SnapshotVariantApi.as_view(),
        name="api-snapshot-variants",
    ),
]
