"""Resource pool status (DRAResourcePoolStatus, KEP-5677's ResourcePoolStatusRequest).

One entry per in-cluster pool, counted over the pool's newest generation after the run's
allocations are committed (docs/RESULT.md ``pools``):

- ``totalDevices``; ``allocatedDevices`` (held by a claim, exclusively or as a share);
  ``unavailableDevices`` ("not available due to taints or other conditions"): as Kubernetes
  1.37's controller counts them, every device of the pool with a NoSchedule or NoExecute taint
  (the slice's or a DeviceTaintRule's), allocated or not, so a tainted allocated device counts
  in both; partitions whose shared counters are used up are not counted there;
  ``availableDevices`` = total - allocated - unavailable, floored at 0;
- ``validationError`` when the pool cannot be fully checked (incomplete generation, duplicate
  device names, broken counter references, a bad partition type attribute); the counts are
  then null, as the API leaves them unset;
- ``partitionSummary`` for pools with partitionable devices, grouped by the string attribute
  named by the slice's ``partitionTypeAttribute`` (or the request's default): per type the
  number of devices and how many more of them the remaining shared counters still allow;
- ``shareableSummary`` for pools with devices that allow multiple allocations.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from allocator.featuregates import FeatureGates
from allocator.features.attributes import lookup_attribute
from allocator.features.capacity import CapacityLedger
from allocator.features.counters import build_counter_pool
from allocator.features.taints import TaintIndex
from allocator.model import Device, DeviceID, PoolKey, ResourceSlice
from allocator.pools import newest_generation
from allocator.quantity import Quantity

GATE = "DRAResourcePoolStatus"


def _partition_attribute(s: ResourceSlice, default: str | None) -> str | None:
    spec = (s.raw or {}).get("spec") or {}
    return spec.get("partitionTypeAttribute") or default


def _fits(remaining: dict[str, dict[str, Quantity]], device: Device) -> bool:
    for entry in device.consumes_counters:
        counters = remaining.get(entry.counter_set, {})
        for name, amount in entry.counters.items():
            if name not in counters or counters[name] < amount:
                return False
    return True


def _consume(remaining: dict[str, dict[str, Quantity]], device: Device) -> None:
    for entry in device.consumes_counters:
        counters = remaining.get(entry.counter_set)
        if counters is None:
            continue
        for name, amount in entry.counters.items():
            if name in counters:
                counters[name] = counters[name] - amount


def _tainted(device_id: DeviceID, device: Device, taints: TaintIndex | None) -> bool:
    """KEP-5677's "not available due to taints": a NoSchedule/NoExecute taint, whether or not
    the device is allocated (counter exhaustion is not a reason here)."""
    return taints is not None and taints.unavailable(device_id, device)


def pool_status(
    slices: Iterable[ResourceSlice],
    *,
    allocated: Iterable[DeviceID] = (),
    consumed_capacity: dict[DeviceID, dict[str, Quantity]] | None = None,
    taints: TaintIndex | None = None,
    gates: FeatureGates,
    default_partition_type_attribute: str | None = None,
    pool_errors: dict[PoolKey, str] | None = None,
) -> list[dict[str, Any]]:
    """The ``pools`` section of the result; [] when the DRAResourcePoolStatus gate is off.

    ``allocated``: devices held exclusively once the run is committed (the cluster's plus the
    run's); ``consumed_capacity``: per shared device what its shares consume; ``pool_errors``:
    further validation errors the caller found (reported as given)."""
    if not gates.enabled(GATE):
        return []
    allocated_set = set(allocated)
    consumed = consumed_capacity or {}
    partition_on = gates.enabled("DRAPartitionableDevices")
    shareable_on = gates.enabled("DRAConsumableCapacity")
    out = []
    for key, pool_slices in sorted(newest_generation(slices).items()):
        pool_slices.sort(key=lambda s: s.name)
        declared = max(s.resource_slice_count for s in pool_slices)
        generation = pool_slices[0].generation
        node_names = {s.node_name for s in pool_slices}
        entry: dict[str, Any] = {
            "driver": key.driver,
            "pool": key.pool,
            "nodeName": node_names.pop() if len(node_names) == 1 else None,
            "generation": generation,
            "resourceSliceCount": declared,
            "totalDevices": None,
            "allocatedDevices": None,
            "availableDevices": None,
            "unavailableDevices": None,
            "validationError": None,
        }
        devices: list[tuple[DeviceID, Device, ResourceSlice]] = []
        names: set[str] = set()
        problems: list[str] = []
        if len(pool_slices) < declared:
            problems.append(
                f"pool is incomplete: {len(pool_slices)} of {declared} ResourceSlices of "
                f"generation {generation} are published"
            )
        for s in pool_slices:
            for device in s.devices:
                if device.name in names:
                    problems.append(f"device name {device.name} appears in more than one slice")
                names.add(device.name)
                devices.append((DeviceID(key.driver, key.pool, device.name), device, s))
        counter_pool = build_counter_pool(key, pool_slices)
        if counter_pool.error:
            problems.append(counter_pool.error)
        if pool_errors and key in pool_errors:
            problems.append(pool_errors[key])

        partitionable = [d for d in devices if d[1].consumes_counters]
        types: dict[str, str] = {}  # device name -> partition type
        attribute_of: dict[str, str] = {}
        if partition_on and partitionable:
            for _, device, s in partitionable:
                attribute = _partition_attribute(s, default_partition_type_attribute)
                if attribute is None:
                    continue
                value = lookup_attribute(device, key.driver, attribute)
                if not isinstance(value, str) or isinstance(value, bool):
                    problems.append(
                        f"device {device.name}: partition type attribute {attribute} is "
                        "missing or not a string"
                    )
                    continue
                types[device.name] = value
                attribute_of[device.name] = attribute

        if problems:
            entry["validationError"] = "; ".join(dict.fromkeys(problems))
            out.append(entry)
            continue

        def is_allocated(device_id: DeviceID) -> bool:
            if device_id in allocated_set:
                return True
            return any(v.sign() > 0 for v in consumed.get(device_id, {}).values())

        # 5,000 nodes x 8 GPUs: counted in C where nothing is shared or tainted.
        n_allocated = (
            sum(1 for d in devices if is_allocated(d[0]))
            if consumed
            else len(allocated_set.intersection([d[0] for d in devices]))
        )
        n_unavailable = (
            sum(1 for d in devices if _tainted(d[0], d[1], taints))
            if taints is not None and (taints.rules or any(d[1].taints for d in devices))
            else 0
        )
        entry["totalDevices"] = len(devices)
        entry["allocatedDevices"] = n_allocated
        entry["unavailableDevices"] = n_unavailable
        entry["availableDevices"] = max(0, len(devices) - n_allocated - n_unavailable)

        if types:
            remaining = {name: dict(c) for name, c in counter_pool.sets.items()}
            for device_id, device, _ in partitionable:
                if is_allocated(device_id):
                    _consume(remaining, device)
            summary = []
            for type_name in sorted(set(types.values())):
                of_type = [d for d in partitionable if types.get(d[1].name) == type_name]
                scratch = {name: dict(c) for name, c in remaining.items()}
                allocatable = 0
                for device_id, device, _ in of_type:
                    if is_allocated(device_id):
                        continue
                    if taints is not None and taints.unavailable(device_id, device):
                        continue
                    if _fits(scratch, device):
                        _consume(scratch, device)
                        allocatable += 1
                summary.append(
                    {
                        "attribute": attribute_of[of_type[0][1].name],
                        "type": type_name,
                        "total": len(of_type),
                        "allocatable": allocatable,
                    }
                )
            entry["partitionSummary"] = summary

        shareable = [d for d in devices if d[1].allow_multiple_allocations]
        if shareable_on and shareable:
            fully = partially = 0
            totals: dict[str, list[Quantity]] = {}
            for device_id, device, _ in shareable:
                used = consumed.get(device_id, {})
                any_used = any(v.sign() > 0 for v in used.values())
                all_used = all(
                    used.get(name) is not None and used[name] >= cap.value
                    for name, cap in device.capacity.items()
                )
                if not any_used:
                    fully += 1
                elif not all_used:
                    partially += 1
                for name, cap in device.capacity.items():
                    t = totals.setdefault(name, [Quantity.zero(), Quantity.zero()])
                    t[0] = t[0] + cap.value
                    if name in used:
                        t[1] = t[1] + used[name]
            capacity = []
            for name, (total, used_total) in sorted(totals.items()):
                available = total - used_total
                if available.sign() < 0:
                    available = Quantity.zero(total.format)
                capacity.append(
                    {
                        "name": name,
                        "total": total.canonical(),
                        "consumed": used_total.canonical(),
                        "available": available.canonical(),
                    }
                )
            entry["shareableSummary"] = {
                "fullyAvailableDevices": fully,
                "partiallyAvailableDevices": partially,
                "capacity": capacity,
            }
        out.append(entry)
    return out


def run_pool_status(
    slices: Iterable[ResourceSlice],
    allocated: Iterable[DeviceID],
    capacity: CapacityLedger | None,
    taints: TaintIndex | None,
    gates: FeatureGates,
    default_partition_type_attribute: str | None = None,
) -> list[dict]:
    """docs/RESULT.md ``pools`` after the run: exclusive holds from the tracker
    (``allocated``), shares from the capacity ledger (cluster shares minus the freed ones, plus
    the run's); None for both without the features (core_pipeline)."""
    return pool_status(
        slices,
        allocated=allocated,
        consumed_capacity=capacity.consumed_after_run() if capacity is not None else None,
        taints=taints,
        gates=gates,
        default_partition_type_attribute=default_partition_type_attribute,
    )
