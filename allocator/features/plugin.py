"""Plugs the DRA features into the allocator core's hook points (importing registers them).

- device checks (``allocator.dfs.DEVICE_CHECKS``): ``allocated`` is replaced by a version that
  knows admin access and shared devices; ``taint`` (250), ``binding-condition`` (260),
  ``node-operations`` (270), ``counter`` (350) and ``capacity`` (360) are added;
- constraint parsers: ``distinctAttribute``, and ``matchAttribute`` with list-typed values;
- FirstAvailable requests (DRAPrioritizedList) and request validators (admin access, capacity
  requests without the gate);
- claims showing a binding failure condition are reallocated;
- Allocator hooks: feature state at construction (taint index, counter and capacity ledgers),
  commit / release of counters and capacity shares, and the node resources devices add.

Each check's reason code is the one the trace shows: taint, binding-condition, counter,
compatibility-group, capacity, distinct, admin-access, node-operations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from allocator import allocator as core
from allocator import claims as core_claims
from allocator import constraints as core_constraints
from allocator import dfs as core_dfs
from allocator import pools as core_pools
from allocator import validation as core_validation
from allocator.errors import ValidationError
from allocator.features import bindingconditions, capacity, counters, nodeoperations
from allocator.features.adminaccess import AdminAccessError, check_admin_access
from allocator.features.attributes import as_value_set, is_list_value
from allocator.features.distinct import (
    LIST_GATE,
    DistinctAttributeConstraint,
    distinct_shortfall,
)
from allocator.features.gates import ALL_ON, FeatureGates
from allocator.features.nodeallocatable import (
    AllocatedDevice as NodeResourceDevice,
)
from allocator.features.nodeallocatable import (
    NodeAllocatableError,
    dra_node_resources,
    parse_node_allocatable,
)
from allocator.features.prioritized import PrioritizedListError, request_alternatives
from allocator.features.taints import (
    TaintIndex,
    pod_claim_entries,
    taint_reason,
    toleration_to_json,
)
from allocator.model import Device, DeviceID, Node, PoolKey, ResourceClaim
from allocator.pools import TEMPLATE, DeviceWithID
from allocator.quantity import Quantity, QuantityError

EXTENSION = "features"


@dataclass(slots=True)
class FeatureState:
    """What the features keep for one Allocator (one scheduling loop)."""

    gates: FeatureGates
    taints: TaintIndex
    counters: counters.CounterLedger
    capacity: capacity.CapacityLedger
    devices: dict[DeviceID, Device] = field(default_factory=dict)
    grouped_pools: set[PoolKey] = field(default_factory=set)
    nodes: dict[str, Node] | None = None
    # id(template list) -> (the list, whether its templates use shared counters)
    template_counters: dict[int, tuple[list, bool]] = field(default_factory=dict)


def state_of(extensions: dict[str, Any]) -> FeatureState | None:
    return extensions.get(EXTENSION)


def _freed(claim: ResourceClaim, deleting_pods: frozenset[str]) -> bool:
    if claim.allocation is None:
        return False
    if core_claims.reserved_only_by_deleting_pods(claim, deleting_pods):
        return True
    return any(p(claim) for p in core_claims.REALLOCATION_PREDICATES)


def setup_allocator(allocator: core.Allocator) -> None:
    gates = allocator.gates
    claims = list((getattr(allocator, "resource_claims", None) or {}).values())
    freed = [c.key for c in claims if _freed(c, allocator.deleting_pods)]
    cap = capacity.CapacityLedger(claims, freed, gates)
    devices: dict[DeviceID, Device] = {}
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
        taints=TaintIndex(
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


# --- helpers -----------------------------------------------------------------------------------


def _is_admin(request: core_validation.RequestData) -> bool:
    exact = request.exact
    # The API has no adminAccess on subrequests.
    return exact is not None and exact.admin_access and "/" not in request.name


def _template(cand: DeviceWithID) -> bool:
    return cand.source == TEMPLATE


# --- device checks -----------------------------------------------------------------------------


class FeatureAllocatedCheck(core_dfs.AllocatedCheck):
    """Check 1 with admin access and shared devices: an admin request may take allocated
    devices (not one its own claim already has) and reserves nothing; a device that allows
    multiple allocations is limited by its capacity, not by who else holds it."""

    name = "allocated"
    prefilter_it_independent = True  # in-cluster answers hold for every instance type

    def __init__(self, ctx: core_dfs.DFSContext) -> None:
        core_dfs.AllocatedCheck.__init__(self, ctx)
        self.gates = ctx.gates
        self.sharing = ctx.gates.enabled(capacity.GATE)  # read once per DFS, not per device
        self.preallocated = ctx.tracker.preallocated
        self.holders: dict[tuple[DeviceID, bool], list[int]] = {}
        self.kinds: list[str] = []

    def prefilter(self, ctx, claim, request, cand):
        if _is_admin(request):
            return None
        if self.sharing and cand.device.allow_multiple_allocations:
            if not _template(cand) and cand.id in self.preallocated:
                return ("allocated", f"device {cand.id} is already allocated")
            return None
        return core_dfs.AllocatedCheck.prefilter(self, ctx, claim, request, cand)

    def try_add(self, ctx, step, cand):
        key = (cand.id, _template(cand))
        held = self.holders.get(key, ())
        shared = self.sharing and cand.device.allow_multiple_allocations
        if _is_admin(step.request):
            if step.claim.index in held and not shared:
                return (
                    "admin-access",
                    f"device {cand.id} is already allocated for claim {step.claim.key}",
                )
            kind = "admin"
        elif shared:
            if not _template(cand) and cand.id in self.preallocated:
                return ("allocated", f"device {cand.id} is already allocated")
            kind = "shared"
        else:
            if held:
                return ("allocated", f"device {cand.id} is already allocated in this search")
            rejection = core_dfs.AllocatedCheck.try_add(self, ctx, step, cand)
            if rejection is not None:
                return rejection
            kind = "exclusive"
        self.holders.setdefault(key, []).append(step.claim.index)
        self.kinds.append(kind)
        if kind != "exclusive":
            ctx.extra["_no_reserve"] = True
        if kind == "admin":
            ctx.extra["adminAccess"] = True
        return None

    def remove(self, ctx, step, cand):
        kind = self.kinds.pop()
        key = (cand.id, _template(cand))
        held = self.holders[key]
        held.pop()
        if not held:
            del self.holders[key]
        if kind == "exclusive":
            core_dfs.AllocatedCheck.remove(self, ctx, step, cand)


class TaintCheck:
    name = "taint"
    prefilter_it_independent = True

    def __init__(self, state: FeatureState) -> None:
        self.index = state.taints

    def prefilter(self, ctx, claim, request, cand):
        tolerations = request.exact.tolerations if request.exact is not None else []
        blocking = self.index.blocking(cand.id, cand.device, tolerations)
        if blocking:
            return ("taint", taint_reason(cand.id, blocking))
        return None

    def try_add(self, ctx, step, cand):
        rejection = self.prefilter(ctx, step.claim, step.request, cand)
        if rejection is not None:
            return rejection
        if step.request.exact is not None:
            used = self.index.used_tolerations(cand.id, cand.device, step.request.exact.tolerations)
            if used:
                ctx.extra["tolerations"] = [toleration_to_json(t) for t in used]
        return None

    def remove(self, ctx, step, cand):
        return None


class BindingConditionCheck:
    name = "binding-condition"
    prefilter_it_independent = True

    def __init__(self, ctx: core_dfs.DFSContext) -> None:
        self.enabled = ctx.gates.enabled(bindingconditions.GATE)

    def prefilter(self, ctx, claim, request, cand):
        if not self.enabled and cand.device.binding_conditions:
            return ("binding-condition", bindingconditions.unselectable_reason(cand.id))
        return None

    def try_add(self, ctx, step, cand):
        rejection = self.prefilter(ctx, step.claim, step.request, cand)
        if rejection is not None:
            return rejection
        fields = bindingconditions.device_result_fields(cand.device, ctx.gates)
        if fields:
            ctx.extra.update(fields)
        return None

    def remove(self, ctx, step, cand):
        return None


class NodeOperationsCheck:
    """Copies the slice's skipNodeOperations into the result; an existing node must declare
    DRAOptionalNodeOperations to get such devices."""

    name = "node-operations"
    prefilter_it_independent = True  # depends on the node, not the instance type

    def __init__(self, ctx: core_dfs.DFSContext, state: FeatureState | None) -> None:
        node = None
        nodes = state.nodes if state is not None else None
        if nodes is not None and ctx.node_claim_id.startswith("node/"):
            node = nodes.get(ctx.node_claim_id.removeprefix("node/"))
        self.node = node
        self.check_node = node is not None
        self.cache: dict[int, tuple[str, ...]] = {}  # per slice object
        self.template_ops: dict[str, dict[int, tuple[str, ...]]] = {}  # IT -> device object

    def _template_operations(self, ctx, cand) -> tuple[str, ...]:
        """A template's own skipNodeOperations (the slice the new node's driver publishes)."""
        it = cand.instance_type or ctx.instance_type
        by_device = self.template_ops.get(it)
        if by_device is None:
            by_device = self.template_ops[it] = {}
            templates = (getattr(ctx, "template_slices_by_it", None) or {}).get(it, ())
            for t in templates:
                ops = nodeoperations.skip_node_operations(t.raw, ctx.gates)
                if ops:
                    for d in t.devices:
                        by_device[id(d)] = ops
        return by_device.get(id(cand.device), ())

    def _operations(self, ctx, cand) -> tuple[str, ...]:
        if cand.slice is None:
            return self._template_operations(ctx, cand) if _template(cand) else ()
        key = id(cand.slice)
        ops = self.cache.get(key)
        if ops is None:
            ops = self.cache[key] = nodeoperations.skip_node_operations(cand.slice.raw, ctx.gates)
        return ops

    def prefilter(self, ctx, claim, request, cand):
        if not self.check_node:
            return None  # a new NodeClaim declares every feature
        ops = self._operations(ctx, cand)
        if ops:
            problem = nodeoperations.node_problem(self.node, ops)
            if problem is not None:
                return ("node-operations", f"device {cand.id}: {problem}")
        return None

    def try_add(self, ctx, step, cand):
        rejection = self.prefilter(ctx, step.claim, step.request, cand)
        if rejection is not None:
            return rejection
        ops = self._operations(ctx, cand)
        if ops:
            ctx.extra["skipNodeOperations"] = list(ops)
        return None

    def remove(self, ctx, step, cand):
        return None


class CounterCheck:
    # Not IT-independent: the counters a NodeClaim's own instance type committed count.
    name = "counter"

    def __init__(self, ctx: core_dfs.DFSContext, state: FeatureState) -> None:
        slices_by_it = getattr(ctx, "template_slices_by_it", None) or {}
        templates = slices_by_it.get(ctx.instance_type, [])
        self.view = state.counters.view(ctx.node_claim_id, ctx.instance_type, templates)
        self.gates = ctx.gates
        self.groups_on = ctx.gates.enabled(counters.GROUPS_GATE)
        self.grouped = set(state.grouped_pools)
        for t in templates:
            if counters.pool_has_compatibility_groups(t.devices):
                self.grouped.add(PoolKey(t.driver, t.pool))
        self.applied: list[bool] = []

    def prefilter(self, ctx, claim, request, cand):
        if not self.groups_on and cand.pool_key in self.grouped:
            return (
                "compatibility-group",
                f"pool {cand.id.driver}/{cand.id.pool} declares compatibility groups, but the "
                f"{counters.GROUPS_GATE} feature is disabled: the pool is treated as incomplete",
            )
        device = cand.device
        if not device.consumes_counters:
            return None
        blocked = counters.gate_blocks_device(device, self.gates)
        if blocked:
            return ("counter", blocked)
        pool = self.view.template_pools if _template(cand) else self.view.ledger.pools
        counter_pool = pool.get(cand.pool_key)
        if counter_pool is None:
            return ("counter", f"device {cand.id}: its pool defines no shared counters")
        if counter_pool.error:
            return ("counter", counter_pool.error)
        if _is_admin(request):
            return None
        # Counters used up by devices allocated before this Allocate: no path can fit it.
        reason = self.view.static_check(cand.id, device, template=_template(cand))
        if reason is not None:
            if counters.is_compatibility_group_failure(reason):
                return ("compatibility-group", reason.removeprefix("compatibility-group: "))
            return ("counter", reason)
        return None

    def try_add(self, ctx, step, cand):
        rejection = self.prefilter(ctx, step.claim, step.request, cand)
        if rejection is not None:
            return rejection
        if _is_admin(step.request) or not cand.device.consumes_counters:
            self.applied.append(False)
            return None
        reason = self.view.try_add(cand.id, cand.device, template=_template(cand))
        if reason is not None:
            if counters.is_compatibility_group_failure(reason):
                return ("compatibility-group", reason.removeprefix("compatibility-group: "))
            return ("counter", reason)
        self.applied.append(True)
        return None

    def remove(self, ctx, step, cand):
        if self.applied.pop():
            self.view.remove(cand.id, cand.device, template=_template(cand))


class CapacityCheck:
    name = "capacity"
    prefilter_it_independent = True  # the static fit of a device; shares are checked in try_add

    def __init__(self, ctx: core_dfs.DFSContext, state: FeatureState) -> None:
        self.view = state.capacity.view(ctx.node_claim_id, ctx.instance_type)
        self.gates = ctx.gates
        self.taken: list[dict[str, Quantity] | None] = []

    def prefilter(self, ctx, claim, request, cand):
        if _is_admin(request):
            return None
        requirements = request.exact.capacity if request.exact is not None else None
        if requirements is None and not cand.device.allow_multiple_allocations:
            return None  # taken whole, nothing asked: every capacity fits
        try:
            amounts = capacity.consumption(cand.device, cand.id.driver, requirements)
        except capacity.CapacityError as e:
            return ("capacity", f"device {cand.id}: {e}")
        if amounts is None:
            return (
                "capacity",
                f"device {cand.id} cannot serve the capacity {request.name} requests "
                "(capacity missing or outside the device's request policy)",
            )
        problem = capacity.fits(cand.device, amounts)
        if problem is not None:
            return ("capacity", f"device {cand.id}: {problem}")
        return None

    def try_add(self, ctx, step, cand):
        if _is_admin(step.request):
            self.taken.append(None)
            return None
        requirements = step.request.exact.capacity if step.request.exact is not None else None
        if requirements is None and not cand.device.allow_multiple_allocations:
            self.taken.append(None)
            return None
        try:
            amounts, reason = self.view.try_take(
                cand.id, cand.device, requirements, template=_template(cand)
            )
        except capacity.CapacityError as e:
            return ("capacity", f"device {cand.id}: {e}")
        if reason is not None:
            return ("capacity", reason)
        if cand.device.allow_multiple_allocations and amounts is not None:
            ctx.extra["consumedCapacity"] = {k: v.canonical() for k, v in sorted(amounts.items())}
            ctx.extra["shareID"] = capacity.share_id(
                step.claim.key, step.request.name, cand.id, step.slot
            )
            ctx.extra["_share"] = amounts
            self.taken.append(amounts)
        else:
            self.taken.append(None)
        return None

    def remove(self, ctx, step, cand):
        amounts = self.taken.pop()
        if amounts:
            self.view.give_back(cand.id, amounts, template=_template(cand))


def _feature_allocated(ctx):
    return FeatureAllocatedCheck(ctx)


def _taint_factory(ctx):
    state = state_of(ctx.extensions)
    if state is None or not ctx.gates.enabled("DRADeviceTaints"):
        return None
    return TaintCheck(state)


def _binding_factory(ctx):
    return BindingConditionCheck(ctx)


def _node_operations_factory(ctx):
    if not ctx.gates.enabled(nodeoperations.GATE):
        return None
    return NodeOperationsCheck(ctx, state_of(ctx.extensions))


def _counter_factory(ctx):
    state = state_of(ctx.extensions)
    if state is None:
        return None
    templates = (getattr(ctx, "template_slices_by_it", None) or {}).get(ctx.instance_type, [])
    if not state.counters.pools and not _templates_use_counters(state, templates):
        return None  # no shared counters anywhere: nothing to check
    return CounterCheck(ctx, state)


def _templates_use_counters(state: FeatureState, templates) -> bool:
    """Whether an instance type's templates publish or consume counters (asked once per
    instance type's template list, not once per DFS)."""
    hit = state.template_counters.get(id(templates))
    if hit is None or hit[0] is not templates:
        uses = any(
            t.shared_counters or any(d.consumes_counters for d in t.devices) for t in templates
        )
        hit = state.template_counters[id(templates)] = (templates, uses)
    return hit[1]


