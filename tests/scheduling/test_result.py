"""The result document's per-claim additions built in allocator/result.py."""

from __future__ import annotations

from tests.scheduling.k8s import (
    GPU,
    claim,
    device_class,
    gpu,
    instance_type,
    node,
    node_pool,
    pod,
    pod_result,
    request,
    resource_slice,
    run,
    template,
)

ROOT = "/var/run/kubernetes.io/dra-device-attributes"


def _cluster() -> list[dict]:
    return [
        device_class(),
        node_pool("gpu"),
        instance_type("p5.48xlarge", gpus=8),
        node("gpu-node-a", pool="gpu"),
        resource_slice("gpu-node-a-gpus", node="gpu-node-a", devices=[gpu(0), gpu(1)]),
        claim("dataset-gpu", [request("gpu")]),
        template("train-gpus", [request("gpus", count=4)]),
        pod("reader-0", claims={"gpu": "dataset-gpu"}),
        pod("train-0", cpu="8", templates={"accel": "train-gpus"}),
    ]


def test_allocated_claims_carry_the_device_metadata_their_containers_see():
    result = run(_cluster())
    (reader,) = pod_result(result, "default/reader-0")["claims"]
    assert reader["state"] == "unallocated" and reader["devices"][0]["pool"] == "gpu-node-a"
    (file,) = reader["metadata"]
    # A claim named directly: resourceclaims/<claim>/<request>/<driver>-metadata.json.
    assert file["path"] == f"{ROOT}/resourceclaims/dataset-gpu/gpu/{GPU}-metadata.json"
    doc = file["document"]
    assert (doc["kind"], doc["apiVersion"]) == (
        "DeviceMetadata",
        "metadata.resource.k8s.io/v1beta1",
    )
    assert doc["metadata"]["name"] == "dataset-gpu" and doc["metadata"]["generation"] == 1
    assert "podClaimName" not in doc
    (req,) = doc["requests"]
    (device,) = req["devices"]
    assert (req["name"], device["pool"], device["name"]) == ("gpu", "gpu-node-a", "gpu-0")
    # The attributes the slice publishes, capacities left out.
    assert device["attributes"]["productName"] == {"string": "NVIDIA H100 80GB HBM3"}
    assert "capacity" not in device

    # Four GPUs: more than gpu-node-a has, so a new p5 NodeClaim's template GPUs.
    (train,) = pod_result(result, "default/train-0")["claims"]
    assert {d["source"] for d in train["devices"]} == {"template"}
    (file,) = train["metadata"]
    assert file["path"] == f"{ROOT}/resourceclaimtemplates/accel/gpus/{GPU}-metadata.json"
    doc = file["document"]
    assert doc["podClaimName"] == "accel" and doc["metadata"]["name"] == "train-0-accel"
    names = [d["name"] for d in doc["requests"][0]["devices"]]
    assert names == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert doc["requests"][0]["devices"][1]["attributes"]["index"] == {"int": 1}


def test_claims_without_devices_have_no_metadata():
    docs = _cluster()
    docs[2] = instance_type("p5.48xlarge", gpus=0)  # no GPUs anywhere new
    result = run(docs)
    train = pod_result(result, "default/train-0")
    assert train["scheduled"] is False
    assert all("metadata" not in c for c in train["claims"])


def test_metadata_follows_the_result_schema():
    import copy
    import json
    from pathlib import Path

    import jsonschema

    schema = json.loads(
        (Path(__file__).resolve().parents[2] / "allocator" / "result_schema.json").read_text()
    )
    validator = jsonschema.Draft202012Validator(schema)
    result = run(_cluster())
    assert list(validator.iter_errors(result)) == []
    broken = copy.deepcopy(result)
    file = pod_result(broken, "default/reader-0")["claims"][0]["metadata"][0]
    file["path"] = "/tmp/dataset-gpu.json"  # not where the protocol puts it
    assert not validator.is_valid(broken)


def test_replicas_refused_alike_by_many_nodes_get_equal_reasons_of_their_own():
    # Twelve full CPU nodes refuse three 64-CPU replicas the same way: the reasons are grouped
    # once, and each replica's entries are its own (the result budget trims them in place).
    from allocator.resultbudget import within_budget

    docs = [node(f"ip-10-0-1-{i}", cpu="32", instance_type="m7i.8xlarge") for i in range(12)]
    docs += [pod(f"batch-{i}", cpu="64") for i in range(3)]
    result = run(docs)
    entries = [pod_result(result, f"default/batch-{i}") for i in range(3)]
    first = entries[0]["reasons"]
    assert first[0]["targets"] == 12 and len(first[0]["exampleTargets"]) == 5
    assert all(e["reasons"] == first for e in entries)
    assert first is not entries[1]["reasons"]
    assert first[0] is not entries[1]["reasons"][0]
    assert first[0]["exampleTargets"] is not entries[1]["reasons"][0]["exampleTargets"]
    within_budget(entries[0], 100)  # trimmed as far as it goes
    assert len(entries[0]["reasons"][0]["exampleTargets"]) < 5
    assert len(entries[1]["reasons"][0]["exampleTargets"]) == 5
