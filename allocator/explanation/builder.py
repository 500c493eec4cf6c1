"""The refusal funnels of a refused instance type, built from what its search recorded.

The DFS (``allocator/dfs.py``) decides; when it refuses an instance type it asks its
``Explainer`` (this ``FunnelBuilder``) for the funnel and the words: every device in reach with
the most lasting check that refuses it, every other refusing check as ``also`` (``build_funnel``
groups them), the count stage's refusal message, the funnel of the slot the search got stuck on. The devices' refusals are worded by
``explanation/messages.py``.

On a NodeClaim that reaches no in-cluster device, the count stage reads only this instance
type's template devices, each refused (or not) for what its own attributes and the claim's
spec say, and which of them the NodeClaim already holds there (and for whom): every fresh
NodeClaim of the NodePool gets the same answer for a claim of the same spec, and so does one
NodeClaim while it holds the same devices (the pods that fail on it one after another). The
``memo`` (the Allocator's ``fresh_funnels``, which the scheduler switches on) keeps it per
(NodePool, instance type, claim spec, request, count, the NodeClaim and the devices it holds
there, when it holds some): ``_COUNT_PASSES``, or the refusal's funnel (renamed for the claim
it is shown for). Existing nodes alike (``allocator/nodealike.py``) share theirs the same way,
in the Allocator's ``alike_funnels``, keyed by what their count stage reads of their devices:
an ``AlikeRefusal``, its example devices mapped to each node's own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from allocator.checks import ALLOCATED, POOL_REASONS, Refusal, Rejection
from allocator.dfs import CountRefusal, DFSContext
from allocator.errors import Counted
from allocator.explanation.messages import EXPLAIN, Wording, generic
from allocator.funnel import (
    Funnel,
    build_funnel,
    cause_suffix,
    count_message,
    lasting_rank,
    names_any,
)
from allocator.nodealike import NodeAlike
from allocator.pools import DeviceWithID
from allocator.records import record
from allocator.requests import ALL, ClaimData, PrunedInstanceType, RequestData

_COUNT_PASSES = "passes"  # memo: the request passes the count stage


@record(frozen=True, eq=False)
class AlikeRefusal:
    """An existing node's count-stage refusal that nodes alike take (``nodealike.py``): its
    words name none of the node's own names; its example devices are mapped by position."""

    funnel: Funnel
    positions: Mapping[str, int]  # the node's devices, in search order

    @classmethod
    def of(cls, found: tuple[Funnel, str], alike: NodeAlike) -> AlikeRefusal | None:
        """The refusal to share, or None when its words name the node, a pool, a slice or a
        device of its own (or give an example device out of reach)."""
        funnel, reason = found
        if names_any([reason], [funnel], alike.names):
            return None
        positions = {name: i for i, name in enumerate(alike.devices)}
        if any(e not in positions for g in funnel.rejections for e in g.example_devices):
            return None
        return cls(funnel, positions)

    def mapped(self, funnel: Funnel, devices: Sequence[str]) -> Funnel:
        """``funnel`` (this refusal's, for some claim) with its example devices the ones at the
        same positions of ``devices``."""
        positions = self.positions
        groups = tuple(
            replace(g, example_devices=tuple(devices[positions[e]] for e in g.example_devices))
            for g in funnel.rejections
        )
        return replace(funnel, rejections=groups)


