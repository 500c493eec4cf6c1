"""Node allocatable resources managed by DRA (DRANodeAllocatableResources).

A device may stand for a standard node resource (a CPU driver's cores: *mapping*) or need host
resources to work (an accelerator's host memory: *overhead*). Either way the pod needs those
resources from the node on top of its own requests (``draNodeResources`` in the result).

Two shapes are read from the device as published (``Device.raw``):

- the docs' ``nodeAllocatableResources``::

      mapping:  {cpu: {capacityKey: cpu.example.com/cpu, capacityMultiplier: 1}}
                {cpu: {deviceMultiplier: 2}}
      overhead: {memory: {perPod: 8Gi, perContainer: 1Gi}}

- Kubernetes 1.36's ``nodeAllocatableResourceMappings``::

      {cpu: {capacityKey: dra.example.com/cores, allocationMultiplier: "2"}}
      {memory: {allocationMultiplier: 2Gi}}      # per allocated device

With ``capacityKey`` the amount is the capacity the allocation consumed (the share of a shared
device, the whole capacity otherwise) times the multiplier; without it, the number of devices
times the multiplier. Overhead is per pod, plus per container that references the claim.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import field
from fractions import Fraction

from allocator.checks import PathEntry
from allocator.claims import REALLOCATED, UNALLOCATED, ClaimOutcome
from allocator.claims import AllocatedDevice as ClaimDevice
from allocator.errors import AllocationError
from allocator.featuregates import FeatureGates
from allocator.features.capacity import resolve_capacity_name
from allocator.features.taints import pod_claim_entries
from allocator.model import Device, DeviceID, Pod, ResourceClaim, ResourceSliceTemplate
from allocator.pools import TEMPLATE
from allocator.quantity import BINARY_SI, Quantity, QuantityError
from allocator.records import record

GATE = "DRANodeAllocatableResources"


class NodeAllocatableError(ValueError):
    pass


@record(frozen=True)
class ResourceMapping:
    """A device capacity that becomes a node resource, times a multiplier."""

    resource: str
    capacity_key: str | None
    multiplier: Quantity


@record(frozen=True)
class ResourceOverhead:
    """A node resource a device's pods add per pod or per container."""

    resource: str
    per_pod: Quantity | None
    per_container: Quantity | None


@record
class NodeAllocatable:
    """A device's node resources (DRANodeAllocatableResources): mappings and overheads."""

    mappings: list[ResourceMapping] = field(default_factory=list)
    overheads: list[ResourceOverhead] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.mappings or self.overheads)


@record
class AllocatedDevice:
    """One device a pod's claim got, as node resource accounting needs it."""

    claim_key: str
    pod_claim_name: str  # the pod's spec.resourceClaims[].name
    driver: str
    device: Device
    consumed_capacity: dict[str, Quantity] | None = None  # None: the device is taken whole


def _quantity(raw: object, where: str) -> Quantity:
    try:
        return Quantity.parse(raw)  # type: ignore[arg-type]
    except (QuantityError, ValueError) as e:
        raise NodeAllocatableError(f"{where}: {e}") from e


def parse_node_allocatable(device: Device) -> NodeAllocatable:
    """The device's node resource mappings and overheads, from either published shape."""
    raw = device.raw or {}
    out = NodeAllocatable()
    if "nodeAllocatableResources" not in raw and "nodeAllocatableResourceMappings" not in raw:
        return out
    docs_shape = raw.get("nodeAllocatableResources") or {}
    if not isinstance(docs_shape, dict):
        raise NodeAllocatableError(f"device {device.name}: nodeAllocatableResources: not a map")
    for resource, spec in sorted((docs_shape.get("mapping") or {}).items()):
        where = f"device {device.name}: nodeAllocatableResources.mapping.{resource}"
        spec = spec or {}
        if spec.get("capacityKey"):
            mult = _quantity(spec.get("capacityMultiplier", 1), where + ".capacityMultiplier")
            out.mappings.append(ResourceMapping(resource, spec["capacityKey"], mult))
        else:
            mult = _quantity(spec.get("deviceMultiplier", 1), where + ".deviceMultiplier")
            out.mappings.append(ResourceMapping(resource, None, mult))
    for resource, spec in sorted((docs_shape.get("overhead") or {}).items()):
        where = f"device {device.name}: nodeAllocatableResources.overhead.{resource}"
        spec = spec or {}
        per_pod = spec.get("perPod")
        per_container = spec.get("perContainer")
        out.overheads.append(
            ResourceOverhead(
                resource,
                _quantity(per_pod, where + ".perPod") if per_pod is not None else None,
                _quantity(per_container, where + ".perContainer")
                if per_container is not None
                else None,
            )
        )
    mappings_136 = raw.get("nodeAllocatableResourceMappings") or {}
    if not isinstance(mappings_136, dict):
        raise NodeAllocatableError(
            f"device {device.name}: nodeAllocatableResourceMappings: not a map"
        )
    for resource, spec in sorted(mappings_136.items()):
        where = f"device {device.name}: nodeAllocatableResourceMappings.{resource}"
        spec = spec or {}
        mult = _quantity(spec.get("allocationMultiplier", 1), where + ".allocationMultiplier")
        out.mappings.append(ResourceMapping(resource, spec.get("capacityKey") or None, mult))
    return out