def _capacity_factory(ctx):
    state = state_of(ctx.extensions)
    if state is None or not ctx.gates.enabled(capacity.GATE):
        return None
    return CapacityCheck(ctx, state)


# --- constraints -------------------------------------------------------------------------------


class DistinctConstraint:
    """``distinctAttribute`` in the core's Constraint protocol (trace reason ``distinct``)."""

    reason_code = "distinct"

    def __init__(self, attribute: str, request_names: frozenset[str], lists: bool) -> None:
        self.attribute = attribute
        self.request_names = request_names
        self.inner = DistinctAttributeConstraint(attribute, (), lists)

    def __repr__(self) -> str:
        return f"distinctAttribute {self.attribute}"

    def applies(self, request: str) -> bool:
        return core_constraints.request_in_scope(self.request_names, request)

    def add(self, request: str, cand: DeviceWithID) -> str | None:
        if not self.applies(request):
            return None
        if self.inner.add(request, None, cand.device, cand.id):
            return None
        return self.inner.last_failure or f"device {cand.id} is not distinct"

    def remove(self, request: str, cand: DeviceWithID) -> None:
        if self.applies(request):
            self.inner.remove(request, None, cand.device, cand.id)

    def set_binding_fallback(self, fallback) -> None:
        return None

    def feasibility(self, ctx, claim, step) -> str | None:
        """Enough distinct values left for the devices still to choose? (issue 11 item 6)"""
        need, candidates = ctx.remaining_demand(claim, step, self.applies)
        inner = self.inner
        return distinct_shortfall(
            self.attribute, inner._values, inner.list_semantics, need, candidates
        )

    def reset(self) -> None:
        self.inner._values.clear()


