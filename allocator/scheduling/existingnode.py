"""An existing node, or a NodeClaim of the snapshot whose node has not registered yet, as the
scheduler tries pods on it (Karpenter's ``ExistingNode``; design: Existing Node Evaluation).

Three of the NodeClaim abstraction's lifecycle phases (``NodeClaimView`` of docs/INTERFACES.md):

* existing initialized node: a single instance type (its label, or none), no templates;
* pre-initialized node (Karpenter-managed, not yet initialized): its instance type's templates,
  its published slices excluded from the universe (see ``initialization``);
* a NodeClaim of the snapshot whose node has not registered: like pre-initialized, under the
  NodeClaim's name.

``can_add`` decides and changes no placement state; ``add`` commits the decision.
"""

from __future__ import annotations

from dataclasses import field

from allocator.errors import AllocationError
from allocator.model import Pod, ResourceClaim, ResourceSliceTemplate, Taint
from allocator.records import record
from allocator.requirements import (
    LABEL_HOSTNAME,
    WELL_KNOWN_LABELS,
    Requirement,
    Requirements,
    node_requirements,
)
from allocator.scheduling import explain
from allocator.scheduling.daemonsets import DaemonPods, requests_of
from allocator.scheduling.decision import ExistingNodeDecision, Refusal
from allocator.scheduling.fit import (
    InstanceTypeInfo,
    Resources,
    add_into,
    first_compatible_term,
    fits,
    format_taint,
    merged,
    untolerated_taint,
)
from allocator.scheduling.hooks import HostPortUsage, VolumeUsage
from allocator.scheduling.poddata import PodData
from allocator.scheduling.runstate import (
    RunState,
    dra_node_resources,
    pod_level_problem,
    target_code,
)
from allocator.scheduling.topology import TopologyError
from allocator.scheduling.volumes import VolumeAlternative

# Target kinds (what ``target`` reports and how fit treats taints and requirements).
EXISTING = "existing"  # an initialized node
PRE_INITIALIZED = "pre-initialized"  # a registered, Karpenter-managed, uninitialized node
UNREGISTERED = "unregistered"  # a snapshot NodeClaim without a node yet

_NO_STRICT: frozenset[str] = frozenset()


MAX_REMEMBERED_SHAPES = 16  # pod shapes a node remembers refusals of (5,000 nodes x 16)


