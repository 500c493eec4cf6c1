"""The design's device eligibility checks, in the order of the core pipeline: the pool check
(incomplete or invalid pools, as Karpenter skips them), then allocated, selector, constraint,
topology. The DRA features' checks are in ``allocator/features/``; ``allocator/pipeline.py``
puts both in order for a run.
"""

from __future__ import annotations

from collections.abc import Mapping

from allocator.checks import (
    ALLOCATED,
    CEL_ERROR,
    POOL_INCOMPLETE,
    POOL_INVALID,
    SELECTOR,
    TOPOLOGY,
    Rejection,
    SearchState,
    Step,
)
from allocator.constraints import MatchAttributeConstraint
from allocator.model import PoolKey
from allocator.pools import TEMPLATE, DeviceWithID, Pool
from allocator.requests import ClaimData, RequestData


def pool_refusal(pool: Pool) -> Rejection | None:
    """Why an ExactCount request takes no device of ``pool``, or None. Karpenter's
    ``dfsExactCount`` skips incomplete pools (``if pool.Incomplete { continue }``) and an
    invalid pool has no devices left (pool building empties them: "Invalid pools are skipped
    during allocation"). All mode refuses such a pool as a whole, in request validation."""
    name = f"{pool.key.driver}/{pool.key.pool}"
    if pool.invalid:
        return Rejection(
            POOL_INVALID,
            f"pool {name} is invalid ({pool.invalid_reason}): its devices are not allocated",
        )
    if pool.incomplete:
        return Rejection(
            POOL_INCOMPLETE,
            f"pool {name} is incomplete (missing slices): {pool.published_slices} of "
            f"{pool.declared_slices} ResourceSlices published at generation {pool.generation}",
        )
    return None


class PoolCheck:
    """Devices of incomplete or invalid in-cluster pools are never candidates. Template
    devices belong to no in-cluster pool."""

    name = "pool"
    prefilter_it_independent = True  # a pool's completeness is global, its validity per gather

    def __init__(self, ctx: SearchState) -> None:
        self.refusals: Mapping[PoolKey, Rejection] = ctx.pool_refusals

    def prefilter(
        self, ctx: SearchState, claim: ClaimData, request: RequestData, cand: DeviceWithID
    ) -> Rejection | None:
        if cand.source == TEMPLATE or not self.refusals:
            return None
        return self.refusals.get(cand.pool_key)

    def try_add(self, ctx: SearchState, step: Step, cand: DeviceWithID) -> Rejection | None:
        return self.prefilter(ctx, step.claim, step.request, cand)

    def remove(self, ctx: SearchState, step: Step, cand: DeviceWithID) -> None:
        return None


_ALLOCATED = Rejection(ALLOCATED, "already allocated")


class AllocatedCheck:
    """The seed set, other NodeClaims, the same NodeClaim's same instance type, and this
    path."""

    name = "allocated"
    prefilter_it_independent = True  # for in-cluster devices

    def __init__(self, ctx: SearchState) -> None:
        self.tracker = ctx.tracker
        self.node_claim = ctx.node_claim_id
        self.it = ctx.instance_type

    def _tracked(self, cand: DeviceWithID) -> bool:
        return self.tracker.is_allocated(cand.id, cand.source == TEMPLATE, self.node_claim, self.it)

    def prefilter(
        self, ctx: SearchState, claim: ClaimData, request: RequestData, cand: DeviceWithID
    ) -> Rejection | None:
        # In-cluster devices: only what holds for every instance type (seed, another
        # NodeClaim), so the answer can be shared across ITs; try_add checks the rest.
        if cand.source == TEMPLATE:
            tracked = self._tracked(cand)
        else:
            tracker = self.tracker
            holders = tracker.cluster.get(cand.id)
            tracked = cand.id in tracker.preallocated or (
                holders is not None and any(h != self.node_claim for h in holders)
            )
        if tracked:
            return _ALLOCATED
        return None

    def try_add(self, ctx: SearchState, step: Step, cand: DeviceWithID) -> Rejection | None:
        used = ctx.allocated_templates if cand.source == TEMPLATE else ctx.allocated_ids
        if cand.id in used:
            return taken_on_path(cand)
        if self._tracked(cand):
            return Rejection(ALLOCATED, f"device {cand.id} is already allocated")
        used.add(cand.id)
        return None

    def remove(self, ctx: SearchState, step: Step, cand: DeviceWithID) -> None:
        used = ctx.allocated_templates if cand.source == TEMPLATE else ctx.allocated_ids
        used.discard(cand.id)


