"""Scheduler Initialization (design section of that name, docs/SIMULATION.md).

Builds, once per run, what the allocator is constructed from: the in-cluster slice universe,
the allocated-device seed, the instance types each NodePool may launch (for attribute
bindings), and the ResourceClaims of pending pods, generating those that templates would create.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import field

from allocator.claims import reallocated
from allocator.model import (
    DeviceID,
    InstanceType,
    Node,
    Pod,
    PodResourceClaim,
    ResourceClaim,
    ResourceSlice,
    Snapshot,
)
from allocator.records import record
from allocator.scheduling.fit import (
    INITIALIZED,
    NODEPOOL,
    InstanceTypeInfo,
    instance_type_info,
    node_pool_requirements,
)


def managed_nodes(snapshot: Snapshot) -> set[str]:
    """Nodes Karpenter manages: a nodepool label, or a NodeClaim naming them."""
    names = {name for name, node in snapshot.nodes.items() if NODEPOOL in node.labels}
    names.update(nc.node_name for nc in snapshot.node_claims.values() if nc.node_name)
    return names


def is_initialized(node: Node, managed: set[str]) -> bool:
    return node.name not in managed or node.labels.get(INITIALIZED) == "true"


def slice_universe(
    slices: list[ResourceSlice], nodes: dict[str, Node], excluded_nodes: set[str]
) -> list[ResourceSlice]:
    """Slices minus those owned (ownerReferences Kind=Node) by excluded or absent nodes.

    ``spec.nodeName`` says where devices are reachable, not who owns the slice, so only the
    owner reference counts here (design: Scheduler Initialization, step 1).
    """
    return [
        s
        for s in slices
        if s.owner_node is None or (s.owner_node in nodes and s.owner_node not in excluded_nodes)
    ]


Predicates = Sequence[Callable[[ResourceClaim], bool]]


def allocated_device_seed(
    claims: dict[str, ResourceClaim], deleting_pods: set[str], reallocation: Predicates
) -> set[DeviceID]:
    """Devices of every allocated claim, minus those held only by deleting pods (or otherwise
    re-allocated, ``reallocation``: the pipeline's reallocation predicates)."""
    seed: set[DeviceID] = set()
    for claim in claims.values():
        if claim.allocation is None or reallocated(claim, deleting_pods, reallocation):
            continue
        # Shares of a multi-allocatable device (shareID set) never hold it exclusively (their
        # capacity is accounted by consumable capacity), and admin-access allocations do not
        # count as allocated at all, as in kube-scheduler.
        seed.update(
            d.device_id
            for d in claim.allocation.devices
            if d.share_id is None and not d.admin_access
        )
    return seed


def node_pool_instance_types(
    snapshot: Snapshot, infos_by_name: dict[str, InstanceTypeInfo] | None = None
) -> dict[str, list[InstanceTypeInfo]]:
    """Instance types each NodePool may launch: compatible with its template requirements.
    ``infos_by_name``: the run's (worked out once per run); by default worked out here."""
    if infos_by_name is None:
        infos_by_name = {n: instance_type_info(it) for n, it in snapshot.instance_types.items()}
    by_name = sorted(snapshot.instance_types.items(), key=lambda item: item[1].name)
    infos = [infos_by_name[key] for key, _ in by_name]
    out: dict[str, list[InstanceTypeInfo]] = {}
    for name, pool in sorted(snapshot.node_pools.items()):
        reqs = node_pool_requirements(pool)
        out[name] = [info for info in infos if reqs.intersects(info.requirements) is None]
    return out


def binding_instance_types(
    snapshot: Snapshot, per_pool: dict[str, list[InstanceTypeInfo]]
) -> dict[str, list[InstanceType]]:
    """AttributeBindings input: the NodePool's types plus those of its launched nodes."""
    out = {pool: [info.it for info in infos] for pool, infos in per_pool.items()}
    launched: list[tuple[str | None, str | None]] = [
        (node.labels.get(NODEPOOL), node.labels.get("node.kubernetes.io/instance-type"))
        for node in snapshot.nodes.values()
    ]
    launched += [(nc.node_pool, nc.instance_type) for nc in snapshot.node_claims.values()]
    names = {pool: {it.name for it in its} for pool, its in out.items()}
    for pool, it_name in launched:
        if not pool or not it_name or it_name not in snapshot.instance_types:
            continue
        known = names.setdefault(pool, set())
        if it_name not in known:
            known.add(it_name)
            out.setdefault(pool, []).append(snapshot.instance_types[it_name])
    return out


# --- claims of pods --------------------------------------------------------------------------


@record
class PodClaims:
    """A pod's ResourceClaims in ``spec.resourceClaims`` order, or why they cannot be had."""

    claims: list[ResourceClaim] = field(default_factory=list)
    error: str | None = None
    # DRAExtendedResource: the pod's extended resources a DeviceClass serves, whose claim is
    # the last of ``claims`` (features/extendedresources.py); None when it has none.
    extended: object | None = None


def resolve_pod_claims(
    pod: Pod, snapshot: Snapshot, generated: dict[str, ResourceClaim]
) -> PodClaims:
    """Find or generate each claim the pod references (docs/SNAPSHOT.md, Claims of pods).

    ``generated`` collects claims made from templates so that every pod naming the same one
    (a re-run, a retry pass) sees the same object.
    """
    out = PodClaims()
    for entry in pod.resource_claims:
        if entry.resource_claim_name:
            key = f"{pod.namespace}/{entry.resource_claim_name}"
            claim = snapshot.resource_claims.get(key) or generated.get(key)
            if claim is None:
                out.error = f'resourceclaim "{key}" not found'
                return out
            out.claims.append(claim)
            continue
        if not entry.resource_claim_template_name:
            continue
        if entry.name in pod.resource_claim_statuses:
            claim_name = pod.resource_claim_statuses[entry.name]
            if claim_name is None:  # Kubernetes: no claim needed for this entry
                continue
            key = f"{pod.namespace}/{claim_name}"
            claim = snapshot.resource_claims.get(key) or generated.get(key)
            if claim is None:
                out.error = f'resourceclaim "{key}" not found'
                return out
            out.claims.append(claim)
            continue
        key = f"{pod.namespace}/{pod.name}-{entry.name}"
        claim = snapshot.resource_claims.get(key) or generated.get(key)
        if claim is None:
            claim = _claim_from_template(pod, entry, snapshot)
            if claim is None:
                template_key = f"{pod.namespace}/{entry.resource_claim_template_name}"
                out.error = f'resourceclaimtemplate "{template_key}" not found'
                return out
            generated[key] = claim
        out.claims.append(claim)
    return out


def generate_template_claims(pods: list[Pod], snapshot: Snapshot) -> dict[str, ResourceClaim]:
    """The claims the resourceclaim controller creates from templates, for every pod at once
    before scheduling starts, so a pod may name a claim generated for another pod."""
    generated: dict[str, ResourceClaim] = {}
    for pod in pods:
        for entry in pod.resource_claims:
            if not entry.resource_claim_template_name or entry.resource_claim_name:
                continue
            if entry.name in pod.resource_claim_statuses:
                continue
            key = f"{pod.namespace}/{pod.name}-{entry.name}"
            if key in snapshot.resource_claims or key in generated:
                continue
            claim = _claim_from_template(pod, entry, snapshot)
            if claim is not None:
                generated[key] = claim
    return generated


def _claim_from_template(
    pod: Pod, entry: PodResourceClaim, snapshot: Snapshot
) -> ResourceClaim | None:
    template_key = f"{pod.namespace}/{entry.resource_claim_template_name}"
    template = snapshot.resource_claim_templates.get(template_key)
    if template is None:
        return None
    name = f"{pod.name}-{entry.name}"
    # The claims of one template share its spec, read only as every claim's is (a suggestion
    # changes a copy): 1,000 pods' copies cost 0.1 s.
    return ResourceClaim(
        namespace=pod.namespace,
        name=name,
        spec=template.spec,
        generated_from_template=template.name,
        raw={
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {
                "namespace": pod.namespace,
                "name": name,
                "annotations": {"resource.kubernetes.io/pod-claim-name": entry.name},
            },
            "spec": (template.raw.get("spec") or {}).get("spec") or {},
        },
    )


def claim_state_before_dfs(
    claim: ResourceClaim, deleting_pods: set[str], in_memory: bool, reallocation: Predicates
) -> str:
    """How the allocator will classify the claim (used for pods no target accepted).

    ``in_memory``: allocated earlier in this run, which wins over a stale in-cluster
    allocation that the run re-allocated; ``reallocation``: the pipeline's predicates."""
    if in_memory:
        return "allocated-in-memory"
    if claim.allocation is not None:
        if reallocated(claim, deleting_pods, reallocation):
            return "reallocated"
        return "allocated-in-cluster"
    return "unallocated"
