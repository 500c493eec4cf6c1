"""The device-check pipeline: built per run from the gates, passed explicitly, nothing
registered at import time; the design's core without features stays runnable."""

from __future__ import annotations

from dataclasses import FrozenInstanceError

import pytest

from allocator.eligibility import AllocatedCheck
from allocator.featuregates import ALL_ON, FeatureGates
from allocator.features.adminaccess import FeatureAllocatedCheck
from allocator.model import DeviceTaint
from allocator.pipeline import Pipeline, build_pipeline, core_pipeline
from allocator.simulation import SimulationOptions, simulate
from tests.allocator.builders import claim, exact, existing_node, gpus, picked, resource_slice
from tests.features.conftest import load_example

# "pool" first: devices of incomplete or invalid pools are never candidates (Karpenter skips
# them in ExactCount), then the design's four checks.
CORE_ORDER = ["pool", "allocated", "selector", "constraint", "topology"]
FULL_ORDER = [
    "pool",
    "allocated",
    "selector",
    "taint",
    "binding-condition",
    "node-operations",
    "constraint",
    "counter",
    "capacity",
    "topology",
]


ALLOCATED = FULL_ORDER.index("allocated")  # device_checks[ALLOCATED] is the "allocated" check


def gates_off(*names: str) -> FeatureGates:
    return FeatureGates.from_mapping(dict.fromkeys(names, False))


def test_core_pipeline_is_the_pool_check_the_designs_four_checks_and_match_attribute_only():
    core = core_pipeline(ALL_ON)
    assert core.check_names == CORE_ORDER
    assert [kind for kind, _ in core.constraint_parsers] == ["matchAttribute"]
    assert core.constraint_parser("distinctAttribute") is None
    assert core.first_available is None
    assert core.request_validators == core.pool_validators == ()
    assert core.reallocation_predicates == core.reusable == ()
    assert core.setup is None and core.node_resources is None


def test_build_pipeline_with_every_gate_on_orders_the_features_between_the_core_checks():
    full = build_pipeline(ALL_ON)
    assert full.check_names == FULL_ORDER
    assert full.device_checks[ALLOCATED].factory is FeatureAllocatedCheck
    assert [kind for kind, _ in full.constraint_parsers] == [
        "matchAttribute",
        "distinctAttribute",
    ]
    assert full.first_available is not None
    assert len(full.reusable) == 1 and full.node_resources is not None
    assert full.setup is not None


@pytest.mark.parametrize(
    ("gate", "absent"),
    [
        ("DRADeviceTaints", "taint"),
        ("DRAOptionalNodeOperations", "node-operations"),
        ("DRAConsumableCapacity", "capacity"),
    ],
)
def test_a_gate_off_takes_its_check_out_of_the_pipeline(gate, absent):
    pipeline = build_pipeline(gates_off(gate))
    assert absent not in pipeline.check_names
    assert pipeline.check_names == [n for n in FULL_ORDER if n != absent]


def test_gates_that_change_how_a_check_decides_keep_it_in_place():
    # With the gate off these checks refuse devices that need the feature (binding
    # conditions, counters, compatibility groups), so they stay, at the same place.
    for gate in (
        "DRADeviceBindingConditions",
        "DRAPartitionableDevices",
        "DRADeviceCompatibilityGroups",
        "DRAListTypeAttributes",
        "DRAPrioritizedList",
    ):
        assert build_pipeline(gates_off(gate)).check_names == FULL_ORDER, gate


def test_shared_devices_and_node_resources_go_with_their_gates():
    assert build_pipeline(gates_off("DRAConsumableCapacity")).reusable == ()
    assert build_pipeline(gates_off("DRANodeAllocatableResources")).node_resources is None
    # "allocated" is the core's once neither admin access nor shared devices can relax it.
    assert build_pipeline(gates_off("DRAAdminAccess")).device_checks[ALLOCATED].factory is (
        FeatureAllocatedCheck
    )
    both = build_pipeline(gates_off("DRAAdminAccess", "DRAConsumableCapacity"))
    assert both.device_checks[ALLOCATED].factory is AllocatedCheck


