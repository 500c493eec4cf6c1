"""Device metadata files (KEP-5304): paths and DeviceMetadata documents."""

from __future__ import annotations

from allocator.features.metadata import ROOT, device_metadata, metadata_path
from allocator.model import DeviceRequestAllocationResult, ResourceClaim, Version
from tests.features.conftest import devices_of, load_example


def test_paths_for_direct_and_template_claims() -> None:
    assert metadata_path("macvlan-eth0", "macvlan-eth0", "resource-driver.example.com") == (
        f"{ROOT}/resourceclaims/macvlan-eth0/macvlan-eth0/resource-driver.example.com-metadata.json"
    )
    assert metadata_path("pod0-gpu-2kqrd", "gpu/high-memory", "gpu.example.com", "gpu") == (
        f"{ROOT}/resourceclaimtemplates/gpu/gpu/gpu.example.com-metadata.json"
    )


def test_document_for_a_prioritized_list_claim() -> None:
    snapshot = load_example("features-prioritized-list.yaml")
    devices = devices_of(snapshot)
    gpu1 = next(d for d in devices if d.device == "gpu-1")
    devices[gpu1].attributes["driverVersion"] = Version("1.0.0")
    template = snapshot.resource_claim_templates["default/big-or-two-small"]
    claim = ResourceClaim("default", "llm-0-gpu", template.spec)
    results = [
        DeviceRequestAllocationResult("gpu/two-l4", "gpu.example.com", "worker-1", name)
        for name in ("gpu-1", "gpu-2")
    ]
    (file,) = device_metadata(claim, results, devices.get, pod_claim_name="gpu")
    assert file["path"].endswith("resourceclaimtemplates/gpu/gpu/gpu.example.com-metadata.json")
    doc = file["document"]
    assert doc["apiVersion"] == "metadata.resource.k8s.io/v1beta1"
    assert doc["kind"] == "DeviceMetadata"
    assert doc["metadata"]["generation"] == 1 and doc["podClaimName"] == "gpu"
    (request,) = doc["requests"]
    assert request["name"] == "gpu/two-l4"
    first = request["devices"][0]
    assert first["name"] == "gpu-1" and first["pool"] == "worker-1"
    assert first["attributes"]["model"] == {"string": "L4"}
    assert first["attributes"]["numaNode"] == {"int": 1}
    assert first["attributes"]["driverVersion"] == {"version": "1.0.0"}
    # A generated claim has no UID yet: a stable one is derived.
    again = device_metadata(claim, results, devices.get, pod_claim_name="gpu")
    assert again[0]["document"]["metadata"]["uid"] == doc["metadata"]["uid"]
