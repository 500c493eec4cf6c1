"""The scheduler's fast paths, each of which must decide exactly as the plain path: switched
off only by the property tests that compare both (``tests/allocator/test_funnel_properties.py``,
``tests/scheduling/test_nodeclaim_cache_properties.py``) and by the benchmarks. Not a
simulation option: no user or API reaches it."""

from __future__ import annotations

from allocator.records import record


@record(frozen=True)
class Tuning:
    """The scheduler's fast paths, each switched off only to compare it with the plain path."""

    # Refuse by the cached refusal funnel (an existing target whose cached count stage shows a
    # pod's requests cannot be met is refused without running Allocate there) and skip a
    # retry in an unchanged state; selector refusals worded once per values read; existing
    # nodes alike share one count stage (allocator/nodealike.py); in attempts without words,
    # nodes without enough free devices passed over, a pod shape every node refused not
    # asked of them again, and nodes that refused a pod shape for good not asked again
    # (scheduling/lasting.py).
    funnel_refusal: bool = True
    # NodeClaims of this run and new ones: a refusal is first found without its words
    # (Allocate's ``explain`` off) and explained only when the pod fails everywhere;
    # count-stage funnels shared by fresh NodeClaims; instance type filtering remembered.
    nodeclaim_caches: bool = True
    # With nodeclaim_caches: instance type filtering through bit masks of the remembered
    # answers (fit.CapacityIndex) instead of a loop over the candidates.
    instance_type_index: bool = True
    # With nodeclaim_caches: a pod that failed everywhere has the NodeClaims' refusals of its
    # instance type filter worded from what the filter recorded (nodeclaim.NoInstanceType),
    # not from a full attempt asked again.
    explain_recorded: bool = True
    # Instance types of one device-template shape and state share one search of a NodeClaim
    # (Allocate without words; allocator/templateshapes.py), and NodeClaims that hold nothing
    # and are alike share one Allocate (Allocator.fresh_allocations).
    shape_memo: bool = True


DEFAULT_TUNING = Tuning()
