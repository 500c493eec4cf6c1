"""core/v1 kinds: Namespace, Node, Pod (requests computed as kube-scheduler does)."""

from __future__ import annotations

from allocator.model import Namespace, Node, Pod, PodResourceClaim, Taint, Toleration
from allocator.quantity import Quantity
from allocator.snapshot import affinity
from allocator.snapshot.fields import Context
from allocator.snapshot.provisioning import (
    read_conditions,
    read_host_ports,
    read_owner_references,
    read_scheduling_gates,
    read_volumes,
)

_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def read_taints(ctx: Context, d: dict, key: str, path: str) -> list[Taint]:
    out = []
    for p, t in ctx.items(d, key, path):
        effect = ctx.str(t, "effect", f"{p}.effect", required=True) or "NoSchedule"
        if effect not in _TAINT_EFFECTS:
            ctx.problem(f"{p}.effect", f"must be one of {', '.join(_TAINT_EFFECTS)}")
        out.append(
            Taint(
                key=ctx.str(t, "key", f"{p}.key", required=True) or "",
                value=ctx.str(t, "value", f"{p}.value"),
                effect=effect,
            )
        )
    return out


def read_tolerations(ctx: Context, d: dict, path: str) -> list[Toleration]:
    out = []
    for p, t in ctx.items(d, "tolerations", path):
        operator = ctx.str(t, "operator", f"{p}.operator") or "Equal"
        if operator not in ("Equal", "Exists"):
            ctx.problem(f"{p}.operator", "must be Equal or Exists")
        effect = ctx.str(t, "effect", f"{p}.effect") or None
        if effect is not None and effect not in _TAINT_EFFECTS:
            ctx.problem(f"{p}.effect", f"must be one of {', '.join(_TAINT_EFFECTS)}")
        out.append(
            Toleration(
                key=ctx.str(t, "key", f"{p}.key") or None,
                operator=operator,
                value=ctx.str(t, "value", f"{p}.value"),
                effect=effect,
                toleration_seconds=ctx.int(t, "tolerationSeconds", f"{p}.tolerationSeconds"),
            )
        )
    return out


def _metadata(obj: dict) -> dict:
    md = obj.get("metadata")
    return md if isinstance(md, dict) else {}


def build_namespace(ctx: Context, obj: dict) -> Namespace:
    return Namespace(
        name=ctx.name or "",
        labels=ctx.string_map(_metadata(obj), "labels", "metadata.labels"),
        raw=obj,
    )


def build_node(ctx: Context, obj: dict) -> Node:
    md = _metadata(obj)
    spec = ctx.map(obj, "spec", "spec")
    status = ctx.map(obj, "status", "status")
    declared = None
    if status.get("declaredFeatures") is not None:
        declared = ctx.strings(status, "declaredFeatures", "status.declaredFeatures")
    return Node(
        name=ctx.name or "",
        labels=ctx.string_map(md, "labels", "metadata.labels"),
        annotations=ctx.string_map(md, "annotations", "metadata.annotations"),
        allocatable=ctx.quantity_map(status, "allocatable", "status.allocatable"),
        taints=read_taints(ctx, spec, "taints", "spec.taints"),
        deleting=md.get("deletionTimestamp") is not None,
        unschedulable=ctx.bool(spec, "unschedulable", "spec.unschedulable"),
        declared_features=declared,
        raw=obj,
    )


# --- pod requests ------------------------------------------------------------------------------


def _container_requests(ctx: Context, c: dict, path: str) -> dict[str, Quantity]:
    resources = ctx.map(c, "resources", f"{path}.resources")
    # resources.claims names the pod's claims a container uses (DRANodeAllocatableResources
    # counts per-container overhead from it).
    for p, claim in ctx.items(resources, "claims", f"{path}.resources.claims"):
        ctx.str(claim, "name", f"{p}.name", required=True)
        ctx.str(claim, "request", f"{p}.request")
    requests = ctx.quantity_map(resources, "requests", f"{path}.resources.requests")
    limits = ctx.quantity_map(resources, "limits", f"{path}.resources.limits")
    # API defaulting: a limit without a request is the request.
    for name, q in limits.items():
        requests.setdefault(name, q)
    return requests


def _add(into: dict[str, Quantity], more: dict[str, Quantity]) -> None:
    for k, v in more.items():
        into[k] = into[k] + v if k in into else v


def _max(into: dict[str, Quantity], more: dict[str, Quantity]) -> None:
    for k, v in more.items():
        if k not in into or v > into[k]:
            into[k] = v


