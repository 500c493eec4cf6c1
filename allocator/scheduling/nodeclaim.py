"""A NodeClaim this run creates, as the scheduler tries pods on it (Karpenter's ``NodeClaim``;
design: In-Flight / New NodeClaim Evaluation, Constraint Propagation).

A NodeClaim is a superposition of candidate instance types. ``can_add`` works out what the
NodeClaim would become with the pod (requirements tightened by the pod's terms and its devices'
topology, instance types filtered again) and changes nothing; ``add`` commits that: the device
allocation, the NodeClaim's new state, and the release of the instance types it lost.
"""

from __future__ import annotations

from dataclasses import field
from functools import partial

from allocator.allocator import narrowed
from allocator.errors import AllocationError
from allocator.funnel import names_any, renamed
from allocator.model import Pod, ResourceClaim, ResourceSliceTemplate, Taint
from allocator.records import record
from allocator.requirements import WELL_KNOWN_LABELS, Requirements
from allocator.scheduling import explain
from allocator.scheduling.daemonsets import DaemonOverheadGroup
from allocator.scheduling.decision import NodeClaimDecision, Plan, Refusal
from allocator.scheduling.fit import (
    HOSTNAME,
    FilterMemo,
    FilterOutcome,
    InstanceTypeInfo,
    NoInstanceType,
    Resources,
    cheapest_offering,
    filter_instance_types,
    first_compatible_term,
    format_taint,
    info_name,
    merged,
    min_values_shortfall,
    untolerated_taint,
)
from allocator.scheduling.hooks import HostPortUsage
from allocator.scheduling.hostports import HostPortConflict
from allocator.scheduling.hostports import HostPortUsage as PortUsage
from allocator.scheduling.poddata import PodData
from allocator.scheduling.refusalcache import ExplainedRefusal, WordedRefusal
from allocator.scheduling.report import DRA_STAGE, FILTER_STAGE
from allocator.scheduling.runstate import RunState, dra_node_resources, pod_level_problem
from allocator.scheduling.topology import TopologyError

IN_FLIGHT = "in-flight"  # the target kind of a NodeClaim created in this run
# The refusal of a NodeClaim's device-count bound (``_count_bound_refuses``), its words
# deferred: read only, shared by every NodeClaim and pod it refuses.
BOUND_REFUSAL = Refusal("", "no-instance-type", deferred=True)