def _show(values: frozenset) -> str:
    return "[" + ", ".join(sorted(str(v) for _, v in values)) + "]"


# A pinned value: (type, value) for a scalar, a frozenset of (type, value) for list values.
Pin = tuple | frozenset


def _pin(value: Any) -> Pin:
    return as_value_set(value) if is_list_value(value) else (type(value), value)


def _meet(current: Pin, value: Any) -> Pin | None:
    """The pinned values that ``value`` keeps (None: no common value)."""
    if isinstance(current, frozenset) or is_list_value(value):
        have = current if isinstance(current, frozenset) else frozenset((current,))
        common = have & as_value_set(value)
        return common or None
    return current if current == (type(value), value) else None  # scalars: type and value


def _show_pin(pin: Pin) -> Any:
    if isinstance(pin, frozenset):
        return next(iter(pin))[1] if len(pin) == 1 else _show(pin)
    return pin[1]


class ListMatchAttributeConstraint(core_constraints.MatchAttributeConstraint):
    """``matchAttribute`` whose concrete path knows list-typed values: with the gate on the
    devices' value sets must keep a non-empty intersection (a scalar is a one-value set);
    with it off a list value matches nothing. Scalars compare by type and value."""

    __slots__ = ("lists", "stack")

    def __init__(self, attribute: str, request_names: frozenset[str], lists: bool) -> None:
        super().__init__(attribute, request_names)
        self.lists = lists
        self.stack: list[Pin] = []

    def check(self, cand: DeviceWithID) -> str | None:
        value = self._lookup(cand)
        if value is not None and not self.lists and is_list_value(value):
            return (
                f"device {cand.id} has a list-typed {self.attribute}, which needs the "
                f"{LIST_GATE} feature"
            )
        if self.mode == self.CONCRETE and value is not None:
            if _meet(self.stack[-1], value) is None:
                shown = _show(as_value_set(value)) if is_list_value(value) else value
                return f"device {cand.id} has {self.attribute}={shown}, not {self.value}"
            return None
        return super().check(cand)

    def add(self, request: str, cand: DeviceWithID) -> str | None:
        if not core_constraints.request_in_scope(self.request_names, request):
            return None
        reason = self.check(cand)
        if reason is not None:
            return reason
        value = self._lookup(cand)
        if self.mode is None:
            self.mode = self.CONCRETE if value is not None else self.BINDING
        if self.mode == self.CONCRETE:
            pin = _meet(self.stack[-1], value) if self.stack else _pin(value)
            self.stack.append(pin)
            self.value = _show_pin(pin)
        self.devices.append(cand)
        return None

    def remove(self, request: str, cand: DeviceWithID) -> None:
        if not core_constraints.request_in_scope(self.request_names, request):
            return
        if self.mode == self.CONCRETE:
            self.stack.pop()
        super().remove(request, cand)
        if self.stack:
            self.value = _show_pin(self.stack[-1])

    def reset(self) -> None:
        super().reset()
        self.stack.clear()


