"""The NodeClaim abstraction (design: NodeClaim Abstraction) as the allocator consumes it.

Four lifecycle phases, one shape (``NodeClaimView`` of docs/INTERFACES.md):

* existing initialized node: a single instance type (its label, or none), no templates;
* pre-initialized node (Karpenter-managed, not yet initialized): its instance type's templates,
  its published slices excluded from the universe (see ``initialization``);
* a NodeClaim of the snapshot whose node has not registered: like pre-initialized, under the
  NodeClaim's name;
* in-flight NodeClaims created in this run: several candidate instance types, templates for all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from allocator.model import Pod, ResourceSliceTemplate, Taint
from allocator.requirements import Requirements, node_requirements
from allocator.scheduling.fit import InstanceTypeInfo, Resources

# Target kinds (what ``target`` reports and how fit treats taints and requirements).
EXISTING = "existing"  # an initialized node
PRE_INITIALIZED = "pre-initialized"  # a registered, Karpenter-managed, uninitialized node
UNREGISTERED = "unregistered"  # a snapshot NodeClaim without a node yet
IN_FLIGHT = "in-flight"  # created in this run


@dataclass(slots=True, eq=False)
class ExistingTarget:
    """A node (or a launched NodeClaim) that exists before the run."""

    id: str  # "node/NAME" for nodes; the NodeClaim's name for unregistered NodeClaims
    name: str
    kind: str
    node_name: str | None
    node_pool: str | None
    requirements: Requirements
    instance_types: list[str]
    templates: dict[str, list[ResourceSliceTemplate]]
    taints: list[Taint]
    ignored_taint_keys: frozenset[str]
    available: Resources  # allocatable minus what bound pods and placed pods request
    unschedulable: bool = False
    # What the node offers at all (DRAExtendedResource: a resource it has none of is served
    # by DRA there).
    allocatable: Resources = field(default_factory=dict)
    strict_labels: bool = True  # a node's labels are final; a NodeClaim's may still be added
    pods: list[Pod] = field(default_factory=list)
    reason_target: str = ""  # "node/NAME", as reasons[].target names it
    trace_label: str = ""  # the trace's target label
    # No cordon and no taint that could refuse a pod: the loop's fast path may skip checks.
    open_to_all: bool = False

    def __post_init__(self) -> None:
        self.reason_target = f"node/{self.name}"
        self.trace_label = self.reason_target
        self.open_to_all = not self.unschedulable and not any(
            t.effect in ("NoSchedule", "NoExecute") and t.key not in self.ignored_taint_keys
            for t in self.taints
        )

    @property
    def initialized(self) -> bool:
        return self.kind == EXISTING

    def resource_slices(self) -> dict[str, list[ResourceSliceTemplate]]:
        return self.templates

    def instance_type_requirements(self, name: str) -> Requirements | None:
        return None  # a node (or an unregistered NodeClaim): its requirements say it all

    def target_json(self) -> dict:
        if self.kind == UNREGISTERED:
            return {"kind": "NodeClaim", "name": self.name, "new": False}
        return {"kind": "Node", "name": self.name, "new": False}


@dataclass(slots=True, eq=False)
class InFlightNodeClaim:
    """A NodeClaim this run creates: a superposition of candidate instance types."""

    id: str
    name: str
    node_pool: str
    requirements: Requirements
    candidates: list[InstanceTypeInfo]  # in try order
    taints: list[Taint]
    order: int  # creation order, for ties between NodeClaims with as many pods
    requests: Resources = field(default_factory=dict)
    pods: list[Pod] = field(default_factory=list)
    node_name: None = None
    kind: str = IN_FLIGHT

    @property
    def instance_types(self) -> list[str]:
        return [info.name for info in self.candidates]

    @property
    def reason_target(self) -> str:
        # docs/RESULT.md knows two target forms; a NodeClaim of this run is a node to be.
        return f"node/{self.name}"

    @property
    def trace_label(self) -> str:
        return f"nodeclaim/{self.name}"

    def resource_slices(self) -> dict[str, list[ResourceSliceTemplate]]:
        return {info.name: info.it.resource_slice_templates for info in self.candidates}

    def instance_type_requirements(self, name: str) -> Requirements | None:
        for info in self.candidates:
            if info.name == name:
                return info.requirements
        return None

    def target_json(self) -> dict:
        return {"kind": "NodeClaim", "name": self.name, "new": True}


@dataclass(slots=True, eq=False)
class Probe:
    """What a NodeClaim would look like with one more pod: handed to Allocate before Add.

    Allocate must see the tightened requirements and the re-filtered instance types, but the
    NodeClaim itself changes only once the placement is decided (Karpenter's CanAdd / Add).
    """

    id: str
    node_pool: str | None
    requirements: Requirements
    candidates: list[InstanceTypeInfo]
    node_name: None = None
    _by_name: dict[str, Requirements] | None = field(default=None, repr=False)

    @property
    def instance_types(self) -> list[str]:
        return [info.name for info in self.candidates]

    def resource_slices(self) -> dict[str, list[ResourceSliceTemplate]]:
        return {info.name: info.it.resource_slice_templates for info in self.candidates}

    def instance_type_requirements(self, name: str) -> Requirements | None:
        # Allocate asks for every candidate: indexed once (the first of a name wins).
        by_name = self._by_name
        if by_name is None:
            by_name = self._by_name = {}
            for info in self.candidates:
                by_name.setdefault(info.name, info.requirements)
        return by_name.get(name)


# --- building the existing targets (docs/SIMULATION.md, targets 1) ---------------------------


def existing_targets(
    snapshot,
    *,
    managed: set[str],
    excluded_nodes: set[str],
    bound_pods: list[Pod],
    infos: dict[str, InstanceTypeInfo],
) -> list[ExistingTarget]:
    """Initialized nodes by name, then not-initialized nodes and unregistered NodeClaims by name.

    ``excluded_nodes``: deleting and disrupted nodes, which are never targets.
    """
    from allocator.scheduling.fit import (
        DEFAULT_MAX_PODS,
        EPHEMERAL_TAINT_KEYS,
        INITIALIZED,
        INSTANCE_TYPE,
        NODEPOOL,
        pod_requests,
        to_milli,
    )

    used: dict[str, Resources] = {}
    for pod in bound_pods:
        bucket = used.setdefault(pod.node_name, {})
        for name, value in pod_requests(pod).items():
            bucket[name] = bucket.get(name, 0) + value
    claim_of_node = {nc.node_name: nc for nc in snapshot.node_claims.values() if nc.node_name}

    def startup_keys(pool_name: str | None) -> frozenset[str]:
        pool = snapshot.node_pools.get(pool_name) if pool_name else None
        keys = {t.key for t in pool.startup_taints} if pool else set()
        return frozenset(keys | EPHEMERAL_TAINT_KEYS)

    def templates_of(it_name: str | None) -> dict[str, list[ResourceSliceTemplate]]:
        if not it_name:
            return {}
        info = infos.get(it_name)
        return {it_name: list(info.it.resource_slice_templates) if info else []}

    initialized: list[ExistingTarget] = []
    pending: list[ExistingTarget] = []
    for name, node in sorted(snapshot.nodes.items()):
        if name in excluded_nodes:
            continue
        nc = claim_of_node.get(name)
        pool = node.labels.get(NODEPOOL) or (nc.node_pool if nc else None)
        it_name = node.labels.get(INSTANCE_TYPE) or (nc.instance_type if nc else None)
        is_init = name not in managed or node.labels.get(INITIALIZED) == "true"
        allocatable = to_milli(node.allocatable)
        if not allocatable and it_name in infos:
            allocatable = dict(infos[it_name].capacity)
        allocatable.setdefault("pods", DEFAULT_MAX_PODS)
        offered = dict(allocatable)
        for res, value in used.get(name, {}).items():
            allocatable[res] = allocatable.get(res, 0) - value
        target = ExistingTarget(
            id=f"node/{name}",
            name=name,
            kind=EXISTING if is_init else PRE_INITIALIZED,
            node_name=name,
            node_pool=pool,
            requirements=node_requirements(node.labels, name),
            instance_types=[it_name] if it_name else [],
            templates={} if is_init else templates_of(it_name),
            taints=list(node.taints),
            ignored_taint_keys=frozenset() if is_init else startup_keys(pool),
            available=allocatable,
            unschedulable=node.unschedulable,
            allocatable=offered,
        )
        (initialized if is_init else pending).append(target)
    for name, nc in sorted(snapshot.node_claims.items()):
        if nc.deleting or (nc.node_name and nc.node_name in snapshot.nodes):
            continue
        labels = dict(nc.labels)
        if nc.node_pool:
            labels.setdefault(NODEPOOL, nc.node_pool)
        if nc.instance_type:
            labels.setdefault(INSTANCE_TYPE, nc.instance_type)
        reqs = Requirements.from_node_selector_requirements(
            [
                {k: v for k, v in r.items() if k in ("key", "operator", "values")}
                for r in nc.requirements
            ]
        )
        reqs.add(Requirements.from_labels(labels))
        capacity = dict(infos[nc.instance_type].capacity) if nc.instance_type in infos else {}
        pending.append(
            ExistingTarget(
                id=name,
                name=name,
                kind=UNREGISTERED,
                node_name=None,
                node_pool=nc.node_pool,
                requirements=reqs,
                instance_types=[nc.instance_type] if nc.instance_type else [],
                templates=templates_of(nc.instance_type),
                taints=list(nc.taints),
                ignored_taint_keys=startup_keys(nc.node_pool),
                available=capacity,
                strict_labels=False,
                allocatable=dict(capacity),
            )
        )
    pending.sort(key=lambda t: t.name)
    return initialized + pending
