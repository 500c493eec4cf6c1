"""The per-instance-type DFS: claims > requests > slots > candidate devices.

Eligibility is an ordered list of ``DeviceCheck`` objects, the run's ``Pipeline``
(``allocator/pipeline.py``: allocated, selector, constraints, topology, and the DRA features'
checks the gates turn on). A check's ``try_add`` either rejects the
device with ``(reason_code, message)`` and leaves no state behind, or accepts it and applies its
state; ``remove`` undoes exactly one accepted ``try_add``. The DFS calls ``remove`` in reverse
check order on backtrack, so state unwinds in exact reverse order.

Pruning never changes which solution is found first; it only ends searches that cannot succeed:
- within an ExactCount request, slots take devices in increasing candidate order (a set of
  devices is tried once, not once per permutation);
- a slot stops when fewer candidates remain than slots to fill;
- when a MatchAttribute constraint gets pinned, every constrained request must still have
  enough candidates that can match the pinned value (or binding class).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from allocator.bindings import AttributeBindings
from allocator.constraints import BindingFallback, MatchAttributeConstraint
from allocator.explanation.funnel import (
    Funnel,
    build_funnel,
    cause_text,
    decisive_reason,
    funnel_json,
)
from allocator.features.gates import ALL_ON, FeatureGates
from allocator.model import ALLOCATION_RESULTS_MAX_SIZE, DeviceID, Namespace
from allocator.pools import TEMPLATE, DeviceWithID, Pool, refilter
from allocator.requirements import Requirements
from allocator.trace import NULL_TRACE, Trace
from allocator.tracker import AllocationTracker
from allocator.validation import ALL, ClaimData, RequestData, SelectorMatcher

if TYPE_CHECKING:
    from allocator.pipeline import Pipeline

Rejection = tuple[str, str]  # (reason code, message)
TIMEOUT_CHECK_EVERY = 256  # DFS nodes between clock reads


_BACKTRACK = "taken, but the slots after it could not be filled"


_COUNT_PASSES = "passes"  # funnel_memo: the request passes the count stage


class TimedOut(Exception):
    pass


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why one device check refused one candidate, for the refusal funnel."""

    reason: str
    message: str
    detail: Mapping[str, Any] = field(default_factory=dict)
    group: tuple = ()  # devices refused with the same (reason, group) form one rejection group


@dataclass(slots=True)
class Step:
    """Where the DFS stands when a check runs."""

    claim: ClaimData
    request_index: int
    request: RequestData  # the request, or the FirstAvailable subrequest being tried
    slot: int
    position: int  # index of the candidate in the request's candidate list


class LazyCandidates:
    """A request's eligible devices (prefilter passed), computed only as far as the search
    looks: a one-device request on a large cluster stops at the first eligible device."""

    __slots__ = ("items", "_source", "_accept", "done")

    def __init__(self, universe: Sequence[DeviceWithID], accept: Callable[[DeviceWithID], bool]):
        self.items: list[DeviceWithID] = []
        self._source = iter(universe)
        self._accept = accept
        self.done = False

    def has(self, i: int) -> bool:
        """Whether an i-th eligible device exists (extends the list up to it)."""
        items = self.items
        while len(items) <= i and not self.done:
            for cand in self._source:
                if self._accept(cand):
                    items.append(cand)
                    break
            else:
                self.done = True
        return i < len(items)

    def count(self) -> int:
        while self.has(len(self.items)):
            pass
        return len(self.items)


def _chain(shared: LazyCandidates, rest: Sequence[DeviceWithID]):
    """The eligible devices of ``shared`` (extending it as far as asked), then ``rest``."""
    i = 0
    while shared.has(i):
        yield shared.items[i]
        i += 1
    yield from rest


class DeviceCheck(Protocol):
    name: str

    def prefilter(
        self, ctx: DFSContext, claim: ClaimData, request: RequestData, cand: DeviceWithID
    ) -> Rejection | None: ...  # path-independent part, or None
    def try_add(self, ctx: DFSContext, step: Step, cand: DeviceWithID) -> Rejection | None: ...
    def remove(self, ctx: DFSContext, step: Step, cand: DeviceWithID) -> None: ...


CheckFactory = Callable[["DFSContext"], "DeviceCheck | None"]


# --- the checks of the design --------------------------------------------------------------


POOL_INCOMPLETE = "pool-incomplete"
POOL_INVALID = "pool-invalid"
POOL_REASONS = frozenset({POOL_INCOMPLETE, POOL_INVALID})


def pool_refusal(pool: Pool) -> Rejection | None:
    """Why an ExactCount request takes no device of ``pool``, or None. Karpenter's
    ``dfsExactCount`` skips incomplete pools (``if pool.Incomplete { continue }``) and an
    invalid pool has no devices left (pool building empties them: "Invalid pools are skipped
    during allocation"). All mode refuses such a pool as a whole, in request validation."""
    name = f"{pool.key.driver}/{pool.key.pool}"
    if pool.invalid:
        return (
            POOL_INVALID,
            f"pool {name} is invalid ({pool.invalid_reason}): its devices are not allocated",
        )
    if pool.incomplete:
        return (
            POOL_INCOMPLETE,
            f"pool {name} is incomplete (missing slices): {pool.published_slices} of "
            f"{pool.declared_slices} ResourceSlices published at generation {pool.generation}",
        )
    return None


class PoolCheck:
    """Check 0: devices of incomplete or invalid in-cluster pools are never candidates.
    Template devices belong to no in-cluster pool."""

    name = "pool"
    prefilter_it_independent = True  # a pool's completeness is global, its validity per gather

    def __init__(self, ctx: DFSContext) -> None:
        self.refusals: dict = ctx.pool_refusals

    def prefilter(self, ctx, claim, request, cand) -> Rejection | None:
        if cand.source == TEMPLATE or not self.refusals:
            return None
        return self.refusals.get(cand.pool_key)

    def try_add(self, ctx: DFSContext, step: Step, cand: DeviceWithID) -> Rejection | None:
        return self.prefilter(ctx, step.claim, step.request, cand)

    def remove(self, ctx: DFSContext, step: Step, cand: DeviceWithID) -> None:
        return None


# --- the four checks of the design's DFS ----------------------------------------------------


_ALLOCATED: Rejection = ("allocated", "already allocated")


