"""resource.k8s.io kinds: ResourceSlice, DeviceClass, ResourceClaim(Template), DeviceTaintRule.

Everything is read in the v1 shape. ``v1beta2`` is the v1 shape already; ``v1beta1`` (and
``v1alpha3``) wrap each device's fields in ``basic:`` and put a request's device fields
directly on the request: both are converted here. Field paths in problems are those of the
document as uploaded.
"""

from __future__ import annotations

from allocator.model import (
    AllocationResult,
    AttributeValue,
    CapacityRequirements,
    ConsumerReference,
    CounterConsumption,
    CounterSet,
    Device,
    DeviceCapacity,
    DeviceClass,
    DeviceConstraint,
    DeviceRequest,
    DeviceRequestAllocationResult,
    DeviceSelector,
    DeviceSubRequest,
    DeviceTaint,
    DeviceTaintRule,
    DeviceToleration,
    ExactDeviceRequest,
    RequestPolicy,
    ResourceClaim,
    ResourceClaimSpec,
    ResourceClaimTemplate,
    ResourceSlice,
    ResourceSliceTemplate,
    Version,
)
from allocator.quantity import Quantity, QuantityError
from allocator.snapshot.fields import Context
from allocator.snapshot.names import extended_resource_name_problem

# Versions whose devices wrap their fields in ``basic:`` and whose requests are flat.
LEGACY_VERSIONS = frozenset({"v1beta1", "v1alpha3"})

_ATTRIBUTE_TYPES = ("int", "bool", "string", "version")
_LIST_ATTRIBUTE_TYPES = {"ints": "int", "bools": "bool", "strings": "string", "versions": "version"}
_TAINT_EFFECTS = ("NoSchedule", "NoExecute", "None")
_ALLOCATION_MODES = ("ExactCount", "All")
_TOLERATION_OPERATORS = ("Equal", "Exists")


def version_of(api_version: str | None) -> str:
    return (api_version or "").rsplit("/", 1)[-1]


# --- devices -----------------------------------------------------------------------------------


def _attribute_scalar(ctx: Context, type_: str, value: object, path: str) -> AttributeValue | None:
    if type_ == "int":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        ctx.problem(path, "must be an integer")
    elif type_ == "bool":
        if isinstance(value, bool):
            return value
        ctx.problem(path, "must be true or false")
    elif type_ == "string":
        if isinstance(value, str):
            return value
        ctx.problem(path, "must be a string")
    else:
        if isinstance(value, str) and value:
            return Version(value[1:] if value.startswith("v") else value)
        ctx.problem(path, "must be a semantic version string")
    return None


def _plain_attribute(spec: object) -> AttributeValue | None:
    """A well-formed single-valued attribute (``{"string": "H100"}``), read without building
    the field paths a problem would name; None for anything else (the full reading decides)."""
    if type(spec) is not dict or len(spec) != 1:
        return None
    ((kind, value),) = spec.items()
    t = type(value)
    if kind == "string":
        return value if t is str else None
    if kind == "int":
        return value if t is int else None
    if kind == "bool":
        return value if t is bool else None
    if kind == "version" and t is str and value:
        return Version(value[1:] if value.startswith("v") else value)
    return None


def read_attributes(ctx: Context, d: dict, path: str) -> dict[str, AttributeValue]:
    # Most devices publish only plain scalar attributes: a 5,000-node snapshot has 240,000 of
    # them, and naming each one's field path for a problem that never comes was a fifth of
    # its load.
    raw = d.get("attributes") if type(d) is dict else None
    if type(raw) is dict:
        plain = {name: _plain_attribute(spec) for name, spec in raw.items()}
        if None not in plain.values():
            return plain
    return read_attributes_checked(ctx, d, path)


