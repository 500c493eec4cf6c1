"""Device Sources and Pool Management: gathering, filtering, caching.

The in-cluster slice universe is indexed once (``SliceUniverse``) when the Allocator is built:
generations, completeness and parsed node selectors are computed there, and slices are indexed
by pinned node name, AllNodes, and the label their selector narrows on, so that gathering the
pools of one NodeClaim never scans every device of the cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import field

from allocator.model import Device, DeviceID, PoolKey, ResourceSlice, ResourceSliceTemplate
from allocator.records import record
from allocator.requirements import Requirements, requirements_from_node_selector

IN_CLUSTER = "in-cluster"
TEMPLATE = "template"
HOSTNAME = "kubernetes.io/hostname"


@record(eq=False)
class DeviceWithID:
    """A candidate device. Hashed by identity: template devices of two instance types may share
    a DeviceID but differ in attributes."""

    id: DeviceID
    device: Device
    source: str = IN_CLUSTER  # IN_CLUSTER | TEMPLATE
    # Label topology of the device (ORed node selector terms); None: carries none
    # (AllNodes, nodeName-pinned, template).
    terms: tuple[Requirements, ...] | None = None
    node_name: str | None = None  # pinned node (slice spec.nodeName or per-device nodeName)
    slice_name: str | None = None
    instance_type: str | None = None  # template devices only
    slice: ResourceSlice | None = None  # in-cluster devices only (counters, per-slice data)

    @property
    def driver(self) -> str:
        return self.id.driver

    @property
    def pool_key(self) -> PoolKey:
        return PoolKey(self.id.driver, self.id.pool)

    @property
    def is_template(self) -> bool:
        return self.source == TEMPLATE


@record(eq=False)
class Pool:
    """A device pool (driver, pool name): its slices' devices, and whether it is usable."""

    key: PoolKey
    slices: list[ResourceSlice]
    devices: list[DeviceWithID]
    incomplete: bool = False
    invalid: bool = False
    invalid_reason: str | None = None
    generation: int = 0
    # ResourceSlices seen at the newest generation, and resourceSliceCount declared there
    # (across all slices of the pool, accessible or not): they differ when incomplete.
    published_slices: int = 0
    declared_slices: int = 0
    has_selector_devices: bool = False  # whether re-filtering can drop anything
    # Devices with allowMultipleAllocations (consumable capacity: a device may take several
    # slots of one request, see Pipeline.reusable).
    has_shared_devices: bool = False


@record
class PoolInfo:
    """Global facts about a pool, computed across ALL its slices (matching or not)."""

    key: PoolKey
    generation: int
    slice_count: int  # slices seen at the newest generation
    declared_count: int  # resourceSliceCount declared at the newest generation
    slices: list[ResourceSlice] = field(default_factory=list)  # newest generation only

    @property
    def incomplete(self) -> bool:
        return self.slice_count != self.declared_count


@record(eq=False)
class _SliceEntry:
    """A slice of a pool with its node terms and its devices."""

    slice: ResourceSlice
    terms: tuple[Requirements, ...] | None
    devices: list[DeviceWithID]


def _terms(node_selector: dict | None) -> tuple[Requirements, ...] | None:
    if node_selector is None:
        return None
    # An empty term selects no node (as in Kubernetes); a malformed one selects none either.
    terms = [
        t
        for t in node_selector.get("nodeSelectorTerms") or ()
        if t.get("matchExpressions") or t.get("matchFields")
    ]
    try:
        return tuple(requirements_from_node_selector({"nodeSelectorTerms": terms}))
    except ValueError:
        return ()


