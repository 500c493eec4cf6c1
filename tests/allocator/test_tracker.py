"""AllocationTracker visibility rules and instance type release."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

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


IT_NAMES = ("p5.48xlarge", "p4d.24xlarge", "g6.48xlarge")
DEVICES = [DeviceID(GPU, pool, f"gpu-{i}") for pool in ("rack-1", "p5-gpus") for i in range(3)]


@given(
    st.lists(
        st.tuples(
            st.sampled_from(IT_NAMES),
            st.lists(st.sampled_from(DEVICES), max_size=3),
            st.lists(st.sampled_from(DEVICES), max_size=3),
        ),
        max_size=6,
    ),
    st.lists(st.sampled_from(IT_NAMES), max_size=2),
)
def test_recording_instance_types_at_once_is_recording_them_one_by_one(held, released) -> None:
    one, many = AllocationTracker(), AllocationTracker()
    for it, cluster, template in held:
        one.record("gpu-pool-1", it, cluster, template)
    many.record_instance_types("gpu-pool-1", held)
    for it in released:
        assert one.release_instance_type("gpu-pool-1", it) == many.release_instance_type(
            "gpu-pool-1", it
        )
    assert one.cluster == many.cluster
    assert one.cluster_by_node_claim == many.cluster_by_node_claim
    assert one.templates == many.templates


def test_a_node_claims_version_changes_with_what_it_holds_only() -> None:
    t = AllocationTracker()
    t.record("gpu-pool-1", "p5.48xlarge", [], [T0])
    first = t.versions["gpu-pool-1"]
    t.record_instance_types("gpu-pool-2", [("p5.48xlarge", [D1], [T0])])
    assert t.versions["gpu-pool-1"] == first  # another NodeClaim's commit
    t.record_instance_types("gpu-pool-1", [("p4d.24xlarge", [], [T0])])
    second = t.versions["gpu-pool-1"]
    assert second != first
    t.release_instance_type("gpu-pool-1", "p5.48xlarge")
    assert t.versions["gpu-pool-1"] not in (first, second)