def read_attributes_checked(ctx: Context, d: dict, path: str) -> dict[str, AttributeValue]:
    """Every attribute checked, each problem naming its field."""
    out: dict[str, AttributeValue] = {}
    for name, spec in ctx.map(d, "attributes", path).items():
        p = f"{path}.{name}"
        if not isinstance(spec, dict):
            ctx.problem(p, "must be an object with one of int, bool, string, version")
            continue
        present = [k for k in (*_ATTRIBUTE_TYPES, *_LIST_ATTRIBUTE_TYPES) if k in spec]
        if len(present) != 1:
            ctx.problem(
                p,
                "must set exactly one of int, bool, string, version, ints, bools, strings, "
                "versions",
            )
            continue
        kind = present[0]
        if kind in _LIST_ATTRIBUTE_TYPES:
            items = spec[kind]
            if not isinstance(items, list):
                ctx.problem(f"{p}.{kind}", "must be a list")
                continue
            values = [
                _attribute_scalar(ctx, _LIST_ATTRIBUTE_TYPES[kind], v, f"{p}.{kind}[{i}]")
                for i, v in enumerate(items)
            ]
            if all(v is not None for v in values):
                out[str(name)] = tuple(values)
        else:
            value = _attribute_scalar(ctx, kind, spec[kind], f"{p}.{kind}")
            if value is not None:
                out[str(name)] = value
    return out


def read_capacity(ctx: Context, d: dict, path: str) -> dict[str, DeviceCapacity]:
    out: dict[str, DeviceCapacity] = {}
    for name, spec in ctx.map(d, "capacity", path).items():
        p = f"{path}.{name}"
        if not isinstance(spec, dict):
            # v1alpha3 published the bare quantity.
            q = ctx.parse_quantity(spec, p)
            if q is not None:
                out[str(name)] = DeviceCapacity(q)
            continue
        value = ctx.quantity(spec, "value", f"{p}.value", required=True)
        policy = None
        if spec.get("requestPolicy") is not None:
            rp = ctx.map(spec, "requestPolicy", f"{p}.requestPolicy")
            rpp = f"{p}.requestPolicy"
            valid_values = tuple(
                q
                for i, v in enumerate(ctx.list(rp, "validValues", f"{rpp}.validValues"))
                if (q := ctx.parse_quantity(v, f"{rpp}.validValues[{i}]")) is not None
            )
            vr = ctx.map(rp, "validRange", f"{rpp}.validRange")
            policy = RequestPolicy(
                default=ctx.quantity(rp, "default", f"{rpp}.default"),
                valid_values=valid_values,
                valid_range_min=ctx.quantity(vr, "min", f"{rpp}.validRange.min"),
                valid_range_max=ctx.quantity(vr, "max", f"{rpp}.validRange.max"),
                valid_range_step=ctx.quantity(vr, "step", f"{rpp}.validRange.step"),
            )
        if value is not None:
            out[str(name)] = DeviceCapacity(value, policy)
    return out


def read_counters(ctx: Context, d: dict, path: str) -> dict[str, Quantity]:
    out: dict[str, Quantity] = {}
    for name, spec in ctx.map(d, "counters", path, required=True).items():
        p = f"{path}.{name}"
        if not isinstance(spec, dict):
            ctx.problem(p, "must be an object with a value")
            continue
        q = ctx.quantity(spec, "value", f"{p}.value", required=True)
        if q is not None:
            out[str(name)] = q
    return out


def read_taint(ctx: Context, t: dict, path: str) -> DeviceTaint:
    effect = ctx.str(t, "effect", f"{path}.effect", required=True) or "NoSchedule"
    if effect not in _TAINT_EFFECTS:
        ctx.problem(f"{path}.effect", f"must be one of {', '.join(_TAINT_EFFECTS)}")
    return DeviceTaint(
        key=ctx.str(t, "key", f"{path}.key", required=True) or "",
        value=ctx.str(t, "value", f"{path}.value"),
        effect=effect,
        time_added=ctx.str(t, "timeAdded", f"{path}.timeAdded"),
    )


# What most devices publish: everything else keeps its default when absent.
_PLAIN_DEVICE_FIELDS = frozenset({"name", "attributes", "capacity"})


