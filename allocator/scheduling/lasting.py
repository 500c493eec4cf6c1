"""The existing nodes that refused a pod shape for good, passed over by attempts without words.

What only a node and the pod decide (``ExistingNode._local``: cordon, taints, volume limits,
host ports, room, the node's requirements) can only refuse more as the loop runs: a placement
takes room, host ports and volume slots and narrows the node's requirements, and nothing in
the loop gives them back (a suggestion's scope lends room back, for trials only). A node that
refused a pod of one shape so refuses every later pod of that shape.

An attempt that builds no words reads nothing of such a refusal but that it happened: a pod
placed reads no reason of the nodes before its own, and a failure without words is tried again
with them. So those attempts ask only the nodes left (1,000 web pods that select 100 of 2,000
nodes asked the 1,900 others each: 1.6 s of a 1.8 s run); attempts with words, trials and
traced runs ask every node.
"""

from __future__ import annotations

from dataclasses import field
from typing import Protocol

from allocator.records import record

# Pod shapes remembered at once (each keeps a list of up to every existing node).
MAX_SHAPES = 64


class _Node(Protocol):
    id: str


@record
class _Left:
    """The existing nodes not yet known to refuse a pod shape for good."""

    nodes: list  # the run's existing nodes this was built from
    left: list  # those not known to refuse the shape, in their order
    refused: set[str] = field(default_factory=set)  # ids refused since ``left`` was built


class LastingRefusals:
    """Per pod shape, the run's existing nodes not known to refuse it for good. Belongs to one
    run's loop; ``clear`` when the state changes other than by a placement."""

    __slots__ = ("_by_shape",)

    def __init__(self) -> None:
        self._by_shape: dict[tuple, _Left] = {}

    def left(self, shape: tuple, nodes: list) -> list:
        """``nodes`` (the run's existing nodes, in order) but those that refused ``shape`` for
        good."""
        entry = self._by_shape.get(shape)
        if entry is None or entry.nodes is not nodes:
            return nodes
        if entry.refused:
            refused = entry.refused
            entry.left = [n for n in entry.left if n.id not in refused]
            entry.refused = set()
        return entry.left

    def refused(self, shape: tuple, nodes: list, node: _Node) -> None:
        """``node`` (one of ``nodes``) refused ``shape`` for good."""
        entry = self._by_shape.get(shape)
        if entry is None or entry.nodes is not nodes:
            if len(self._by_shape) >= MAX_SHAPES:  # many shapes: memory bounded
                self._by_shape.clear()
            entry = self._by_shape[shape] = _Left(nodes, nodes)
        entry.refused.add(node.id)

    def clear(self) -> None:
        self._by_shape.clear()
