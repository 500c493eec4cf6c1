"""The provisioning scheduling loop (CONTRACT section 3; design: Integration with Karpenter's
Scheduler): existing nodes, then NodeClaims created in this run, then a new NodeClaim per
NodePool; constraint propagation and instance type re-filtering after every placement.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from allocator.model import DeviceID, NodePool, Pod, ResourceClaim, Taint
from allocator.requirements import WELL_KNOWN_LABELS, Requirements
from allocator.scheduling import explain
from allocator.scheduling.devicecount import DeviceCounter, claims_minimum
from allocator.scheduling.fit import (
    HOSTNAME,
    FilterOutcome,
    InstanceTypeInfo,
    Resources,
    add_into,
    filter_instance_types,
    first_compatible_term,
    fits,
    format_requirements,
    format_resources,
    format_taint,
    max_capacity,
    merged,
    pod_requests,
    pod_requirement_terms,
    untolerated_taint,
    within_limits,
)
from allocator.scheduling.initialization import PodClaims, claim_state_before_dfs
from allocator.scheduling.nodeclaims import (
    ExistingTarget,
    InFlightNodeClaim,
    Probe,
)
from allocator.scheduling.report import DRA_STAGE, FILTER_STAGE, PruneLog
from allocator.trace import NULL_TRACE, Trace

_NO_STRICT: frozenset[str] = frozenset()


@dataclass(slots=True)
class PoolPlan:
    """A NodePool as the loop uses it: requirements, launchable types, limits."""

    pool: NodePool
    requirements: Requirements
    instance_types: list[InstanceTypeInfo]
    taints: list[Taint]
    limits: Resources | None  # milli-units; None when the NodePool sets no limits
    usage: Resources = field(default_factory=dict)  # capacity launched before this run
    # Requests of the DaemonSet pods a node of this pool would run (Karpenter's overhead).
    daemon_overhead: Resources = field(default_factory=dict)


@dataclass(slots=True)
class PodOutcome:
    pod: Pod
    pod_claims: PodClaims
    scheduled: bool = False
    target: ExistingTarget | InFlightNodeClaim | None = None
    claim_outcomes: list = field(default_factory=list)  # AllocationResult.claims
    claim_states: dict[str, str] = field(default_factory=dict)  # for unplaced pods
    reasons: list[tuple[str, str]] = field(default_factory=list)
    error: str | None = None
    dra_node_resources: Resources = field(default_factory=dict)
    attempts: int = 0
    validated: bool = False  # an Allocate call got past Request Validation


@dataclass(slots=True)
class _Plan:
    """A NodeClaim's state after adding a pod (Karpenter's CanAdd output, applied by Add)."""

    requirements: Requirements
    candidates: list[InstanceTypeInfo]
    requests: Resources
    result: object | None
    dra_resources: Resources
    claims: list[ResourceClaim] = field(default_factory=list)
    # For the NodeClaim report: the pod's requirement term and, per filtering stage, the
    # instance type lists it started from and kept (references only; see report.PruneLog).
    term: Requirements | None = None
    stages: list[tuple] = field(default_factory=list)


class AllocationFailure(Exception):
    """A NodeClaim cannot take the pod; ``code`` is the trace's short reason."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