def _plain_capacity(raw: object, parsed: dict[str, Quantity]) -> dict[str, DeviceCapacity] | None:
    """Capacities that are a value each (``{"memory": {"value": "80Gi"}}``), read without the
    field paths a problem would name; None for anything else (the full reading decides).
    ``parsed``: quantities already read, by text (a quantity is immutable: shared)."""
    if type(raw) is not dict:
        return None if raw is not None else {}
    out: dict[str, DeviceCapacity] = {}
    for name, spec in raw.items():
        if type(spec) is not dict or len(spec) != 1:
            return None
        text = spec.get("value")
        if type(text) is not str:
            return None
        quantity = parsed.get(text)
        if quantity is None:
            try:
                quantity = parsed[text] = Quantity.parse(text)
            except QuantityError:
                return None
        out[str(name)] = DeviceCapacity(quantity)
    return out


def _plain_devices(entries: list) -> list[Device] | None:
    """A slice's devices when every one is plain (``read_device``'s fast case: a name, plain
    capacities and plain attributes only), read without a field path each; None when one is
    not (the full reading decides, and names the problems). A 5,000-node snapshot has 40,000
    devices, most alike: their quantities and versions are read once per text."""
    parsed: dict[str, Quantity] = {}
    versions: dict[str, AttributeValue] = {}  # a Version is immutable: shared
    out = []
    for raw in entries:
        if type(raw) is not dict or not raw.keys() <= _PLAIN_DEVICE_FIELDS:
            return None
        name = raw.get("name")
        if type(name) is not str or not name:
            return None
        capacity = _plain_capacity(raw.get("capacity"), parsed)
        if capacity is None:
            return None
        specs = raw.get("attributes")
        attributes = {} if specs is None else _plain_attributes(specs, versions)
        if attributes is None:
            return None
        out.append(Device(name=name, attributes=attributes, capacity=capacity, raw=raw))
    return out


def _plain_attributes(
    specs: object, versions: dict[str, AttributeValue]
) -> dict[str, AttributeValue] | None:
    """``_plain_attribute`` of each attribute, strings read inline (most attributes are:
    models, UUIDs, PCIe roots) and versions once per text (``versions``; immutable, shared);
    None when one is not plain."""
    if type(specs) is not dict:
        return None
    attributes: dict[str, AttributeValue] = {}
    for key, spec in specs.items():
        if type(spec) is dict and len(spec) == 1:
            value = spec.get("string")
            if type(value) is str:
                attributes[key] = value
                continue
            text = spec.get("version")
            if type(text) is str and text:
                version = versions.get(text)
                if version is None:
                    version = versions[text] = _plain_attribute(spec)
                attributes[key] = version
                continue
        value = _plain_attribute(spec)
        if value is None:
            return None
        attributes[key] = value
    return attributes


def read_device(ctx: Context, raw: dict, path: str, legacy: bool) -> Device:
    # A 5,000-node snapshot has 40,000 devices: the field paths of the full reading below,
    # built for problems that never come, were half of reading them.
    plain = _plain_devices([raw])
    return plain[0] if plain is not None else read_device_checked(ctx, raw, path, legacy)


