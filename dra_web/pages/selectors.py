"""Reads the pages need beyond the snapshots and runs selectors (read-only, no writes).

The typed snapshot is parsed once per process and snapshot (snapshots are immutable), so a run
page that shows intents, template slices and pool devices pays the parse once.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import yaml

from allocator.edits import EditError, index_documents, patch_between
from dra_web.pages import presenters
from dra_web.runs import selectors as run_selectors
from dra_web.snapshots.services import load_snapshot

_CACHE_SIZE = 6
_lock = threading.Lock()
_models: OrderedDict[tuple[int, str], Any] = OrderedDict()
_specs: OrderedDict[tuple[int, str], Any] = OrderedDict()


def _remember(cache: OrderedDict, key, build, kept: int = _CACHE_SIZE):
    """``cache[key]``, built the first time; the ``kept`` most recently used entries stay."""
    with _lock:
        if key in cache:
            cache.move_to_end(key)
            return cache[key]
    value = build()
    with _lock:
        cache[key] = value
        while len(cache) > kept:
            cache.popitem(last=False)
    return value


def snapshot_model(snapshot):
    """The snapshot as ``allocator.model.Snapshot``; None when it no longer loads."""

    def build():
        try:
            return load_snapshot(snapshot)
        except Exception:  # a stored snapshot that the current loader rejects: show raw only
            return None

    # Keyed by content too: a database reset (tests) may reuse ids for other snapshots.
    return _remember(_models, (snapshot.pk, snapshot.content_hash), build)


def node_names(snapshot) -> list[str]:
    """The snapshot's nodes, sorted (what a run may disrupt); none when it no longer loads."""
    model = snapshot_model(snapshot)
    return sorted(model.nodes) if model is not None else []


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


def snapshot_claim_specs(snapshot) -> dict[str, Any]:
    """``claim_specs`` of a stored snapshot, once per process and snapshot: from the typed
    snapshot's documents when it loads (no second decompress and decode of the stored
    documents: most of a warm run page's time on a 1,000-node cluster), else the stored ones."""

    def build():
        model = snapshot_model(snapshot)
        return claim_specs(model.documents if model is not None else snapshot.documents())

    return _remember(_specs, (snapshot.pk, snapshot.content_hash), build)


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
            from allocator.features.extendedresources import CLAIM_SUFFIX, intent_devices

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
        "selectors": presenters.selector_texts(body.get("selectors")),
        "allocationMode": mode,
        "count": body.get("count", 1) if mode == "ExactCount" else "all",
        "adminAccess": bool(body.get("adminAccess")),
        "tolerations": body.get("tolerations") or [],
        "capacity": (body.get("capacity") or {}).get("requests") or {},
    }


# --- devices: template slices and pools ----------------------------------------------------


def template_slices(model, instance_type: str) -> list[dict[str, Any]]:
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
                "devices": [_device_view(d) for d in template.devices],
                "sharedCounters": [
                    {"name": cs.name, "counters": {k: str(q) for k, q in cs.counters.items()}}
                    for cs in template.shared_counters
                ],
            }
        )
    return out


def _device_view(device) -> dict[str, Any]:
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


def pool_view(model, driver: str, pool: str) -> dict[str, Any]:
    """An in-cluster pool's newest generation: its devices (with their slice), how many
    slices were seen, and which nodes can reach it."""
    empty = {"devices": [], "slicesSeen": 0, "access": ""}
    if model is None:
        return empty
    slices = pool_slices(model, driver, pool)
    if not slices:
        return empty
    newest = max(s.generation for s in slices)
    current = sorted((s for s in slices if s.generation == newest), key=lambda s: s.name)
    devices = [{"slice": s.name, **_device_view(d)} for s in current for d in s.devices]
    nodes = sorted({s.node_name for s in current if s.node_name})
    if nodes:
        access = "node " + ", ".join(nodes)
    elif any(s.node_selector for s in current):
        access = "node selector"
    elif any(s.all_nodes for s in current):
        access = "all nodes"
    elif any(s.per_device_node_selection for s in current):
        access = "per device"
    else:
        access = "—"
    return {"devices": devices, "slicesSeen": len(current), "access": access}


def pool_summary(model, driver: str, pool: str) -> dict[str, Any]:
    """What a pool's row shows without its devices: how many, slices seen, which nodes."""
    view = pool_view(model, driver, pool)
    return {
        "device_count": len(view["devices"]),
        "slices_seen": view["slicesSeen"],
        "access": view["access"],
    }


def _find_device(slices, driver: str, pool: str, device: str):
    """The named device in any of ``slices`` (slices or templates) of that driver and pool."""
    for s in slices:
        if s.driver == driver and s.pool == pool:
            for d in s.devices:
                if d.name == device:
                    return d
    return None


def device_info(model, driver: str, pool: str, device: str) -> dict[str, Any] | None:
    """A device tried by the DFS: in-cluster first, then instance type templates."""
    if model is None:
        return None
    found = _find_device(model.resource_slices, driver, pool, device)
    if found is not None:
        return {"driver": driver, "pool": pool, "source": "in-cluster", **_device_view(found)}
    for it in model.instance_types.values():
        found = _find_device(it.resource_slice_templates, driver, pool, device)
        if found is not None:
            return {
                "driver": driver,
                "pool": pool,
                "source": "template",
                "instanceType": it.name,
                **_device_view(found),
            }
    return None


# --- a search tree node with what the snapshot says about it ---------------------------------