def _index_label(node_selector: dict) -> tuple[str, frozenset[str]] | None:
    """A label every term narrows with ``In`` (hostname preferred), and the union of values."""
    terms = node_selector.get("nodeSelectorTerms") or []
    if not terms:
        return None
    common: dict[str, set[str]] | None = None
    for term in terms:
        ins: dict[str, set[str]] = {}
        exprs = list(term.get("matchExpressions") or []) + list(term.get("matchFields") or [])
        for expr in exprs:
            if expr.get("operator") == "In" and expr.get("key"):
                ins.setdefault(expr["key"], set()).update(expr.get("values") or [])
        if common is None:
            common = ins
        else:
            common = {k: common[k] | v for k, v in ins.items() if k in common}
        if not common:
            return None
    assert common is not None
    key = HOSTNAME if HOSTNAME in common else sorted(common)[0]
    return key, frozenset(common[key])


def device_accessible(
    terms: tuple[Requirements, ...] | None,
    node_name: str | None,
    all_nodes: bool,
    nc_node_name: str | None,
    variants: Sequence[Requirements],
) -> bool:
    if all_nodes:
        return True
    if node_name is not None:
        # In-flight NodeClaims have no node name: a pinned device never matches them.
        return nc_node_name is not None and node_name == nc_node_name
    if terms is None:
        return False  # no node selection at all: not accessible
    return terms_compatible(terms, variants)


def terms_compatible(terms: tuple[Requirements, ...], variants: Sequence[Requirements]) -> bool:
    for variant in variants:
        for term in terms:
            if variant.compatible(term) is None:
                return True
    return False


# Further whole-pool validation (the DRA features add "consumesCounters references a counter
# set the pool does not define"): each gets the pool's key and the slices of its newest
# generation, and returns why the pool is invalid, or None. Asked once per pool per universe.
PoolValidator = Callable[[PoolKey, list[ResourceSlice]], str | None]


def newest_generation(slices: Iterable[ResourceSlice]) -> dict[PoolKey, list[ResourceSlice]]:
    """Each pool's slices of its newest generation, in the order given (older generations are
    being replaced and count for nothing)."""
    by_pool: dict[PoolKey, list[ResourceSlice]] = {}
    for s in slices:
        current = by_pool.get(s.pool_key)
        if current is None or s.generation > current[0].generation:
            by_pool[s.pool_key] = [s]
        elif s.generation == current[0].generation:
            current.append(s)
    return by_pool


