"""Consumable capacity (DRAConsumableCapacity).

A device with ``allowMultipleAllocations: true`` can be shared by several claims (and several
requests of one claim); each allocation consumes part of its capacity and gets a ``shareID``.
A request asks for capacity with ``capacity.requests``; the device's ``requestPolicy`` decides
what is actually consumed:

- nothing requested: the policy's ``default``, else the whole capacity;
- ``validRange``: below ``min`` -> ``min``; with ``step``, rounded up to ``min + k*step``; above
  ``max`` the device does not fit;
- ``validValues``: rounded up to the first listed value >= the request; none -> no fit.

The sum of what all shares consume must stay within the capacity. A device that does not allow
multiple allocations is taken whole, but must still be able to hold the requested amount.
Deleting pods free only their own share: the claims they alone hold do not count.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import field

from allocator.checks import CAPACITY, PathEntry, Rejection, SearchState, Step
from allocator.errors import ValidationError
from allocator.featuregates import FeatureGates
from allocator.model import (
    CapacityRequirements,
    Device,
    DeviceCapacity,
    DeviceID,
    ExactDeviceRequest,
    RequestPolicy,
    ResourceClaim,
)
from allocator.pools import DeviceWithID
from allocator.quantity import Quantity
from allocator.records import record
from allocator.requests import ClaimData, RequestData
from allocator.validation import ValidationContext

GATE = "DRAConsumableCapacity"
# Fixed namespace so share IDs are the same in every run over the same snapshot.
# The result field (internal) a share keeps its consumed amounts under until commit.
SHARE = "_share"
SHARE_ID_NAMESPACE = uuid.UUID("6f1c3a52-5d0e-4b8e-9f57-3c2d8a1e7b40")


class CapacityError(ValueError):
    pass


def allows_multiple_allocations(device: Device, gates: FeatureGates) -> bool:
    return device.allow_multiple_allocations and gates.enabled(GATE)


def check_capacity_gate(
    request: ExactDeviceRequest, claim_key: str, request_name: str, gates: FeatureGates
) -> None:
    """kube-scheduler refuses capacity requests when the feature is off."""
    if request.capacity is not None and request.capacity.requests and not gates.enabled(GATE):
        raise CapacityError(
            f"claim {claim_key}, request {request_name}: has capacity requests, but the "
            f"{GATE} feature is disabled"
        )


def share_id(claim_key: str, request: str, device_id: DeviceID, slot: int = 0) -> str:
    """A deterministic share ID (UUID 5) so that two runs over one snapshot compare equal."""
    return str(uuid.uuid5(SHARE_ID_NAMESPACE, f"{claim_key}|{request}|{device_id}|{slot}"))


# --- names ------------------------------------------------------------------------------------


def resolve_capacity_name(
    name: str, driver: str, capacity: dict[str, DeviceCapacity]
) -> str | None:
    """The device's own key for a requested capacity name: exact, or the other spelling when
    the domain is the device's driver (``bandwidth`` and ``<driver>/bandwidth`` are one)."""
    if name in capacity:
        return name
    domain, sep, identifier = name.partition("/")
    if sep:
        if domain == driver and identifier in capacity:
            return identifier
        return None
    qualified = f"{driver}/{name}"
    return qualified if qualified in capacity else None


def resolve_requests(
    requirements: CapacityRequirements | None, driver: str, device: Device
) -> dict[str, Quantity] | None:
    """Requested amounts keyed by the device's capacity names; None when the device lacks a
    requested capacity (it cannot satisfy the request)."""
    if requirements is None or not requirements.requests:
        return {}
    out: dict[str, Quantity] = {}
    for name, amount in requirements.requests.items():
        key = resolve_capacity_name(name, driver, device.capacity)
        if key is None:
            return None
        if key in out:
            raise CapacityError(f"capacity {key} is requested under two names")
        out[key] = amount
    return out


# --- request policy ---------------------------------------------------------------------------


