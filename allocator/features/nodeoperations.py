"""Optional node operations (DRAOptionalNodeOperations).

A ResourceSlice may say that kubelet can skip NodePrepareResources / NodeUnprepareResources for
its devices (``spec.skipNodeOperations``: "NodePrepareResources", "NodeUnprepareResources" or
"*"). The scheduler copies the list into each device's allocation result, and places a pod
whose claims skip operations only on nodes declaring the DRAOptionalNodeOperations feature in
``status.declaredFeatures`` (new NodeClaims are assumed to declare every feature).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from allocator.checks import NODE_OPERATIONS, Rejection, SearchState, Step
from allocator.featuregates import FeatureGates
from allocator.model import Node
from allocator.pools import DeviceWithID
from allocator.requests import ClaimData, RequestData

GATE = "DRAOptionalNodeOperations"
VALID_OPERATIONS = ("NodePrepareResources", "NodeUnprepareResources", "*")


def validate_skip_node_operations(values: Iterable[str]) -> str | None:
    values = list(values)
    for value in values:
        if value not in VALID_OPERATIONS:
            return f"skipNodeOperations: unsupported value {value!r}"
    if len(set(values)) != len(values):
        return "skipNodeOperations: values must be unique"
    if "NodePrepareResources" in values and not (
        "NodeUnprepareResources" in values or "*" in values
    ):
        # Otherwise pods could hang in Terminating when the node plugin is missing.
        return "skipNodeOperations: NodePrepareResources requires NodeUnprepareResources"
    return None


def skip_node_operations(slice_raw: dict | None, gates: FeatureGates) -> tuple[str, ...]:
    """The slice's ``spec.skipNodeOperations`` (accepts a whole object or just its spec);
    empty with the gate off or when the list is invalid."""
    if not gates.enabled(GATE) or not slice_raw:
        return ()
    spec = slice_raw.get("spec", slice_raw) if isinstance(slice_raw, dict) else {}
    values = spec.get("skipNodeOperations") or []
    if not isinstance(values, list) or validate_skip_node_operations(values):
        return ()
    return tuple(values)


def node_declares_optional_operations(node: Node | None) -> bool:
    """None stands for a new NodeClaim (assumed to declare every feature)."""
    if node is None:
        return True
    return GATE in (node.declared_features or ())


def node_problem(node: Node | None, operations: Iterable[str]) -> str | None:
    if not list(operations) or node_declares_optional_operations(node):
        return None
    return (
        f"node {node.name if node else ''} does not declare the {GATE} feature in "
        "status.declaredFeatures, but the pod's devices skip node operations"
    )


# --- in the pipeline ---------------------------------------------------------------------------


class NodeOperationsCheck:
    """Copies the slice's skipNodeOperations into the result; an existing node must declare
    DRAOptionalNodeOperations to get such devices."""

    name = "node-operations"
    prefilter_it_independent = True  # depends on the node, not the instance type

    def __init__(self, ctx: SearchState, nodes: Mapping[str, Node] | None) -> None:
        node = None
        if nodes is not None and ctx.node_claim_id.startswith("node/"):
            node = nodes.get(ctx.node_claim_id.removeprefix("node/"))
        self.node = node
        self.check_node = node is not None
        self.cache: dict[int, tuple[str, ...]] = {}  # per slice object
        self.template_ops: dict[str, dict[int, tuple[str, ...]]] = {}  # IT -> device object

    def _template_operations(self, ctx: SearchState, cand: DeviceWithID) -> tuple[str, ...]:
        """A template's own skipNodeOperations (the slice the new node's driver publishes)."""
        it = cand.instance_type or ctx.instance_type
        by_device = self.template_ops.get(it)
        if by_device is None:
            by_device = self.template_ops[it] = {}
            for t in ctx.template_slices_by_it.get(it, ()):
                ops = skip_node_operations(t.raw, ctx.gates)
                if ops:
                    for d in t.devices:
                        by_device[id(d)] = ops
        return by_device.get(id(cand.device), ())

    def _operations(self, ctx: SearchState, cand: DeviceWithID) -> tuple[str, ...]:
        if cand.slice is None:
            return self._template_operations(ctx, cand) if cand.is_template else ()
        key = id(cand.slice)
        ops = self.cache.get(key)
        if ops is None:
            ops = self.cache[key] = skip_node_operations(cand.slice.raw, ctx.gates)
        return ops

    def prefilter(
        self, ctx: SearchState, claim: ClaimData, request: RequestData, cand: DeviceWithID
    ) -> Rejection | None:
        if not self.check_node:
            return None  # a new NodeClaim declares every feature
        ops = self._operations(ctx, cand)
        if ops:
            problem = node_problem(self.node, ops)
            if problem is not None:
                return Rejection(NODE_OPERATIONS, f"device {cand.id}: {problem}")
        return None

    def try_add(self, ctx: SearchState, step: Step, cand: DeviceWithID) -> Rejection | None:
        rejection = self.prefilter(ctx, step.claim, step.request, cand)
        if rejection is not None:
            return rejection
        ops = self._operations(ctx, cand)
        if ops:
            ctx.extra["skipNodeOperations"] = list(ops)
        return None

    def remove(self, ctx: SearchState, step: Step, cand: DeviceWithID) -> None:
        return None
