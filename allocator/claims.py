"""ResourceClaim State Handling: classify each of a pod's claims before the DFS.

Claims are processed in order against *effective requirements* (the NodeClaim's requirements
tightened by every already-allocated claim), so mutually incompatible claims fail at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from typing import Any

from allocator.errors import AllocationError
from allocator.model import ResourceClaim
from allocator.records import record
from allocator.requirements import Requirements, requirements_from_node_selector

UNALLOCATED = "unallocated"
ALLOCATED_IN_CLUSTER = "allocated-in-cluster"
ALLOCATED_IN_MEMORY = "allocated-in-memory"
REALLOCATED = "reallocated"
STATES = (UNALLOCATED, ALLOCATED_IN_CLUSTER, ALLOCATED_IN_MEMORY, REALLOCATED)


@record
class AllocatedDevice:
    """One device of a claim's allocation, as docs/RESULT.md prints it."""

    request: str
    driver: str
    pool: str
    device: str
    source: str  # "in-cluster" | "template"
    instance_type: str | None = None  # template devices only
    # Feature data for the result (consumedCapacity, shareID, tolerations, adminAccess, ...),
    # filled by device checks; keys are the result document's JSON names (docs/RESULT.md).
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "request": self.request,
            "driver": self.driver,
            "pool": self.pool,
            "device": self.device,
            "source": self.source,
            "instanceType": self.instance_type,
        }
        if self.extra:
            out.update(self.extra)
        return out


@record
class ClaimAllocationMetadata:
    """Recorded on Commit for claims first allocated in this run (in-memory reuse)."""

    node_claim_id: str
    used_templates: bool
    requirements: Requirements  # topology the claim's devices contribute
    devices_by_instance_type: dict[str, list[AllocatedDevice]]
    node_selector: dict | None = None


@record
class ClaimOutcome:
    """Per claim of an Allocate result."""

    key: str
    state: str  # one of STATES (the result's claims[].state, docs/RESULT.md)
    devices: list[AllocatedDevice] = field(default_factory=list)
    node_selector: dict | None = None
    # For DFS'd claims: the devices each successful instance type chose.
    devices_by_instance_type: dict[str, list[AllocatedDevice]] = field(default_factory=dict)

    def devices_for(self, instance_types: list[str] | None = None) -> list[AllocatedDevice]:
        """In-cluster devices once (instanceType null), template devices once per remaining
        instance type (docs/RESULT.md)."""
        if not self.devices_by_instance_type:
            return list(self.devices)
        return merge_devices(self.devices_by_instance_type, instance_types)


def merge_devices(
    by_it: Mapping[str, list[AllocatedDevice]], instance_types: list[str] | None
) -> list[AllocatedDevice]:
    out: list[AllocatedDevice] = []
    seen: set[tuple[str, str, str, str, str | None]] = set()
    wanted = None if instance_types is None else set(instance_types)
    for it, devices in by_it.items():
        if wanted is not None and it not in wanted:
            continue
        for d in devices:
            if d.source == "template":
                out.append(d)
                continue
            # Several shares of one multi-allocatable device are distinct entries (shareID).
            key = (d.request, d.driver, d.pool, d.device, d.extra.get("shareID"))
            if key not in seen:
                seen.add(key)
                out.append(d)
    return out


@record
class ClassifiedClaim:
    """A claim as classified before the search: its state and the topology it brings."""

    index: int
    claim: ResourceClaim
    state: str
    requirements: Requirements | None = None  # topology merged into the effective requirements
    metadata: ClaimAllocationMetadata | None = None

    @property
    def needs_dfs(self) -> bool:
        return self.state in (UNALLOCATED, REALLOCATED)


# Further reasons to re-run an in-cluster allocation through the DFS (the pipeline's
# ``reallocation_predicates``: "a device shows a binding failure condition"). Each gets the
# claim, returns bool.
ReallocationPredicate = Callable[[ResourceClaim], bool]


def reserved_only_by_deleting_pods(
    claim: ResourceClaim, deleting_pods: frozenset[str] | set[str]
) -> bool:
    """Non-empty reservedFor whose every entry is a deleting pod. An empty reservedFor keeps
    the allocation (docs/SIMULATION.md); any non-pod consumer keeps it too."""
    if not claim.reserved_for:
        return False
    for ref in claim.reserved_for:
        if ref.resource != "pods" or ref.api_group not in ("", None):
            return False
        if f"{claim.namespace}/{ref.name}" not in deleting_pods:
            return False
    return True


