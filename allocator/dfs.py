"""The per-instance-type DFS: claims > requests > slots > candidate devices.

Eligibility is the ordered list of device checks the Allocator hands over (the run's pipeline,
``allocator/pipeline.py``: pool, allocated, selector, constraint, topology, and the DRA features'
checks the gates turn on; the protocol is ``allocator/checks.py``). The DFS calls a check's
``remove`` in reverse check order on backtrack, so state unwinds in exact reverse order.

Pruning never changes which solution is found first; it only ends searches that cannot succeed:
- within an ExactCount request, slots take devices in increasing candidate order (a set of
  devices is tried once, not once per permutation);
- a slot stops when fewer candidates remain than slots to fill;
- when a MatchAttribute constraint gets pinned, every constrained request must still have
  enough candidates that can match the pinned value (or binding class).

The DFS searches and records where it failed (``SearchRecord``); the words and the refusal
funnels of a refused instance type come from its ``Explainer`` (``allocator/explanation/
builder.py``), which reads that record and this search's state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import field
from typing import Any, Protocol

from allocator.bindings import AttributeBindings
from allocator.checks import (
    CheckFactory,
    DeviceCheck,
    PathEntry,
    Rejection,
    Reusable,
    Step,
)
from allocator.constraints import BindingFallback, MatchAttributeConstraint
from allocator.errors import Counted
from allocator.featuregates import FeatureGates
from allocator.funnel import Funnel, decisive_reason, funnel_json
from allocator.model import ALLOCATION_RESULTS_MAX_SIZE, DeviceID, PoolKey, ResourceSliceTemplate
from allocator.pools import TEMPLATE, DeviceWithID, Pool, refilter
from allocator.records import record
from allocator.requests import ALL, ClaimData, PrunedInstanceType, RequestData, SelectorMatcher
from allocator.requirements import Requirements
from allocator.trace import NULL_TRACE, Trace
from allocator.tracker import AllocationTracker

TIMEOUT_CHECK_EVERY = 256  # DFS nodes between clock reads

_BACKTRACK = "taken, but the slots after it could not be filled"


class TimedOut(Exception):
    pass


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


@record
class ITOutcome:
    """The search on one instance type: whether it held, the path taken, or why not."""

    instance_type: str
    ok: bool
    path: list[PathEntry] = field(default_factory=list)
    reason: str | None = None
    nodes: int = 0
    # The refusal funnels of a failed instance type (count pruning, or after the search).
    funnels: list[Funnel] = field(default_factory=list)
    # The up-front count stage, request by request until the first refused one.
    counted: Counted = field(default_factory=list)
    # Refused at the count stage with ``explain`` off: ``reason`` is a placeholder, not the
    # words (Allocator.allocate words it if another instance type succeeds).
    unworded: bool = False


_UNWORDED = "refused by counting"


@record
class SearchRecord:
    """What the search of one instance type recorded about where it failed: the deepest slot
    it could not fill ((claim, request, slot) positions) with its words, and the devices that
    slot refused during the search (for its funnel)."""

    depth: tuple[int, int, int] | None = None
    message: str = ""
    refusals: list[tuple[DeviceWithID, Rejection]] = field(default_factory=list)

    def fail(
        self,
        depth: tuple[int, int, int],
        message: str,
        refusals: list[tuple[DeviceWithID, Rejection]] | None = None,
    ) -> None:
        """Keep the deepest failure (the last one met at the same depth)."""
        if self.depth is None or depth >= self.depth:
            self.depth = depth
            self.message = message
            self.refusals = refusals or []


@record
class CountRefusal:
    """A request the count stage refuses: the stage so far (this request last), and the
    refusal's funnel and words; both None when found without words (``explain`` off)."""

    counted: Counted
    funnel: Funnel | None = None
    reason: str | None = None