def read_device_checked(ctx: Context, raw: dict, path: str, legacy: bool) -> Device:
    """Every field of a device checked, each problem naming its field."""
    body = raw
    body_path = path
    if legacy and isinstance(raw.get("basic"), dict):
        body = {**raw["basic"], **{k: v for k, v in raw.items() if k != "basic"}}
        body_path = f"{path}.basic"
    elif raw.get("basic") is not None:
        # Reading on would silently drop the device's attributes and capacity.
        ctx.problem(
            f"{path}.basic",
            "only resource.k8s.io/v1beta1 wraps device fields in basic; "
            "set apiVersion to resource.k8s.io/v1beta1 or move the fields up",
        )
    name = ctx.str(raw, "name", f"{path}.name", required=True) or ""
    check_node_allocatable(ctx, body, body_path)
    consumes = []
    for p, c in ctx.items(body, "consumesCounters", f"{body_path}.consumesCounters"):
        consumes.append(
            CounterConsumption(
                counter_set=ctx.str(c, "counterSet", f"{p}.counterSet", required=True) or "",
                counters=read_counters(ctx, c, f"{p}.counters"),
                compatibility_groups=ctx.strings(
                    c, "compatibilityGroups", f"{p}.compatibilityGroups"
                ),
            )
        )
    return Device(
        name=name,
        attributes=read_attributes(ctx, body, f"{body_path}.attributes"),
        capacity=read_capacity(ctx, body, f"{body_path}.capacity"),
        node_name=ctx.str(body, "nodeName", f"{body_path}.nodeName"),
        node_selector=ctx.node_selector(body, "nodeSelector", f"{body_path}.nodeSelector"),
        all_nodes=body.get("allNodes")
        if body.get("allNodes") is None
        else ctx.bool(body, "allNodes", f"{body_path}.allNodes"),
        consumes_counters=consumes,
        taints=[read_taint(ctx, t, p) for p, t in ctx.items(body, "taints", f"{body_path}.taints")],
        binding_conditions=ctx.strings(body, "bindingConditions", f"{body_path}.bindingConditions"),
        binding_failure_conditions=ctx.strings(
            body, "bindingFailureConditions", f"{body_path}.bindingFailureConditions"
        ),
        binds_to_node=ctx.bool(body, "bindsToNode", f"{body_path}.bindsToNode"),
        allow_multiple_allocations=ctx.bool(
            body, "allowMultipleAllocations", f"{body_path}.allowMultipleAllocations"
        ),
        raw=body,
    )


def check_node_allocatable(ctx: Context, body: dict, path: str) -> None:
    """Shapes of DRANodeAllocatableResources' device fields, read later from ``Device.raw``
    (both the docs' ``nodeAllocatableResources`` and 1.36's
    ``nodeAllocatableResourceMappings``): checked here so a run never meets a bad one."""
    if body.get("nodeAllocatableResources") is not None:
        p = f"{path}.nodeAllocatableResources"
        nar = ctx.map(body, "nodeAllocatableResources", p)
        for resource, spec in ctx.map(nar, "mapping", f"{p}.mapping").items():
            mp = f"{p}.mapping.{resource}"
            if spec is None:
                continue
            if not isinstance(spec, dict):
                ctx.problem(
                    mp, "must be an object with capacityKey/capacityMultiplier or deviceMultiplier"
                )
                continue
            ctx.str(spec, "capacityKey", f"{mp}.capacityKey")
            ctx.quantity(spec, "capacityMultiplier", f"{mp}.capacityMultiplier")
            ctx.quantity(spec, "deviceMultiplier", f"{mp}.deviceMultiplier")
        for resource, spec in ctx.map(nar, "overhead", f"{p}.overhead").items():
            op = f"{p}.overhead.{resource}"
            if spec is None:
                continue
            if not isinstance(spec, dict):
                ctx.problem(op, "must be an object with perPod and/or perContainer")
                continue
            ctx.quantity(spec, "perPod", f"{op}.perPod")
            ctx.quantity(spec, "perContainer", f"{op}.perContainer")
    if body.get("nodeAllocatableResourceMappings") is not None:
        p = f"{path}.nodeAllocatableResourceMappings"
        for resource, spec in ctx.map(body, "nodeAllocatableResourceMappings", p).items():
            mp = f"{p}.{resource}"
            if spec is None:
                continue
            if not isinstance(spec, dict):
                ctx.problem(mp, "must be an object with capacityKey and/or allocationMultiplier")
                continue
            ctx.str(spec, "capacityKey", f"{mp}.capacityKey")
            ctx.quantity(spec, "allocationMultiplier", f"{mp}.allocationMultiplier")


