"""A NodePool as the scheduler uses it (Karpenter's ``NodeClaimTemplate``): its requirements,
the instance types it may launch, its taints, limits and DaemonSet overhead; and a new
NodeClaim made from it for a pod no existing node and no NodeClaim of the run can take.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import field
from operator import attrgetter

from allocator.model import NodePool, Snapshot, Taint
from allocator.records import record
from allocator.requirements import Requirements
from allocator.scheduling import explain
from allocator.scheduling.daemonsets import (
    DaemonOverheadGroup,
    DaemonPods,
    daemon_pods,
    overhead_groups,
)
from allocator.scheduling.decision import NodeClaimDecision, Refusal
from allocator.scheduling.fit import (
    HOSTNAME,
    NODEPOOL,
    NODES,
    InstanceTypeInfo,
    Resources,
    add_into,
    format_resources,
    format_taint,
    max_capacity,
    node_pool_requirements,
    to_milli,
    untolerated_taint,
    within_limits,
)
from allocator.scheduling.hooks import HostPortUsage
from allocator.scheduling.hostports import HostPortUsage as PortUsage
from allocator.scheduling.nodeclaim import NodeClaim, least_overhead
from allocator.scheduling.poddata import PodData
from allocator.scheduling.runstate import RunState
from allocator.trace import new_nodeclaim_label

_NAME = attrgetter("name")
_LARGEST_KEPT = 256  # sets of instance types whose largest capacity is remembered


@record
class NodeClaimTemplate:
    """A NodePool as the scheduler uses it: requirements, launchable types, limits."""

    pool: NodePool
    requirements: Requirements
    instance_types: list[InstanceTypeInfo]
    taints: list[Taint]
    limits: Resources | None  # milli-units; None when the NodePool sets no limits
    # Capacity of its nodes and NodeClaims before this run (each also counts one of ``nodes``).
    usage: Resources = field(default_factory=dict)
    # Its instance types grouped by the DaemonSet pods a node of each would run, with their
    # requests and host ports (Karpenter's DaemonOverheadGroup); each new NodeClaim a copy.
    daemon_groups: tuple[DaemonOverheadGroup, ...] = ()
    # The run's DaemonSet pods, and the requirements and instance types the groups were made
    # for: a template replaced with others (a fix suggestion's trial) regroups.
    daemons: DaemonPods | None = None
    grouped_for: tuple[Requirements, list[InstanceTypeInfo]] | None = None
    # What this run's NodeClaims of the pool are charged against its limits: each at the
    # largest of its instance types when it was created (Karpenter's subtractMax; it is not
    # refunded when the NodeClaim later narrows, and no instance type offers ``nodes``).
    charged: Resources = field(default_factory=dict)
    # The largest capacity per resource of ``instance_types`` (the list it was taken of).
    largest: tuple[list[InstanceTypeInfo], Resources] | None = None
    # The instance types within what the limits leave: (``instance_types``, what is left, them).
    within: tuple[list[InstanceTypeInfo], tuple, list[InstanceTypeInfo]] | None = None
    # The largest capacity per set of instance types (by name) a NodeClaim was created with.
    _largest_of: dict[tuple[str, ...], Resources] = field(default_factory=dict)
    # daemon_overhead, with the groups and instance types it was worked out for.
    least: tuple[tuple, list[InstanceTypeInfo], Resources] | None = None

    @property
    def name(self) -> str:
        return self.pool.name

    @property
    def daemon_overhead(self) -> Resources:
        """The least DaemonSet overhead of a node of the pool (what its refusals show); worked
        out again only when the groups or the instance types were replaced."""
        made = self.least
        groups, types = self.daemon_groups, self.instance_types
        if made is None or made[0] is not groups or made[1] is not types:
            made = self.least = (groups, types, least_overhead(groups, [i.name for i in types]))
        return dict(made[2])

    @property
    def daemon_host_ports(self) -> HostPortUsage:
        """The host ports DaemonSet pods hold on some node of the pool."""
        return PortUsage(
            {
                key: ports
                for g in self.daemon_groups
                for key, ports in g.host_ports.holders().items()
            }
        )

    def remaining(self) -> Resources | None:
        """What the NodePool's limits leave (None: it sets none)."""
        if self.limits is None:
            return None
        used = dict(self.usage)
        add_into(used, self.charged)
        return {name: limit - used.get(name, 0) for name, limit in self.limits.items()}

    def launched(self, nc: NodeClaim) -> None:
        """A NodeClaim of this template was created: charge it against the limits (at its
        largest candidate, worked out once per set of candidates: NodeClaims of one kind of
        pod keep the same few hundred)."""
        names = tuple(map(_NAME, nc.candidates))
        largest = self._largest_of.get(names)
        if largest is None:
            if len(self._largest_of) >= _LARGEST_KEPT:
                self._largest_of.clear()
            largest = self._largest_of[names] = max_capacity(nc.candidates)
        add_into(self.charged, largest)

    def can_add(
        self, pod: PodData, state: RunState, names: NodeClaimNames, quick: bool = False
    ) -> NodeClaimDecision | Refusal:
        """Whether a new NodeClaim from this NodePool can take the pod (the NodeClaim is made,
        not launched: the decision's target, named as it would be). ``quick`` as in
        ``NodeClaim.can_add``."""
        state.allocator.last_funnels = []
        pool = self.pool
        label = f"nodepool/{pool.name}"
        if not self.instance_types:
            reason = explain.nodepool_reason(
                pool.name,
                "no instance types are compatible with its requirements",
                self._overhead_words(),
            )
            return Refusal(
                state.refused(pod.trace_node, label, "requirements", reason), "requirements"
            )
        # Limits first, as Karpenter's addToNewNodeClaim: a node count used up, then the
        # instance types whose capacity would cross a limit.
        remaining = self.remaining()
        if remaining is not None and remaining.get(NODES, 1) == 0:
            reason = f'node limits have been exhausted for nodepool: "{pool.name}"'
            return Refusal(state.refused(pod.trace_node, label, "limits", reason), "limits")
        candidates = self._within_limits(remaining)
        if not candidates:
            reason = f'all available instance types exceed limits for nodepool: "{pool.name}"'
            return Refusal(state.refused(pod.trace_node, label, "limits", reason), "limits")
        taint = untolerated_taint(pod.pod.tolerations, self.taints)
        if taint is not None:
            reason = explain.nodepool_reason(
                pool.name, f"did not tolerate taint {format_taint(taint)}", self._overhead_words()
            )
            return Refusal(state.refused(pod.trace_node, label, "taint", reason), "taint")
        self._regroup_if_changed()
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
            daemon_groups=tuple(group.copy() for group in self.daemon_groups),
        )
        plan = nc.plan(pod, state, node, quick=quick)
        if isinstance(plan, Refusal):
            if plan.deferred:
                return plan
            state.trace.set(node, "failed", plan.code, plan.reason)
            plan.reason = explain.nodepool_reason(pool.name, plan.reason, self._overhead_words())
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

    def _overhead_words(self) -> str:
        """The DaemonSet overhead a refusal shows (worded only for a refusal)."""
        return format_resources(self.daemon_overhead)

    def _within_limits(self, remaining: Resources | None) -> list[InstanceTypeInfo]:
        """The instance types whose capacity crosses no limit: all of them (the same list, so
        that the filter's index knows it) while even their largest capacity crosses none."""
        types = self.instance_types
        if remaining is None:
            return types
        if self.largest is None or self.largest[0] is not types:
            self.largest = (types, max_capacity(types))
        if within_limits(self.largest[1], remaining):
            return types
        # Once a limit is near, every pod asks again until another NodeClaim is charged.
        key = tuple(remaining.items())
        kept = self.within
        if kept is None or kept[0] is not types or kept[1] != key:
            kept = self.within = (
                types,
                key,
                [i for i in types if within_limits(i.capacity, remaining)],
            )
        return kept[2]

    def _regroup_if_changed(self) -> None:
        """The overhead groups again when they were made for other requirements or instance
        types (the template was replaced for a trial; checked by identity, on the hot path)."""
        made = self.grouped_for
        if made is not None and made[0] is self.requirements and made[1] is self.instance_types:
            return
        self.daemon_groups = overhead_groups(
            self.daemons or DaemonPods([]), self.requirements, self.taints, self.instance_types
        )
        self.grouped_for = (self.requirements, self.instance_types)

    def explain(self, pod: PodData, state: RunState, names: NodeClaimNames) -> Refusal:
        """The words and funnels of a refusal found quickly, asked again in full in the same
        state (nothing is created even if the NodePool could take the pod)."""
        found = self.can_add(pod, state, names)
        return found if isinstance(found, Refusal) else Refusal("")


