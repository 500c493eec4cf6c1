"""Karpenter's provisioning scheduler (``scheduler.go``; docs/SIMULATION.md; design:
Integration with Karpenter's Scheduler).

``solve`` takes the pending pods in queue order and retries the failed ones, pass after pass,
while the previous pass placed a pod. One attempt of one pod asks, in order, the existing nodes
(``existingnode.py``), the NodeClaims of this run, fewest pods first (``nodeclaim.py``), then a
new NodeClaim of each NodePool by weight (``nodeclaimtemplate.py``). Each target first decides
(``can_add``: nothing changes) and the first that can take the pod commits it (``add``). A fix
suggestion's ``trial`` is a decision without a commit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import partial
from operator import attrgetter
from typing import TypeVar

from allocator.errors import AllocationError
from allocator.funnel import Funnel, trace_target_key
from allocator.model import Pod, ResourceClaim
from allocator.scheduling.decision import Decision, NodeClaimDecision, Refusal
from allocator.scheduling.devicecount import claims_minimum
from allocator.scheduling.existingnode import ExistingNode
from allocator.scheduling.explain import summarize, topology_kind
from allocator.scheduling.finalization import MAX_INSTANCE_TYPES
from allocator.scheduling.fit import (
    NoInstanceType,
    min_values_message,
    min_values_shortfall,
    pod_requests,
)
from allocator.scheduling.gosort import slice_sort_by_key
from allocator.scheduling.hostports import host_ports
from allocator.scheduling.initialization import PodClaims
from allocator.scheduling.lasting import LastingRefusals
from allocator.scheduling.nodeclaim import BOUND_REFUSAL, NodeClaim, lasting_specs
from allocator.scheduling.nodeclaimtemplate import NodeClaimNames, NodeClaimTemplate
from allocator.scheduling.poddata import PodData, PodOutcome
from allocator.scheduling.preferences import (
    Preferences,
    Relaxation,
    pod_requirements,
    strict_pod_requirements,
)
from allocator.scheduling.refusalcache import ExplainedRefusal
from allocator.scheduling.runstate import RunState
from allocator.scheduling.trialtargets import TrialTargets
from allocator.scheduling.untaken import UntakenTargets, not_taken
from allocator.trace import NULL_TRACE

T = TypeVar("T")


class Scheduler:
    def __init__(
        self,
        *,
        state: RunState,
        existing: list[ExistingNode],
        templates: list[NodeClaimTemplate],
        names: NodeClaimNames,
        preferences: Preferences,
    ) -> None:
        self.state = state
        self.preferences = preferences
        self.existing = existing  # initialized first, then the others, each by name
        self.templates = templates  # by weight descending, then name
        self.names = names
        self.node_claims: list[NodeClaim] = []  # created in this run, in creation order
        # The same, in the order Karpenter's in-place sorts by pod count leave them, and
        # whether that order still holds (a placement may unsort it).
        self._by_pods: list[NodeClaim] = []
        self._by_pods_counts: list[int] = []  # their pod counts, in the same order
        self._by_pods_sorted = True
        # The targets a pod's hostname anti-affinities leave it (``_hosts_taken``), kept
        # from pod to pod.
        self._untaken = UntakenTargets()
        # Pod shape -> the cache's epoch when every existing node refused a pod of it.
        self._refused_by_all: dict[tuple, int] = {}
        # Per pod shape, the existing nodes not known to refuse it for good (lasting.py).
        self._lasting = LastingRefusals()

    def claim_state(self, claim: ResourceClaim) -> str:
        return self.state.claim_state(claim)

    # --- Solve -------------------------------------------------------------------------------

    def solve(
        self,
        pods: list[Pod],
        pod_claims: dict[str, PodClaims],
        progress: Callable[[int, int], None] | None = None,
    ) -> list[PodOutcome]:
        outcomes = [PodOutcome(pod, pod_claims[pod.key]) for pod in pods]
        cache = self.state.cache
        queue = list(outcomes)
        done = 0
        while queue:
            failed: list[PodOutcome] = []
            placed_any = False
            total = done + len(queue)
            for outcome in queue:
                if cache.unchanged(outcome, self.state.trace.enabled):
                    # Nothing this pod's attempt read has changed since: the retry would
                    # repeat it exactly (same reasons, same DFS work), so it is not run.
                    self.state.allocator.dfs_nodes += outcome.dfs_nodes
                    failed.append(outcome)
                # A pod failing after a placement of this pass is tried again in the next:
                # only then are its words built (its failure here is not its last).
                elif self._schedule(outcome, replay=True, explain=not placed_any):
                    placed_any = True
                else:
                    failed.append(outcome)
                done += 1
                if progress is not None:
                    progress(done, total)
            if not placed_any or not failed:
                break
            queue = failed  # Karpenter retries while the previous pass made progress
        self._truncate_instance_types(outcomes)
        return outcomes

    def _truncate_instance_types(self, outcomes: list[PodOutcome]) -> None:
        """Karpenter's Results.TruncateInstanceTypes: a NodeClaim launches with its cheapest
        MAX_INSTANCE_TYPES instance types; when those no longer meet its requirements'
        minValues, the NodeClaim is not launched and its pods are not scheduled."""
        dropped: dict[str, str] = {}  # NodeClaim name -> why
        for nc in self.node_claims:
            if len(nc.candidates) <= MAX_INSTANCE_TYPES:
                continue
            # The candidates are in the order of their cheapest allowed offering already.
            kept = nc.candidates[:MAX_INSTANCE_TYPES]
            short = min_values_shortfall(kept, nc.requirements)
            if short:
                dropped[nc.name] = (
                    "pod didn't schedule because NodePool couldn't meet minValues requirements, "
                    f"validating minValues, {min_values_message(short)}"
                )
            else:
                nc.candidates = kept
        if not dropped:
            return
        for outcome in outcomes:
            target = outcome.target
            if isinstance(target, NodeClaim) and target.name in dropped:
                outcome.scheduled = False
                outcome.target = None
                outcome.error = dropped[target.name]
                outcome.reasons = [(f"nodepool/{target.node_pool}", outcome.error)]
                outcome.reason_kinds = {}
        self.node_claims = [nc for nc in self.node_claims if nc.name not in dropped]

    def _schedule(self, outcome: PodOutcome, replay: bool = False, explain: bool = True) -> bool:
        """One attempt of one pod; ``replay`` (the loop's own passes only, never a trial) lets
        a pod of the same shape as one that failed in this same state take that result.
        ``explain`` False: a failure's words and funnels are not built (a traced run builds
        them all the same)."""
        state = self.state
        cache = state.cache
        start_nodes = state.allocator.dfs_nodes
        start_version = cache.state_version  # the attempt itself may change it (validation)
        start_validated = outcome.validated
        shape = self._shape(outcome.pod, outcome) if replay else None
        if shape is not None:
            seen = cache.seen_shape(shape)
            if seen is not None:
                cache.replay(outcome, seen, state.claim_state)
                state.allocator.dfs_nodes += seen.dfs_nodes
                outcome.seen_version = start_version
                outcome.seen_validated = start_validated
                return False
        placed = self._attempt(outcome, explain or state.trace.enabled)
        if not placed:
            outcome.seen_version = start_version
            outcome.seen_validated = start_validated
            outcome.dfs_nodes = state.allocator.dfs_nodes - start_nodes
            if shape is not None and outcome.explained:
                cache.remember_shape(shape, start_version, outcome)
        return placed

    def _attempt(self, outcome: PodOutcome, explain: bool = True) -> bool:
        """Karpenter's ``add``: place the pod on the first target that can take it."""
        state = self.state
        trace = state.trace
        pod = outcome.pod
        outcome.attempts += 1
        outcome.attempt = None
        outcome.reasons = []
        outcome.reason_kinds = {}
        outcome.funnel_log = []
        outcome.error = None
        outcome.explained = True
        claims = outcome.pod_claims.claims
        pod_node = trace.add(None, "pod", pod.key) if trace.enabled else -1
        if outcome.pod_claims.error is not None:
            outcome.error = outcome.pod_claims.error
            outcome.funnel_log = [("", f, None) for f in _claim_error_funnels(outcome)]
            trace.set(pod_node, "failed", "claim", outcome.error)
            return False
        shared = state.shared_mapping_problem(outcome)
        if shared is not None:
            # Pod-level, like kube-scheduler's PreFilter: no node can change it.
            outcome.error = shared
            outcome.claim_states = {c.key: state.claim_state(c) for c in claims}
            trace.set(pod_node, "failed", "node-resources", shared)
            return False
        decision, data, relaxed = self._try_schedule(outcome, pod_node, explain=explain)
        if trace.enabled:  # targets refused alike share one node, as in the result
            trace.group_targets(pod_node, trace_target_key)
        if decision is not None:
            outcome.relaxed = relaxed
            self._commit(data, decision)
            return True
        if relaxed:
            state.topology.update(pod)  # the pod's groups as written again, for its retries
        outcome.explained = explain
        outcome.error = summarize(outcome.reasons, outcome.reason_kinds)
        outcome.claim_states = {c.key: state.claim_state(c) for c in claims}
        trace.set(pod_node, "failed", "unschedulable", outcome.error)
        return False

    def _try_schedule(
        self, outcome: PodOutcome, pod_node: int, explain: bool, trial: bool = False
    ) -> tuple[Decision | None, PodData, list[Relaxation]]:
        """Karpenter's trySchedule: every preference held as required first, then dropped one
        at a time (Preferences.relax) until a target takes the pod or nothing is left to drop.
        The reasons and funnels of the last try are the pod's; only they are explained."""
        pod = outcome.pod
        relaxed: list[Relaxation] = []
        following = self.preferences.relax(pod)
        while True:
            outcome.reasons = []
            outcome.reason_kinds = {}
            outcome.funnel_log = []
            data = self._pod_data(outcome, pod_node, pod)
            decision = self._decide(data, explain=explain and following is None, trial=trial)
            if decision is not None or following is None:
                return decision, data, relaxed
            pod, relaxation = following
            relaxed.append(relaxation)
            self.state.topology.update(pod)
            following = self.preferences.relax(pod)

    def pod_data(self, pod: Pod, pod_claims: PodClaims) -> PodData:
        """What every target reads of ``pod`` in an (untraced) attempt starting now, every
        preference held as required."""
        return self._pod_data(PodOutcome(pod, pod_claims), -1, pod)

    def _pod_data(self, outcome: PodOutcome, pod_node: int, pod: Pod) -> PodData:
        """What every target reads of the pod (``pod``: as relaxed so far) in this try
        (Karpenter's updateCachedPodData)."""
        state = self.state
        requests = pod_requests(pod)
        extended = outcome.pod_claims.extended
        if extended is not None:
            # DRAExtendedResource: where DRA serves them, not counted against allocatable.
            requests = extended.without(requests)
        terms = [pod_requirements(pod)]
        claims = outcome.pod_claims.claims
        check_terms = bool(terms[0].keys())
        ports = host_ports(pod)
        volumes = state.volumes.volumes(pod)
        alternatives = state.volumes.alternatives(pod)
        return PodData(
            pod=pod,
            outcome=outcome,
            claims=claims,
            extended=extended,
            requests=requests,
            wanted=[(k, v) for k, v in requests.items() if v > 0],
            terms=terms,
            check_terms=check_terms,
            strict=strict_pod_requirements(pod),
            needed=claims_minimum(state.to_allocate(claims)) if claims else 0,
            specs=state.cache.specs(claims, state.claim_state),
            trace_node=pod_node,
            shape=state.cache.shape(pod, outcome, state.claim_state, state.trace.enabled),
            # Host ports, volumes and topologies refuse before devices do: no shortcut past them.
            fast=not (
                state.trace.enabled
                or check_terms
                or ports
                or volumes
                or alternatives
                or state.topology.constrains(pod)
            ),
            host_ports=ports,
            volumes=volumes,
            volume_requirements=alternatives,
        )

    def _try_shape(self, pod: PodData) -> tuple | None:
        """``_shape`` of this try's pod, from the shape its PodData worked out already."""
        return self._with_labels(pod.shape, pod.pod)

    def _shape(self, pod: Pod, outcome: PodOutcome) -> tuple | None:
        """What a pod's attempt reads (RefusalCache.shape; ``pod``: as relaxed so far)."""
        state = self.state
        shape = state.cache.shape(pod, outcome, state.claim_state, state.trace.enabled)
        return self._with_labels(shape, pod)

    def _with_labels(self, shape: tuple | None, pod: Pod) -> tuple | None:
        """With topology, a shape holds the pod's labels too (whether a topology selects it)."""
        if shape is not None and not self.state.topology.empty:
            shape = (*shape, tuple(sorted(pod.labels.items())))
        return shape

    # --- deciding: existing nodes, NodeClaims of the run, new NodeClaims ---------------------

    def _decide(self, pod: PodData, explain: bool, trial: bool = False) -> Decision | None:
        """The first target that can take the pod, or None with the pod's outcome holding a
        reason per target tried (and, with ``explain``, the words and funnels of every
        refusal that was found without them). A ``trial`` leaves the NodeClaims' order alone.
        Without ``explain``, targets refused outright by a hostname anti-affinity are passed
        over without a reason (``_hosts_taken``): nothing reads one then."""
        state = self.state
        cache = state.cache
        outcome = pod.outcome
        reasons = outcome.reasons
        funnels = outcome.funnel_log
        quick = cache.nodeclaim_caches and not state.trace.enabled
        taken = None if explain else self._hosts_taken(pod, quick)

        # Existing nodes. The device-count pre-check starts once the pod's claims passed
        # Request Validation (see RefusalCache.note_validation).
        counting = bool(pod.needed) and state.counter is not None
        bounds = None
        # An attempt that builds no words passes over the nodes that cannot have enough free
        # devices without asking them: a pod placed reads no reason of the nodes before its
        # own, and a failure without words is tried again with them (RefusalCache.unchanged).
        # A pod served natively by some nodes (DRAExtendedResource) needs fewer there; a
        # trace shows every node asked.
        needed = (
            pod.needed
            if counting
            and not explain
            and cache.enabled
            and not state.trace.enabled
            and pod.extended is None
            else 0
        )
        counted_out: list[tuple[int, ExistingNode, int]] = []  # + its trace node
        nodes: list[ExistingNode] = self.existing
        refused_by_all = self._refused_by_all_key(pod, trial) if needed else None
        if refused_by_all is not None and self._refused_by_all.get(refused_by_all) == cache.epoch:
            nodes = []  # they still refuse it (see _refused_by_all_key)
        # An attempt without words passes over the nodes that refused this shape for good.
        lasting_shape = (
            self._try_shape(pod)
            if not explain and not trial and taken is None and nodes and not state.trace.enabled
            else None
        )
        if lasting_shape is not None:
            nodes = self._lasting.left(lasting_shape, self.existing)
        searched_from = state.allocator.dfs_nodes
        asked = (
            not_taken(nodes, taken, _HOSTNAME)
            if trial
            else self._untaken.in_order(self.existing, nodes, taken, _HOSTNAME)
        )
        for node in asked:
            if bounds is None and counting and cache.is_validated(outcome):
                bounds = state.counter.bounds
            if needed and bounds is not None and bounds.get(node.id, needed) < needed:
                continue
            found = node.can_add(pod, state, bounds)
            if isinstance(found, Refusal):
                if lasting_shape is not None and found.lasting:
                    self._lasting.refused(lasting_shape, self.existing, node)
                reasons.append((node.reason_target, found.reason))
                if found.topology is not None:
                    outcome.reason_kinds[node.reason_target] = topology_kind(found.topology)
                if found.counted:
                    counted_out.append((len(funnels), node, found.trace_node))
                    funnels.append(None)  # its funnel, if the pod fails everywhere
                else:
                    funnels.extend(found.funnels)
                continue
            return found
        if refused_by_all is not None and state.allocator.dfs_nodes == searched_from:
            # Refused before any search: asked again, they would refuse it the same way, at
            # no DFS node (a search's refusal would count its nodes again: not remembered).
            self._refused_by_all[refused_by_all] = cache.epoch

        # NodeClaims of this run: refusals are first found without their words, explained
        # only when the pod fails everywhere (see _explain_deferred).
        deferred: list[tuple[int, int, Callable[[], Refusal]]] = []
        # A refusal a topology may have decided depends on every placement: not remembered.
        shape = (
            self._try_shape(pod)
            if quick and self.node_claims and not state.topology.constrains(pod.pod)
            else None
        )
        # Karpenter re-sorts its NodeClaims in place by pod count before each pod, with Go's
        # sort.Slice: ties stay where that (unstable) sort leaves them, pod after pod. A
        # sorted list sorts to itself, so it is sorted again only once a placement unsorted it.
        if trial:
            node_claims = list(self._by_pods)
            if not self._by_pods_sorted:
                slice_sort_by_key(node_claims, _pod_counts(node_claims))
        else:
            node_claims = self._by_pods
            if not self._by_pods_sorted:
                slice_sort_by_key(node_claims, self._by_pods_counts)
                self._by_pods_sorted = True
        asked_claims = (
            not_taken(node_claims, taken, _NAME)
            if trial
            else self._untaken.in_order(self.node_claims, node_claims, taken, _NAME)
        )
        found = self._try_node_claims(pod, asked_claims, quick, shape, deferred)
        if found is None:
            found = self._try_templates(pod, quick, deferred)
        if found is not None:
            return found

        if explain:
            if deferred:
                self._explain_deferred(pod, deferred)
            self._explain_counted_out(pod, counted_out)
        return None

    def _refused_by_all_key(self, pod: PodData, trial: bool) -> tuple | None:
        """The shape under which an attempt without words remembers that every existing node
        refused the pod, or None. A placement only takes room and devices from a node, so a
        node that refused a pod of one shape before any device search (too few devices in
        reach, no room) refuses it so again until the cache's epoch moves (devices freed),
        where nothing but the node decides (``pod.fast``: no topology, host ports, volumes or
        terms) and every slice is pinned to its node. Not in a trial, which lends nodes room
        and asks some of them only."""
        if trial or not pod.fast or self.state.cache.nodeclaims_reach_cluster:
            return None
        return self._try_shape(pod)

    def _hosts_taken(self, pod: PodData, quick: bool) -> list[Mapping[str, int]] | None:
        """For a pod that needs no device and no extended resource, the pods counted per
        hostname by each hostname anti-affinity that decides where it may go (its own, and
        another pod's selecting it; a pod with one is, as Karpenter tracks it, in both): a
        target whose hostname one of them counts a pod on is refused outright, whatever else
        it offers (a target's hostname requirement is one value: a node's hostname, a
        NodeClaim's name; TopologyGroup._next_anti_affinity). Read live. None: every target
        is asked."""
        if not quick or pod.claims or pod.extended is not None:
            return None
        return self.state.topology.hostname_anti_affinity_counts(pod.pod) or None

    def _try_node_claims(
        self,
        pod: PodData,
        node_claims: Iterable[NodeClaim],
        quick: bool,
        shape: tuple | None,
        deferred: list[tuple[int, int, Callable[[], Refusal]]],
    ) -> Decision | None:
        """The first of ``node_claims`` (the run's, in order, less those a hostname
        anti-affinity refuses outright) that takes the pod."""
        outcome = pod.outcome
        reasons = outcome.reasons
        funnels = outcome.funnel_log
        state = self.state
        specs = lasting_specs(pod, state) if quick and shape is not None else None
        for nc in node_claims:
            if specs is not None and nc.refused_lastingly(specs, state):
                found: NodeClaimDecision | Refusal = BOUND_REFUSAL
            else:
                found = nc.can_add(pod, state, quick, shape)
            if isinstance(found, Refusal):
                if found.deferred:
                    if found.unfit is not None:  # worded from what its filter recorded
                        again = partial(_unfit_refusal, found.unfit)
                    else:
                        again = partial(self._explain_nodeclaim, nc, pod, shape)
                    deferred.append((len(reasons), len(funnels), again))
                else:
                    funnels.extend(found.funnels)
                    if found.topology is not None:
                        outcome.reason_kinds[nc.reason_target] = topology_kind(found.topology)
                reasons.append((nc.reason_target, found.reason))
                continue
            return found
        return None

    def _try_templates(
        self,
        pod: PodData,
        quick: bool,
        deferred: list[tuple[int, int, Callable[[], Refusal]]],
    ) -> Decision | None:
        """A new NodeClaim from each NodePool in turn."""
        outcome = pod.outcome
        reasons = outcome.reasons
        funnels = outcome.funnel_log
        state = self.state
        for template in self.templates:
            found = template.can_add(pod, state, self.names, quick)
            if isinstance(found, Refusal):
                if found.deferred:
                    again = partial(template.explain, pod, state, self.names)
                    deferred.append((len(reasons), len(funnels), again))
                else:
                    funnels.extend(found.funnels)
                reasons.append((f"nodepool/{template.name}", found.reason))
                continue
            return found
        return None

    # --- committing --------------------------------------------------------------------------

    def _commit(self, pod: PodData, decision: Decision) -> None:
        """Karpenter's ``Add`` on the chosen target, and the pod's outcome."""
        state = self.state
        target = decision.target
        if isinstance(decision, NodeClaimDecision):
            if decision.new:
                template = next(t for t in self.templates if t.name == target.node_pool)
                self.names.take(template.name)
                state.prunes.started(
                    target.id,
                    template.name,
                    template.requirements,
                    template.instance_types,
                    target.candidates,
                    decision.remaining,
                )
                target.add(pod, decision, state)
                self.node_claims.append(target)
                self._by_pods.append(target)
                self._by_pods_counts.append(0)
                template.launched(target)
                self._note_more_pods(len(self._by_pods) - 1)
            else:
                target.add(pod, decision, state)
                self._note_more_pods(self._by_pods.index(target))
        else:
            target.add(pod, decision, state)
        state.cache.state_version += 1
        outcome = pod.outcome
        outcome.scheduled = True
        outcome.target = target
        outcome.error = None
        outcome.reasons = []
        outcome.funnel_log = []
        result = decision.result
        outcome.claim_outcomes = list(result.claims) if result is not None else []
        outcome.dra_node_resources = decision.dra_resources
        state.placed(outcome, target)
        state.trace.set(pod.trace_node, "ok", "scheduled", f"{target.target_json()['name']}")

    def _note_more_pods(self, index: int) -> None:
        """The NodeClaim at ``index`` of the pod-count order took a pod (or was added last):
        the order still holds if its neighbours still have no more pods before it and no
        fewer after it."""
        counts = self._by_pods_counts
        count = counts[index] = len(self._by_pods[index].pods)
        if (index > 0 and counts[index - 1] > count) or (
            index + 1 < len(counts) and counts[index + 1] < count
        ):
            self._by_pods_sorted = False

    # --- explaining a pod that failed everywhere ---------------------------------------------

    def _explain_deferred(
        self, pod: PodData, deferred: list[tuple[int, int, Callable[[], Refusal]]]
    ) -> None:
        """The words and funnels of the NodeClaim refusals found quickly, now that the pod
        failed everywhere: each target is asked again in full, in the same state (nothing was
        committed since), so the words are those a full attempt gives. DFS nodes are counted
        once (by the quick attempt)."""
        allocator = self.state.allocator
        outcome = pod.outcome
        nodes = allocator.dfs_nodes
        # From the last: a funnel list grows where an earlier target's funnels go.
        for place, funnel_place, again in reversed(deferred):
            refusal = again()
            target = outcome.reasons[place][0]
            outcome.reasons[place] = (target, refusal.reason)
            if refusal.topology is not None:
                outcome.reason_kinds[target] = topology_kind(refusal.topology)
            outcome.funnel_log[funnel_place:funnel_place] = refusal.funnels
        allocator.dfs_nodes = nodes

    def _explain_nodeclaim(self, nc: NodeClaim, pod: PodData, shape: tuple | None) -> Refusal:
        """A NodeClaim's refusal in words, built once per cause: the remembered refusal of this
        pod shape still holds (nothing it read changed), so its words, once built for a pod
        of this shape, are this pod's too, with its own claims named."""
        state = self.state
        known = state.cache.nodeclaim_refusal((nc.id, shape), nc.id) if shape else None
        claim_keys = [c.key for c in pod.outcome.pod_claims.claims]
        if known is not None and known.explained is not None:
            return known.explained.for_claims(claim_keys)
        refusal = nc.explain(pod, state)
        if known is not None and ExplainedRefusal.shareable(refusal, pod.pod.key, claim_keys):
            known.explained = ExplainedRefusal(claim_keys, refusal.reason, list(refusal.funnels))
        return refusal

    def _explain_counted_out(
        self, pod: PodData, counted_out: list[tuple[int, ExistingNode, int]]
    ) -> None:
        """Funnels of the nodes the device-count pre-check refused (nothing was searched
        there), for a pod that failed everywhere: from the cache, or by an Allocate that only
        explains (it changes no state and counts no DFS nodes)."""
        state = self.state
        allocator = state.allocator
        trace = state.trace
        claims = pod.claims
        specs = pod.specs
        outcome = pod.outcome
        log = outcome.funnel_log
        uneven = False
        for place, target, node in counted_out:
            found = state.cache.cached_funnels(target, specs) if specs else None
            if found is None:
                nodes = allocator.dfs_nodes
                try:
                    allocator.allocate(target, claims, pod=pod.pod)
                    found = []  # cannot happen (the pre-check is sound); explain nothing
                except AllocationError as err:
                    state.cache.remember(target, claims, err)
                    found = [(target.reason_target, f, None) for f in err.funnels]
                finally:
                    allocator.dfs_nodes = nodes
            if node >= 0 and found:
                # Refused by counting: the trace node shows the funnel and its decisive cause.
                from allocator.funnel import decisive_reason, funnel_json

                funnels = [e[1].for_claim(e[2]) if e[2] else e[1] for e in found]
                trace.nodes[node]["funnel"] = [funnel_json(f) for f in funnels]
                trace.nodes[node]["reason"] = decisive_reason(funnels[0]) or "devices"
            if len(found) == 1:
                log[place] = found[0]
            else:
                log[place] = found  # type: ignore[call-overload]
                uneven = True
        if uneven:  # in the order the targets were tried
            outcome.funnel_log = [
                x for e in log for x in (e if isinstance(e, list) else (e,)) if x is not None
            ]

    # --- trials (allocator/suggestions/) ---------------------------------------

    def trial(
        self,
        pod: Pod,
        pod_claims: PodClaims,
        *,
        counting: bool = True,
        targets: TrialTargets | None = None,
    ) -> Decision | None:
        """Where ``pod`` would go now: its placement decided on the current state and not
        committed (no allocation, NodeClaim, name, resources or trace). ``counting`` False
        switches off the device-count pre-check (its bounds know nothing of devices a trial
        frees). ``targets``: only those are asked, in the loop's order (None: every target;
        see trialtargets.py for when that decides alike). Decisions, and the DFS budget, are
        those of an attempt of the loop."""
        state = self.state
        saved = (state.trace, state.counter, set(state.cache.validated_specs), state.committing)
        dfs_nodes = state.allocator.dfs_nodes  # stats.dfsNodes counts the run's own search only
        lists = (self.existing, self._by_pods, self.templates)
        state.trace = NULL_TRACE
        state.committing = False
        if not counting:
            state.counter = None
        if targets is not None:
            # Sorted as the trial would sort them all, then narrowed: a sorted list sorts to
            # itself, so the targets asked keep the order they have among all of them.
            by_pods = list(self._by_pods)
            if not self._by_pods_sorted:
                slice_sort_by_key(by_pods, _pod_counts(by_pods))
            self.existing = [n for n in self.existing if n.name in targets.nodes]
            self._by_pods = [nc for nc in by_pods if nc.name in targets.node_claims]
            self.templates = [t for t in self.templates if t.name in targets.node_pools]
        try:
            outcome = PodOutcome(pod, pod_claims)
            if pod_claims.error is not None or state.shared_mapping_problem(outcome):
                return None
            decision, _, relaxed = self._try_schedule(outcome, -1, explain=False, trial=True)
            if relaxed:
                state.topology.update(pod)
            return decision
        finally:
            state.trace, state.counter, state.cache.validated_specs, state.committing = saved
            state.allocator.dfs_nodes = dfs_nodes
            self.existing, self._by_pods, self.templates = lists

    def invalidate_caches(self) -> None:
        """Forget every cached refusal and replayable attempt: call it after changing the
        allocation state other than through a placement (a trial that frees devices ...)."""
        self.state.invalidate_caches()
        self._lasting.clear()
        for node in self.existing:
            node.refusals.clear()


def _unfit_refusal(unfit: NoInstanceType) -> Refusal:
    """A NodeClaim's deferred refusal by its instance type filter, in the words a full
    attempt gives it (the same filter's, worded): nothing else refused, no funnel."""
    return Refusal(unfit.words(), "instance-types")


def _pod_counts(node_claims: list[NodeClaim]) -> list[int]:
    """Karpenter's sort key for its NodeClaims (fewest pods first)."""
    return list(map(len, map(_PODS, node_claims)))


_PODS = attrgetter("pods")
_NAME = attrgetter("name")  # a NodeClaim's hostname is its name
_HOSTNAME = attrgetter("hostname")


def _claim_error_funnels(outcome: PodOutcome) -> list[Funnel]:
    """A pod whose claims cannot even be generated or found: refused as a whole."""
    from allocator.funnel import whole_funnel

    error = outcome.pod_claims.error or ""
    claims = outcome.pod_claims.claims
    claim = claims[0].key if claims else outcome.pod.key
    return [whole_funnel(claim, "", 0, None, error)]