class AllocatedCheck:
    """Check 1: seed set, other NodeClaims, the same NodeClaim's same IT, and this path."""

    name = "allocated"
    prefilter_it_independent = True  # for in-cluster devices

    def __init__(self, ctx: DFSContext) -> None:
        self.tracker = ctx.tracker
        self.node_claim = ctx.node_claim_id
        self.it = ctx.instance_type

    def _tracked(self, cand: DeviceWithID) -> bool:
        return self.tracker.is_allocated(cand.id, cand.source == TEMPLATE, self.node_claim, self.it)

    def prefilter(self, ctx, claim, request, cand) -> Rejection | None:
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

    def try_add(self, ctx: DFSContext, step: Step, cand: DeviceWithID) -> Rejection | None:
        used = ctx.allocated_templates if cand.source == TEMPLATE else ctx.allocated_ids
        if cand.id in used:
            return ("allocated", f"device {cand.id} is already allocated in this search")
        if self._tracked(cand):
            return ("allocated", f"device {cand.id} is already allocated")
        used.add(cand.id)
        return None

    def remove(self, ctx: DFSContext, step: Step, cand: DeviceWithID) -> None:
        used = ctx.allocated_templates if cand.source == TEMPLATE else ctx.allocated_ids
        used.discard(cand.id)


class SelectorCheck:
    """Check 2: every class and request CEL selector (AND), memoised per (device, claim,
    request)."""

    name = "selector"
    prefilter_it_independent = True  # for in-cluster devices

    def __init__(self, ctx: DFSContext) -> None:
        self.matcher = ctx.matcher
        self.messages: dict[str, str] = {}

    def prefilter(self, ctx, claim, request, cand) -> Rejection | None:
        matched, error = self.matcher.match(request, claim.index, cand)
        if matched:
            return None
        if error:
            return ("cel-error", error)
        # One message per request: the trace names the device already; formatting a string
        # per refused device would cost more than the (memoised) match itself.
        msg = self.messages.get(request.name)
        if msg is None:
            msg = self.messages[request.name] = f"does not match the selectors of {request.name}"
        return ("selector", msg)

    def try_add(self, ctx: DFSContext, step: Step, cand: DeviceWithID) -> Rejection | None:
        return self.prefilter(ctx, step.claim, step.request, cand)

    def remove(self, ctx: DFSContext, step: Step, cand: DeviceWithID) -> None:
        return None


class ConstraintCheck:
    """Check 3: the claim's constraints, rolled back on failure; MatchAttribute feasibility
    pruning on every device added while a value is pinned."""

    name = "constraint"
    prefilter_it_independent = True  # for in-cluster devices

    def __init__(self, ctx: DFSContext) -> None:
        pass

    def prefilter(self, ctx, claim, request, cand) -> Rejection | None:
        return None

    def try_add(self, ctx: DFSContext, step: Step, cand: DeviceWithID) -> Rejection | None:
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
            elif reason is None and c.applies(name):
                # A constraint's own feasibility reasoning (distinctAttribute: enough
                # distinct values left for the devices still to choose?).
                feasibility = getattr(c, "feasibility", None)
                if feasibility is not None:
                    reason = feasibility(ctx, step.claim, step)
                    if reason is not None:
                        c.remove(name, cand)
                        ctx.pruned = True
            if reason is not None:
                for prev in reversed(constraints[:i]):
                    prev.remove(name, cand)
                # Feature constraints name their own reason code (distinctAttribute: distinct).
                return (getattr(c, "reason_code", "constraint"), f"{c}: {reason}")
        return None

    def remove(self, ctx: DFSContext, step: Step, cand: DeviceWithID) -> None:
        name = step.request.name
        for c in reversed(step.claim.constraints):
            c.remove(name, cand)