def read_devices(ctx: Context, spec: dict, path: str, legacy: bool) -> list[Device]:
    entries = spec.get("devices") if type(spec) is dict else None
    devices = _plain_devices(entries) if type(entries) is list else None
    if devices is None:
        devices = [read_device(ctx, d, p, legacy) for p, d in ctx.items(spec, "devices", path)]
    seen: set[str] = set()
    for i, d in enumerate(devices):
        if d.name and d.name in seen:
            ctx.problem(f"{path}[{i}].name", f"duplicate device name {d.name!r}")
        seen.add(d.name)
    return devices


def read_shared_counters(ctx: Context, spec: dict, path: str) -> list[CounterSet]:
    return [
        CounterSet(
            name=ctx.str(s, "name", f"{p}.name", required=True) or "",
            counters=read_counters(ctx, s, f"{p}.counters"),
        )
        for p, s in ctx.items(spec, "sharedCounters", path)
    ]


def build_resource_slice(ctx: Context, obj: dict) -> ResourceSlice:
    legacy = version_of(obj.get("apiVersion")) in LEGACY_VERSIONS
    spec = ctx.map(obj, "spec", "spec", required=True)
    pool = ctx.map(spec, "pool", "spec.pool", required=True)
    owner_node = None
    refs = (obj.get("metadata") or {}).get("ownerReferences")  # shape checked with metadata
    for ref in refs if isinstance(refs, list) else ():
        if isinstance(ref, dict) and ref.get("kind") == "Node" and isinstance(ref.get("name"), str):
            owner_node = ref["name"]
    node_name = ctx.str(spec, "nodeName", "spec.nodeName")
    ctx.str(spec, "partitionTypeAttribute", "spec.partitionTypeAttribute")  # read from raw
    all_nodes = ctx.bool(spec, "allNodes", "spec.allNodes")
    node_selector = ctx.node_selector(spec, "nodeSelector", "spec.nodeSelector")
    per_device = ctx.bool(spec, "perDeviceNodeSelection", "spec.perDeviceNodeSelection")
    chosen = sum(x for x in (bool(node_name), all_nodes, node_selector is not None, per_device))
    if chosen > 1:
        ctx.problem(
            "spec",
            "at most one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection may be set",
        )
    return ResourceSlice(
        name=ctx.name or "",
        driver=ctx.str(spec, "driver", "spec.driver", required=True) or "",
        pool=ctx.str(pool, "name", "spec.pool.name", required=True) or "",
        generation=ctx.int(pool, "generation", "spec.pool.generation", 0, minimum=0) or 0,
        resource_slice_count=ctx.int(
            pool, "resourceSliceCount", "spec.pool.resourceSliceCount", 1, minimum=1
        )
        or 1,
        node_name=node_name,
        node_selector=node_selector,
        all_nodes=all_nodes,
        per_device_node_selection=per_device,
        devices=read_devices(ctx, spec, "spec.devices", legacy),
        shared_counters=read_shared_counters(ctx, spec, "spec.sharedCounters"),
        owner_node=owner_node,
        raw=obj,
    )


def read_slice_template(ctx: Context, t: dict, path: str) -> ResourceSliceTemplate:
    pool = t.get("pool")
    if isinstance(pool, dict):
        pool_name = ctx.str(pool, "name", f"{path}.pool.name", required=True)
    else:
        pool_name = ctx.str(t, "pool", f"{path}.pool", required=True)
    return ResourceSliceTemplate(
        driver=ctx.str(t, "driver", f"{path}.driver", required=True) or "",
        pool=pool_name or "",
        devices=read_devices(ctx, t, f"{path}.devices", legacy=False),
        shared_counters=read_shared_counters(ctx, t, f"{path}.sharedCounters"),
        raw=t,
    )


# --- classes and claims ----------------------------------------------------------------------


def read_selectors(ctx: Context, d: dict, path: str) -> list[DeviceSelector]:
    out = []
    for p, s in ctx.items(d, "selectors", path):
        if s.get("cel") is None:
            out.append(DeviceSelector(cel=None, raw=s))
            continue
        cel = ctx.map(s, "cel", f"{p}.cel")
        expr = ctx.str(cel, "expression", f"{p}.cel.expression", required=True)
        out.append(DeviceSelector(cel=expr, raw=s))
    return out


