"""Page paths (docs/WEB.md) and the search tree's JSON helpers; included at the root."""

from django.urls import path, re_path

from dra_web.pages import views

app_name = "pages"

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    # Browsers ask for /favicon.ico whatever the page says: send them to the SVG.
    path("favicon.ico", views.favicon, name="favicon"),
    path("upload/", views.upload, name="upload"),
    path("runs/start/", views.start_run, name="start-run"),
    path("snapshots/<int:snapshot_id>/", views.snapshot_detail, name="snapshot"),
    path("snapshots/<int:snapshot_id>/edit/", views.edit_object, name="snapshot-edit"),
    path("runs/<int:run_id>/try-fix/", views.try_fix, name="try-fix"),
    path("runs/<int:run_id>/", views.run_detail, name="run"),
    path("runs/<int:run_id>/row/", views.run_row, name="run-row"),
    path("runs/<int:run_id>/status/", views.run_status, name="run-status"),
    path("runs/<int:run_id>/diff/", views.diff_pick, name="diff-pick"),
    path("runs/<int:run_a>/diff/<int:run_b>/", views.run_diff, name="diff"),
    # Any pod name (slashes, newlines, spaces ...) reverses and resolves.
    re_path(
        r"^runs/(?P<run_id>[0-9]+)/pods/(?P<namespace>[\s\S]+)/(?P<name>[\s\S]+)/review/$",
        views.pod_review,
        name="pod-review",
    ),
    path("runs/<int:run_id>/result.json", views.download_result, name="download-result"),
    path("runs/<int:run_id>/trace.json", views.download_trace, name="download-trace"),
    path(
        "runs/<int:run_id>/nodeclaims.yaml", views.download_node_claims, name="download-nodeclaims"
    ),
    path(
        "runs/<int:run_id>/nodeclaims/<str:name>.yaml",
        views.download_node_claim,
        name="download-nodeclaim",
    ),
    path(
        "runs/<int:run_id>/pods/<str:namespace>/<str:name>/reasons/",
        views.pod_reasons,
        name="pod-reasons",
    ),
    re_path(
        r"^runs/(?P<run_id>[0-9]+)/pods/(?P<namespace>[\s\S]+)/(?P<name>[\s\S]+)/explanation/$",
        views.pod_explanation,
        name="pod-explanation",
    ),
    path("runs/<int:run_id>/cancel/", views.cancel_run, name="cancel-run"),
    path("runs/<int:run_id>/pin/", views.pin_run, name="pin-run"),
    path("runs/<int:run_id>/pools/devices/", views.pool_devices, name="pool-devices"),
    path("runs/<int:run_id>/tree/children/", views.tree_children, name="tree-children"),
    path("runs/<int:run_id>/tree/nodes/<int:node_id>/", views.tree_node, name="tree-node"),
    path("runs/<int:run_id>/tree/reveal/<int:node_id>/", views.tree_reveal, name="tree-reveal"),
    path("runs/<int:run_id>/tree/search/", views.tree_search, name="tree-search"),
    path("runs/<int:run_id>/tree/overview/", views.tree_overview, name="tree-overview"),
]
