"""Admin access to devices (DRAAdminAccess).

A request with ``adminAccess: true`` gets devices for monitoring or maintenance: it may take
devices that are already allocated, and what it takes stays available to everyone else (no
reservation, no counters, no capacity). Kubernetes allows it only in namespaces labelled
``resource.kubernetes.io/admin-access: "true"``. Taints still apply: an admin must tolerate
them explicitly. With the gate off kube-scheduler refuses such requests.
"""

from __future__ import annotations

from allocator.checks import ADMIN_ACCESS, ALLOCATED, Rejection, SearchState, Step
from allocator.eligibility import AllocatedCheck, taken_on_path
from allocator.errors import ValidationError
from allocator.featuregates import FeatureGates
from allocator.features.capacity import GATE as CAPACITY_GATE
from allocator.model import DeviceID, Namespace, ResourceClaim
from allocator.pools import DeviceWithID
from allocator.requests import ClaimData, RequestData
from allocator.validation import ValidationContext

GATE = "DRAAdminAccess"
ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"


class AdminAccessError(ValueError):
    """The message always contains "admin access"."""


def namespace_allows_admin_access(namespace: Namespace | None) -> bool:
    return namespace is not None and namespace.labels.get(ADMIN_ACCESS_LABEL) == "true"


def check_admin_access(
    claim_key: str,
    request_name: str,
    namespaces: dict[str, Namespace],
    gates: FeatureGates,
) -> None:
    """Raise AdminAccessError when an adminAccess request cannot be served."""
    if not gates.enabled(GATE):
        raise AdminAccessError(
            f"claim {claim_key}, request {request_name}: admin access is requested, "
            f"but the {GATE} feature is disabled"
        )
    namespace_name = claim_key.split("/", 1)[0]
    if not namespace_allows_admin_access(namespaces.get(namespace_name)):
        raise AdminAccessError(
            f"claim {claim_key}, request {request_name}: admin access to devices is only "
            f'allowed in namespaces labelled {ADMIN_ACCESS_LABEL}: "true", and namespace '
            f"{namespace_name} is not"
        )


def claim_admin_access_problems(
    claim: ResourceClaim, namespaces: dict[str, Namespace], gates: FeatureGates
) -> list[str]:
    """Every adminAccess problem of a claim (subrequests cannot ask for admin access)."""
    problems = []
    for request in claim.spec.requests:
        if request.exactly is not None and request.exactly.admin_access:
            try:
                check_admin_access(claim.key, request.name, namespaces, gates)
            except AdminAccessError as e:
                problems.append(str(e))
    return problems


def admin_may_take(already_in_this_claim: bool) -> bool:
    """An admin request may take an allocated device, but not one this claim already holds."""
    return not already_in_this_claim


# --- in the pipeline ---------------------------------------------------------------------------


def validate_admin_access(ctx: ValidationContext, data: RequestData) -> None:
    """Request validator: an adminAccess request needs the gate and a labelled namespace."""
    if not data.is_admin:
        return
    try:
        check_admin_access(ctx.claim_key, data.name, ctx.namespaces, ctx.gates)
    except AdminAccessError as e:
        raise ValidationError(str(e), request=data.name) from e


class FeatureAllocatedCheck(AllocatedCheck):
    """The allocated check with admin access and shared devices: an admin request may take allocated
    devices (not one its own claim already has) and reserves nothing; a device that allows
    multiple allocations (DRAConsumableCapacity) is limited by its capacity, not by who else
    holds it."""

    name = "allocated"
    prefilter_it_independent = True  # in-cluster answers hold for every instance type

    def __init__(self, ctx: SearchState) -> None:
        AllocatedCheck.__init__(self, ctx)
        self.sharing = ctx.gates.enabled(CAPACITY_GATE)  # read once per DFS, not per device
        self.preallocated = ctx.tracker.preallocated
        self.holders: dict[tuple[DeviceID, bool], list[int]] = {}
        self.kinds: list[str] = []

    def prefilter(
        self, ctx: SearchState, claim: ClaimData, request: RequestData, cand: DeviceWithID
    ) -> Rejection | None:
        if request.is_admin:
            return None
        if self.sharing and cand.device.allow_multiple_allocations:
            if not cand.is_template and cand.id in self.preallocated:
                return Rejection(ALLOCATED, f"device {cand.id} is already allocated")
            return None
        return AllocatedCheck.prefilter(self, ctx, claim, request, cand)

    def try_add(self, ctx: SearchState, step: Step, cand: DeviceWithID) -> Rejection | None:
        key = (cand.id, cand.is_template)
        held = self.holders.get(key, ())
        shared = self.sharing and cand.device.allow_multiple_allocations
        if step.request.is_admin:
            if step.claim.index in held and not shared:
                return Rejection(
                    ADMIN_ACCESS,
                    f"device {cand.id} is already allocated for claim {step.claim.key}",
                )
            kind = "admin"
        elif shared:
            if not cand.is_template and cand.id in self.preallocated:
                return Rejection(ALLOCATED, f"device {cand.id} is already allocated")
            kind = "shared"
        else:
            if held:
                return taken_on_path(cand)
            rejection = AllocatedCheck.try_add(self, ctx, step, cand)
            if rejection is not None:
                return rejection
            kind = "exclusive"
        self.holders.setdefault(key, []).append(step.claim.index)
        self.kinds.append(kind)
        if kind != "exclusive":
            ctx.extra["_no_reserve"] = True
        if kind == "admin":
            ctx.extra["adminAccess"] = True
        return None

    def remove(self, ctx: SearchState, step: Step, cand: DeviceWithID) -> None:
        kind = self.kinds.pop()
        key = (cand.id, cand.is_template)
        held = self.holders[key]
        held.pop()
        if not held:
            del self.holders[key]
        if kind == "exclusive":
            AllocatedCheck.remove(self, ctx, step, cand)
