"""Existing nodes the count stage cannot tell apart.

A cluster's GPU nodes publish the same devices under other names (each node's pool is named
after the node; UUIDs and PCI addresses differ, but no claim reads them). A pod whose claim no
node can serve, a model nobody has, is refused by every node at the count stage with the same
numbers and words: only the devices its funnel gives as examples are the node's own. On 5,000
such nodes that was 5,000 count stages for the first pod that asked (0.9 s).

The count stage of a node reads, of each device in reach, what the claims' checks read: the
attributes the selectors and constraints name, capacity, taints, binding and sharing fields;
and of the state, which devices are held. Two nodes whose devices are equal in all of that, in
search order, with none held, get the same answer; the second takes the first's funnel with
its example devices mapped to its own by position (``explanation/builder.py``). Whatever this
cannot put in a key keeps a node out of sharing (its count stage runs as before): devices
held, pools incomplete or invalid, counters and shares, slices skipping node operations (the
node's own declared features decide), DeviceTaintRules, attribute bindings, claims whose
selectors read whole devices.
"""

from __future__ import annotations

from collections.abc import Sequence

from allocator.model import Device
from allocator.pools import Pool
from allocator.records import record
from allocator.templateshapes import ReadAttributes
from allocator.tracker import AllocationTracker

# Device fields the count stage may read besides attributes (the checks' prefilters).
_READ_FIELDS = (
    "capacity",
    "taints",
    "bindingConditions",
    "bindingFailureConditions",
    "bindsToNode",
)


@record(frozen=True)
class NodeAlike:
    """What the count stage reads on one node, names taken out, and the names to map back."""

    key: tuple
    devices: tuple[str, ...]  # "driver/pool/device" of each device in reach, in search order
    # The node's own names: words that name one of them are not shared with another node.
    names: frozenset[str]


class NodeAlikeIndex:
    """Device keys per reading of the claims, worked out once per device (kept by the
    Allocator for the run: devices do not change, only whether they are held)."""

    __slots__ = ("_devices", "_read_names")

    def __init__(self) -> None:
        self._devices: dict[tuple[int, ReadAttributes], tuple[Device, tuple]] = {}
        # (driver, reading) -> the attribute names the claims read (``_read_names``).
        self._read_names: dict[tuple[str, ReadAttributes], tuple[str, ...]] = {}

    def node(
        self,
        node_name: str,
        pools: Sequence[Pool],
        tracker: AllocationTracker,
        read: ReadAttributes,
    ) -> NodeAlike | None:
        """The node's key, or None when its count stage must run (see the module's doc)."""
        if read is None or not pools:
            return None
        parts = []
        devices: list[str] = []
        names = {node_name}
        held = tracker.cluster
        preallocated = tracker.preallocated
        for pool in pools:
            if pool.incomplete or pool.invalid or pool.has_shared_devices:
                return None
            driver = pool.key.driver
            names.add(pool.key.pool)
            keys = []
            for s in pool.slices:
                # skipNodeOperations: whether a device may be had depends on the node itself
                # (its declared features), not on its devices.
                if s.shared_counters or _skips_node_operations(s.raw):
                    return None
                names.add(s.name)
            for d in pool.devices:
                if d.id in held or d.id in preallocated:
                    return None
                key = self._device(d.device, driver, read)
                if key is None:
                    return None
                keys.append(key)
                devices.append(str(d.id))
                names.add(d.id.device)
            parts.append((driver, tuple(keys)))
        return NodeAlike(tuple(parts), tuple(devices), frozenset(names))

    def _device(self, device: Device, driver: str, read: frozenset) -> tuple | None:
        cache_key = (id(device), read)
        hit = self._devices.get(cache_key)
        if hit is not None and hit[0] is device:
            return hit[1]
        if device.consumes_counters or device.allow_multiple_allocations:
            return None
        names = self._read_names.get((driver, read))
        if names is None:
            names = self._read_names[(driver, read)] = _read_names(driver, read)
        published = device.attributes
        attributes = tuple(
            (name, type(value).__name__, repr(value))
            for name in names
            if (value := published.get(name)) is not None
        )
        raw = device.raw
        # As published (a field written in another order on another node keeps them apart).
        key = (attributes, repr([raw.get(f) for f in _READ_FIELDS]))
        self._devices[cache_key] = (device, key)
        return key


def _skips_node_operations(raw: dict) -> bool:
    spec = raw.get("spec")
    return bool(
        raw.get("skipNodeOperations") or (type(spec) is dict and spec.get("skipNodeOperations"))
    )


def _read_names(driver: str, read: frozenset) -> tuple[str, ...]:
    """The attribute names, as a device of ``driver`` may publish them, that the claims read:
    a qualified name, or its bare form in the driver's own domain (``cel.split_name``)."""
    names: set[str] = set()
    for domain, ident in read:
        if domain in ("", driver):
            names.add(ident)
            names.add(f"{driver}/{ident}")
        else:
            names.add(f"{domain}/{ident}")
    return tuple(sorted(names))
