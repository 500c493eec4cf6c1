"""Device-template shapes: instance types whose templates the DFS cannot tell apart.

A new NodeClaim's instance types often publish the same devices under other names (Karpenter's
benchmark: 400 instance types, 8 templates of 1 to 8 L4 GPUs, each pool named after its
instance type). The DFS of one instance type reads of its template devices only what the
checks read: the driver, the attributes the claims' selectors and constraints name, capacity,
counters, taints, binding conditions, sharing, slice-level fields; and of the in-memory state,
which of those devices the NodeClaim already holds there. Two instance types equal in all of
that, by position, get the same answer by position: the search runs once per shape and state
and its devices are mapped to each instance type's own (``Allocator.allocate``).

The shape is the templates with their names taken out (pool and device names, the attributes
nothing reads). Whatever cannot be put in a shape keeps an instance type out of sharing (its
DFS runs as before): attribute bindings, DeviceTaintRules, counters or shares it has in use.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import field

from allocator.cel.engine import split_name
from allocator.checks import PathEntry
from allocator.dfs import ITOutcome
from allocator.funnel import Funnel
from allocator.model import DeviceID, ResourceSliceTemplate
from allocator.pools import TEMPLATE, DeviceWithID
from allocator.records import record
from allocator.requests import ClaimData, RequestData

# Attribute names (domain, identifier) the claims read; None: any attribute may be read.
ReadAttributes = frozenset[tuple[str, str]] | None

# Result fields the checks give a device that carry no device name (a path with any other,
# such as a capacity share's ID, is not mapped: its instance types run their own search).
_PORTABLE_EXTRA = frozenset(
    {
        "adminAccess",
        "_no_reserve",
        "tolerations",
        "skipNodeOperations",
        "bindingConditions",
        "bindingFailureConditions",
        "bindsToNode",
    }
)


def read_attributes(claims: Sequence[ClaimData]) -> ReadAttributes:
    """The attributes the claims' class and request selectors and their constraints read
    (None when a selector reads the device as a whole: every attribute counts)."""
    names: set[tuple[str, str]] = set()
    unqualified: set[str] = set()
    for claim in claims:
        for req in claim.requests:
            for r in req.alternatives or [req]:
                if not _selector_attributes(r, names):
                    return None
        for c in claim.claim.spec.constraints:
            for attribute in (c.match_attribute, c.distinct_attribute):
                if attribute is None:
                    continue
                domain, sep, ident = attribute.rpartition("/")
                if sep:
                    names.add((domain, ident))
                else:
                    unqualified.add(ident)  # the driver's domain, whichever driver
    if unqualified:
        names.update(("", ident) for ident in unqualified)
    return frozenset(names)


def _selector_attributes(req: RequestData, names: set[tuple[str, str]]) -> bool:
    for compiled in req.compiled:
        fields = compiled.fields
        if fields is None:
            return False
        for f in fields:
            if f[0] == "attributes":
                names.add((f[1], f[2]))
    return True


def _kept(name: str, driver: str, read: frozenset[tuple[str, str]]) -> bool:
    domain, ident = split_name(name, driver)
    return (domain, ident) in read or (domain == driver and ("", ident) in read)


def _canonical(raw: Mapping, drop: Iterable[str]) -> str:
    dropped = set(drop)
    kept = {k: v for k, v in raw.items() if k not in dropped}
    return json.dumps(kept, sort_keys=True, default=repr)


def signature(templates: Sequence[ResourceSliceTemplate], read: ReadAttributes) -> tuple:
    """The templates as the DFS reads them, names taken out: per slice its driver and its
    fields but the pool's name (counter sets keep theirs: devices consume them by name), per
    device everything but its name and the attributes nothing reads."""
    out = []
    for t in templates:
        devices = []
        for d in t.devices:
            attributes = sorted(
                (name, type(value).__name__, repr(value))
                for name, value in d.attributes.items()
                if read is None or _kept(name, t.driver, read)
            )
            devices.append(
                (
                    tuple(attributes),
                    repr(sorted(d.capacity.items())),
                    d.node_name,
                    repr(d.node_selector),
                    d.all_nodes,
                    repr(d.consumes_counters),
                    repr(d.taints),
                    d.binding_conditions,
                    d.binding_failure_conditions,
                    d.binds_to_node,
                    d.allow_multiple_allocations,
                    _canonical(d.raw, ("name", "attributes")),
                )
            )
        out.append(
            (
                t.driver,
                repr(t.shared_counters),
                _canonical(t.raw, ("pool", "devices")),
                tuple(devices),
            )
        )
    return tuple(out)


@record(eq=False)
class InstanceTypeShape:
    """One instance type's template devices under a reading of the claims."""

    templates: list[ResourceSliceTemplate]
    read: ReadAttributes
    key: tuple
    positions: dict[DeviceID, int]
    device_names: tuple[str, ...]