def round_up(requested: Quantity | None, capacity: DeviceCapacity) -> Quantity:
    """What one allocation consumes of a capacity, before the policy's validity check."""
    policy = capacity.request_policy
    if requested is None:
        if policy is not None and policy.default is not None:
            return policy.default
        return capacity.value
    if policy is None:
        return requested
    if policy.valid_range_min is not None:
        low = policy.valid_range_min
        if requested < low:
            return low
        step = policy.valid_range_step
        if step is None or step.value <= 0:
            return requested
        added = requested.value - low.value
        n = -(-added // step.value)  # ceil for Fractions
        return Quantity(low.value + step.value * n, step.format)
    if policy.valid_values:
        for value in sorted(policy.valid_values):
            if requested <= value:
                return value
    return requested


def violates_policy(amount: Quantity, policy: RequestPolicy | None) -> bool:
    if policy is None:
        return False
    if policy.default is not None and amount == policy.default:
        return False
    if policy.valid_range_min is not None:
        if policy.valid_range_max is not None and amount > policy.valid_range_max:
            return True
        step = policy.valid_range_step
        if step is not None and step.value > 0:
            return (amount.value - policy.valid_range_min.value) % step.value != 0
        return amount < policy.valid_range_min
    if policy.valid_values:
        return all(amount != v for v in policy.valid_values)
    return False


def consumption(
    device: Device, driver: str, requirements: CapacityRequirements | None
) -> dict[str, Quantity] | None:
    """What one allocation of ``device`` consumes of each capacity, or None when the request
    cannot be met by this device (missing capacity, policy violated)."""
    requested = resolve_requests(requirements, driver, device)
    if requested is None:
        return None
    out = {}
    for name, capacity in device.capacity.items():
        amount = round_up(requested.get(name), capacity)
        if amount.sign() < 0:
            raise CapacityError(f"capacity {name}: negative amount {amount}")
        if violates_policy(amount, capacity.request_policy):
            return None
        out[name] = amount
    return out


def fits(
    device: Device,
    amounts: dict[str, Quantity],
    consumed: dict[str, Quantity] | None = None,
) -> str | None:
    """None when ``amounts`` fit on top of ``consumed``; otherwise which capacity runs out."""
    for name, amount in amounts.items():
        total = device.capacity[name].value
        used = (consumed or {}).get(name)
        after = used + amount if used is not None else amount
        if after > total:
            left = total - used if used is not None else total
            return f"capacity {name}: needs {amount}, {left} of {total} left"
    return None


def capacity_result_fields(
    share: str | None, consumed: dict[str, Quantity] | None
) -> dict[str, object]:
    """``shareID`` and ``consumedCapacity`` of a device's result entry (shared devices only)."""
    if share is None:
        return {}
    return {
        "shareID": share,
        "consumedCapacity": {k: v.canonical() for k, v in sorted((consumed or {}).items())},
    }


# --- the ledger -------------------------------------------------------------------------------


def _add(into: dict[str, Quantity], amounts: dict[str, Quantity], sign: int = 1) -> None:
    for name, amount in amounts.items():
        delta = amount if sign > 0 else -amount
        into[name] = into[name] + delta if name in into else delta


def seed_consumption(
    claims: Iterable[ResourceClaim], freed_claims: Iterable[str] = ()
) -> dict[DeviceID, dict[str, Quantity]]:
    """Capacity consumed in the cluster: the consumedCapacity of every allocated claim's
    shares, except claims held only by deleting pods (their share is freed)."""
    freed = set(freed_claims)
    out: dict[DeviceID, dict[str, Quantity]] = {}
    for claim in claims:
        if claim.allocation is None or claim.key in freed:
            continue
        for result in claim.allocation.devices:
            if result.share_id is None or result.admin_access:
                continue
            _add(out.setdefault(result.device_id, {}), result.consumed_capacity)
    return out


def shared_devices_in_cluster(claims: Iterable[ResourceClaim]) -> set[DeviceID]:
    """Devices allocated as shares (with a shareID): never exclusively in use."""
    return {
        r.device_id
        for c in claims
        if c.allocation is not None
        for r in c.allocation.devices
        if r.share_id is not None
    }


@record
class _Share:
    """Capacity of a shared device taken by a NodeClaim's pods on one of its instance types."""

    node_claim_id: str
    instance_type: str
    amounts: dict[str, Quantity]
    template: bool


class CapacityLedger:
    """Consumed capacity of shared devices across the run (in-cluster and template devices)."""

    def __init__(
        self,
        claims: Iterable[ResourceClaim] = (),
        freed_claims: Iterable[str] = (),
        *,
        gates: FeatureGates,
    ) -> None:
        self.gates = gates
        self.seed = seed_consumption(claims, freed_claims)
        self.shares: dict[DeviceID, list[_Share]] = {}

    def view(self, node_claim_id: str, instance_type: str) -> CapacityView:
        return CapacityView(self, node_claim_id, instance_type)

    def baseline(
        self, device_id: DeviceID, node_claim_id: str, instance_type: str, template: bool
    ) -> dict[str, Quantity]:
        consumed: dict[str, Quantity] = {}
        if template:
            # Template devices exist once per NodeClaim and instance type.
            for share in self.shares.get(device_id, ()):
                if (
                    share.template
                    and share.node_claim_id == node_claim_id
                    and share.instance_type == instance_type
                ):
                    _add(consumed, share.amounts)
            return consumed
        _add(consumed, self.seed.get(device_id, {}))
        # This NodeClaim's own shares on this instance type (its other instance types belong
        # to nodes that will not launch); another NodeClaim's count once, as its pessimistic
        # max (per capacity, its largest instance type), as Karpenter's
        # InflightConsumedCapacity does (the design is silent).
        for share in self.shares.get(device_id, ()):
            if (
                not share.template
                and share.node_claim_id == node_claim_id
                and share.instance_type == instance_type
            ):
                _add(consumed, share.amounts)
        _add(consumed, self._inflight(device_id, skip=node_claim_id))
        return consumed

    def _inflight(self, device_id: DeviceID, skip: str | None = None) -> dict[str, Quantity]:
        """Committed shares of an in-cluster device, each NodeClaim (but ``skip``) counted at
        its largest instance type."""
        per_claim: dict[str, dict[str, dict[str, Quantity]]] = {}
        for s in self.shares.get(device_id, ()):
            if not s.template and s.node_claim_id != skip:
                _add(
                    per_claim.setdefault(s.node_claim_id, {}).setdefault(s.instance_type, {}),
                    s.amounts,
                )
        out: dict[str, Quantity] = {}
        for by_it in per_claim.values():
            largest: dict[str, Quantity] = {}
            for amounts in by_it.values():
                for name, amount in amounts.items():
                    if name not in largest or amount > largest[name]:
                        largest[name] = amount
            _add(out, largest)
        return out

    def commit(
        self,
        node_claim_id: str,
        instance_type: str,
        shares: Iterable[tuple[DeviceID, dict[str, Quantity], bool]],
    ) -> None:
        """Record the run's shares: (device, consumed capacity, is-template)."""
        for device_id, amounts, template in shares:
            self.shares.setdefault(device_id, []).append(
                _Share(node_claim_id, instance_type, dict(amounts), template)
            )

    def release_instance_type(self, node_claim_id: str, instance_type: str) -> None:
        for device_id in list(self.shares):
            kept = [
                s
                for s in self.shares[device_id]
                if not (s.node_claim_id == node_claim_id and s.instance_type == instance_type)
            ]
            if kept:
                self.shares[device_id] = kept
            else:
                del self.shares[device_id]

    def consumed_after_run(self) -> dict[DeviceID, dict[str, Quantity]]:
        """In-cluster consumption once the run is committed; a NodeClaim's shares count once
        (its largest instance type), since only one of its instance types launches."""
        out = {d: dict(v) for d, v in self.seed.items()}
        for device_id, shares in self.shares.items():
            if any(not s.template for s in shares):
                _add(out.setdefault(device_id, {}), self._inflight(device_id))
        return out


@record
class CapacityView:
    """What one Allocate sees of shared devices, updated as the DFS adds and removes shares."""

    ledger: CapacityLedger
    node_claim_id: str
    instance_type: str
    _path: dict[tuple[DeviceID, bool], dict[str, Quantity]] = field(default_factory=dict)

    def consumed(self, device_id: DeviceID, template: bool = False) -> dict[str, Quantity]:
        out = self.ledger.baseline(device_id, self.node_claim_id, self.instance_type, template)
        _add(out, self._path.get((device_id, template), {}))
        return out

    def try_take(
        self,
        device_id: DeviceID,
        device: Device,
        requirements: CapacityRequirements | None,
        template: bool = False,
    ) -> tuple[dict[str, Quantity] | None, str | None]:
        """(consumed amounts, None) when the device can serve the request; (None, reason)
        otherwise. For a device taken whole, the amounts are {} (nothing is recorded)."""
        gates = self.ledger.gates
        if not gates.enabled(GATE):
            return {}, None
        amounts = consumption(device, device_id.driver, requirements)
        if amounts is None:
            return None, f"device {device_id} cannot serve the requested capacity"
        if not allows_multiple_allocations(device, gates):
            problem = fits(device, amounts)
            return ({}, None) if problem is None else (None, f"device {device_id}: {problem}")
        problem = fits(device, amounts, self.consumed(device_id, template))
        if problem is not None:
            return None, f"device {device_id}: {problem}"
        _add(self._path.setdefault((device_id, template), {}), amounts)
        return amounts, None

    def give_back(
        self, device_id: DeviceID, amounts: dict[str, Quantity], template: bool = False
    ) -> None:
        if not amounts:
            return
        _add(self._path.setdefault((device_id, template), {}), amounts, sign=-1)


# --- in the pipeline ---------------------------------------------------------------------------


class CapacityCheck:
    """The capacity a request asks for must fit the device (its request policy, what is
    left after the other shares); a share records consumedCapacity and a shareID."""

    name = "capacity"
    prefilter_it_independent = True  # the static fit of a device; shares are checked in try_add

    def __init__(self, ctx: SearchState, ledger: CapacityLedger) -> None:
        self.view = ledger.view(ctx.node_claim_id, ctx.instance_type)
        self.taken: list[dict[str, Quantity] | None] = []

    def prefilter(
        self, ctx: SearchState, claim: ClaimData, request: RequestData, cand: DeviceWithID
    ) -> Rejection | None:
        if request.is_admin:
            return None
        requirements = request.exact.capacity if request.exact is not None else None
        if requirements is None and not cand.device.allow_multiple_allocations:
            return None  # taken whole, nothing asked: every capacity fits
        try:
            amounts = consumption(cand.device, cand.id.driver, requirements)
        except CapacityError as e:
            return Rejection(CAPACITY, f"device {cand.id}: {e}")
        if amounts is None:
            return Rejection(
                CAPACITY,
                f"device {cand.id} cannot serve the capacity {request.name} requests "
                "(capacity missing or outside the device's request policy)",
            )
        problem = fits(cand.device, amounts)
        if problem is not None:
            return Rejection(CAPACITY, f"device {cand.id}: {problem}")
        return None

    def try_add(self, ctx: SearchState, step: Step, cand: DeviceWithID) -> Rejection | None:
        if step.request.is_admin:
            self.taken.append(None)
            return None
        requirements = step.request.exact.capacity if step.request.exact is not None else None
        if requirements is None and not cand.device.allow_multiple_allocations:
            self.taken.append(None)
            return None
        try:
            amounts, reason = self.view.try_take(
                cand.id, cand.device, requirements, template=cand.is_template
            )
        except CapacityError as e:
            return Rejection(CAPACITY, f"device {cand.id}: {e}")
        if reason is not None:
            return Rejection(CAPACITY, reason)
        if cand.device.allow_multiple_allocations and amounts is not None:
            ctx.extra["consumedCapacity"] = {k: v.canonical() for k, v in sorted(amounts.items())}
            ctx.extra["shareID"] = share_id(step.claim.key, step.request.name, cand.id, step.slot)
            ctx.extra[SHARE] = amounts
            self.taken.append(amounts)
        else:
            self.taken.append(None)
        return None

    def remove(self, ctx: SearchState, step: Step, cand: DeviceWithID) -> None:
        amounts = self.taken.pop()
        if amounts:
            self.view.give_back(cand.id, amounts, template=cand.is_template)


def serves_several_slots(ctx: SearchState, cand: DeviceWithID) -> bool:
    """A device that allows multiple allocations can serve several slots of one request."""
    return cand.device.allow_multiple_allocations and ctx.gates.enabled(GATE)


def validate_capacity(ctx: ValidationContext, data: RequestData) -> None:
    """Request validator: capacity requests need the gate."""
    if data.exact is None:
        return
    try:
        check_capacity_gate(data.exact, ctx.claim_key, data.name, ctx.gates)
    except CapacityError as e:
        raise ValidationError(str(e), request=data.name) from e


def commit_shares(
    ledger: CapacityLedger, node_claim_id: str, instance_type: str, path: Sequence[PathEntry]
) -> None:
    """Commit hook: the shares the committed devices give out."""
    shares = [(e.cand.id, e.extra[SHARE], e.cand.is_template) for e in path if SHARE in e.extra]
    if shares:
        ledger.commit(node_claim_id, instance_type, shares)


def release_shares(ledger: CapacityLedger, node_claim_id: str, instance_type: str) -> None:
    ledger.release_instance_type(node_claim_id, instance_type)