@record(eq=False)
class ExistingNode:
    """A node (or a launched NodeClaim) that exists before the run."""

    id: str  # "node/NAME" for nodes; the NodeClaim's name for unregistered NodeClaims
    name: str
    kind: str
    node_name: str | None
    node_pool: str | None
    requirements: Requirements
    instance_types: list[str]
    templates: dict[str, list[ResourceSliceTemplate]]
    taints: list[Taint]  # those Karpenter holds (not the ephemeral ones while initializing)
    available: Resources  # allocatable minus what bound pods and placed pods request
    unschedulable: bool = False
    # What the node offers at all (DRAExtendedResource: a resource it has none of is served
    # by DRA there).
    allocatable: Resources = field(default_factory=dict)
    strict_labels: bool = True  # a node's labels are final; a NodeClaim's may still be added
    pods: list[Pod] = field(default_factory=list)
    reason_target: str = ""  # "node/NAME", as reasons[].target names it
    trace_label: str = ""  # the trace's target label
    # No cordon and no taint that could refuse a pod: ``can_add``'s fast path may skip checks.
    open_to_all: bool = False
    # Host ports held by the node's pods and volumes attached to it (None: not counted).
    host_port_usage: HostPortUsage | None = None
    volume_usage: VolumeUsage | None = None
    # What the checks that read only this node and the pod refused, per pod shape (with the
    # room left they read): a Deployment's pods pass thousands of nodes that refuse each of
    # them as they refused the first. Forgotten when a pod is added here.
    refusals: dict[tuple, tuple[tuple, Refusal]] = field(default_factory=dict)
    # Its hostname domain: its hostname requirement's one value (_with_hostname), "" if none.
    hostname: str = ""

    def __post_init__(self) -> None:
        self.reason_target = f"node/{self.name}"
        self.trace_label = self.reason_target
        self.open_to_all = not self.unschedulable and not self.taints
        host = self.requirements.get(LABEL_HOSTNAME)
        values = host.values() if host.operator() == "In" else ()
        self.hostname = next(iter(values)) if len(values) == 1 else ""

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

    # --- CanAdd ------------------------------------------------------------------------------

    def can_add(
        self, pod: PodData, state: RunState, bounds: dict[str, int] | None
    ) -> ExistingNodeDecision | Refusal:
        """Whether the pod fits here, and with which devices; nothing is committed.

        ``bounds``: the device-count pre-check's upper bound of free devices per node, once
        the pod's claims passed Request Validation (None before)."""
        extended = pod.extended
        if extended is not None:
            native = extended.native(self.allocatable)
            if native:
                # A node offering some of them natively: counted there, the claim asks for
                # the rest (none of the shortcuts below knows this claim).
                return self._can_add(
                    pod,
                    state,
                    merged(pod.requests, extended.native_requests(native)),
                    claims=extended.claims(pod.claims, native),
                )
        specs = pod.specs
        if pod.fast and self.open_to_all and (bounds is not None or specs):
            # Untraced, no node selector or affinity: a node that takes the pod's requests but
            # cannot have enough free devices is refused with the same reason the full check
            # would give, without the per-check calls. The order of checks is kept.
            available = self.available
            for name, value in pod.wanted:
                if value > available.get(name, 0):
                    break
            else:
                if bounds is not None:
                    bound = bounds.get(self.id)
                    if bound is not None and pod.needed > bound:
                        return state.cache.device_refusal(self, pod.needed, bound)
                if specs:
                    refused = state.cache.funnel_refusal(self, specs, pod.outcome)
                    if refused is not None:
                        return refused
        return self._can_add(
            pod,
            state,
            pod.requests,
            pod.needed if bounds is not None else 0,
            bounds,
            specs,
        )

    def _can_add(
        self,
        pod: PodData,
        state: RunState,
        requests: Resources,
        needed: int = 0,
        bounds: dict[str, int] | None = None,
        specs: list | None = None,
        claims: list[ResourceClaim] | None = None,
    ) -> ExistingNodeDecision | Refusal:
        # What this node's own checks refused a pod of this shape is remembered with the room
        # it read (a fix suggestion's trial may lend the node room back for a while).
        shape = pod.shape if requests is pod.requests else None
        room = ()
        if shape is not None:
            room = tuple([self.available.get(name, 0) for name, _ in pod.wanted])
            hit = self.refusals.get(shape)
            if hit is not None and hit[0] == room:
                return hit[1]
        local = self._local(pod, state, requests)
        if isinstance(local, Refusal):
            if shape is not None:
                if len(self.refusals) >= MAX_REMEMBERED_SHAPES:  # many shapes: memory bounded
                    self.refusals.clear()
                self.refusals[shape] = (room, local)
            return local
        term, requirements = local
        return self._search(pod, state, requests, term, requirements, needed, bounds, specs, claims)

    def _local(
        self, pod: PodData, state: RunState, requests: Resources
    ) -> Refusal | tuple[Requirements, Requirements]:
        """Karpenter's ExistingNode.CanAdd up to the topology: what only this node and the pod
        decide (the pod's requirement term and the node's requirements with its volumes'), or
        the refusal."""
        pod_node = pod.trace_node
        label = self.trace_label
        if self.unschedulable:
            reason = state.refused(pod_node, label, "unschedulable", "node is unschedulable")
            return Refusal(reason, "unschedulable", lasting=True)
        # Karpenter's ExistingNode.CanAdd order: taints, volume limits, host ports, then the
        # resources left (the words of a node refusing for several reasons are Karpenter's).
        taint = untolerated_taint(pod.pod.tolerations, self.taints)
        if taint is not None:
            reason = f"did not tolerate taint {format_taint(taint)}"
            return Refusal(state.refused(pod_node, label, "taint", reason), "taint", lasting=True)
        if pod.volumes and self.volume_usage is not None:
            exceeded = self.volume_usage.exceeds_limits(pod.volumes)
            if exceeded is not None:
                reason = f"checking volume usage, {exceeded}"
                return Refusal(
                    state.refused(pod_node, label, "volumes", reason), "volumes", lasting=True
                )
        if pod.host_ports and self.host_port_usage is not None:
            conflict = self.host_port_usage.conflicts(pod.pod, pod.host_ports)
            if conflict is not None:
                reason = f"checking host port usage, {conflict}"
                return Refusal(
                    state.refused(pod_node, label, "host-ports", reason), "host-ports", lasting=True
                )
        if not fits(requests, self.available):
            words = state.exceeds(requests, self.available)
            reason = state.refused(pod_node, label, "resources", words)
            return Refusal(reason, "resources", lasting=True)
        allow = _NO_STRICT if self.strict_labels else WELL_KNOWN_LABELS
        requirements = self.requirements
        term = pod.terms[0]
        if pod.check_terms:
            term, reason = first_compatible_term(requirements, pod.terms, allow)
            if term is None:
                reason = f"incompatible requirements, {reason}"
                return Refusal(
                    state.refused(pod_node, label, "requirements", reason),
                    "requirements",
                    lasting=True,
                )
        if pod.volume_requirements:
            requirements, reason = _volume_alternative(requirements, pod.volume_requirements, allow)
            if requirements is None:
                return Refusal(
                    state.refused(pod_node, label, "volumes", reason), "volumes", lasting=True
                )
        return term, requirements

    def _search(
        self,
        pod: PodData,
        state: RunState,
        requests: Resources,
        term: Requirements,
        requirements: Requirements,
        needed: int,
        bounds: dict[str, int] | None,
        specs: list | None,
        claims: list[ResourceClaim] | None,
    ) -> ExistingNodeDecision | Refusal:
        """The rest of CanAdd: the topologies, then the devices."""
        trace = state.trace
        pod_node = pod.trace_node
        label = self.trace_label
        allow = _NO_STRICT if self.strict_labels else WELL_KNOWN_LABELS
        topology = state.topology
        if not topology.empty:
            # Karpenter's tryVolumeAlternative: the node's requirements with the pod's, narrowed
            # by the topologies (a node's domains are single values: kept or refused). The pod's
            # domains are its strict requirements (no preferences, no volume requirements).
            if len(term):
                requirements = requirements.copy()
                requirements.add(term)
            try:
                narrowed = topology.add_requirements(pod.pod, self.taints, pod.strict, requirements)
            except TopologyError as err:
                reason = state.refused(pod_node, label, "topology", err.explained())
                return Refusal(reason, "topology", topology=err)
            if narrowed is not None:
                problem = requirements.compatible(narrowed, allow)
                if problem is not None:
                    reason = state.refused(pod_node, label, "topology", problem)
                    return Refusal(reason, "topology")
                if requirements is self.requirements:
                    requirements = requirements.copy()
                requirements.add(narrowed)
        if needed:
            # Where the DFS would run, the cheap count may already tell it would fail.
            bound = bounds.get(self.id)
            if bound is not None and needed > bound:
                refusal = state.cache.device_refusal(self, needed, bound)
                if trace.enabled:
                    node = trace.add(pod_node, "target", label, "failed", "devices", refusal.reason)
                    return Refusal(refusal.reason, "devices", counted=True, trace_node=node)
                return refusal
        if claims is None:
            claims = pod.claims
        dra: Resources = {}
        result = None
        if claims:
            if specs:
                refused = state.cache.funnel_refusal(self, specs, pod.outcome)
                if refused is not None:
                    if trace.enabled:  # counted out as before: the funnel, not the search
                        state.traced_refusal(pod_node, label, refused)
                    return refused
            node = state.target_trace(pod_node, label)
            try:
                result = state.allocator.allocate(
                    self,
                    claims,
                    trace=trace,
                    trace_parent=node if node >= 0 else None,
                    pod=pod.pod,
                )
            except AllocationError as err:
                state.cache.note_validation(pod.outcome, err)
                state.cache.remember(self, claims, err)
                funnels = [(self.reason_target, f, None) for f in err.funnels]
                if trace.enabled:
                    state.trace_funnels(node, err)
                trace.set(node, "failed", target_code(err), str(err))
                return Refusal(explain.dra_reason(str(err)), funnels=funnels)
            state.cache.mark_validated(pod.outcome)
            dra = dra_node_resources(result)
            problem = pod_level_problem(pod.pod, result)
            if problem is not None:
                trace.set(node, "failed", "node-resources", problem)
                return Refusal(explain.dra_reason(problem), "node-resources")
            if dra and not fits(merged(requests, dra), self.available):
                trace.set(node, "failed", "resources", "device node resources")
                return Refusal(state.exceeds(merged(requests, dra), self.available), "resources")
            trace.set(node, "ok", "allocated")
        elif trace.enabled:
            trace.add(pod_node, "target", label, "ok", "fits")
        return ExistingNodeDecision(
            self, result, requirements, dra, merged(requests, dra), claims if result else []
        )

    # --- Add ---------------------------------------------------------------------------------

    def add(self, pod: PodData, decision: ExistingNodeDecision, state: RunState) -> None:
        """Commit: the devices, the node's resources, its host ports and volumes, topology."""
        if decision.result is not None:
            state.commit(decision.result, decision.claims)
        for name, value in decision.requests.items():
            self.available[name] = self.available.get(name, 0) - value
        self.refusals.clear()
        self.pods.append(pod.outcome.pod)
        if pod.host_ports and self.host_port_usage is not None:
            self.host_port_usage.add(pod.pod, pod.host_ports)
        if pod.volumes and self.volume_usage is not None:
            self.volume_usage.add(pod.pod, pod.volumes)
        # Karpenter's Add keeps the node's requirements with the pod's (its term, volumes and
        # topology): a later pod is checked, and its topology domain read, against them.
        requirements = decision.requirements
        term = pod.terms[0]
        if len(term):
            requirements = requirements.copy()
            requirements.add(term)
        self.requirements = requirements
        state.topology.record(pod.pod, self.taints, requirements)


