"""The device-check pipeline: everything that decides whether a device may serve a request,
in order, built once per run from the feature gates and handed to the Allocator.

The upstream structured allocator takes an explicit ``Features`` value and kube-scheduler builds
each profile's plugins explicitly; here ``build_pipeline(gates)`` is the one place that says
which checks run, in which order, for which gate. No module keeps a table that importing fills
in: the Allocator gets its ``Pipeline`` at construction and passes it to Request Validation,
the DFS and the refusal funnel (which runs the very same list of checks, in the same order).

``core_pipeline()`` is the design's core without any DRA feature (pool, allocated, selector,
constraint, topology; ``matchAttribute`` only; no FirstAvailable), kept constructible so the
design's plain behaviour stays testable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from allocator.claims import reserved_only_by_deleting_pods
from allocator.constraints import ConstraintParser, parse_match_attribute
from allocator.dfs import (
    AllocatedCheck,
    CheckFactory,
    ConstraintCheck,
    PoolCheck,
    SelectorCheck,
    TopologyCheck,
)
from allocator.features import (
    adminaccess,
    attributes,
    bindingconditions,
    capacity,
    counters,
    distinct,
    nodeallocatable,
    nodeoperations,
    prioritized,
    taints,
)
from allocator.features.gates import ALL_ON, FeatureGates
from allocator.features.state import EXTENSION, FeatureState
from allocator.model import DeviceID, PoolKey
from allocator.validation import FirstAvailableHandler, RequestValidator

Hook = Callable[..., None]


@dataclass(frozen=True, slots=True)
class DeviceCheckSpec:
    """One device check: its name (the trace's reason code family) and its factory, called
    once per instance type's DFS with the DFSContext; the factory may return None when the
    check has nothing to do there (no shared counters in reach, no feature state)."""

    name: str
    factory: CheckFactory


@dataclass(frozen=True, slots=True)
class Pipeline:
    """What one run's Allocator applies, in order.

    - ``device_checks``: eligibility, in search order; a device is refused by the first
      check that refuses it (the DFS's ``try_add`` and the funnel's prefilter alike);
    - ``constraint_parsers``: constraint kind -> parser (an unknown kind is refused);
    - ``first_available``: Request Validation of ``firstAvailable`` requests, or None (refused);
    - ``request_validators``: run on every validated (sub)request;
    - ``pool_validators``: why a whole pool is invalid (key, newest slices) -> str | None;
    - ``reallocation_predicates``: an in-cluster allocation the DFS re-runs;
    - ``reusable``: a device that may fill several slots of one request (ctx, cand) -> bool;
    - hooks: ``setup(allocator)`` at construction, ``commit(allocator, node_claim_id, it,
      path)``, ``release(allocator, node_claim_id, it)``, ``result(allocator, node_claim,
      claims, result, per_it_paths, pod, template_slices_by_it)``.
    """

    gates: FeatureGates
    device_checks: tuple[DeviceCheckSpec, ...]
    constraint_parsers: tuple[tuple[str, ConstraintParser], ...]
    first_available: FirstAvailableHandler | None = None
    request_validators: tuple[RequestValidator, ...] = ()
    pool_validators: tuple[Callable[..., str | None], ...] = ()
    reallocation_predicates: tuple[Callable[..., bool], ...] = ()
    reusable: tuple[Callable[..., bool], ...] = ()
    setup_hooks: tuple[Hook, ...] = ()
    commit_hooks: tuple[Hook, ...] = ()
    release_hooks: tuple[Hook, ...] = ()
    result_hooks: tuple[Hook, ...] = ()

    @property
    def check_names(self) -> list[str]:
        return [c.name for c in self.device_checks]

    def constraint_parser(self, kind: str) -> ConstraintParser | None:
        for name, parser in self.constraint_parsers:
            if name == kind:
                return parser
        return None


def core_pipeline(gates: FeatureGates = ALL_ON) -> Pipeline:
    """The design's core: the pool check (incomplete or invalid pools) and the four
    eligibility checks, ``matchAttribute``, nothing else."""
    return Pipeline(
        gates=gates,
        device_checks=(
            DeviceCheckSpec("pool", PoolCheck),  # incomplete or invalid pools (Karpenter)
            DeviceCheckSpec("allocated", AllocatedCheck),
            DeviceCheckSpec("selector", SelectorCheck),
            DeviceCheckSpec("constraint", ConstraintCheck),
            DeviceCheckSpec("topology", TopologyCheck),
        ),
        constraint_parsers=(("matchAttribute", parse_match_attribute),),
    )


def build_pipeline(gates: FeatureGates = ALL_ON) -> Pipeline:
    """The core with the DRA features the gates turn on. A gate that only changes how a check
    decides (binding conditions, partitionable devices, list-typed attributes, ...) is read by
    that check; a gate whose whole check goes away when off is applied here."""

    def on(gate: str) -> bool:
        return gates.enabled(gate)

    # Admin access and shared devices relax "allocated"; with both off it is the core's.
    allocated = (
        adminaccess.FeatureAllocatedCheck
        if on(adminaccess.GATE) or on(capacity.GATE)
        else AllocatedCheck
    )
    checks = [
        DeviceCheckSpec("pool", PoolCheck),  # incomplete or invalid pools (Karpenter)
        DeviceCheckSpec("allocated", allocated),
        DeviceCheckSpec("selector", SelectorCheck),
        DeviceCheckSpec("taint", taints.taint_check) if on(taints.GATE) else None,
        DeviceCheckSpec("binding-condition", bindingconditions.BindingConditionCheck),
        DeviceCheckSpec("node-operations", nodeoperations.node_operations_check)
        if on(nodeoperations.GATE)
        else None,
        DeviceCheckSpec("constraint", ConstraintCheck),
        DeviceCheckSpec("counter", counters.counter_check),
        DeviceCheckSpec("capacity", capacity.capacity_check) if on(capacity.GATE) else None,
        DeviceCheckSpec("topology", TopologyCheck),
    ]
    return Pipeline(
        gates=gates,
        device_checks=tuple(c for c in checks if c is not None),
        constraint_parsers=(
            ("matchAttribute", attributes.parse_match_attribute),  # list-typed values
            ("distinctAttribute", distinct.parse_distinct),  # refused with its gate off
        ),
        first_available=prioritized.first_available,  # refused with its gate off
        request_validators=(adminaccess.validate_admin_access, capacity.validate_capacity),
        pool_validators=(counters.pool_counter_problem,),
        reallocation_predicates=(bindingconditions.reallocation_predicate(gates),),
        reusable=(capacity.serves_several_slots,) if on(capacity.GATE) else (),
        setup_hooks=(setup_features,),
        commit_hooks=(counters.commit_counters, capacity.commit_shares),
        release_hooks=(counters.release_counters, capacity.release_shares),
        result_hooks=(nodeallocatable.add_node_resources,) if on(nodeallocatable.GATE) else (),
    )


# --- the features' state for one Allocator ------------------------------------------------------


def _freed(allocator: Any, claim) -> bool:
    if claim.allocation is None:
        return False
    if reserved_only_by_deleting_pods(claim, allocator.deleting_pods):
        return True
    return any(p(claim) for p in allocator.pipeline.reallocation_predicates)


def setup_features(allocator: Any) -> None:
    """Setup hook: the taint index, the counter and capacity ledgers, the device index."""
    gates = allocator.gates
    claims = list((getattr(allocator, "resource_claims", None) or {}).values())
    freed = [c.key for c in claims if _freed(allocator, c)]
    cap = capacity.CapacityLedger(claims, freed, gates)
    devices: dict[DeviceID, Any] = {}
    grouped: set[PoolKey] = set()
    for info in allocator.universe.pools.values():
        for s in info.slices:
            for d in s.devices:
                devices[DeviceID(s.driver, s.pool, d.name)] = d
        if counters.pool_has_compatibility_groups(d for s in info.slices for d in s.devices):
            grouped.add(info.key)
    consuming = set(allocator.tracker.preallocated) | set(cap.seed)
    allocator.extensions[EXTENSION] = FeatureState(
        gates=gates,
        taints=taints.TaintIndex(
            getattr(allocator, "device_taint_rules", None) or (),
            allocator.device_classes,
            engine=allocator.engine,
            gates=gates,
        ),
        counters=counters.CounterLedger(allocator.in_cluster_slices, consuming, gates),
        capacity=cap,
        devices=devices,
        grouped_pools=grouped,
        nodes=getattr(allocator, "nodes", None),
    )
