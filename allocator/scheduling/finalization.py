"""Finalization and Annotation Population (design section of that name).

Each new NodeClaim carries ``karpenter.sh/requested-dra-drivers``: the drivers of every device
of every claim of its pods, whatever the claim's state (docs/SIMULATION.md), sorted and
comma-joined, so that the initialization controller can gate on their pools.
"""

from __future__ import annotations

from collections.abc import Iterable

from allocator.requirements import LABEL_INSTANCE_TYPE, Requirement, Requirements

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


def finalized_requirements(requirements: Requirements, by_price: list[str]) -> Requirements:
    """The NodeClaim's requirements as Karpenter writes them: narrowed to the instance types it
    may still launch (``node.kubernetes.io/instance-type In [...]``, the cheapest 600)."""
    out = requirements.copy()
    if by_price:
        names = by_price[:MAX_INSTANCE_TYPES]
        out.add(Requirement.new(LABEL_INSTANCE_TYPE, "In", names))
    return out
