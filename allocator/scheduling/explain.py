"""Why a pod was not placed, in Karpenter's words (docs/RESULT.md, ``error``/``reasons``).

Every target tried leaves one reason. The summary follows Karpenter's log line: existing
targets first, grouped where many nodes failed the same way (a 500-node cluster must not yield a
500-clause sentence), then each NodePool's ``incompatible with nodepool "X", ...`` last.
"""

from __future__ import annotations

MAX_NAMES = 3


def nodepool_reason(pool: str, reason: str, overhead: str = "{}") -> str:
    """Karpenter's wording, daemonset overhead included (``overhead``: resources JSON)."""
    return f'incompatible with nodepool "{pool}", daemonset overhead={overhead}, {reason}'


def dra_reason(error: str) -> str:
    return f"allocating dynamic resources, {error}"


def summarize(reasons: list[tuple[str, str]]) -> str:
    """One line from ``[(target, reason)]``; NodePool reasons (already worded) come last."""
    if not reasons:
        return "no target could be tried: the snapshot has no schedulable node and no NodePool"
    grouped: dict[str, list[str]] = {}
    pools: list[str] = []
    for target, reason in reasons:
        if target.startswith("nodepool/"):
            pools.append(reason)
        else:
            grouped.setdefault(reason, []).append(target)
    parts = []
    for reason, targets in grouped.items():
        names = ", ".join(targets[:MAX_NAMES])
        if len(targets) > MAX_NAMES:
            names += f" and {len(targets) - MAX_NAMES} more"
        parts.append(f"{names}: {reason}")
    parts.extend(pools)
    return "could not schedule pod, " + "; ".join(parts)