def build_device_class(ctx: Context, obj: dict) -> DeviceClass:
    spec = ctx.map(obj, "spec", "spec")
    extended = ctx.str(spec, "extendedResourceName", "spec.extendedResourceName")
    if extended is not None:
        problem = extended_resource_name_problem(extended)
        if problem is not None:
            ctx.problem(
                "spec.extendedResourceName",
                f"{extended!r} must be a valid extended resource name: {problem}",
            )
            extended = None
    return DeviceClass(
        name=ctx.name or "",
        selectors=read_selectors(ctx, spec, "spec.selectors"),
        extended_resource_name=extended,
        raw=obj,
    )


def read_device_toleration(ctx: Context, t: dict, path: str) -> DeviceToleration:
    operator = ctx.str(t, "operator", f"{path}.operator") or "Equal"
    if operator not in _TOLERATION_OPERATORS:
        ctx.problem(f"{path}.operator", "must be Equal or Exists")
    effect = ctx.str(t, "effect", f"{path}.effect")
    if effect is not None and effect not in _TAINT_EFFECTS and effect != "":
        ctx.problem(f"{path}.effect", f"must be one of {', '.join(_TAINT_EFFECTS)}")
    return DeviceToleration(
        key=ctx.str(t, "key", f"{path}.key"),
        operator=operator,
        value=ctx.str(t, "value", f"{path}.value"),
        effect=effect or None,
        toleration_seconds=ctx.int(t, "tolerationSeconds", f"{path}.tolerationSeconds"),
    )


def read_exact(ctx: Context, d: dict, path: str) -> ExactDeviceRequest:
    mode = ctx.str(d, "allocationMode", f"{path}.allocationMode") or "ExactCount"
    if mode not in _ALLOCATION_MODES:
        ctx.problem(f"{path}.allocationMode", "must be ExactCount or All")
    count = 1
    if mode == "ExactCount":
        count = ctx.int(d, "count", f"{path}.count", 1, minimum=1) or 1
    elif d.get("count") not in (None, 0):
        ctx.problem(f"{path}.count", "must not be set when allocationMode is All")
    capacity = None
    if d.get("capacity") is not None:
        cap = ctx.map(d, "capacity", f"{path}.capacity")
        capacity = CapacityRequirements(
            ctx.quantity_map(cap, "requests", f"{path}.capacity.requests")
        )
    return ExactDeviceRequest(
        device_class_name=ctx.str(d, "deviceClassName", f"{path}.deviceClassName", required=True)
        or "",
        selectors=read_selectors(ctx, d, f"{path}.selectors"),
        allocation_mode=mode,
        count=count,
        admin_access=ctx.bool(d, "adminAccess", f"{path}.adminAccess"),
        tolerations=[
            read_device_toleration(ctx, t, p)
            for p, t in ctx.items(d, "tolerations", f"{path}.tolerations")
        ],
        capacity=capacity,
    )


def read_request(ctx: Context, r: dict, path: str, legacy: bool) -> DeviceRequest:
    name = ctx.str(r, "name", f"{path}.name", required=True) or ""
    has_first = r.get("firstAvailable") is not None
    if legacy:
        # v1beta1: the device fields sit on the request itself (unless firstAvailable).
        exactly = None if has_first else read_exact(ctx, r, path)
    else:
        if r.get("exactly") is not None and has_first:
            ctx.problem(path, "exactly one of exactly or firstAvailable must be set")
        if r.get("exactly") is None and not has_first:
            hint = ""
            if r.get("deviceClassName") is not None:
                hint = " (deviceClassName on the request is the v1beta1 shape)"
            ctx.problem(path, f"exactly one of exactly or firstAvailable must be set{hint}")
        exactly = None
        if r.get("exactly") is not None:
            exactly = read_exact(ctx, ctx.map(r, "exactly", f"{path}.exactly"), f"{path}.exactly")
    subs = []
    seen: set[str] = set()
    for p, s in ctx.items(r, "firstAvailable", f"{path}.firstAvailable"):
        sub_name = ctx.str(s, "name", f"{p}.name", required=True) or ""
        if sub_name in seen:
            ctx.problem(f"{p}.name", f"duplicate subrequest name {sub_name!r}")
        seen.add(sub_name)
        subs.append(DeviceSubRequest(sub_name, read_exact(ctx, s, p)))
    if has_first and not subs:
        ctx.problem(f"{path}.firstAvailable", "must not be empty")
    return DeviceRequest(name=name, exactly=exactly, first_available=subs)