@record(eq=False)
class NodeClaim:
    """A NodeClaim this run creates: a superposition of candidate instance types."""

    id: str
    name: str
    node_pool: str
    requirements: Requirements
    candidates: list[InstanceTypeInfo]  # in try order
    taints: list[Taint]
    # What its pods request (DaemonSet overhead apart: it depends on the instance type).
    requests: Resources = field(default_factory=dict)
    pods: list[Pod] = field(default_factory=list)
    # Its NodePool's instance types grouped by the DaemonSet pods each would run (Karpenter's
    # DaemonOverheadGroup), each with the host ports those and the NodeClaim's pods hold.
    daemon_groups: tuple[DaemonOverheadGroup, ...] = ()
    node_name: None = None
    kind: str = IN_FLIGHT

    @property
    def host_port_usage(self) -> HostPortUsage:
        """Every host port held on it, whichever instance type it becomes."""
        return PortUsage(
            {
                key: ports
                for g in self.daemon_groups
                for key, ports in g.host_ports.holders().items()
            }
        )

    @property
    def instance_types(self) -> list[str]:
        return list(map(info_name, self.candidates))

    @property
    def reason_target(self) -> str:
        # docs/RESULT.md knows two target forms; a NodeClaim of this run is a node to be.
        return f"node/{self.name}"

    @property
    def trace_label(self) -> str:
        return f"nodeclaim/{self.name}"

    def resource_slices(self) -> dict[str, list[ResourceSliceTemplate]]:
        return {info.name: info.it.resource_slice_templates for info in self.candidates}

    def instance_type_requirements(self, name: str) -> Requirements | None:
        for info in self.candidates:
            if info.name == name:
                return info.requirements
        return None

    def target_json(self) -> dict:
        return {"kind": "NodeClaim", "name": self.name, "new": True}

    # --- CanAdd ------------------------------------------------------------------------------

    def can_add(
        self, pod: PodData, state: RunState, quick: bool = False, shape: tuple | None = None
    ) -> NodeClaimDecision | Refusal:
        """Whether this NodeClaim of the run can take the pod. ``quick``: a refusal comes
        without its words (``deferred``: they are built if the pod fails everywhere). With
        ``shape`` (the pod's, see RefusalCache.shape) a refusal in an unchanged state is
        reused."""
        allocator = state.allocator
        allocator.last_funnels = []
        taint = untolerated_taint(pod.pod.tolerations, self.taints)
        if taint is not None:
            reason = f"did not tolerate taint {format_taint(taint)}"
            return Refusal(
                state.refused(pod.trace_node, self.trace_label, "taint", reason), "taint"
            )
        cache = state.cache
        key = None
        if quick and shape is not None:
            key = (self.id, shape)
            lasting = self._lasting(pod, state)
            if lasting is not None and lasting in cache.lasting_bounds:
                return BOUND_REFUSAL
            nc_version = cache.nodeclaim_version(self.id)
            hit = cache.nodeclaim_refusal(key, self.id)
            if hit is not None:
                allocator.dfs_nodes += hit.dfs_nodes
                if hit.validated and not pod.outcome.validated:
                    cache.mark_validated(pod.outcome)
                return Refusal(hit.reason, deferred=hit.deferred, unfit=hit.unfit)
            nodes = allocator.dfs_nodes
            validated = pod.outcome.validated
        node = state.target_trace(pod.trace_node, self.trace_label)
        plan = self.plan(pod, state, node, quick=quick)
        if isinstance(plan, Refusal):
            if key is not None:
                cache.remember_nodeclaim_refusal(
                    key,
                    nc_version,
                    plan,
                    allocator.dfs_nodes - nodes,
                    pod.outcome.validated and not validated,
                )
            state.trace.set(node, "failed", plan.code, plan.reason)
            if not plan.deferred and not plan.funnels:
                plan.funnels = [(self.reason_target, f, None) for f in allocator.last_funnels]
            return plan
        state.trace.set(node, "ok", "allocated")
        return NodeClaimDecision(self, plan.result, plan.requirements, plan.dra_resources, plan)

    def explain(self, pod: PodData, state: RunState) -> Refusal:
        """The words and funnels of a refusal found quickly, asked again in full in the same
        state (nothing was committed since)."""
        state.allocator.last_funnels = []
        plan = self.plan(pod, state, -1)
        if not isinstance(plan, Refusal):
            return Refusal("")  # cannot happen: refused in this very state
        if not plan.funnels:  # an Allocate refusal carries its own (maybe remembered)
            plan.funnels = [(self.reason_target, f, None) for f in state.allocator.last_funnels]
        return plan

    def plan(
        self,
        pod: PodData,
        state: RunState,
        trace_node: int,
        *,
        quick: bool = False,
        candidates: list[InstanceTypeInfo] | None = None,
        requests: Resources | None = None,
        claims: list[ResourceClaim] | None = None,
    ) -> Plan | Refusal:
        """Karpenter's NodeClaim.CanAdd with the DRA steps of Constraint Propagation.

        ``candidates``, ``requests``, ``claims``: for one group of instance types serving the
        pod's extended resources alike (``_plan_extended``); by default the NodeClaim's
        candidates, the pod's requests and its claims. ``quick``: Allocate first runs without
        building its refusal's words; a refusal is ``deferred``; a success is the result
        (Allocate words the reasons of the instance types it refused, as a full run gives them).
        """
        if candidates is None:
            candidates = self.candidates
        if requests is None:
            requests = pod.requests
        extended = pod.extended
        if extended is not None and claims is None and candidates:
            from allocator.features.extendedresources import instance_type_groups

            groups = instance_type_groups(extended, candidates)
            if len(groups) > 1 or groups[0][0]:
                return self._plan_extended(groups, pod, state, trace_node)
        if claims is None:
            claims = pod.claims
        term, reason = first_compatible_term(self.requirements, pod.terms, WELL_KNOWN_LABELS)
        if term is None:
            return Refusal(f"incompatible requirements, {reason}", "requirements")
        if pod.host_ports:
            conflict = self._port_conflict(pod)
            if conflict is not None:
                return Refusal(f"checking host port usage, {conflict}", "host-ports")
        reqs = self.requirements.copy()
        reqs.add(term)
        if not pod.volume_requirements:
            return self._plan_with(
                pod, state, trace_node, quick, candidates, requests, claims, term, reqs
            )
        # Karpenter's tryVolumeAlternative: each way the pod's volumes could be placed, in turn.
        refusal = None
        for volume in pod.volume_requirements:
            problem = reqs.compatible(volume.requirements, allow_undefined=WELL_KNOWN_LABELS)
            if problem is not None:
                refusal = Refusal(
                    f"incompatible volume requirements, {problem} ({volume.describe()})",
                    "volumes",
                )
                continue
            with_volume = reqs.copy()
            with_volume.add(volume.requirements)
            found = self._plan_with(
                pod, state, trace_node, quick, candidates, requests, claims, term, with_volume
            )
            if not isinstance(found, Refusal):
                return found
            refusal = found
        return refusal

    def _plan_with(
        self,
        pod: PodData,
        state: RunState,
        trace_node: int,
        quick: bool,
        candidates: list[InstanceTypeInfo],
        requests: Resources,
        claims: list[ResourceClaim],
        term: Requirements,
        reqs: Requirements,
    ) -> Plan | Refusal:
        """``plan`` once the NodeClaim's requirements hold the pod's term (and volumes)."""
        if not claims:
            reqs, refused = _with_topology(pod, state, self.taints, reqs, quick)
            if refused is not None:
                return refused
        total = merged(self.requests, requests)
        groups = self._open_groups(pod)
        # One group for all of the NodePool's instance types (no DaemonSet depends on them).
        whole = len(groups) == 1 and len(self.daemon_groups) == 1
        stages: list[tuple] = []
        recorded = state.cache.explain_recorded
        filtered = _filter(
            candidates,
            reqs,
            total,
            groups,
            state.filter_memo,
            stages,
            whole,
            count=not quick or recorded,
        )
        if not filtered.remaining:
            unfit = _no_instance_type(total, reqs, filtered, groups, state)
            if quick:  # worded only if the pod fails everywhere
                kept = unfit if recorded else None
                return Refusal("", "instance-types", deferred=True, unfit=kept)
            return Refusal(unfit.words(), "instance-types")
        if not claims:
            return Plan(reqs, filtered.remaining, total, None, {}, term=term, stages=stages)
        probe = Probe(self.id, self.node_pool, reqs, filtered.remaining)
        if quick:
            if self._count_bound_refuses(probe, pod, state, claims):
                # Allocate would refuse every instance type at its count stage (no DFS node).
                return BOUND_REFUSAL
            # A success found without words is the one found with them (Allocate words the
            # instance types it refused then): it is not run again.
            result = self._quick_allocate(probe, pod, state, term, claims)
            if isinstance(result, Refusal):
                return result
        else:
            found = self._allocate_in_words(probe, pod, state, term, claims, trace_node)
            if isinstance(found, Refusal):
                return found
            result = found
        state.cache.mark_validated(pod.outcome)
        allowed = set(result.instance_types)
        kept = [info for info in filtered.remaining if info.name in allowed]
        if not kept:
            return Refusal(
                explain.dra_reason("no instance type can satisfy the allocation"),
                "no-instance-type",
                reach=None,
            )
        # Requirement tightening, then the FULL instance type filter again (design:
        # Constraint Propagation): zones, offerings and resources may all change.
        tightened = reqs.copy()
        tightened.add(result.requirements)
        dra = dra_node_resources(result)
        problem = pod_level_problem(pod.pod, result)
        if problem is not None:
            return Refusal(explain.dra_reason(problem), "node-resources", reach=None)
        tightened, refused = _with_topology(pod, state, self.taints, tightened, quick)
        if refused is not None:
            return refused
        stages.append((DRA_STAGE, filtered.remaining, result, kept))
        refiltered = _filter(
            kept,
            tightened,
            merged(total, dra),
            groups,
            state.filter_memo,
            stages,
            whole,
            count=not quick,
        )
        if not refiltered.remaining:
            if quick:
                return Refusal("", "instance-types", deferred=True, reach=None)
            return Refusal(
                explain.dra_reason(
                    _no_instance_type(
                        merged(total, dra), tightened, refiltered, groups, state
                    ).words()
                ),
                "instance-types",
                reach=None,
            )
        return Plan(
            tightened,
            refiltered.remaining,
            merged(total, dra),
            result,
            dra,
            claims,
            term=term,
            stages=stages,
        )

    def _plan_extended(
        self, groups, pod: PodData, state: RunState, trace_node: int
    ) -> Plan | Refusal:
        """DRAExtendedResource on a NodeClaim whose instance types offer some of the pod's
        extended resources natively: each group of instance types offering the same ones is
        planned with those counted against capacity and a claim for the rest; groups are tried
        cheapest offering first, the first that takes the pod wins (the NodeClaim keeps only
        its instance types); when none does, the first group's refusal is reported."""
        from allocator.scheduling.fit import cheapest_offering

        extended = pod.extended

        def price(group) -> float:
            prices = [cheapest_offering(info, self.requirements) for info in group[1]]
            return min((p for p in prices if p is not None), default=float("inf"))

        first: Refusal | None = None
        ordered = sorted(groups, key=price)
        for native, infos in ordered:
            plan = self.plan(
                pod,
                state,
                trace_node,
                candidates=infos,
                requests=merged(pod.requests, extended.native_requests(native)),
                claims=extended.claims(pod.claims, native),
            )
            if isinstance(plan, Refusal):
                first = first or plan
                continue
            from allocator.scheduling.report import EXTENDED_STAGE

            dropped = [i for other, group in ordered if other != native for i in group]
            shown = ", ".join(sorted(extended.resources))
            how = "natively" if native else "through DRA"
            message = (
                f"serves {shown} differently: the NodeClaim kept the instance types that serve "
                f"it {how} (cheapest offering first)"
            )
            plan.stages.insert(0, (EXTENDED_STAGE, dropped, message))
            return plan
        return first

    def _lasting(self, pod: PodData, state: RunState) -> tuple | None:
        """The key under which this NodeClaim's device-count bound, once it refuses every one
        of its instance types for the pod's claims, refuses pods with claims of the same
        specs for as long as the NodeClaim lives: a NodeClaim only tightens (fewer instance
        types, more requests and held devices), so every part of the bound holds again.

        Only its instance type filter comes before the bound for such a pod, and where it
        would refuse first the refusal is the same to the run: deferred, at no DFS node, its
        words built by asking again in full if the pod fails everywhere. So only for pods
        that nothing else refuses first (``fast``: no terms, host ports, volumes or
        topologies; no extended resources), validated already (the bound marks nothing new),
        with claims whose specs are known (``funnel_key``). None otherwise."""
        specs = lasting_specs(pod, state)
        return (self.id, specs) if specs is not None else None

    def refused_lastingly(self, specs: tuple, state: RunState) -> bool:
        """What ``can_add`` answers a quick attempt of a pod with ``specs`` (its
        ``lasting_specs``) without asking it: its device-count bound refuses for as long as
        it lives (``_lasting``), and no taint of its refuses first. The run's pods of one
        GPU model ask every NodeClaim of another model this, pod after pod."""
        return not self.taints and (self.id, specs) in state.cache.lasting_bounds

    def _count_bound_refuses(
        self, probe: Probe, pod: PodData, state: RunState, claims: list[ResourceClaim]
    ) -> bool:
        """The device-count bound of a NodeClaim: when NodeClaims reach no in-cluster device, a
        request for more devices than an instance type has template devices left on this
        NodeClaim is refused by Allocate's count stage there. True when that holds for every
        candidate; only for pods whose claim specs passed Request Validation (so Allocate
        would get that far) and are simply unallocated. A refusal marks the pod validated,
        as Allocate's would, and lasts where it holds for every one of the NodeClaim's own
        instance types (``_lasting``)."""
        cache = state.cache
        if cache.nodeclaims_reach_cluster or not cache.is_validated(pod.outcome):
            return False
        need = largest_count(claims, state)
        if not need:
            return False
        held = state.allocator.tracker.templates.get(probe.id, {})
        # The most any of the NodeClaim's own instance types has left bounds those of the
        # probe (some of them): worked out once per NodeClaim state.
        most = cache.most_templates_left(self.id, self.candidates, held)
        if most is not None and most < need:
            every = True
        elif self._bound_refuses(probe.candidates, claims, state, need, held):
            every = probe.candidates is self.candidates
        else:
            return False
        cache.mark_validated(pod.outcome)
        lasting = self._lasting(pod, state)
        if lasting is not None and (
            every or self._bound_refuses(self.candidates, claims, state, need, held)
        ):
            cache.lasting_bounds.add(lasting)
        return True

    def _bound_refuses(
        self,
        candidates: list[InstanceTypeInfo],
        claims: list[ResourceClaim],
        state: RunState,
        need: int,
        held: dict[str, set],
    ) -> bool:
        """The bound on each of ``candidates``: fewer template devices left than ``need``
        (``held``: those taken, per instance type), or fewer than a request counts that its
        selectors accept."""
        cache = state.cache
        for info in candidates:
            total = cache.template_total(info)
            if total is not None and total - len(held.get(info.name, ())) < need:
                continue
            if not _selectors_refuse(info, claims, state):
                return False
        return True

    def _allocate_key(
        self,
        probe: Probe,
        pod: PodData,
        state: RunState,
        term: Requirements,
        claims: list[ResourceClaim],
    ) -> tuple | None:
        """What an Allocate refusal on this NodeClaim read, as a key to remember it by (the
        NodeClaim's and the cluster's versions are checked apart): the claims' specs, the
        instance types left to try, and the requirements, which are the NodeClaim's own when
        the pod adds no term and no volume requirement. None: not to be remembered."""
        cache = state.cache
        if not cache.nodeclaim_caches or len(term) or pod.volume_requirements:
            return None
        if not cache.knows_nodeclaim(probe.id):
            return None
        specs = tuple(cache.funnel_key(c) for c in claims)
        if None in specs or any(state.claim_state(c) != "unallocated" for c in claims):
            return None
        return (probe.id, specs, tuple(probe.instance_types))

    def _allocate_in_words(
        self,
        probe: Probe,
        pod: PodData,
        state: RunState,
        term: Requirements,
        claims: list[ResourceClaim],
        trace_node: int,
    ):
        """Allocate with the words of its refusal: its result, or a Refusal with its funnels
        (``funnels`` set). An untraced refusal's words are remembered with the refusal (see
        ``_quick_allocate``) and are another pod's too, with its own claims named: the
        failed pods of one workload ask every NodeClaim the same."""
        cache = state.cache
        traced = state.trace.enabled
        key = None if traced else self._allocate_key(probe, pod, state, term, claims)
        claim_keys = [c.key for c in claims]
        hit = cache.allocate_refusal(key, probe.id) if key is not None else None
        if hit is not None and hit.explained is not None:
            if hit.code != "validation":
                cache.mark_validated(pod.outcome)
            return hit.explained.for_claims(claim_keys, hit.code)
        # Failed pods of one workload but of other sizes keep some of the NodeClaim's instance
        # types each: the words over all of them, narrowed, are theirs.
        worded = self._words_over_all(probe, pod, state, claims, key)
        if worded is not None and worded.error is not None:
            kept = key[2] if key is not None else ()
            if kept not in worded.narrowed:
                names = dict(zip(claim_keys, worded.claim_keys, strict=True))
                err = narrowed(
                    worded.error,
                    probe.instance_types,
                    partial(self._words_on_one, worded, probe, pod, state, claims, names),
                )
                worded.narrowed[kept] = (
                    self._explained(err, worded.claim_keys) if err is not None else None
                )
            explained = worded.narrowed[kept]
            if explained is not None:
                cache.mark_validated(pod.outcome)
                return explained.for_claims(claim_keys, worded.error.code)
        nc_version = cache.nodeclaim_version(probe.id)
        nodes = state.allocator.dfs_nodes
        try:
            return state.allocator.allocate(
                probe,
                claims,
                trace=state.trace,
                trace_parent=trace_node if trace_node >= 0 else None,
                pod=pod.pod,
            )
        except AllocationError as err:
            cache.note_validation(pod.outcome, err)
            explained = self._explained(err, claim_keys)
            refusal = explained.for_claims(claim_keys, err.code)
            if (
                key is not None
                and err.reach is not None
                and ExplainedRefusal.shareable(refusal, pod.pod.key, claim_keys)
            ):
                if hit is not None:
                    hit.explained = explained
                else:
                    cache.remember_allocate_refusal(
                        key,
                        nc_version,
                        err.reach,
                        err.code,
                        state.allocator.dfs_nodes - nodes,
                        explained,
                    )
            return refusal

    def _words_over_all(
        self,
        probe: Probe,
        pod: PodData,
        state: RunState,
        claims: list[ResourceClaim],
        key: tuple | None,
    ) -> WordedRefusal | None:
        """Allocate's answer in words over all the NodeClaim's instance types (the probe's
        requirements are its own: ``key`` is not None), once per version of the NodeClaim and
        shared by NodeClaims alike when it names nothing of this one's (``_alike_key``);
        None when not to be asked: traced, not remembered, or where NodeClaims reach
        in-cluster pools (fewer instance types may reach fewer: ``narrowed`` refuses)."""
        cache = state.cache
        if key is None or cache.nodeclaims_reach_cluster:
            return None
        known = cache.worded(key, probe.id)
        if known is not None:
            return known
        wide = Probe(self.id, self.node_pool, probe.requirements, self.candidates)
        wide_key = (key[0], key[1], tuple(wide.instance_types))
        nc_version = cache.nodeclaim_version(probe.id)
        alike = self._alike_key(key, probe, state)
        shared = cache.alike_words(alike) if alike is not None else None
        if shared is not None:
            return cache.remember_worded(wide_key, nc_version, shared.error, shared.claim_keys)
        claim_keys = [c.key for c in claims]
        error = _refusal_aside(wide, claims, pod, state)
        if error is not None and (
            not error.refused
            or error.reach is None
            or not ExplainedRefusal.shareable(
                self._explained(error, claim_keys).for_claims(claim_keys),
                pod.pod.key,
                claim_keys,
            )
        ):
            error = None  # not to be narrowed: each pod's own Allocate words its refusal
        worded = cache.remember_worded(wide_key, nc_version, error, claim_keys)
        if (
            alike is not None
            and error is not None
            and not names_any(
                [str(error), *(words for _, words in error.refused)],
                error.funnels,
                {self.id, self.name, *state.allocator.claims_on(self.id)},
            )
        ):
            cache.remember_alike_words(alike, worded)
        return worded

    def _alike_key(self, key: tuple, probe: Probe, state: RunState) -> tuple | None:
        """What the words over all of a NodeClaim's instance types read of it, for NodeClaims
        alike to share them: the claim specs, its NodePool, its instance types, the template
        devices it holds on each (the same devices on every NodeClaim of that type) and its
        requirements but its own hostname. None where NodeClaims holding the same devices may
        still differ: counters or capacity shares in use on templates, DeviceTaintRules."""
        features = state.allocator.features
        if features is not None and (
            features.taints.rules
            or features.counters.template_committed
            or features.capacity.shares
        ):
            return None
        held = state.allocator.tracker.templates.get(self.id, {})
        names = tuple(info.name for info in self.candidates)
        return (
            key[1],
            self.node_pool,
            names,
            tuple(frozenset(held.get(name, ())) for name in names),
            tuple(item for item in probe.requirements.content_key() if item[0] != HOSTNAME),
        )

    def _words_on_one(
        self,
        worded: WordedRefusal,
        probe: Probe,
        pod: PodData,
        state: RunState,
        claims: list[ResourceClaim],
        names: dict[str, str],
        instance_type: str,
    ) -> AllocationError | None:
        """Allocate's refusal in words on ``instance_type`` alone (None if it does not
        refuse), with the claims named as ``names`` maps them (the claims of the pod whose
        words it joins); once per ``worded``."""
        if instance_type not in worded.alone:
            one = [info for info in self.candidates if info.name == instance_type][:1]
            alone = Probe(self.id, self.node_pool, probe.requirements, one)
            err = _refusal_aside(alone, claims, pod, state)
            worded.alone[instance_type] = (
                None
                if err is None
                else AllocationError(
                    str(err),
                    err.code,
                    funnels=[f.for_claim(names.get(f.claim, f.claim)) for f in err.funnels],
                    reach=err.reach,
                    refused=tuple((it, renamed(words, names)) for it, words in err.refused),
                )
            )
        return worded.alone[instance_type]

    def _explained(self, err: AllocationError, claim_keys: list[str]) -> ExplainedRefusal:
        """An Allocate refusal on this NodeClaim in words, naming the claims ``claim_keys``."""
        entries = [(self.reason_target, f, None) for f in err.funnels]
        return ExplainedRefusal(claim_keys, explain.dra_reason(str(err)), entries)

    def _quick_allocate(
        self,
        probe: Probe,
        pod: PodData,
        state: RunState,
        term: Requirements,
        claims: list[ResourceClaim],
    ):
        """Allocate without words: its result, or a deferred Refusal. A refusal is reused
        while nothing it read changed: the NodeClaim (its version), in-cluster devices (the
        cluster version), the claims' specs, the requirements and the instance types left
        to try (``_allocate_key``)."""
        allocator = state.allocator
        cache = state.cache
        key = self._allocate_key(probe, pod, state, term, claims)
        if key is not None:
            nc_version = cache.nodeclaim_version(probe.id)
            hit = cache.allocate_refusal(key, probe.id)
            if hit is not None:
                allocator.dfs_nodes += hit.dfs_nodes
                if hit.code != "validation":
                    cache.mark_validated(pod.outcome)
                return Refusal("", hit.code, deferred=True, reach=hit.reach)
        nodes = allocator.dfs_nodes
        try:
            return allocator.allocate(
                probe, claims, pod=pod.pod, explain=False, word_refusals=state.committing
            )
        except AllocationError as err:
            cache.note_validation(pod.outcome, err)
            code = err.code
            # Only a finished search's refusal is reused (not a validation error or a timeout).
            reach = err.reach
            if key is not None and reach is not None:
                cache.remember_allocate_refusal(
                    key, nc_version, reach, code, allocator.dfs_nodes - nodes
                )
            return Refusal("", code, deferred=True, reach=reach)

    def _port_conflict(self, pod: PodData) -> HostPortConflict | None:
        """The pod's host port conflict when it has one on every instance type the NodeClaim
        may become (the first group's); None when some group leaves its ports free."""
        first = None
        for group in self.daemon_groups:
            conflict = group.host_ports.conflicts(pod.pod, pod.host_ports)
            if conflict is None:
                return None
            first = first or conflict
        return first

    def _open_groups(self, pod: PodData) -> tuple[DaemonOverheadGroup, ...]:
        """The groups whose host ports the pod can bind (Karpenter skips the others)."""
        if not pod.host_ports:
            return self.daemon_groups
        return tuple(
            g for g in self.daemon_groups if g.host_ports.conflicts(pod.pod, pod.host_ports) is None
        )

    # --- Add ---------------------------------------------------------------------------------

    def add(self, pod: PodData, decision: NodeClaimDecision, state: RunState) -> None:
        """Karpenter's NodeClaim.Add: commit, then release the instance types it lost."""
        plan = decision.plan
        stages = plan.stages
        if plan.result is None and len(plan.candidates) == len(self.candidates):
            released: list[str] = []  # a plan keeps a part of the candidates: here all of them
        elif (
            plan.result is None
            and len(stages) == 1
            and stages[0][0] == FILTER_STAGE
            and stages[0][1] is self.candidates
            and stages[0][5] is not None
        ):
            # One filter of its own candidates, which knew what it dropped.
            released = sorted(info.name for info in stages[0][5])
        else:
            before = set(self.instance_types)
            if plan.result is not None:
                before.update(plan.result.instance_types)
            released = sorted(before - set(map(info_name, plan.candidates)))
        if plan.result is not None:
            state.commit(plan.result, plan.claims)
        self.requirements = plan.requirements
        self.candidates = plan.candidates
        self.requests = plan.requests
        state.cache.nodeclaim_changed(self.id)
        for name in released:
            state.allocator.release_instance_type(self.id, name)
            state.cache.released(self.id)
        state.prunes.applied(self.id, plan.term, plan.stages)
        self.pods.append(pod.outcome.pod)
        if pod.host_ports:
            for group in self.daemon_groups:
                group.host_ports.add(pod.pod, pod.host_ports)
        state.topology.register(HOSTNAME, self.name)
        state.topology.record(pod.pod, self.taints, plan.requirements)


