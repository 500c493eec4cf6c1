"""What a finished run's page shows from its snapshot beyond the result document, derived once
when the run is stored: a page view reads these few facts instead of building the typed
snapshot (about a second on a 1,000-node cluster, on every first view of a run).

Pure: from the typed snapshot (``allocator.model.Snapshot``, None when it no longer loads) and
the result document. Bounded by what the result names: the offerings, device templates and
NodePool requirements of its NodeClaims, one summary per pool of the result, and one intent
per distinct claim spec (each pod's claims point at one).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from allocator.features.extendedresources import CLAIM_SUFFIX, intent_devices
from allocator.model import Device, Offering, ResourceSlice, Snapshot

EMPTY_POOL = {"device_count": 0, "slices_seen": 0, "access": ""}
# What ``claim_intent`` says of a claim the snapshot does not hold.
INTENT_NOT_FOUND = {"source": "ResourceClaim", "requests": [], "constraints": [], "found": False}


@dataclass(frozen=True, slots=True)
class PageFacts:
    """The snapshot facts of one run's page (see the module's docstring)."""

    # Instance type -> its offerings, for every instance type a NodeClaim of the result lists.
    offerings: dict[str, tuple[Offering, ...]] = field(default_factory=dict)
    # Instance type -> the slices a node of it publishes, for NodeClaims whose result entry
    # carries no ``templateSlices`` (results written before the scheduler reported them).
    template_slices: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # NodePool -> its template's requirements (node_pool_requirements), for the NodeClaims'.
    node_pool_requirements: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # Driver -> pool -> what the pool's row shows without its devices (pool_summary).
    pools: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    # The distinct claim intents, and per pod and claim of the result the index of its own.
    intents: list[dict[str, Any]] = field(default_factory=list)
    claim_intents: dict[str, dict[str, int]] = field(default_factory=dict)

    def pool_summary(self, driver: str | None, pool: str | None) -> dict[str, Any]:
        return (self.pools.get(driver or "") or {}).get(pool or "") or dict(EMPTY_POOL)

    def intent(self, pod: str, claim: str) -> dict[str, Any]:
        index = (self.claim_intents.get(pod) or {}).get(claim)
        return self.intents[index] if index is not None else dict(INTENT_NOT_FOUND)

    def to_json(self) -> dict[str, Any]:
        return {
            "offerings": {
                name: [[o.zone, o.capacity_type, o.price, o.available] for o in offerings]
                for name, offerings in self.offerings.items()
            },
            "templateSlices": self.template_slices,
            "nodePoolRequirements": self.node_pool_requirements,
            "pools": self.pools,
            "intents": self.intents,
            "claimIntents": self.claim_intents,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PageFacts:
        return cls(
            offerings={
                name: tuple(
                    Offering(zone=z, capacity_type=c, price=p, available=a) for z, c, p, a in rows
                )
                for name, rows in (data.get("offerings") or {}).items()
            },
            template_slices=data.get("templateSlices") or {},
            node_pool_requirements=data.get("nodePoolRequirements") or {},
            pools=data.get("pools") or {},
            intents=data.get("intents") or [],
            claim_intents=data.get("claimIntents") or {},
        )


def derive(model: Snapshot | None, result: Mapping[str, Any]) -> PageFacts:
    """The facts of the page of ``result``, simulated from ``model``."""
    if model is None:
        return PageFacts()
    node_claims = result.get("nodeClaims") or []
    instance_types = {n for nc in node_claims for n in nc.get("instanceTypes") or []}
    untemplated = {
        n for nc in node_claims if "templateSlices" not in nc for n in nc.get("instanceTypes") or []
    }
    node_pools = {nc.get("nodePool") for nc in node_claims if nc.get("nodePool")}
    intents, claim_intents = _claim_intents(claim_specs(model.documents), result.get("pods") or [])
    return PageFacts(
        offerings={
            n: tuple(
                Offering(
                    zone=o.zone, capacity_type=o.capacity_type, price=o.price, available=o.available
                )
                for o in model.instance_types[n].offerings
            )
            for n in sorted(instance_types)
            if n in model.instance_types
        },
        template_slices={n: template_slices(model, n) for n in sorted(untemplated)},
        node_pool_requirements={p: node_pool_requirements(model, p) for p in sorted(node_pools)},
        pools=_pool_summaries(model.resource_slices, result.get("pools") or []),
        intents=intents,
        claim_intents=claim_intents,
    )


def _pool_summaries(
    slices: Iterable[ResourceSlice], pools: Iterable[Mapping[str, Any]]
) -> dict[str, dict[str, dict[str, Any]]]:
    wanted = {(p.get("driver") or "", p.get("pool") or "") for p in pools}
    by_pool: dict[tuple[str, str], list[ResourceSlice]] = {}
    for s in slices:
        if (s.driver, s.pool) in wanted:
            by_pool.setdefault((s.driver, s.pool), []).append(s)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for (driver, pool), found in sorted(by_pool.items()):
        current = newest_slices(found)
        out.setdefault(driver, {})[pool] = {
            "device_count": sum(len(s.devices) for s in current),
            "slices_seen": len(current),
            "access": pool_access(current),
        }
    return out


def _claim_intents(
    specs: dict[str, Any], pods: Iterable[Mapping[str, Any]]
) -> tuple[list[dict[str, Any]], dict[str, dict[str, int]]]:
    """The distinct intents of the pods' claims, and per pod and claim the index of its own."""
    intents: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    by_pod: dict[str, dict[str, int]] = {}
    for pod in pods:
        key = pod.get("pod") or ""
        for claim in pod.get("claims") or []:
            name = claim.get("claim") or ""
            intent = claim_intent(specs, key, name)
            text = json.dumps(intent, sort_keys=True, default=str)
            if text not in seen:
                seen[text] = len(intents)
                intents.append(intent)
            by_pod.setdefault(key, {})[name] = seen[text]
    return intents, by_pod


