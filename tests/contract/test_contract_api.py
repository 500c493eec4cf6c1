"""CONTRACT section 6: the REST API under /api/ (Django test client)."""

from __future__ import annotations

import json

import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.contract.conftest import (
    ALL_GATES,
    DEMO,
    EXAMPLES,
    claim_template,
    gpu_cluster,
    namespace,
    node,
    pod,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def capture(django_capture_on_commit_callbacks):
    return django_capture_on_commit_callbacks


def _docs():
    return gpu_cluster(
        [
            pod("trainer-0", claims=[{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]),
            pod("web-0"),
        ],
        extra=[claim_template("one-gpu")],
    )


def _upload(api, docs=None, name="cluster.yaml", **extra):
    text = yaml.safe_dump_all(docs or _docs())
    return api.post(
        "/api/snapshots/",
        {"file": SimpleUploadedFile(name, text.encode()), **extra},
        format="multipart",
    )


def _run(api, capture, snapshot_id, options=None):
    with capture(execute=True):
        response = api.post(
            "/api/runs/", {"snapshot": snapshot_id, "options": options or {}}, format="json"
        )
    assert response.status_code == 202, response.content
    body = response.json()
    assert isinstance(body["id"], int) and body["status"] == "queued"
    return api.get(f"/api/runs/{body['id']}/").json()


def test_multipart_upload_with_several_file_parts(api):
    docs = _docs()
    half = len(docs) // 2
    files = [
        SimpleUploadedFile("infra.yaml", yaml.safe_dump_all(docs[:half]).encode()),
        SimpleUploadedFile("pods.json", json.dumps(docs[half:]).encode()),
    ]
    response = api.post(
        "/api/snapshots/", {"file": files, "name": "gpu cluster"}, format="multipart"
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert isinstance(body["id"], int)
    assert body["name"] == "gpu cluster"
    assert body["objectCounts"] == {
        "Namespace": 1,
        "DeviceClass": 1,
        "Node": 1,
        "ResourceSlice": 1,
        "NodePool": 1,
        "InstanceType": 1,
        "ResourceClaimTemplate": 1,
        "Pod": 2,
    }
    assert body["warnings"] == []


def test_name_is_optional(api):
    response = _upload(api)
    assert response.status_code == 201
    assert isinstance(response.json()["name"], str) and response.json()["name"]


@pytest.mark.parametrize("content_type", ["application/yaml", "application/json", "text/plain"])
def test_raw_body_upload(api, content_type):
    docs = _docs()
    body = json.dumps(docs) if content_type == "application/json" else yaml.safe_dump_all(docs)
    response = api.post("/api/snapshots/", body, content_type=content_type)
    assert response.status_code == 201, response.content
    assert response.json()["objectCounts"]["Pod"] == 2


def test_same_upload_twice_is_still_201(api):
    docs = _docs()
    assert _upload(api, docs).status_code == 201
    again = _upload(api, docs)
    assert again.status_code == 201, "CONTRACT: POST /api/snapshots/ answers 201"


def test_upload_with_unknown_kind_reports_warnings(api):
    docs = _docs() + [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
        }
    ]
    response = _upload(api, docs)
    assert response.status_code == 201
    assert any("Deployment" in w for w in response.json()["warnings"])


def test_unknown_fields_are_kept_in_the_stored_objects(api):
    docs = _docs()
    docs[3]["spec"]["devices"][0]["futureDeviceField"] = {"since": "1.40"}
    snap = _upload(api, docs).json()["id"]
    objects = api.get(f"/api/snapshots/{snap}/objects/?kind=ResourceSlice").json()
    raws = [o["raw"] for o in objects["results"]]
    assert raws[0]["spec"]["devices"][0]["futureDeviceField"] == {"since": "1.40"}


def test_bad_snapshot_is_400_with_section_1_errors(api):
    docs = [
        namespace("default"),
        node("n1"),
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "gpu", "namespace": "default"},
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": "gpu.nvidia.com",
                                "allocationMode": "ExactCount",
                                "count": 0,
                            },
                        }
                    ]
                }
            },
        },
    ]
    response = _upload(api, docs, name="snapshot.yaml")
    assert response.status_code == 400
    text = json.dumps(response.json())
    assert (
        "snapshot.yaml doc 3 ResourceClaim default/gpu: "
        "spec.devices.requests[0].exactly.count: must be an integer >= 1"
    ) in text
    bad_yaml = api.post(
        "/api/snapshots/", "kind: Pod\nmetadata: {name: [x\n", content_type="application/yaml"
    )
    assert bad_yaml.status_code == 400


def test_list_and_detail_with_objects_per_kind(api):
    snap = _upload(api).json()["id"]
    listing = api.get("/api/snapshots/").json()
    rows = listing["results"] if isinstance(listing, dict) else listing
    assert snap in [r["id"] for r in rows]
    detail = api.get(f"/api/snapshots/{snap}/").json()
    assert detail["id"] == snap
    assert set(detail["objectCounts"]) >= {"Pod", "Node"}
    pods = detail["objects"]["Pod"]
    assert {p["name"] for p in pods} == {"trainer-0", "web-0"}