def _volume_alternative(
    requirements: Requirements, alternatives: tuple[VolumeAlternative, ...], allow: frozenset[str]
) -> tuple[Requirements | None, str | None]:
    """The node's requirements with the first of the pod's volume topology alternatives it is
    compatible with (Karpenter's tryVolumeAlternative), else the last one's reason, naming the
    volume that pins it."""
    reason = None
    for volume in alternatives:
        problem = requirements.compatible(volume.requirements, allow_undefined=allow)
        if problem is None:
            out = requirements.copy()
            out.add(volume.requirements)
            return out, None
        reason = f"incompatible volume requirements, {problem} ({volume.describe()})"
    return None, reason


def hostname(labels: dict[str, str], name: str) -> str:
    """Karpenter's ``StateNode.HostName``: the hostname label, else the node's name."""
    return labels.get(LABEL_HOSTNAME) or name


def _with_hostname(requirements: Requirements, labels: dict[str, str], name: str) -> Requirements:
    # Karpenter's NewExistingNode: a node's hostname is a requirement even before the kubelet
    # labels it (topology counts it as that domain).
    requirements.add(Requirement.new(LABEL_HOSTNAME, "In", [hostname(labels, name)]))
    return requirements


# --- building the existing nodes (docs/SIMULATION.md, targets 1) -----------------------------


