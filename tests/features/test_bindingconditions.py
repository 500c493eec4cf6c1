"""Binding conditions on the docs' gpu-slice-1 (bindsToNode, is-prepared, preparing-failed)."""

from __future__ import annotations

from allocator.featuregates import ALL_ON
from allocator.features.bindingconditions import (
    allocation_node_selector,
    binding_failed,
    binding_failures,
    claim_binding_timeout,
    device_result_fields,
    device_selectable,
)
from allocator.model import DeviceID
from allocator.pools import SliceUniverse
from allocator.requirements import node_requirements
from allocator.simulation import SimulationOptions
from tests.features.conftest import devices_of, gates_with, load_example

GPU1 = DeviceID("dra.example.com", "gpu-pool", "gpu-1")
LOCAL = DeviceID("dra.example.com", "aaa-local-gpus", "gpu-local-0")


def example():
    snapshot = load_example("features-binding-conditions.yaml")
    return snapshot, devices_of(snapshot)


def test_failure_condition_true_reallocates_the_claim() -> None:
    snapshot, devices = example()
    claim = snapshot.resource_claims["default/fabric-gpu-old"]
    failures = binding_failures(claim, gates=ALL_ON)
    assert len(failures) == 1
    assert "dra.example.com/preparing-failed" in failures[0] and "gpu-1" in failures[0]
    claim.device_statuses[0]["conditions"][0]["status"] = "False"
    assert not binding_failed(claim, gates=ALL_ON)


def test_failure_conditions_fall_back_to_the_published_device() -> None:
    snapshot, devices = example()
    claim = snapshot.resource_claims["default/fabric-gpu-old"]
    claim.allocation.devices[0].binding_failure_conditions = ()
    assert not binding_failed(claim, gates=ALL_ON)
    assert binding_failed(claim, device_lookup=devices.get, gates=ALL_ON)


def test_gate_off_ignores_failures_and_skips_binding_devices() -> None:
    snapshot, devices = example()
    off = gates_with(DRADeviceBindingConditions=False)
    assert not binding_failed(snapshot.resource_claims["default/fabric-gpu-old"], gates=off)
    assert not device_selectable(devices[GPU1], off)
    assert device_selectable(devices[GPU1], gates=ALL_ON)
    assert device_selectable(devices[LOCAL], off)


def _search_order(snapshot) -> list[str]:
    """The pools node-3's search reaches, in the order the DFS tries them."""
    node = snapshot.nodes["node-3"]
    universe = SliceUniverse(snapshot.resource_slices)
    return [
        p.key.pool for p in universe.gather("node-3", [node_requirements(node.labels, "node-3")])
    ]


def test_pools_with_binding_conditions_come_last() -> None:
    snapshot, _ = example()
    assert _search_order(snapshot) == ["aaa-local-gpus", "gpu-pool"]
    # Renaming the local pool to sort after gpu-pool keeps gpu-pool (binding conditions) last.
    local = next(s for s in snapshot.resource_slices if s.pool == "aaa-local-gpus")
    local.pool = "zzz-local"
    assert _search_order(snapshot) == ["zzz-local", "gpu-pool"]


def test_binds_to_node_records_the_chosen_node() -> None:
    _, devices = example()
    topology = {
        "nodeSelectorTerms": [
            {
                "matchExpressions": [
                    {"key": "accelerator-type", "operator": "In", "values": ["high-performance"]}
                ]
            }
        ]
    }
    on_node = allocation_node_selector(
        [devices[GPU1]], topology, node_name="node-3", node_claim_name=None, gates=ALL_ON
    )
    assert on_node == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-3"]}]}
        ]
    }
    new = allocation_node_selector(
        [devices[GPU1]], topology, node_name=None, node_claim_name="fabric-pool-1", gates=ALL_ON
    )
    assert new["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["fabric-pool-1"]
    # Without bindsToNode the device topology stays.
    assert (
        allocation_node_selector(
            [devices[LOCAL]], topology, node_name="node-3", node_claim_name=None, gates=ALL_ON
        )
        is topology
    )


def test_binding_timeout_defaults_to_600_seconds() -> None:
    _, devices = example()

    assert SimulationOptions().binding_timeout_seconds == 600
    assert SimulationOptions.from_json({"bindingTimeoutSeconds": 60}).binding_timeout_seconds == 60
    assert claim_binding_timeout([devices[GPU1]], 600, gates=ALL_ON) == 600
    assert claim_binding_timeout([devices[LOCAL]], 600, gates=ALL_ON) is None
    assert device_result_fields(devices[GPU1], gates=ALL_ON) == {
        "bindingConditions": ["dra.example.com/is-prepared"],
        "bindingFailureConditions": ["dra.example.com/preparing-failed"],
        "bindsToNode": True,
    }


def test_the_run_gates_drive_the_reallocation_predicate() -> None:
    from allocator.pipeline import build_pipeline, core_pipeline

    snapshot, _ = example()
    claim = snapshot.resource_claims["default/fabric-gpu-old"]
    assert any(p(claim) for p in build_pipeline(ALL_ON).reallocation_predicates)
    gate_off = build_pipeline(gates_with(DRADeviceBindingConditions=False))
    assert not any(p(claim) for p in gate_off.reallocation_predicates)
    assert core_pipeline(ALL_ON).reallocation_predicates == ()