class Scheduler:
    def __init__(
        self,
        *,
        allocator,
        existing: list[ExistingTarget],
        pools: list[PoolPlan],
        deleting_pods: set[str],
        device_counter: DeviceCounter | None = None,
        reserved_names: set[str] = frozenset(),
        trace: Trace = NULL_TRACE,
        allocation_errors: tuple[type[BaseException], ...] = (),
    ) -> None:
        self.allocator = allocator
        self.existing = existing
        self.pools = pools
        self.deleting_pods = deleting_pods
        self.counter = device_counter
        self.reserved_names = set(reserved_names)
        self.trace = trace
        self.allocation_errors = allocation_errors
        self.node_claims: list[InFlightNodeClaim] = []
        self.in_memory: set[str] = set()  # claims allocated earlier in this run
        self.claim_users: dict[str, set[str]] = {}  # claim key -> pods placed with it here
        self._maps_node_resources: dict[str, bool] = {}  # claim key -> devices map resources
        self._next_index: dict[str, int] = {}
        self._reason_cache: dict[tuple, str] = {}
        self._validated_specs: set[tuple] = set()
        self.prunes = PruneLog()  # why each NodeClaim lost instance types (result report)
        self._dry = False  # a trial (see ``trial``): stop at the first commit

    # --- the loop ----------------------------------------------------------------------------

    def run(
        self,
        pods: list[Pod],
        pod_claims: dict[str, PodClaims],
        progress: Callable[[int, int], None] | None = None,
    ) -> list[PodOutcome]:
        outcomes = [PodOutcome(pod, pod_claims[pod.key]) for pod in pods]
        queue = list(outcomes)
        done = 0
        while queue:
            failed: list[PodOutcome] = []
            placed_any = False
            total = done + len(queue)
            for outcome in queue:
                if self._schedule(outcome):
                    placed_any = True
                else:
                    failed.append(outcome)
                done += 1
                if progress is not None:
                    progress(done, total)
            if not placed_any or not failed:
                break
            queue = failed  # Karpenter retries while the previous pass made progress
        return outcomes

    def _schedule(self, outcome: PodOutcome) -> bool:
        pod = outcome.pod
        outcome.attempts += 1
        outcome.reasons = []
        outcome.error = None
        claims = outcome.pod_claims.claims
        pod_node = self.trace.add(None, "pod", pod.key) if self.trace.enabled else -1
        if outcome.pod_claims.error is not None:
            outcome.error = outcome.pod_claims.error
            self.trace.set(pod_node, "failed", "claim", outcome.error)
            return False
        shared = self._shared_mapping_problem(outcome)
        if shared is not None:
            # Pod-level, like kube-scheduler's PreFilter: no node can change it.
            outcome.error = shared
            outcome.claim_states = {
                c.key: claim_state_before_dfs(c, self.deleting_pods, c.key in self.in_memory)
                for c in claims
            }
            self.trace.set(pod_node, "failed", "node-resources", shared)
            return False
        requests = pod_requests(pod)
        terms = pod_requirement_terms(pod)
        needed = claims_minimum(self._to_allocate(claims)) if claims else 0
        check_terms = len(terms) > 1 or bool(list(terms[0].keys()))

        # The device-count pre-check, inlined: on a big cluster most nodes are full.
        # It starts once the pod's claims passed Request Validation (see _note_validation).
        counting = bool(needed) and self.counter is not None
        bounds = None
        # Fast path (untraced, no node selector or affinity): a node that takes the pod's
        # requests but cannot have enough free devices is refused with the same reason the
        # full check would give, without the per-check calls. The order of checks is kept.
        fast = not self.trace.enabled and not check_terms
        wanted = [(k, v) for k, v in requests.items() if v > 0]
        reasons = outcome.reasons
        for target in self.existing:
            if bounds is None and counting and self._is_validated(outcome):
                bounds = self.counter.bounds
            if fast and bounds is not None and target.open_to_all:
                bound = bounds.get(target.id)
                if bound is not None and needed > bound:
                    available = target.available
                    for name, value in wanted:
                        if value > available.get(name, 0):
                            break
                    else:
                        reasons.append(
                            (target.reason_target, self._device_reason(target, needed, bound))
                        )
                        continue
            reason = self._try_existing(
                target,
                outcome,
                requests,
                terms if check_terms else None,
                pod_node,
                needed if bounds is not None else 0,
                bounds,
            )
            if reason is None:
                return self._placed(outcome, target, pod_node)
            outcome.reasons.append((target.reason_target, reason))

        for nc in sorted(self.node_claims, key=lambda n: (len(n.pods), n.order)):
            reason = self._try_in_flight(nc, outcome, requests, terms, pod_node)
            if reason is None:
                return self._placed(outcome, nc, pod_node)
            outcome.reasons.append((nc.reason_target, reason))

        for plan in self.pools:
            reason, nc = self._try_new(plan, outcome, requests, terms, pod_node)
            if nc is not None:
                return self._placed(outcome, nc, pod_node)
            outcome.reasons.append((f"nodepool/{plan.pool.name}", reason))

        outcome.error = explain.summarize(outcome.reasons)
        outcome.claim_states = {
            c.key: claim_state_before_dfs(c, self.deleting_pods, c.key in self.in_memory)
            for c in claims
        }
        self.trace.set(pod_node, "failed", "unschedulable", outcome.error)
        return False

    def _placed(self, outcome: PodOutcome, target, pod_node: int) -> bool:
        outcome.scheduled = True
        outcome.target = target
        outcome.error = None
        outcome.reasons = []
        target.pods.append(outcome.pod)
        for claim in outcome.pod_claims.claims:
            self.claim_users.setdefault(claim.key, set()).add(outcome.pod.key)
        for co in outcome.claim_outcomes:
            if co.state in ("unallocated", "reallocated"):
                self._maps_node_resources[co.key] = self._maps(
                    co.devices_for(None), target.resource_slices()
                )
        self.trace.set(pod_node, "ok", "scheduled", f"{target.target_json()['name']}")
        return True

    def _shared_mapping_problem(self, outcome: PodOutcome) -> str | None:
        """DRANodeAllocatableResources: a claim whose devices map node resources directly
        (not just overhead) cannot be shared by several pods; a pod naming such a claim that
        another pod already has (reservedFor, or placed earlier in this run) is unschedulable."""
        from allocator.claims import in_cluster_devices
        from allocator.features.nodeallocatable import shared_mapping_claim_error

        pod = outcome.pod
        for claim in outcome.pod_claims.claims:
            state = claim_state_before_dfs(claim, self.deleting_pods, claim.key in self.in_memory)
            if state == "allocated-in-memory":
                maps = self._maps_node_resources.get(claim.key, False)
            elif state == "allocated-in-cluster":
                maps = self._maps_node_resources.get(claim.key)
                if maps is None:
                    maps = self._maps(in_cluster_devices(claim), None)
                    self._maps_node_resources[claim.key] = maps
            else:
                continue
            if not maps:
                continue
            users = set(self.claim_users.get(claim.key, ()))
            users.update(
                f"{claim.namespace}/{ref.name}"
                for ref in claim.reserved_for
                if ref.resource == "pods" and ref.api_group in ("", None)
            )
            users.add(pod.key)
            problem = shared_mapping_claim_error(claim.key, users)
            if problem is not None:
                return problem
        return None

    def _maps(self, devices, templates_by_it) -> bool:
        from allocator.features.plugin import claim_maps_node_resources

        return claim_maps_node_resources(self.allocator, devices, templates_by_it)

    def _to_allocate(self, claims: list[ResourceClaim]) -> list[ResourceClaim]:
        """The claims the DFS will have to place (for the device-count pre-check)."""
        return [
            c
            for c in claims
            if claim_state_before_dfs(c, self.deleting_pods, c.key in self.in_memory)
            in ("unallocated", "reallocated")
        ]

    # --- existing nodes (design: Existing Node Evaluation) -----------------------------------

    def _try_existing(
        self,
        target: ExistingTarget,
        outcome: PodOutcome,
        requests: Resources,
        terms: list[Requirements] | None,
        pod_node: int,
        needed: int = 0,
        bounds: dict[str, int] | None = None,
    ) -> str | None:
        pod = outcome.pod
        if target.unschedulable:
            return self._refused(pod_node, target, "unschedulable", "node is unschedulable")
        if not fits(requests, target.available):
            reason = self._exceeds(requests, target.available)
            return self._refused(pod_node, target, "resources", reason)
        taint = untolerated_taint(pod.tolerations, target.taints, target.ignored_taint_keys)
        if taint is not None:
            reason = f"did not tolerate taint {format_taint(taint)}"
            return self._refused(pod_node, target, "taint", reason)
        if terms is not None:
            allow = _NO_STRICT if target.strict_labels else WELL_KNOWN_LABELS
            term, reason = first_compatible_term(target.requirements, terms, allow)
            if term is None:
                reason = f"incompatible requirements, {reason}"
                return self._refused(pod_node, target, "requirements", reason)
        if needed:
            # Where the DFS would run, the cheap count may already tell it would fail.
            bound = bounds.get(target.id)
            if bound is not None and needed > bound:
                reason = self._device_reason(target, needed, bound)
                return self._refused(pod_node, target, "devices", reason)
        claims = outcome.pod_claims.claims
        dra: Resources = {}
        result = None
        if claims:
            node = self._target_trace(pod_node, target.trace_label)
            try:
                result = self.allocator.allocate(
                    target,
                    claims,
                    trace=self.trace,
                    trace_parent=node if node >= 0 else None,
                    pod=outcome.pod,
                )
            except self.allocation_errors as err:
                self._note_validation(outcome, err)
                self.trace.set(node, "failed", getattr(err, "code", "allocation"), str(err))
                return explain.dra_reason(str(err))
            self._mark_validated(outcome)
            dra = dra_node_resources(result)
            problem = pod_level_problem(outcome.pod, result)
            if problem is not None:
                self.trace.set(node, "failed", "node-resources", problem)
                return explain.dra_reason(problem)
            if dra and not fits(merged(requests, dra), target.available):
                self.trace.set(node, "failed", "resources", "device node resources")
                return self._exceeds(merged(requests, dra), target.available)
            self.trace.set(node, "ok", "allocated")
            self._stop_trial(target, result)
            self._commit(result, claims)
        elif self.trace.enabled:
            self.trace.add(pod_node, "target", target.trace_label, "ok", "fits")
        self._stop_trial(target, result)
        for name, value in merged(requests, dra).items():
            target.available[name] = target.available.get(name, 0) - value
        self._record(outcome, result, dra)
        return None

    def _refused(self, pod_node: int, target, code: str, reason: str) -> str:
        """A target refused before any device search: one failed trace node says why."""
        if self.trace.enabled:
            self.trace.add(pod_node, "target", target.trace_label, "failed", code, reason)
        return reason

    def _refused_pool(self, pod_node: int, label: str, code: str, reason: str) -> str:
        if self.trace.enabled:
            self.trace.add(pod_node, "target", label, "failed", code, reason)
        return reason

    def _device_reason(self, target: ExistingTarget, needed: int, bound: int) -> str:
        """Same outcome and wording as the DFS on this node: nothing could be allocated."""
        it = target.instance_types[0] if target.instance_types else target.name
        key = (it, needed, bound)
        reason = self._reason_cache.get(key)
        if reason is None:
            reason = explain.dra_reason(
                f"no instance type can satisfy the allocation: {it}: the claims need "
                f"{needed} devices, at most {bound} unallocated devices are reachable from "
                "the node"
            )
            self._reason_cache[key] = reason
        return reason

    @staticmethod
    def _exceeds(requests: Resources, available: Resources) -> str:
        shown = {k: max(v, 0) for k, v in available.items() if k in requests}
        return (
            f"exceeds node resources, requests {format_resources(requests)}, "
            f"available {format_resources(shown)}"
        )

    # --- NodeClaims of this run and new ones (design: In-Flight / New NodeClaim Evaluation) ---

    def _try_in_flight(
        self,
        nc: InFlightNodeClaim,
        outcome: PodOutcome,
        requests: Resources,
        terms: list[Requirements],
        pod_node: int,
    ) -> str | None:
        taint = untolerated_taint(outcome.pod.tolerations, nc.taints)
        if taint is not None:
            reason = f"did not tolerate taint {format_taint(taint)}"
            return self._refused(pod_node, nc, "taint", reason)
        node = self._target_trace(pod_node, nc.trace_label)
        try:
            plan = self._plan(
                nc.id,
                nc.node_pool,
                nc.requirements,
                nc.candidates,
                nc.requests,
                outcome,
                requests,
                terms,
                node,
            )
        except AllocationFailure as failure:
            self.trace.set(node, "failed", failure.code, str(failure))
            return str(failure)
        self.trace.set(node, "ok", "allocated")
        self._apply(nc, plan, outcome)
        return None

    def _try_new(
        self,
        plan_pool: PoolPlan,
        outcome: PodOutcome,
        requests: Resources,
        terms: list[Requirements],
        pod_node: int,
    ) -> tuple[str, InFlightNodeClaim | None]:
        pool = plan_pool.pool
        label = f"nodepool/{pool.name}"
        overhead = format_resources(plan_pool.daemon_overhead)
        taint = untolerated_taint(outcome.pod.tolerations, plan_pool.taints)
        if taint is not None:
            reason = explain.nodepool_reason(
                pool.name, f"did not tolerate taint {format_taint(taint)}", overhead
            )
            return self._refused_pool(pod_node, label, "taint", reason), None
        if not plan_pool.instance_types:
            reason = explain.nodepool_reason(
                pool.name, "no instance types are compatible with its requirements", overhead
            )
            return self._refused_pool(pod_node, label, "requirements", reason), None
        remaining = self._remaining(plan_pool)
        candidates = [i for i in plan_pool.instance_types if within_limits(i.capacity, remaining)]
        if not candidates:
            reason = f'all available instance types exceed limits for nodepool: "{pool.name}"'
            return self._refused_pool(pod_node, label, "limits", reason), None
        name = self._name_for(pool.name, peek=True)
        node = self._target_trace(pod_node, f"nodepool/{pool.name} (new {name})")
        # Karpenter's hostname placeholder: a pod pinned to an existing node's hostname is
        # incompatible with a new NodeClaim (dropped again at finalization).
        base = plan_pool.requirements.copy()
        base.add(Requirements.from_labels({HOSTNAME: name}))
        try:
            plan = self._plan(
                name,
                pool.name,
                base,
                candidates,
                dict(plan_pool.daemon_overhead),
                outcome,
                requests,
                terms,
                node,
            )
        except AllocationFailure as failure:
            self.trace.set(node, "failed", failure.code, str(failure))
            return explain.nodepool_reason(pool.name, str(failure), overhead), None
        self.trace.set(node, "ok", "allocated")
        self._name_for(pool.name, peek=False)
        nc = InFlightNodeClaim(
            id=name,
            name=name,
            node_pool=pool.name,
            requirements=base,
            candidates=candidates,
            taints=list(plan_pool.taints),
            order=len(self.node_claims),
        )
        self.prunes.started(
            name, pool.name, plan_pool.requirements, plan_pool.instance_types, candidates, remaining
        )
        self._apply(nc, plan, outcome)
        self.node_claims.append(nc)
        return "", nc

    def _plan(
        self,
        nc_id: str,
        node_pool: str,
        base: Requirements,
        candidates: list[InstanceTypeInfo],
        base_requests: Resources,
        outcome: PodOutcome,
        requests: Resources,
        terms: list[Requirements],
        trace_node: int,
    ) -> _Plan:
        """Karpenter's NodeClaim.CanAdd with the DRA steps of Constraint Propagation."""
        term, reason = first_compatible_term(base, terms, WELL_KNOWN_LABELS)
        if term is None:
            raise AllocationFailure(f"incompatible requirements, {reason}", "requirements")
        reqs = base.copy()
        reqs.add(term)
        total = merged(base_requests, requests)
        filtered = filter_instance_types(candidates, reqs, total)
        if not filtered.remaining:
            raise AllocationFailure(_no_instance_type(total, reqs, filtered), "instance-types")
        stages = [(FILTER_STAGE, candidates, reqs, total, filtered.remaining)]
        claims = outcome.pod_claims.claims
        if not claims:
            return _Plan(reqs, filtered.remaining, total, None, {}, term=term, stages=stages)
        probe = Probe(nc_id, node_pool, reqs, filtered.remaining)
        try:
            result = self.allocator.allocate(
                probe,
                claims,
                trace=self.trace,
                trace_parent=trace_node if trace_node >= 0 else None,
                pod=outcome.pod,
            )
        except self.allocation_errors as err:
            self._note_validation(outcome, err)
            code = getattr(err, "code", "allocation")
            raise AllocationFailure(explain.dra_reason(str(err)), code) from None
        self._mark_validated(outcome)
        allowed = set(result.instance_types)
        kept = [info for info in filtered.remaining if info.name in allowed]
        if not kept:
            raise AllocationFailure(
                explain.dra_reason("no instance type can satisfy the allocation"),
                "no-instance-type",
            )
        # Requirement tightening, then the FULL instance type filter again (design:
        # Constraint Propagation): zones, offerings and resources may all change.
        tightened = reqs.copy()
        tightened.add(result.requirements)
        dra = dra_node_resources(result)
        problem = pod_level_problem(outcome.pod, result)
        if problem is not None:
            raise AllocationFailure(explain.dra_reason(problem), "node-resources")
        refiltered = filter_instance_types(kept, tightened, merged(total, dra))
        if not refiltered.remaining:
            raise AllocationFailure(
                explain.dra_reason(_no_instance_type(merged(total, dra), tightened, refiltered)),
                "instance-types",
            )
        stages.append((DRA_STAGE, filtered.remaining, result, kept))
        stages.append((FILTER_STAGE, kept, tightened, merged(total, dra), refiltered.remaining))
        return _Plan(
            tightened,
            refiltered.remaining,
            merged(total, dra),
            result,
            dra,
            claims,
            term=term,
            stages=stages,
        )

    def _apply(self, nc: InFlightNodeClaim, plan: _Plan, outcome: PodOutcome) -> None:
        """Karpenter's NodeClaim.Add: commit, then release the instance types it lost."""
        self._stop_trial(nc, plan.result)
        before = set(nc.instance_types)
        if plan.result is not None:
            before.update(plan.result.instance_types)
            self._commit(plan.result, plan.claims)
        nc.requirements = plan.requirements
        nc.candidates = plan.candidates
        nc.requests = plan.requests
        kept = set(nc.instance_types)
        for name in sorted(before - kept):
            self.allocator.release_instance_type(nc.id, name)
        self.prunes.applied(nc.id, plan.term, plan.stages)
        self._record(outcome, plan.result, plan.dra_resources)

    # --- trials (allocator/explanation/suggestions.py) ----------------------------------------

    def trial(self, pod: Pod, pod_claims: PodClaims, *, counting: bool = True) -> TrialHit | None:
        """Where ``pod`` would go now: the pod's placement re-run on the current state with
        nothing committed (no allocation, NodeClaim, name, resources or trace). ``counting``
        False switches off the device-count pre-check (its bounds know nothing of devices a
        trial frees). Decisions, and the DFS budget, are those of ``_schedule``."""
        saved = (self.trace, self.prunes, self.counter, set(self._validated_specs))
        allocator = self.allocator
        dfs_nodes = allocator.dfs_nodes  # stats.dfsNodes counts the run's own search only
        self.trace, self.prunes, self._dry = NULL_TRACE, PruneLog(), True
        if not counting:
            self.counter = None
        try:
            self._schedule(PodOutcome(pod, pod_claims))
        except TrialHit as hit:
            return hit
        finally:
            self.trace, self.prunes, self.counter, self._validated_specs = saved
            allocator.dfs_nodes = dfs_nodes
            self._dry = False
        return None

    def _stop_trial(self, target, result) -> None:
        if self._dry:
            raise TrialHit(target, result)

    # --- helpers -----------------------------------------------------------------------------

    def _commit(self, result, claims: list[ResourceClaim]) -> None:
        result.allocation.commit()
        for claim in result.claims:
            if claim.state in ("unallocated", "reallocated"):
                self.in_memory.add(claim.key)
        if self.counter is not None:
            self.counter.taken(
                DeviceID(d.driver, d.pool, d.device)
                for claim in result.claims
                for d in claim.devices
                # Admin access and shares of a multi-allocatable device hold nothing exclusively.
                if d.source == "in-cluster"
                and not d.extra.get("adminAccess")
                and not d.extra.get("shareID")
            )

    def _note_validation(self, outcome: PodOutcome, err: BaseException) -> None:
        """The device-count pre-check is used only for pods whose claims passed Request
        Validation once, so that a claim the allocator rejects (``exceeding maximum``, a
        missing DeviceClass ...) is reported with the allocator's own words on every node."""
        if getattr(err, "code", None) != "validation":
            self._mark_validated(outcome)

    def _mark_validated(self, outcome: PodOutcome) -> None:
        outcome.validated = True
        for claim in outcome.pod_claims.claims:
            key = _spec_key(claim)
            if key is not None:
                self._validated_specs.add(key)

    def _is_validated(self, outcome: PodOutcome) -> bool:
        """Validated itself, or every claim shares its spec with a validated one (claims from
        one template). All-mode requests depend on the pools a target reaches: not shared."""
        if outcome.validated:
            return True
        specs = self._validated_specs
        for claim in outcome.pod_claims.claims:
            key = _spec_key(claim)
            if key is None or key not in specs:
                return False
        return True

    def _record(self, outcome: PodOutcome, result, dra: Resources) -> None:
        outcome.claim_outcomes = list(result.claims) if result is not None else []
        outcome.dra_node_resources = dra

    def _target_trace(self, pod_node: int, label: str) -> int:
        if not self.trace.enabled:
            return -1
        return self.trace.add(pod_node, "target", label)

    def _remaining(self, plan: PoolPlan) -> Resources | None:
        if plan.limits is None:
            return None
        used = dict(plan.usage)
        for nc in self.node_claims:
            if nc.node_pool == plan.pool.name:
                add_into(used, max_capacity(nc.candidates))
        return {name: limit - used.get(name, 0) for name, limit in plan.limits.items()}

    def _name_for(self, pool: str, peek: bool) -> str:
        n = self._next_index.get(pool, 1)
        while f"{pool}-{n}" in self.reserved_names:
            n += 1  # never shadow a NodeClaim or node of the snapshot
        if not peek and not self._dry:
            self._next_index[pool] = n + 1
            self.reserved_names.add(f"{pool}-{n}")
        return f"{pool}-{n}"


