"""Which targets a fix suggestion's trial asks (``Scheduler.trial(..., targets=)``).

A failed pod was refused by every target on the loop's final state, at every preference it
tried. A change that can only lift some targets' refusals (freeing devices on a node, widening
one NodePool) leaves every other target refusing exactly as before, so a trial that asks only
the targets the change reaches, in the loop's order, takes the same decision as one that asks
them all: the first of those targets that takes the pod.
"""

from __future__ import annotations

from allocator.records import record


@record(frozen=True)
class TrialTargets:
    """The targets a suggestion's change reaches, where its trial is asked."""

    nodes: frozenset[str] = frozenset()  # existing nodes by name (unregistered NodeClaims')
    node_claims: frozenset[str] = frozenset()  # NodeClaims of this run, by name
    node_pools: frozenset[str] = frozenset()  # new NodeClaims of these NodePools

    def __or__(self, other: TrialTargets) -> TrialTargets:
        return TrialTargets(
            self.nodes | other.nodes,
            self.node_claims | other.node_claims,
            self.node_pools | other.node_pools,
        )