# --- claims: the intent beside the decision ------------------------------------------------


def _docs(snapshot_documents: list[tuple[str, dict]], kind: str) -> dict[str, dict]:
    out = {}
    for k, raw in snapshot_documents:
        if k != kind:
            continue
        meta = raw.get("metadata") or {}
        out[f"{meta.get('namespace') or 'default'}/{meta.get('name')}"] = raw
    return out


def claim_specs(snapshot_documents: list[tuple[str, dict]]) -> dict[str, Any]:
    """Lookup tables to find the spec behind any claim key of a result document."""
    return {
        "claims": _docs(snapshot_documents, "ResourceClaim"),
        "templates": _docs(snapshot_documents, "ResourceClaimTemplate"),
        "pods": _docs(snapshot_documents, "Pod"),
        "deviceClasses": [raw for k, raw in snapshot_documents if k == "DeviceClass"],
    }


def claim_intent(specs: dict[str, Any], pod_key: str, claim_key: str) -> dict[str, Any]:
    """The requests and constraints a claim asked for, from the claim or its template."""
    source = "ResourceClaim"
    raw = specs["claims"].get(claim_key)
    devices = ((raw or {}).get("spec") or {}).get("devices")
    if raw is None:
        pod = specs["pods"].get(pod_key) or {}
        namespace = pod_key.partition("/")[0]
        pod_name = pod_key.partition("/")[2]
        claim_name = claim_key.partition("/")[2]
        statuses = {
            s.get("name"): s.get("resourceClaimName")
            for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
        }
        for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
            template = entry.get("resourceClaimTemplateName")
            if not template:
                continue
            generated = statuses.get(entry.get("name")) or f"{pod_name}-{entry.get('name')}"
            if generated == claim_name:
                traw = specs["templates"].get(f"{namespace}/{template}") or {}
                devices = (((traw.get("spec") or {}).get("spec")) or {}).get("devices")
                source = f"ResourceClaimTemplate {template}"
                break
        else:
            if claim_name == pod_name + CLAIM_SUFFIX:
                # DRAExtendedResource: the claim the scheduler makes for extended resources.
                devices = intent_devices(pod, specs.get("deviceClasses") or ())
                source = "the pod's extended resources (made by the scheduler)"
    devices = devices or {}
    requests = []
    for req in devices.get("requests") or []:
        if req.get("exactly") is not None or req.get("firstAvailable") is None:
            body = req.get("exactly") or {k: v for k, v in req.items() if k != "name"}
            requests.append({"name": req.get("name"), **_request_body(body), "subrequests": []})
        else:
            subs = [
                {"name": f"{req.get('name')}/{s.get('name')}", **_request_body(s)}
                for s in req.get("firstAvailable") or []
            ]
            requests.append({"name": req.get("name"), "firstAvailable": True, "subrequests": subs})
    constraints = []
    for c in devices.get("constraints") or []:
        kind = "matchAttribute" if c.get("matchAttribute") else "distinctAttribute"
        constraints.append(
            {
                "kind": kind,
                "attribute": c.get("matchAttribute") or c.get("distinctAttribute") or "",
                "requests": c.get("requests") or ["(all requests)"],
            }
        )
    return {
        "source": source,
        "requests": requests,
        "constraints": constraints,
        "found": bool(devices),
    }