def _parse_distinct(dc, ctx) -> DistinctConstraint:
    gates = ctx.gates or ALL_ON
    if not gates.enabled(capacity.GATE):
        raise ValidationError(
            f"claim {ctx.claim_key}: unsupported constraint type 'distinctAttribute' (it needs "
            f"the {capacity.GATE} feature)"
        )
    return DistinctConstraint(
        dc.distinct_attribute, frozenset(dc.requests), gates.enabled(LIST_GATE)
    )


def _parse_match(dc, ctx) -> ListMatchAttributeConstraint:
    gates = ctx.gates or ALL_ON
    return ListMatchAttributeConstraint(
        dc.match_attribute, frozenset(dc.requests), gates.enabled(LIST_GATE)
    )


# --- validation --------------------------------------------------------------------------------


def _first_available(ctx: core_validation.ValidationContext, request) -> list:
    try:
        alternatives = request_alternatives(request, ctx.gates, ctx.claim_key)
    except PrioritizedListError as e:
        raise ValidationError(str(e)) from e
    return [
        core_validation.validate_exact_request(ctx, alt.result_name, alt.spec)
        for alt in alternatives
    ]


def _validate_admin_access(ctx, data) -> None:
    if not _is_admin(data):
        return
    try:
        check_admin_access(ctx.claim_key, data.name, ctx.namespaces, ctx.gates)
    except AdminAccessError as e:
        raise ValidationError(str(e)) from e


