"""The live import pairs the cluster with the AWS catalog; uploads can add the catalog too."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from dra_web.snapshots.models import Snapshot

from .fake_apiserver import FakeApiServer, recorded_routes

pytestmark = pytest.mark.django_db


def _cluster(cluster_docs: list[dict], node_pools: bool = True) -> dict:
    """The shared two-node H100 cluster as the API server lists it (no InstanceType: a
    cluster cannot list them)."""
    skipped = {"InstanceType"} | (set() if node_pools else {"NodePool"})
    return recorded_routes([d for d in cluster_docs if d["kind"] not in skipped])


@pytest.fixture
def apiserver(cluster_docs):
    with FakeApiServer(_cluster(cluster_docs)) as server:
        yield server


def _instance_types(snapshot: Snapshot) -> dict[str, dict]:
    return {
        raw["metadata"]["name"]: raw for kind, raw in snapshot.documents() if kind == "InstanceType"
    }


def test_import_adds_the_catalog_types_of_the_nodepools_and_nodes(api, apiserver):
    response = api.post(
        "/api/snapshots/import/", {"kubeconfig": apiserver.kubeconfig()}, format="json"
    )
    assert response.status_code == 201, response.content
    snapshot = Snapshot.objects.get(pk=response.json()["id"])
    # The NodePool allows p5.48xlarge; the nodes are p5.48xlarge, so the p5 family comes too.
    assert set(_instance_types(snapshot)) == {"p5.48xlarge", "p5.4xlarge"}
    assert snapshot.file_names == ["cluster-kind-gpu.json", "catalog-aws-us-west-2.yaml"]
    notes = [w for w in snapshot.warnings if w.startswith("InstanceType:")]
    assert notes == [
        "InstanceType: 2 instance types from the dra-web AWS catalog for us-west-2 (p5; full "
        "GPUs): figures from Karpenter's AWS provider, prices its static on-demand list, device "
        "uuids and driver versions placeholders"
    ]
    p5 = _instance_types(snapshot)["p5.48xlarge"]
    (template,) = p5["spec"]["dynamicResources"]["resourceSliceTemplates"]
    assert len(template["devices"]) == 8  # the cluster's GPUs are whole: no MIG partitions


def test_a_region_can_be_named_and_the_catalog_turned_off(api, apiserver):
    response = api.post(
        "/api/snapshots/import/",
        {"kubeconfig": apiserver.kubeconfig(), "region": "eu-west-1", "name": "eu"},
        format="json",
    )
    assert response.status_code == 201, response.content
    p5 = _instance_types(Snapshot.objects.get(name="eu"))["p5.48xlarge"]
    assert {o["zone"] for o in p5["spec"]["offerings"]} == {
        "eu-west-1a",
        "eu-west-1b",
        "eu-west-1c",
    }
    off = api.post(
        "/api/snapshots/import/",
        {"kubeconfig": apiserver.kubeconfig(), "catalog": False, "name": "off"},
        format="json",
    )
    assert off.status_code == 201
    snapshot = Snapshot.objects.get(name="off")
    assert _instance_types(snapshot) == {}
    notes = [w for w in snapshot.warnings if w.startswith("InstanceType:")]
    assert len(notes) == 1 and "cannot be listed from a cluster" in notes[0]


def test_an_unknown_region_is_a_400(api, apiserver):
    response = api.post(
        "/api/snapshots/import/",
        {"kubeconfig": apiserver.kubeconfig(), "region": "eu-west-9"},
        format="json",
    )
    assert response.status_code == 400
    assert "unknown region 'eu-west-9'" in response.json()["detail"]
    assert Snapshot.objects.count() == 0


def test_without_nodepools_nothing_is_added_and_the_warning_says_why(api, cluster_docs):
    with FakeApiServer(_cluster(cluster_docs, node_pools=False)) as server:
        response = api.post(
            "/api/snapshots/import/", {"kubeconfig": server.kubeconfig()}, format="json"
        )
    assert response.status_code == 201
    snapshot = Snapshot.objects.get(pk=response.json()["id"])
    assert _instance_types(snapshot) == {}
    notes = [w for w in snapshot.warnings if w.startswith("InstanceType:")]
    assert notes[0] == "InstanceType: no Karpenter NodePool: no catalog instance types added"
    assert "cannot be listed from a cluster" in notes[1]


def test_management_command_takes_region_and_no_catalog(apiserver, tmp_path, user):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(apiserver.kubeconfig())
    out = StringIO()
    call_command(
        "import_cluster",
        "--kubeconfig",
        str(kubeconfig),
        "--user",
        "alice",
        "--name",
        "tokyo",
        "--region",
        "ap-northeast-1",
        stdout=out,
    )
    assert "InstanceType: 2" in out.getvalue()
    assert "catalog-aws-ap-northeast-1.yaml" in Snapshot.objects.get(name="tokyo").file_names
    call_command(
        "import_cluster",
        "--kubeconfig",
        str(kubeconfig),
        "--user",
        "alice",
        "--name",
        "plain",
        "--no-catalog",
        stdout=StringIO(),
    )
    assert _instance_types(Snapshot.objects.get(name="plain")) == {}


def test_rest_upload_adds_the_catalog_for_a_region(api, cluster_yaml):
    response = api.post(
        "/api/snapshots/?name=up&catalogRegion=us-east-2&catalogFamilies=g6,inf2",
        cluster_yaml,
        content_type="application/yaml",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["fileNames"] == ["upload.yaml", "catalog-aws-us-east-2.yaml"]
    names = set(_instance_types(Snapshot.objects.get(pk=body["id"])))
    assert {"g6.xlarge", "inf2.48xlarge"} <= names
    bad = api.post(
        "/api/snapshots/?catalogRegion=us-east-2&catalogFamilies=x1",
        cluster_yaml,
        content_type="application/yaml",
    )
    assert bad.status_code == 400
    assert "catalog: unknown family 'x1'" in bad.json()["detail"]
