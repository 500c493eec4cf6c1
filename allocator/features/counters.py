"""Partitionable devices: shared counters and compatibility groups.

(DRAPartitionableDevices, DRADeviceCompatibilityGroups.)

A pool publishes ``sharedCounters`` (counter sets, in ResourceSlices of their own) and its
devices ``consumesCounters`` from them: a device can be allocated only while every counter it
consumes has enough left. The docs' example: a counter set of 8Gi and two devices of 6Gi each,
so only one of the two can be allocated at a time.

Compatibility groups (at most 2 per consumesCounters entry) further restrict which devices may
be allocated together on one counter set: the intersection of the groups of all devices placed
on it must stay non-empty; devices without groups only go with other devices without groups.
This holds across all claims, including devices allocated before the run. With the groups gate
off, pools in which any device declares groups are treated as incomplete and skipped.

Budgets follow the allocator's own visibility rules (design: Device Eligibility Checks): a
NodeClaim × instance type sees the devices allocated in the cluster, those committed by other
NodeClaims (any instance type) and those committed by itself on the same instance type; template
pools are private to one NodeClaim × instance type.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import field

from allocator.checks import (
    COMPATIBILITY_GROUP,
    COUNTER,
    PathEntry,
    Rejection,
    SearchState,
    Step,
)
from allocator.featuregates import FeatureGates
from allocator.model import (
    CounterConsumption,
    Device,
    DeviceID,
    PoolKey,
    ResourceSlice,
    ResourceSliceTemplate,
)
from allocator.pools import DeviceWithID, newest_generation
from allocator.quantity import Quantity
from allocator.records import record
from allocator.requests import ClaimData, RequestData

GATE = "DRAPartitionableDevices"
GROUPS_GATE = "DRADeviceCompatibilityGroups"
MAX_COMPATIBILITY_GROUPS = 2

CLUSTER = "cluster"
TEMPLATE = "template"

# (scope, driver, pool, counter set)
CounterKey = tuple[str, str, str, str]


@record
class CounterPool:
    """The counter sets of one pool and what each of its devices consumes."""

    key: PoolKey
    sets: dict[str, dict[str, Quantity]] = field(default_factory=dict)
    consumption: dict[str, list[CounterConsumption]] = field(default_factory=dict)
    has_groups: bool = False
    error: str | None = None


def build_counter_pool(
    key: PoolKey,
    slices: Sequence[ResourceSlice | ResourceSliceTemplate],
    *,
    separate_slices: bool = True,
) -> CounterPool:
    """Counter sets and consumption of one pool (slices of its newest generation).

    ``separate_slices``: in-cluster pools must publish counter sets in slices without devices
    (the API rule); templates describe a whole node in one entry, so they may mix them."""
    pool = CounterPool(key)
    problems: list[str] = []
    for s in slices:
        name = s.name if isinstance(s, ResourceSlice) else None  # templates have none
        if separate_slices and s.shared_counters and s.devices:
            problems.append(
                f"ResourceSlice {name}: sharedCounters and devices must be published in "
                "separate ResourceSlices"
            )
        for counter_set in s.shared_counters:
            if counter_set.name in pool.sets:
                if not separate_slices:
                    # Templates of one pool merge their counter sets, a later template's
                    # value of a counter replacing an earlier one (Karpenter's
                    # computeTemplateTotals; the design is silent).
                    pool.sets[counter_set.name].update(counter_set.counters)
                    continue
                problems.append(f"counter set {counter_set.name} is defined more than once")
                continue
            pool.sets[counter_set.name] = dict(counter_set.counters)
        for device in s.devices:
            if device.consumes_counters:
                pool.consumption[device.name] = list(device.consumes_counters)
    for device_name, entries in pool.consumption.items():
        seen_sets: set[str] = set()
        for entry in entries:
            if entry.counter_set in seen_sets:
                problems.append(
                    f"device {device_name}: counter set {entry.counter_set} is consumed twice"
                )
            seen_sets.add(entry.counter_set)
            counters = pool.sets.get(entry.counter_set)
            if counters is None:
                problems.append(
                    f"device {device_name}: consumesCounters references counter set "
                    f"{entry.counter_set}, which the pool does not define"
                )
                continue
            for counter in entry.counters:
                if counter not in counters:
                    problems.append(
                        f"device {device_name}: consumesCounters references counter "
                        f"{counter} missing from counter set {entry.counter_set}"
                    )
            groups = entry.compatibility_groups
            if groups:
                pool.has_groups = True
                if len(groups) > MAX_COMPATIBILITY_GROUPS:
                    problems.append(
                        f"device {device_name}: counter set {entry.counter_set}: at most "
                        f"{MAX_COMPATIBILITY_GROUPS} compatibilityGroups per entry"
                    )
                if len(set(groups)) != len(groups):
                    problems.append(
                        f"device {device_name}: counter set {entry.counter_set}: "
                        "compatibilityGroups must be unique"
                    )
    if problems:
        pool.error = f"pool {key.driver}/{key.pool} is invalid: " + "; ".join(problems)
    return pool


def pool_counter_problem(key: PoolKey, slices: Sequence[ResourceSlice]) -> str | None:
    """Why an in-cluster pool is invalid as a whole because of its counters (a device consumes
    a counter set or counter the pool does not define, ...), or None. ``pools.POOL_VALIDATORS``
    asks it, so that allocation mode All fails with "invalid" as kube-scheduler does."""
    if not any(s.shared_counters or any(d.consumes_counters for d in s.devices) for s in slices):
        return None
    error = build_counter_pool(key, slices).error
    if error is None:
        return None
    return error.removeprefix(f"pool {key.driver}/{key.pool} is invalid: ")


def pool_has_compatibility_groups(devices: Iterable[Device]) -> bool:
    return any(e.compatibility_groups for d in devices for e in d.consumes_counters)


def pool_incomplete_without_groups_gate(devices: Iterable[Device], gates: FeatureGates) -> bool:
    """Version-skew safety: with the groups gate off a pool whose devices declare groups is
    treated as incomplete (kube-scheduler skips it entirely)."""
    return not gates.enabled(GROUPS_GATE) and pool_has_compatibility_groups(devices)


def gate_blocks_device(device: Device, gates: FeatureGates) -> str | None:
    """With partitionable devices off, a device that consumes counters cannot be allocated."""
    if device.consumes_counters and not gates.enabled(GATE):
        return f"device {device.name} consumes shared counters, but the {GATE} feature is disabled"
    return None


# --- compatibility group state ---------------------------------------------------------------


@record
class GroupState:
    """Running intersection of the groups of the devices on one counter set, as counts so that
    removing a device restores the previous intersection exactly."""

    devices: int = 0
    without_groups: int = 0
    groups: Counter = field(default_factory=Counter)

    def admits(self, groups: Sequence[str]) -> bool:
        if self.devices == 0:
            return True
        if not groups:
            return self.without_groups == self.devices
        if self.without_groups:
            return False
        return any(self.groups[g] == self.devices for g in set(groups))

    def add(self, groups: Sequence[str]) -> None:
        self.devices += 1
        if not groups:
            self.without_groups += 1
        for g in set(groups):
            self.groups[g] += 1

    def remove(self, groups: Sequence[str]) -> None:
        self.devices -= 1
        if not groups:
            self.without_groups -= 1
        for g in set(groups):
            self.groups[g] -= 1

    def intersection(self) -> frozenset[str] | None:
        """None while empty or when every device lacks groups."""
        if self.devices == 0 or self.without_groups:
            return None
        return frozenset(g for g, n in self.groups.items() if n == self.devices)


# --- the ledger --------------------------------------------------------------------------------


class CounterLedger:
    """Counter budgets for one scheduling loop (in-cluster pools and template pools)."""

    def __init__(
        self,
        in_cluster_slices: Iterable[ResourceSlice],
        allocated_devices: Iterable[DeviceID] = (),
        *,
        gates: FeatureGates,
        grouped: Iterable[PoolKey] = (),
    ) -> None:
        self.gates = gates
        self.partitionable_on = gates.enabled(GATE)  # read once: checked per device
        self.groups_on = gates.enabled(GROUPS_GATE)
        self.pools: dict[PoolKey, CounterPool] = {}
        for key, slices in newest_generation(in_cluster_slices).items():
            if any(s.shared_counters for s in slices) or any(
                d.consumes_counters for s in slices for d in s.devices
            ):
                self.pools[key] = build_counter_pool(key, slices)
        self.seed: set[DeviceID] = {
            d
            for d in allocated_devices
            if d.pool_key in self.pools and d.device in self.pools[d.pool_key].consumption
        }
        # In-cluster devices committed in this run: device -> NodeClaim -> instance types.
        self.committed: dict[DeviceID, dict[str, set[str]]] = {}
        # Template devices committed: (NodeClaim, instance type) -> devices.
        self.template_committed: dict[tuple[str, str], list[DeviceID]] = {}
        # Baselines of in-cluster counter sets per (key, NodeClaim, IT), reused by later
        # Allocates until a commit or release touches the pool (pool_version).
        self.pool_version: dict[PoolKey, int] = {}
        self.base_cache: dict[tuple, tuple[int, dict[str, Quantity], GroupState]] = {}
        self.static_cache: dict[tuple, tuple[int, Rejection | None]] = {}
        self._template_pools: dict[tuple[str, PoolKey], CounterPool] = {}
        # In-cluster pools whose devices declare compatibility groups.
        self.grouped_pools: frozenset[PoolKey] = frozenset(grouped)
        # id(template list) -> (the list, whether its templates use shared counters)
        self._template_use: dict[int, tuple[list, bool]] = {}

    def templates_use_counters(self, templates: list[ResourceSliceTemplate]) -> bool:
        """Whether an instance type's templates publish or consume counters (asked once per
        instance type's template list, not once per DFS)."""
        hit = self._template_use.get(id(templates))
        if hit is None or hit[0] is not templates:
            uses = any(
                t.shared_counters or any(d.consumes_counters for d in t.devices) for t in templates
            )
            hit = self._template_use[id(templates)] = (templates, uses)
        return hit[1]

    # -- templates --

    def template_pools(
        self, instance_type: str, templates: Iterable[ResourceSliceTemplate]
    ) -> dict[PoolKey, CounterPool]:
        by_pool: dict[PoolKey, list[ResourceSliceTemplate]] = {}
        for t in templates:
            by_pool.setdefault(PoolKey(t.driver, t.pool), []).append(t)
        out = {}
        for key, group in by_pool.items():
            cache_key = (instance_type, key)
            pool = self._template_pools.get(cache_key)
            if pool is None:
                pool = build_counter_pool(key, group, separate_slices=False)
                self._template_pools[cache_key] = pool
            if pool.sets or pool.consumption:
                out[key] = pool
        return out

    # -- views --

    def view(
        self,
        node_claim_id: str,
        instance_type: str,
        templates: Iterable[ResourceSliceTemplate] = (),
    ) -> CounterView:
        return CounterView(
            self, node_claim_id, instance_type, self.template_pools(instance_type, templates)
        )

    # -- commit / release --

    def commit(
        self,
        node_claim_id: str,
        instance_type: str,
        cluster_devices: Iterable[DeviceID] = (),
        template_devices: Iterable[DeviceID] = (),
    ) -> None:
        for device_id in cluster_devices:
            pool = self.pools.get(device_id.pool_key)
            if pool is None or device_id.device not in pool.consumption:
                continue
            self.committed.setdefault(device_id, {}).setdefault(node_claim_id, set()).add(
                instance_type
            )
            self.pool_version[device_id.pool_key] = self.pool_version.get(device_id.pool_key, 0) + 1
        template = [d for d in template_devices]
        if template:
            self.template_committed.setdefault((node_claim_id, instance_type), []).extend(template)

    def release_instance_type(self, node_claim_id: str, instance_type: str) -> None:
        for device_id in list(self.committed):
            holders = self.committed[device_id]
            its = holders.get(node_claim_id)
            if its is None:
                continue
            its.discard(instance_type)
            self.pool_version[device_id.pool_key] = self.pool_version.get(device_id.pool_key, 0) + 1
            if not its:
                del holders[node_claim_id]
            if not holders:
                del self.committed[device_id]
        self.template_committed.pop((node_claim_id, instance_type), None)

    # -- after the run --

    def consumed_devices(self) -> set[DeviceID]:
        """In-cluster devices consuming counters once the run's allocations are committed."""
        return self.seed | set(self.committed)

    def remaining(
        self, key: PoolKey, consuming: Iterable[DeviceID] | None = None
    ) -> dict[str, dict[str, Quantity]]:
        """What is left of each counter set of an in-cluster pool."""
        pool = self.pools.get(key)
        if pool is None:
            return {}
        left = {name: dict(counters) for name, counters in pool.sets.items()}
        users = self.consumed_devices() if consuming is None else set(consuming)
        for device_name, entries in pool.consumption.items():
            if DeviceID(key.driver, key.pool, device_name) not in users:
                continue
            for entry in entries:
                counters = left.get(entry.counter_set)
                if counters is None:
                    continue
                for name, amount in entry.counters.items():
                    if name in counters:
                        counters[name] = counters[name] - amount
        return left


