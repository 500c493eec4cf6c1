"""POST/GET /api/snapshots/ (CONTRACT sections 1 and 6)."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from bench.workloads import synthetic_cluster, to_yaml
from dra_web.snapshots.models import Snapshot

pytestmark = pytest.mark.django_db

URL = "/api/snapshots/"


def upload(api, filename: str, content: str | bytes, **extra):
    data = content.encode() if isinstance(content, str) else content
    return api.post(URL, {"file": SimpleUploadedFile(filename, data), **extra}, format="multipart")


def test_multipart_yaml_upload_is_stored_with_counts(api, cluster_yaml, user):
    response = upload(api, "gpu-cluster.yaml", cluster_yaml, name="prod us-west-2")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["name"] == "prod us-west-2"
    assert body["objectCounts"] == {
        "Namespace": 1,
        "DeviceClass": 1,
        "ResourceClaimTemplate": 1,
        "NodePool": 1,
        "InstanceType": 1,
        "Node": 2,
        "ResourceSlice": 2,
        "ResourceClaim": 1,
        "Pod": 3,
    }
    assert body["warnings"] == []
    assert body["existing"] is False
    snap = Snapshot.objects.get(pk=body["id"])
    assert snap.owner == user
    assert len(snap.content_hash) == 64
    # Stored compressed, and the files come back as uploaded.
    assert len(bytes(snap.files_blob)) < len(cluster_yaml)
    assert snap.files() == [("gpu-cluster.yaml", cluster_yaml)]
    kinds = [kind for kind, _ in snap.documents()]
    assert kinds.count("ResourceSlice") == 2


def test_raw_json_body_list_and_same_content_is_recognised(api, cluster_yaml, cluster_json):
    first = upload(api, "cluster.yaml", cluster_yaml)
    assert first.status_code == 201
    again = api.post(URL + "?name=again", cluster_json, content_type="application/json")
    assert again.status_code == 201, again.content
    assert again.json()["existing"] is True
    assert again.json()["id"] == first.json()["id"]
    assert Snapshot.objects.count() == 1


def test_same_content_from_another_user_is_their_own_snapshot(api, bob_api, cluster_yaml):
    a = upload(api, "cluster.yaml", cluster_yaml).json()
    b = upload(bob_api, "cluster.yaml", cluster_yaml)
    assert b.status_code == 201
    assert b.json()["id"] != a["id"]
    assert b.json()["owner"] == "bob"


def test_raw_yaml_body_with_curl_default_content_type(api, cluster_yaml):
    response = api.post(
        URL + "?name=curl", cluster_yaml, content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 201, response.content
    assert response.json()["name"] == "curl"
    assert response.json()["objectCounts"]["Pod"] == 3


def test_several_files_in_one_upload(api, cluster_docs):
    infra = [d for d in cluster_docs if d["kind"] != "Pod"]
    pods = [d for d in cluster_docs if d["kind"] == "Pod"]
    response = api.post(
        URL,
        {
            "file": [
                SimpleUploadedFile("infra.yaml", to_yaml(infra).encode()),
                SimpleUploadedFile("pods.json", json.dumps(pods).encode()),
            ]
        },
        format="multipart",
    )
    assert response.status_code == 201, response.content
    assert response.json()["objectCounts"]["Pod"] == 3
    assert response.json()["fileNames"] == ["infra.yaml", "pods.json"]
    assert response.json()["name"] == "infra.yaml, pods.json"


def test_broken_yaml_names_the_file_and_stores_nothing(api):
    response = upload(api, "broken.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: [x\n")
    assert response.status_code == 400
    body = response.json()
    assert any("broken.yaml" in e for e in body["errors"]), body
    assert Snapshot.objects.count() == 0


def test_wrong_type_names_file_document_object_and_field(api, cluster_docs):
    template = next(d for d in cluster_docs if d["kind"] == "ResourceClaimTemplate")
    template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = "two"
    response = upload(api, "snapshot.yaml", to_yaml(cluster_docs))
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert any(
        "snapshot.yaml" in e and "ResourceClaimTemplate ml-training/h100" in e and "count" in e
        for e in errors
    ), errors
    assert Snapshot.objects.count() == 0


def test_unknown_kinds_are_warnings_not_errors(api, cluster_docs):
    cluster_docs.append(
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}
    )
    response = upload(api, "with-deployment.yaml", to_yaml(cluster_docs))
    assert response.status_code == 201, response.content
    warnings = response.json()["warnings"]
    assert any("Deployment" in w for w in warnings), warnings
    assert "Deployment" not in response.json()["objectCounts"]


def test_oversized_upload_gets_413_and_stores_nothing(api, settings, cluster_yaml):
    settings.DRA_WEB_MAX_UPLOAD_BYTES = 1000
    response = upload(api, "big.yaml", cluster_yaml)
    assert response.status_code == 413
    assert "1000" in response.json()["detail"]
    raw = api.post(URL, cluster_yaml, content_type="application/yaml")
    assert raw.status_code == 413
    assert "DRA_WEB_MAX_UPLOAD_BYTES" in raw.json()["detail"]
    assert Snapshot.objects.count() == 0


def test_empty_and_binary_uploads_are_rejected(api):
    empty = api.post(URL, b"", content_type="application/yaml")
    assert empty.status_code == 400
    assert "empty" in empty.json()["detail"]
    binary = upload(api, "cluster.tar.gz", b"\x1f\x8b\x08\x00\xff\xfe\x00\x00")
    assert binary.status_code == 400
    assert "cluster.tar.gz" in binary.json()["errors"][0]
    no_file = api.post(URL, {"name": "x"}, format="multipart")
    assert no_file.status_code == 400
    assert "file" in no_file.json()["detail"]
    assert Snapshot.objects.count() == 0


def test_authentication_is_required(client, cluster_yaml, db):
    assert client.get(URL).status_code in (401, 403)
    response = client.post(URL, cluster_yaml, content_type="application/yaml")
    assert response.status_code in (401, 403)
    assert Snapshot.objects.count() == 0


def test_session_login_can_use_the_api(client, user, cluster_yaml, _web_settings):
    assert client.login(username="alice", password="alice-password-1")
    response = client.get(URL)
    assert response.status_code == 200


def test_list_is_paginated_and_filtered_by_owner(api, bob_api):
    for i in range(3):
        docs = synthetic_cluster(nodes=1, running_pods=0, pending_pods=i + 1)
        assert upload(api, f"a{i}.yaml", to_yaml(docs)).status_code == 201
    assert upload(bob_api, "b.yaml", to_yaml(synthetic_cluster(nodes=3))).status_code == 201
    page = api.get(URL + "?page_size=2").json()
    assert page["count"] == 4
    assert len(page["results"]) == 2
    assert page["next"]
    mine = api.get(URL + "?owner=alice").json()
    assert mine["count"] == 3
    assert {s["owner"] for s in mine["results"]} == {"alice"}
    # Newest first.
    assert mine["results"][0]["name"] == "a2.yaml"
    assert api.get(URL + "?q=b.yaml").json()["count"] == 1


def test_detail_lists_objects_per_kind(api, cluster_yaml):
    snap_id = upload(api, "c.yaml", cluster_yaml).json()["id"]
    detail = api.get(f"{URL}{snap_id}/").json()
    pods = detail["objects"]["Pod"]
    assert {"namespace": "ml-training", "name": "train-0"} in pods
    assert detail["objects"]["NodePool"] == [{"namespace": None, "name": "gpu"}]
    assert detail["runs"] == []
    objects = api.get(f"{URL}{snap_id}/objects/?kind=ResourceSlice").json()
    assert objects["count"] == 2
    assert objects["results"][0]["raw"]["spec"]["driver"] == "gpu.nvidia.com"
    assert api.get(f"{URL}999999/").status_code == 404


def test_unknown_fields_of_known_kinds_are_kept(api, cluster_docs):
    node = next(d for d in cluster_docs if d["kind"] == "Node")
    node["status"]["declaredFeatures"] = ["DRAFutureThing"]
    node["spec"] = {"futureField": {"x": 1}}
    snap_id = upload(api, "c.yaml", to_yaml(cluster_docs)).json()["id"]
    nodes = api.get(f"{URL}{snap_id}/objects/?kind=Node").json()["results"]
    assert nodes[0]["raw"]["spec"] == {"futureField": {"x": 1}}


def test_only_the_owner_deletes(api, bob_api, cluster_yaml):
    snap_id = upload(api, "c.yaml", cluster_yaml).json()["id"]
    assert bob_api.delete(f"{URL}{snap_id}/").status_code == 403
    assert api.delete(f"{URL}{snap_id}/").status_code == 204
    assert not Snapshot.objects.filter(pk=snap_id).exists()


def test_detail_of_a_snapshot_stored_before_the_object_index(api, cluster_yaml):
    snap_id = upload(api, "c.yaml", cluster_yaml).json()["id"]
    indexed = api.get(f"{URL}{snap_id}/").json()["objects"]
    Snapshot.objects.filter(pk=snap_id).update(object_index={})  # as migration 0003 left it
    assert api.get(f"{URL}{snap_id}/").json()["objects"] == indexed
