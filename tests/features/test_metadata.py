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


def test_result_entries_use_one_instance_type_of_templates() -> None:
    from allocator.features.metadata import claim_metadata
    from allocator.model import Device, DeviceID, ResourceClaimSpec

    entries = [
        {
            "request": "gpu",
            "driver": "gpu.nvidia.com",
            "pool": "p5-gpus",
            "device": "gpu-0",
            "source": "template",
            "instanceType": "p5.48xlarge",
        },
        {
            "request": "gpu",
            "driver": "gpu.nvidia.com",
            "pool": "p5e-gpus",
            "device": "gpu-0",
            "source": "template",
            "instanceType": "p5e.48xlarge",
        },
        {
            "request": "nic",
            "driver": "nic.example.com",
            "pool": "efa",
            "device": "efa-0",
            "source": "in-cluster",
            "instanceType": None,
        },
    ]
    devices = {DeviceID("gpu.nvidia.com", "p5-gpus", "gpu-0"): Device("gpu-0", {"model": "H100"})}
    claim = ResourceClaim("ml-training", "train-0-gpu", ResourceClaimSpec())
    files = claim_metadata(claim, entries, devices.get, pod_claim_name="gpu")
    assert [f["path"].rsplit("/", 2)[1:] for f in files] == [
        ["gpu", "gpu.nvidia.com-metadata.json"],
        ["nic", "nic.example.com-metadata.json"],
    ]
    (gpu_request,) = files[0]["document"]["requests"]
    assert [d["pool"] for d in gpu_request["devices"]] == ["p5-gpus"]
    assert gpu_request["devices"][0]["attributes"] == {"model": {"string": "H100"}}
