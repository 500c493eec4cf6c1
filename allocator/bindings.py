"""Attribute Bindings: runtime-only attributes that devices of an instance type will share.

Indexed by (attribute, nodePool, instanceType); each device maps to the devices it is bound
with, after a BFS transitive closure computed from a snapshot of the direct bindings.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping

from allocator.model import AttributeValue, Device, DeviceID, InstanceType

BindingKey = tuple[str, str | None, str]  # (attribute, nodePool, instanceType)
_EMPTY: frozenset[DeviceID] = frozenset()


class AttributeBindings:
    __slots__ = ("_graph",)

    def __init__(self, graph: dict[BindingKey, dict[DeviceID, frozenset[DeviceID]]] | None = None):
        self._graph = graph or {}

    @classmethod
    def build(
        cls, instance_types_by_node_pool: Mapping[str | None, Iterable[InstanceType]]
    ) -> AttributeBindings:
        direct: dict[BindingKey, dict[DeviceID, set[DeviceID]]] = {}
        for node_pool, instance_types in instance_types_by_node_pool.items():
            for it in instance_types:
                for decl in it.attribute_bindings:
                    group = list(dict.fromkeys(decl.devices))  # dedupe, keep order
                    if len(group) < 2:
                        continue  # a group of one binds nothing
                    adj = direct.setdefault((decl.attribute, node_pool, it.name), {})
                    for a in group:
                        for b in group:
                            if a != b:  # self-loops removed
                                adj.setdefault(a, set()).add(b)
        graph: dict[BindingKey, dict[DeviceID, frozenset[DeviceID]]] = {}
        for key, adj in direct.items():
            # Closure from a frozen copy of the direct graph so that results computed earlier
            # in the pass never feed later BFS walks.
            frozen = {d: frozenset(n) for d, n in adj.items()}
            closed: dict[DeviceID, frozenset[DeviceID]] = {}
            for start in frozen:
                seen = {start}
                queue = deque([start])
                while queue:
                    for nxt in frozen.get(queue.popleft(), _EMPTY):
                        if nxt not in seen:
                            seen.add(nxt)
                            queue.append(nxt)
                seen.discard(start)
                closed[start] = frozenset(seen)
            graph[key] = closed
        return cls(graph)

    def bound(
        self, attribute: str, node_pool: str | None, instance_type: str, a: DeviceID, b: DeviceID
    ) -> bool:
        adj = self._graph.get((attribute, node_pool, instance_type))
        return adj is not None and b in adj.get(a, _EMPTY)

    def bound_set(
        self, attribute: str, node_pool: str | None, instance_type: str, d: DeviceID
    ) -> frozenset[DeviceID]:
        adj = self._graph.get((attribute, node_pool, instance_type))
        return _EMPTY if adj is None else adj.get(d, _EMPTY)

    def instance_types(self) -> frozenset[str]:
        """The instance types some binding is declared on."""
        return frozenset(key[2] for key in self._graph)

    def has(self, attribute: str, node_pool: str | None, instance_type: str) -> bool:
        """Whether any binding exists for this triple (the fallback has something to consult)."""
        return (attribute, node_pool, instance_type) in self._graph


def lookup_attribute(device: Device, attribute: str, driver: str) -> AttributeValue | None:
    """The design's lookup: the fully qualified name first, then the ID part when the domain
    equals the device's driver; and the reverse (an unqualified name finds ``driver/name``)."""
    attrs = device.attributes
    value = attrs.get(attribute)
    if value is not None:
        return value
    domain, sep, ident = attribute.rpartition("/")
    if sep:
        if domain == driver:
            return attrs.get(ident)
        return None
    return attrs.get(f"{driver}/{attribute}")
