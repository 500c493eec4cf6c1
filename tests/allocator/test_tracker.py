"""AllocationTracker visibility rules and instance type release."""

from __future__ import annotations

from allocator.model import DeviceID
from allocator.tracker import AllocationTracker
from tests.allocator.builders import GPU

SEED = DeviceID(GPU, "node-a-gpus", "gpu-0")
D1 = DeviceID(GPU, "rack-1", "gpu-1")
T0 = DeviceID(GPU, "p5-gpus", "gpu-0")


def test_seed_devices_are_allocated_for_everyone():
    t = AllocationTracker([SEED])
    assert t.is_allocated(SEED, False, "gpu-pool-1", "p5.48xlarge")
    assert not t.is_allocated(D1, False, "gpu-pool-1", "p5.48xlarge")


def test_cluster_device_visibility_by_node_claim_and_instance_type():
    t = AllocationTracker()
    t.record("gpu-pool-1", "p5.48xlarge", [D1], [])
    assert t.is_allocated(D1, False, "gpu-pool-2", "p5.48xlarge")  # another NodeClaim
    assert t.is_allocated(D1, False, "gpu-pool-1", "p5.48xlarge")  # same NodeClaim, same IT
    assert not t.is_allocated(D1, False, "gpu-pool-1", "p4d.24xlarge")  # same NC, other IT


def test_template_devices_are_local_to_node_claim_and_instance_type():
    t = AllocationTracker()
    t.record("gpu-pool-1", "p5.48xlarge", [], [T0])
    assert t.is_allocated(T0, True, "gpu-pool-1", "p5.48xlarge")
    assert not t.is_allocated(T0, True, "gpu-pool-1", "p4d.24xlarge")
    assert not t.is_allocated(T0, True, "gpu-pool-2", "p5.48xlarge")


def test_device_free_only_when_every_instance_type_holding_it_is_released():
    t = AllocationTracker()
    t.record("gpu-pool-1", "p5.48xlarge", [D1], [T0])
    t.record("gpu-pool-1", "p4d.24xlarge", [D1], [])
    assert t.release_instance_type("gpu-pool-1", "p5.48xlarge") == []
    assert t.is_allocated(D1, False, "gpu-pool-2", "p5.48xlarge")
    assert not t.is_allocated(T0, True, "gpu-pool-1", "p5.48xlarge")
    assert t.release_instance_type("gpu-pool-1", "p4d.24xlarge") == [D1]
    assert not t.is_allocated(D1, False, "gpu-pool-2", "p5.48xlarge")
    assert t.allocated_cluster_devices() == set()


def test_release_of_unknown_instance_type_is_harmless_and_seed_stays():
    t = AllocationTracker([SEED])
    assert t.release_instance_type("gpu-pool-9", "p5.48xlarge") == []
    assert t.allocated_cluster_devices() == {SEED}