def trace_node_detail(run, node_id: int) -> dict[str, Any] | None:
    """A trace node with its path, the device it tried (from the snapshot) and what its claim
    asked for (the claim is the node itself or an ancestor)."""
    node = run_selectors.trace_node(run, node_id)
    if node is None:
        return None
    if node.get("driver") and node.get("pool") and node.get("device"):
        model = snapshot_model(run.snapshot)
        node["device_info"] = device_info(model, node["driver"], node["pool"], node["device"])
    chain = [*node.get("path", []), node]
    claim = next((n for n in reversed(chain) if n.get("kind") == "claim"), None)
    pod = next((n for n in chain if n.get("kind") == "pod"), None)
    if claim and pod:
        intent = claim_intent(snapshot_claim_specs(run.snapshot), pod["label"], claim["label"])
        if intent["found"]:
            node["intent"] = {"claim": claim["label"], **intent}
    return node


# --- NodeClaims, downloads and indexes ---------------------------------------------------------


def node_pool_requirements(model, node_pool: str | None) -> list[dict]:
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


def node_pool_documents(snapshot) -> dict[str, dict]:
    """The snapshot's NodePools as uploaded, by name (for the NodeClaim manifests)."""
    model = snapshot_model(snapshot)
    if model is not None:
        return {name: np.raw for name, np in model.node_pools.items()}
    return {
        (raw.get("metadata") or {}).get("name"): raw
        for kind, raw in snapshot.documents()
        if kind == "NodePool"
    }


def node_claim_requests(snapshot, result: dict) -> dict[str, dict[str, str]]:
    """Per new NodeClaim of a result: its ``spec.resources.requests`` as Karpenter sets them,
    the requests of the pods placed on it (a ``pods`` slot each, RequestsForPods) plus the
    DaemonSet overhead it is launched with (the least of its instance types' overhead groups,
    Karpenter's addDaemonRequests); quantities canonical. Empty when the snapshot no longer
    loads."""
    from allocator.scheduling.daemonsets import DaemonPods, daemon_pods, overhead_groups
    from allocator.scheduling.fit import (
        add_into,
        format_quantity,
        instance_type_info,
        node_pool_requirements,
    )
    from allocator.scheduling.fit import pod_requests as requests_of
    from allocator.scheduling.nodeclaim import least_overhead

    model = snapshot_model(snapshot)
    if model is None:
        return {}
    pods = {f"{p.namespace}/{p.name}": p for p in model.pods}
    daemons = None
    out: dict[str, dict[str, str]] = {}
    for nc in result.get("nodeClaims") or []:
        total: dict[str, int] = {}
        for key in nc.get("pods") or []:
            if key in pods:
                add_into(total, requests_of(pods[key]))
        pool = model.node_pools.get(nc.get("nodePool"))
        if pool is not None:
            if daemons is None:
                daemons = daemon_pods(model.daemon_sets, model.pods)
            names = [n for n in nc.get("instanceTypes") or [] if n in model.instance_types]
            infos = [instance_type_info(model.instance_types[n]) for n in names]
            groups = overhead_groups(
                DaemonPods(daemons), node_pool_requirements(pool), pool.taints, infos
            )
            add_into(total, least_overhead(groups, names))
        out[nc.get("name")] = {
            name: format_quantity(name, value) for name, value in sorted(total.items()) if value
        }
    return out


_pool_indexes: OrderedDict[int, dict] = OrderedDict()


def pool_slices(model, driver: str, pool: str) -> list:
    """The ResourceSlices of one pool, from an index built once per snapshot model (a page of
    pools on a 1,000-node cluster must not scan every slice per pool)."""
    if model is None:
        return []

    def build():
        index: dict[tuple[str, str], list] = {}
        for s in model.resource_slices:
            index.setdefault((s.driver, s.pool), []).append(s)
        return model, index

    owner, index = _remember(_pool_indexes, id(model), build)
    if owner is not model:  # an id reused after the model it indexed was dropped
        with _lock:
            _pool_indexes.pop(id(model), None)
        owner, index = _remember(_pool_indexes, id(model), build)
    return index.get((driver, pool), [])


_reason_group_cache: OrderedDict[tuple, tuple] = OrderedDict()
_REASON_GROUPS_KEPT = 2000


def pod_reason_groups(run, pod: dict, node_claims) -> tuple[list[dict], int]:
    """A failed pod's ``reasons`` grouped (presenters.reason_groups) and the targets they
    stand for, kept per process: a finished run never changes, and grouping a pod refused by
    thousands of nodes is the costliest part of its run page."""
    reasons = pod.get("reasons") or []

    def build() -> tuple[list[dict], int]:
        return presenters.reason_groups(reasons, node_claims), presenters.target_count(reasons)

    key = (run.pk, str(run.finished_at), pod.get("pod"))
    return _remember(_reason_group_cache, key, build, kept=_REASON_GROUPS_KEPT)


def object_patch(snapshot, ref: str, text: str) -> list[dict]:
    """The JSON patch from the snapshot's object ``ref`` ("Kind ns/name") to ``text`` (its
    edited YAML, managedFields left out as the page shows it). ValueError names what is wrong."""
    stored = index_documents(snapshot.documents()).get(ref)
    if stored is None:
        raise ValueError(f"{ref or 'object'}: not in the snapshot")
    try:
        edited = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"{ref}: the edited YAML does not parse: {exc}") from None
    before = presenters.without_managed_fields(stored[1])
    try:
        patch = patch_between(before, edited)
    except EditError as exc:
        raise ValueError(f"{ref}: {exc}") from None
    if not patch:
        raise ValueError(f"{ref}: nothing was changed")
    return patch
