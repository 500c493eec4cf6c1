"""Karpenter types_test.go: what the allocator reads from a published ResourceSlice
(APIServerSlice) and from an instance type's ResourceSliceTemplate (TemplateSlice). Here both
come from the snapshot loader: a ResourceSlice document and an InstanceType's
``dynamicResources.resourceSliceTemplates``."""

from __future__ import annotations

import copy

import yaml

from allocator.pools import SliceUniverse, template_devices
from allocator.quantity import Quantity
from allocator.snapshot import load_files

SLICE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceSlice",
    "metadata": {"name": "ip-10-0-1-17-gpu.nvidia.com-x7k2p"},
    "spec": {
        "driver": "gpu.nvidia.com",
        "pool": {"name": "ip-10-0-1-17", "generation": 1, "resourceSliceCount": 1},
        "nodeName": "ip-10-0-1-17",
        "devices": [
            {
                "name": "gpu-0",
                "attributes": {
                    "gpu.nvidia.com/model": {"string": "H100"},
                    "gpu.nvidia.com/memory": {"int": 80},
                },
                "capacity": {"gpu.nvidia.com/vram": {"value": "80Gi"}},
                "allowMultipleAllocations": True,
            },
            {
                "name": "gpu-1",
                "attributes": {
                    "gpu.nvidia.com/model": {"string": "H100"},
                    "gpu.nvidia.com/memory": {"int": 80},
                },
            },
        ],
    },
}


def load_slice(**spec_changes):
    doc = copy.deepcopy(SLICE)
    for key, value in spec_changes.items():
        if value is None:
            doc["spec"].pop(key, None)
        else:
            doc["spec"][key] = value
    if "nodeName" not in spec_changes and (
        "allNodes" in spec_changes or "nodeSelector" in spec_changes
    ):
        doc["spec"].pop("nodeName", None)
    (s,) = load_files([("slices.yaml", yaml.safe_dump(doc))]).resource_slices
    return s


MIG = [
    {
        "name": "mig-3g.40gb-0",
        "consumesCounters": [
            {
                "counterSet": "gpu-slices",
                "counters": {"memory": {"value": "40Gi"}, "compute-units": {"value": "3"}},
            }
        ],
    }
]
COUNTERS = [
    {
        "name": "gpu-slices",
        "counters": {"memory": {"value": "80Gi"}, "compute-units": {"value": "7"}},
    }
]


# --- Describe("APIServerSlice") ----------------------------------------------------------------


def test_should_return_the_correct_driver():
    """Karpenter: should return the correct driver."""
    assert load_slice().driver == "gpu.nvidia.com"


def test_should_return_the_correct_pool():
    """Karpenter: should return the correct pool."""
    assert load_slice().pool == "ip-10-0-1-17"


def test_should_return_potential_as_false():
    """Karpenter: should return Potential() as false."""
    s = load_slice()
    (pool,) = SliceUniverse([s]).gather("ip-10-0-1-17", [])
    assert {d.source for d in pool.devices} == {"in-cluster"}


def test_should_convert_devices_with_interned_names_attributes_capacity_and_allow_multiple_allocations():
    """Karpenter: should convert devices with interned names, attributes, capacity, and
    AllowMultipleAllocations."""
    gpu0, gpu1 = load_slice().devices
    assert gpu0.name == "gpu-0"
    assert gpu0.attributes == {"gpu.nvidia.com/model": "H100", "gpu.nvidia.com/memory": 80}
    assert gpu0.capacity["gpu.nvidia.com/vram"].value == Quantity.parse("80Gi")
    assert gpu0.allow_multiple_allocations
    assert gpu1.name == "gpu-1" and gpu1.capacity == {} and not gpu1.allow_multiple_allocations


def test_should_cache_devices_on_repeated_calls():
    """Karpenter: should cache devices on repeated calls."""
    s = load_slice()
    # The pools a NodeClaim gathers hand out the loaded devices themselves, never copies.
    first = SliceUniverse([s]).gather("ip-10-0-1-17", [])
    second = SliceUniverse([s]).gather("ip-10-0-1-17", [])
    assert first[0].devices[0].device is s.devices[0] is second[0].devices[0].device


def test_should_return_node_selector_from_the_api_object():
    """Karpenter: should return NodeSelector from the API object."""
    selector = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["us-west-2a"]}]}
        ]
    }
    s = load_slice(nodeSelector=selector)
    assert len(s.node_selector["nodeSelectorTerms"]) == 1


def test_should_return_nil_node_selector_when_not_set():
    """Karpenter: should return nil NodeSelector when not set."""
    assert load_slice().node_selector is None


