"""Admin access to devices (DRAAdminAccess).

A request with ``adminAccess: true`` gets devices for monitoring or maintenance: it may take
devices that are already allocated, and what it takes stays available to everyone else (no
reservation, no counters, no capacity). Kubernetes allows it only in namespaces labelled
``resource.kubernetes.io/admin-access: "true"``. Taints still apply: an admin must tolerate
them explicitly. With the gate off kube-scheduler refuses such requests.
"""

from __future__ import annotations

from allocator.features.gates import ALL_ON, FeatureGates
from allocator.model import Namespace, ResourceClaim

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
    gates: FeatureGates = ALL_ON,
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
    claim: ResourceClaim, namespaces: dict[str, Namespace], gates: FeatureGates = ALL_ON
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
