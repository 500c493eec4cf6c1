"""Shared counters and compatibility groups, on the docs' 8Gi / 6Gi and MIG / vGPU examples."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from allocator.featuregates import ALL_ON
from allocator.features.counters import (
    CounterLedger,
    GroupState,
    build_counter_pool,
    pool_incomplete_without_groups_gate,
)
from allocator.model import (
    CounterConsumption,
    CounterSet,
    Device,
    DeviceID,
    PoolKey,
    ResourceSliceTemplate,
)
from allocator.quantity import Quantity
from tests.features.conftest import devices_of, gates_with, load_example

POOL = PoolKey("dra.example.com", "pool")
DEVICE_1 = DeviceID("dra.example.com", "pool", "device-1")
DEVICE_2 = DeviceID("dra.example.com", "pool", "device-2")
MIG = DeviceID("gpu.example.com", "gpu-pool", "gpu-0-mig")
VGPU = DeviceID("gpu.example.com", "gpu-pool", "gpu-0-vgpu")


def example():
    snapshot = load_example("features-partitionable.yaml")
    return snapshot, devices_of(snapshot)


def test_docs_counter_set_is_read_from_its_own_slice() -> None:
    snapshot, _ = example()
    slices = [s for s in snapshot.resource_slices if s.pool_key == POOL]
    pool = build_counter_pool(POOL, slices)
    assert pool.error is None
    assert pool.sets == {"gpu-1-counters": {"memory": Quantity.parse("8Gi")}}
    assert sorted(pool.consumption) == ["device-1", "device-2"]


def test_only_one_of_the_two_6gi_devices_fits_in_8gi() -> None:
    snapshot, devices = example()
    view = CounterLedger(snapshot.resource_slices, gates=ALL_ON).view(
        "node/worker-1", "p4d.24xlarge"
    )
    assert view.try_add(DEVICE_1, devices[DEVICE_1]) is None
    refused = view.try_add(DEVICE_2, devices[DEVICE_2])
    assert refused is not None and refused.reason == "counter"
    assert "counter memory" in refused.message and "2Gi of 8Gi left" in refused.message
    assert refused.facts == {
        "counterSet": "gpu-1-counters",
        "counter": "memory",
        "needed": "6Gi",
        "left": "2Gi",
        "total": "8Gi",
    }
    # Backtracking gives the budget back.
    view.remove(DEVICE_1, devices[DEVICE_1])
    assert view.consumed(DEVICE_1, "gpu-1-counters") == {"memory": Quantity.parse("0")}
    assert view.try_add(DEVICE_2, devices[DEVICE_2]) is None


def test_devices_allocated_in_the_cluster_consume_counters() -> None:
    snapshot, devices = example()
    ledger = CounterLedger(snapshot.resource_slices, allocated_devices=[DEVICE_1], gates=ALL_ON)
    view = ledger.view("node/worker-1", "p4d.24xlarge")
    assert view.try_add(DEVICE_2, devices[DEVICE_2]) is not None
    assert ledger.remaining(POOL) == {"gpu-1-counters": {"memory": Quantity.parse("2Gi")}}


def test_committed_devices_follow_the_tracker_visibility_rules() -> None:
    snapshot, devices = example()
    ledger = CounterLedger(snapshot.resource_slices, gates=ALL_ON)
    ledger.commit("gpu-pool-1", "p4d.24xlarge", cluster_devices=[DEVICE_1])
    # Same NodeClaim, other instance type: only one of them will launch.
    assert ledger.view("gpu-pool-1", "p5.48xlarge").try_add(DEVICE_2, devices[DEVICE_2]) is None
    assert ledger.view("gpu-pool-1", "p4d.24xlarge").try_add(DEVICE_2, devices[DEVICE_2])
    assert ledger.view("gpu-pool-2", "p5.48xlarge").try_add(DEVICE_2, devices[DEVICE_2])
    ledger.release_instance_type("gpu-pool-1", "p4d.24xlarge")
    assert ledger.view("gpu-pool-2", "p5.48xlarge").try_add(DEVICE_2, devices[DEVICE_2]) is None


def test_mig_and_vgpu_cannot_share_a_counter_set() -> None:
    snapshot, devices = example()
    view = CounterLedger(snapshot.resource_slices, gates=ALL_ON).view(
        "node/worker-1", "p4d.24xlarge"
    )
    assert view.try_add(MIG, devices[MIG]) is None
    refused = view.try_add(VGPU, devices[VGPU])
    assert refused is not None and refused.reason == "compatibility-group"
    assert "gpu-0-memory" in refused.message and "(mig)" in refused.message
    # The counter set alone would have room for both.
    assert view.consumed(MIG, "gpu-0-memory") == {"memory": Quantity.parse("4Gi")}


def test_groups_across_claims_and_cluster_allocations() -> None:
    snapshot, devices = example()
    ledger = CounterLedger(snapshot.resource_slices, allocated_devices=[VGPU], gates=ALL_ON)
    view = ledger.view("node/worker-1", "p4d.24xlarge")
    refused = view.try_add(MIG, devices[MIG])
    assert refused is not None and refused.reason == "compatibility-group"


def test_groups_gate_off_skips_pools_that_have_groups() -> None:
    snapshot, devices = example()
    gates = gates_with(DRADeviceCompatibilityGroups=False)
    gpu_pool = [d for s in snapshot.resource_slices if s.pool == "gpu-pool" for d in s.devices]
    plain_pool = [d for s in snapshot.resource_slices if s.pool == "pool" for d in s.devices]
    assert pool_incomplete_without_groups_gate(gpu_pool, gates)
    assert not pool_incomplete_without_groups_gate(plain_pool, gates)
    assert not pool_incomplete_without_groups_gate(gpu_pool, gates=ALL_ON)  # gate on: usable


def test_partitionable_gate_off_blocks_counter_devices() -> None:
    snapshot, devices = example()
    ledger = CounterLedger(
        snapshot.resource_slices, gates=gates_with(DRAPartitionableDevices=False)
    )
    refused = ledger.view("node/worker-1", "p4d.24xlarge").try_add(DEVICE_1, devices[DEVICE_1])
    assert refused is not None and "DRAPartitionableDevices" in refused.message


def test_reference_to_a_missing_counter_set_invalidates_the_pool() -> None:
    snapshot, devices = example()
    slices = [s for s in snapshot.resource_slices if s.pool_key == POOL]
    slices[1].devices[1].consumes_counters[0].counter_set = "gpu-9-counters"
    pool = build_counter_pool(POOL, slices)
    assert pool.error is not None
    assert "gpu-9-counters" in pool.error and "does not define" in pool.error
    view = CounterLedger(slices, gates=ALL_ON).view("node/worker-1", "p4d.24xlarge")
    assert "invalid" in view.try_add(DEVICE_1, devices[DEVICE_1]).message


def test_too_many_compatibility_groups_invalidate_the_pool() -> None:
    snapshot, _ = example()
    slices = [s for s in snapshot.resource_slices if s.pool == "gpu-pool"]
    slices[1].devices[0].consumes_counters[0].compatibility_groups = ("mig", "mps", "full")
    pool = build_counter_pool(PoolKey("gpu.example.com", "gpu-pool"), slices)
    assert pool.error is not None and "at most 2" in pool.error


def template(memory: str) -> ResourceSliceTemplate:
    device = Device(
        name="gpu-0-half",
        consumes_counters=[CounterConsumption("gpu-0", {"memory": Quantity.parse("40Gi")})],
    )
    other = Device(
        name="gpu-0-other-half",
        consumes_counters=[CounterConsumption("gpu-0", {"memory": Quantity.parse("40Gi")})],
    )
    return ResourceSliceTemplate(
        driver="gpu.example.com",
        pool="p4d-gpus",
        devices=[device, other],
        shared_counters=[CounterSet("gpu-0", {"memory": Quantity.parse(memory)})],
    )


def test_template_budgets_are_per_nodeclaim_and_instance_type() -> None:
    ledger = CounterLedger([], gates=ALL_ON)
    t80 = template("80Gi")
    half = DeviceID("gpu.example.com", "p4d-gpus", "gpu-0-half")
    other = DeviceID("gpu.example.com", "p4d-gpus", "gpu-0-other-half")
    view = ledger.view("gpu-pool-1", "p4d.24xlarge", [t80])
    assert view.try_add(half, t80.devices[0], template=True) is None
    ledger.commit("gpu-pool-1", "p4d.24xlarge", template_devices=[half])
    again = ledger.view("gpu-pool-1", "p4d.24xlarge", [t80])
    assert again.try_add(other, t80.devices[1], template=True) is None
    assert again.try_add(half, t80.devices[0], template=True) is None  # counted once
    # A new NodeClaim gets its own physical GPU.
    fresh = ledger.view("gpu-pool-2", "p4d.24xlarge", [t80])
    assert fresh.consumed(half, "gpu-0", template=True) == {}
    t40 = template("40Gi")
    small = ledger.view("gpu-pool-3", "g6.xlarge", [t40])
    assert small.try_add(half, t40.devices[0], template=True) is None
    assert small.try_add(other, t40.devices[1], template=True) is not None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["mig", "vgpu", "none", "both"]), min_size=1, max_size=8))
def test_group_state_matches_a_plain_intersection(kinds: list[str]) -> None:
    groups = {"mig": ("mig",), "vgpu": ("vgpu",), "none": (), "both": ("mig", "vgpu")}
    state = GroupState()
    accepted: list[tuple[str, ...]] = []
    for kind in kinds:
        g = groups[kind]
        expected = (
            not accepted
            or (not g and all(not a for a in accepted))
            or (bool(g) and all(a for a in accepted) and set(g).intersection(*map(set, accepted)))
        )
        assert state.admits(g) == bool(expected)
        if expected:
            state.add(g)
            accepted.append(g)
    for g in reversed(accepted):
        state.remove(g)
    assert state.devices == 0 and state.admits(("vgpu",))


def _typo_pool():
    """The docs' pool, with device-2 pointing at a counter set the pool never publishes."""
    snapshot, _ = example()
    slices = [s for s in snapshot.resource_slices if s.pool_key == POOL]
    slices[1].devices[1].consumes_counters[0].counter_set = "gpu-2-counters"
    return snapshot, slices


