"""Wiring one run together (design: Scheduler Initialization, steps 1-4)."""

from __future__ import annotations

from dataclasses import dataclass, field

from allocator.model import Pod, ResourceClaim, ResourceSlice, Snapshot
from allocator.scheduling.daemonsets import daemon_pods
from allocator.scheduling.devicecount import DeviceCounter
from allocator.scheduling.disruption import check_candidates
from allocator.scheduling.fit import (
    NODEPOOL,
    first_compatible_term,
    instance_type_info,
    max_capacity,
    node_pool_requirements,
    pod_requests,
    pod_requirement_terms,
    to_milli,
    untolerated_taint,
)
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
from allocator.scheduling.loop import PoolPlan, Scheduler
from allocator.scheduling.nodeclaims import EXISTING, existing_targets
from allocator.scheduling.queue import PodSets, collect_pods, deleting_nodes
from allocator.scheduling.volumes import Storage
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
    pods = collect_pods(snapshot.pods, going_away, set(disrupted), Storage.of(snapshot))
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
    targets = existing_targets(
        snapshot,
        managed=managed,
        excluded_nodes=going_away,
        bound_pods=pods.bound,
        infos=infos,
    )
    counter = DeviceCounter(
        universe,
        seed,
        {t.name: snapshot.nodes[t.name].labels for t in targets if t.kind == EXISTING},
    )
    plans = _pool_plans(snapshot, per_pool, disrupted, infos)
    reserved = set(snapshot.node_claims) | set(snapshot.nodes)
    scheduler = Scheduler(
        allocator=allocator,
        existing=targets,
        pools=plans,
        deleting_pods=pods.deleting,
        device_counter=counter,
        reserved_names=reserved,
        trace=trace,
        allocation_errors=(AllocationError,),
        funnel_refusal=getattr(options, "funnel_refusal", True),
        nodeclaim_caches=getattr(options, "nodeclaim_caches", True),
        nodeclaims_reach_cluster=any(s.node_name is None for s in universe),
    )
    return Run(scheduler, allocator, pods, pod_claims, generated, universe, disrupted, seed)


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


def _pool_plans(snapshot: Snapshot, per_pool, disrupted: list[str], infos) -> list[PoolPlan]:
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

    plans = []
    daemons = daemon_pods(snapshot.daemon_sets, snapshot.pods)
    pools = sorted(snapshot.node_pools.values(), key=lambda p: (-p.weight, p.name))
    for pool in pools:
        requirements = node_pool_requirements(pool)
        plans.append(
            PoolPlan(
                pool=pool,
                requirements=requirements,
                instance_types=per_pool.get(pool.name, []),
                taints=list(pool.taints),
                limits=to_milli(pool.limits) if pool.limits else None,
                usage=usage.get(pool.name, {}),
                daemon_overhead=daemon_overhead(daemons, requirements, pool.taints),
            )
        )
    return plans


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
