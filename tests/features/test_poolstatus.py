"""Pool status (KEP-5677) after a run: counts, validation errors, partition and share views."""

from __future__ import annotations

from allocator.featuregates import ALL_ON
from allocator.features.poolstatus import pool_status
from allocator.features.taints import TaintIndex
from allocator.model import DeviceID
from allocator.quantity import Quantity
from tests.features.conftest import gates_with, load_example

MIG = DeviceID("gpu.example.com", "gpu-pool", "gpu-0-mig")


def by_pool(entries: list[dict]) -> dict[str, dict]:
    return {e["pool"]: e for e in entries}


def test_partition_summary_after_an_allocation() -> None:
    snapshot = load_example("features-partitionable.yaml")
    pools = by_pool(pool_status(snapshot.resource_slices, allocated=[MIG], gates=ALL_ON))
    gpu = pools["gpu-pool"]
    assert (gpu["totalDevices"], gpu["allocatedDevices"], gpu["availableDevices"]) == (2, 1, 1)
    summary = {s["type"]: s for s in gpu["partitionSummary"]}
    assert summary["mig-4g"] == {
        "attribute": "gpu.example.com/profile",
        "type": "mig-4g",
        "total": 1,
        "allocatable": 0,
    }
    # Counters alone still leave 4Gi: the vGPU partition is allocatable by counters.
    assert summary["vgpu-4q"]["allocatable"] == 1
    # The docs' 8Gi pool declares no partition type attribute: no summary unless defaulted.
    assert "partitionSummary" not in pools["pool"]


def test_default_partition_attribute_and_bad_types() -> None:
    snapshot = load_example("features-partitionable.yaml")
    pools = by_pool(
        pool_status(
            snapshot.resource_slices,
            default_partition_type_attribute="dra.example.com/size",
            gates=ALL_ON,
        )
    )
    error = pools["pool"]["validationError"]
    assert "partition type attribute dra.example.com/size is missing" in error
    assert pools["pool"]["totalDevices"] is None


def test_incomplete_pool_reports_a_validation_error() -> None:
    snapshot = load_example("features-partitionable.yaml")
    slices = [s for s in snapshot.resource_slices if s.name != "resourceslice-with-devices"]
    pool = by_pool(pool_status(slices, gates=ALL_ON))["pool"]
    assert pool["validationError"].startswith("pool is incomplete: 1 of 2 ResourceSlices")


# KEP-5677's PoolStatus: "UnavailableDevices is the number of devices that are not available
# due to taints or other conditions" and "AvailableDevices is the number of devices available
# for allocation. This equals TotalDevices - AllocatedDevices - UnavailableDevices." Kubernetes
# 1.37's controller counts tainted (NoSchedule, NoExecute) devices over the whole pool,
# allocated or not, and floors availableDevices at 0.


def test_tainted_devices_are_unavailable_whether_allocated_or_not(engine) -> None:
    snapshot = load_example("features-taints.yaml")
    taints = TaintIndex(
        snapshot.device_taint_rules, snapshot.device_classes, engine=engine, gates=ALL_ON
    )
    gpu0 = DeviceID("dra.example.com", "worker-1", "gpu-0")
    (pool,) = pool_status(snapshot.resource_slices, allocated=[gpu0], taints=taints, gates=ALL_ON)
    # The NoExecute rule "example" taints all three GPUs, gpu-0 too although it is allocated:
    # it counts in both allocatedDevices and unavailableDevices; available floors at 0.
    assert (
        pool["totalDevices"],
        pool["allocatedDevices"],
        pool["unavailableDevices"],
        pool["availableDevices"],
    ) == (3, 1, 3, 0)
    rules_off = TaintIndex(
        snapshot.device_taint_rules,
        snapshot.device_classes,
        engine=engine,
        gates=gates_with(DRADeviceTaintRules=False),
    )
    (pool,) = pool_status(
        snapshot.resource_slices, allocated=[gpu0], taints=rules_off, gates=ALL_ON
    )
    # Only gpu-1's driver-published NoSchedule taint remains: 3 - 1 - 1.
    assert (pool["unavailableDevices"], pool["availableDevices"]) == (1, 1)