def test_run_lifecycle_result_and_trace(api, capture):
    snap = _upload(api).json()["id"]
    run = _run(api, capture, snap)
    assert run["status"] == "succeeded", run
    assert run["error"] is None
    assert run["startedAt"] and run["finishedAt"] and run["durationSeconds"] >= 0  # timings
    result = run["result"]
    assert result["schemaVersion"] == "v1"
    assert {p["pod"] for p in result["pods"]} == {"default/trainer-0", "default/web-0"}
    assert result["featureGates"] == {g: True for g in ALL_GATES}
    listing = api.get("/api/runs/").json()
    rows = listing["results"] if isinstance(listing, dict) else listing
    assert run["id"] in [r["id"] for r in rows]
    assert all(r["status"] in ("queued", "running", "succeeded", "failed") for r in rows)
    # The trace of a run started with the contract's minimal body.
    trace = api.get(f"/api/runs/{run['id']}/trace/")
    assert trace.status_code == 200, trace.content
    page = trace.json()
    nodes = page["results"]
    assert nodes and nodes[0]["kind"] == "pod"
    roots = api.get(f"/api/runs/{run['id']}/trace/?parent=root").json()["results"]
    assert {n["label"] for n in roots} == {"default/trainer-0", "default/web-0"}
    subtree = api.get(f"/api/runs/{run['id']}/trace/?parent={roots[0]['id']}").json()["results"]
    assert subtree and all(n["parent"] == roots[0]["id"] for n in subtree)


def test_run_options_reach_the_result(api, capture):
    bc = api.post(
        "/api/snapshots/",
        (EXAMPLES / "features-binding-conditions.yaml").read_text(),
        content_type="application/yaml",
    ).json()["id"]
    run = _run(
        api, capture, bc, {"bindingTimeoutSeconds": 120, "featureGates": {"DRAAdminAccess": False}}
    )
    assert run["status"] == "succeeded", run
    assert run["result"]["featureGates"]["DRAAdminAccess"] is False
    timeouts = [
        c.get("bindingTimeoutSeconds")
        for p in run["result"]["pods"]
        for c in p["claims"]
        if "bindingTimeoutSeconds" in c
    ]
    assert timeouts == [120]


def test_trace_cap_is_recorded(api, capture):
    snap = api.post("/api/snapshots/", DEMO.read_text(), content_type="application/yaml").json()
    run = _run(api, capture, snap["id"], {"trace": True, "traceMaxNodes": 50})
    assert run["status"] == "succeeded"
    page = api.get(f"/api/runs/{run['id']}/trace/").json()
    assert page["count"] <= 50
    assert page["omitted"] > 0
    whole = api.get(f"/api/runs/{run['id']}/trace/?download=1").json()
    assert len(whole["nodes"]) <= 50 and whole["omitted"] == page["omitted"]


def test_unknown_disrupt_node_is_400(api):
    snap = _upload(api).json()["id"]
    response = api.post(
        "/api/runs/", {"snapshot": snap, "options": {"disrupt": ["no-such-node"]}}, format="json"
    )
    assert response.status_code == 400
    assert "no-such-node" in json.dumps(response.json())


def test_failed_run_has_status_failed_and_error(api, capture, settings):
    # A run whose simulation dies (here: the run's own time limit) ends failed with an error.
    settings.DRA_WEB_RUN_TIME_LIMIT_SECONDS = 0.001
    snap = api.post("/api/snapshots/", DEMO.read_text(), content_type="application/yaml")
    with capture(execute=True):
        response = api.post("/api/runs/", {"snapshot": snap.json()["id"]}, format="json")
    assert response.status_code == 202
    run = api.get(f"/api/runs/{response.json()['id']}/").json()
    assert run["status"] == "failed", run["status"]
    assert isinstance(run["error"], str) and run["error"]
    assert run["result"] is None


def test_bad_run_request_is_400(api):
    snap = _upload(api).json()["id"]
    assert api.post("/api/runs/", {"snapshot": 987654}, format="json").status_code == 400
    bad = api.post(
        "/api/runs/",
        {"snapshot": snap, "options": {"featureGates": {"DRANope": True}}},
        format="json",
    )
    assert bad.status_code == 400


def test_diff_between_two_runs(api, capture):
    snap = api.post(
        "/api/snapshots/",
        (EXAMPLES / "features-admin-access.yaml").read_text(),
        content_type="application/yaml",
    ).json()["id"]
    on = _run(api, capture, snap)
    off = _run(api, capture, snap, {"featureGates": {"DRAAdminAccess": False}})
    diff = api.get(f"/api/runs/{on['id']}/diff/{off['id']}/")
    assert diff.status_code == 200
    body = diff.json()
    # Pods placed/unplaced, targets, devices, NodeClaims and their instance types.
    assert [p["pod"] for p in body["pods"]["newlyFailed"]] == ["monitoring/dcgm-exporter"]
    assert body["pods"]["newlyPlaced"] == [] and body["pods"]["changedTargets"] == []
    (changed,) = body["devices"]
    assert changed["pod"] == "monitoring/dcgm-exporter"
    assert [d["device"] for d in changed["removed"]] == ["gpu-0"]
    assert set(body["nodeClaims"]) >= {"added", "removed", "changed"}