def _validate_capacity(ctx, data) -> None:
    if data.exact is None:
        return
    try:
        capacity.check_capacity_gate(data.exact, ctx.claim_key, data.name, ctx.gates)
    except capacity.CapacityError as e:
        raise ValidationError(str(e)) from e


# --- Allocator hooks ---------------------------------------------------------------------------


def _commit(allocator, node_claim_id: str, instance_type: str, path: list) -> None:
    state = state_of(allocator.extensions)
    if state is None:
        return
    cluster = [
        e.cand.id
        for e in path
        if not _template(e.cand)
        and e.cand.device.consumes_counters
        and not e.extra.get("adminAccess")
    ]
    template = [
        e.cand.id
        for e in path
        if _template(e.cand) and e.cand.device.consumes_counters and not e.extra.get("adminAccess")
    ]
    state.counters.commit(node_claim_id, instance_type, cluster, template)
    shares = [
        (e.cand.id, e.extra["_share"], _template(e.cand)) for e in path if "_share" in e.extra
    ]
    if shares:
        state.capacity.commit(node_claim_id, instance_type, shares)


def _release(allocator, node_claim_id: str, instance_type: str) -> None:
    state = state_of(allocator.extensions)
    if state is None:
        return
    state.counters.release_instance_type(node_claim_id, instance_type)
    state.capacity.release_instance_type(node_claim_id, instance_type)