@record(eq=False)
class Probe:
    """What a NodeClaim would look like with one more pod: handed to Allocate before Add
    (Karpenter's draNodeClaim). Allocate must see the tightened requirements and the
    re-filtered instance types, but the NodeClaim itself changes only once the placement is
    decided."""

    id: str
    node_pool: str | None
    requirements: Requirements
    candidates: list[InstanceTypeInfo]
    node_name: None = None
    _by_name: dict[str, Requirements] | None = field(default=None, repr=False)

    @property
    def instance_types(self) -> list[str]:
        return list(map(info_name, self.candidates))

    def resource_slices(self) -> dict[str, list[ResourceSliceTemplate]]:
        return {info.name: info.it.resource_slice_templates for info in self.candidates}

    def instance_type_requirements(self, name: str) -> Requirements | None:
        # Allocate asks for every candidate: indexed once (the first of a name wins).
        by_name = self._by_name
        if by_name is None:
            by_name = self._by_name = {}
            for info in self.candidates:
                by_name.setdefault(info.name, info.requirements)
        return by_name.get(name)


def lasting_specs(pod: PodData, state: RunState) -> tuple | None:
    """The pod's part of ``NodeClaim._lasting``'s key (the same on every NodeClaim): its
    claims' specs, or None where no bound may last for it."""
    cache = state.cache
    if not pod.fast or pod.extended is not None or not pod.outcome.validated:
        return None
    claims = pod.claims
    if not cache.specs_validated(claims):
        return None
    specs = tuple(cache.funnel_key(c) for c in claims)
    if None in specs:
        return None
    return specs