class SliceUniverse:
    """The pre-filtered in-cluster slices, indexed once per Allocator."""

    def __init__(
        self, slices: Iterable[ResourceSlice], validators: Sequence[PoolValidator] = ()
    ) -> None:
        """``validators``: the pipeline's ``pool_validators`` (none: the design's core)."""
        self.validators = tuple(validators)
        infos: dict[PoolKey, PoolInfo] = {}
        for s in slices:
            key = s.pool_key
            info = infos.get(key)
            if info is None or s.generation > info.generation:
                # A newer generation discards everything accumulated for the pool.
                infos[key] = PoolInfo(key, s.generation, 1, s.resource_slice_count, [s])
            elif s.generation == info.generation:
                info.slice_count += 1
                info.declared_count = max(info.declared_count, s.resource_slice_count)
                info.slices.append(s)
        self.pools: dict[PoolKey, PoolInfo] = infos
        self._invalid: dict[PoolKey, str | None] = {}  # the validators' verdicts, lazily
        self.by_node_name: dict[str, list[_SliceEntry]] = {}
        self.all_nodes: list[_SliceEntry] = []
        self.by_label: dict[str, dict[str, list[_SliceEntry]]] = {}
        self.by_label_all: dict[str, list[_SliceEntry]] = {}
        self.unindexed: list[_SliceEntry] = []
        self.per_device: list[_SliceEntry] = []
        self.per_device_scope: list[tuple[frozenset[str], bool]] = []
        for info in infos.values():
            for s in info.slices:
                self._index(s)
        # Whether a node not known by name (a NodeClaim of the run) may reach any slice: not
        # when every slice is pinned to a named node (node-local drivers only). Then Allocate
        # gathers nothing for such a node, whatever its requirements.
        self.reaches_unnamed_nodes = bool(
            self.all_nodes
            or self.by_label_all
            or self.unindexed
            or any(unpinned for _, unpinned in self.per_device_scope)
        )

    def _index(self, s: ResourceSlice) -> None:
        if s.per_device_node_selection:
            devices = [
                DeviceWithID(
                    DeviceID(s.driver, s.pool, d.name),
                    d,
                    IN_CLUSTER,
                    _terms(d.node_selector),
                    d.node_name,
                    s.name,
                    None,
                    s,
                )
                for d in s.devices
            ]
            self.per_device.append(_SliceEntry(s, None, devices))
            # Skip the slice cheaply when no device could be visible to a given node.
            pinned = frozenset(
                d.node_name for d in devices if d.node_name and not d.device.all_nodes
            )
            unpinned = any(not d.node_name or d.device.all_nodes for d in devices)
            self.per_device_scope.append((pinned, unpinned))
            return
        terms = None if (s.all_nodes or s.node_name) else _terms(s.node_selector)
        devices = [
            DeviceWithID(
                DeviceID(s.driver, s.pool, d.name),
                d,
                IN_CLUSTER,
                terms,
                s.node_name,
                s.name,
                None,
                s,
            )
            for d in s.devices
        ]
        if s.all_nodes:
            self.all_nodes.append(_SliceEntry(s, None, devices))
        elif s.node_name:
            self.by_node_name.setdefault(s.node_name, []).append(_SliceEntry(s, None, devices))
        elif s.node_selector is not None:
            entry = _SliceEntry(s, terms, devices)
            label = _index_label(s.node_selector)
            if label is None:
                self.unindexed.append(entry)
            else:
                key, values = label
                self.by_label_all.setdefault(key, []).append(entry)
                per_value = self.by_label.setdefault(key, {})
                for v in values:
                    per_value.setdefault(v, []).append(entry)
        # A slice with no node selection at all offers nothing to any node.

    def _selector_candidates(self, variants: Sequence[Requirements]) -> Iterable[_SliceEntry]:
        for key, entries in self.by_label_all.items():
            values: set[str] | None = set()
            for v in variants:
                req = v.get(key) if v.has(key) else None
                if req is None or req.operator() != "In":
                    values = None  # unbounded for this variant: every entry is a candidate
                    break
                values |= req.values()
            if values is None:
                yield from entries
            else:
                per_value = self.by_label[key]
                seen: set[int] = set()
                for value in sorted(values):
                    for e in per_value.get(value, ()):
                        if id(e) not in seen:
                            seen.add(id(e))
                            yield e
        yield from self.unindexed

    def gather(self, node_name: str | None, variants: Sequence[Requirements]) -> list[Pool]:
        """Pools accessible to a NodeClaim: its node name (existing nodes only) and the
        requirement variants (NodeClaim requirements, intersected per candidate IT)."""
        chosen: dict[PoolKey, list[tuple[ResourceSlice, list[DeviceWithID]]]] = {}

        def take(entry: _SliceEntry, devices: list[DeviceWithID]) -> None:
            chosen.setdefault(entry.slice.pool_key, []).append((entry.slice, devices))

        for entry in self.all_nodes:
            take(entry, entry.devices)
        if node_name is not None:
            for entry in self.by_node_name.get(node_name, ()):
                take(entry, entry.devices)
        for entry in self._selector_candidates(variants):
            assert entry.terms is not None
            if terms_compatible(entry.terms, variants):
                take(entry, entry.devices)
        for entry, (pinned, unpinned) in zip(self.per_device, self.per_device_scope, strict=True):
            if not unpinned and node_name not in pinned:
                continue
            devices = [
                d
                for d in entry.devices
                if device_accessible(
                    d.terms, d.node_name, bool(d.device.all_nodes), node_name, variants
                )
            ]
            if devices:
                take(entry, devices)
        return self._build(chosen)

    def _build(
        self, chosen: dict[PoolKey, list[tuple[ResourceSlice, list[DeviceWithID]]]]
    ) -> list[Pool]:
        pools = []
        # Search order (docs/SIMULATION.md): by (driver, pool), pools holding devices with binding
        # conditions after the others (they become usable only once prepared).
        for key in sorted(chosen, key=lambda k: (_has_binding_conditions(chosen[k]), k)):
            info = self.pools[key]
            parts = sorted(chosen[key], key=lambda p: p[0].name)
            devices: list[DeviceWithID] = []
            names: set[str] = set()
            dup: str | None = None
            for _, devs in parts:
                for d in devs:
                    if d.id.device in names and dup is None:
                        dup = d.id.device
                    names.add(d.id.device)
                    devices.append(d)
            reason = f"duplicate device name {dup!r}" if dup is not None else self.invalid(key)
            pools.append(
                Pool(
                    key=key,
                    slices=[s for s, _ in parts],
                    devices=devices,
                    incomplete=info.incomplete,
                    invalid=reason is not None,
                    invalid_reason=reason,
                    generation=info.generation,
                    published_slices=info.slice_count,
                    declared_slices=info.declared_count,
                    has_selector_devices=any(d.terms is not None for d in devices),
                    has_shared_devices=any(d.device.allow_multiple_allocations for d in devices),
                )
            )
        return pools

    def invalid(self, key: PoolKey) -> str | None:
        """Why the pool is invalid as a whole (the validators over all its newest slices)."""
        if key in self._invalid:
            return self._invalid[key]
        reason = None
        if self.validators:
            slices = self.pools[key].slices
            reasons = [r for r in (v(key, slices) for v in self.validators) if r]
            reason = "; ".join(reasons) or None
        self._invalid[key] = reason
        return reason


