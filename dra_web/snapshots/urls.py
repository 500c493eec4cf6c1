from django.urls import path

from dra_web.snapshots import apis

urlpatterns = [
    path("snapshots/", apis.SnapshotListCreateApi.as_view(), name="api-snapshots"),
    path("snapshots/import/", apis.ClusterImportApi.as_view(), name="api-snapshots-import"),
    path("snapshots/<int:snapshot_id>/", apis.SnapshotDetailApi.as_view(), name="api-snapshot"),
    path(
        "snapshots/<int:snapshot_id>/objects/",
        apis.SnapshotObjectsApi.as_view(),
        name="api-snapshot-objects",
    ),
]