def _parse_consumed(raw: dict | None) -> dict[str, Quantity] | None:
    if not raw:
        return None
    try:
        return {k: Quantity.parse(v) for k, v in raw.items()}
    except QuantityError:
        return None


def _pod_claim_names(pod) -> dict[str, str]:
    """claim key -> the pod's spec.resourceClaims[].name."""
    if pod is None:
        return {}
    return {key: name for name, key in pod_claim_entries(pod)}


def _declares_node_resources(device: Device) -> bool:
    raw = device.raw
    return bool(raw) and (
        "nodeAllocatableResources" in raw or "nodeAllocatableResourceMappings" in raw
    )


def node_resources(
    allocator, node_claim, claims: list[ResourceClaim], result, per_it: dict, pod, slices_by_it
) -> dict[str, Quantity]:
    """What the devices of the pod's claims add to its node resource needs; the largest amount
    over the instance types that succeeded (only one of them launches)."""
    state = state_of(allocator.extensions)
    if state is None or not state.gates.enabled("DRANodeAllocatableResources"):
        return {}
    names = _pod_claim_names(pod)
    its = list(per_it) or [""]
    best: dict[str, Quantity] = {}
    for it in its:
        templates = None
        devices: list[NodeResourceDevice] = []
        for index, claim in enumerate(claims):
            outcome = result.claims[index]
            pod_claim_name = names.get(claim.key, "")
            if outcome.state in (core_claims.UNALLOCATED, core_claims.REALLOCATED):
                for e in per_it.get(it, []):
                    # Devices publishing no node allocatable resources add nothing.
                    if e.claim_index == index and _declares_node_resources(e.cand.device):
                        devices.append(
                            NodeResourceDevice(
                                claim.key,
                                pod_claim_name,
                                e.cand.id.driver,
                                e.cand.device,
                                e.extra.get("_share"),
                            )
                        )
                continue
            for d in outcome.devices_for([it] if it else None):
                device_id = DeviceID(d.driver, d.pool, d.device)
                if d.source == TEMPLATE and templates is None:
                    templates = {
                        DeviceID(t.driver, t.pool, x.name): x
                        for t in (slices_by_it or {}).get(it, [])
                        for x in t.devices
                    }
                device = (
                    templates.get(device_id)
                    if d.source == TEMPLATE
                    else state.devices.get(device_id)
                )
                if device is None or not _declares_node_resources(device):
                    continue
                devices.append(
                    NodeResourceDevice(
                        claim.key,
                        pod_claim_name,
                        d.driver,
                        device,
                        _parse_consumed(d.extra.get("consumedCapacity")),
                    )
                )
        try:
            amounts = dra_node_resources(pod, devices, state.gates)
        except NodeAllocatableError as e:
            raise core.AllocationError(str(e), code="node-resources") from e
        for name, amount in amounts.items():
            if name not in best or amount > best[name]:
                best[name] = amount
    return best