def existing_nodes(
    snapshot,
    *,
    managed: set[str],
    excluded_nodes: set[str],
    bound_pods: list[Pod],
    infos: dict[str, InstanceTypeInfo],
    daemons: DaemonPods | None = None,
) -> list[ExistingNode]:
    """Initialized nodes by name, then not-initialized nodes and unregistered NodeClaims by name.

    ``excluded_nodes``: deleting and disrupted nodes, which are never targets. ``daemons``: the
    run's DaemonSet pods; room is kept on each node for those it would run and does not yet
    (Karpenter's NewExistingNode).
    """
    from allocator.scheduling.fit import (
        DEFAULT_MAX_PODS,
        INITIALIZED,
        INSTANCE_TYPE,
        NODEPOOL,
        is_ephemeral,
        pod_requests,
        to_milli,
    )

    used: dict[str, Resources] = {}
    daemons_used: dict[str, Resources] = {}  # Karpenter's StateNode.DaemonSetRequests
    for pod in bound_pods:
        bucket = used.setdefault(pod.node_name, {})
        for name, value in pod_requests(pod).items():
            bucket[name] = bucket.get(name, 0) + value
        if any(ref.kind == "DaemonSet" for ref in pod.owner_references):
            add_into(daemons_used.setdefault(pod.node_name, {}), pod_requests(pod))

    def reserve(target: ExistingNode, labels: dict[str, str]) -> None:
        """Keep room for the DaemonSet pods the node would run that are not on it yet: their
        requests less what DaemonSet pods bound to it request, never below zero per resource
        (DaemonSet pods that landed unexpectedly must not add room)."""
        if daemons is None:
            return
        wanted = requests_of(daemons.for_node(labels, target.taints))
        running = daemons_used.get(target.node_name or "", {})
        for res, value in wanted.items():
            missing = value - running.get(res, 0)
            if missing > 0:
                target.available[res] = target.available.get(res, 0) - missing

    claim_of_node = {nc.node_name: nc for nc in snapshot.node_claims.values() if nc.node_name}

    def held(taints: list[Taint], pool_name: str | None) -> list[Taint]:
        """Karpenter's StateNode.Taints of a managed node not initialized yet."""
        pool = snapshot.node_pools.get(pool_name) if pool_name else None
        startup = pool.startup_taints if pool else ()
        return [t for t in taints if not is_ephemeral(t, startup)]

    def templates_of(it_name: str | None) -> dict[str, list[ResourceSliceTemplate]]:
        if not it_name:
            return {}
        info = infos.get(it_name)
        return {it_name: list(info.it.resource_slice_templates) if info else []}

    initialized: list[ExistingNode] = []
    pending: list[ExistingNode] = []
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
        target = ExistingNode(
            id=f"node/{name}",
            name=name,
            kind=EXISTING if is_init else PRE_INITIALIZED,
            node_name=name,
            node_pool=pool,
            requirements=_with_hostname(node_requirements(node.labels, name), node.labels, name),
            instance_types=[it_name] if it_name else [],
            templates={} if is_init else templates_of(it_name),
            taints=list(node.taints) if is_init else held(node.taints, pool),
            available=allocatable,
            unschedulable=node.unschedulable,
            allocatable=offered,
        )
        reserve(target, node.labels)
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
        reqs = _with_hostname(reqs, labels, name)
        capacity = dict(infos[nc.instance_type].capacity) if nc.instance_type in infos else {}
        target = ExistingNode(
            id=name,
            name=name,
            kind=UNREGISTERED,
            node_name=None,
            node_pool=nc.node_pool,
            requirements=reqs,
            instance_types=[nc.instance_type] if nc.instance_type else [],
            templates=templates_of(nc.instance_type),
            taints=held(nc.taints, nc.node_pool),
            available=capacity,
            strict_labels=False,
            allocatable=dict(capacity),
        )
        reserve(target, labels)
        pending.append(target)
    pending.sort(key=lambda t: t.name)
    return initialized + pending