def _refusal_aside(
    probe: Probe, claims: list[ResourceClaim], pod: PodData, state: RunState
) -> AllocationError | None:
    """Allocate's refusal in words on ``probe`` (None if it does not refuse), asked aside
    from the pod's own: it counts no DFS node and leaves no funnels as the pod's, and the
    error is kept without the frames it was raised through."""
    allocator = state.allocator
    nodes = allocator.dfs_nodes
    try:
        allocator.allocate(probe, claims, pod=pod.pod)
    except AllocationError as err:
        return err.with_traceback(None)
    finally:
        allocator.dfs_nodes = nodes
        allocator.last_funnels = []
    return None


def _with_topology(
    pod: PodData, state: RunState, taints: list[Taint], reqs: Requirements, quick: bool
) -> tuple[Requirements, Refusal | None]:
    """The NodeClaim's requirements narrowed by the pod's topology (last: it may pick one
    domain of several), or the topology's refusal (``quick``: without its words, ``deferred``
    until the pod fails everywhere)."""
    topology = state.topology
    if topology.empty:
        return reqs, None
    try:
        narrowed = topology.add_requirements(pod.pod, taints, pod.strict, reqs, explain=not quick)
    except TopologyError as err:
        # Domain counts change with every placement: never a refusal to remember.
        if quick:  # not even the error: it holds the frames it was raised through
            return reqs, Refusal("", "topology", deferred=True, reach=None)
        return reqs, Refusal(err.explained(), "topology", reach=None, topology=err)
    if narrowed is None:
        return reqs, None
    problem = reqs.compatible(narrowed, WELL_KNOWN_LABELS)
    if problem is not None:
        return reqs, Refusal(problem, "topology", reach=None)
    reqs = reqs.copy()
    reqs.add(narrowed)
    return reqs, None


