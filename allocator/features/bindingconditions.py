"""Device binding conditions (DRADeviceBindingConditions).

A device that publishes ``bindingConditions`` is usable only once external controllers set
those conditions to True on the claim; kube-scheduler waits in PreBind (600 s by default,
``bindingTimeout``), and clears the allocation when a ``bindingFailureConditions`` entry turns
True. For the simulation that means:

- pools holding such devices are searched after the others (they are slower to become usable);
- a claim whose status shows a binding failure condition True is re-run through the DFS
  (state ``reallocated``);
- a device with ``bindsToNode`` makes the allocation's nodeSelector name the chosen node;
- with the gate off, devices with binding conditions are not selectable at all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any

from allocator.checks import BINDING_CONDITION, Rejection, SearchState, Step
from allocator.featuregates import FeatureGates
from allocator.model import Device, DeviceID, ResourceClaim
from allocator.pools import DeviceWithID
from allocator.requests import ClaimData, RequestData

GATE = "DRADeviceBindingConditions"
DEFAULT_BINDING_TIMEOUT_SECONDS = 600


def device_selectable(device: Device, gates: FeatureGates) -> bool:
    """With the gate off kube-scheduler skips devices that need binding conditions."""
    return gates.enabled(GATE) or not device.binding_conditions


def unselectable_reason(device_id: DeviceID) -> str:
    return f"device {device_id} has binding conditions, but the {GATE} feature is disabled"


def _condition_true(conditions: Iterable[dict], types: Iterable[str]) -> list[str]:
    wanted = set(types)
    return [
        c.get("type")
        for c in conditions or []
        if isinstance(c, dict) and c.get("type") in wanted and str(c.get("status")) == "True"
    ]


def binding_failures(
    claim: ResourceClaim,
    device_lookup: Callable[[DeviceID], Device | None] | None = None,
    *,
    gates: FeatureGates,
) -> list[str]:
    """Messages for each allocated device of ``claim`` with a binding failure condition True.

    Failure conditions come from the allocation result (as kube-scheduler copies them there)
    or, for results written without them, from the device as currently published. Conditions
    are read from ``status.devices[].conditions`` of the matching device and from the claim's
    ``status.conditions``. Empty when the gate is off or nothing failed."""
    if not gates.enabled(GATE) or claim.allocation is None:
        return []
    claim_conditions = ((claim.raw or {}).get("status") or {}).get("conditions") or []
    failures = []
    for result in claim.allocation.devices:
        failure_types: Sequence[str] = result.binding_failure_conditions
        if not failure_types and device_lookup is not None:
            device = device_lookup(result.device_id)
            if device is not None:
                failure_types = device.binding_failure_conditions
        if not failure_types:
            continue
        found: list[str] = []
        for status in claim.device_statuses:
            if (
                status.get("driver") == result.driver
                and status.get("pool") == result.pool
                and status.get("device") == result.device
            ):
                found.extend(_condition_true(status.get("conditions") or [], failure_types))
        found.extend(_condition_true(claim_conditions, failure_types))
        for condition in dict.fromkeys(found):
            failures.append(
                f"claim {claim.key}: device {result.device_id} binding failure condition "
                f"{condition} is True, so the allocation is cleared and the claim reallocated"
            )
    return failures


def binding_failed(
    claim: ResourceClaim,
    device_lookup: Callable[[DeviceID], Device | None] | None = None,
    *,
    gates: FeatureGates,
) -> bool:
    return bool(binding_failures(claim, device_lookup, gates=gates))


def node_name_selector(name: str) -> dict[str, Any]:
    """The NodeSelector kube-scheduler records for a node-bound allocation."""
    return {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]}
        ]
    }


def binds_to_node(devices: Iterable[Device], gates: FeatureGates) -> bool:
    return gates.enabled(GATE) and any(d.binds_to_node for d in devices)


def allocation_node_selector(
    devices: Iterable[Device],
    topology_selector: dict | None,
    *,
    node_name: str | None,
    node_claim_name: str | None,
    gates: FeatureGates,
) -> dict | None:
    """The claim's ``status.allocation.nodeSelector``: the chosen node when a device binds to
    the node (its name for an existing node, the NodeClaim's name for a new one, as the node
    will carry it), otherwise the selector the devices' topology gives."""
    if binds_to_node(devices, gates):
        target = node_name or node_claim_name
        if target:
            return node_name_selector(target)
    return topology_selector


def claim_binding_timeout(
    devices: Iterable[Device], timeout_seconds: int, gates: FeatureGates
) -> int | None:
    """``bindingTimeoutSeconds`` of a claim entry: set only when a device has conditions."""
    if gates.enabled(GATE) and any(d.binding_conditions for d in devices):
        return timeout_seconds
    return None


def device_result_fields(device: Device, gates: FeatureGates) -> dict[str, Any]:
    """Binding fields of one device entry of the result document (only where they apply)."""
    if not gates.enabled(GATE):
        return {}
    out: dict[str, Any] = {}
    if device.binding_conditions:
        out["bindingConditions"] = list(device.binding_conditions)
    if device.binding_failure_conditions:
        out["bindingFailureConditions"] = list(device.binding_failure_conditions)
    if device.binds_to_node:
        out["bindsToNode"] = True
    return out


# --- in the pipeline ---------------------------------------------------------------------------


class BindingConditionCheck:
    """With the gate off a device with binding conditions is not selectable; with it on the
    device's binding conditions go into the allocation result."""

    name = "binding-condition"
    prefilter_it_independent = True

    def __init__(self, ctx: SearchState) -> None:
        self.enabled = ctx.gates.enabled(GATE)

    def prefilter(
        self, ctx: SearchState, claim: ClaimData, request: RequestData, cand: DeviceWithID
    ) -> Rejection | None:
        if not self.enabled and cand.device.binding_conditions:
            return Rejection(BINDING_CONDITION, unselectable_reason(cand.id))
        return None

    def try_add(self, ctx: SearchState, step: Step, cand: DeviceWithID) -> Rejection | None:
        rejection = self.prefilter(ctx, step.claim, step.request, cand)
        if rejection is not None:
            return rejection
        fields = device_result_fields(cand.device, ctx.gates)
        if fields:
            ctx.extra.update(fields)
        return None

    def remove(self, ctx: SearchState, step: Step, cand: DeviceWithID) -> None:
        return None


def reallocation_predicate(gates: FeatureGates) -> Callable[[ResourceClaim], bool]:
    """A claim showing a binding failure condition is re-run through the DFS (the run's
    gates decide which conditions count)."""
    return partial(binding_failed, gates=gates)
