"""Wiring one run together (design: Scheduler Initialization, steps 1-4)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field

from allocator.allocator import Allocator
from allocator.bindings import AttributeBindings
from allocator.explanation.messages import HolderIndex
from allocator.featuregates import FeatureGates
from allocator.model import Pod, ResourceClaim, ResourceSlice, Snapshot
from allocator.pipeline import Pipeline
from allocator.records import record
from allocator.requirements import LABEL_HOSTNAME
from allocator.scheduling import hooks
from allocator.scheduling.daemonsets import DaemonPods, daemon_pods
from allocator.scheduling.devicecount import DeviceCounter
from allocator.scheduling.disruption import check_candidates
from allocator.scheduling.existingnode import EXISTING, ExistingNode, existing_nodes, hostname
from allocator.scheduling.fit import FilterMemo, instance_type_info
from allocator.scheduling.hostports import usage_of as host_port_usage_of
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
from allocator.scheduling.preferences import Preferences
from allocator.scheduling.queue import PodSets, collect_pods, deleting_nodes
from allocator.scheduling.refusalcache import RefusalCache
from allocator.scheduling.runstate import RunState
from allocator.scheduling.scheduler import Scheduler
from allocator.scheduling.topology import Topology, topology_needed
from allocator.scheduling.topologydomaingroup import build_domain_groups
from allocator.scheduling.tuning import DEFAULT_TUNING, Tuning
from allocator.scheduling.volumes import RunVolumes, Storage
from allocator.scheduling.volumes import usage_of as volume_usage_of
from allocator.trace import Trace


@record
class Run:
    """A run as composed: scheduler, allocator, pipeline and the pods to place."""

    scheduler: Scheduler
    allocator: Allocator
    pipeline: Pipeline  # the run's features (``pipeline.gates``) and checks
    pods: PodSets
    pod_claims: dict[str, PodClaims]
    generated_claims: dict[str, ResourceClaim]
    universe: list[ResourceSlice]
    disrupted: list[str]
    seed: set = field(default_factory=set)


def build_run(
    snapshot: Snapshot,
    pipeline: Pipeline,
    trace: Trace,
    *,
    timeout: float,
    disrupt: Sequence[str] = (),
    tuning: Tuning = DEFAULT_TUNING,
) -> Run:
    """``pipeline``: the run's features (its gates), device checks and the rest of the DRA
    features' wiring (``allocator/pipeline.py``); ``timeout``: of each Allocate's search;
    ``disrupt``: the nodes whose disruption is simulated; ``tuning``: the scheduler's fast
    paths."""
    disrupted = check_candidates(snapshot, list(disrupt))
    going_away = deleting_nodes(snapshot.nodes, snapshot.node_claims) | set(disrupted)
    storage = Storage.of(snapshot)
    pods = collect_pods(snapshot.pods, going_away, set(disrupted), storage)
    managed = managed_nodes(snapshot)
    uninitialized = {
        name for name, node in snapshot.nodes.items() if not is_initialized(node, managed)
    }
    universe = slice_universe(snapshot.resource_slices, snapshot.nodes, uninitialized | going_away)
    seed = allocated_device_seed(
        snapshot.resource_claims, pods.deleting, pipeline.reallocation_predicates
    )
    infos = {name: instance_type_info(it) for name, it in snapshot.instance_types.items()}
    per_pool = node_pool_instance_types(snapshot, infos)
    bindings = AttributeBindings.build(binding_instance_types(snapshot, per_pool))
    allocator = Allocator(
        universe,
        seed,
        bindings,
        snapshot.device_classes,
        pipeline=pipeline,
        deleting_pods=pods.deleting,
        namespaces=snapshot.namespaces,
        timeout=timeout,
        device_taint_rules=snapshot.device_taint_rules,
        resource_claims=snapshot.resource_claims,
        nodes=snapshot.nodes,
    )

    generated = generate_template_claims(pods.pending, snapshot)
    pod_claims = {pod.key: resolve_pod_claims(pod, snapshot, generated) for pod in pods.pending}
    _attach_extended_claims(snapshot, pipeline.gates, pods.pending, pod_claims)

    # As Karpenter's NewScheduler: the NodePools ask which DaemonSet pods their instance types
    # run first, the existing nodes after them (DaemonPods says why the order matters).
    daemons = DaemonPods(daemon_pods(snapshot.daemon_sets, snapshot.pods))
    templates = node_claim_templates(snapshot, per_pool, going_away, infos, daemons)
    existing = existing_nodes(
        snapshot,
        managed=managed,
        excluded_nodes=going_away,
        bound_pods=pods.bound,
        infos=infos,
        daemons=daemons,
    )
    _count_usage(existing, pods.bound, snapshot, storage)
    counter = DeviceCounter(
        universe,
        seed,
        {t.name: snapshot.nodes[t.name].labels for t in existing if t.kind == EXISTING},
    )
    # The fast paths (see Tuning); off only to prove that decisions do not depend on them.
    allocator.fresh_funnels = {} if tuning.nodeclaim_caches else None
    allocator.alike_funnels = {} if tuning.funnel_refusal else None
    allocator.share_shapes = tuning.shape_memo
    state = RunState(
        allocator=allocator,
        cache=RefusalCache(
            enabled=tuning.funnel_refusal,
            nodeclaim_caches=tuning.nodeclaim_caches,
            explain_recorded=tuning.nodeclaim_caches and tuning.explain_recorded,
            nodeclaims_reach_cluster=allocator.universe.reaches_unnamed_nodes,
        ),
        deleting_pods=pods.deleting,
        counter=counter,
        trace=trace,
        topology=_topology(snapshot, pods, existing, infos),
        volumes=RunVolumes(storage, pods.volume_topology),
        filter_memo=(
            FilterMemo(infos.values(), indexed=tuning.instance_type_index)
            if tuning.nodeclaim_caches
            else None
        ),
    )
    # Who holds a device, for the funnel's "allocated" messages (explanation/messages.py).
    allocator.wording.holders = HolderIndex(
        allocator.resource_claims, allocator.claim_metadata, allocator.tracker, state.claim_users
    )
    if tuning.funnel_refusal:  # selector refusals worded once per values read
        allocator.wording.selector_words = {}
    # Relaxing tolerates PreferNoSchedule taints only where a NodePool has one (Karpenter's).
    prefer_no_schedule = any(
        t.effect == "PreferNoSchedule" for pool in snapshot.node_pools.values() for t in pool.taints
    )
    scheduler = Scheduler(
        state=state,
        existing=existing,
        templates=templates,
        names=NodeClaimNames(set(snapshot.node_claims) | set(snapshot.nodes)),
        preferences=Preferences(tolerate_prefer_no_schedule=prefer_no_schedule),
    )
    return Run(
        scheduler, allocator, pipeline, pods, pod_claims, generated, universe, disrupted, seed
    )


def _count_usage(
    existing: list[ExistingNode], bound: list[Pod], snapshot: Snapshot, storage: Storage
) -> None:
    """Each existing node's host ports and attached volumes: those of the pods bound to it,
    against its CSINode's attach limits (a NodeClaim without a node starts empty)."""
    by_node: dict[str, list[Pod]] = {}
    for pod in bound:
        by_node.setdefault(pod.node_name or "", []).append(pod)
    for node in existing:
        pods = by_node.get(node.node_name, []) if node.node_name else []
        csi_node = snapshot.csi_nodes.get(node.node_name) if node.node_name else None
        node.host_port_usage = host_port_usage_of(pods)
        node.volume_usage = volume_usage_of(csi_node, pods, storage)


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


def _attach_extended_claims(
    snapshot: Snapshot,
    gates: FeatureGates,
    pending: list[Pod],
    pod_claims: dict[str, PodClaims],
) -> None:
    """DRAExtendedResource: each pending pod's claim for the extended resources a DeviceClass
    serves comes last among its claims, as kube-scheduler puts it."""
    from allocator.features import extendedresources as ext

    if not gates.enabled(ext.GATE):
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