def _has_binding_conditions(parts: list[tuple[ResourceSlice, list[DeviceWithID]]]) -> bool:
    return any(d.device.binding_conditions for _, devices in parts for d in devices)


def refilter(pools: Sequence[Pool], variants: Sequence[Requirements]) -> list[Pool]:
    """Incremental re-filtering of a pool set against tightened requirements: devices whose
    selector no longer fits are dropped, and pools left with no matching slice go."""
    out: list[Pool] = []
    memo: dict[int, bool] = {}  # the devices of one slice share one terms tuple

    def fits(terms: tuple[Requirements, ...]) -> bool:
        hit = memo.get(id(terms))
        if hit is None:
            hit = memo[id(terms)] = terms_compatible(terms, variants)
        return hit

    for pool in pools:
        if not pool.has_selector_devices:
            out.append(pool)
            continue
        devices = [d for d in pool.devices if d.terms is None or fits(d.terms)]
        if not devices:
            continue
        if len(devices) == len(pool.devices):
            out.append(pool)
            continue
        kept_slices = {id(d.slice) for d in devices}
        out.append(
            Pool(
                key=pool.key,
                slices=[s for s in pool.slices if id(s) in kept_slices],
                devices=devices,
                incomplete=pool.incomplete,
                invalid=pool.invalid,
                invalid_reason=pool.invalid_reason,
                generation=pool.generation,
                published_slices=pool.published_slices,
                declared_slices=pool.declared_slices,
                has_selector_devices=True,
                has_shared_devices=pool.has_shared_devices,
            )
        )
    return out


def template_devices(
    slices_by_it: dict[str, list[ResourceSliceTemplate]],
) -> dict[str, list[DeviceWithID]]:
    """Template devices per instance type, from ``NodeClaimView.resource_slices()``."""
    out: dict[str, list[DeviceWithID]] = {}
    for it, templates in slices_by_it.items():
        out[it] = [
            DeviceWithID(
                DeviceID(t.driver, t.pool, d.name), d, TEMPLATE, None, None, None, it, None
            )
            for t in templates
            for d in t.devices
        ]
    return out
