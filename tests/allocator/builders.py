"""Small builders of realistic DRA objects for everyone's tests.

GPUs come from ``gpu.nvidia.com`` (attributes as the NVIDIA DRA driver publishes them), NICs
from ``nic.example.com``; zones are ``us-west-2a``/``us-west-2b``; instance types are AWS-like
(``p5.48xlarge``, ``p4d.24xlarge``, ``g6.12xlarge``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from allocator.bindings import AttributeBindings
from allocator.featuregates import ALL_ON, FeatureGates
from allocator.model import (
    AllocationResult,
    AttributeBindingDecl,
    ConsumerReference,
    Device,
    DeviceCapacity,
    DeviceClass,
    DeviceConstraint,
    DeviceID,
    DeviceRequest,
    DeviceRequestAllocationResult,
    DeviceSelector,
    DeviceSubRequest,
    ExactDeviceRequest,
    InstanceType,
    Offering,
    ResourceClaim,
    ResourceClaimSpec,
    ResourceSlice,
    ResourceSliceTemplate,
)
from allocator.nodeclaim import SimpleNodeClaim
from allocator.pipeline import Pipeline, build_pipeline
from allocator.quantity import Quantity
from allocator.requirements import Requirements, node_requirements

GPU = "gpu.nvidia.com"
NIC = "nic.example.com"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"


# --- devices and slices ----------------------------------------------------------------------


def gpu(
    name: str,
    *,
    model: str = "H100",
    memory: str = "80Gi",
    pcie_root: str | None = None,
    index: int | None = None,
    **attributes: Any,
) -> Device:
    attrs: dict[str, Any] = {
        "productName": f"NVIDIA {model} 80GB HBM3" if model == "H100" else f"NVIDIA {model}",
        "model": model,
        "architecture": "Hopper" if model in ("H100", "H200") else "Ampere",
        "driverVersion": "550.54.15",
        "index": index if index is not None else int("".join(filter(str.isdigit, name)) or 0),
    }
    if pcie_root is not None:
        attrs[PCIE_ROOT] = pcie_root
    attrs.update(attributes)
    return Device(
        name=name,
        attributes=attrs,
        capacity={"memory": DeviceCapacity(Quantity.parse(memory))},
    )


def gpus(n: int, *, prefix: str = "gpu-", **kw: Any) -> list[Device]:
    return [gpu(f"{prefix}{i}", index=i, **kw) for i in range(n)]


def nic(name: str, *, pcie_root: str | None = None, speed: str = "400G") -> Device:
    attrs: dict[str, Any] = {"model": "ConnectX-7", "linkSpeed": speed}
    if pcie_root is not None:
        attrs[PCIE_ROOT] = pcie_root
    return Device(name=name, attributes=attrs)


def selector_in(key: str, *values: str) -> dict:
    return {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}
        ]
    }


def zone_selector(*zones: str) -> dict:
    return selector_in(ZONE, *zones)


def hostname_selector(host: str) -> dict:
    return selector_in(HOSTNAME, host)


def resource_slice(
    name: str,
    devices: Sequence[Device],
    *,
    driver: str = GPU,
    pool: str | None = None,
    node_name: str | None = None,
    node_selector: dict | None = None,
    all_nodes: bool = False,
    generation: int = 1,
    count: int = 1,
    per_device: bool = False,
    owner_node: str | None = None,
) -> ResourceSlice:
    return ResourceSlice(
        name=name,
        driver=driver,
        pool=pool or name,
        generation=generation,
        resource_slice_count=count,
        node_name=node_name,
        node_selector=node_selector,
        all_nodes=all_nodes,
        per_device_node_selection=per_device,
        devices=list(devices),
        owner_node=owner_node if owner_node is not None else node_name,
    )


# --- classes and claims ----------------------------------------------------------------------


def device_class(name: str, *cel: str) -> DeviceClass:
    return DeviceClass(
        name=name, selectors=[DeviceSelector(cel=e, raw={"cel": {"expression": e}}) for e in cel]
    )


GPU_CLASS = device_class("gpu.nvidia.com", f'device.driver == "{GPU}"')
NIC_CLASS = device_class("nic.example.com", f'device.driver == "{NIC}"')
CLASSES = {GPU_CLASS.name: GPU_CLASS, NIC_CLASS.name: NIC_CLASS}


def exact(
    name: str,
    device_class_name: str = GPU_CLASS.name,
    *,
    count: int = 1,
    mode: str = "ExactCount",
    selectors: Iterable[str] = (),
) -> DeviceRequest:
    return DeviceRequest(
        name=name,
        exactly=ExactDeviceRequest(
            device_class_name=device_class_name,
            selectors=[DeviceSelector(cel=s, raw={"cel": {"expression": s}}) for s in selectors],
            allocation_mode=mode,
            count=count if mode == "ExactCount" else 0,
        ),
    )


def first_available(name: str, *subs: tuple[str, DeviceRequest]) -> DeviceRequest:
    return DeviceRequest(
        name=name,
        first_available=[DeviceSubRequest(n, r.exactly) for n, r in subs if r.exactly],
    )


def match_attribute(attribute: str, *requests: str) -> DeviceConstraint:
    raw: dict[str, Any] = {"matchAttribute": attribute}
    if requests:
        raw["requests"] = list(requests)
    return DeviceConstraint(requests=list(requests), match_attribute=attribute, raw=raw)


def claim(
    name: str,
    *requests: DeviceRequest,
    namespace: str = "default",
    constraints: Iterable[DeviceConstraint] = (),
) -> ResourceClaim:
    return ResourceClaim(
        namespace=namespace,
        name=name,
        spec=ResourceClaimSpec(requests=list(requests), constraints=list(constraints)),
    )


def allocate_in_cluster(
    c: ResourceClaim,
    devices: Iterable[tuple[str, DeviceID]],
    *,
    node_selector: dict | None = None,
    reserved_for_pods: Iterable[str] = (),
) -> ResourceClaim:
    """Mark a claim as allocated in the cluster (status.allocation, status.reservedFor)."""
    c.allocation = AllocationResult(
        devices=[
            DeviceRequestAllocationResult(req, d.driver, d.pool, d.device) for req, d in devices
        ],
        node_selector=node_selector,
    )
    c.reserved_for = [ConsumerReference("pods", p, uid=f"uid-{p}") for p in reserved_for_pods]
    return c


# --- instance types and NodeClaims -----------------------------------------------------------


def template(pool: str, devices: Sequence[Device], *, driver: str = GPU) -> ResourceSliceTemplate:
    return ResourceSliceTemplate(driver=driver, pool=pool, devices=list(devices))


def instance_type(
    name: str,
    templates: Sequence[ResourceSliceTemplate] = (),
    *,
    bindings: Iterable[tuple[str, Sequence[DeviceID]]] = (),
    arch: str = "amd64",
    zones: Sequence[str] = ("us-west-2a", "us-west-2b"),
    price: float = 98.32,
) -> InstanceType:
    return InstanceType(
        name=name,
        requirements=[{"key": "kubernetes.io/arch", "operator": "In", "values": [arch]}],
        offerings=[Offering(z, "on-demand", price) for z in zones],
        resource_slice_templates=list(templates),
        attribute_bindings=[AttributeBindingDecl(a, list(ds)) for a, ds in bindings],
    )


# The two GPU instance types most tests launch: eight H100 80Gi vs eight A100 40Gi.
P5 = instance_type("p5.48xlarge", [template("p5-gpus", gpus(8))])
P4D = instance_type("p4d.24xlarge", [template("p4d-gpus", gpus(8, model="A100", memory="40Gi"))])


def it_requirements(it: InstanceType) -> Requirements:
    reqs = Requirements.from_node_selector_requirements(it.requirements)
    reqs.add(
        Requirements.from_node_selector_requirements(
            [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [it.name]}]
        )
    )
    return reqs


def in_flight(
    name: str,
    instance_types: Sequence[InstanceType],
    *,
    node_pool: str = "gpu-pool",
    requirements: dict[str, Sequence[str]] | None = None,
) -> SimpleNodeClaim:
    """An in-flight NodeClaim of ``node_pool`` with these candidate instance types."""
    reqs = Requirements.from_node_selector_requirements(
        [{"key": "karpenter.sh/nodepool", "operator": "In", "values": [node_pool]}]
        + [{"key": k, "operator": "In", "values": list(v)} for k, v in (requirements or {}).items()]
    )
    return SimpleNodeClaim(
        id=name,
        requirements=reqs,
        instance_types=[it.name for it in instance_types],
        node_pool=node_pool,
        templates={it.name: it.resource_slice_templates for it in instance_types},
        it_requirements={it.name: it_requirements(it) for it in instance_types},
    )


def existing_node(
    name: str,
    *,
    zone: str = "us-west-2a",
    instance_type_name: str = "p5.48xlarge",
    node_pool: str | None = "gpu-pool",
    labels: dict[str, str] | None = None,
) -> SimpleNodeClaim:
    """An initialized existing node: templates empty, requirements from its labels."""
    all_labels = {
        HOSTNAME: name,
        ZONE: zone,
        "node.kubernetes.io/instance-type": instance_type_name,
        "kubernetes.io/arch": "amd64",
    }
    if node_pool:
        all_labels["karpenter.sh/nodepool"] = node_pool
    all_labels.update(labels or {})
    return SimpleNodeClaim(
        id=f"node/{name}",
        requirements=node_requirements(all_labels, name),
        instance_types=[instance_type_name],
        node_name=name,
        node_pool=node_pool,
    )


def bindings_for(
    instance_types: Sequence[InstanceType], node_pool: str = "gpu-pool"
) -> AttributeBindings:
    return AttributeBindings.build({node_pool: list(instance_types)})


def make_allocator(
    slices: Sequence[ResourceSlice] = (),
    *,
    instance_types: Sequence[InstanceType] = (),
    allocated: Iterable[DeviceID] = (),
    classes: dict[str, DeviceClass] | None = None,
    gates: FeatureGates = ALL_ON,
    pipeline: Pipeline | None = None,
    **kw: Any,
):
    """An Allocator with every DRA feature on, unless ``gates`` or ``pipeline`` say otherwise."""
    from allocator.allocator import Allocator

    return Allocator(
        list(slices),
        allocated,
        bindings_for(instance_types),
        classes if classes is not None else CLASSES,
        pipeline=pipeline if pipeline is not None else build_pipeline(gates),
        **kw,
    )


def picked(result, claim_index: int = 0, instance_type: str | None = None) -> list[str]:
    """``driver/pool/device`` of a claim's devices in a result (one instance type's)."""
    outcome = result.claims[claim_index]
    if instance_type is not None:
        devs = outcome.devices_by_instance_type[instance_type]
    else:
        devs = outcome.devices
    return [f"{d.driver}/{d.pool}/{d.device}" for d in devs]