class CounterView:
    """The counter budget one Allocate sees for one NodeClaim × instance type, updated as the
    DFS adds and removes devices. ``try_add`` returns None on success or the rejection."""

    __slots__ = (
        "_base_consumed",
        "_base_groups",
        "_baseline_devices",
        "_consumed",
        "_groups",
        "_refs",
        "instance_type",
        "ledger",
        "node_claim_id",
        "template_pools",
    )

    def __init__(
        self,
        ledger: CounterLedger,
        node_claim_id: str,
        instance_type: str,
        template_pools: dict[PoolKey, CounterPool],
    ) -> None:
        self.ledger = ledger
        self.node_claim_id = node_claim_id
        self.instance_type = instance_type
        self.template_pools = template_pools
        self._consumed: dict[CounterKey, dict[str, Quantity]] = {}
        self._groups: dict[CounterKey, GroupState] = {}
        # What the baseline alone uses (fixed for the whole Allocate): the static check.
        self._base_consumed: dict[CounterKey, dict[str, Quantity]] = {}
        self._base_groups: dict[CounterKey, GroupState] = {}
        self._refs: Counter = Counter()  # devices added on this path (shared devices count once)
        self._baseline_devices: dict[str, set[DeviceID]] = {}

    def _pool(self, device_id: DeviceID, template: bool) -> CounterPool | None:
        if template:
            return self.template_pools.get(device_id.pool_key)
        return self.ledger.pools.get(device_id.pool_key)

    def _in_baseline(self, device_id: DeviceID, scope: str) -> bool:
        """Allocated before this Allocate, as this NodeClaim × instance type sees it."""
        ledger = self.ledger
        if scope == CLUSTER:
            if device_id in ledger.seed:
                return True
            holders = ledger.committed.get(device_id)
            if not holders:
                return False
            return any(
                nc != self.node_claim_id or self.instance_type in its for nc, its in holders.items()
            )
        templates = self._baseline_devices.get(TEMPLATE)
        if templates is None:
            templates = set(
                ledger.template_committed.get((self.node_claim_id, self.instance_type), [])
            )
            self._baseline_devices[TEMPLATE] = templates
        return device_id in templates

    def _ensure(self, scope: str, pool: CounterPool, set_name: str) -> CounterKey:
        key = (scope, pool.key.driver, pool.key.pool, set_name)
        if key in self._consumed:
            return key
        cache_key = (key, self.node_claim_id, self.instance_type)
        version = self.ledger.pool_version.get(pool.key, 0)
        if scope == CLUSTER:
            hit = self.ledger.base_cache.get(cache_key)
            if hit is not None and hit[0] == version:
                _, base, base_groups = hit
                self._set_key(key, base, base_groups)
                return key
        consumed: dict[str, Quantity] = {}
        groups = GroupState()
        driver, pool_name = pool.key
        for device_name, entries in pool.consumption.items():
            if not self._in_baseline(DeviceID(driver, pool_name, device_name), scope):
                continue
            for entry in entries:
                if entry.counter_set != set_name:
                    continue
                for name, amount in entry.counters.items():
                    consumed[name] = consumed[name] + amount if name in consumed else amount
                groups.add(entry.compatibility_groups)
        if scope == CLUSTER:
            self.ledger.base_cache[cache_key] = (version, consumed, groups)
        self._set_key(key, consumed, groups)
        return key

    def _set_key(self, key: CounterKey, base: dict[str, Quantity], groups: GroupState) -> None:
        """Start a counter set from its baseline (kept unchanged for the static check and the
        cache; the live copies follow the DFS path)."""
        self._base_consumed[key] = base
        self._base_groups[key] = groups
        self._consumed[key] = dict(base)
        self._groups[key] = GroupState(
            groups.devices, groups.without_groups, Counter(groups.groups)
        )

    def try_add(
        self, device_id: DeviceID, device: Device, template: bool = False
    ) -> Rejection | None:
        if not device.consumes_counters:
            return None
        refused = self._unusable(device_id, device, template)
        if refused is not None:
            return refused
        pool = self._pool(device_id, template)
        assert pool is not None  # _unusable says so otherwise
        scope = TEMPLATE if template else CLUSTER
        if self._refs[device_id] or self._in_baseline(device_id, scope):
            # Already consuming (a device shared by several allocations consumes once).
            self._refs[device_id] += 1
            return None
        keys, refused = self._fits(device_id, device, pool, scope, self._consumed, self._groups)
        if refused is not None:
            return refused
        for key, entry in keys:
            consumed = self._consumed[key]
            for name, amount in entry.counters.items():
                consumed[name] = consumed[name] + amount if name in consumed else amount
            self._groups[key].add(entry.compatibility_groups)
        self._refs[device_id] += 1
        return None

    def _fits(
        self,
        device_id: DeviceID,
        device: Device,
        pool: CounterPool,
        scope: str,
        consumed_by_key: dict[CounterKey, dict[str, Quantity]],
        groups_by_key: dict[CounterKey, GroupState],
    ) -> tuple[list, Rejection | None]:
        groups_on = self.ledger.groups_on
        keys = []
        for entry in pool.consumption.get(device.name, device.consumes_counters):
            key = self._ensure(scope, pool, entry.counter_set)
            keys.append((key, entry))
            totals = pool.sets[entry.counter_set]
            consumed = consumed_by_key[key]
            for name, amount in entry.counters.items():
                used = consumed.get(name)
                after = used + amount if used is not None else amount
                if after > totals[name]:
                    left = totals[name] - used if used is not None else totals[name]
                    return keys, _shortfall(
                        device_id, entry.counter_set, name, amount, left, totals[name]
                    )
            if groups_on and not groups_by_key[key].admits(entry.compatibility_groups):
                have = groups_by_key[key].intersection()
                have_text = ", ".join(sorted(have)) if have else "no groups"
                want = ", ".join(entry.compatibility_groups) or "no groups"
                return keys, Rejection(
                    COMPATIBILITY_GROUP,
                    f"device {device_id} ({want}) cannot be allocated together with the "
                    f"devices on counter set {entry.counter_set} ({have_text})",
                )
        return keys, None

    def static_check(
        self, device_id: DeviceID, device: Device, template: bool = False
    ) -> Rejection | None:
        """The part of ``try_add`` that only depends on the baseline (devices allocated before
        this Allocate): a device rejected here is rejected on every DFS path."""
        if not device.consumes_counters:
            return None
        refused = self._unusable(device_id, device, template)
        if refused is not None:
            return refused
        pool = self._pool(device_id, template)
        assert pool is not None  # _unusable says so otherwise
        scope = TEMPLATE if template else CLUSTER
        if scope == CLUSTER:
            # Same answer for every Allocate until the pool's commitments change.
            cache_key = (device_id, self.node_claim_id, self.instance_type)
            version = self.ledger.pool_version.get(pool.key, 0)
            hit = self.ledger.static_cache.get(cache_key)
            if hit is not None and hit[0] == version:
                return hit[1]
        if self._in_baseline(device_id, scope):
            refused = None
        else:
            _, refused = self._fits(
                device_id, device, pool, scope, self._base_consumed, self._base_groups
            )
        if scope == CLUSTER:
            self.ledger.static_cache[cache_key] = (version, refused)
        return refused

    def _unusable(self, device_id: DeviceID, device: Device, template: bool) -> Rejection | None:
        """A device that consumes counters but can take none: the gate is off, or its pool
        defines no counters or is invalid."""
        if not self.ledger.partitionable_on:
            blocked = gate_blocks_device(device, self.ledger.gates)
            return Rejection(COUNTER, blocked) if blocked is not None else None
        pool = self._pool(device_id, template)
        if pool is None:
            return Rejection(COUNTER, f"device {device_id}: pool defines no shared counters")
        if pool.error:
            return Rejection(COUNTER, pool.error)
        return None

    def remove(self, device_id: DeviceID, device: Device, template: bool = False) -> None:
        if not device.consumes_counters:
            return
        self._refs[device_id] -= 1
        if self._refs[device_id] > 0:
            return
        del self._refs[device_id]
        scope = TEMPLATE if template else CLUSTER
        if self._in_baseline(device_id, scope):
            return
        pool = self._pool(device_id, template)
        if pool is None:
            return
        for entry in pool.consumption.get(device.name, device.consumes_counters):
            key = (scope, pool.key.driver, pool.key.pool, entry.counter_set)
            consumed = self._consumed[key]
            for name, amount in entry.counters.items():
                consumed[name] = consumed[name] - amount
            self._groups[key].remove(entry.compatibility_groups)

    def consumed(self, device_id: DeviceID, set_name: str, template: bool = False) -> dict:
        """Current consumption of a counter set of the device's pool (for traces and tests)."""
        pool = self._pool(device_id, template)
        if pool is None:
            return {}
        key = self._ensure(TEMPLATE if template else CLUSTER, pool, set_name)
        return dict(self._consumed[key])


