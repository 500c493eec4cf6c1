"""Finalization and Annotation Population (design section of that name).

Each new NodeClaim carries ``karpenter.sh/requested-dra-drivers``: the drivers of every device
of every claim of its pods, whatever the claim's state (CONTRACT section 3), sorted and
comma-joined, so that the initialization controller can gate on their pools.
"""

from __future__ import annotations

from collections.abc import Iterable

REQUESTED_DRA_DRIVERS = "karpenter.sh/requested-dra-drivers"


def requested_dra_drivers(drivers: Iterable[str]) -> str | None:
    names = sorted({d for d in drivers if d})
    return ",".join(names) if names else None


def node_claim_annotations(drivers: Iterable[str]) -> dict[str, str]:
    value = requested_dra_drivers(drivers)
    return {REQUESTED_DRA_DRIVERS: value} if value else {}