def containers_referencing(pod: Pod | None, pod_claim_name: str) -> int:
    """How many containers (and init containers) of the pod list the claim in
    ``resources.claims`` (1 when the pod is not known)."""
    if pod is None:
        return 1
    spec = (pod.raw or {}).get("spec") or {}
    count = 0
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or []:
            claims = ((container or {}).get("resources") or {}).get("claims") or []
            if any((c or {}).get("name") == pod_claim_name for c in claims):
                count += 1
    return count


def _scaled(base: Quantity, multiplier: Quantity) -> Quantity:
    value = base.value * multiplier.value
    fmt = BINARY_SI if BINARY_SI in (base.format, multiplier.format) else base.format
    return Quantity(Fraction(value), fmt)


def _add(into: dict[str, Quantity], resource: str, amount: Quantity) -> None:
    into[resource] = into[resource] + amount if resource in into else amount


def dra_node_resources(
    pod: Pod | None, devices: Iterable[AllocatedDevice], gates: FeatureGates
) -> dict[str, Quantity]:
    """What the pod's devices add to the pod's node resource needs (``draNodeResources``)."""
    if not gates.enabled(GATE):
        return {}
    out: dict[str, Quantity] = {}
    for allocated in devices:
        spec = parse_node_allocatable(allocated.device)
        if not spec:
            continue
        for mapping in spec.mappings:
            if mapping.capacity_key is None:
                _add(out, mapping.resource, mapping.multiplier)
                continue
            key = resolve_capacity_name(
                mapping.capacity_key, allocated.driver, allocated.device.capacity
            )
            if key is None:
                raise NodeAllocatableError(
                    f"device {allocated.device.name}: capacityKey {mapping.capacity_key} is not "
                    "a capacity of the device"
                )
            if allocated.consumed_capacity is not None and key in allocated.consumed_capacity:
                base = allocated.consumed_capacity[key]
            else:
                base = allocated.device.capacity[key].value
            _add(out, mapping.resource, _scaled(base, mapping.multiplier))
        containers = containers_referencing(pod, allocated.pod_claim_name)
        for overhead in spec.overheads:
            if overhead.per_pod is not None:
                _add(out, overhead.resource, overhead.per_pod)
            if overhead.per_container is not None and containers:
                _add(out, overhead.resource, overhead.per_container * containers)
    return {k: v for k, v in sorted(out.items()) if v.sign() != 0}


def shared_mapping_claim_error(claim_key: str, pods: Iterable[str]) -> str | None:
    """Claims whose devices map node resources directly cannot be shared by several pods."""
    users = sorted(set(pods))
    if len(users) > 1:
        return (
            f"claim {claim_key} maps node allocatable resources and cannot be shared by "
            f"several pods ({', '.join(users)})"
        )
    return None


def pod_level_limit_problem(pod: Pod, dra: dict[str, Quantity]) -> str | None:
    """With pod-level ``spec.resources.requests``, the containers' requests plus the DRA
    resources must not exceed them."""
    spec = (pod.raw or {}).get("spec") or {}
    pod_requests = ((spec.get("resources") or {}).get("requests")) or {}
    if not pod_requests or not dra:
        return None
    containers: dict[str, Quantity] = {}
    for container in spec.get("containers") or []:
        for name, raw in (((container or {}).get("resources") or {}).get("requests") or {}).items():
            _add(containers, name, _quantity(raw, f"pod {pod.key}: container request {name}"))
    for name, amount in dra.items():
        if name not in pod_requests:
            continue
        limit = _quantity(pod_requests[name], f"pod {pod.key}: spec.resources.requests.{name}")
        total = containers.get(name, Quantity.zero()) + amount
        if total > limit:
            return (
                f"pod {pod.key}: containers request {containers.get(name, Quantity.zero())} "
                f"and devices add {amount} of {name}, more than the pod-level request {limit}"
            )
    return None


# --- in the pipeline ---------------------------------------------------------------------------


def _parse_consumed(raw: dict | None) -> dict[str, Quantity] | None:
    if not raw:
        return None
    try:
        return {k: Quantity.parse(v) for k, v in raw.items()}
    except QuantityError:
        return None


def _pod_claim_names(pod) -> dict[str, str]:
    """claim key -> the pod's spec.resourceClaims[].name."""
    if pod is None:
        return {}
    return {key: name for name, key in pod_claim_entries(pod)}


def _declares_node_resources(device: Device) -> bool:
    raw = device.raw
    return bool(raw) and (
        "nodeAllocatableResources" in raw or "nodeAllocatableResourceMappings" in raw
    )