def reallocated(
    claim: ResourceClaim,
    deleting_pods: frozenset[str] | set[str],
    reallocation: Sequence[ReallocationPredicate],
) -> bool:
    """An in-cluster allocation the DFS re-runs: held only by deleting pods, or one of the
    pipeline's ``reallocation_predicates`` (a device that failed to bind)."""
    if claim.allocation is None:
        return False
    if reserved_only_by_deleting_pods(claim, deleting_pods):
        return True
    return any(predicate(claim) for predicate in reallocation)


def _merge_selector(
    claim_key: str, what: str, node_selector: dict, effective: Requirements
) -> Requirements:
    try:
        terms = requirements_from_node_selector(node_selector)
    except ValueError as e:  # a selector the requirement algebra cannot read
        raise AllocationError(f"claim {claim_key}: {what}: {e}", code="invalid") from e
    if not terms:
        return Requirements()
    reasons = []
    for term in terms:
        reason = effective.compatible(term)
        if reason is None:
            effective.add(term)
            return term
        reasons.append(reason)
    raise AllocationError(
        f"claim {claim_key}: {what} is incompatible with the NodeClaim's requirements: "
        + " | ".join(reasons),
        code="incompatible",
    )


def classify_claims(
    claims: list[ResourceClaim],
    effective: Requirements,
    node_claim_id: str,
    metadata: Mapping[str, ClaimAllocationMetadata],
    deleting_pods: frozenset[str] | set[str],
    reallocation: Sequence[ReallocationPredicate] = (),
) -> list[ClassifiedClaim]:
    """Classify in order, tightening ``effective`` in place; AllocationError on conflict.
    ``reallocation``: the pipeline's reallocation predicates (none: the design's core)."""
    out: list[ClassifiedClaim] = []
    for i, claim in enumerate(claims):
        key = claim.key
        meta = metadata.get(key)
        # Metadata exists only for claims this run allocated (Commit records it for DFS'd
        # claims): such a claim is allocated in memory, whatever its stale status.allocation
        # says (design: Allocated (In-Memory)).
        if claim.allocation is not None and meta is None:
            if reallocated(claim, deleting_pods, reallocation):
                out.append(ClassifiedClaim(i, claim, REALLOCATED))
                continue
            reqs = None
            if claim.allocation.node_selector is not None:
                reqs = _merge_selector(
                    key, "allocation node selector", claim.allocation.node_selector, effective
                )
            out.append(ClassifiedClaim(i, claim, ALLOCATED_IN_CLUSTER, reqs))
            continue
        if meta is not None:
            if meta.used_templates:
                if meta.node_claim_id != node_claim_id:
                    raise AllocationError(
                        f"claim {key} is allocated to template devices bound to a different "
                        f"in-flight NodeClaim ({meta.node_claim_id})",
                        code="incompatible",
                    )
                out.append(ClassifiedClaim(i, claim, ALLOCATED_IN_MEMORY, None, meta))
                continue
            reason = effective.compatible(meta.requirements)
            if reason is not None:
                raise AllocationError(
                    f"claim {key}: the topology of its in-memory allocation is incompatible "
                    f"with the NodeClaim's requirements: {reason}",
                    code="incompatible",
                )
            effective.add(meta.requirements)
            out.append(ClassifiedClaim(i, claim, ALLOCATED_IN_MEMORY, meta.requirements, meta))
            continue
        out.append(ClassifiedClaim(i, claim, UNALLOCATED))
    return out


def in_cluster_devices(claim: ResourceClaim) -> list[AllocatedDevice]:
    """The devices of a claim's ``status.allocation``, for the result document."""
    if claim.allocation is None:
        return []
    out = []
    for r in claim.allocation.devices:
        extra: dict[str, Any] = {}
        if r.admin_access:
            extra["adminAccess"] = True
        if r.share_id:
            extra["shareID"] = r.share_id
        if r.consumed_capacity:
            extra["consumedCapacity"] = {k: str(v) for k, v in r.consumed_capacity.items()}
        if r.binding_conditions:
            extra["bindingConditions"] = list(r.binding_conditions)
        if r.binding_failure_conditions:
            extra["bindingFailureConditions"] = list(r.binding_failure_conditions)
        out.append(
            AllocatedDevice(r.request, r.driver, r.pool, r.device, "in-cluster", None, extra)
        )
    return out