def claim_maps_node_resources(allocator, devices, templates_by_it=None) -> bool:
    """Whether an allocated claim's devices map node allocatable resources directly (the
    docs: such claims cannot be shared by several pods; overhead-only devices can).
    ``devices``: the claim's ``AllocatedDevice``s; ``templates_by_it``: the NodeClaim's
    ResourceSliceTemplates for its template devices."""
    state = state_of(allocator.extensions)
    if state is None or not state.gates.enabled("DRANodeAllocatableResources"):
        return False
    for d in devices:
        device_id = DeviceID(d.driver, d.pool, d.device)
        if d.source == TEMPLATE:
            device = next(
                (
                    x
                    for t in (templates_by_it or {}).get(d.instance_type or "", ())
                    if t.driver == d.driver and t.pool == d.pool
                    for x in t.devices
                    if x.name == d.device
                ),
                None,
            )
        else:
            device = state.devices.get(device_id)
        if device is None:
            continue
        try:
            if parse_node_allocatable(device).mappings:
                return True
        except NodeAllocatableError:
            continue  # reported where the resources are computed
    return False


def _result_hook(allocator, node_claim, claims, result, per_it, pod, slices_by_it) -> None:
    result.node_resources = node_resources(
        allocator, node_claim, claims, result, per_it, pod, slices_by_it
    )


