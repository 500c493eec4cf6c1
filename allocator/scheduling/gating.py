"""NodeClaim Initialization Gating (design section of that name), reported per NodeClaim.

A NodeClaim asking for DRA drivers (annotation ``karpenter.sh/requested-dra-drivers``) becomes
Initialized only once each driver has published at least one complete pool among the node's
own slices: pinned by ``spec.nodeName`` or owned (Kind=Node owner reference) by the node.
AllNodes slices never count. A pool is complete when the number of slices at its newest
generation equals their ``resourceSliceCount``.
"""

from __future__ import annotations

from allocator.model import ResourceSlice, Snapshot
from allocator.scheduling.finalization import REQUESTED_DRA_DRIVERS

NOT_PUBLISHED = "DRADriverPoolsNotPublished"


def node_local_slices(slices: list[ResourceSlice], node: str) -> list[ResourceSlice]:
    return [s for s in slices if s.node_name == node or s.owner_node == node]


def drivers_with_complete_pool(slices: list[ResourceSlice]) -> set[str]:
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        key = (s.driver, s.pool)
        if s.generation > newest.get(key, -1):
            newest[key] = s.generation
    counts: dict[tuple[str, str], list[int]] = {}
    for s in slices:
        key = (s.driver, s.pool)
        if s.generation == newest[key]:
            entry = counts.setdefault(key, [0, s.resource_slice_count])
            entry[0] += 1
    return {driver for (driver, _), (seen, declared) in counts.items() if seen == declared}


def requested_drivers(annotation: str) -> list[str]:
    return sorted({d.strip() for d in annotation.split(",") if d.strip()})


def initialization_gating(snapshot: Snapshot) -> list[dict]:
    """One entry per snapshot NodeClaim carrying the annotation, by NodeClaim name."""
    out = []
    for name, nc in sorted(snapshot.node_claims.items()):
        annotation = nc.annotations.get(REQUESTED_DRA_DRIVERS)
        if annotation is None:
            continue  # non-DRA NodeClaims skip the gate
        expected = requested_drivers(annotation)
        node = nc.node_name
        published = (
            drivers_with_complete_pool(node_local_slices(snapshot.resource_slices, node))
            if node
            else set()
        )
        missing = [d for d in expected if d not in published]
        entry = {
            "nodeClaim": name,
            "node": node,
            "status": "Unknown" if missing else "Initialized",
            "reason": NOT_PUBLISHED if missing else None,
            "missingDrivers": missing,
        }
        out.append(entry)
    return out