def _shortfall(
    device_id: DeviceID,
    counter_set: str,
    counter: str,
    needed: Quantity,
    left: Quantity,
    total: Quantity,
) -> Rejection:
    """Too little left of one counter: the facts go with the words (the refusal funnel's)."""
    return Rejection(
        COUNTER,
        f"device {device_id} needs {needed} of counter {counter} in counter set {counter_set}, "
        f"only {left} of {total} left",
        facts={
            "counterSet": counter_set,
            "counter": counter,
            "needed": str(needed),
            "left": str(left),
            "total": str(total),
        },
    )


# --- in the pipeline ---------------------------------------------------------------------------


class CounterCheck:
    """A device that consumes shared counters needs enough left in each of its counter sets
    (trace reason ``counter``), and compatible groups with what the counter set already
    serves (``compatibility-group``)."""

    name = "counter"
    # Not IT-independent: the counters a NodeClaim's own instance type committed count.
    prefilter_it_independent = False

    def __init__(
        self, ctx: SearchState, ledger: CounterLedger, templates: Sequence[ResourceSliceTemplate]
    ) -> None:
        self.view = ledger.view(ctx.node_claim_id, ctx.instance_type, templates)
        self.gates = ctx.gates
        self.groups_on = ctx.gates.enabled(GROUPS_GATE)
        self.grouped = set(ledger.grouped_pools)
        for t in templates:
            if pool_has_compatibility_groups(t.devices):
                self.grouped.add(PoolKey(t.driver, t.pool))
        self.applied: list[bool] = []

    def prefilter(
        self, ctx: SearchState, claim: ClaimData, request: RequestData, cand: DeviceWithID
    ) -> Rejection | None:
        if not self.groups_on and cand.pool_key in self.grouped:
            return Rejection(
                COMPATIBILITY_GROUP,
                f"pool {cand.id.driver}/{cand.id.pool} declares compatibility groups, but the "
                f"{GROUPS_GATE} feature is disabled: the pool is treated as incomplete",
            )
        device = cand.device
        if not device.consumes_counters:
            return None
        blocked = gate_blocks_device(device, self.gates)
        if blocked:
            return Rejection(COUNTER, blocked)
        pool = self.view.template_pools if cand.is_template else self.view.ledger.pools
        counter_pool = pool.get(cand.pool_key)
        if counter_pool is None:
            return Rejection(COUNTER, f"device {cand.id}: its pool defines no shared counters")
        if counter_pool.error:
            return Rejection(COUNTER, counter_pool.error)
        if request.is_admin:
            return None
        # Counters used up by devices allocated before this Allocate: no path can fit it.
        return self.view.static_check(cand.id, device, template=cand.is_template)

    def try_add(self, ctx: SearchState, step: Step, cand: DeviceWithID) -> Rejection | None:
        rejection = self.prefilter(ctx, step.claim, step.request, cand)
        if rejection is not None:
            return rejection
        if step.request.is_admin or not cand.device.consumes_counters:
            self.applied.append(False)
            return None
        rejection = self.view.try_add(cand.id, cand.device, template=cand.is_template)
        if rejection is not None:
            return rejection
        self.applied.append(True)
        return None

    def remove(self, ctx: SearchState, step: Step, cand: DeviceWithID) -> None:
        if self.applied.pop():
            self.view.remove(cand.id, cand.device, template=cand.is_template)


def counter_check(ctx: SearchState, ledger: CounterLedger) -> CounterCheck | None:
    templates = ctx.template_slices_by_it.get(ctx.instance_type, [])
    if not ledger.pools and not ledger.templates_use_counters(templates):
        return None  # no shared counters anywhere: nothing to check
    return CounterCheck(ctx, ledger, templates)


def commit_counters(
    ledger: CounterLedger, node_claim_id: str, instance_type: str, path: Sequence[PathEntry]
) -> None:
    """Commit hook: the counters the committed devices consume (admin access consumes none)."""
    if not any(e.cand.device.consumes_counters for e in path):
        return
    cluster = [
        e.cand.id
        for e in path
        if not e.cand.is_template
        and e.cand.device.consumes_counters
        and not e.extra.get("adminAccess")
    ]
    template = [
        e.cand.id
        for e in path
        if e.cand.is_template and e.cand.device.consumes_counters and not e.extra.get("adminAccess")
    ]
    ledger.commit(node_claim_id, instance_type, cluster, template)


def release_counters(ledger: CounterLedger, node_claim_id: str, instance_type: str) -> None:
    ledger.release_instance_type(node_claim_id, instance_type)
