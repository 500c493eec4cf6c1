"""Reads the pages need beyond the snapshots and runs selectors (read-only, no writes).

The typed snapshot is parsed once per process and snapshot (snapshots are immutable), so a run
page that shows intents, template slices and pool devices pays the parse once.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from allocator.trace import parse_new_nodeclaim_label

_CACHE_SIZE = 6
_lock = threading.Lock()
_models: OrderedDict[tuple[int, str], Any] = OrderedDict()
_reason_counts: OrderedDict[tuple[int, str], list] = OrderedDict()


def _remember(cache: OrderedDict, key, build):
    with _lock:
        if key in cache:
            cache.move_to_end(key)
            return cache[key]
    value = build()
    with _lock:
        cache[key] = value
        while len(cache) > _CACHE_SIZE:
            cache.popitem(last=False)
    return value


def snapshot_model(snapshot):
    """The snapshot as ``allocator.model.Snapshot``; None when it no longer loads."""
    from dra_web.snapshots.services import load_snapshot

    def build():
        try:
            return load_snapshot(snapshot)
        except Exception:  # a stored snapshot that the current loader rejects: show raw only
            return None

    # Keyed by content too: a database reset (tests) may reuse ids for other snapshots.
    return _remember(_models, (snapshot.pk, snapshot.content_hash), build)


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
        "selectors": [
            (s.get("cel") or {}).get("expression") or str(s) for s in body.get("selectors") or []
        ],
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


# --- the search tree -------------------------------------------------------------------------


def trace_overview(run, *, max_depth: int = 12, min_fraction: float = 1 / 2000) -> dict:
    """Icicle rectangles from the indexed trace rows, without reading the whole trace.

    A DFS records a node before its subtree, so a subtree's ids are contiguous and a node's
    horizontal offset in the icicle is simply its id."""
    from dra_web.runs.models import TraceNode

    total = run.trace_node_count or TraceNode.objects.filter(run=run).count()
    if not total:
        return {"total": 0, "depth": 0, "rects": []}
    threshold = max(0, int(total * min_fraction) - 1)
    rows = (
        TraceNode.objects.filter(run=run, descendants__gte=threshold, depth__lte=max_depth)
        .order_by("node_id")
        .values_list("node_id", "depth", "descendants", "status")
    )
    rects = [[nid, depth, nid, desc + 1, status] for nid, depth, desc, status in rows]
    deepest = max((r[1] for r in rects), default=0)
    return {"total": total, "depth": deepest + 1, "rects": rects}


def trace_reveal(run, node_id: int, page: int = 200) -> list[dict[str, Any]]:
    """For each node from the root to ``node_id``: its id, its index among its siblings, and
    the page of siblings around it, so that the tree opens the path in one round trip."""
    from dra_web.runs.models import TraceNode
    from dra_web.runs.selectors import trace_children

    chain = []
    current = TraceNode.objects.filter(run=run, node_id=node_id).values("node_id", "parent").first()
    while current is not None:
        chain.append(current)
        if current["parent"] is None:
            break
        current = (
            TraceNode.objects.filter(run=run, node_id=current["parent"])
            .values("node_id", "parent")
            .first()
        )
    chain.reverse()
    out = []
    for step in chain:
        siblings = TraceNode.objects.filter(run=run, parent=step["parent"])
        index = siblings.filter(node_id__lt=step["node_id"]).count()
        offset = max(0, index - page // 2)
        out.append(
            {
                "id": step["node_id"],
                "index": index,
                "page": {
                    "parent": step["parent"],
                    "offset": offset,
                    "total": siblings.count(),
                    "nodes": trace_children(run, step["parent"], offset=offset, limit=page),
                },
            }
        )
    return out


def trace_children_window(
    run, parent: int | None, *, offset: int = 0, limit: int = 200, expand: int = 0
) -> dict[str, Any]:
    """One page of a node's children (the roots for None) with their total, optionally with
    the successful paths below opened (``expand_ok_paths``)."""
    from dra_web.runs.models import TraceNode
    from dra_web.runs.selectors import trace_children

    total = TraceNode.objects.filter(run=run, parent=parent).count()
    nodes = trace_children(run, parent, offset=offset, limit=limit)
    if expand:
        expand_ok_paths(run, nodes, expand)
    if parent is None:
        passes = root_passes(run)
        for n in nodes:
            if n.get("kind") == "pod" and n["id"] in passes:
                n["pass"] = passes[n["id"]]
    return {"parent": parent, "offset": offset, "total": total, "nodes": nodes}


_passes: OrderedDict[tuple[int, str], dict[int, int]] = OrderedDict()


def root_passes(run) -> dict[int, int]:
    """The retry pass of each pod attempt at the root of the trace (the n-th attempt of a pod
    is in pass n: a pass tries every pod left once), for runs with more than one pass; {}
    otherwise."""
    from dra_web.runs.models import TraceNode

    def build():
        seen: dict[str, int] = {}
        out: dict[int, int] = {}
        rows = (
            TraceNode.objects.filter(run=run, parent=None, kind="pod")
            .order_by("node_id")
            .values_list("node_id", "label")
        )
        for node_id, label in rows.iterator():
            seen[label] = seen.get(label, 0) + 1
            out[node_id] = seen[label]
        return out if any(n > 1 for n in seen.values()) else {}

    return _remember(_passes, (run.pk, str(run.finished_at)), build)


def trace_search_page(run, q=None, *, reason=None, status=None, kind=None, limit=100) -> dict:
    """The first ``limit`` matches of a tree search, with their ancestors' labels and the
    total count."""
    from dra_web.runs.selectors import trace_search_queryset

    qs = trace_search_queryset(run, q, reason=reason, status=status, kind=kind)
    matches = [node.as_json() for node in qs[:limit]]
    total = len(matches) if len(matches) < limit else qs.count()
    return {"total": total, "results": with_ancestor_labels(run, matches)}


def trace_node_detail(run, node_id: int) -> dict[str, Any] | None:
    """A trace node with its path, the device it tried (from the snapshot) and what its claim
    asked for (the claim is the node itself or an ancestor)."""
    from dra_web.runs.selectors import trace_node

    node = trace_node(run, node_id)
    if node is None:
        return None
    if node.get("driver") and node.get("pool") and node.get("device"):
        model = snapshot_model(run.snapshot)
        node["device_info"] = device_info(model, node["driver"], node["pool"], node["device"])
    chain = [*node.get("path", []), node]
    claim = next((n for n in reversed(chain) if n.get("kind") == "claim"), None)
    pod = next((n for n in chain if n.get("kind") == "pod"), None)
    if claim and pod:
        intent = claim_intent(claim_specs(run.snapshot.documents()), pod["label"], claim["label"])
        if intent["found"]:
            node["intent"] = {"claim": claim["label"], **intent}
    return node


def with_ancestor_labels(run, nodes: list[dict]) -> list[dict]:
    """Add ``pathLabels`` (root first) to search results, one query per tree level."""
    from dra_web.runs.models import TraceNode

    known: dict[int, tuple[int | None, str, str]] = {
        n["id"]: (n.get("parent"), n.get("label") or "", n.get("status") or "") for n in nodes
    }
    wanted = {n.get("parent") for n in nodes} - {None} - set(known)
    while wanted:
        rows = TraceNode.objects.filter(run=run, node_id__in=wanted).values_list(
            "node_id", "parent", "label", "status"
        )
        for node_id, parent, label, status in rows:
            known[node_id] = (parent, label, status)
        wanted = {k[0] for k in known.values() if k[0] is not None and k[0] not in known}
        if not rows:
            break
    for n in nodes:
        labels, statuses = [], []
        parent = n.get("parent")
        while parent is not None and parent in known:
            parent, label, status = known[parent]
            labels.append(label)
            statuses.append(status)
        n["pathLabels"] = labels[::-1]
        # A new NodeClaim's attempt is named by the run's NodeClaim only where it succeeded.
        n["pathStatuses"] = statuses[::-1]
    return nodes


AUTO_EXPAND_DEPTH = 8


def expand_ok_paths(run, nodes: list[dict], budget: int, page: int = 200) -> None:
    """Open the successful paths below ``nodes`` in place (``node["expanded"]``: its first
    children), depth first so that the first placed pods show down to their devices, within
    ``budget`` nodes. Failed and pruned subtrees stay collapsed: the page shows them closed
    with their size."""

    def openable(n: dict) -> bool:
        return (
            n.get("status") == "ok"
            and bool(n.get("childCount"))
            and n.get("depth", 0) < AUTO_EXPAND_DEPTH
            and min(n["childCount"], page) <= budget
        )

    stack = [n for n in reversed(nodes) if openable(n)]
    while stack and budget > 0:
        n = stack.pop()
        if not openable(n):
            continue
        kids = trace_children_page(run, n["id"], page)
        n["expanded"] = kids
        budget -= len(kids)
        stack.extend(k for k in reversed(kids) if openable(k))


def trace_children_page(run, parent: int, limit: int) -> list[dict]:
    from dra_web.runs.selectors import trace_children

    return trace_children(run, parent, offset=0, limit=limit)


def trace_reason_counts(run) -> list[tuple[str, int]]:
    """How many non-ok trace nodes carry each reason (for the tree's filter), cached per run."""
    from django.db.models import Count

    from dra_web.runs.models import TraceNode

    def build():
        return list(
            TraceNode.objects.filter(run=run)
            .exclude(status="ok")
            .exclude(reason=None)
            .values_list("reason")
            .annotate(n=Count("id"))
            .order_by("-n", "reason")
        )

    return _remember(_reason_counts, (run.pk, str(run.finished_at)), build)


def _node_claim_of(label: str) -> str:
    parsed = parse_new_nodeclaim_label(label or "")
    if parsed:
        return parsed[1]
    return (label or "").removeprefix("nodeclaim/")


def instance_types_pruned(run, names: set[str]) -> dict[str, list[dict[str, Any]]]:
    """Per NodeClaim of this run: the instance types the DFS dropped while placing its pods,
    read from the trace (targets that placed a pod, instanceType children not ok), first
    reason kept."""
    from dra_web.runs.models import TraceNode

    # Results that carry ``instanceTypesPruned`` (allocator/scheduling/report.py) say it
    # exactly; the trace is read only for older results without it.
    reported = {
        nc.get("name")
        for nc in (run.result or {}).get("nodeClaims") or []
        if isinstance(nc, dict) and "instanceTypesPruned" in nc
    }
    names = set(names) - reported
    if not names or not run.trace_node_count:
        return {}
    targets = {}
    for node_id, label, parent in TraceNode.objects.filter(
        run=run, kind="target", status="ok"
    ).values_list("node_id", "label", "parent"):
        name = _node_claim_of(label)
        if name in names:
            targets[node_id] = (name, parent)
    if not targets:
        return {}
    pods = dict(
        TraceNode.objects.filter(
            run=run, node_id__in={p for _, p in targets.values() if p is not None}
        ).values_list("node_id", "label")
    )
    out: dict[str, list[dict[str, Any]]] = {}
    seen: set[tuple[str, str]] = set()
    rows = (
        TraceNode.objects.filter(run=run, kind="instanceType", parent__in=list(targets))
        .exclude(status="ok")
        .order_by("node_id")
        .values_list("parent", "label", "reason", "message")
    )
    for parent, label, reason, message in rows:
        name, pod_id = targets[parent]
        if (name, label) in seen:
            continue
        seen.add((name, label))
        out.setdefault(name, []).append(
            {
                "name": label,
                "reason": message or reason or "",
                "pod": pods.get(pod_id),
            }
        )
    return out


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


# --- downloads and indexes ----------------------------------------------------------------------


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
    DaemonSet overhead of its NodePool; quantities canonical. Empty when the snapshot no
    longer loads."""
    from allocator.scheduling.fit import add_into, format_quantity, node_pool_requirements
    from allocator.scheduling.fit import pod_requests as requests_of
    from allocator.scheduling.nodeclaimtemplate import daemon_overhead, daemonset_pods

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
                daemons = daemonset_pods(model.pods)
            add_into(total, daemon_overhead(daemons, node_pool_requirements(pool), pool.taints))
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


def result_json_bytes(run) -> bytes:
    import json

    return json.dumps(run.result, indent=2, ensure_ascii=False).encode("utf-8")


def trace_json_bytes(run) -> bytes:
    import zlib

    return b"null" if run.trace_blob is None else zlib.decompress(bytes(run.trace_blob))


_reason_group_cache: OrderedDict[tuple, tuple] = OrderedDict()
_REASON_GROUPS_KEPT = 2000


def pod_reason_groups(run, pod: dict, node_claims) -> tuple[list[dict], int]:
    """A failed pod's ``reasons`` grouped (presenters.reason_groups) and the targets they
    stand for, kept per process: a finished run never changes, and grouping a pod refused by
    thousands of nodes is the costliest part of its run page."""
    from dra_web.pages import presenters

    key = (run.pk, str(run.finished_at), pod.get("pod"))
    with _lock:
        if key in _reason_group_cache:
            _reason_group_cache.move_to_end(key)
            return _reason_group_cache[key]
    reasons = pod.get("reasons") or []
    value = (presenters.reason_groups(reasons, node_claims), presenters.target_count(reasons))
    with _lock:
        _reason_group_cache[key] = value
        while len(_reason_group_cache) > _REASON_GROUPS_KEPT:
            _reason_group_cache.popitem(last=False)
    return value
