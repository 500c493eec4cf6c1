"""Pages: the API docs link, version presets on the run form and page, pins, storage, and the
snapshot's not-simulated warnings."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from allocator.featuregates import preset
from bench.workloads import synthetic_cluster, to_yaml
from dra_web.runs.models import Run
from dra_web.snapshots.services import create_snapshot

pytestmark = pytest.mark.django_db


def test_the_nav_links_the_api_docs_page_which_renders_from_static(browser_client, client):
    html = browser_client.get("/").content.decode()
    assert '<a href="/api/docs/" >API docs</a>' in html
    assert 'href="/api/schema/">API schema' not in html  # no more a YAML download
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    page = docs.content.decode()
    assert (
        '<script src="/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js">'
        in page
    )
    # Nothing from a CDN (a bare "cdn" may be part of the page's random CSRF token).
    assert re.search(r"//[^\s\"']*cdn|cdn\.|jsdelivr|unpkg", page.lower()) is None
    assert all(u.startswith("/") for u in re.findall(r'(?:src|href)="([^"]*)"', page))
    assert '<a href="/"' in page  # back to the app
    schema = browser_client.get("/api/schema/")
    assert schema.status_code == 200 and b"/api/runs/{run_id}/" in schema.content


def _start(browser_client, snapshot, capture, **fields) -> Run:
    with capture(execute=True):
        response = browser_client.post(
            reverse("pages:start-run"), {"snapshot": snapshot.pk, "timeout": "2", **fields}
        )
    assert response.status_code == 302
    return Run.objects.latest("pk")


@pytest.fixture
def capture(django_capture_on_commit_callbacks, settings):
    settings.DRA_WEB_RUN_HEARTBEAT_SECONDS = 0
    return django_capture_on_commit_callbacks


def test_the_run_page_says_which_preset_and_gates_the_run_used(browser_client, snapshot, capture):
    run = _start(
        browser_client,
        snapshot,
        capture,
        kubernetes_version="1.34",
        **{"gate-DRADeviceTaints": "on"},
    )
    assert run.status == "succeeded", run.error
    assert run.result["featureGates"] == {**preset("1.34"), "DRADeviceTaints": True}
    html = browser_client.get(reverse("pages:run", args=[run.pk])).content.decode()
    assert "Feature gates: <strong>Kubernetes 1.34 defaults</strong>" in html
    assert '<span class="mono">DRADeviceTaints=true</span>' in html
    assert "(set; default off)" in html
    everything = _start(browser_client, snapshot, capture, kubernetes_version="all")
    html = browser_client.get(reverse("pages:run", args=[everything.pk])).content.decode()
    assert "every DRA feature on (no Kubernetes version" in html
    assert everything.options["kubernetesVersion"] is None


def test_an_imported_snapshot_offers_and_uses_its_cluster_version(browser_client, maria, capture):
    snapshot = create_snapshot(
        maria,
        [("cluster-eks.json", json.dumps(synthetic_cluster(nodes=2, pending_pods=1)))],
        "eks-prod",
        kubernetes_version="v1.35.1-eks-3025e55",
    )
    html = browser_client.get(reverse("pages:snapshot", args=[snapshot.pk])).content.decode()
    assert (
        '<option value="auto" selected>Kubernetes 1.35 defaults (this cluster&#x27;s version, '
        "v1.35.1-eks-3025e55)</option>"
    ) in html
    assert '<span class="mono" data-kubernetes-version>v1.35.1-eks-3025e55</span>' in html
    run = _start(browser_client, snapshot, capture, kubernetes_version="auto")
    assert run.options["kubernetesVersion"] == "1.35"
    assert run.result["featureGates"] == preset("1.35")


def test_pin_and_unpin_from_the_run_page_which_shows_the_storage(browser_client, run, settings):
    settings.DRA_WEB_RUN_RETENTION_DAYS = 30
    html = browser_client.get(reverse("pages:run", args=[run.pk])).content.decode()
    assert "deleted 30 days after it finished unless pinned or reviewed" in html
    assert "Stored: <strong>" in html and "trace index" in html
    response = browser_client.post(
        reverse("pages:pin-run", args=[run.pk]), {"pinned": "true"}, follow=True
    )
    assert Run.objects.get(pk=run.pk).pinned is True
    html = response.content.decode()
    assert '<span class="badge ok" data-pinned>pinned</span>: kept until unpinned' in html
    browser_client.post(reverse("pages:pin-run", args=[run.pk]), {"pinned": "false"})
    assert Run.objects.get(pk=run.pk).pinned is False


def _spread_snapshot(owner):
    docs = synthetic_cluster(nodes=2, pending_pods=2)
    for doc in docs:
        if doc["kind"] == "Pod" and not doc["spec"].get("nodeName"):
            doc["spec"]["priorityClassName"] = "training-high"
    docs.append(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "trainer", "namespace": "ml-training"},
            "spec": {"minAvailable": 1},
        }
    )
    return create_snapshot(owner, [("cluster.yaml", to_yaml(docs))], "spread")


def test_the_snapshot_page_lists_what_is_not_simulated(browser_client, maria):
    snapshot = _spread_snapshot(maria)
    html = browser_client.get(reverse("pages:snapshot", args=[snapshot.pk])).content.decode()
    assert "Not simulated" in html and "data-unsimulated" in html
    assert "Pod spec.priorityClassName on 2 pending pods" in html
    assert "not simulated: 1 PodDisruptionBudget (ml-training/trainer) skipped" in html
    dashboard = browser_client.get("/").content.decode()
    assert '<span class="badge warn">2</span>' in dashboard


def test_the_run_page_lists_what_is_not_simulated(browser_client, maria, capture):
    run = _start(browser_client, _spread_snapshot(maria), capture)
    assert run.status == "succeeded", run.error
    assert any("priorityClassName" in w for w in run.result["warnings"])
    html = browser_client.get(reverse("pages:run", args=[run.pk])).content.decode()
    assert "2 warnings (snapshot and run)" in html
    assert "not simulated: Pod spec.priorityClassName on 2 pending pods" in html