def test_a_pipeline_is_a_frozen_value_built_fresh_per_call():
    a, b = build_pipeline(ALL_ON), build_pipeline(ALL_ON)
    assert a.check_names == b.check_names and a is not b
    with pytest.raises(FrozenInstanceError):
        a.device_checks = ()  # type: ignore[misc]
    assert isinstance(a.device_checks, tuple) and isinstance(a.constraint_parsers, tuple)
    # Building one with a gate off changes nothing in another.
    build_pipeline(gates_off("DRADeviceTaints"))
    assert "taint" in build_pipeline(ALL_ON).check_names


def _tainted_node_allocator(gates: FeatureGates | None = None, pipeline: Pipeline | None = None):
    from tests.allocator.builders import make_allocator

    devices = gpus(2)
    devices[0].taints.append(DeviceTaint("dra.example.com/unhealthy", "ecc", "NoSchedule"))
    slices = [resource_slice("node-a-gpus", devices, node_name="node-a")]
    return make_allocator(slices, gates=gates or ALL_ON, pipeline=pipeline)


def test_two_allocators_in_one_process_follow_their_own_pipelines():
    with_taints = _tainted_node_allocator()
    without = _tainted_node_allocator(gates_off("DRADeviceTaints"))
    core = _tainted_node_allocator(pipeline=core_pipeline(ALL_ON))
    c = claim("train", exact("gpu"))
    node = existing_node("node-a")
    for _ in range(2):  # interleaved: nothing one run does leaks into the other
        assert picked(with_taints.allocate(node, [c])) == ["gpu.nvidia.com/node-a-gpus/gpu-1"]
        assert picked(without.allocate(node, [c])) == ["gpu.nvidia.com/node-a-gpus/gpu-0"]
        assert picked(core.allocate(node, [c])) == ["gpu.nvidia.com/node-a-gpus/gpu-0"]
    assert without.pipeline.check_names == [n for n in FULL_ORDER if n != "taint"]
    assert core.pipeline.check_names == CORE_ORDER and core.features is None


def _pods(result: dict) -> dict[str, dict]:
    return {p["pod"]: p for p in result["pods"]}


def _devices(pod: dict) -> list[dict]:
    return [d for c in pod["claims"] for d in c["devices"]]


def test_a_snapshot_simulated_with_the_core_pipeline_gets_the_designs_plain_behaviour():
    snapshot = load_example("features-taints.yaml")
    options = SimulationOptions(suggestions=False)
    featured = _pods(simulate(snapshot, options).result)
    plain = _pods(simulate(snapshot, options, pipeline=core_pipeline(options.gates)).result)
    # With the features the ECC taint pushes train-0 past gpu-1 and tolerations are reported;
    # the design's core knows no taints: the first free GPUs in order, no tolerations.
    assert _devices(featured["ml-training/train-0"])[0]["device"] == "gpu-2"
    assert [d["device"] for d in _devices(plain["ml-training/train-0"])] == ["gpu-1"]
    assert [d["device"] for d in _devices(plain["ml-training/train-1"])] == ["gpu-2"]
    assert all("tolerations" not in d for p in plain.values() for d in _devices(p))


def test_the_core_pipeline_refuses_first_available_as_the_design_does():
    snapshot = load_example("features-prioritized-list.yaml")
    options = SimulationOptions(suggestions=False)
    featured = simulate(snapshot, options).result
    plain = simulate(snapshot, options, pipeline=core_pipeline(options.gates)).result
    assert all(p["scheduled"] for p in featured["pods"])
    refused = [p for p in plain["pods"] if not p["scheduled"]]
    assert refused and all("only Exactly requests" in p["error"] for p in refused)