def test_should_return_all_nodes_from_the_api_object():
    """Karpenter: should return AllNodes from the API object."""
    assert load_slice(allNodes=True).all_nodes


def test_should_return_false_for_all_nodes_when_nil():
    """Karpenter: should return false for AllNodes when nil."""
    assert not load_slice().all_nodes


def test_should_return_false_for_all_nodes_when_explicitly_false():
    """Karpenter: should return false for AllNodes when explicitly false."""
    assert not load_slice(allNodes=False, nodeName="ip-10-0-1-17").all_nodes


def test_should_handle_empty_device_list():
    """Karpenter: should handle empty device list."""
    assert load_slice(devices=[]).devices == []


def test_should_convert_devices_with_consumes_counters():
    """Karpenter: should convert devices with ConsumesCounters."""
    (mig,) = load_slice(devices=MIG).devices
    (entry,) = mig.consumes_counters
    assert entry.counter_set == "gpu-slices"
    assert entry.counters == {
        "memory": Quantity.parse("40Gi"),
        "compute-units": Quantity.parse("3"),
    }


def test_should_return_shared_counters_from_the_api_object():
    """Karpenter: should return SharedCounters from the API object."""
    (cs,) = load_slice(devices=[], sharedCounters=COUNTERS).shared_counters
    assert cs.name == "gpu-slices" and len(cs.counters) == 2
    assert cs.counters["memory"] == Quantity.parse("80Gi")


# --- Describe("TemplateSlice") -----------------------------------------------------------------

INSTANCE_TYPE = {
    "apiVersion": "dra-web.io/v1alpha1",
    "kind": "InstanceType",
    "metadata": {"name": "p5.48xlarge"},
    "spec": {
        "offerings": [{"zone": "us-west-2a", "capacityType": "on-demand", "price": 98.32}],
        "dynamicResources": {
            "resourceSliceTemplates": [
                {
                    "driver": "gpu.nvidia.com",
                    "pool": {"name": "p5-gpus"},
                    "devices": [
                        {
                            "name": "gpu-0",
                            "attributes": {"gpu.nvidia.com/model": {"string": "H100"}},
                            "capacity": {"gpu.nvidia.com/vram": {"value": "80Gi"}},
                            "allowMultipleAllocations": True,
                        },
                        *MIG,
                    ],
                    "sharedCounters": COUNTERS,
                }
            ]
        },
    },
}


def load_template():
    snap = load_files([("instance-types.yaml", yaml.safe_dump(INSTANCE_TYPE))])
    (t,) = snap.instance_types["p5.48xlarge"].resource_slice_templates
    return t


def test_template_should_return_the_correct_driver():
    """Karpenter: should return the correct driver."""
    assert load_template().driver == "gpu.nvidia.com"


def test_template_should_return_the_correct_pool():
    """Karpenter: should return the correct pool."""
    assert load_template().pool == "p5-gpus"


def test_should_return_potential_as_true():
    """Karpenter: should return Potential() as true."""
    candidates = template_devices({"p5.48xlarge": [load_template()]})["p5.48xlarge"]
    assert {c.source for c in candidates} == {"template"}
    assert {c.instance_type for c in candidates} == {"p5.48xlarge"}


def test_should_return_devices_with_attributes_capacity_and_allow_multiple_allocations():
    """Karpenter: should return devices with attributes, capacity, and AllowMultipleAllocations."""
    gpu0 = load_template().devices[0]
    assert gpu0.attributes == {"gpu.nvidia.com/model": "H100"}
    assert gpu0.capacity["gpu.nvidia.com/vram"].value == Quantity.parse("80Gi")
    assert gpu0.allow_multiple_allocations


def test_should_return_nil_node_selector():
    """Karpenter: should return nil NodeSelector."""
    candidates = template_devices({"p5.48xlarge": [load_template()]})["p5.48xlarge"]
    assert all(c.terms is None and c.node_name is None for c in candidates)


def test_should_return_false_for_all_nodes():
    """Karpenter: should return false for AllNodes."""
    assert not any(d.all_nodes for d in load_template().devices)


def test_should_return_shared_counters_from_the_template():
    """Karpenter: should return SharedCounters from the template."""
    (cs,) = load_template().shared_counters
    assert cs.name == "gpu-slices" and cs.counters["compute-units"] == Quantity.parse("7")


def test_should_return_devices_with_consumes_counters():
    """Karpenter: should return devices with ConsumesCounters."""
    mig = load_template().devices[1]
    (entry,) = mig.consumes_counters
    assert entry.counter_set == "gpu-slices" and entry.counters["memory"] == Quantity.parse("40Gi")
