"""Where Karpenter's own device search would stall on a pod this simulation refuses at once.

The design abandons a request with fewer usable devices than it asks for by counting them
(the count stage). Karpenter's search has no such check (``dynamicresources/allocator.go``,
``dfsExactCount``): each slot of an ExactCount request tries every device left, so a request
for more devices than an instance type offers walks every partial ordering of them before
it fails, on every instance type of the target. Each Allocate call gets 5 s
(``allocateTimeout``); a call that runs out ends Karpenter's whole scheduling pass ("scheduling
simulation timed out"), and the pods after it wait for a later pass. The decisions here stay
the design's; a run says where Karpenter's pass could stall (docs/SIMULATION.md, The time
budget). Only failed pods are weighed: their refusal funnels are kept, a placed pod's are not.
"""

from __future__ import annotations

from collections.abc import Iterable

from allocator.records import record
from allocator.requests import ALL

# Placements of one Allocate call from which Karpenter's search may run past its 5 s. On a
# 2-core machine it gave up on a NodeClaim whose instance types made about 6.3 million
# (karpenter-dra-failing: 16 GPUs asked, 1 to 8 per instance type); the limit depends on the
# machine, the threshold stays well below that.
STALL_PLACEMENTS = 1_000_000


# Counted up to here: past it, "about" says nothing more (a pool of 1,000 devices).
_MOST = 10**15


def orderings(usable: int) -> int:
    """The device placements Karpenter's search makes before refusing a request for more than
    ``usable`` devices: every ordering of up to ``usable`` of them (109,601 for 8), at most
    ``_MOST``."""
    if usable < len(_ORDERINGS):
        return _ORDERINGS[usable]
    return _counted(usable)


def _counted(usable: int) -> int:
    total = term = 1
    for k in range(usable):
        term *= usable - k
        total += term
        if total >= _MOST:
            return _MOST
    return total


_ORDERINGS = tuple(_counted(n) for n in range(32))  # a failed pod's log reads thousands


@record(frozen=True)
class LongSearch:
    """The target of a pod's refusals where Karpenter's search would make the most placements."""

    target: str
    placements: int
    asked: int
    usable: int  # the most usable devices of one of the target's instance types
    instance_types: bool  # a NodeClaim's (its instance types') or an existing node's


def longest_search(funnel_log: Iterable, all_mode: set[str]) -> LongSearch | None:
    """The target of a failed pod's refusals (``PodOutcome.funnel_log``: target, funnel,
    claim) whose count refusals Karpenter would search longest; None when none was refused by
    counting. ``all_mode``: the pod's request names in allocation mode All, whose slots are
    predetermined devices (no orderings to walk)."""
    per_target: dict[str, _Walk] = {}
    for entry in funnel_log:
        funnel = entry[1]
        # Two usable devices or fewer make at most 5 placements: never a long search.
        if funnel is None or funnel.usable < 3 or funnel.usable >= funnel.needed:
            continue
        if funnel.whole is not None or funnel.request in all_mode:
            continue  # refused as a whole or by a search, not by counting; no orderings
        walk = per_target.get(entry[0])
        if walk is None:
            walk = per_target[entry[0]] = _Walk()
        walk.placements = min(walk.placements + funnel.weight * orderings(funnel.usable), _MOST)
        walk.asked = max(walk.asked, funnel.needed)
        walk.usable = max(walk.usable, funnel.usable)
        walk.instance_types = walk.instance_types or funnel.instance_type is not None
    if not per_target:
        return None
    target, walk = max(per_target.items(), key=lambda kv: kv[1].placements)
    return LongSearch(target, walk.placements, walk.asked, walk.usable, walk.instance_types)


@record
class _Walk:
    """What one target's count refusals add up to, as they are read."""

    placements: int = 0
    asked: int = 0
    usable: int = 0
    instance_types: bool = False


def all_mode_requests(claims: Iterable) -> set[str]:
    """The names (``request`` or ``request/sub``) of the claims' requests in mode All."""
    names: set[str] = set()
    for claim in claims:
        for request in claim.spec.requests:
            if request.exactly is not None and request.exactly.allocation_mode == ALL:
                names.add(request.name)
            for sub in request.first_available:
                if sub.request.allocation_mode == ALL:
                    names.add(f"{request.name}/{sub.name}")
    return names


def stall_warning(searches: Iterable[tuple[str, LongSearch]]) -> str | None:
    """One sentence on the failed pods (pod, ``longest_search`` of its refusals) whose search
    Karpenter could give up on, or None."""
    found = [(pod, s) for pod, s in searches if s.placements >= STALL_PLACEMENTS]
    if not found:
        return None
    pod, first = found[0]
    others = f" (and {len(found) - 1} more such pods)" if len(found) > 1 else ""
    where = _target_words(first)
    about = "more than" if first.placements >= _MOST else "about"
    return (
        f"Karpenter's own device search could stall on pod {pod}{others}: it asks for "
        f"{first.asked} devices where {where} offers at most {first.usable}, and Karpenter, "
        f"which has no count check, tries {about} {first.placements:,} device placements there "
        "before refusing it. Each allocation gets 5 s; one that runs out ends Karpenter's "
        "scheduling pass, and the pods after it in its queue wait for a later pass. This "
        "simulation refuses the request by counting and goes on."
    )


def _target_words(search: LongSearch) -> str:
    # reasons[].target: node/NAME (an existing node, or a NodeClaim of this run when the
    # funnels name instance types) or nodepool/NAME (a new NodeClaim of that NodePool).
    kind, _, name = search.target.partition("/")
    if kind == "nodepool":
        return f"an instance type of a new NodeClaim of NodePool {name}"
    if search.instance_types:
        return f"an instance type of NodeClaim {name}"
    return f"node {name}"
