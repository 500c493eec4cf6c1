"""Finalization and Annotation Population (design section of that name).

Each new NodeClaim carries ``karpenter.sh/requested-dra-drivers``: the drivers of every device
of every claim of its pods, whatever the claim's state (docs/SIMULATION.md), sorted and
comma-joined, so that the initialization controller can gate on their pools.
"""

from __future__ import annotations

from collections.abc import Iterable

from allocator.requirements import (
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    Requirement,
    Requirements,
)
from allocator.scheduling.fit import InstanceTypeInfo, offering_allowed

REQUESTED_DRA_DRIVERS = "karpenter.sh/requested-dra-drivers"
# Karpenter launches a NodeClaim with at most this many instance types, cheapest first
# (MaxInstanceTypes; Results.TruncateInstanceTypes after the scheduling loop).
MAX_INSTANCE_TYPES = 600


def requested_dra_drivers(drivers: Iterable[str]) -> str | None:
    names = sorted({d for d in drivers if d})
    return ",".join(names) if names else None


def node_claim_annotations(drivers: Iterable[str]) -> dict[str, str]:
    value = requested_dra_drivers(drivers)
    return {REQUESTED_DRA_DRIVERS: value} if value else {}


def finalized_requirements(
    requirements: Requirements, by_price: list[str], candidates: Iterable[InstanceTypeInfo] = ()
) -> Requirements:
    """The NodeClaim's requirements as Karpenter writes them (NodeClaimTemplate.ToNodeClaim):
    narrowed to the instance types it may still launch (``node.kubernetes.io/instance-type
    In [...]``, the cheapest 600), then to the capacity types of those instance types' available
    offerings its requirements allow (``karpenter.sh/capacity-type In [...]``).
    ``candidates``: the NodeClaim's instance types (those not named in ``by_price`` are not
    read)."""
    out = requirements.copy()
    if by_price:
        names = by_price[:MAX_INSTANCE_TYPES]
        out.add(Requirement.new(LABEL_INSTANCE_TYPE, "In", names))
        kept = set(names)
        chosen = [info for info in candidates if info.name in kept]
        # Once every capacity type they offer is found, no other offering can add one.
        offered = len(frozenset().union(*(info.capacity_types for info in chosen)))
        capacity_types: set[str] = set()
        for info in chosen:
            for offering, extra in info.offerings:
                # One allowed offering of a capacity type is enough: the others of that
                # type are not asked.
                if offering.capacity_type not in capacity_types and offering_allowed(
                    offering, extra, out
                ):
                    capacity_types.add(offering.capacity_type)
            if offered and len(capacity_types) == offered:
                break
        if capacity_types:
            out.add(Requirement.new(LABEL_CAPACITY_TYPE, "In", sorted(capacity_types)))
    return out
