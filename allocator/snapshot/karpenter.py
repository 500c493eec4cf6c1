"""Karpenter kinds (NodePool, NodeClaim) and the cloud provider's InstanceType catalog.

InstanceType comes either as ``dra-web.io/v1alpha1 InstanceType`` (docs/SNAPSHOT.md) or as an
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
#
# Karpenter's KWOK provider reads this file with Go's encoding/json into InstanceTypeOptions
# (name, offerings, architecture, operatingSystems, resources) whose offerings embed
# cloudprovider.Offering (Requirements, Price, Available, ...). encoding/json matches object
# keys to fields "preferring an exact match but also accepting a case-insensitive match", and
# a later key overwrites an earlier one, so ``price``, ``Price`` and ``PRICE`` are one field.
# Its example catalog (kwok/examples/instance_types.json) still writes the older
# ``zone``/``capacityType`` keys, which today's provider ignores; they are read here as the
# requirements they meant, with a warning.


def _fold(d: dict) -> dict[str, tuple[str, object]]:
    """Keys folded as Go's encoding/json matches them: casefolded -> (key as written, value),
    the last of the keys that fold alike winning."""
    return {k.casefold(): (k, v) for k, v in d.items() if isinstance(k, str)}


def _key(folded: dict[str, tuple[str, object]], field: str) -> str:
    """The key as written in the user's file for a field (the field's name when absent)."""
    found = folded.get(field.casefold())
    return found[0] if found else field


def kwok_name_key(obj: dict) -> str:
    return _key(_fold(obj), "name")


def is_kwok_instance_type(obj: object) -> bool:
    # Every Kubernetes object has a kind: decided before folding its keys.
    if not isinstance(obj, dict) or "kind" in obj or "apiVersion" in obj:
        return False
    folded = _fold(obj)
    return "name" in folded and "offerings" in folded


def _in_value(reqs: list, key: str) -> str | None:
    for r in reqs:
        if isinstance(r, dict) and r.get("key") == key and r.get("operator") == "In":
            values = r.get("values") or []
            if values:
                return str(values[0])
    return None


def _legacy_key(
    ctx: Context,
    o: dict,
    folded: dict,
    field: str,
    label: str,
    path: str,
    from_requirements: str | None,
    warnings: list[str],
) -> str | None:
    if field.casefold() not in folded:
        return from_requirements
    key = _key(folded, field)
    value = ctx.str(o, key, f"{path}.{key}")
    if value is None:
        return from_requirements
    if from_requirements is not None and from_requirements != value:
        ctx.problem(
            f"{path}.{key}",
            f"{value!r} contradicts the offering's {label} requirement {from_requirements!r}",
        )
        return from_requirements
    warnings.append(
        f"{ctx.where()}: {path}.{key}: legacy key read as the requirement {label} In "
        f"[{value}] (Karpenter's KWOK provider reads zone and capacity type only from "
        "an offering's Requirements and ignores this key)"
    )
    return value


def convert_kwok_instance_type(ctx: Context, obj: dict, warnings: list[str]) -> dict:
    """A KWOK instance type as the equivalent InstanceType document; every problem is
    reported here, with the paths of the user's file."""
    top = _fold(obj)
    offerings = []
    offerings_key = _key(top, "offerings")
    for p, o in ctx.items(obj, offerings_key, offerings_key, required=True):
        f = _fold(o)
        req_key = _key(f, "Requirements")
        reqs = ctx.node_selector_requirements(o, req_key, f"{p}.{req_key}")
        zone = _legacy_key(ctx, o, f, "Zone", LABEL_ZONE, p, _in_value(reqs, LABEL_ZONE), warnings)
        capacity_type = _legacy_key(
            ctx,
            o,
            f,
            "CapacityType",
            LABEL_CAPACITY_TYPE,
            p,
            _in_value(reqs, LABEL_CAPACITY_TYPE),
            warnings,
        )
        if not zone:
            ctx.problem(p, f"no zone ({LABEL_ZONE} requirement or zone)")
        if not capacity_type:
            ctx.problem(p, f"no capacity type ({LABEL_CAPACITY_TYPE} requirement or capacityType)")
        extra = [r for r in reqs if r.get("key") not in (LABEL_ZONE, LABEL_CAPACITY_TYPE)]
        price_key, available_key = _key(f, "Price"), _key(f, "Available")
        offering = {
            "zone": zone or "",
            "capacityType": capacity_type or "",
            "price": ctx.number(o, price_key, f"{p}.{price_key}"),
            "available": ctx.bool(o, available_key, f"{p}.{available_key}", default=True),
        }
        if extra:
            offering["requirements"] = extra
        offerings.append(offering)
    requirements = []
    arch_key = _key(top, "architecture")
    arch = ctx.str(obj, arch_key, arch_key)
    if arch:
        requirements.append({"key": LABEL_ARCH, "operator": "In", "values": [arch]})
    os_key = _key(top, "operatingSystems")
    systems = ctx.strings(obj, os_key, os_key)
    if systems:
        requirements.append({"key": LABEL_OS, "operator": "In", "values": list(systems)})
    resources_key = _key(top, "resources")
    capacity = ctx.quantity_map(obj, resources_key, resources_key)
    return {
        "apiVersion": INSTANCE_TYPE_API_VERSION,
        "kind": "InstanceType",
        "metadata": {"name": ctx.name},
        "spec": {
            "capacity": {k: obj[resources_key][k] for k in capacity},
            "requirements": requirements,
            "offerings": offerings,
        },
    }
