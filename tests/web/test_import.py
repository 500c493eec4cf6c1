"""Live import from a (local, recorded) Kubernetes API server: command and endpoint."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from bench.workloads import synthetic_cluster
from dra_web.snapshots.models import Snapshot

from .fake_apiserver import FakeApiServer, _status, recorded_routes

pytestmark = pytest.mark.django_db

TAINT_RULE = {
    "metadata": {"name": "gpu-maintenance"},
    "spec": {
        "deviceSelector": {"driver": "gpu.nvidia.com"},
        "taint": {"key": "maintenance", "value": "firmware", "effect": "NoSchedule"},
    },
}


@pytest.fixture
def apiserver():
    docs = synthetic_cluster(nodes=2, running_pods=1, pending_pods=3, instance_types=False)
    routes = recorded_routes(docs)
    # A field this client version does not know must survive the import.
    routes["/apis/resource.k8s.io/v1/resourceslices"][0]["spec"]["devices"][0]["futureHealth"] = {
        "state": "Healthy",
        "probedAt": "2026-11-30T10:00:00Z",
    }
    routes["/apis/resource.k8s.io/v1/resourceclaimtemplates"] = (
        403,
        _status(
            403,
            "Forbidden",
            'resourceclaimtemplates.resource.k8s.io is forbidden: User "importer" cannot list',
        ),
    )
    # DeviceTaintRule only at v1alpha3 (v1 and v1beta2 answer 404); NodeClaim CRD missing.
    routes["/apis/resource.k8s.io/v1alpha3/devicetaintrules"] = [TAINT_RULE]
    with FakeApiServer(routes) as server:
        yield server


INSTANCE_TYPE = """\
apiVersion: dra-web.io/v1alpha1
kind: InstanceType
metadata: {name: p5.48xlarge}
spec:
  capacity: {cpu: "192", memory: 2000Gi, pods: "110"}
  offerings:
  - {zone: us-west-2a, capacityType: on-demand, price: 98.32, available: true}
"""


def _check_imported(snapshot: Snapshot) -> None:
    counts = snapshot.object_counts
    assert counts["Pod"] == 4 and counts["Node"] == 2 and counts["ResourceSlice"] == 2
    assert counts["DeviceTaintRule"] == 1 and counts["NodePool"] == 1
    assert "NodeClaim" not in counts and "ResourceClaimTemplate" not in counts
    warnings = "\n".join(snapshot.warnings)
    assert "NodeClaim: not served by the cluster" in warnings and "404" in warnings
    assert "ResourceClaimTemplate: 403 forbidden" in warnings
    slices = [raw for kind, raw in snapshot.documents() if kind == "ResourceSlice"]
    assert slices[0]["spec"]["devices"][0]["futureHealth"]["state"] == "Healthy"
    rule = next(raw for kind, raw in snapshot.documents() if kind == "DeviceTaintRule")
    assert rule["apiVersion"] == "resource.k8s.io/v1alpha3"


def test_management_command_imports_every_kind(apiserver, tmp_path, user):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(apiserver.kubeconfig())
    out = StringIO()
    call_command(
        "import_cluster",
        "--kubeconfig",
        str(kubeconfig),
        "--name",
        "gpu-prod",
        "--user",
        "alice",
        stdout=out,
    )
    snapshot = Snapshot.objects.get(name="gpu-prod")
    assert snapshot.source == "import"
    _check_imported(snapshot)
    assert "InstanceType" in "\n".join(snapshot.warnings)  # cannot be listed: said so
    assert "Pod: 4" in out.getvalue()
    # Pods were listed in pages (limit/continue).
    assert (
        any("/api/v1/pods" in r and "continue=" in r for r in apiserver.requests)
        or len([r for r in apiserver.requests if r.startswith("/api/v1/pods")]) == 1
    )


def test_endpoint_imports_with_an_instance_type_file(api, apiserver):
    response = api.post(
        "/api/snapshots/import/",
        {"kubeconfig": apiserver.kubeconfig(), "name": "live", "instanceTypes": INSTANCE_TYPE},
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["objectCounts"]["InstanceType"] == 1
    assert not any(w.startswith("InstanceType") for w in body["warnings"])
    _check_imported(Snapshot.objects.get(pk=body["id"]))


def test_endpoint_accepts_a_raw_kubeconfig_body(api, apiserver):
    response = api.post(
        "/api/snapshots/import/?context=kind-gpu",
        apiserver.kubeconfig(),
        content_type="application/yaml",
    )
    assert response.status_code == 201, response.content
    assert response.json()["name"] == "cluster kind-gpu"


def test_endpoint_refuses_exec_credentials_and_local_files(api, apiserver):
    config = apiserver.kubeconfig().replace(
        "    token: import-test-token\n",
        "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: aws\n",
    )
    response = api.post("/api/snapshots/import/", {"kubeconfig": config}, format="json")
    assert response.status_code == 400
    assert "exec" in response.json()["detail"]
    config = apiserver.kubeconfig().replace(
        "    token: import-test-token\n", "    client-key: /etc/kubernetes/pki/admin.key\n"
    )
    response = api.post("/api/snapshots/import/", {"kubeconfig": config}, format="json")
    assert response.status_code == 400
    assert "client-key" in response.json()["detail"]
    assert not apiserver.requests
    assert Snapshot.objects.count() == 0


def test_unreachable_cluster_and_bad_kubeconfig_are_400(api):
    dead = FakeApiServer({})
    config = dead.kubeconfig()
    dead.server.server_close()  # nothing listens on that port now
    response = api.post("/api/snapshots/import/", {"kubeconfig": config}, format="json")
    assert response.status_code == 400
    assert "cannot reach the cluster" in response.json()["detail"]
    bad = api.post("/api/snapshots/import/", {"kubeconfig": "clusters: [\n"}, format="json")
    assert bad.status_code == 400 and "kubeconfig" in bad.json()["detail"]
    missing = api.post("/api/snapshots/import/", {}, format="json")
    assert missing.status_code == 400
    assert Snapshot.objects.count() == 0


def test_wrong_context_is_a_clear_error(api, apiserver):
    response = api.post(
        "/api/snapshots/import/",
        {"kubeconfig": apiserver.kubeconfig(), "context": "prod"},
        format="json",
    )
    assert response.status_code == 400
    assert "prod" in json.dumps(response.json())


def test_command_fails_with_status_2_for_unknown_file(user):
    with pytest.raises(CommandError) as info:
        call_command("import_cluster", "--kubeconfig", "/nonexistent/kubeconfig", "--user", "alice")
    assert "no such file" in str(info.value)