def pod_requests(ctx: Context, spec: dict) -> tuple[dict[str, Quantity], int]:
    """Effective pod requests (k8s resourcehelper.PodRequests) and the container count.

    Sum of containers; restartable init containers (sidecars, restartPolicy Always) add to
    that sum and to every later init container's peak; the result is the max of the sum and
    the init peak; pod-level ``spec.resources.requests`` replace the aggregate for the
    resources they name; ``spec.overhead`` is added last.
    """
    total: dict[str, Quantity] = {}
    containers = ctx.items(spec, "containers", "spec.containers")
    for p, c in containers:
        _add(total, _container_requests(ctx, c, p))
    sidecars: dict[str, Quantity] = {}
    init_peak: dict[str, Quantity] = {}
    for p, c in ctx.items(spec, "initContainers", "spec.initContainers"):
        reqs = _container_requests(ctx, c, p)
        if c.get("restartPolicy") == "Always":
            _add(total, reqs)
            _add(sidecars, reqs)
            current = dict(sidecars)
        else:
            current = dict(reqs)
            _add(current, sidecars)
        _max(init_peak, current)
    _max(total, init_peak)
    pod_level = ctx.map(spec, "resources", "spec.resources")
    total.update(ctx.quantity_map(pod_level, "requests", "spec.resources.requests"))
    _add(total, ctx.quantity_map(spec, "overhead", "spec.overhead"))
    return total, len(containers)


def _required_affinity(ctx: Context, spec: dict) -> dict | None:
    affinity = ctx.map(spec, "affinity", "spec.affinity")
    node_affinity = ctx.map(affinity, "nodeAffinity", "spec.affinity.nodeAffinity")
    key = "requiredDuringSchedulingIgnoredDuringExecution"
    return ctx.node_selector(node_affinity, key, f"spec.affinity.nodeAffinity.{key}")


def build_pod(ctx: Context, obj: dict) -> Pod:
    md = _metadata(obj)
    spec = ctx.map(obj, "spec", "spec", required=True)
    status = ctx.map(obj, "status", "status")
    requests, container_count = pod_requests(ctx, spec)
    claims = []
    for p, c in ctx.items(spec, "resourceClaims", "spec.resourceClaims"):
        name = ctx.str(c, "name", f"{p}.name", required=True) or ""
        direct = ctx.str(c, "resourceClaimName", f"{p}.resourceClaimName")
        template = ctx.str(c, "resourceClaimTemplateName", f"{p}.resourceClaimTemplateName")
        if (direct is None) == (template is None):
            ctx.problem(p, "exactly one of resourceClaimName or resourceClaimTemplateName")
        claims.append(PodResourceClaim(name, direct, template))
    statuses: dict[str, str | None] = {}
    for p, s in ctx.items(status, "resourceClaimStatuses", "status.resourceClaimStatuses"):
        name = ctx.str(s, "name", f"{p}.name", required=True)
        if name is not None:
            # A null resourceClaimName means no claim is needed for this entry.
            statuses[name] = ctx.str(s, "resourceClaimName", f"{p}.resourceClaimName")
    refs = md.get("ownerReferences")  # its shape is checked with the metadata
    owners = tuple(
        ref["kind"]
        for ref in (refs if isinstance(refs, list) else ())
        if isinstance(ref, dict) and isinstance(ref.get("kind"), str)
    )
    return Pod(
        namespace=ctx.namespace or "default",
        name=ctx.name or "",
        uid=md.get("uid") if isinstance(md.get("uid"), str) else "",
        node_name=ctx.str(spec, "nodeName", "spec.nodeName") or None,
        creation_timestamp=md.get("creationTimestamp")
        if isinstance(md.get("creationTimestamp"), str)
        else "",
        deleting=md.get("deletionTimestamp") is not None,
        owner_kinds=owners,
        requests=requests,
        container_count=container_count,
        node_selector=ctx.string_map(spec, "nodeSelector", "spec.nodeSelector"),
        required_node_affinity=_required_affinity(ctx, spec),
        tolerations=read_tolerations(ctx, spec, "spec.tolerations"),
        resource_claims=claims,
        resource_claim_statuses=statuses,
        phase=status.get("phase") if isinstance(status.get("phase"), str) else None,
        # volumes, host ports, and what decides whether Karpenter provisions for the pod
        volumes=read_volumes(ctx, spec, ctx.name or ""),
        host_ports=read_host_ports(ctx, spec, "containers", "spec.containers"),
        init_host_ports=read_host_ports(ctx, spec, "initContainers", "spec.initContainers"),
        scheduling_gates=read_scheduling_gates(ctx, spec),
        nominated_node_name=ctx.str(status, "nominatedNodeName", "status.nominatedNodeName")
        or None,
        has_status=isinstance(obj.get("status"), dict),
        conditions=read_conditions(ctx, status),
        owner_references=read_owner_references(md),
        # --- topology (scheduling/topology.py)
        labels=ctx.string_map(md, "labels", "metadata.labels"),
        pod_affinity=affinity.read_pod_affinity(ctx, spec, "podAffinity"),
        pod_anti_affinity=affinity.read_pod_affinity(ctx, spec, "podAntiAffinity"),
        preferred_node_affinity=affinity.read_preferred_node_affinity(ctx, spec),
        topology_spread_constraints=affinity.read_spread_constraints(ctx, spec),
        # --- end topology
        raw=obj,
    )
