"""Wiring one run together (design: Scheduler Initialization, steps 1-4)."""

from __future__ import annotations

from dataclasses import dataclass, field

from allocator.model import ResourceClaim, ResourceSlice, Snapshot
from allocator.requirements import LABEL_HOSTNAME
from allocator.scheduling import hooks
from allocator.scheduling.devicecount import DeviceCounter
from allocator.scheduling.disruption import check_candidates
from allocator.scheduling.existingnode import EXISTING, existing_nodes, hostname
from allocator.scheduling.fit import instance_type_info
from allocator.scheduling.initialization import (
    PodClaims,
    allocated_device_seed,
    binding_instance_types,
    generate_template_claims,
    is_initialized,
    managed_nodes,
    node_pool_instance_types,
    resolve_pod_claims,
    slice_universe,
)
from allocator.scheduling.nodeclaimtemplate import NodeClaimNames, node_claim_templates
from allocator.scheduling.queue import PodSets, collect_pods, deleting_nodes
from allocator.scheduling.refusalcache import RefusalCache
from allocator.scheduling.runstate import RunState
from allocator.scheduling.scheduler import Scheduler
from allocator.scheduling.topology import Topology, topology_needed
from allocator.scheduling.topologydomaingroup import build_domain_groups
from allocator.trace import Trace


@dataclass(slots=True)
class Run:
    scheduler: Scheduler
    allocator: object
    pods: PodSets
    pod_claims: dict[str, PodClaims]
    generated_claims: dict[str, ResourceClaim]
    universe: list[ResourceSlice]
    disrupted: list[str]
    seed: set = field(default_factory=set)


def build_run(snapshot: Snapshot, options, trace: Trace, pipeline=None) -> Run:
    """``pipeline``: the run's device checks and the rest of the DRA features' wiring
    (``allocator/pipeline.py``); by default ``build_pipeline(options.gates)``."""
    from allocator.allocator import AllocationError, Allocator
    from allocator.bindings import AttributeBindings
    from allocator.pipeline import build_pipeline

    if pipeline is None:
        pipeline = build_pipeline(options.gates)

    disrupted = check_candidates(snapshot, options.disrupt)
    going_away = deleting_nodes(snapshot.nodes, snapshot.node_claims) | set(disrupted)
    pods = collect_pods(snapshot.pods, going_away, set(disrupted))
    managed = managed_nodes(snapshot)
    uninitialized = {
        name for name, node in snapshot.nodes.items() if not is_initialized(node, managed)
    }
    universe = slice_universe(snapshot.resource_slices, snapshot.nodes, uninitialized | going_away)
    seed = allocated_device_seed(
        snapshot.resource_claims, pods.deleting, pipeline.reallocation_predicates
    )
    per_pool = node_pool_instance_types(snapshot)
    bindings = AttributeBindings.build(binding_instance_types(snapshot, per_pool))
    allocator = Allocator(
        universe,
        seed,
        bindings,
        snapshot.device_classes,
        pipeline=pipeline,
        **_allocator_kwargs(snapshot, options, pods.deleting),
    )

    generated = generate_template_claims(pods.pending, snapshot)
    pod_claims = {pod.key: resolve_pod_claims(pod, snapshot, generated) for pod in pods.pending}
    _attach_extended_claims(snapshot, options, pods.pending, pod_claims)

    infos = {name: instance_type_info(it) for name, it in snapshot.instance_types.items()}
    existing = existing_nodes(
        snapshot,
        managed=managed,
        excluded_nodes=going_away,
        bound_pods=pods.bound,
        infos=infos,
    )
    counter = DeviceCounter(
        universe,
        seed,
        {t.name: snapshot.nodes[t.name].labels for t in existing if t.kind == EXISTING},
    )
    templates = node_claim_templates(snapshot, per_pool, disrupted, infos)
    # Refusing by the funnel: an existing node whose cached count stage shows a pod's
    # requests cannot be met is refused without running Allocate there; a retry in an
    # unchanged state is skipped. NodeClaim caches: a NodeClaim's refusal is first found
    # without its words (Allocate's ``explain`` off) and explained only when the pod fails
    # everywhere. Both off only to prove that decisions do not depend on them.
    funnel_refusal = getattr(options, "funnel_refusal", True)
    nodeclaim_caches = getattr(options, "nodeclaim_caches", True)
    allocator.fresh_funnels = {} if nodeclaim_caches else None
    state = RunState(
        allocator=allocator,
        cache=RefusalCache(
            enabled=funnel_refusal,
            nodeclaim_caches=nodeclaim_caches,
            nodeclaims_reach_cluster=any(s.node_name is None for s in universe),
        ),
        deleting_pods=pods.deleting,
        allocation_errors=(AllocationError,),
        counter=counter,
        trace=trace,
        topology=_topology(snapshot, pods, existing, infos),
        filter_memo={} if nodeclaim_caches else None,
    )
    # Who holds a device, for the funnel's "allocated" messages (explanation/messages.py).
    from allocator.explanation.messages import HOLDERS, SELECTOR_WORDS, HolderIndex

    allocator.extensions[HOLDERS] = HolderIndex(allocator, state.claim_users)
    if funnel_refusal:  # selector refusals worded once per values read
        allocator.extensions[SELECTOR_WORDS] = {}
    scheduler = Scheduler(
        state=state,
        existing=existing,
        templates=templates,
        names=NodeClaimNames(set(snapshot.node_claims) | set(snapshot.nodes)),
    )
    return Run(scheduler, allocator, pods, pod_claims, generated, universe, disrupted, seed)


