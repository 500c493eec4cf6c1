"""Kubernetes version presets in the service: the run option, and the live import's version."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from allocator.featuregates import GATE_NAMES, preset
from bench.workloads import synthetic_cluster
from dra_web.snapshots.models import Snapshot

from .fake_apiserver import FakeApiServer, _status, recorded_routes

pytestmark = pytest.mark.django_db

CAPACITY = Path(__file__).resolve().parents[2] / "examples" / "features-consumable-capacity.yaml"


@pytest.fixture
def capture(django_capture_on_commit_callbacks):
    return django_capture_on_commit_callbacks


def _run(api, capture, snapshot_id, options=None) -> dict:
    body = {"snapshot": snapshot_id}
    if options is not None:
        body["options"] = options
    with capture(execute=True):
        response = api.post("/api/runs/", body, format="json")
    assert response.status_code == 202, response.content
    return api.get(f"/api/runs/{response.json()['id']}/").json()


def _upload(api, path: Path) -> int:
    response = api.post(
        "/api/snapshots/",
        {"file": SimpleUploadedFile(path.name, path.read_bytes())},
        format="multipart",
    )
    assert response.status_code == 201, response.content
    return response.json()["id"]


def _import(api, routes: dict) -> dict:
    with FakeApiServer(routes) as server:
        response = api.post(
            "/api/snapshots/import/", {"kubeconfig": server.kubeconfig()}, format="json"
        )
    assert response.status_code == 201, response.content
    return response.json()


def _cluster_routes() -> dict:
    return recorded_routes(synthetic_cluster(nodes=2, running_pods=1, pending_pods=2))


def test_a_1_34_run_refuses_what_1_34_has_switched_off(api, capture):
    snapshot = _upload(api, CAPACITY)
    on_1_34 = _run(api, capture, snapshot, {"kubernetesVersion": "1.34"})
    assert on_1_34["options"]["kubernetesVersion"] == "1.34"
    result = on_1_34["result"]
    assert result["kubernetesVersion"] == "1.34"
    assert result["featureGates"] == preset("1.34")
    assert "DRAConsumableCapacity feature is disabled" in result["pods"][0]["error"]
    gate_off = _run(api, capture, snapshot, {"featureGates": {"DRAConsumableCapacity": False}})
    assert [p["error"] for p in gate_off["result"]["pods"]] == [p["error"] for p in result["pods"]]
    on_1_36 = _run(api, capture, snapshot, {"kubernetesVersion": "1.36"})
    assert all(p["scheduled"] for p in on_1_36["result"]["pods"])


def test_feature_gates_override_the_preset_and_an_upload_defaults_to_everything_on(api, capture):
    snapshot = _upload(api, CAPACITY)
    run = _run(
        api,
        capture,
        snapshot,
        {"kubernetesVersion": "1.34", "featureGates": {"DRAConsumableCapacity": True}},
    )
    assert run["result"]["featureGates"] == {**preset("1.34"), "DRAConsumableCapacity": True}
    assert all(p["scheduled"] for p in run["result"]["pods"])
    default = _run(api, capture, snapshot)
    assert default["options"]["kubernetesVersion"] is None
    assert default["result"]["kubernetesVersion"] is None
    assert default["result"]["featureGates"] == dict.fromkeys(GATE_NAMES, True)


def test_an_unknown_version_is_a_400_naming_the_option(api):
    snapshot = _upload(api, CAPACITY)
    response = api.post(
        "/api/runs/",
        {"snapshot": snapshot, "options": {"kubernetesVersion": "1.29"}},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["detail"].startswith("options.kubernetesVersion:")
    assert "1.34, 1.35, 1.36, 1.37" in response.json()["detail"]


def test_the_live_import_keeps_the_server_version_and_runs_use_its_preset(api, capture):
    body = _import(api, _cluster_routes())
    assert body["kubernetesVersion"] == "v1.34.2-eks-113cf36"
    assert Snapshot.objects.get(pk=body["id"]).kubernetes_version == "v1.34.2-eks-113cf36"
    run = _run(api, capture, body["id"], {"timeout": 2})
    assert run["options"]["kubernetesVersion"] == "1.34"
    assert run["result"]["kubernetesVersion"] == "1.34"
    assert run["result"]["featureGates"] == preset("1.34")
    # An explicit null asks for every gate on, whatever the cluster runs.
    everything = _run(api, capture, body["id"], {"kubernetesVersion": None})
    assert everything["result"]["featureGates"] == dict.fromkeys(GATE_NAMES, True)
    chosen = _run(api, capture, body["id"], {"kubernetesVersion": "1.37"})
    assert chosen["result"]["kubernetesVersion"] == "1.37"


def test_a_server_release_without_a_preset_is_said_and_runs_keep_every_gate(api, capture):
    routes = {
        **_cluster_routes(),
        "/version": {"major": "1", "minor": "38", "gitVersion": "v1.38.0"},
    }
    body = _import(api, routes)
    assert body["kubernetesVersion"] == "v1.38.0"
    assert any("server version v1.38.0: no feature gate preset" in w for w in body["warnings"])
    run = _run(api, capture, body["id"], {"timeout": 2})
    assert run["result"]["kubernetesVersion"] is None


def test_a_server_that_hides_its_version_still_imports(api):
    routes = {**_cluster_routes(), "/version": (403, _status(403, "Forbidden", "no"))}
    body = _import(api, routes)
    assert body["kubernetesVersion"] is None
    assert any(w.startswith("server version: GET /version failed") for w in body["warnings"])
    assert body["objectCounts"]["Node"] == 2