def least_overhead(groups: tuple[DaemonOverheadGroup, ...], instance_types) -> Resources:
    """Karpenter's addDaemonRequests: per resource, the least overhead of the groups that hold
    one of ``instance_types`` (none: no overhead)."""
    names = set(instance_types)
    out: Resources = {}
    for group in groups:
        if names.isdisjoint(group.instance_types):
            continue
        if not out:
            # As Karpenter's: a group without DaemonSet pods never lowers the least.
            out = dict(group.overhead)
            continue
        # Karpenter's MinResources: per resource, the least of those that state it.
        for name, value in group.overhead.items():
            out[name] = min(out.get(name, value), value)
    return out


def _filter(
    candidates: list[InstanceTypeInfo],
    reqs: Requirements,
    requests: Resources,
    groups: tuple[DaemonOverheadGroup, ...],
    memo: FilterMemo | None,
    stages: list[tuple],
    whole: bool = False,
    *,
    count: bool = True,
) -> FilterOutcome:
    """Karpenter's filterInstanceTypesByRequirements over the DaemonSet overhead groups: each
    group's instance types must also hold its DaemonSet pods' requests; minValues is checked on
    what all groups keep. ``whole``: the one group holds every candidate (no DaemonSet depends on
    the instance type), one plain filter. Appends each group's FILTER_STAGE to ``stages``."""
    if whole:
        total = merged(requests, groups[0].overhead)
        outcome = filter_instance_types(candidates, reqs, total, memo, count=count)
        stages.append((FILTER_STAGE, candidates, reqs, total, outcome.remaining, outcome.dropped))
        return outcome
    outcome = FilterOutcome([])
    kept: list[InstanceTypeInfo] = []
    for group in groups:
        subset = [c for c in candidates if c.name in group.instance_types]
        if not subset:
            continue
        total = merged(requests, group.overhead)
        found = filter_instance_types(subset, reqs, total, memo, count=count, min_values=False)
        stages.append((FILTER_STAGE, subset, reqs, total, found.remaining, found.dropped))
        outcome.requirements_failed += found.requirements_failed
        outcome.resources_failed += found.resources_failed
        outcome.offerings_failed += found.offerings_failed
        kept += found.remaining
    # In try order again across the groups: cheapest allowed offering, then name.
    kept.sort(key=lambda info: (cheapest_offering(info, reqs), info.name))
    if kept:
        short = min_values_shortfall(kept, reqs)
        if short:
            outcome.min_values_short = short
            kept = []
    outcome.remaining = kept
    return outcome