def _topology(snapshot: Snapshot, pods: PodSets, existing, infos) -> hooks.Topology:
    """Karpenter's NewTopology (before the existing nodes, which then register their
    hostnames): none when no pod to schedule uses topology and no pod of the snapshot has a
    required anti-affinity. Every NodePool is offered the whole catalog, as a cloud provider
    offers its instance types to each (``buildDomainGroups`` intersects them)."""
    if not topology_needed(pods.pending, snapshot.pods):
        return hooks.NO_TOPOLOGY
    catalog = [infos[name].requirements for name in sorted(infos)]
    pools = sorted(snapshot.node_pools.values(), key=lambda p: p.name) if catalog else []
    topology = Topology.build(
        pods=pods.pending,
        cluster_pods=snapshot.pods,
        nodes=snapshot.nodes,
        existing_nodes=[snapshot.nodes[t.node_name] for t in existing if t.node_name],
        domain_groups=build_domain_groups((pool, catalog) for pool in pools),
        namespaces=snapshot.namespaces,
    )
    if topology.empty:
        return hooks.NO_TOPOLOGY
    for target in existing:
        source = snapshot.nodes.get(target.node_name or "") or snapshot.node_claims[target.name]
        topology.register(LABEL_HOSTNAME, hostname(source.labels, target.name))
    return topology


def _attach_extended_claims(snapshot: Snapshot, options, pending, pod_claims) -> None:
    """DRAExtendedResource: each pending pod's claim for the extended resources a DeviceClass
    serves comes last among its claims, as kube-scheduler puts it."""
    from allocator.features import extendedresources as ext

    if not options.gates.enabled(ext.GATE):
        return
    mapping = ext.class_mapping(snapshot.device_classes)
    if not mapping:
        return
    earlier = ext.earlier_claims(snapshot.resource_claims)
    for pod in pending:
        claims = pod_claims[pod.key]
        if claims.error is not None:
            continue
        found = ext.pod_extended_claim(
            pod, pod.requests, mapping, snapshot.resource_claims, earlier
        )
        if found is not None:
            claims.extended = found
            if found.claim is not None:
                claims.claims.append(found.claim)


def _allocator_kwargs(snapshot: Snapshot, options, deleting: set[str]) -> dict:
    return {
        "deleting_pods": deleting,
        "namespaces": snapshot.namespaces,
        "gates": options.gates,
        "timeout": options.timeout,
        "device_taint_rules": snapshot.device_taint_rules,
        "resource_claims": snapshot.resource_claims,
        "binding_timeout_seconds": options.binding_timeout_seconds,
        "nodes": snapshot.nodes,
    }