def read_claim_spec(ctx: Context, spec: dict, path: str, legacy: bool) -> ResourceClaimSpec:
    devices = ctx.map(spec, "devices", f"{path}.devices")
    requests = [
        read_request(ctx, r, p, legacy)
        for p, r in ctx.items(devices, "requests", f"{path}.devices.requests")
    ]
    names = set()
    for i, r in enumerate(requests):
        if r.name in names:
            ctx.problem(f"{path}.devices.requests[{i}].name", f"duplicate request name {r.name!r}")
        names.add(r.name)
    constraints = []
    for p, c in ctx.items(devices, "constraints", f"{path}.devices.constraints"):
        refs = ctx.strings(c, "requests", f"{p}.requests")
        for i, ref in enumerate(refs):
            if ref.split("/", 1)[0] not in names:
                ctx.problem(f"{p}.requests[{i}]", f"unknown request {ref!r}")
        constraints.append(
            DeviceConstraint(
                requests=list(refs),
                match_attribute=ctx.str(c, "matchAttribute", f"{p}.matchAttribute"),
                distinct_attribute=ctx.str(c, "distinctAttribute", f"{p}.distinctAttribute"),
                raw=c,
            )
        )
    config = [c for _, c in ctx.items(devices, "config", f"{path}.devices.config")]
    return ResourceClaimSpec(requests=requests, constraints=constraints, config=config)


_PLAIN_RESULT_FIELDS = ("request", "driver", "pool", "device")  # the dataclass's order


def _plain_results(entries: list) -> list[DeviceRequestAllocationResult] | None:
    """An allocation's results when every one names its request, driver, pool and device and
    nothing else (what most claims hold), read without a field path each; None when one
    does not (the full reading decides, and names the problems)."""
    out = []
    for r in entries:
        if type(r) is not dict or len(r) != len(_PLAIN_RESULT_FIELDS):
            return None
        fields = [r.get(name) for name in _PLAIN_RESULT_FIELDS]
        if not all(type(value) is str and value for value in fields):
            return None
        out.append(DeviceRequestAllocationResult(*fields))
    return out


def read_allocation(ctx: Context, status: dict) -> AllocationResult | None:
    if status.get("allocation") is None:
        return None
    alloc = ctx.map(status, "allocation", "status.allocation")
    devices = ctx.map(alloc, "devices", "status.allocation.devices")
    entries = devices.get("results")
    results = _plain_results(entries) if type(entries) is list else None
    if results is None:
        results = _checked_results(ctx, devices)
    return AllocationResult(
        devices=results,
        node_selector=ctx.node_selector(alloc, "nodeSelector", "status.allocation.nodeSelector"),
    )


def _checked_results(ctx: Context, devices: dict) -> list[DeviceRequestAllocationResult]:
    """Every result checked, each problem naming its field."""
    results = []
    for p, r in ctx.items(devices, "results", "status.allocation.devices.results"):
        consumed = ctx.quantity_map(r, "consumedCapacity", f"{p}.consumedCapacity")
        results.append(
            DeviceRequestAllocationResult(
                request=ctx.str(r, "request", f"{p}.request", required=True) or "",
                driver=ctx.str(r, "driver", f"{p}.driver", required=True) or "",
                pool=ctx.str(r, "pool", f"{p}.pool", required=True) or "",
                device=ctx.str(r, "device", f"{p}.device", required=True) or "",
                admin_access=ctx.bool(r, "adminAccess", f"{p}.adminAccess"),
                tolerations=[
                    read_device_toleration(ctx, t, tp)
                    for tp, t in ctx.items(r, "tolerations", f"{p}.tolerations")
                ],
                binding_conditions=ctx.strings(r, "bindingConditions", f"{p}.bindingConditions"),
                binding_failure_conditions=ctx.strings(
                    r, "bindingFailureConditions", f"{p}.bindingFailureConditions"
                ),
                share_id=ctx.str(r, "shareID", f"{p}.shareID"),
                consumed_capacity=consumed,
            )
        )
    return results