class ShapeIndex:
    """Shapes per instance type, worked out once per template list and attributes read (kept
    by the Allocator for the run)."""

    __slots__ = ("_shapes", "_keys")

    def __init__(self) -> None:
        # Per reading of the claims, per instance type (an Allocate reads one of them only).
        self._shapes: dict[ReadAttributes, dict[str, InstanceTypeShape]] = {}
        # Equal signatures share one key object (cheap to hash and compare afterwards).
        self._keys: dict[tuple, tuple] = {}

    def shapes_for(self, read: ReadAttributes) -> dict[str, InstanceTypeShape]:
        """The shapes worked out so far under one reading, by instance type (a shape whose
        template list is not the instance type's now is stale: ``shape`` replaces it)."""
        return self._shapes.setdefault(read, {})

    def shape(
        self,
        instance_type: str,
        templates: list[ResourceSliceTemplate],
        devices: Sequence[DeviceWithID],
        read: ReadAttributes,
    ) -> InstanceTypeShape:
        shapes = self.shapes_for(read)
        hit = shapes.get(instance_type)
        if hit is not None and hit.templates is templates:
            return hit
        sig = signature(templates, read)
        key = self._keys.setdefault(sig, (len(self._keys),))
        positions = {d.id: i for i, d in enumerate(devices)}
        names = tuple(d.id.device for d in devices)
        hit = shapes[instance_type] = InstanceTypeShape(templates, read, key, positions, names)
        return hit


def held_positions(shape: InstanceTypeShape, held: Iterable[DeviceID] | None) -> tuple[int, ...]:
    """The positions of the template devices a NodeClaim holds on an instance type."""
    if not held:
        return ()
    get = shape.positions.get
    found = [get(d, -1) for d in held]
    found.sort()
    return tuple(found)


def portable(path: Sequence[PathEntry], devices: Sequence[DeviceWithID]) -> list[int] | None:
    """The positions of a path's devices among the instance type's template devices, when the
    path takes template devices only and its result fields name no device; else None."""
    index = {id(d): i for i, d in enumerate(devices)}
    out = []
    for e in path:
        if e.cand.source != TEMPLATE or not _PORTABLE_EXTRA.issuperset(e.extra):
            return None
        i = index.get(id(e.cand))
        if i is None:
            return None
        out.append(i)
    return out


@record(eq=False)
class SharedOutcome:
    """One instance type's outcome that the others of its shape and state take: a success
    (its devices by position), or a count-stage refusal (its words, which name no pool and no
    instance type).

    A refusal's funnels are the representative's renamed for the instance type only: their
    rejection groups (numbers, words, example devices) are shared, not copied, so that a
    failed pod's funnels over every NodeClaim and instance type cost one small object each
    (Karpenter's benchmark: 400 instance types, 2 GB otherwise). The example devices are only
    ever shown for the first funnel of a kind (``funnel.aggregate``), which is the
    representative's: it comes before every instance type that takes its outcome."""

    out: ITOutcome
    positions: list[int]  # a success's devices
    # A success's path by position: (claim index, request, device position, result fields).
    entries: list[tuple[int, str, int, dict]] = field(init=False)

    def __post_init__(self) -> None:
        out = self.out
        self.entries = (
            [
                (e.claim_index, e.request, i, e.extra)
                for e, i in zip(out.path, self.positions, strict=True)
            ]
            if out.ok
            else []
        )

    def outcome(self, instance_type: str, devices: Sequence[DeviceWithID]) -> ITOutcome:
        out = self.out
        if out.ok:
            # The result fields are read only from here on: shared, not copied.
            path = [
                PathEntry(ci, request, devices[i], extra) for ci, request, i, extra in self.entries
            ]
            return ITOutcome(instance_type, True, path, None, out.nodes, [], list(out.counted))
        if out.unworded:
            return ITOutcome(instance_type, False, [], out.reason, 0, [], [], True)
        renamed: dict[int, Funnel] = {}

        def rename(f: Funnel) -> Funnel:
            hit = renamed.get(id(f))
            if hit is None:
                hit = renamed[id(f)] = Funnel(
                    f.claim,
                    f.request,
                    f.needed,
                    instance_type,
                    f.candidates,
                    f.usable,
                    f.rejections,
                    f.whole,
                )
            return hit

        return ITOutcome(
            instance_type,
            False,
            reason=out.reason,
            nodes=out.nodes,
            funnels=[rename(f) for f in out.funnels],
            counted=[(ci, req, None if f is None else rename(f)) for ci, req, f in out.counted],
        )


def shareable(
    out: ITOutcome, devices: Sequence[DeviceWithID], templates: Sequence[ResourceSliceTemplate]
) -> SharedOutcome | None:
    """What other instance types of the same shape and state may take of this outcome: a
    success whose devices map by position, a count-stage refusal (no DFS node) whose words
    name no pool, instance type or device but as example devices; None otherwise (a search's
    words name the devices it tried)."""
    if out.ok:
        positions = portable(out.path, devices)
        return SharedOutcome(out, positions) if positions is not None else None
    if out.unworded:
        return SharedOutcome(out, [])
    if out.nodes or not out.funnels or out.reason is None:
        return None
    names = {str(d.id): i for i, d in enumerate(devices)}
    own = [out.instance_type, *(t.pool for t in templates), *names]
    texts = [out.reason]
    for f in out.funnels:
        if f.instance_type != out.instance_type:
            return None
        texts.append(f.whole or "")
        for g in f.rejections:
            if any(d not in names for d in g.example_devices):
                return None
            texts.append(g.message)
            texts.append(repr(g.detail))
    if any(name and name in text for name in own for text in texts):
        return None
    return SharedOutcome(out, [])
