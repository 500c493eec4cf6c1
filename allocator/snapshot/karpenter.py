"""Karpenter kinds (NodePool, NodeClaim) and the cloud provider's InstanceType catalog.

InstanceType comes either as ``dra-web.io/v1alpha1 InstanceType`` (CONTRACT section 1) or as an
element of Karpenter KWOK's ``instance_types.json`` array, converted here to the former.
"""

from __future__ import annotations

from allocator.model import (
    AttributeBindingDecl,
    DeviceID,
    InstanceType,
    NodeClaim,
    NodePool,
    Offering,
)
from allocator.requirements import (
    LABEL_ARCH,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_OS,
    LABEL_ZONE,
)
from allocator.snapshot.core import read_taints
from allocator.snapshot.fields import Context
from allocator.snapshot.resource import read_slice_template

INSTANCE_TYPE_API_VERSION = "dra-web.io/v1alpha1"


def _metadata(obj: dict) -> dict:
    md = obj.get("metadata")
    return md if isinstance(md, dict) else {}


def build_node_pool(ctx: Context, obj: dict) -> NodePool:
    spec = ctx.map(obj, "spec", "spec", required=True)
    template = ctx.map(spec, "template", "spec.template")
    tmd = ctx.map(template, "metadata", "spec.template.metadata")
    tspec = ctx.map(template, "spec", "spec.template.spec")
    return NodePool(
        name=ctx.name or "",
        weight=ctx.int(spec, "weight", "spec.weight", 0, minimum=0) or 0,
        requirements=ctx.node_selector_requirements(
            tspec, "requirements", "spec.template.spec.requirements"
        ),
        labels=ctx.string_map(tmd, "labels", "spec.template.metadata.labels"),
        taints=read_taints(ctx, tspec, "taints", "spec.template.spec.taints"),
        startup_taints=read_taints(ctx, tspec, "startupTaints", "spec.template.spec.startupTaints"),
        limits=ctx.quantity_map(spec, "limits", "spec.limits"),
        raw=obj,
    )


def build_node_claim(ctx: Context, obj: dict) -> NodeClaim:
    md = _metadata(obj)
    spec = ctx.map(obj, "spec", "spec")
    status = ctx.map(obj, "status", "status")
    labels = ctx.string_map(md, "labels", "metadata.labels")
    initialized = False
    for _, cond in ctx.items(status, "conditions", "status.conditions"):
        if cond.get("type") == "Initialized":
            initialized = cond.get("status") == "True"
    return NodeClaim(
        name=ctx.name or "",
        node_pool=labels.get(LABEL_NODEPOOL),
        node_name=ctx.str(status, "nodeName", "status.nodeName") or None,
        instance_type=labels.get(LABEL_INSTANCE_TYPE),
        labels=labels,
        annotations=ctx.string_map(md, "annotations", "metadata.annotations"),
        requirements=ctx.node_selector_requirements(spec, "requirements", "spec.requirements"),
        taints=read_taints(ctx, spec, "taints", "spec.taints"),
        initialized=initialized,
        deleting=md.get("deletionTimestamp") is not None,
        raw=obj,
    )