def test_a_tainted_allocated_device_counts_in_both(engine) -> None:
    snapshot = load_example("features-taints.yaml")
    rules_off = TaintIndex(
        snapshot.device_taint_rules,
        snapshot.device_classes,
        engine=engine,
        gates=gates_with(DRADeviceTaintRules=False),
    )
    gpu1 = DeviceID("dra.example.com", "worker-1", "gpu-1")  # NoSchedule in its slice
    (pool,) = pool_status(
        snapshot.resource_slices, allocated=[gpu1], taints=rules_off, gates=ALL_ON
    )
    assert (pool["allocatedDevices"], pool["unavailableDevices"], pool["availableDevices"]) == (
        1,
        1,
        1,
    )


def test_only_no_schedule_and_no_execute_taints_make_a_device_unavailable(engine) -> None:
    # KEP-5677: unavailableDevices counts devices "not available due to taints or other
    # conditions"; a taint with effect None (the "dry-run" rule) keeps the device allocatable,
    # so it is not counted, while gpu-1's NoSchedule taint is, and gpu-0 (allocated, untainted
    # here) counts once, as allocated.
    snapshot = load_example("features-taints.yaml")
    dry_run = [r for r in snapshot.device_taint_rules if r.name == "dry-run"]
    assert [r.taint.effect for r in dry_run] == ["None"]
    taints = TaintIndex(dry_run, snapshot.device_classes, engine=engine, gates=ALL_ON)
    gpu0 = DeviceID("dra.example.com", "worker-1", "gpu-0")
    (pool,) = pool_status(snapshot.resource_slices, allocated=[gpu0], taints=taints, gates=ALL_ON)
    assert (
        pool["totalDevices"],
        pool["allocatedDevices"],
        pool["unavailableDevices"],
        pool["availableDevices"],
    ) == (3, 1, 1, 1)


def test_shareable_summary_counts_consumed_capacity() -> None:
    snapshot = load_example("features-consumable-capacity.yaml")
    eth1 = DeviceID("dra.example.com", "pool", "eth1")
    (pool,) = pool_status(
        snapshot.resource_slices,
        consumed_capacity={eth1: {"bandwidth": Quantity.parse("2G")}},
        gates=ALL_ON,
    )
    assert pool["allocatedDevices"] == 1
    assert pool["shareableSummary"] == {
        "fullyAvailableDevices": 1,
        "partiallyAvailableDevices": 1,
        "capacity": [{"name": "bandwidth", "total": "20G", "consumed": "2G", "available": "18G"}],
    }


def test_gate_off_gives_no_pools() -> None:
    snapshot = load_example("features-consumable-capacity.yaml")
    assert (
        pool_status(snapshot.resource_slices, gates=gates_with(DRAResourcePoolStatus=False)) == []
    )


def test_exhausted_counters_do_not_make_a_device_unavailable() -> None:
    # The docs' 8Gi counter set: device-1 (6Gi) allocated leaves 2Gi, so device-2 (6Gi) cannot
    # be allocated by counters, yet only taints count as unavailable: it stays "available".
    snapshot = load_example("features-partitionable.yaml")
    device_1 = DeviceID("dra.example.com", "pool", "device-1")
    pools = by_pool(pool_status(snapshot.resource_slices, allocated=[device_1, MIG], gates=ALL_ON))
    docs = pools["pool"]
    assert (
        docs["totalDevices"],
        docs["allocatedDevices"],
        docs["unavailableDevices"],
        docs["availableDevices"],
    ) == (2, 1, 0, 1)
    assert (pools["gpu-pool"]["unavailableDevices"], pools["gpu-pool"]["availableDevices"]) == (
        0,
        1,
    )
    # The partition view is where counter exhaustion shows: nothing of the MIG type is left.
    summary = {s["type"]: s for s in pools["gpu-pool"]["partitionSummary"]}
    assert summary["mig-4g"]["allocatable"] == 0


def test_reference_to_a_missing_counter_set_is_a_pool_validation_error() -> None:
    snapshot = load_example("features-partitionable.yaml")
    for s in snapshot.resource_slices:
        for d in s.devices:
            if d.name == "device-2":
                d.consumes_counters[0].counter_set = "gpu-2-counters"
    pool = by_pool(pool_status(snapshot.resource_slices, gates=ALL_ON))["pool"]
    assert "counter set gpu-2-counters, which the pool does not define" in pool["validationError"]
    assert pool["totalDevices"] is None and pool["unavailableDevices"] is None