def _request_body(body: dict) -> dict[str, Any]:
    mode = body.get("allocationMode") or "ExactCount"
    return {
        "deviceClassName": body.get("deviceClassName"),
        "selectors": selector_texts(body.get("selectors")),
        "allocationMode": mode,
        "count": body.get("count", 1) if mode == "ExactCount" else "all",
        "adminAccess": bool(body.get("adminAccess")),
        "tolerations": body.get("tolerations") or [],
        "capacity": (body.get("capacity") or {}).get("requests") or {},
    }


def selector_texts(selectors: list[dict[str, Any]] | None) -> list[str]:
    """Device selectors as their CEL expressions (any other kind of selector as it is)."""
    return [(s.get("cel") or {}).get("expression") or str(s) for s in selectors or []]


# --- devices: template slices and pools ----------------------------------------------------


def template_slices(model: Snapshot | None, instance_type: str) -> list[dict[str, Any]]:
    """The ResourceSlices a node of ``instance_type`` will publish, as raw-ish dicts."""
    if model is None or instance_type not in model.instance_types:
        return []
    it = model.instance_types[instance_type]
    out = []
    for template in it.resource_slice_templates:
        out.append(
            {
                "driver": template.driver,
                "pool": template.pool,
                "devices": [device_view(d) for d in template.devices],
                "sharedCounters": [
                    {"name": cs.name, "counters": {k: str(q) for k, q in cs.counters.items()}}
                    for cs in template.shared_counters
                ],
            }
        )
    return out


def device_view(device: Device) -> dict[str, Any]:
    return {
        "name": device.name,
        "attributes": {k: _attr(v) for k, v in device.attributes.items()},
        "capacity": {k: str(c.value) for k, c in device.capacity.items()},
        "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in device.taints],
        "consumesCounters": [
            {"counterSet": c.counter_set, "counters": {k: str(q) for k, q in c.counters.items()}}
            for c in device.consumes_counters
        ],
        "bindingConditions": list(device.binding_conditions),
        "bindsToNode": device.binds_to_node,
        "allowMultipleAllocations": device.allow_multiple_allocations,
    }


def _attr(value):
    if isinstance(value, tuple):
        return [_attr(v) for v in value]
    if isinstance(value, bool | int | str):
        return value
    return str(value)


def newest_slices(slices: Iterable[ResourceSlice]) -> list[ResourceSlice]:
    """A pool's slices of its newest generation, by name."""
    found = list(slices)
    newest = max((s.generation for s in found), default=0)
    return sorted((s for s in found if s.generation == newest), key=lambda s: s.name)


def pool_access(current: list[ResourceSlice]) -> str:
    """Which nodes can reach a pool, from its newest slices."""
    nodes = sorted({s.node_name for s in current if s.node_name})
    if nodes:
        return "node " + ", ".join(nodes)
    if any(s.node_selector for s in current):
        return "node selector"
    if any(s.all_nodes for s in current):
        return "all nodes"
    if any(s.per_device_node_selection for s in current):
        return "per device"
    return "—"


# --- NodePools ------------------------------------------------------------------------------


def node_pool_requirements(model: Snapshot | None, node_pool: str | None) -> list[dict]:
    """The NodePool template's requirements: what a NodeClaim starts from, before DRA."""
    if model is None or not node_pool or node_pool not in model.node_pools:
        return []
    reqs = model.node_pools[node_pool].requirements or []
    return sorted(
        (
            {
                "key": r.get("key"),
                "operator": r.get("operator"),
                "values": sorted(r.get("values") or []),
                **({"minValues": r["minValues"]} if r.get("minValues") else {}),
            }
            for r in reqs
        ),
        key=lambda r: r["key"] or "",
    )