def _conditions(ctx: Context, d: dict, path: str) -> None:
    """metav1.Condition lists (binding conditions read them from ``raw``)."""
    for p, c in ctx.items(d, "conditions", path):
        ctx.str(c, "type", f"{p}.type", required=True)
        ctx.str(c, "status", f"{p}.status")
        ctx.str(c, "reason", f"{p}.reason")
        ctx.str(c, "message", f"{p}.message")


def _device_statuses(ctx: Context, status: dict) -> list[dict]:
    _conditions(ctx, status, "status.conditions")
    out = []
    for p, d in ctx.items(status, "devices", "status.devices"):
        for key in ("driver", "pool", "device", "shareID"):
            ctx.str(d, key, f"{p}.{key}")
        _conditions(ctx, d, f"{p}.conditions")
        out.append(d)
    return out


def build_resource_claim(ctx: Context, obj: dict) -> ResourceClaim:
    legacy = version_of(obj.get("apiVersion")) in LEGACY_VERSIONS
    spec = ctx.map(obj, "spec", "spec", required=True)
    status = ctx.map(obj, "status", "status")
    reserved = [
        ConsumerReference(
            resource=ctx.str(r, "resource", f"{p}.resource", required=True) or "",
            name=ctx.str(r, "name", f"{p}.name", required=True) or "",
            uid=ctx.str(r, "uid", f"{p}.uid"),
            api_group=ctx.str(r, "apiGroup", f"{p}.apiGroup") or "",
        )
        for p, r in ctx.items(status, "reservedFor", "status.reservedFor")
    ]
    return ResourceClaim(
        namespace=ctx.namespace or "default",
        name=ctx.name or "",
        spec=read_claim_spec(ctx, spec, "spec", legacy),
        allocation=read_allocation(ctx, status),
        reserved_for=reserved,
        device_statuses=_device_statuses(ctx, status),
        raw=obj,
    )


def build_resource_claim_template(ctx: Context, obj: dict) -> ResourceClaimTemplate:
    legacy = version_of(obj.get("apiVersion")) in LEGACY_VERSIONS
    spec = ctx.map(obj, "spec", "spec", required=True)
    inner = ctx.map(spec, "spec", "spec.spec", required=True)
    return ResourceClaimTemplate(
        namespace=ctx.namespace or "default",
        name=ctx.name or "",
        spec=read_claim_spec(ctx, inner, "spec.spec", legacy),
        raw=obj,
    )


def build_device_taint_rule(ctx: Context, obj: dict) -> DeviceTaintRule:
    spec = ctx.map(obj, "spec", "spec", required=True)
    sel = ctx.map(spec, "deviceSelector", "spec.deviceSelector")
    read_selectors(ctx, sel, "spec.deviceSelector.selectors")  # CEL selectors, read from raw
    taint = ctx.map(spec, "taint", "spec.taint", required=True)
    return DeviceTaintRule(
        name=ctx.name or "",
        taint=read_taint(ctx, taint, "spec.taint"),
        device_class_name=ctx.str(sel, "deviceClassName", "spec.deviceSelector.deviceClassName"),
        driver=ctx.str(sel, "driver", "spec.deviceSelector.driver"),
        pool=ctx.str(sel, "pool", "spec.deviceSelector.pool"),
        device=ctx.str(sel, "device", "spec.deviceSelector.device"),
        raw=obj,
    )