def run_pool_status(
    slices, allocator, gates: FeatureGates, default_partition_type_attribute: str | None = None
) -> list[dict]:
    """CONTRACT section 4 ``pools`` after the run: exclusive holds from the tracker, shares
    from the capacity ledger (cluster shares minus the freed ones, plus the run's)."""
    from allocator.features.poolstatus import pool_status

    state = state_of(allocator.extensions)
    return pool_status(
        slices,
        allocated=allocator.allocated_cluster_devices(),
        consumed_capacity=state.capacity.consumed_after_run() if state is not None else None,
        taints=state.taints if state is not None else None,
        gates=gates,
        default_partition_type_attribute=default_partition_type_attribute,
    )


def _binding_failed(claim: ResourceClaim) -> bool:
    return bindingconditions.binding_failed(claim, gates=bindingconditions.active_gates())


def _reusable(ctx, cand: DeviceWithID) -> bool:
    """A device that allows multiple allocations can serve several slots of one request."""
    return cand.device.allow_multiple_allocations and ctx.gates.enabled(capacity.GATE)


def register() -> None:
    core_dfs.replace_device_check("allocated", _feature_allocated)
    if hasattr(core_dfs, "REUSABLE") and _reusable not in core_dfs.REUSABLE:
        core_dfs.REUSABLE.append(_reusable)
    core_dfs.register_device_check(250, "taint", _taint_factory)
    core_dfs.register_device_check(260, "binding-condition", _binding_factory)
    core_dfs.register_device_check(270, "node-operations", _node_operations_factory)
    core_dfs.register_device_check(350, "counter", _counter_factory)
    core_dfs.register_device_check(360, "capacity", _capacity_factory)
    core_constraints.register_constraint_parser("distinctAttribute", _parse_distinct)
    core_constraints.register_constraint_parser("matchAttribute", _parse_match)
    core_validation.set_first_available_handler(_first_available)
    for validator in (_validate_admin_access, _validate_capacity):
        if validator not in core_validation.REQUEST_VALIDATORS:
            core_validation.REQUEST_VALIDATORS.append(validator)
    if counters.pool_counter_problem not in core_pools.POOL_VALIDATORS:
        core_pools.POOL_VALIDATORS.append(counters.pool_counter_problem)
    if _binding_failed not in core_claims.REALLOCATION_PREDICATES:
        core_claims.REALLOCATION_PREDICATES.append(_binding_failed)
    for hooks, hook in (
        (core.SETUP_HOOKS, setup_allocator),
        (core.COMMIT_HOOKS, _commit),
        (core.RELEASE_HOOKS, _release),
        (core.RESULT_HOOKS, _result_hook),
    ):
        if hook not in hooks:
            hooks.append(hook)


register()
