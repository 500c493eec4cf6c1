"""Node allocatable resources: the docs' CPU mapping and 8Gi-per-pod overhead, both shapes."""

from __future__ import annotations

import pytest

from allocator.featuregates import ALL_ON
from allocator.features.nodeallocatable import (
    AllocatedDevice,
    NodeAllocatableError,
    containers_referencing,
    dra_node_resources,
    parse_node_allocatable,
    pod_level_limit_problem,
    shared_mapping_claim_error,
)
from allocator.model import Device, DeviceID
from allocator.quantity import Quantity
from tests.features.conftest import devices_of, gates_with, load_example

Q = Quantity.parse
SOCKET0 = DeviceID("cpu.example.com", "socket-cpus", "socket0cpus")
XPU = DeviceID("xpu.example.com", "xpu-pool", "xpu-model-x-001")
XPU_136 = DeviceID("xpu.example.com", "worker-2-xpus", "xpu-model-x-002")


def example():
    snapshot = load_example("features-node-allocatable.yaml")
    pods = {p.name: p for p in snapshot.pods}
    return snapshot, devices_of(snapshot), pods


def test_docs_shapes_parse() -> None:
    _, devices, _ = example()
    cpu = parse_node_allocatable(devices[SOCKET0])
    assert [(m.resource, m.capacity_key, m.multiplier) for m in cpu.mappings] == [
        ("cpu", "cpu.example.com/cpu", Q("1"))
    ]
    xpu = parse_node_allocatable(devices[XPU])
    assert [(o.resource, o.per_pod, o.per_container) for o in xpu.overheads] == [
        ("memory", Q("8Gi"), None)
    ]
    newer = parse_node_allocatable(devices[XPU_136])
    assert [(m.resource, m.capacity_key, m.multiplier) for m in newer.mappings] == [
        ("memory", None, Q("8Gi"))
    ]


def test_consumed_cpu_maps_onto_node_cpu() -> None:
    _, devices, pods = example()
    allocated = AllocatedDevice(
        "default/cpu-pinned-cpus",
        "cpus",
        "cpu.example.com",
        devices[SOCKET0],
        {"cpu.example.com/cpu": Q("8")},
    )
    assert dra_node_resources(pods["cpu-pinned"], [allocated], gates=ALL_ON) == {"cpu": Q("8")}
    # Taken whole (no share), the whole socket counts.
    whole = AllocatedDevice("c", "cpus", "cpu.example.com", devices[SOCKET0], None)
    assert dra_node_resources(pods["cpu-pinned"], [whole], gates=ALL_ON) == {"cpu": Q("128")}


def test_overhead_per_pod_and_per_container() -> None:
    _, devices, pods = example()
    pod = pods["inference-x"]
    xpu = devices[XPU]
    allocated = AllocatedDevice("default/inference-x-xpu", "xpu", "xpu.example.com", xpu, None)
    assert dra_node_resources(pod, [allocated], gates=ALL_ON) == {"memory": Q("8Gi")}
    xpu.raw["nodeAllocatableResources"]["overhead"]["memory"]["perContainer"] = "1Gi"
    pod.raw["spec"]["containers"].append(
        {"name": "sidecar", "resources": {"claims": [{"name": "xpu"}]}}
    )
    assert containers_referencing(pod, "xpu") == 2
    assert dra_node_resources(pod, [allocated], gates=ALL_ON) == {"memory": Q("10Gi")}
    assert dra_node_resources(pod, [allocated], gates_with(DRANodeAllocatableResources=False)) == {}


def test_device_multiplier_counts_devices() -> None:
    core = Device(
        "core-7",
        raw={"nodeAllocatableResources": {"mapping": {"cpu": {"deviceMultiplier": 2}}}},
    )
    devices = [AllocatedDevice("c", "cpus", "cpu.example.com", core, None)] * 4
    assert dra_node_resources(None, devices, gates=ALL_ON) == {"cpu": Q("8")}


def test_bad_mapping_names_the_field() -> None:
    broken = Device(
        "xpu-9",
        raw={"nodeAllocatableResourceMappings": {"memory": {"allocationMultiplier": "lots"}}},
    )
    with pytest.raises(NodeAllocatableError, match="nodeAllocatableResourceMappings.memory"):
        parse_node_allocatable(broken)
    missing = Device(
        "socket9",
        raw={"nodeAllocatableResources": {"mapping": {"cpu": {"capacityKey": "cores"}}}},
    )
    with pytest.raises(NodeAllocatableError, match="not a capacity"):
        dra_node_resources(
            None, [AllocatedDevice("c", "x", "cpu.example.com", missing)], gates=ALL_ON
        )


def test_pod_level_requests_and_shared_mapping_claims() -> None:
    _, _, pods = example()
    pod = pods["cpu-pinned"]
    pod.raw["spec"]["resources"] = {"requests": {"cpu": "8"}}
    assert pod_level_limit_problem(pod, {"cpu": Q("4")}) is None
    problem = pod_level_limit_problem(pod, {"cpu": Q("8")})
    assert problem is not None and "more than the pod-level request 8" in problem
    assert shared_mapping_claim_error("default/cpus", ["default/a"]) is None
    assert "cannot be shared" in shared_mapping_claim_error(
        "default/cpus", ["default/a", "default/b"]
    )