class TopologyCheck:
    """Check 4: a device with a label NodeSelector must fit the accumulated requirements; it
    tightens them, re-filters the pools, and pushes a snapshot popped on backtrack."""

    name = "topology"
    prefilter_it_independent = True  # for in-cluster devices

    def __init__(self, ctx: DFSContext) -> None:
        self.pushed: list[bool] = []

    def prefilter(self, ctx, claim, request, cand) -> Rejection | None:
        return None

    def try_add(self, ctx: DFSContext, step: Step, cand: DeviceWithID) -> Rejection | None:
        if cand.terms is None:
            self.pushed.append(False)
            return None
        if cand.pool_key not in ctx.pool_keys:
            return (
                "topology",
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
        return (
            "topology",
            f"device {cand.id} node selector: " + (" | ".join(reasons) or "no node selector term"),
        )

    def remove(self, ctx: DFSContext, step: Step, cand: DeviceWithID) -> None:
        if self.pushed.pop():
            ctx.restore()


# --- the search -----------------------------------------------------------------------------


@dataclass(slots=True)
class PathEntry:
    claim_index: int  # position in the pod's claim list
    request: str  # "<request>" or "<request>/<subrequest>"
    cand: DeviceWithID
    extra: dict[str, Any]


@dataclass(slots=True)
class ITOutcome:
    instance_type: str
    ok: bool
    path: list[PathEntry] = field(default_factory=list)
    reason: str | None = None
    nodes: int = 0
    # The refusal funnels of a failed instance type (count pruning, or after the search).
    funnels: list[Funnel] = field(default_factory=list)
    # The up-front count stage, request by request until the first refused one:
    # (claim index, request name, its funnel when refused else None).
    counted: list[tuple[int, str, Funnel | None]] = field(default_factory=list)
    # Refused at the count stage with ``explain`` off: ``reason`` is a placeholder, not the
    # words (Allocator.allocate words it if another instance type succeeds).
    unworded: bool = False


_UNWORDED = "refused by counting"


class DFSContext:
    """Per-Allocate search state; per-IT parts are reset by ``run_instance_type``."""

    def __init__(
        self,
        *,
        tracker: AllocationTracker,
        bindings: AttributeBindings,
        node_claim_id: str,
        node_pool: str | None,
        claims: list[ClaimData],
        matcher: SelectorMatcher,
        superset: list[Pool],
        templates_by_it: dict[str, list[DeviceWithID]],
        requirements: Requirements,
        gates: FeatureGates = ALL_ON,
        namespaces: dict[str, Namespace] | None = None,
        deadline: float = float("inf"),
        clock: Callable[[], float] | None = None,
        trace: Trace = NULL_TRACE,
        extensions: dict[str, Any] | None = None,
        pipeline: Pipeline,
        explain: bool = True,
        funnel_memo: dict | None = None,
    ) -> None:
        self.pipeline = pipeline
        # Devices that may fill several slots of one request (DRAConsumableCapacity: a device
        # with allowMultipleAllocations gives each slot a share); each predicate gets
        # (DFSContext, DeviceWithID). Slots then restart at the same device, and count pruning
        # treats such a device as able to fill every remaining slot.
        self.reusable = pipeline.reusable
        self.tracker = tracker
        # False: a refused instance type's funnel and words are not built (decision only).
        self.explain = explain or trace.enabled
        # Count-stage funnels of template devices on NodeClaims holding nothing yet, shared
        # across Allocate calls (see ``_fresh_count_funnel``); None: not shared.
        fresh = (
            node_claim_id not in tracker.templates
            and node_claim_id not in tracker.cluster_by_node_claim
        )
        self.funnel_memo = (
            funnel_memo
            if fresh
            and not trace.enabled
            and not superset
            and not node_claim_id.startswith("node/")
            else None
        )
        self.bindings = bindings
        self.node_claim_id = node_claim_id
        self.node_pool = node_pool
        self.claims = claims
        self.matcher = matcher
        self.superset = superset
        # Pools whose devices ExactCount never takes (incomplete, invalid): why, per pool key.
        self.pool_refusals: dict = {
            p.key: r for p in superset if (r := pool_refusal(p)) is not None
        }
        self.templates_by_it = templates_by_it
        self.requirements = requirements  # accumulates across instance types
        self._initial_requirements = requirements
        # Instance type -> the initial requirements intersected with its own, when Allocate
        # computed them already (pool_variants): the view of an instance type started
        # before any other tightened the requirements.
        self.first_views: dict[str, Requirements] | None = None
        self.gates = gates
        self.namespaces = namespaces or {}
        self.deadline = deadline
        self.clock = clock
        self.trace = trace
        self.extensions = extensions if extensions is not None else {}  # shared feature state
        self.nodes = 0
        # per IT
        self.instance_type = ""
        self.it_requirements: Requirements | None = None
        self.view = requirements
        self.pools: list[Pool] = []
        self.pool_keys: set = set()
        self.snapshots: list[tuple[Requirements, Requirements, list[Pool], set]] = []
        self.allocated_ids: set[DeviceID] = set()
        self.allocated_templates: set[DeviceID] = set()
        self.path: list[PathEntry] = []
        self.extra: dict[str, Any] = {}
        self.checks: list[DeviceCheck] = []
        self.candidates: dict[tuple[int, str], list[DeviceWithID]] = {}
        self.eligible: dict[tuple[int, str], LazyCandidates] = {}
        self.suffix: dict[tuple[int, str], list[int]] = {}
        self.failure: tuple[tuple, str] | None = None
        # The devices the deepest failed slot refused during the search, for its funnel.
        self.failure_refusals: list[tuple[DeviceWithID, Rejection]] = []
        self.pruned = False  # set by a check whose rejection is pruning by reasoning
        self.may_reuse = False  # set per instance type: shared devices within reach
        self.eligible_ids: dict[tuple[int, str], set[int]] = {}
        self.share_prefilter = False
        self.prefilter_memo: dict[tuple[int, str, int], Rejection | None] = {}
        # Template devices' prefilter answers for the current instance type (count pruning
        # and the failure summary ask for the same devices).
        self.template_memo: dict[tuple[int, str, int], Rejection | None] = {}
        # Per Allocate: the pools an instance type's view reaches depend only on the view's
        # requirements for the label keys the devices' node selectors use, so instance types
        # whose views agree there share one refiltered pool set, its in-cluster candidates,
        # and (when prefilters are IT-independent) the eligible in-cluster devices.
        self._term_keys: tuple[str, ...] | None = None
        self._pool_cache: dict[tuple, tuple[list[Pool], set, list[DeviceWithID]]] = {}
        self._shared_eligible: dict[tuple[int, str, int], LazyCandidates] = {}
        self._summary_cache: dict[tuple[int, str, int], list[tuple[str, Refusal | None]]] = {}
        self._in_cluster: list[DeviceWithID] = []
        self._wording: tuple | None = None  # explanation.messages, loaded on first refusal

    # --- requirements and pools -------------------------------------------------------------

    def _make_view(self, reqs: Requirements) -> Requirements:
        return reqs if self.it_requirements is None else reqs.intersect(self.it_requirements)

    def _pools_for_view(self, view: Requirements) -> tuple[list[Pool], set, list[DeviceWithID]]:
        """``refilter(superset, [view])``, its pool keys and in-cluster devices, shared by the
        instance types whose views agree on every key the devices' selector terms name (the
        only keys ``Requirements.compatible`` reads)."""
        keys = self._term_keys
        if keys is None:
            found: set[str] = set()
            seen: set[int] = set()
            for pool in self.superset:
                if not pool.has_selector_devices:
                    continue
                for d in pool.devices:
                    terms = d.terms
                    if terms is None or id(terms) in seen:
                        continue
                    seen.add(id(terms))
                    for term in terms:
                        found.update(term.keys())
            keys = self._term_keys = tuple(sorted(found))
        sig = tuple(view.get(k) if view.has(k) else None for k in keys)
        hit = self._pool_cache.get(sig)
        if hit is None:
            pools = refilter(self.superset, [view])
            hit = self._pool_cache[sig] = (
                pools,
                {p.key for p in pools},
                [d for p in pools for d in p.devices],
            )
        return hit

    def tighten(self, term: Requirements) -> None:
        self.snapshots.append((self.requirements, self.view, self.pools, self.pool_keys))
        reqs = self.requirements.copy()
        reqs.add(term)
        self.requirements = reqs
        self.view = self._make_view(reqs)
        self.pools = refilter(self.pools, [self.view])
        self.pool_keys = {p.key for p in self.pools}

    def restore(self) -> None:
        self.requirements, self.view, self.pools, self.pool_keys = self.snapshots.pop()

    # --- pruning ------------------------------------------------------------------------------

    def _reusable(self, cand: DeviceWithID) -> bool:
        return any(f(self, cand) for f in self.reusable)

    def _reusable_left(self, key: tuple[int, str], start: int) -> bool:
        """An eligible device from ``start`` on that can take any number of slots."""
        return self.may_reuse and any(self._reusable(c) for c in self._eligible_from(key, start))

    def match_feasibility(self, c: MatchAttributeConstraint, step: Step) -> str | None:
        """Pinned: can every constrained request still be filled (necessary condition)?"""
        claim = step.claim
        for ri in range(step.request_index, len(claim.requests)):
            req = claim.requests[ri]
            current = ri == step.request_index
            if current:
                req = step.request
            elif req.alternatives:
                continue  # any alternative might fit: no pruning
            if not c.applies(req.name):
                continue
            if req.allocation_mode == ALL:
                slots = req.slots_for(self.instance_type) or []
                rest = slots[step.slot + 1 :] if current else slots
                for cand in rest:
                    if c.check(cand) is not None:
                        return (
                            f"request {req.name} must take device {cand.id}, which cannot "
                            f"match {c.attribute}"
                        )
                continue
            need = req.num_devices - (step.slot + 1 if current else 0)
            if need <= 0:
                continue
            key = (claim.index, req.name)
            start = step.position + 1 if current else 0
            if current and self.may_reuse:
                taken = (self.candidates[key] if self.trace.enabled else self.eligible[key].items)[
                    step.position
                ]
                if self._reusable(taken):
                    start = step.position  # the shared device just taken may serve again
            found = 0
            for cand in self._eligible_from(key, start):
                used = self.allocated_templates if cand.source == TEMPLATE else self.allocated_ids
                if cand.id in used or c.check(cand) is not None:
                    continue
                if self.may_reuse and self._reusable(cand):
                    found = need  # one shared device can fill every remaining slot
                    break
                if (
                    cand.source != TEMPLATE
                    and cand.terms is not None
                    and (cand.pool_key not in self.pool_keys)
                ):
                    continue
                found += 1
                if found >= need:
                    break
            if found < need:
                what = (
                    f"{c.attribute}={c.value}"
                    if c.mode == c.CONCRETE
                    else f"the devices bound under {c.attribute}"
                )
                return f"request {req.name} has {found} of {need} devices left matching {what}"
        return None

    def remaining_demand(
        self, claim: ClaimData, step: Step | None, applies: Callable[[str], bool]
    ) -> tuple[int, Iterable[DeviceWithID]]:
        """The devices a constraint's requests still need from this point of the search (the
        whole claim when ``step`` is None), and the candidates that could still fill them (a
        superset: eligible devices of those requests, from the current position on).
        FirstAvailable requests not yet reached add nothing (any alternative might fit)."""
        need = 0
        pools: list[Iterable[DeviceWithID]] = []
        first = step.request_index if step is not None else 0
        for ri in range(first, len(claim.requests)):
            req = claim.requests[ri]
            current = step is not None and ri == step.request_index
            if current:
                req = step.request  # type: ignore[union-attr]
            elif req.alternatives:
                continue
            if not applies(req.name):
                continue
            taken = step.slot + 1 if current else 0  # type: ignore[union-attr]
            if req.allocation_mode == ALL:
                slots = req.slots_for(self.instance_type) or []
                need += max(0, len(slots) - taken)
                pools.append(slots[taken:])
                continue
            left = req.num_devices - taken
            if left <= 0:
                continue
            need += left
            start = step.position if current else 0  # type: ignore[union-attr]
            pools.append(self._eligible_from((claim.index, req.name), start))
        return need, (cand for group in pools for cand in group)

    # --- running ------------------------------------------------------------------------------

    def tick(self) -> None:
        self.nodes += 1
        if (
            self.nodes % TIMEOUT_CHECK_EVERY == 0
            and self.clock is not None
            and self.clock() > self.deadline
        ):
            raise TimedOut()

    def _fail(self, depth: tuple, message: str, refusals: list | None = None) -> None:
        if self.failure is None or depth >= self.failure[0]:
            self.failure = (depth, message)
            self.failure_refusals = refusals or []

    def _prepare_it(self, instance_type: str, it_requirements: Requirements | None) -> None:
        self.instance_type = instance_type
        self.it_requirements = it_requirements
        view = None
        if self.first_views is not None and self.requirements is self._initial_requirements:
            view = self.first_views.get(instance_type)
        self.view = view if view is not None else self._make_view(self.requirements)
        self.pools, self.pool_keys, in_cluster = self._pools_for_view(self.view)
        self._in_cluster = in_cluster
        self.snapshots = []
        self.allocated_ids = set()
        self.allocated_templates = set()
        self.path = []
        self.failure = None
        self.failure_refusals = []
        self.template_memo = {}
        checks = (spec.factory(self) for spec in self.pipeline.device_checks)
        self.checks = [c for c in checks if c is not None]
        # In-cluster prefilter answers are shared across instance types when every check
        # declares its prefilter independent of the instance type for in-cluster devices.
        self.share_prefilter = all(
            getattr(c, "prefilter_it_independent", False) for c in self.checks
        )
        fallback = BindingFallback(self.bindings, self.node_pool, instance_type)
        for claim in self.claims:
            for c in claim.constraints:
                c.reset()
                c.set_binding_fallback(fallback)
        templates = self.templates_by_it.get(instance_type, [])
        universe = in_cluster + templates
        chained = self.share_prefilter and not self.trace.enabled
        # Shared devices anywhere in reach? Only then may a device serve several slots.
        self.may_reuse = bool(self.reusable) and (
            any(p.has_shared_devices for p in self.pools)
            or any(d.device.allow_multiple_allocations for d in templates)
        )
        self.candidates = {}
        self.eligible = {}
        for claim in self.claims:
            for req in claim.requests:
                for r in req.alternatives or [req]:
                    if r.allocation_mode == ALL:
                        continue
                    key = (claim.index, r.name)
                    if chained:
                        # The in-cluster part is the same for every IT reaching these pools.
                        skey = (claim.index, r.name, id(in_cluster))
                        shared = self._shared_eligible.get(skey)
                        if shared is None:
                            shared = self._shared_eligible[skey] = LazyCandidates(
                                in_cluster,
                                lambda c, claim=claim, r=r: self._prefilter(claim, r, c) is None,
                            )
                        lazy = LazyCandidates(
                            _chain(shared, templates),
                            lambda c, claim=claim, r=r: (
                                c.source != TEMPLATE or self._prefilter(claim, r, c) is None
                            ),
                        )
                    else:
                        lazy = LazyCandidates(
                            universe,
                            lambda c, claim=claim, r=r: self._prefilter(claim, r, c) is None,
                        )
                    self.eligible[key] = lazy
                    if self.trace.enabled:
                        # Traced runs walk every device (to show why each was refused).
                        self.candidates[key] = universe
                        lazy.count()
                        eligible = lazy.items
                        pos = {id(c): i for i, c in enumerate(universe)}
                        counts = [0] * (len(universe) + 1)
                        for c in eligible:
                            counts[pos[id(c)]] += 1
                        for i in range(len(universe) - 1, -1, -1):
                            counts[i] += counts[i + 1]
                        self.suffix[key] = counts
                        self.eligible_ids[key] = {id(c) for c in eligible}

    def _eligible_from(self, key: tuple[int, str], start: int):
        """Eligible candidates of a request from a position of its candidate list."""
        if self.trace.enabled:
            only = self.eligible_ids.get(key, set())
            for cand in self.candidates[key][start:]:
                if id(cand) in only:
                    yield cand
            return
        lazy = self.eligible[key]
        i = start
        while lazy.has(i):
            yield lazy.items[i]
            i += 1

    def _prefilter(
        self, claim: ClaimData, req: RequestData, cand: DeviceWithID
    ) -> Rejection | None:
        if cand.source == TEMPLATE:
            memo = self.template_memo  # prefilters are path-independent within an IT
        elif self.share_prefilter:
            memo = self.prefilter_memo
        else:
            return self._run_prefilter(claim, req, cand)
        key = (claim.index, req.name, id(cand))
        hit = memo.get(key, self)
        if hit is self:
            hit = memo[key] = self._run_prefilter(claim, req, cand)
        return hit  # type: ignore[return-value]

    def _run_prefilter(
        self, claim: ClaimData, req: RequestData, cand: DeviceWithID
    ) -> Rejection | None:
        for check in self.checks:
            r = check.prefilter(self, claim, req, cand)
            if r is not None:
                return r
        return None

    def refusal(self, claim: ClaimData, req: RequestData, cand: DeviceWithID) -> Refusal | None:
        """The first check (pipeline order) whose prefilter refuses ``cand``, as a Refusal; its
        optional ``explain(ctx, claim, req, cand, rejection)`` gives the rich message."""
        for check in self.checks:
            r = check.prefilter(self, claim, req, cand)
            if r is not None:
                return self._explain(check, claim, req, cand, r)
        return None

    def _explain(self, check, claim, req, cand, rejection: Rejection) -> Refusal:
        explain = getattr(check, "explain", None)
        if explain is None:
            if self._wording is None:
                from allocator.explanation.messages import EXPLAIN, generic

                self._wording = (EXPLAIN, generic)
            explain = self._wording[0].get(rejection[0], self._wording[1])
        try:
            rich = explain(self, claim, req, cand, rejection)
        except Exception:  # noqa: BLE001  the words must never break the search itself
            rich = None
        return rich if rich is not None else Refusal(rejection[0], rejection[1])

    def run_instance_type(
        self, instance_type: str, it_requirements: Requirements | None, parent: int | None
    ) -> ITOutcome:
        trace = self.trace
        node = trace.add(parent, "instanceType", instance_type) if trace.enabled else -1
        start_nodes = self.nodes
        for claim in self.claims:
            why = claim.pruned_instance_types.get(instance_type)
            if why is not None:
                reason = f"claim {claim.key}: {why}"
                funnel = self._whole_funnel(claim, why)
                if trace.enabled:
                    trace.set(
                        node,
                        "pruned",
                        "exceeding-maximum" if "exceeding" in why else "no-devices",
                        reason,
                    )
                    trace.nodes[node]["funnel"] = [funnel_json(funnel)]
                return ITOutcome(instance_type, False, reason=reason, funnels=[funnel])
        memo = self.funnel_memo
        if memo is not None:
            known = self._memo_count_refusal(instance_type)
            if known is not None:
                return known
        self._prepare_it(instance_type, it_requirements)
        # Up-front count pruning: a request with fewer eligible devices than slots.
        counted: list[tuple[int, str, Funnel | None]] = []
        for claim in self.claims:
            for req in claim.requests:
                if req.alternatives:
                    continue
                if not self.explain:
                    if self._count_refuses(claim, req):
                        return ITOutcome(instance_type, False, reason=_UNWORDED, unworded=True)
                    if memo is not None and req.allocation_mode != ALL:
                        memo[self._memo_key(claim, req)] = _COUNT_PASSES
                    continue
                if memo is not None:
                    refused = self._fresh_count_funnel(claim, req)
                else:
                    refused = self._count_funnel(claim, req)
                counted.append((claim.index, req.name, refused[0] if refused else None))
                if refused is not None:
                    funnel, reason = refused
                    if trace.enabled:
                        trace.set(node, "pruned", decisive_reason(funnel) or "no-devices", reason)
                        trace.nodes[node]["funnel"] = [funnel_json(funnel)]
                    return ITOutcome(
                        instance_type, False, reason=reason, funnels=[funnel], counted=counted
                    )
        refused = self._feasibility_stage()
        if refused is not None:
            code, funnel, reason = refused
            if trace.enabled:
                trace.set(node, "pruned", code, reason)
                trace.nodes[node]["funnel"] = [funnel_json(funnel)]
            return ITOutcome(instance_type, False, reason=reason, funnels=[funnel], counted=counted)
        try:
            ok = self._claim(0, node)
        except TimedOut:
            if trace.enabled:
                trace.set(node, "failed", "timeout", "timed out: the search was abandoned")
            raise
        out = ITOutcome(instance_type, ok, nodes=self.nodes - start_nodes, counted=counted)
        if ok:
            out.path = list(self.path)
        else:
            out.reason = self.failure[1] if self.failure else "no allocation found"
            funnel = self._search_funnel(out.reason) if self.explain else None
            if funnel is not None:
                out.funnels.append(funnel)
        if trace.enabled:
            trace.set(
                node,
                "ok" if ok else "failed",
                None if ok else "no-solution",
                None if ok else out.reason,
            )
            if out.funnels:
                trace.nodes[node]["funnel"] = [funnel_json(f) for f in out.funnels]
        return out

    def _feasibility_stage(self) -> tuple[str, Funnel, str] | None:
        """Before the search: a constraint that no choice of devices can satisfy (its own
        ``feasibility`` reasoning over the whole claim), as (reason code, funnel, message)."""
        for claim in self.claims:
            for c in claim.constraints:
                feasibility = getattr(c, "feasibility", None)
                if feasibility is None:
                    continue
                why = feasibility(self, claim, None)
                if why is None:
                    continue
                req = next(
                    (r for r in claim.requests if not r.alternatives and c.applies(r.name)),
                    claim.requests[0],
                )
                needed = (
                    req.num_devices
                    if req.allocation_mode != ALL
                    else len(req.slots_for(self.instance_type) or [])
                )
                funnel = self._funnel(claim, req, needed, whole=why)
                code = getattr(c, "reason_code", "constraint")
                return code, funnel, f"claim {claim.key} request {req.name}: {why}"
        return None

    # --- the refusal funnel -------------------------------------------------------------------

    def _count_funnel(self, claim: ClaimData, req: RequestData) -> tuple[Funnel, str] | None:
        """The count stage of one request: None when it may be satisfiable, else its funnel
        (the devices in reach and what refused each) and the refusal message."""
        if req.allocation_mode == ALL:
            slots = req.slots_for(self.instance_type) or []
            if not slots:
                funnel = self._funnel(claim, req, 1)
                return funnel, (
                    f"claim {claim.key} request {req.name}: no device matches "
                    f"(allocation mode All needs at least one)" + _tail(funnel)
                )
            for cand in slots:
                r = self._prefilter(claim, req, cand)
                if r is not None:
                    funnel = self._funnel(claim, req, len(slots))
                    return funnel, (
                        f"claim {claim.key} request {req.name} (allocation mode All): "
                        f"device {cand.id}: {r[1]}"
                    )
            return None
        lazy = self.eligible[(claim.index, req.name)]
        if not lazy.has(req.num_devices - 1) and not self._reusable_left(
            (claim.index, req.name), 0
        ):
            funnel = self._funnel(claim, req, req.num_devices)
            return funnel, count_message(claim.key, req.name, req.num_devices, funnel)
        return None

    # --- the count stage of fresh NodeClaims (issue 11 item 2) ----------------------------------
    #
    # On a NodeClaim that holds no device yet and reaches no in-cluster device, the count stage
    # reads only this instance type's template devices, each refused (or not) for what its own
    # attributes and the claim's spec say: every fresh NodeClaim of the NodePool gets the same
    # answer for a claim of the same spec. ``funnel_memo`` keeps it per (NodePool, instance
    # type, claim spec, request, count): _COUNT_PASSES, or the refusal's funnel (renamed for
    # the claim it is shown for).

    def _memo_key(self, claim: ClaimData, req: RequestData) -> tuple:
        memo = self.funnel_memo
        spec = memo.get(id(claim.claim))
        if spec is None or spec[0] is not claim.claim:
            spec = memo[id(claim.claim)] = (
                claim.claim,
                (claim.claim.namespace, repr(claim.claim.spec)),
            )
        return (self.node_pool, self.instance_type, spec[1], req.name, req.num_devices)

    def _memo_count_refusal(self, instance_type: str) -> ITOutcome | None:
        """The count stage's refusal from the memo, without preparing the instance type; None
        when it is not known (or every request passes: the search must run)."""
        memo = self.funnel_memo
        self.instance_type = instance_type  # for _memo_key; _prepare_it sets it again
        counted: list[tuple[int, str, Funnel | None]] = []
        for claim in self.claims:
            for req in claim.requests:
                if req.alternatives:
                    continue
                if req.allocation_mode == ALL:
                    return None
                hit = memo.get(self._memo_key(claim, req))
                if hit is None:
                    return None
                if hit is _COUNT_PASSES:
                    counted.append((claim.index, req.name, None))
                    continue
                if not self.explain:
                    return ITOutcome(instance_type, False, reason=_UNWORDED, unworded=True)
                # Worded once per refusal and claim (every new NodeClaim's other instance
                # types refuse the pods of one template the same way).
                wkey = (id(hit), claim.key, req.name, req.num_devices)
                worded = memo.get(wkey)
                if worded is None or worded[0] is not hit:
                    funnel = hit.for_claim(claim.key)
                    worded = memo[wkey] = (
                        hit,
                        funnel,
                        count_message(claim.key, req.name, req.num_devices, funnel),
                    )
                _, funnel, reason = worded
                counted.append((claim.index, req.name, funnel))
                return ITOutcome(
                    instance_type, False, reason=reason, funnels=[funnel], counted=counted
                )
        return None

    def _fresh_count_funnel(self, claim: ClaimData, req: RequestData) -> tuple[Funnel, str] | None:
        """``_count_funnel``, remembered in the memo (see above)."""
        if req.allocation_mode == ALL:
            return self._count_funnel(claim, req)
        refused = self._count_funnel(claim, req)
        self.funnel_memo[self._memo_key(claim, req)] = (
            refused[0] if refused is not None else _COUNT_PASSES
        )
        return refused

    def _count_refuses(self, claim: ClaimData, req: RequestData) -> bool:
        """Whether ``_count_funnel`` refuses the request, without building its funnel."""
        if req.allocation_mode == ALL:
            slots = req.slots_for(self.instance_type) or []
            return not slots or any(self._prefilter(claim, req, c) is not None for c in slots)
        return not self.eligible[(claim.index, req.name)].has(
            req.num_devices - 1
        ) and not self._reusable_left((claim.index, req.name), 0)

    def _funnel(self, claim: ClaimData, req: RequestData, needed: int, whole=None) -> Funnel:
        return build_funnel(
            claim.key,
            req.name,
            needed,
            self.instance_type,
            self._tally(claim, req),
            whole,
        )

    def _tally(self, claim: ClaimData, req: RequestData) -> list[tuple[str, Refusal | None]]:
        """Every candidate in reach with its refusal (None: usable), in search order. The
        in-cluster part is shared by the instance types reaching the same pools."""
        in_cluster = self._in_cluster
        skey = (claim.index, req.name, id(in_cluster))
        cached = self._summary_cache.get(skey) if self.share_prefilter else None
        if cached is None:
            cached = [(c, self._refuse(claim, req, c)) for c in in_cluster]
            if self.share_prefilter:
                self._summary_cache[skey] = cached
        templates = self.templates_by_it.get(self.instance_type, [])
        out = []
        for cand, r in cached:
            # The allocated check comes next: a device held here is counted there.
            held = (
                self._held_here(claim, req, cand)
                if self.tracker.cluster and (r is None or r.reason not in POOL_REASONS)
                else None
            )
            out.append((str(cand.id), held or r))
        for cand in templates:
            out.append((str(cand.id), self._refuse(claim, req, cand)))
        return out

    def _held_here(self, claim: ClaimData, req: RequestData, cand: DeviceWithID) -> Refusal | None:
        """An in-cluster device this NodeClaim's own instance type holds: the (shared across
        instance types) prefilter lets it through and the search refuses it; the funnel of
        this instance type counts it as allocated."""
        if (
            req.exact is not None and req.exact.admin_access
        ) or cand.device.allow_multiple_allocations:
            return None
        if not self.tracker.is_allocated(cand.id, False, self.node_claim_id, self.instance_type):
            return None
        rejection = ("allocated", "already allocated")
        for check in self.checks:
            if check.name == "allocated":
                return self._explain(check, claim, req, cand, rejection)
        return Refusal(*rejection)

    def _refuse(self, claim: ClaimData, req: RequestData, cand: DeviceWithID) -> Refusal | None:
        if self._prefilter(claim, req, cand) is None:  # memoised: usable devices cost little
            return None
        return self.refusal(claim, req, cand)

    def _whole_funnel(self, claim: ClaimData, why: str) -> Funnel:
        req = next((r for r in claim.requests if r.allocation_mode == ALL), None)
        name = req.name if req is not None else ""
        return build_funnel(claim.key, name, 0, self.instance_type, (), why)

    def _search_funnel(self, reason: str) -> Funnel | None:
        """Enough usable devices, but no combination fits (constraint, topology, counters
        used up along the way ...): the funnel of the slot the search got stuck on. Devices
        the prefilter refused keep that refusal; those the slot itself refused count under
        the check that refused them there; the rest stayed usable."""
        if self.failure is None:
            return None
        ci, ri = self.failure[0][0], self.failure[0][1]
        if ci >= len(self.claims) or ri >= len(self.claims[ci].requests):
            return None
        claim = self.claims[ci]
        req = claim.requests[ri]
        if req.alternatives:
            req = req.alternatives[-1]  # the last alternative tried
        needed = (
            req.num_devices
            if req.allocation_mode != ALL
            else max(1, len(req.slots_for(self.instance_type) or []))  # All needs one at least
        )
        at_slot = {id(c): r for c, r in self.failure_refusals}
        tally = self._tally(claim, req)
        if at_slot:
            universe = self._in_cluster + self.templates_by_it.get(self.instance_type, [])
            tally = [
                (
                    name,
                    r
                    if r is not None or id(c) not in at_slot
                    else self._in_search(claim, req, c, at_slot[id(c)]),
                )
                for c, (name, r) in zip(universe, tally, strict=True)
            ]
        funnel = build_funnel(claim.key, req.name, needed, self.instance_type, tally)
        if funnel.usable >= needed:
            return replace(funnel, whole=f"enough devices, but no combination fits: {reason}")
        return replace(funnel, whole=f"no combination fits: {reason}")

    def _in_search(self, claim, req, cand, rejection: Rejection) -> Refusal:
        """A refusal met during the search (path-dependent: what was taken before)."""
        if rejection[0] == "allocated" and "in this search" in rejection[1]:
            return Refusal(
                "allocated", "taken by an earlier request or slot of this pod", {}, ("search",)
            )
        check = next((c for c in self.checks if c.name == rejection[0]), None)
        return self._explain(check, claim, req, cand, rejection)

    # --- recursion ----------------------------------------------------------------------------

    def _claim(self, ci: int, parent: int) -> bool:
        if ci == len(self.claims):
            return True
        claim = self.claims[ci]
        trace = self.trace
        node = trace.add(parent, "claim", claim.key) if trace.enabled else parent
        ok = self._request(ci, 0, node)
        if trace.enabled:
            if ok:
                trace.set(node, "ok")
            else:
                trace.set(node, "failed", "unsatisfied", f"claim {claim.key}: requests not met")
        return ok

    def _request(self, ci: int, ri: int, parent: int) -> bool:
        claim = self.claims[ci]
        if ri == len(claim.requests):
            return self._claim(ci + 1, parent)
        req = claim.requests[ri]
        trace = self.trace
        for alt in req.alternatives or [req]:
            node = trace.add(parent, "request", alt.name) if trace.enabled else parent
            if req.alternatives and self._over_claim_limit(ci, ri, alt, node):
                continue
            if alt.allocation_mode == ALL:
                # All mode needs at least one device: an alternative matching none fails
                # (Karpenter: "All-mode requires at least one device to be satisfiable").
                if not alt.slots_for(self.instance_type):
                    self._fail(
                        (ci, ri, 0),
                        f"claim {claim.key} request {alt.name}: no device matches "
                        "(allocation mode All needs at least one)",
                    )
                    if trace.enabled:
                        trace.set(
                            node,
                            "failed",
                            "no-devices",
                            f"request {alt.name}: no device matches (allocation mode All "
                            "needs at least one)",
                        )
                    continue
                ok = self._all_slot(ci, ri, alt, 0, node)
            else:
                ok = self._slot(ci, ri, alt, 0, 0, node)
            if trace.enabled:
                if ok:
                    trace.set(node, "ok")
                else:
                    msg = f"request {alt.name}: no devices for it, or for what follows it"
                    trace.set(node, "failed", "unsatisfied", msg)
            if ok:
                return True
        return False

    def _over_claim_limit(self, ci: int, ri: int, alt: RequestData, node: int) -> bool:
        """A FirstAvailable alternative that would take the claim past the 32 devices of an
        allocation result fails (validation counted only the smallest alternatives)."""
        claim = self.claims[ci]
        slots = alt.slots_for(self.instance_type)
        wanted = len(slots) if slots is not None else alt.num_devices
        taken = sum(1 for e in self.path if e.claim_index == claim.index)
        if taken + wanted <= ALLOCATION_RESULTS_MAX_SIZE:
            return False
        why = (
            f"request {alt.name}: {taken + wanted} devices, exceeding maximum of "
            f"{ALLOCATION_RESULTS_MAX_SIZE} devices per claim"
        )
        self._fail((ci, ri, 0), f"claim {claim.key} {why}")
        if self.trace.enabled:
            self.trace.set(node, "failed", "limit", why)
        return True

    def _slot(self, ci: int, ri: int, req: RequestData, slot: int, start: int, parent: int) -> bool:
        if slot == req.num_devices:
            return self._request(ci, ri + 1, parent)
        claim = self.claims[ci]
        key = (claim.index, req.name)
        need = req.num_devices - slot
        trace = self.trace
        traced = trace.enabled
        lazy = self.eligible[key]
        cands = self.candidates[key] if traced else lazy.items
        suffix = self.suffix[key] if traced else None
        eligible_ids = self.eligible_ids.get(key, set()) if traced else None
        node = trace.add(parent, "slot", f"{req.name}[{slot}]") if traced else parent
        step = Step(claim, ri, req, slot, 0)
        rejected: dict[str, int] = {}
        first_msg: dict[str, str] = {}
        refusals: list[tuple[DeviceWithID, Rejection]] = []  # for the funnel, on failure
        pos = start - 1
        while True:
            pos += 1
            if suffix is not None:
                if pos >= len(cands):
                    break
                enough = suffix[pos] >= need
            else:
                enough = lazy.has(pos + need - 1)
                if not enough and pos >= len(cands):
                    break  # simply exhausted
            if not enough and pos < len(cands) and self._reusable_left(key, pos):
                enough = True  # a shared device can fill the remaining slots
            if not enough:
                msg = f"fewer than {need} candidate devices left for {need} slots"
                if traced:
                    trace.set(node, "pruned", "count", msg)
                rejected["count"] = rejected.get("count", 0) + 1
                first_msg.setdefault("count", msg)
                break
            cand = cands[pos]
            # Count only devices past the prefilter, as an untraced run sees them, so that
            # --trace never changes dfsNodes or when the timeout fires.
            if eligible_ids is None or id(cand) in eligible_ids:
                self.tick()
            step.position = pos
            rejection = self._apply(step, cand)
            if rejection is not None:
                code, msg = rejection
                # A traced run also walks the devices the prefilter refused (to show them);
                # the failure's words count only what an untraced run sees.
                if eligible_ids is None or id(cand) in eligible_ids:
                    rejected[code] = rejected.get(code, 0) + 1
                    refusals.append((cand, rejection))
                    if code not in first_msg:  # name the device once per reason
                        shown = str(cand.id)
                        first_msg[code] = msg if shown in msg else f"device {shown}: {msg}"
                if traced:
                    status = "pruned" if self.pruned else "failed"
                    self._trace_device(node, cand, status, code, msg)
                continue
            dnode = self._trace_device(node, cand, "ok", None, None) if traced else node
            self.path.append(PathEntry(claim.index, req.name, cand, self.extra))
            # A shared device may take the next slot too (multisets in non-decreasing order).
            nxt = pos if self.may_reuse and self._reusable(cand) else pos + 1
            if self._slot(ci, ri, req, slot + 1, nxt, dnode):
                if traced:
                    trace.set(node, "ok")
                return True
            self.path.pop()
            self._undo(step, cand)
            if traced:
                trace.set(dnode, "failed", "backtrack", _BACKTRACK)
        summary = ", ".join(f"{k}: {v} ({first_msg[k]})" for k, v in sorted(rejected.items()))
        if traced and node >= 0 and trace.nodes[node]["reason"] is None:
            trace.set(node, "failed", "exhausted", summary or "no candidate devices")
        self._fail(
            (ci, ri, slot),
            f"claim {claim.key} request {req.name}: cannot fill slot {slot + 1} of "
            f"{req.num_devices}" + (f"; rejected {summary}" if summary else "; no candidates"),
            refusals,
        )
        if traced and trace.nodes and node >= 0 and trace.nodes[node]["status"] == "ok":
            trace.set(node, "failed")
        return False

    def _all_slot(self, ci: int, ri: int, req: RequestData, slot: int, parent: int) -> bool:
        slots = req.slots_for(self.instance_type) or []
        if slot == len(slots):
            return self._request(ci, ri + 1, parent)
        claim = self.claims[ci]
        cand = slots[slot]
        trace = self.trace
        traced = trace.enabled
        node = trace.add(parent, "slot", f"{req.name}[{slot}]") if traced else parent
        self.tick()
        step = Step(claim, ri, req, slot, slot)
        rejection = self._apply(step, cand)
        if rejection is not None:
            if traced:
                self._trace_device(node, cand, "failed", rejection[0], rejection[1])
                trace.set(node, "failed", rejection[0], rejection[1])
            self._fail(
                (ci, ri, slot),
                f"claim {claim.key} request {req.name} (allocation mode All): "
                f"device {cand.id}: {rejection[1]}",
            )
            return False
        dnode = self._trace_device(node, cand, "ok", None, None) if traced else node
        self.path.append(PathEntry(claim.index, req.name, cand, self.extra))
        if self._all_slot(ci, ri, req, slot + 1, dnode):
            return True
        self.path.pop()
        self._undo(step, cand)
        if traced:
            trace.set(dnode, "failed", "backtrack", _BACKTRACK)
            trace.set(node, "failed", "backtrack", _BACKTRACK)
        return False

    def _apply(self, step: Step, cand: DeviceWithID) -> Rejection | None:
        self.extra = {}
        self.pruned = False
        checks = self.checks
        for i, check in enumerate(checks):
            rejection = check.try_add(self, step, cand)
            if rejection is not None:
                for prev in reversed(checks[:i]):
                    prev.remove(self, step, cand)
                return rejection
        return None

    def _undo(self, step: Step, cand: DeviceWithID) -> None:
        for check in reversed(self.checks):
            check.remove(self, step, cand)

    def _trace_device(
        self, parent: int, cand: DeviceWithID, status: str, code: str | None, msg: str | None
    ) -> int:
        return self.trace.add(
            parent,
            "device",
            str(cand.id),
            status,
            code,
            msg,
            driver=cand.id.driver,
            pool=cand.id.pool,
            device=cand.id.device,
            source=cand.source,
            instanceType=cand.instance_type,
        )


def pool_variants(
    base: Requirements, it_requirements: Sequence[Requirements | None]
) -> list[Requirements]:
    """The NodeClaim's requirements intersected with each candidate IT's (in-flight gather)."""
    # A candidate whose own requirements are unknown reaches whatever the NodeClaim's
    # requirements reach: the NodeClaim's requirements alone are then the (widest) variant.
    if not it_requirements or any(r is None for r in it_requirements):
        return [base]
    return [base.intersect(r) for r in it_requirements]


def count_message(claim_key: str, request: str, needed: int, funnel: Funnel) -> str:
    """The count-pruning refusal of one ExactCount request, ending with the decisive cause.
    Built from the (pod-independent) funnel alone, so that the scheduler words a cached refusal
    exactly as the search would."""
    return (
        f"claim {claim_key} request {request}: {funnel.usable} of {needed} devices available"
        + _tail(funnel)
    )


def _tail(funnel: Funnel) -> str:
    cause = cause_text(funnel)
    return f" {cause}" if cause else ""