def test_missing_counter_set_makes_the_whole_pool_invalid_for_all_mode() -> None:
    from allocator.allocator import Allocator
    from allocator.bindings import AttributeBindings
    from allocator.errors import ValidationError
    from allocator.pipeline import build_pipeline, core_pipeline
    from allocator.pools import SliceUniverse
    from tests.allocator.builders import claim, exact, existing_node

    snapshot, slices = _typo_pool()
    validators = build_pipeline(ALL_ON).pool_validators
    (pool,) = SliceUniverse(slices, validators).gather("worker-1", [])
    assert pool.invalid
    assert "consumesCounters references counter set gpu-2-counters" in pool.invalid_reason
    a = Allocator(
        slices,
        [],
        AttributeBindings.build({}),
        snapshot.device_classes,
        pipeline=build_pipeline(ALL_ON),
    )
    node = existing_node("worker-1", instance_type_name="p4d.24xlarge")
    every = claim("all", exact("dev", "partition.example.com", mode="All"))
    with pytest.raises(ValidationError, match=r"pool dra.example.com/pool is invalid \(device"):
        a.allocate(node, [every])
    snapshot, _ = example()  # the docs' pool as published is valid
    good = [s for s in snapshot.resource_slices if s.pool_key == POOL]
    (pool,) = SliceUniverse(good, validators).gather("worker-1", [])
    assert not pool.invalid and pool.invalid_reason is None
    # The design's core knows no shared counters: the typo'd pool is not invalid there.
    (pool,) = SliceUniverse(slices, core_pipeline(ALL_ON).pool_validators).gather("worker-1", [])
    assert not pool.invalid