class TrialHit(Exception):
    """A trial found where the pod would go (raised before anything is committed)."""

    def __init__(self, target, result) -> None:
        super().__init__(target.name)
        self.target = target  # ExistingTarget or InFlightNodeClaim (new ones not appended)
        self.result = result  # AllocationResult, or None for a pod without claims


def _spec_key(claim: ResourceClaim) -> tuple | None:
    """Claims with the same key have the same spec (one template, or the same claim)."""
    for request in claim.spec.requests:
        subs = (
            [request.exactly] if request.exactly else [s.request for s in request.first_available]
        )
        if any(sub.allocation_mode == "All" for sub in subs):
            return None
    if claim.generated_from_template:
        return ("template", claim.namespace, claim.generated_from_template)
    return ("claim", claim.key)


def _no_instance_type(requests: Resources, reqs: Requirements, filtered: FilterOutcome) -> str:
    return (
        f"no instance type satisfied resources {format_resources(requests)} and requirements "
        f"{format_requirements(reqs)} ({filtered.failure_reason()})"
    )


def dra_node_resources(result) -> Resources:
    """What the allocated devices add to the pod's node resources (DRANodeAllocatableResources),
    in milli-units like every other request."""
    return {name: q.milli_value() for name, q in result.node_resources.items()}


def pod_level_problem(pod: Pod, result) -> str | None:
    """Pod-level ``spec.resources.requests`` must cover the containers' requests plus what the
    devices add (DRANodeAllocatableResources)."""
    from allocator.features.nodeallocatable import NodeAllocatableError, pod_level_limit_problem

    if not result.node_resources:
        return None
    try:
        return pod_level_limit_problem(pod, result.node_resources)
    except NodeAllocatableError as err:
        return str(err)