def _no_instance_type(
    requests: Resources,
    reqs: Requirements,
    filtered: FilterOutcome,
    groups: tuple[DaemonOverheadGroup, ...],
    state: RunState,
) -> NoInstanceType:
    """The filter's refusal as data (worded by ``words``)."""
    overheads = tuple(g.overhead for g in groups)
    return NoInstanceType(requests, reqs, filtered, overheads, state.cache.quantity_words)


def _selectors_refuse(info: InstanceTypeInfo, claims: list[ResourceClaim], state: RunState) -> bool:
    """Whether a request of ``claims`` asks for more devices by count than the instance
    type has template devices its selectors accept (a GPU model it does not have): Allocate's
    count stage refuses the instance type then, whatever the NodeClaim holds."""
    allocator = state.allocator
    templates = info.it.resource_slice_templates
    for claim in claims:
        for request in claim.spec.requests:
            # A count comes only for an ExactCount request (``exactly`` set).
            matching = allocator.template_matches(request, info.name, templates)
            if matching is not None and matching < request.exactly.count:
                return True
    return False


def largest_count(claims: list[ResourceClaim], state: RunState) -> int | None:
    """The most devices one request of ``claims`` asks for by count (ExactCount, not admin
    access): what the count bound of a NodeClaim compares with its template devices left.
    None when a claim is not simply unallocated (the bound does not hold); 0 when no request
    counts."""
    need = 0
    for claim in claims:
        if state.claim_state(claim) != "unallocated":
            return None
        for r in claim.spec.requests:
            ex = r.exactly
            if ex is not None and not ex.admin_access and ex.allocation_mode != "All":
                need = max(need, ex.count)
    return need