def node_resources(
    in_cluster: Mapping[DeviceID, Device],
    gates: FeatureGates,
    claims: Sequence[ResourceClaim],
    outcomes: Sequence[ClaimOutcome],
    per_it: Mapping[str, Sequence[PathEntry]],
    pod: Pod | None,
    slices_by_it: Mapping[str, Sequence[ResourceSliceTemplate]],
) -> dict[str, Quantity]:
    """What the devices of the pod's claims add to its node resource needs; the largest amount
    over the instance types that succeeded (only one of them launches). ``in_cluster``: the
    Allocator's in-cluster devices by ID; ``outcomes``: the Allocate result's, one per claim."""
    if not gates.enabled(GATE):
        return {}
    if all(o.state in (UNALLOCATED, REALLOCATED) for o in outcomes) and not any(
        _declares_node_resources(e.cand.device) for path in per_it.values() for e in path
    ):
        return {}  # the devices searched now are all there is, and none declares any
    names = _pod_claim_names(pod)
    its = list(per_it) or [""]
    best: dict[str, Quantity] = {}
    for it in its:
        templates = None
        devices: list[AllocatedDevice] = []
        for index, claim in enumerate(claims):
            outcome = outcomes[index]
            pod_claim_name = names.get(claim.key, "")
            if outcome.state in (UNALLOCATED, REALLOCATED):
                for e in per_it.get(it, []):
                    # Devices publishing no node allocatable resources add nothing.
                    if e.claim_index == index and _declares_node_resources(e.cand.device):
                        devices.append(
                            AllocatedDevice(
                                claim.key,
                                pod_claim_name,
                                e.cand.id.driver,
                                e.cand.device,
                                e.extra.get("_share"),
                            )
                        )
                continue
            for d in outcome.devices_for([it] if it else None):
                device_id = DeviceID(d.driver, d.pool, d.device)
                if d.source == TEMPLATE and templates is None:
                    templates = {
                        DeviceID(t.driver, t.pool, x.name): x
                        for t in (slices_by_it or {}).get(it, [])
                        for x in t.devices
                    }
                device = (
                    templates.get(device_id) if d.source == TEMPLATE else in_cluster.get(device_id)
                )
                if device is None or not _declares_node_resources(device):
                    continue
                devices.append(
                    AllocatedDevice(
                        claim.key,
                        pod_claim_name,
                        d.driver,
                        device,
                        _parse_consumed(d.extra.get("consumedCapacity")),
                    )
                )
        try:
            amounts = dra_node_resources(pod, devices, gates)
        except NodeAllocatableError as e:
            raise AllocationError(str(e), code="node-resources") from e
        for name, amount in amounts.items():
            if name not in best or amount > best[name]:
                best[name] = amount
    return best


# Per instance type: its template list and those of its devices that declare node resources.
DeclaringDevices = dict[str, tuple[Sequence[ResourceSliceTemplate], dict[tuple, Device]]]


def _declaring(templates: Sequence[ResourceSliceTemplate]) -> dict[tuple, Device]:
    """The template devices that declare node resources (only those can map any), by
    (driver, pool, name)."""
    out: dict[tuple, Device] = {}
    for t in templates:
        for x in t.devices:
            if _declares_node_resources(x):
                out.setdefault((t.driver, t.pool, x.name), x)
    return out


def claim_maps_node_resources(
    in_cluster: Mapping[DeviceID, Device],
    gates: FeatureGates,
    devices: Iterable[ClaimDevice],
    templates_by_it: Mapping[str, Sequence[ResourceSliceTemplate]] | None = None,
    declaring: DeclaringDevices | None = None,
) -> bool:
    """Whether an allocated claim's devices map node allocatable resources directly (the
    docs: such claims cannot be shared by several pods; overhead-only devices can).
    ``in_cluster``: the Allocator's in-cluster devices by ID; ``devices``: the claim's
    allocated devices; ``templates_by_it``: the NodeClaim's ResourceSliceTemplates for its
    template devices; ``declaring``: what was found of the templates before, kept by the
    caller for the run (a claim on a NodeClaim of 400 instance types has a device on each)."""
    if not gates.enabled(GATE):
        return False
    if declaring is None:
        declaring = {}
    for d in devices:
        if d.source == TEMPLATE:
            it = d.instance_type or ""
            templates = (templates_by_it or {}).get(it, ())
            hit = declaring.get(it)
            if hit is None or hit[0] is not templates:
                hit = declaring[it] = (templates, _declaring(templates))
            device = hit[1].get((d.driver, d.pool, d.device))
        else:
            device = in_cluster.get(DeviceID(d.driver, d.pool, d.device))
        if device is None:
            continue
        try:
            if parse_node_allocatable(device).mappings:
                return True
        except NodeAllocatableError:
            continue  # reported where the resources are computed
    return False