class FunnelBuilder:
    """The ``Explainer`` of one Allocate's search (see ``allocator/dfs.py``)."""

    def __init__(self, wording: Wording, memo: dict | None, alike: NodeAlike | None = None) -> None:
        self.wording = wording
        # Count-stage funnels of NodeClaims reaching templates only, shared across Allocate
        # calls; None: the NodeClaim reaches in-cluster devices (or the run is traced). With
        # ``alike``: those of existing nodes the count stage cannot tell apart (nodealike.py).
        self.memo = memo
        self.alike = alike
        # Every in-cluster device's refusal per request, shared by the instance types reaching
        # the same pools (when their prefilters are shared too).
        self._tally_cache: dict[tuple[int, str, int], list[tuple[DeviceWithID, Refusal | None]]]
        self._tally_cache = {}

    # --- the Explainer ------------------------------------------------------------------------

    def pruned(self, search: DFSContext, claim: ClaimData, why: PrunedInstanceType) -> Funnel:
        req = next((r for r in claim.requests if r.allocation_mode == ALL), None)
        name = req.name if req is not None else ""
        return build_funnel(claim.key, name, 0, search.instance_type, (), why.message)

    def known_count_refusal(self, search: DFSContext, instance_type: str) -> CountRefusal | None:
        memo = self.memo
        if memo is None:
            return None
        search.instance_type = instance_type  # the instance type the memo keys name
        counted: Counted = []
        for claim in search.claims:
            for req in claim.requests:
                if req.alternatives:
                    continue
                if req.allocation_mode == ALL:
                    return None
                hit = memo.get(self._memo_key(search, claim, req))
                if hit is None:
                    return None
                if hit is _COUNT_PASSES:
                    counted.append((claim.index, req.name, None))
                    continue
                if not search.explain:
                    return CountRefusal(counted)
                # Worded once per refusal and claim (every new NodeClaim's other instance
                # types refuse the pods of one template the same way).
                wkey = (id(hit), claim.key, req.name, req.num_devices)
                worded = memo.get(wkey)
                if worded is None or worded[0] is not hit:
                    shown = hit.funnel if isinstance(hit, AlikeRefusal) else hit
                    funnel = shown.for_claim(claim.key)
                    worded = memo[wkey] = (
                        hit,
                        funnel,
                        count_message(claim.key, req.name, req.num_devices, funnel),
                    )
                _, funnel, reason = worded
                if isinstance(hit, AlikeRefusal) and self.alike is not None:
                    funnel = hit.mapped(funnel, self.alike.devices)
                counted.append((claim.index, req.name, funnel))
                return CountRefusal(counted, funnel, reason)
        return None

    def count_stage(
        self, search: DFSContext, claim: ClaimData, req: RequestData, refused: bool
    ) -> tuple[Funnel, str] | None:
        found = self._count_refusal(search, claim, req) if refused else None
        if self.memo is not None and req.allocation_mode != ALL:
            kept: object = found[0] if found is not None else _COUNT_PASSES
            if found is not None and self.alike is not None:
                kept = AlikeRefusal.of(found, self.alike)
            if kept is not None:
                self.memo[self._memo_key(search, claim, req)] = kept
        return found

    def count_passes(self, search: DFSContext, claim: ClaimData, req: RequestData) -> None:
        if self.memo is not None and req.allocation_mode != ALL:
            self.memo[self._memo_key(search, claim, req)] = _COUNT_PASSES

    def infeasible(
        self, search: DFSContext, claim: ClaimData, req: RequestData, needed: int, why: str
    ) -> Funnel:
        return self._funnel(search, claim, req, needed, whole=why)

    def search_failed(self, search: DFSContext) -> Funnel | None:
        """Enough usable devices, but no combination fits (constraint, topology, counters
        used up along the way ...): the funnel of the slot the search got stuck on. Devices
        the prefilter refused keep that refusal; those the slot itself refused count under
        the check that refused them there; the rest stayed usable."""
        record = search.record
        if record.depth is None:
            return None
        ci, ri = record.depth[0], record.depth[1]
        if ci >= len(search.claims) or ri >= len(search.claims[ci].requests):
            return None
        claim = search.claims[ci]
        req = claim.requests[ri]
        if req.alternatives:
            req = req.alternatives[-1]  # the last alternative tried
        needed = (
            req.num_devices
            if req.allocation_mode != ALL
            else max(1, len(req.slots_for(search.instance_type) or []))  # All needs one at least
        )
        at_slot = {id(c): r for c, r in record.refusals}
        tally = self._tally(search, claim, req)
        if at_slot:
            universe = search.in_cluster + search.templates_by_it.get(search.instance_type, [])
            tally = [
                (
                    name,
                    r
                    if r is not None or id(c) not in at_slot
                    else self._in_search(search, req, c, at_slot[id(c)]),
                )
                for c, (name, r) in zip(universe, tally, strict=True)
            ]
        funnel = build_funnel(claim.key, req.name, needed, search.instance_type, tally)
        reason = record.message
        if funnel.usable >= needed:
            return replace(funnel, whole=f"enough devices, but no combination fits: {reason}")
        return replace(funnel, whole=f"no combination fits: {reason}")

    # --- the count stage ----------------------------------------------------------------------

    def _count_refusal(
        self, search: DFSContext, claim: ClaimData, req: RequestData
    ) -> tuple[Funnel, str]:
        """The funnel (the devices in reach and what refused each) and the message of a
        request the count stage refuses."""
        if req.allocation_mode == ALL:
            slots = req.slots_for(search.instance_type) or []
            if not slots:
                funnel = self._funnel(search, claim, req, 1)
                return funnel, (
                    f"claim {claim.key} request {req.name}: no device matches "
                    "(allocation mode All needs at least one)" + cause_suffix(funnel)
                )
            for cand in slots:
                r = search.prefilter(claim, req, cand)
                if r is not None:
                    funnel = self._funnel(search, claim, req, len(slots))
                    return funnel, (
                        f"claim {claim.key} request {req.name} (allocation mode All): "
                        f"device {cand.id}: {r.message}"
                    )
            raise AssertionError("the count stage refused none of the slots")
        funnel = self._funnel(search, claim, req, req.num_devices)
        return funnel, count_message(claim.key, req.name, req.num_devices, funnel)

    def _memo_key(self, search: DFSContext, claim: ClaimData, req: RequestData) -> tuple:
        memo = self.memo
        assert memo is not None
        spec = memo.get(id(claim.claim))
        if spec is None or spec[0] is not claim.claim:
            spec = memo[id(claim.claim)] = (
                claim.claim,
                (claim.claim.namespace, repr(claim.claim.spec)),
            )
        if self.alike is not None:  # an existing node holding none of its devices
            return (
                "node",
                self.alike.key,
                search.instance_type,
                spec[1],
                req.name,
                req.num_devices,
            )
        # Held template devices are refused as allocated, their holders named: the NodeClaim
        # and exactly those devices are part of what the answer read.
        held = search.tracker.templates.get(search.node_claim_id)
        mine = held.get(search.instance_type) if held else None
        where = (search.node_claim_id, frozenset(mine)) if mine else None
        return (search.node_pool, search.instance_type, spec[1], req.name, req.num_devices, where)

    # --- funnels ------------------------------------------------------------------------------

    def _funnel(
        self,
        search: DFSContext,
        claim: ClaimData,
        req: RequestData,
        needed: int,
        whole: str | None = None,
    ) -> Funnel:
        return build_funnel(
            claim.key,
            req.name,
            needed,
            search.instance_type,
            self._tally(search, claim, req),
            whole,
        )

    def _tally(
        self, search: DFSContext, claim: ClaimData, req: RequestData
    ) -> list[tuple[str, Refusal | None]]:
        """Every candidate in reach with its refusal (None: usable), in search order. The
        in-cluster part is shared by the instance types reaching the same pools."""
        in_cluster = search.in_cluster
        skey = (claim.index, req.name, id(in_cluster))
        cached = self._tally_cache.get(skey) if search.share_prefilter else None
        if cached is None:
            cached = [(c, self._refuse(search, claim, req, c)) for c in in_cluster]
            if search.share_prefilter:
                self._tally_cache[skey] = cached
        templates = search.templates_by_it.get(search.instance_type, [])
        out = []
        for cand, r in cached:
            # Held by this NodeClaim's own instance type: counted as allocated unless a more
            # lasting check refuses the device too.
            held = (
                self._held_here(search, req, cand)
                if search.tracker.cluster and (r is None or r.reason not in POOL_REASONS)
                else None
            )
            out.append((str(cand.id), _combined(r, held) if held is not None else r))
        for cand in templates:
            out.append((str(cand.id), self._refuse(search, claim, req, cand)))
        return out

    def _held_here(
        self, search: DFSContext, req: RequestData, cand: DeviceWithID
    ) -> Refusal | None:
        """An in-cluster device this NodeClaim's own instance type holds: the (shared across
        instance types) prefilter lets it through and the search refuses it; the funnel of
        this instance type counts it as allocated."""
        if (
            req.exact is not None and req.exact.admin_access
        ) or cand.device.allow_multiple_allocations:
            return None
        if not search.tracker.is_allocated(
            cand.id, False, search.node_claim_id, search.instance_type
        ):
            return None
        rejection = Rejection(ALLOCATED, "already allocated")
        if any(check.name == ALLOCATED for check in search.checks):
            return self._words(search, req, cand, rejection)
        return Refusal(rejection.reason, rejection.message)

    def _refuse(
        self, search: DFSContext, claim: ClaimData, req: RequestData, cand: DeviceWithID
    ) -> Refusal | None:
        if search.prefilter(claim, req, cand) is None:  # memoised: usable devices cost little
            return None
        rejections = self._every_refusal(search, claim, req, cand)
        if not rejections:
            return None
        decisive = min(rejections, key=lambda r: lasting_rank(r.reason))  # first of equals
        refusal = self._words(search, req, cand, decisive)
        also = _others(decisive.reason, (r.reason for r in rejections))
        return replace(refusal, also=also) if also else refusal

    def _every_refusal(
        self, search: DFSContext, claim: ClaimData, req: RequestData, cand: DeviceWithID
    ) -> list[Rejection]:
        """Every check's path-independent refusal of ``cand``, in pipeline order. Asked only
        for the devices of a refused request; a check that cannot answer for a device another
        check refused (it may assume the earlier ones passed) is left out of the list."""
        out = []
        for check in search.checks:
            try:
                r = check.prefilter(search, claim, req, cand)
            except Exception:  # noqa: BLE001  only the explanation asks: it must not break
                continue
            if r is not None:
                out.append(r)
        return out

    def _in_search(
        self, search: DFSContext, req: RequestData, cand: DeviceWithID, rejection: Rejection
    ) -> Refusal:
        """A refusal met during the search (path-dependent: what was taken before)."""
        if rejection.on_path:
            return Refusal(
                ALLOCATED, "taken by an earlier request or slot of this pod", {}, ("search",)
            )
        return self._words(search, req, cand, rejection)

    def _words(
        self, search: DFSContext, req: RequestData, cand: DeviceWithID, rejection: Rejection
    ) -> Refusal:
        explain = EXPLAIN.get(rejection.reason, generic)
        try:
            return explain(
                self.wording, search.node_claim_id, search.instance_type, req, cand, rejection
            )
        except Exception as error:  # noqa: BLE001  the words must never break the search itself
            self.wording.failed(f"a {rejection.reason} refusal of device {cand.id}", error)
            return Refusal(rejection.reason, rejection.message)


def _others(decisive: str, reasons) -> tuple[str, ...]:
    """The reason codes besides the decisive one, in the decisive order, each once."""
    seen = {r for r in reasons if r != decisive}
    return tuple(sorted(seen, key=lambda r: (lasting_rank(r), r)))


def _combined(refusal: Refusal | None, held: Refusal) -> Refusal:
    """A device held on this instance type that the prefilter may also refuse: the more
    lasting of the two decides, the other is kept as ``also``."""
    if refusal is None:
        return held
    reasons = (refusal.reason, *refusal.also, held.reason)
    if lasting_rank(held.reason) < lasting_rank(refusal.reason):
        return replace(held, also=_others(held.reason, reasons))
    return replace(refusal, also=_others(refusal.reason, reasons))