class Explainer(Protocol):
    """What words a refused instance type and builds its refusal funnels, from the search's
    state and record (``allocator/explanation/builder.py``)."""

    def pruned(self, search: DFSContext, claim: ClaimData, why: PrunedInstanceType) -> Funnel:
        """An instance type Request Validation took away from the claim."""
        ...

    def known_count_refusal(self, search: DFSContext, instance_type: str) -> CountRefusal | None:
        """The count stage's refusal of a fresh NodeClaim's instance type when an earlier
        Allocate found it already (see ``count_stage``); None when not known."""
        ...

    def count_stage(
        self, search: DFSContext, claim: ClaimData, req: RequestData, refused: bool
    ) -> tuple[Funnel, str] | None:
        """The funnel and words of a request the count stage refuses (None when it passes),
        remembered for fresh NodeClaims."""
        ...

    def count_passes(self, search: DFSContext, claim: ClaimData, req: RequestData) -> None:
        """A request passed the count stage without its words (``explain`` off)."""
        ...

    def infeasible(
        self, search: DFSContext, claim: ClaimData, req: RequestData, needed: int, why: str
    ) -> Funnel:
        """A constraint no choice of devices satisfies, before the search."""
        ...

    def search_failed(self, search: DFSContext) -> Funnel | None:
        """The slot the search got stuck on (``search.record``)."""
        ...