def taken_on_path(cand: DeviceWithID) -> Rejection:
    """A device an earlier slot or request of this search path took."""
    return Rejection(ALLOCATED, f"device {cand.id} is already allocated in this search", True)


class SelectorCheck:
    """Every class and request CEL selector (AND), memoised per (device, claim, request)."""

    name = "selector"
    prefilter_it_independent = True  # for in-cluster devices

    def __init__(self, ctx: SearchState) -> None:
        self.matcher = ctx.matcher
        self.refused: dict[str, Rejection] = {}

    def prefilter(
        self, ctx: SearchState, claim: ClaimData, request: RequestData, cand: DeviceWithID
    ) -> Rejection | None:
        matched, error = self.matcher.match(request, claim.index, cand)
        if matched:
            return None
        if error:
            return Rejection(CEL_ERROR, error)
        # One rejection per request: the trace names the device already; formatting a string
        # per refused device would cost more than the (memoised) match itself.
        refused = self.refused.get(request.name)
        if refused is None:
            refused = self.refused[request.name] = Rejection(
                SELECTOR, f"does not match the selectors of {request.name}"
            )
        return refused

    def try_add(self, ctx: SearchState, step: Step, cand: DeviceWithID) -> Rejection | None:
        return self.prefilter(ctx, step.claim, step.request, cand)

    def remove(self, ctx: SearchState, step: Step, cand: DeviceWithID) -> None:
        return None


class ConstraintCheck:
    """The claim's constraints, rolled back on failure; MatchAttribute feasibility pruning on
    every device added while a value is pinned, and a constraint's own feasibility reasoning
    (distinctAttribute) on every device it applies to."""

    name = "constraint"
    prefilter_it_independent = True  # for in-cluster devices

    def __init__(self, ctx: SearchState) -> None:
        pass

    def prefilter(
        self, ctx: SearchState, claim: ClaimData, request: RequestData, cand: DeviceWithID
    ) -> Rejection | None:
        return None

    def try_add(self, ctx: SearchState, step: Step, cand: DeviceWithID) -> Rejection | None:
        constraints = step.claim.constraints
        name = step.request.name
        for i, c in enumerate(constraints):
            reason = c.add(name, cand)
            # Pinned (now or before): every constrained request must still be fillable
            # with devices that match the pinned value (or binding class).
            if (
                reason is None
                and isinstance(c, MatchAttributeConstraint)
                and c.pinned
                and c.applies(name)
            ):
                reason = ctx.match_feasibility(c, step)
                if reason is not None:
                    c.remove(name, cand)
                    ctx.pruned = True  # ended by reasoning: traced as "pruned"
            elif reason is None and c.checks_feasibility and c.applies(name):
                need, candidates = ctx.remaining_demand(step.claim, step, c.applies)
                reason = c.feasibility(need, candidates)
                if reason is not None:
                    c.remove(name, cand)
                    ctx.pruned = True
            if reason is not None:
                for prev in reversed(constraints[:i]):
                    prev.remove(name, cand)
                return Rejection(c.reason_code, f"{c}: {reason}")
        return None

    def remove(self, ctx: SearchState, step: Step, cand: DeviceWithID) -> None:
        name = step.request.name
        for c in reversed(step.claim.constraints):
            c.remove(name, cand)


class TopologyCheck:
    """A device with a label NodeSelector must fit the accumulated requirements; it tightens
    them, re-filters the pools, and pushes a snapshot popped on backtrack."""

    name = "topology"
    prefilter_it_independent = True  # for in-cluster devices

    def __init__(self, ctx: SearchState) -> None:
        self.pushed: list[bool] = []

    def prefilter(
        self, ctx: SearchState, claim: ClaimData, request: RequestData, cand: DeviceWithID
    ) -> Rejection | None:
        return None

    def try_add(self, ctx: SearchState, step: Step, cand: DeviceWithID) -> Rejection | None:
        if cand.terms is None:
            self.pushed.append(False)
            return None
        if cand.pool_key not in ctx.pool_keys:
            return Rejection(
                TOPOLOGY,
                f"pool {cand.id.driver}/{cand.id.pool} no longer fits the NodeClaim's requirements",
            )
        reasons = []
        for term in cand.terms:
            reason = ctx.view.compatible(term)
            if reason is None:
                ctx.tighten(term)
                ctx.extra["_term"] = term
                self.pushed.append(True)
                return None
            reasons.append(reason)
        return Rejection(
            TOPOLOGY,
            f"device {cand.id} node selector: " + (" | ".join(reasons) or "no node selector term"),
        )

    def remove(self, ctx: SearchState, step: Step, cand: DeviceWithID) -> None:
        if self.pushed.pop():
            ctx.restore()
