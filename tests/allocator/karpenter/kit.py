"""Builders for the Karpenter-derived conformance cases (pkg/scheduling/dynamicresources).

Karpenter's tests use one driver ``gpu.example.com`` with a DeviceClass ``gpu`` and
instance types ``it-1``, ``it-a`` ...; here the same shapes carry realistic names: GPUs from
``gpu.nvidia.com``, NICs from ``nic.example.com``, AWS-like instance types. Slices are published
as Karpenter's tests publish them: an ``AllNodes`` device slice, and counter sets in a slice of
their own in the same pool (``resourceSliceCount`` 2).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pytest

from allocator.allocator import Allocator
from allocator.errors import AllocationError
from allocator.featuregates import ALL_ON, FeatureGates
from allocator.model import (
    CapacityRequirements,
    CounterConsumption,
    CounterSet,
    Device,
    DeviceCapacity,
    DeviceConstraint,
    DeviceID,
    DeviceRequest,
    DeviceSelector,
    DeviceSubRequest,
    ExactDeviceRequest,
    InstanceType,
    ResourceClaim,
    ResourceClaimSpec,
    ResourceSlice,
    ResourceSliceTemplate,
)
from allocator.nodeclaim import SimpleNodeClaim
from allocator.pipeline import Pipeline, build_pipeline
from allocator.quantity import Quantity
from allocator.requirements import Requirements, node_requirements
from tests.allocator.builders import (
    ZONE,
    bindings_for,
    device_class,
    instance_type,
)

GPU = "gpu.nvidia.com"
NIC = "nic.example.com"
NUMA = f"{GPU}/numa"
MODEL = f"{GPU}/model"

CLASSES = {
    "gpu": device_class("gpu", f'device.driver == "{GPU}"'),
    "nic": device_class("nic", f'device.driver == "{NIC}"'),
    "h100": device_class("h100", f'device.attributes["{GPU}"].model == "H100"'),
}

# Instance types in the order Karpenter's tests name them (it-1, it-2, it-3 / it-a, it-b, ...).
IT1, IT2, IT3, IT4 = "p5.48xlarge", "p4d.24xlarge", "g6e.48xlarge", "g5.48xlarge"


def q(s: str) -> Quantity:
    return Quantity.parse(s)


# --- devices ---------------------------------------------------------------------------------


def dev(name: str, attrs: Mapping[str, Any] | None = None, **consumes: Mapping[str, str]) -> Device:
    """A device; ``consumes`` maps a counter set to the counters it draws (``memory="40Gi"``)."""
    return Device(
        name=name,
        attributes=dict(attrs or {}),
        consumes_counters=[
            CounterConsumption(cs, {k: q(v) for k, v in counters.items()})
            for cs, counters in consumes.items()
        ],
    )


def devs(*names: str) -> list[Device]:
    return [dev(n) for n in names]


def shared(name: str, **counters: str) -> CounterSet:
    return CounterSet(name, {k: q(v) for k, v in counters.items()})


def slice_(
    name: str,
    devices: Sequence[Device] = (),
    *,
    pool: str = "pool-a",
    driver: str = GPU,
    count: int = 1,
    generation: int = 1,
    all_nodes: bool = True,
    node_name: str | None = None,
    node_selector: dict | None = None,
    counters: Sequence[CounterSet] = (),
) -> ResourceSlice:
    return ResourceSlice(
        name=name,
        driver=driver,
        pool=pool,
        generation=generation,
        resource_slice_count=count,
        node_name=node_name,
        node_selector=node_selector,
        all_nodes=all_nodes and node_name is None and node_selector is None,
        devices=list(devices),
        shared_counters=list(counters),
        owner_node=node_name,
    )


def counter_pool(
    counters: Sequence[CounterSet],
    devices: Sequence[Device],
    *,
    pool: str = "pool-a",
    driver: str = GPU,
    extra: Sequence[ResourceSlice] = (),
) -> list[ResourceSlice]:
    """A pool published as a counter-set slice (no node selection) plus an AllNodes device
    slice; ``extra`` slices belong to the same pool (resourceSliceCount counts them)."""
    n = 2 + len(extra)
    return [
        slice_(
            f"{pool}-counters",
            pool=pool,
            driver=driver,
            count=n,
            all_nodes=False,
            counters=counters,
        ),
        slice_(f"{pool}-devices", devices, pool=pool, driver=driver, count=n),
        *extra,
    ]


def zone_sel(*zones: str) -> dict:
    return {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": ZONE, "operator": "In", "values": list(zones)}]}
        ]
    }


def tmpl(
    pool: str,
    devices: Sequence[Device] | Sequence[str],
    *,
    driver: str = GPU,
    counters: Sequence[CounterSet] = (),
) -> ResourceSliceTemplate:
    ds = [dev(d) if isinstance(d, str) else d for d in devices]
    return ResourceSliceTemplate(
        driver=driver, pool=pool, devices=ds, shared_counters=list(counters)
    )


# --- claims ----------------------------------------------------------------------------------


def sel(expr: str) -> DeviceSelector:
    return DeviceSelector(cel=expr, raw={"cel": {"expression": expr}})


def body(
    cls: str = "gpu",
    count: int = 1,
    *,
    all_mode: bool = False,
    selector: str | None = None,
    capacity: Mapping[str, str] | None = None,
) -> ExactDeviceRequest:
    return ExactDeviceRequest(
        device_class_name=cls,
        selectors=[sel(selector)] if selector else [],
        allocation_mode="All" if all_mode else "ExactCount",
        count=0 if all_mode else count,
        capacity=CapacityRequirements({k: q(v) for k, v in capacity.items()}) if capacity else None,
    )


def req(name: str, cls: str = "gpu", count: int = 1, **kw: Any) -> DeviceRequest:
    return DeviceRequest(name=name, exactly=body(cls, count, **kw))


def all_req(name: str, cls: str = "gpu", **kw: Any) -> DeviceRequest:
    return DeviceRequest(name=name, exactly=body(cls, all_mode=True, **kw))


def first_of(name: str, *subs: tuple[str, ExactDeviceRequest]) -> DeviceRequest:
    return DeviceRequest(name=name, first_available=[DeviceSubRequest(n, b) for n, b in subs])


def match(attr: str, *requests: str) -> DeviceConstraint:
    raw: dict[str, Any] = {"matchAttribute": attr}
    if requests:
        raw["requests"] = list(requests)
    return DeviceConstraint(requests=list(requests), match_attribute=attr, raw=raw)


def claim(
    name: str,
    *requests: DeviceRequest,
    constraints: Iterable[DeviceConstraint] = (),
    namespace: str = "default",
) -> ResourceClaim:
    return ResourceClaim(
        namespace=namespace,
        name=name,
        spec=ResourceClaimSpec(requests=list(requests), constraints=list(constraints)),
    )


# --- node claims and the allocator -----------------------------------------------------------


def its(templates: Mapping[str, Sequence[ResourceSliceTemplate]]) -> list[InstanceType]:
    return [instance_type(name, list(ts)) for name, ts in templates.items()]


def node_claim(
    nc_id: str = "gpu-pool-abc12",
    *instance_types: str,
    templates: Mapping[str, Sequence[ResourceSliceTemplate]] | None = None,
    requirements: Mapping[str, Sequence[str]] | None = None,
    node_name: str | None = None,
    expressions: Sequence[dict] = (),
) -> SimpleNodeClaim:
    """An in-flight NodeClaim (no requirements unless given, as Karpenter's fakes) with these
    candidate instance types, each with its template slices; ``node_name``: an existing node;
    ``expressions``: raw NodeSelectorRequirements added to the requirements."""
    names = list(instance_types) or list(templates or {}) or [IT1]
    reqs = Requirements.from_node_selector_requirements(
        [{"key": k, "operator": "In", "values": list(v)} for k, v in (requirements or {}).items()]
        + list(expressions)
    )
    if node_name is not None:
        reqs = node_requirements({"kubernetes.io/hostname": node_name}, node_name)
    return SimpleNodeClaim(
        id=nc_id,
        requirements=reqs,
        instance_types=names,
        node_name=node_name,
        node_pool="gpu-pool",
        templates={n: list((templates or {}).get(n, [])) for n in names},
    )


def allocator(
    slices: Sequence[ResourceSlice] = (),
    *,
    allocated: Iterable[DeviceID] = (),
    instance_types: Sequence[InstanceType] = (),
    classes: Mapping[str, Any] | None = None,
    gates: FeatureGates = ALL_ON,
    pipeline: Pipeline | None = None,
    **kw: Any,
) -> Allocator:
    """An Allocator with every DRA feature on, unless ``gates`` or ``pipeline`` say otherwise."""
    return Allocator(
        list(slices),
        allocated,
        bindings_for(instance_types),
        dict(classes if classes is not None else CLASSES),
        pipeline=pipeline if pipeline is not None else build_pipeline(gates),
        **kw,
    )


def did(device: str, pool: str = "pool-a", driver: str = GPU) -> DeviceID:
    return DeviceID(driver, pool, device)


def names(result, index: int = 0, instance_type: str | None = None) -> list[str]:
    """Device names one claim got (for one instance type, or all merged)."""
    outcome = result.claims[index]
    if instance_type is not None:
        return [d.device for d in outcome.devices_by_instance_type[instance_type]]
    return [d.device for d in outcome.devices]


def fails(a: Allocator, nc, claims: list[ResourceClaim], match_text: str | None = None):
    with pytest.raises(AllocationError, match=match_text) as err:
        a.allocate(nc, claims)
    return err.value


def capacity_device(
    name: str, multi: bool = True, attrs: Mapping[str, Any] | None = None, **capacity: Any
) -> Device:
    """A device with capacity dimensions (``memory="80Gi"`` or a DeviceCapacity)."""
    return Device(
        name=name,
        attributes=dict(attrs or {}),
        capacity={
            k: v if isinstance(v, DeviceCapacity) else DeviceCapacity(q(v))
            for k, v in capacity.items()
        },
        allow_multiple_allocations=multi,
    )
