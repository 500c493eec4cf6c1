"""The device-check pipeline: everything that decides whether a device may serve a request,
in order, built once per run from the feature gates and handed to the Allocator.

The upstream structured allocator takes an explicit ``Features`` value and kube-scheduler builds
each profile's plugins explicitly; here ``build_pipeline(gates)`` is the one place that says
which checks run, in which order, for which gate. No module keeps a table that importing fills
in: the Allocator gets its ``Pipeline`` at construction and passes what each part needs to
Request Validation, the DFS and the refusal funnel (which runs the very same list of checks, in
the same order). The Pipeline's ``gates`` are the run's features: everything below reads them
from it.

``core_pipeline(gates)`` is the design's core without any DRA feature (pool, allocated,
selector, constraint, topology; ``matchAttribute`` only; no FirstAvailable), kept
constructible so the design's plain behaviour stays testable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from allocator.checks import CheckFactory, DeviceCheck, PathEntry, Reusable, SearchState
from allocator.claims import ClaimOutcome
from allocator.constraints import ConstraintParser, parse_match_attribute
from allocator.eligibility import (
    AllocatedCheck,
    ConstraintCheck,
    PoolCheck,
    SelectorCheck,
    TopologyCheck,
)
from allocator.featuregates import FeatureGates
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
from allocator.features.state import FeatureInputs, FeatureState, setup_features
from allocator.model import (
    Device,
    DeviceID,
    Pod,
    PoolKey,
    ResourceClaim,
    ResourceSlice,
    ResourceSliceTemplate,
)
from allocator.quantity import Quantity
from allocator.records import record
from allocator.validation import FirstAvailableHandler, RequestValidator

# (in-cluster devices by ID, gates, claims, their outcomes, paths per instance type, pod,
# template slices per instance type) -> what the devices add to the pod's node resources.
NodeResources = Callable[
    [
        Mapping[DeviceID, Device],
        FeatureGates,
        Sequence[ResourceClaim],
        Sequence[ClaimOutcome],
        Mapping[str, Sequence[PathEntry]],
        "Pod | None",
        Mapping[str, Sequence[ResourceSliceTemplate]],
    ],
    dict[str, Quantity],
]


@record(frozen=True)
class DeviceCheckSpec:
    """One device check: its name (the trace's reason code family) and its factory, called
    once per instance type's search; the factory may return None when the check has nothing
    to do there."""

    name: str
    factory: CheckFactory

    def bind(self, features: FeatureState | None) -> CheckFactory:
        return self.factory


@record(frozen=True)
class FeatureCheckSpec:
    """A DRA feature's check that reads what the features keep for the Allocator (a ledger,
    the taint index): its factory gets that state too. Without it (a pipeline without the
    features' ``setup``) the check has nothing to do."""

    name: str
    factory: Callable[[SearchState, FeatureState], DeviceCheck | None]

    def bind(self, features: FeatureState | None) -> CheckFactory:
        if features is None:
            return _nothing
        factory = self.factory
        return lambda ctx: factory(ctx, features)


def _nothing(ctx: SearchState) -> None:
    return None


@record(frozen=True)
class Pipeline:
    """What one run's Allocator applies, in order.

    - ``gates``: the run's feature gates, the one value everything below reads;
    - ``device_checks``: eligibility, in search order; a device is refused by the first
      check that refuses it (the DFS's ``try_add`` and the funnel's prefilter alike);
    - ``constraint_parsers``: constraint kind -> parser (an unknown kind is refused);
    - ``first_available``: Request Validation of ``firstAvailable`` requests, or None (refused);
    - ``request_validators``: run on every validated (sub)request;
    - ``pool_validators``: why a whole pool is invalid (key, newest slices) -> str | None;
    - ``reallocation_predicates``: an in-cluster allocation the DFS re-runs;
    - ``reusable``: a device that may fill several slots of one request (search, cand) -> bool;
    - ``setup``: what the features keep for one Allocator (ledgers, taint index), built when
      the Allocator is; commits and releases update it;
    - ``node_resources``: what a successful Allocate's devices add to the pod's node
      resources (DRANodeAllocatableResources).
    """

    gates: FeatureGates
    device_checks: tuple[DeviceCheckSpec | FeatureCheckSpec, ...]
    constraint_parsers: tuple[tuple[str, ConstraintParser], ...]
    first_available: FirstAvailableHandler | None = None
    request_validators: tuple[RequestValidator, ...] = ()
    pool_validators: tuple[Callable[[PoolKey, Sequence[ResourceSlice]], str | None], ...] = ()
    reallocation_predicates: tuple[Callable[[ResourceClaim], bool], ...] = ()
    reusable: tuple[Reusable, ...] = ()
    setup: Callable[[FeatureInputs], FeatureState] | None = None
    node_resources: NodeResources | None = None

    @property
    def check_names(self) -> list[str]:
        return [c.name for c in self.device_checks]

    def constraint_parser(self, kind: str) -> ConstraintParser | None:
        for name, parser in self.constraint_parsers:
            if name == kind:
                return parser
        return None

    def check_factories(self, features: FeatureState | None) -> tuple[CheckFactory, ...]:
        """The device checks' factories for an Allocator with this features' state."""
        return tuple(spec.bind(features) for spec in self.device_checks)


def core_pipeline(gates: FeatureGates) -> Pipeline:
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


def build_pipeline(gates: FeatureGates) -> Pipeline:
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
        FeatureCheckSpec("taint", _taint_check) if on(taints.GATE) else None,
        DeviceCheckSpec("binding-condition", bindingconditions.BindingConditionCheck),
        FeatureCheckSpec("node-operations", _node_operations_check)
        if on(nodeoperations.GATE)
        else None,
        DeviceCheckSpec("constraint", ConstraintCheck),
        FeatureCheckSpec("counter", _counter_check),
        FeatureCheckSpec("capacity", _capacity_check) if on(capacity.GATE) else None,
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
        setup=setup_features,
        node_resources=nodeallocatable.node_resources if on(nodeallocatable.GATE) else None,
    )


# --- what each feature's check reads of the features' state ---------------------------------


def _taint_check(ctx: SearchState, features: FeatureState) -> DeviceCheck:
    return taints.TaintCheck(ctx, features.taints)


def _node_operations_check(ctx: SearchState, features: FeatureState) -> DeviceCheck:
    return nodeoperations.NodeOperationsCheck(ctx, features.nodes)


def _counter_check(ctx: SearchState, features: FeatureState) -> DeviceCheck | None:
    return counters.counter_check(ctx, features.counters)


def _capacity_check(ctx: SearchState, features: FeatureState) -> DeviceCheck:
    return capacity.CapacityCheck(ctx, features.capacity)
