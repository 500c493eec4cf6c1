"""Optional node operations (DRAOptionalNodeOperations).

A ResourceSlice may say that kubelet can skip NodePrepareResources / NodeUnprepareResources for
its devices (``spec.skipNodeOperations``: "NodePrepareResources", "NodeUnprepareResources" or
"*"). The scheduler copies the list into each device's allocation result, and places a pod
whose claims skip operations only on nodes declaring the DRAOptionalNodeOperations feature in
``status.declaredFeatures`` (new NodeClaims are assumed to declare every feature).
"""

from __future__ import annotations

from collections.abc import Iterable

from allocator.features.gates import ALL_ON, FeatureGates
from allocator.model import Node

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


def skip_node_operations(slice_raw: dict | None, gates: FeatureGates = ALL_ON) -> tuple[str, ...]:
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
