"""A NodePool as the scheduler uses it (Karpenter's ``NodeClaimTemplate``): its requirements,
the instance types it may launch, its taints, limits and DaemonSet overhead; and a new
NodeClaim made from it for a pod no existing node and no NodeClaim of the run can take.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from allocator.model import NodePool, Pod, Snapshot, Taint
from allocator.requirements import Requirements
from allocator.scheduling import explain
from allocator.scheduling.decision import NodeClaimDecision, Refusal
from allocator.scheduling.fit import (
    HOSTNAME,
    NODEPOOL,
    InstanceTypeInfo,
    Resources,
    add_into,
    first_compatible_term,
    format_resources,
    format_taint,
    max_capacity,
    node_pool_requirements,
    pod_requests,
    pod_requirement_terms,
    to_milli,
    untolerated_taint,
    within_limits,
)
from allocator.scheduling.hooks import HostPortUsage
from allocator.scheduling.nodeclaim import NodeClaim
from allocator.scheduling.poddata import PodData
from allocator.scheduling.runstate import RunState
from allocator.trace import new_nodeclaim_label


@dataclass(slots=True)
class NodeClaimTemplate:
    """A NodePool as the scheduler uses it: requirements, launchable types, limits."""

    pool: NodePool
    requirements: Requirements
    instance_types: list[InstanceTypeInfo]
    taints: list[Taint]
    limits: Resources | None  # milli-units; None when the NodePool sets no limits
    usage: Resources = field(default_factory=dict)  # capacity launched before this run
    # Requests of the DaemonSet pods a node of this pool would run (Karpenter's overhead).
    daemon_overhead: Resources = field(default_factory=dict)
    # Host ports those DaemonSet pods hold (None: not counted); each new NodeClaim a copy.
    daemon_host_ports: HostPortUsage | None = None
    # The NodeClaims of this run made from this template (charged against its limits).
    launched: list[NodeClaim] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.pool.name

    def remaining(self) -> Resources | None:
        """What the NodePool's limits leave: Karpenter charges each NodeClaim at its largest
        candidate instance type."""
        if self.limits is None:
            return None
        used = dict(self.usage)
        for nc in self.launched:
            add_into(used, max_capacity(nc.candidates))
        return {name: limit - used.get(name, 0) for name, limit in self.limits.items()}

    def can_add(
        self, pod: PodData, state: RunState, names: NodeClaimNames, quick: bool = False
    ) -> NodeClaimDecision | Refusal:
        """Whether a new NodeClaim from this NodePool can take the pod (the NodeClaim is made,
        not launched: the decision's target, named as it would be). ``quick`` as in
        ``NodeClaim.can_add``."""
        state.allocator.last_funnels = []
        pool = self.pool
        label = f"nodepool/{pool.name}"
        overhead = format_resources(self.daemon_overhead)
        taint = untolerated_taint(pod.pod.tolerations, self.taints)
        if taint is not None:
            reason = explain.nodepool_reason(
                pool.name, f"did not tolerate taint {format_taint(taint)}", overhead
            )
            return Refusal(state.refused(pod.trace_node, label, "taint", reason), "taint")
        if not self.instance_types:
            reason = explain.nodepool_reason(
                pool.name, "no instance types are compatible with its requirements", overhead
            )
            return Refusal(
                state.refused(pod.trace_node, label, "requirements", reason), "requirements"
            )
        remaining = self.remaining()
        candidates = [i for i in self.instance_types if within_limits(i.capacity, remaining)]
        if not candidates:
            reason = f'all available instance types exceed limits for nodepool: "{pool.name}"'
            return Refusal(state.refused(pod.trace_node, label, "limits", reason), "limits")
        name = names.peek(pool.name)
        node = state.target_trace(pod.trace_node, new_nodeclaim_label(pool.name, name))
        # Karpenter's hostname placeholder: a pod pinned to an existing node's hostname is
        # incompatible with a new NodeClaim (dropped again at finalization).
        requirements = self.requirements.copy()
        requirements.add(Requirements.from_labels({HOSTNAME: name}))
        nc = NodeClaim(
            id=name,
            name=name,
            node_pool=pool.name,
            requirements=requirements,
            candidates=candidates,
            taints=list(self.taints),
            requests=dict(self.daemon_overhead),
            host_port_usage=(
                self.daemon_host_ports.copy() if self.daemon_host_ports is not None else None
            ),
        )
        plan = nc.plan(pod, state, node, quick=quick)
        if isinstance(plan, Refusal):
            if plan.deferred:
                return plan
            state.trace.set(node, "failed", plan.code, plan.reason)
            plan.reason = explain.nodepool_reason(pool.name, plan.reason, overhead)
            plan.funnels = [(label, f, None) for f in state.allocator.last_funnels]
            return plan
        state.trace.set(node, "ok", "allocated")
        return NodeClaimDecision(
            nc,
            plan.result,
            plan.requirements,
            plan.dra_resources,
            plan,
            new=True,
            remaining=remaining,
        )

    def explain(self, pod: PodData, state: RunState, names: NodeClaimNames) -> Refusal:
        """The words and funnels of a refusal found quickly, asked again in full in the same
        state (nothing is created even if the NodePool could take the pod)."""
        found = self.can_add(pod, state, names)
        return found if isinstance(found, Refusal) else Refusal("")


class NodeClaimNames:
    """New NodeClaims are named ``<nodepool>-<n>``, n counting from 1 per NodePool in creation
    order, never shadowing a NodeClaim or node of the snapshot (CONTRACT section 3)."""

    __slots__ = ("_next", "_reserved")

    def __init__(self, reserved: set[str]) -> None:
        self._next: dict[str, int] = {}
        self._reserved = set(reserved)

    def peek(self, pool: str) -> str:
        """The name the next NodeClaim of ``pool`` gets."""
        return f"{pool}-{self._free(pool)}"

    def take(self, pool: str) -> str:
        n = self._free(pool)
        self._next[pool] = n + 1
        name = f"{pool}-{n}"
        self._reserved.add(name)
        return name

    def _free(self, pool: str) -> int:
        n = self._next.get(pool, 1)
        while f"{pool}-{n}" in self._reserved:
            n += 1  # never shadow a NodeClaim or node of the snapshot
        return n


# --- building the templates of a run (Karpenter's NewNodeClaimTemplate) ----------------------


def node_claim_templates(
    snapshot: Snapshot, per_pool, disrupted: list[str], infos
) -> list[NodeClaimTemplate]:
    """NodePools by weight descending then name, with limits and pre-run usage."""
    usage: dict[str, dict[str, int]] = {}

    def charge(pool: str | None, capacity: dict[str, int]) -> None:
        if not pool:
            return
        bucket = usage.setdefault(pool, {})
        for name, value in capacity.items():
            bucket[name] = bucket.get(name, 0) + value

    claim_nodes = {nc.node_name for nc in snapshot.node_claims.values() if nc.node_name}
    for name, node in snapshot.nodes.items():
        if name in disrupted:
            continue
        pool = node.labels.get(NODEPOOL)
        if pool is None:
            owner = next((nc for nc in snapshot.node_claims.values() if nc.node_name == name), None)
            pool = owner.node_pool if owner else None
        it_name = node.labels.get("node.kubernetes.io/instance-type")
        capacity = infos[it_name].capacity if it_name in infos else to_milli(node.allocatable)
        charge(pool, capacity)
    for nc in snapshot.node_claims.values():
        if nc.node_name in claim_nodes and nc.node_name in snapshot.nodes:
            continue  # counted through its node
        if nc.instance_type in infos:
            charge(nc.node_pool, max_capacity([infos[nc.instance_type]]))

    templates = []
    daemons = daemonset_pods(snapshot.pods)
    pools = sorted(snapshot.node_pools.values(), key=lambda p: (-p.weight, p.name))
    for pool in pools:
        requirements = node_pool_requirements(pool)
        templates.append(
            NodeClaimTemplate(
                pool=pool,
                requirements=requirements,
                instance_types=per_pool.get(pool.name, []),
                taints=list(pool.taints),
                limits=to_milli(pool.limits) if pool.limits else None,
                usage=usage.get(pool.name, {}),
                daemon_overhead=daemon_overhead(daemons, requirements, pool.taints),
            )
        )
    return templates


def daemonset_pods(pods: list[Pod]) -> list[Pod]:
    """One pod per DaemonSet (namespace, owner name): what a new node of a pool would run."""
    seen: dict[tuple[str, str], Pod] = {}
    for pod in sorted(pods, key=lambda p: (p.namespace, p.name)):
        for ref in (pod.raw.get("metadata") or {}).get("ownerReferences") or ():
            if isinstance(ref, dict) and ref.get("kind") == "DaemonSet":
                seen.setdefault((pod.namespace, str(ref.get("name"))), pod)
    return list(seen.values())


def daemon_overhead(daemons: list[Pod], requirements, taints) -> dict[str, int]:
    """Karpenter's getDaemonOverhead: DaemonSet pods that tolerate the pool's taints and whose
    node selector / required affinity is compatible with its requirements."""
    total: dict[str, int] = {}
    for pod in daemons:
        if untolerated_taint(pod.tolerations, taints) is not None:
            continue
        term, _ = first_compatible_term(requirements, pod_requirement_terms(pod))
        if term is None:
            continue
        for name, value in pod_requests(pod).items():
            total[name] = total.get(name, 0) + value
    return total