def build_instance_type(ctx: Context, obj: dict) -> InstanceType:
    spec = ctx.map(obj, "spec", "spec", required=True)
    offerings = []
    for p, o in ctx.items(spec, "offerings", "spec.offerings"):
        offerings.append(
            Offering(
                zone=ctx.str(o, "zone", f"{p}.zone", required=True) or "",
                capacity_type=ctx.str(o, "capacityType", f"{p}.capacityType", required=True) or "",
                price=ctx.number(o, "price", f"{p}.price"),
                available=ctx.bool(o, "available", f"{p}.available", default=True),
                requirements=ctx.node_selector_requirements(o, "requirements", f"{p}.requirements"),
            )
        )
    dyn = ctx.map(spec, "dynamicResources", "spec.dynamicResources")
    templates = [
        read_slice_template(ctx, t, p)
        for p, t in ctx.items(
            dyn, "resourceSliceTemplates", "spec.dynamicResources.resourceSliceTemplates"
        )
    ]
    bindings = []
    for p, b in ctx.items(dyn, "attributeBindings", "spec.dynamicResources.attributeBindings"):
        devices = []
        for dp, d in ctx.items(b, "devices", f"{p}.devices"):
            driver = ctx.str(d, "driver", f"{dp}.driver", required=True)
            pool = ctx.str(d, "pool", f"{dp}.pool", required=True)
            device = ctx.str(d, "device", f"{dp}.device", required=True)
            if driver and pool and device:
                devices.append(DeviceID(driver, pool, device))
        bindings.append(
            AttributeBindingDecl(
                attribute=ctx.str(b, "attribute", f"{p}.attribute", required=True) or "",
                devices=devices,
            )
        )
    _check_binding_targets(ctx, templates, bindings)
    return InstanceType(
        name=ctx.name or "",
        capacity=ctx.quantity_map(spec, "capacity", "spec.capacity"),
        requirements=ctx.node_selector_requirements(spec, "requirements", "spec.requirements"),
        offerings=offerings,
        resource_slice_templates=templates,
        attribute_bindings=bindings,
        raw=obj,
    )


def _check_binding_targets(ctx: Context, templates, bindings) -> None:
    known = {DeviceID(t.driver, t.pool, d.name) for t in templates for d in t.devices}
    for i, b in enumerate(bindings):
        for j, d in enumerate(b.devices):
            if d not in known:
                ctx.problem(
                    f"spec.dynamicResources.attributeBindings[{i}].devices[{j}]",
                    f"device {d} is not in this instance type's resourceSliceTemplates",
                )


# --- KWOK instance_types.json ----------------------------------------------------------------


def is_kwok_instance_type(obj: object) -> bool:
    return (
        isinstance(obj, dict)
        and "kind" not in obj
        and "apiVersion" not in obj
        and "name" in obj
        and "offerings" in obj
    )


def _in_value(reqs: list, key: str) -> str | None:
    for r in reqs:
        if isinstance(r, dict) and r.get("key") == key and r.get("operator") == "In":
            values = r.get("values") or []
            if values:
                return str(values[0])
    return None


def convert_kwok_instance_type(ctx: Context, obj: dict) -> dict:
    """A KWOK instance type as the equivalent InstanceType document."""
    offerings = []
    for p, o in ctx.items(obj, "offerings", "offerings", required=True):
        reqs = ctx.node_selector_requirements(o, "Requirements", f"{p}.Requirements")
        zone = _in_value(reqs, LABEL_ZONE) or ctx.str(o, "Zone", f"{p}.Zone")
        capacity_type = _in_value(reqs, LABEL_CAPACITY_TYPE) or ctx.str(
            o, "CapacityType", f"{p}.CapacityType"
        )
        if not zone:
            ctx.problem(p, f"no zone ({LABEL_ZONE} requirement or Zone)")
        if not capacity_type:
            ctx.problem(p, f"no capacity type ({LABEL_CAPACITY_TYPE} requirement or CapacityType)")
        extra = [r for r in reqs if r.get("key") not in (LABEL_ZONE, LABEL_CAPACITY_TYPE)]
        offering = {
            "zone": zone or "",
            "capacityType": capacity_type or "",
            "price": ctx.number(o, "Price", f"{p}.Price"),
            "available": ctx.bool(o, "Available", f"{p}.Available", default=True),
        }
        if extra:
            offering["requirements"] = extra
        offerings.append(offering)
    requirements = []
    arch = ctx.str(obj, "architecture", "architecture")
    if arch:
        requirements.append({"key": LABEL_ARCH, "operator": "In", "values": [arch]})
    systems = ctx.strings(obj, "operatingSystems", "operatingSystems")
    if systems:
        requirements.append({"key": LABEL_OS, "operator": "In", "values": list(systems)})
    resources = ctx.map(obj, "resources", "resources")
    return {
        "apiVersion": INSTANCE_TYPE_API_VERSION,
        "kind": "InstanceType",
        "metadata": {"name": obj.get("name")},
        "spec": {"capacity": dict(resources), "requirements": requirements, "offerings": offerings},
    }
