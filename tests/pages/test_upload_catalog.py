"""The upload form adds the AWS catalog to an upload: the stored snapshot holds its
InstanceType documents as one more file, shown under the InstanceType kind."""

from __future__ import annotations

from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from dra_web.snapshots.models import Snapshot
from tests.pages.builders import FIXTURE


def _upload(client, **fields):
    data = {"files": [SimpleUploadedFile("cluster.yaml", FIXTURE.read_bytes())], **fields}
    return client.post(reverse("pages:upload"), data)


def test_the_form_offers_regions_families_and_mig(browser_client, maria):
    html = browser_client.get("/").content.decode()
    assert 'name="catalog_region"' in html and '<option value="us-west-2"' in html
    assert 'name="catalog_families" value="p5"' in html
    assert 'name="catalog_families" value="trn2"' in html
    assert 'name="catalog_mig" checked' in html


def test_a_region_and_families_add_their_instance_types(browser_client, maria):
    response = _upload(
        browser_client,
        name="with catalog",
        catalog_region="us-west-2",
        catalog_families=["p5", "g6e"],
        catalog_mig="on",
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    snapshot = Snapshot.objects.get(name="with catalog")
    assert snapshot.file_names == ["cluster.yaml", "catalog-aws-us-west-2.yaml"]
    names = {
        raw["metadata"]["name"] for kind, raw in snapshot.documents() if kind == "InstanceType"
    }
    assert {"p5.48xlarge", "p5.4xlarge", "g6e.xlarge", "g6e.48xlarge"} <= names
    assert not any(n.startswith("trn") for n in names)
    page = browser_client.get(response["Location"] + "?kind=InstanceType").content.decode()
    assert "p5.48xlarge" in page and "InstanceType" in page
    # The upload's own p5.48xlarge and g6e.xlarge win over the catalog's, said so.
    kept = {
        raw["metadata"]["name"]: raw
        for kind, raw in snapshot.documents()
        if kind == "InstanceType" and raw["metadata"]["name"] in ("p5.48xlarge", "g6e.xlarge")
    }
    assert kept["g6e.xlarge"]["spec"]["capacity"] == {"cpu": "4", "memory": "32Gi", "pods": "58"}
    assert "annotations" not in kept["p5.48xlarge"]["metadata"]
    assert any(
        "InstanceType g6e.xlarge: the catalog's entry is left out, the one of cluster.yaml" in w
        for w in snapshot.warnings
    )


def test_without_mig_the_gpus_are_whole(browser_client, maria):
    response = _upload(
        browser_client, name="whole", catalog_region="us-east-1", catalog_families=["p4d"]
    )
    assert response.status_code == 302
    snapshot = Snapshot.objects.get(name="whole")
    p4d = next(
        raw for kind, raw in snapshot.documents() if raw["metadata"]["name"] == "p4d.24xlarge"
    )
    (template,) = p4d["spec"]["dynamicResources"]["resourceSliceTemplates"]
    assert len(template["devices"]) == 8


def test_a_family_the_region_does_not_sell_is_refused_and_nothing_stored(browser_client, maria):
    response = _upload(browser_client, catalog_region="us-gov-east-1", catalog_families=["trn2"])
    assert response.status_code == 400
    assert "trn2: not sold in us-gov-east-1" in response.content.decode()
    assert not Snapshot.objects.exists()


def test_no_region_no_catalog(browser_client, maria):
    response = _upload(browser_client, name="plain", catalog_families=["p5"])
    assert response.status_code == 302
    assert Snapshot.objects.get(name="plain").file_names == ["cluster.yaml"]
