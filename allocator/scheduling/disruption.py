"""Disruption / Consolidation Re-allocation Semantics (design section of that name).

``--disrupt NODE`` proposes removing nodes: their slices leave the device universe (see
``initialization.slice_universe``), their reschedulable pods join the queue as deleting pods
(``queue.collect_pods``) so their exclusively-held devices are freed and claims reserved only by
them are re-allocated, while claims shared with live pods stay where they are. This module
checks the candidates and reports whether the consolidation would succeed.
"""

from __future__ import annotations

from allocator.model import Pod, Snapshot


class DisruptionError(ValueError):
    pass


def check_candidates(snapshot: Snapshot, names: list[str]) -> list[str]:
    """The candidate node names, deduplicated in given order; unknown names are an error."""
    seen: list[str] = []
    for name in names:
        if name not in snapshot.nodes:
            known = ", ".join(sorted(snapshot.nodes)) or "none"
            raise DisruptionError(f"--disrupt: node {name!r} not found (nodes: {known})")
        if name not in seen:
            seen.append(name)
    return seen


def disruption_report(candidates: list[str], displaced: list[Pod], placed: set[str]) -> dict | None:
    """The result's ``disruption`` entry; None when nothing was disrupted."""
    if not candidates:
        return None
    keys = [pod.key for pod in displaced]
    return {
        "candidates": list(candidates),
        "displacedPods": keys,
        "allPlaced": all(key in placed for key in keys),
    }