class NodeClaimNames:
    """New NodeClaims are named ``<nodepool>-<n>``, n counting from 1 per NodePool in creation
    order, never shadowing a NodeClaim or node of the snapshot (docs/SIMULATION.md)."""

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


def order_by_weight(pools: Iterable[NodePool]) -> list[NodePool]:
    """Karpenter's OrderByWeight: weight descending, then name descending (of two NodePools
    of equal weight, the one whose name sorts later is tried first)."""
    return sorted(pools, key=lambda p: (p.weight, p.name), reverse=True)


def node_claim_templates(
    snapshot: Snapshot, per_pool, going_away: set[str], infos, daemons: DaemonPods | None = None
) -> list[NodeClaimTemplate]:
    """NodePools in Karpenter's order (``order_by_weight``), with limits and pre-run usage.

    ``going_away``: deleting and disrupted nodes, which no longer count against limits (as
    Karpenter counts only its active nodes). ``daemons``: the run's DaemonSet pods (asked here
    first, before the existing nodes ask them); by default the snapshot's."""
    usage: dict[str, dict[str, int]] = {}

    def charge(pool: str | None, capacity: dict[str, int]) -> None:
        if not pool:
            return
        bucket = usage.setdefault(pool, {})
        for name, value in capacity.items():
            bucket[name] = bucket.get(name, 0) + value
        bucket[NODES] = bucket.get(NODES, 0) + 1000  # one node, in milli-units

    claim_nodes = {nc.node_name for nc in snapshot.node_claims.values() if nc.node_name}
    for name, node in snapshot.nodes.items():
        if name in going_away:
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
        if nc.deleting:
            continue
        if nc.instance_type in infos:
            charge(nc.node_pool, max_capacity([infos[nc.instance_type]]))

    templates = []
    if daemons is None:
        daemons = DaemonPods(daemon_pods(snapshot.daemon_sets, snapshot.pods))
    for pool in order_by_weight(snapshot.node_pools.values()):
        requirements = node_pool_requirements(pool)
        instance_types = per_pool.get(pool.name, [])
        templates.append(
            NodeClaimTemplate(
                pool=pool,
                requirements=requirements,
                instance_types=instance_types,
                taints=list(pool.taints),
                limits=to_milli(pool.limits) if pool.limits else None,
                usage=usage.get(pool.name, {}),
                # A new node binds its DaemonSet pods' host ports before any pod lands.
                daemon_groups=overhead_groups(daemons, requirements, pool.taints, instance_types),
                daemons=daemons,
                grouped_for=(requirements, instance_types),
            )
        )
    return templates