def test_diff_reports_nodeclaims_and_instance_types(api, capture):
    snap = api.post("/api/snapshots/", DEMO.read_text(), content_type="application/yaml")
    snap = snap.json()["id"]
    a = _run(api, capture, snap)
    b = _run(api, capture, snap, {"disrupt": ["gpu-node-a"]})
    assert a["status"] == b["status"] == "succeeded", (a["error"], b["error"])
    body = api.get(f"/api/runs/{a['id']}/diff/{b['id']}/").json()
    names_a = {nc["name"]: nc["instanceTypes"] for nc in a["result"]["nodeClaims"]}
    names_b = {nc["name"]: nc["instanceTypes"] for nc in b["result"]["nodeClaims"]}
    assert names_a != names_b  # consolidating gpu-node-a needs another GPU NodeClaim
    text = json.dumps(body["nodeClaims"])
    for name in set(names_a) ^ set(names_b):
        assert name in text
    for name in set(names_a) & set(names_b):
        if names_a[name] != names_b[name]:
            assert name in text and "instanceTypes" in text


def test_schema_is_an_openapi_document(api):
    response = api.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    body = (
        response.json() if "json" in response["Content-Type"] else yaml.safe_load(response.content)
    )
    assert body["openapi"].startswith("3.")
    for path in (
        "/api/snapshots/",
        "/api/snapshots/{snapshot_id}/",
        "/api/runs/",
        "/api/runs/{run_id}/",
        "/api/runs/{run_id}/trace/",
        "/api/runs/{run_id}/diff/{other_id}/",
    ):
        assert path in body["paths"], path


def test_token_and_session_authentication(client, user):
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    anonymous = APIClient()
    assert anonymous.get("/api/snapshots/").status_code in (401, 403)
    token, _ = Token.objects.get_or_create(user=user)
    scripted = APIClient()
    scripted.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    assert scripted.get("/api/snapshots/").status_code == 200
    assert client.login(username="alice", password="alice-password-1")
    assert client.get("/api/snapshots/").status_code == 200
    assert APIClient().get(
        "/api/snapshots/", HTTP_AUTHORIZATION="Token not-a-token"
    ).status_code in (401, 403)


def test_api_result_and_trace_match_the_command_line(api, capture, tmp_path):
    from tests.contract.conftest import cli

    path = EXAMPLES / "features-taints.yaml"
    trace_file = tmp_path / "trace.json"
    local = cli("simulate", path, "--json", "--trace", trace_file)
    snap = api.post("/api/snapshots/", path.read_text(), content_type="application/yaml")
    run = _run(api, capture, snap.json()["id"])
    remote, local_doc = run["result"], local.doc
    for doc in (remote, local_doc):
        doc["stats"].pop("seconds")
        doc["stats"].pop("suggestionSeconds", None)  # a clock reading too
    assert remote == local_doc
    whole = api.get(f"/api/runs/{run['id']}/trace/?download=1").json()
    assert whole["nodes"] == json.loads(trace_file.read_text())["nodes"]
    page = api.get(f"/api/runs/{run['id']}/trace/?page_size=1000").json()["results"]
    for item in page:
        assert set(item) >= {"id", "parent", "kind", "label", "status", "reason"}
        if item["kind"] == "device":
            assert item["driver"] and item["pool"] and item["device"]


def test_upload_with_kwok_instance_types_json(api):
    kwok = [
        {
            "name": "c-4x-amd64-linux",
            "offerings": [
                {
                    "Price": 0.17,
                    "Available": True,
                    "Requirements": [
                        {
                            "key": "karpenter.sh/capacity-type",
                            "operator": "In",
                            "values": ["on-demand"],
                        },
                        {
                            "key": "topology.kubernetes.io/zone",
                            "operator": "In",
                            "values": ["us-west-2a"],
                        },
                    ],
                }
            ],
            "architecture": "amd64",
            "operatingSystems": ["linux"],
            "resources": {"cpu": "4", "memory": "8Gi", "pods": "110"},
        }
    ]
    from tests.contract.conftest import nodepool

    cluster = [namespace("default"), nodepool("default"), pod("web-0", cpu="2")]
    files = [
        SimpleUploadedFile("cluster.yaml", yaml.safe_dump_all(cluster).encode()),
        SimpleUploadedFile("instance_types.json", json.dumps(kwok).encode()),
    ]
    response = api.post("/api/snapshots/", {"file": files}, format="multipart")
    assert response.status_code == 201, response.content
    assert response.json()["objectCounts"]["InstanceType"] == 1


def test_raw_json_list_body(api):
    body = {"apiVersion": "v1", "kind": "List", "items": _docs(), "metadata": {}}
    response = api.post("/api/snapshots/", json.dumps(body), content_type="application/json")
    assert response.status_code == 201, response.content
    assert response.json()["objectCounts"]["Pod"] == 2