class DFSContext:
    """Per-Allocate search state; per-IT parts are reset by ``run_instance_type``. It is the
    ``SearchState`` the device checks read (``allocator/checks.py``)."""

    def __init__(
        self,
        *,
        checks: Sequence[CheckFactory],
        reusable: Sequence[Reusable],
        gates: FeatureGates,
        tracker: AllocationTracker,
        bindings: AttributeBindings,
        node_claim_id: str,
        node_pool: str | None,
        claims: list[ClaimData],
        matcher: SelectorMatcher,
        superset: list[Pool],
        pool_refusals: dict[PoolKey, Rejection],
        templates_by_it: dict[str, list[DeviceWithID]],
        template_slices_by_it: dict[str, list[ResourceSliceTemplate]],
        requirements: Requirements,
        explainer: Explainer,
        first_views: dict[str, Requirements] | None = None,
        deadline: float = float("inf"),
        clock: Callable[[], float] | None = None,
        trace: Trace = NULL_TRACE,
        explain: bool = True,
    ) -> None:
        self.check_factories = checks
        # Devices that may fill several slots of one request (DRAConsumableCapacity: a device
        # with allowMultipleAllocations gives each slot a share); each predicate gets
        # (DFSContext, DeviceWithID). Slots then restart at the same device, and count pruning
        # treats such a device as able to fill every remaining slot.
        self.reusable = reusable
        self.gates = gates  # the run's, from its pipeline
        self.tracker = tracker
        self.explainer = explainer
        # False: a refused instance type's funnel and words are not built (decision only).
        self.explain = explain or trace.enabled
        self.bindings = bindings
        self.node_claim_id = node_claim_id
        self.node_pool = node_pool
        self.claims = claims
        self.matcher = matcher
        self.superset = superset
        # Pools whose devices ExactCount never takes (incomplete, invalid): why, per pool key.
        self.pool_refusals = pool_refusals
        self.templates_by_it = templates_by_it
        self.template_slices_by_it = template_slices_by_it  # template counter sets (features)
        self.requirements = requirements  # accumulates across instance types
        self._initial_requirements = requirements
        # Instance type -> the initial requirements intersected with its own, when Allocate
        # computed them already (pool_variants): the view of an instance type started
        # before any other tightened the requirements.
        self.first_views = first_views
        self.deadline = deadline
        self.clock = clock
        self.trace = trace
        self.nodes = 0
        # per IT
        self.instance_type = ""
        self.it_requirements: Requirements | None = None
        self.view = requirements
        self.pools: list[Pool] = []
        self.pool_keys: set[PoolKey] = set()
        self.snapshots: list[tuple[Requirements, Requirements, list[Pool], set[PoolKey]]] = []
        self.allocated_ids: set[DeviceID] = set()
        self.allocated_templates: set[DeviceID] = set()
        self.path: list[PathEntry] = []
        self.extra: dict[str, Any] = {}
        self.checks: list[DeviceCheck] = []
        self.candidates: dict[tuple[int, str], list[DeviceWithID]] = {}
        self.eligible: dict[tuple[int, str], LazyCandidates] = {}
        self.suffix: dict[tuple[int, str], list[int]] = {}
        self.record = SearchRecord()
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
        self._pool_cache: dict[tuple, tuple[list[Pool], set[PoolKey], list[DeviceWithID]]] = {}
        self._shared_eligible: dict[tuple[int, str, int], LazyCandidates] = {}
        # The in-cluster devices the current instance type reaches (shared by the instance
        # types whose views agree: see _pools_for_view).
        self.in_cluster: list[DeviceWithID] = []

    def release(self) -> None:
        """Drop what refers back to this search (the eligible devices' predicates and the
        checks hold it) once Allocate is done with it: reference counting then frees the
        search at once, where the cycle collector would walk some 250,000 objects of 2,600
        searches on a 1,000-pod run first."""
        self.eligible = {}
        self._shared_eligible = {}
        self.checks = []

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

    def reusable_left(self, key: tuple[int, str], start: int) -> bool:
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

    def _prepare_it(self, instance_type: str, it_requirements: Requirements | None) -> None:
        self.instance_type = instance_type
        self.it_requirements = it_requirements
        view = None
        if self.first_views is not None and self.requirements is self._initial_requirements:
            view = self.first_views.get(instance_type)
        self.view = view if view is not None else self._make_view(self.requirements)
        self.pools, self.pool_keys, in_cluster = self._pools_for_view(self.view)
        self.in_cluster = in_cluster
        self.snapshots = []
        self.allocated_ids = set()
        self.allocated_templates = set()
        self.path = []
        self.record = SearchRecord()
        self.template_memo = {}
        checks = (factory(self) for factory in self.check_factories)
        self.checks = [c for c in checks if c is not None]
        # In-cluster prefilter answers are shared across instance types when every check
        # declares its prefilter independent of the instance type for in-cluster devices.
        self.share_prefilter = all(c.prefilter_it_independent for c in self.checks)
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
                                lambda c, claim=claim, r=r: self.prefilter(claim, r, c) is None,
                            )
                        lazy = LazyCandidates(
                            _chain(shared, templates),
                            lambda c, claim=claim, r=r: (
                                c.source != TEMPLATE or self.prefilter(claim, r, c) is None
                            ),
                        )
                    else:
                        lazy = LazyCandidates(
                            universe,
                            lambda c, claim=claim, r=r: self.prefilter(claim, r, c) is None,
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

    def prefilter(self, claim: ClaimData, req: RequestData, cand: DeviceWithID) -> Rejection | None:
        """The first check's path-independent refusal of ``cand`` for ``req`` (pipeline
        order), memoised per instance type (template devices) or across the instance types
        when the checks allow it (in-cluster devices)."""
        if cand.source == TEMPLATE:
            memo = self.template_memo  # prefilters are path-independent within an IT
        elif self.share_prefilter:
            memo = self.prefilter_memo
        else:
            return self.first_refusal(claim, req, cand)
        key = (claim.index, req.name, id(cand))
        hit = memo.get(key, self)
        if hit is self:
            hit = memo[key] = self.first_refusal(claim, req, cand)
        return hit  # type: ignore[return-value]

    def first_refusal(
        self, claim: ClaimData, req: RequestData, cand: DeviceWithID
    ) -> Rejection | None:
        """The first check (pipeline order) whose prefilter refuses ``cand``, asked again."""
        for check in self.checks:
            r = check.prefilter(self, claim, req, cand)
            if r is not None:
                return r
        return None

    def run_instance_type(
        self, instance_type: str, it_requirements: Requirements | None, parent: int | None
    ) -> ITOutcome:
        trace = self.trace
        explainer = self.explainer
        node = trace.add(parent, "instanceType", instance_type) if trace.enabled else -1
        start_nodes = self.nodes
        for claim in self.claims:
            pruned = claim.pruned_instance_types.get(instance_type)
            if pruned is not None:
                reason = f"claim {claim.key}: {pruned.message}"
                funnel = explainer.pruned(self, claim, pruned)
                if trace.enabled:
                    trace.set(node, "pruned", pruned.code, reason)
                    trace.nodes[node]["funnel"] = [funnel_json(funnel)]
                return ITOutcome(instance_type, False, reason=reason, funnels=[funnel])
        known = explainer.known_count_refusal(self, instance_type)
        if known is not None:
            return _count_refused(instance_type, known)
        self._prepare_it(instance_type, it_requirements)
        # Up-front count pruning: a request with fewer eligible devices than slots.
        counted: Counted = []
        for claim in self.claims:
            for req in claim.requests:
                if req.alternatives:
                    continue
                refuses = self._count_refuses(claim, req)
                if not self.explain:
                    if refuses:
                        return ITOutcome(instance_type, False, reason=_UNWORDED, unworded=True)
                    explainer.count_passes(self, claim, req)
                    continue
                refused = explainer.count_stage(self, claim, req, refuses)
                counted.append((claim.index, req.name, refused[0] if refused else None))
                if refused is not None:
                    funnel, reason = refused
                    if trace.enabled:
                        trace.set(node, "pruned", decisive_reason(funnel) or "no-devices", reason)
                        trace.nodes[node]["funnel"] = [funnel_json(funnel)]
                    return ITOutcome(
                        instance_type, False, reason=reason, funnels=[funnel], counted=counted
                    )
        infeasible = self._feasibility_stage()
        if infeasible is not None:
            code, funnel, reason = infeasible
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
            record = self.record
            out.reason = record.message if record.depth is not None else "no allocation found"
            funnel = explainer.search_failed(self) if self.explain else None
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
                if not c.checks_feasibility:
                    continue
                need, candidates = self.remaining_demand(claim, None, c.applies)
                why = c.feasibility(need, candidates)
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
                funnel = self.explainer.infeasible(self, claim, req, needed, why)
                return c.reason_code, funnel, f"claim {claim.key} request {req.name}: {why}"
        return None

    def _count_refuses(self, claim: ClaimData, req: RequestData) -> bool:
        """The count stage of one request: too few eligible devices for its slots (All mode:
        no device, or one of its predetermined devices refused)."""
        if req.allocation_mode == ALL:
            slots = req.slots_for(self.instance_type) or []
            return not slots or any(self.prefilter(claim, req, c) is not None for c in slots)
        return not self.eligible[(claim.index, req.name)].has(
            req.num_devices - 1
        ) and not self.reusable_left((claim.index, req.name), 0)

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
                    self.record.fail(
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
        self.record.fail((ci, ri, 0), f"claim {claim.key} {why}")
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
            if not enough and pos < len(cands) and self.reusable_left(key, pos):
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
                code, msg = rejection.reason, rejection.message
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
        self.record.fail(
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
                self._trace_device(node, cand, "failed", rejection.reason, rejection.message)
                trace.set(node, "failed", rejection.reason, rejection.message)
            self.record.fail(
                (ci, ri, slot),
                f"claim {claim.key} request {req.name} (allocation mode All): "
                f"device {cand.id}: {rejection.message}",
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


def _count_refused(instance_type: str, known: CountRefusal) -> ITOutcome:
    if known.funnel is None:
        return ITOutcome(instance_type, False, reason=_UNWORDED, unworded=True)
    return ITOutcome(
        instance_type, False, reason=known.reason, funnels=[known.funnel], counted=known.counted
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
