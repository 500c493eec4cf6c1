"""The provisioning scheduling loop (docs/SIMULATION.md; design: Integration with Karpenter's
Scheduler): existing nodes, then NodeClaims created in this run, then a new NodeClaim per
NodePool; constraint propagation and instance type re-filtering after every placement.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from allocator.errors import AllocationError
from allocator.explanation.funnel import Funnel, count_message
from allocator.explanation.messages import HolderIndex
from allocator.model import DeviceID, NodePool, Pod, PoolKey, ResourceClaim, Taint
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
from allocator.scheduling.tuning import DEFAULT_TUNING, Tuning
from allocator.trace import NULL_TRACE, Trace, new_nodeclaim_label

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
    # The refusal funnels of the last attempt: (target as reasons[].target names it, funnel,
    # this pod's claim when the funnel is a cached one computed for another claim of the same
    # spec, else None). Read them through ``funnels``.
    funnel_log: list[tuple[str, Funnel, str | None]] = field(default_factory=list)
    # The scheduler's state version the last attempt saw, and the DFS nodes it spent: a retry
    # in an unchanged state would repeat it exactly (see Scheduler.run).
    seen_version: int = -1
    seen_validated: bool = False  # ``validated`` when that attempt started
    dfs_nodes: int = 0

    @property
    def funnels(self) -> list[tuple[str, Funnel]]:
        """(target, funnel) of every refusal of the last attempt, in the order tried."""
        return [(t, f if c is None else f.for_claim(c)) for t, f, c in self.funnel_log]


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

    def __init__(
        self, message: str, code: str, deferred: bool = False, reach: tuple | None = ()
    ) -> None:
        super().__init__(message)
        self.code = code
        self.deferred = deferred  # found without its words (see Scheduler._plan's quick)
        # The in-cluster pools the refusal read (None: not known, any may matter).
        self.reach = reach


# A refusal found without its words; they are built if the pod fails everywhere.
_DEFERRED = "(deferred)"


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
        tuning: Tuning = DEFAULT_TUNING,
        nodeclaims_reach_cluster: bool = True,
    ) -> None:
        self.allocator = allocator
        self.existing = existing
        self.pools = pools
        self.deleting_pods = deleting_pods
        self.counter = device_counter
        self.reserved_names = set(reserved_names)
        self.trace = trace
        self.node_claims: list[InFlightNodeClaim] = []
        self.in_memory: set[str] = set()  # claims allocated earlier in this run
        self.claim_users: dict[str, set[str]] = {}  # claim key -> pods placed with it here
        self._maps_node_resources: dict[str, bool] = {}  # claim key -> devices map resources
        self._next_index: dict[str, int] = {}
        self._reason_cache: dict[tuple, str] = {}
        self._validated_specs: set[tuple] = set()
        self.prunes = PruneLog()  # why each NodeClaim lost instance types (result report)
        # The fast paths (see Tuning); off only to prove that decisions do not depend on them.
        self.funnel_refusal = tuning.funnel_refusal
        self.nodeclaim_caches = tuning.nodeclaim_caches
        allocator.fresh_funnels = {} if self.nodeclaim_caches else None
        # (NodeClaim id, pod shape) -> ((NodeClaim version, cluster version), refusal: words
        # or _DEFERRED, DFS nodes it counted, whether it marked the pod validated). A NodeClaim's
        # version grows whenever it takes a pod; the cluster version whenever in-cluster devices
        # are committed or freed: an entry whose versions match is what _plan would find again.
        self._nc_refusals: dict[tuple, tuple] = {}
        # (NodeClaim id, claim spec keys, instance types) -> (versions, code, DFS nodes).
        self._allocate_refusals: dict[tuple, tuple] = {}
        self._nc_versions: dict[str, int] = {}
        self._cluster_version = 0
        self._holds_in_cluster: set[str] = set()  # targets given in-cluster devices in this run
        # Whether a NodeClaim can reach any in-cluster device (a slice not pinned to a node):
        # the device-count bound of NodeClaims counts template devices only, so needs False.
        self.nodeclaims_reach_cluster = nodeclaims_reach_cluster
        self._template_totals: dict[str, int | None] = {}
        # filter_instance_types' answers per requirements' content (None: not remembered).
        self._filter_memo: dict | None = {} if self.nodeclaim_caches else None
        # (claim spec key, request) -> target id -> (pools in reach, state version, funnel or
        # None when the request passed the count stage). Versions grow on every commit to a
        # pool (or to the target's own templates) and on every release, so an entry whose
        # version still matches is what Allocate would compute again.
        # (the 4th item: an id of what the refusal's words depend on besides the claim).
        self._funnels: dict[tuple, dict[str, tuple]] = {}
        self._refusal_words: dict[tuple, str] = {}  # (claim, words shape id) -> reason
        self._word_shapes: dict[tuple, int] = {}
        self._funnel_keys: dict[int, tuple] = {}  # id(claim) -> (claim, its funnel key)
        # Pod shape -> (state version its attempt started from, and of that failed attempt:
        # claim keys, reasons, funnel log, validated, DFS nodes).
        self._shapes: dict[tuple, tuple] = {}
        self.replayed = 0  # attempts replayed from a pod of the same shape (bench, tests)
        self._causes: dict[int, tuple[Funnel, str]] = {}
        self._pool_versions: dict[PoolKey, int] = {}
        self._target_versions: dict[str, int] = {}
        self._releases = 0
        self.state_version = 0  # anything a pod's attempt reads changed (retry skipping)
        # Refused by the device-count pre-check: (place in the funnel log, target).
        self._counted_out: list[tuple[int, ExistingTarget, int]] = []  # + its trace node
        # Who holds a device, for the funnel's "allocated" messages (explanation/messages.py).
        allocator.wording.holders = HolderIndex(
            allocator.resource_claims, allocator.claim_metadata, allocator.tracker, self.claim_users
        )
        if self.funnel_refusal:  # selector refusals worded once per values read
            allocator.wording.selector_words = {}
        self._dry = False  # a trial (see ``trial``): stop at the first commit

    def claim_state(self, claim: ResourceClaim) -> str:
        """How the allocator will classify the claim (``claim_state_before_dfs``)."""
        return claim_state_before_dfs(
            claim,
            self.deleting_pods,
            claim.key in self.in_memory,
            self.allocator.pipeline.reallocation_predicates,
        )

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
                if self._unchanged(outcome):
                    # Nothing this pod's attempt read has changed since: the retry would
                    # repeat it exactly (same reasons, same DFS work), so it is not run.
                    self.allocator.dfs_nodes += outcome.dfs_nodes
                    failed.append(outcome)
                elif self._schedule(outcome, replay=True):
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

    def _unchanged(self, outcome: PodOutcome) -> bool:
        return (
            self.funnel_refusal
            and not self.trace.enabled
            and outcome.seen_version == self.state_version
            and outcome.seen_validated == outcome.validated
        )

    def _schedule(self, outcome: PodOutcome, replay: bool = False) -> bool:
        """One attempt of one pod; ``replay`` (the loop's own passes only, never a trial) lets
        a pod of the same shape as one that failed in this same state take that result."""
        start_nodes = self.allocator.dfs_nodes
        start_version = self.state_version  # the attempt itself may change it (validation)
        start_validated = outcome.validated
        shape = self._shape(outcome) if replay else None
        if shape is not None:
            seen = self._shapes.get(shape)
            if seen is not None and seen[0] == start_version:
                # A pod just like this one failed in this very state: so does this one.
                self._replay(outcome, seen)
                outcome.seen_version = start_version
                outcome.seen_validated = start_validated
                return False
        placed = self._attempt(outcome)
        if not placed:
            outcome.seen_version = start_version
            outcome.seen_validated = start_validated
            outcome.dfs_nodes = self.allocator.dfs_nodes - start_nodes
            if shape is not None and not self._names_pod(outcome):
                self._shapes[shape] = (
                    start_version,
                    [c.key for c in outcome.pod_claims.claims],
                    outcome.reasons,
                    outcome.funnel_log,
                    outcome.validated,
                    outcome.dfs_nodes,
                )
        return placed

    def _shape(self, outcome: PodOutcome) -> tuple | None:
        """Everything an attempt reads from the pod, but its name: pods of one Deployment or
        Job share it (their claims differ by name only). None when a claim is not simply
        unallocated or the run is traced (the trace shows every attempt)."""
        if not self.funnel_refusal or self.trace.enabled or outcome.pod_claims.error:
            return None
        claims = outcome.pod_claims.claims
        keys = []
        for claim in claims:
            state = self.claim_state(claim)
            key = self._funnel_key(claim)
            if state != "unallocated" or key is None:
                return None
            keys.append(key)
        pod = outcome.pod
        return (
            pod.namespace,
            repr(sorted(pod.requests.items())),
            pod.container_count,
            repr(pod.node_selector),
            repr(pod.required_node_affinity),
            repr(pod.tolerations),
            repr(pod.resource_claims),
            repr(pod.raw.get("spec")),
            tuple(keys),
            outcome.validated,
        )

    @staticmethod
    def _names_pod(outcome: PodOutcome) -> bool:
        """Whether a reason names the pod itself (not only its claims): not replayable."""
        keys = [c.key for c in outcome.pod_claims.claims]
        for text in {r for _, r in outcome.reasons}:
            for key in keys:
                text = text.replace(key, "")
            if outcome.pod.key in text:
                return True
        return False

    def _replay(self, outcome: PodOutcome, seen: tuple) -> None:
        """This pod's attempt, from the attempt of a pod of the same shape in the same state:
        the same targets refuse it with the same words, naming its own claims."""
        _, claim_keys, reasons, funnel_log, validated, dfs_nodes = seen
        names = {a: b.key for a, b in zip(claim_keys, outcome.pod_claims.claims, strict=True)}
        words: dict[str, str] = {}

        def renamed(text: str) -> str:
            hit = words.get(text)
            if hit is None:
                hit = text
                for a, b in names.items():
                    hit = hit.replace(f"claim {a}", f"claim {b}")
                words[text] = hit
            return hit

        outcome.attempts += 1
        outcome.reasons = [(t, renamed(r)) for t, r in reasons]
        outcome.funnel_log = [
            (t, f, names.get(c or f.claim, c or f.claim)) for t, f, c in funnel_log
        ]
        if validated and not outcome.validated:
            self._mark_validated(outcome)
        outcome.error = explain.summarize(outcome.reasons)
        outcome.claim_states = {c.key: self.claim_state(c) for c in outcome.pod_claims.claims}
        outcome.dfs_nodes = dfs_nodes
        self.allocator.dfs_nodes += dfs_nodes
        self.replayed += 1

    def _attempt(self, outcome: PodOutcome) -> bool:
        pod = outcome.pod
        outcome.attempts += 1
        outcome.reasons = []
        outcome.funnel_log = []
        outcome.error = None
        claims = outcome.pod_claims.claims
        pod_node = self.trace.add(None, "pod", pod.key) if self.trace.enabled else -1
        if outcome.pod_claims.error is not None:
            outcome.error = outcome.pod_claims.error
            outcome.funnel_log = [("", f, None) for f in _claim_error_funnels(outcome)]
            self.trace.set(pod_node, "failed", "claim", outcome.error)
            return False
        shared = self._shared_mapping_problem(outcome)
        if shared is not None:
            # Pod-level, like kube-scheduler's PreFilter: no node can change it.
            outcome.error = shared
            outcome.claim_states = {c.key: self.claim_state(c) for c in claims}
            self.trace.set(pod_node, "failed", "node-resources", shared)
            return False
        requests = pod_requests(pod)
        extended = outcome.pod_claims.extended
        if extended is not None:
            # DRAExtendedResource: where DRA serves them, not counted against allocatable.
            requests = extended.without(requests)
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
        specs = self._refusal_specs(claims)
        funnels = outcome.funnel_log
        self._counted_out = []
        for target in self.existing:
            if bounds is None and counting and self._is_validated(outcome):
                bounds = self.counter.bounds
            native = extended.native(target.allocatable) if extended is not None else None
            if native:
                # A node offering some of them natively: counted there, the claim asks for
                # the rest (none of the shortcuts below knows this claim).
                reason = self._try_existing(
                    target,
                    outcome,
                    merged(requests, extended.native_requests(native)),
                    terms if check_terms else None,
                    pod_node,
                    claims=extended.claims(claims, native),
                )
                if reason is None:
                    return self._placed(outcome, target, pod_node)
                outcome.reasons.append((target.reason_target, reason))
                continue
            if fast and target.open_to_all and (bounds is not None or specs):
                available = target.available
                for name, value in wanted:
                    if value > available.get(name, 0):
                        break
                else:
                    if bounds is not None:
                        bound = bounds.get(target.id)
                        if bound is not None and needed > bound:
                            reasons.append(
                                (target.reason_target, self._device_reason(target, needed, bound))
                            )
                            self._counted_out.append((len(funnels), target, -1))
                            funnels.append(None)  # its funnel, if the pod fails everywhere
                            continue
                    if specs:
                        refused = self._funnel_refusal(target, specs, outcome)
                        if refused is not None:
                            reasons.append((target.reason_target, refused))
                            continue
            reason = self._try_existing(
                target,
                outcome,
                requests,
                terms if check_terms else None,
                pod_node,
                needed if bounds is not None else 0,
                bounds,
                specs,
            )
            if reason is None:
                return self._placed(outcome, target, pod_node)
            outcome.reasons.append((target.reason_target, reason))

        quick = self.nodeclaim_caches and not self.trace.enabled
        deferred: list[tuple[int, int, object]] = []  # (place in reasons, in funnels, target)
        shape = self._shape(outcome) if quick and self.node_claims else None
        for nc in sorted(self.node_claims, key=lambda n: (len(n.pods), n.order)):
            self.allocator.last_funnels = []
            reason = self._try_in_flight(nc, outcome, requests, terms, pod_node, quick, shape)
            if reason is None:
                return self._placed(outcome, nc, pod_node)
            if reason is _DEFERRED:  # its words and funnels come if the pod fails everywhere
                deferred.append((len(outcome.reasons), len(outcome.funnel_log), nc))
                outcome.reasons.append((nc.reason_target, reason))
                continue
            outcome.reasons.append((nc.reason_target, reason))
            funnels.extend((nc.reason_target, f, None) for f in self.allocator.last_funnels)

        for plan in self.pools:
            self.allocator.last_funnels = []
            reason, nc = self._try_new(plan, outcome, requests, terms, pod_node)
            if nc is not None:
                return self._placed(outcome, nc, pod_node)
            if reason is _DEFERRED:
                deferred.append((len(outcome.reasons), len(outcome.funnel_log), plan))
                outcome.reasons.append((f"nodepool/{plan.pool.name}", reason))
                continue
            outcome.reasons.append((f"nodepool/{plan.pool.name}", reason))
            pool = f"nodepool/{plan.pool.name}"
            funnels.extend((pool, f, None) for f in self.allocator.last_funnels)

        if deferred:
            self._explain_deferred(outcome, deferred, requests, terms)
        self._explain_counted_out(outcome, specs)
        outcome.error = explain.summarize(outcome.reasons)
        outcome.claim_states = {c.key: self.claim_state(c) for c in claims}
        self.trace.set(pod_node, "failed", "unschedulable", outcome.error)
        return False

    def _placed(self, outcome: PodOutcome, target, pod_node: int) -> bool:
        self.state_version += 1
        outcome.scheduled = True
        outcome.target = target
        outcome.error = None
        outcome.reasons = []
        outcome.funnel_log = []
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
            state = self.claim_state(claim)
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
        from allocator.features.nodeallocatable import claim_maps_node_resources

        features = self.allocator.features
        return features is not None and claim_maps_node_resources(
            features.devices, self.allocator.pipeline.gates, devices, templates_by_it
        )

    def _to_allocate(self, claims: list[ResourceClaim]) -> list[ResourceClaim]:
        """The claims the DFS will have to place (for the device-count pre-check)."""
        return [c for c in claims if self.claim_state(c) in ("unallocated", "reallocated")]

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
        specs: list | None = None,
        claims: list[ResourceClaim] | None = None,
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
                node = -1
                if self.trace.enabled:
                    node = self.trace.add(
                        pod_node, "target", target.trace_label, "failed", "devices", reason
                    )
                self._counted_out.append((len(outcome.funnel_log), target, node))
                outcome.funnel_log.append(None)  # its funnel, if the pod fails everywhere
                return reason
        if claims is None:
            claims = outcome.pod_claims.claims
        dra: Resources = {}
        result = None
        if claims:
            if specs and not self.trace.enabled:
                refused = self._funnel_refusal(target, specs, outcome)
                if refused is not None:
                    return refused
            node = self._target_trace(pod_node, target.trace_label)
            try:
                result = self.allocator.allocate(
                    target,
                    claims,
                    trace=self.trace,
                    trace_parent=node if node >= 0 else None,
                    pod=outcome.pod,
                )
            except AllocationError as err:
                self._note_validation(outcome, err)
                self._remember(target, claims, err)
                outcome.funnel_log.extend((target.reason_target, f, None) for f in err.funnels)
                if self.trace.enabled:
                    self._trace_funnels(node, err)
                self.trace.set(node, "failed", _target_code(err), str(err))
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

    def _explain_deferred(
        self,
        outcome: PodOutcome,
        deferred: list[tuple[int, int, object]],
        requests: Resources,
        terms: list[Requirements],
    ) -> None:
        """The words and funnels of the NodeClaim refusals found quickly, now that the pod
        failed everywhere: each target is asked again in full, in the same state (nothing was
        committed since), so the words are those a full attempt gives. DFS nodes are counted
        once (by the quick attempt)."""
        allocator = self.allocator
        nodes = allocator.dfs_nodes
        # From the last: a funnel list grows where an earlier target's funnels go.
        for place, funnel_place, target in reversed(deferred):
            allocator.last_funnels = []
            if isinstance(target, PoolPlan):
                label = f"nodepool/{target.pool.name}"
                reason, _ = self._try_new(
                    target, outcome, requests, terms, -1, False, explain_only=True
                )
            else:
                label = target.reason_target
                try:
                    self._plan(
                        target.id,
                        target.node_pool,
                        target.requirements,
                        target.candidates,
                        target.requests,
                        outcome,
                        requests,
                        terms,
                        -1,
                    )
                    reason = ""  # cannot happen: refused in this very state
                except AllocationFailure as failure:
                    reason = str(failure)
            outcome.reasons[place] = (label, reason)
            outcome.funnel_log[funnel_place:funnel_place] = [
                (label, f, None) for f in allocator.last_funnels
            ]
        allocator.dfs_nodes = nodes

    # --- refusing by the funnel: a cached count stage refuses without a search ---------------

    def invalidate_funnels(self) -> None:
        """Forget every cached refusal and replayable attempt: call it after changing the
        allocation state other than through a placement (a trial that frees devices ...)."""
        self._funnels.clear()
        self._shapes.clear()
        self._nc_refusals.clear()
        self._allocate_refusals.clear()
        if self.allocator.fresh_funnels is not None:
            self.allocator.fresh_funnels.clear()
        self._cluster_version += 1
        self._releases += 1
        self.state_version += 1

    def _refusal_specs(self, claims: list[ResourceClaim]) -> list | None:
        """What the count stage of a pod's Allocate reads, pod-independently: per claim its key,
        spec key and ExactCount requests (name, count), in search order. None when a claim is
        not simply unallocated (Allocate would classify it, re-use its devices ...) or has no
        spec key (All mode depends on the pools): such pods always run Allocate."""
        if not self.funnel_refusal or not claims:
            return None
        out = []
        for claim in claims:
            if self.claim_state(claim) != ("unallocated"):
                return None
            key = self._funnel_key(claim)
            if key is None:
                return None
            requests = [
                (r.name, r.exactly.count, self._funnels.setdefault((key, r.name), {}))
                for r in claim.spec.requests
                if r.exactly is not None
            ]
            out.append((claim.key, key, requests))
        return out

    def _funnel_key(self, claim: ResourceClaim) -> tuple | None:
        """What a claim's funnels depend on: its namespace and its spec's content (claims from
        one template share it; a claim changed for a trial does not). None for All mode."""
        hit = self._funnel_keys.get(id(claim))
        if hit is None or hit[0] is not claim:
            key = None if _spec_key(claim) is None else (claim.namespace, repr(claim.spec))
            hit = self._funnel_keys[id(claim)] = (claim, key)
        return hit[1]

    def _version(self, target, reach: tuple[PoolKey, ...]) -> int:
        # Every count only grows: an equal sum means nothing in reach changed.
        total = self._releases + self._target_versions.get(target.id, 0)
        versions = self._pool_versions
        for k in reach:
            total += versions.get(k, 0)
        return total

    def _funnel_refusal(self, target, specs: list, outcome: PodOutcome) -> str | None:
        """The refusal Allocate would return on ``target``, from cached funnels, or None when
        it is not known (or the requests pass the count stage: the search must run)."""
        if len(target.instance_types) > 1:
            return None
        tid = target.id
        pool_versions = self._pool_versions
        base = self._releases + self._target_versions.get(tid, 0)
        for claim_key, _, requests in specs:
            for name, count, table in requests:
                hit = table.get(tid)
                if hit is None:
                    return None
                version = base  # _version, inlined: this runs once per pod and node
                for k in hit[0]:
                    version += pool_versions.get(k, 0)
                if version != hit[1]:
                    return None
                funnel = hit[2]
                if funnel is None:
                    continue
                if not outcome.validated:
                    self._mark_validated(outcome)
                outcome.funnel_log.append((target.reason_target, funnel, claim_key))
                # Many nodes refuse the same way: one string for all of them.
                key = (claim_key, hit[3])
                reason = self._refusal_words.get(key)
                if reason is None:
                    it = target.instance_types[0] if target.instance_types else ""
                    # Allocate's words exactly: one instance type, refused at the count stage.
                    reason = self._refusal_words[key] = explain.dra_reason(
                        "no instance type can satisfy the allocation: "
                        + (f"{it}: " if it else "")
                        + count_message(claim_key, name, count, funnel)
                    )
                return reason
        return None

    def _explain_counted_out(self, outcome: PodOutcome, specs: list | None) -> None:
        """Funnels of the nodes the device-count pre-check refused (nothing was searched
        there), for a pod that failed everywhere: from the cache, or by an Allocate that only
        explains (it changes no state and counts no DFS nodes)."""
        claims = outcome.pod_claims.claims
        allocator = self.allocator
        log = outcome.funnel_log
        uneven = False
        for place, target, node in self._counted_out:
            found = self._cached_funnels(target, specs) if specs else None
            if found is None:
                nodes = allocator.dfs_nodes
                try:
                    allocator.allocate(target, claims, pod=outcome.pod)
                    found = []  # cannot happen (the pre-check is sound); explain nothing
                except AllocationError as err:
                    self._remember(target, claims, err)
                    found = [(target.reason_target, f, None) for f in err.funnels]
                finally:
                    allocator.dfs_nodes = nodes
            if node >= 0 and found:
                # Refused by counting: the trace node shows the funnel and its decisive cause.
                from allocator.explanation.funnel import decisive_reason, funnel_json

                funnels = [e[1].for_claim(e[2]) if e[2] else e[1] for e in found]
                self.trace.nodes[node]["funnel"] = [funnel_json(f) for f in funnels]
                self.trace.nodes[node]["reason"] = decisive_reason(funnels[0]) or "devices"
            if len(found) == 1:
                log[place] = found[0]
            else:
                log[place] = found  # type: ignore[call-overload]
                uneven = True
        if uneven:  # in the order the targets were tried
            outcome.funnel_log = [
                x for e in log for x in (e if isinstance(e, list) else (e,)) if x is not None
            ]
        self._counted_out = []

    def _cached_funnels(self, target, specs: list) -> list[tuple] | None:
        """The funnel of the first request the count stage refuses, from the cache."""
        if len(target.instance_types) > 1:
            return None
        for claim_key, _, requests in specs:
            for _, _, table in requests:
                hit = table.get(target.id)
                if hit is None or self._version(target, hit[0]) != hit[1]:
                    return None
                if hit[2] is not None:
                    return [(target.reason_target, hit[2], claim_key)]
        return None

    def _cause(self, funnel: Funnel) -> str:
        """``cause_text`` of a cached funnel, computed once per funnel object."""
        hit = self._causes.get(id(funnel))
        if hit is None or hit[0] is not funnel:
            from allocator.explanation.funnel import cause_text

            hit = self._causes[id(funnel)] = (funnel, cause_text(funnel))
        return hit[1]

    def _remember(self, target, claims: list[ResourceClaim], err: AllocationError) -> None:
        """Cache the count stage of a failed Allocate on a single-instance-type target."""
        counted = err.counted
        if not self.funnel_refusal or counted is None or len(target.instance_types) > 1:
            return
        reach = err.reach
        version = self._version(target, reach)
        it = target.instance_types[0] if target.instance_types else ""
        for index, name, funnel in counted:
            key = self._funnel_key(claims[index])
            if key is None:
                continue
            words = None
            if funnel is not None:
                # What the refusal's words depend on besides the claim, as a small int.
                shape = (it, name, funnel.usable, self._cause(funnel))
                words = self._word_shapes.setdefault(shape, len(self._word_shapes))
            table = self._funnels.setdefault((key, name), {})
            table[target.id] = (reach, version, funnel, words)

    def _trace_funnels(self, node: int, err: AllocationError) -> None:
        from allocator.explanation.funnel import funnel_json

        funnels = err.funnels
        if node >= 0 and funnels:
            self.trace.nodes[node]["funnel"] = [funnel_json(f) for f in funnels]

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
        quick: bool = False,
        shape: tuple | None = None,
    ) -> str | None:
        """None when placed; the refusal's words, or ``_DEFERRED`` when ``quick``. With
        ``shape`` (the pod's, see ``_shape``) a refusal in an unchanged state is reused."""
        taint = untolerated_taint(outcome.pod.tolerations, nc.taints)
        if taint is not None:
            reason = f"did not tolerate taint {format_taint(taint)}"
            return self._refused(pod_node, nc, "taint", reason)
        key = None
        if quick and shape is not None:
            key = (nc.id, shape)
            nc_version = self._nc_versions.get(nc.id, 0)
            hit = self._nc_refusals.get(key)
            if hit is not None and hit[0] == nc_version and hit[2] == self._reach_version(hit[1]):
                _, _, _, reason, nodes, validated = hit
                self.allocator.dfs_nodes += nodes
                if validated and not outcome.validated:
                    self._mark_validated(outcome)
                return reason
            nodes = self.allocator.dfs_nodes
            validated = outcome.validated
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
                quick=quick,
            )
        except AllocationFailure as failure:
            reason = _DEFERRED if failure.deferred else str(failure)
            # Reused: a finished search's refusal, or one found before Allocate ran (it read
            # nothing in-cluster); not a timeout, a validation error or a refusal of the result.
            if (
                key is not None
                and (failure.reach == () or failure.deferred)
                and (failure.reach is not None)
            ):
                self._nc_refusals[key] = (
                    nc_version,
                    failure.reach,
                    self._reach_version(failure.reach),
                    reason,
                    self.allocator.dfs_nodes - nodes,
                    outcome.validated and not validated,
                )
            self.trace.set(node, "failed", failure.code, reason)
            return reason
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
        quick: bool = False,
        explain_only: bool = False,
    ) -> tuple[str, InFlightNodeClaim | None]:
        """``explain_only``: the words of a refusal found earlier in this state (nothing is
        created even if the NodePool could take the pod)."""
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
        node = self._target_trace(pod_node, new_nodeclaim_label(pool.name, name))
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
                quick=quick,
            )
        except AllocationFailure as failure:
            if failure.deferred:
                return _DEFERRED, None
            self.trace.set(node, "failed", failure.code, str(failure))
            return explain.nodepool_reason(pool.name, str(failure), overhead), None
        if explain_only:
            return "", None
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
        *,
        claims: list[ResourceClaim] | None = None,
        quick: bool = False,
    ) -> _Plan:
        """Karpenter's NodeClaim.CanAdd with the DRA steps of Constraint Propagation.

        ``claims``: the pod's claims with the scheduler's extended resource claim, if any (None:
        the pod's own). ``quick``: Allocate first runs without building its refusal's words; a
        refusal raises a deferred AllocationFailure (explained later, see
        ``_explain_deferred``); a success is the result (Allocate words the reasons of the
        instance types it refused, as a full run gives them).
        """
        extended = outcome.pod_claims.extended
        if extended is not None and claims is None and candidates:
            from allocator.features.extendedresources import instance_type_groups

            groups = instance_type_groups(extended, candidates)
            if len(groups) > 1 or groups[0][0]:
                return self._plan_extended(
                    groups,
                    nc_id,
                    node_pool,
                    base,
                    base_requests,
                    outcome,
                    requests,
                    terms,
                    trace_node,
                )
        if claims is None:
            claims = outcome.pod_claims.claims
        term, reason = first_compatible_term(base, terms, WELL_KNOWN_LABELS)
        if term is None:
            raise AllocationFailure(f"incompatible requirements, {reason}", "requirements")
        reqs = base.copy()
        reqs.add(term)
        total = merged(base_requests, requests)
        filtered = filter_instance_types(candidates, reqs, total, self._filter_memo)
        if not filtered.remaining:
            raise AllocationFailure(_no_instance_type(total, reqs, filtered), "instance-types")
        stages = [(FILTER_STAGE, candidates, reqs, total, filtered.remaining)]
        if not claims:
            return _Plan(reqs, filtered.remaining, total, None, {}, term=term, stages=stages)
        probe = Probe(nc_id, node_pool, reqs, filtered.remaining)
        if quick:
            if self._count_bound_refuses(probe, outcome, claims):
                # Allocate would refuse every instance type at its count stage (no DFS node),
                # past Request Validation: the pod counts as validated, as then.
                self._mark_validated(outcome)
                raise AllocationFailure("", "no-instance-type", True)
            # A success found without words is the one found with them (Allocate words the
            # instance types it refused then): it is not run again.
            result = self._quick_allocate(probe, outcome, term, claims)
        else:
            try:
                result = self.allocator.allocate(
                    probe,
                    claims,
                    trace=self.trace,
                    trace_parent=trace_node if trace_node >= 0 else None,
                    pod=outcome.pod,
                )
            except AllocationError as err:
                self._note_validation(outcome, err)
                raise AllocationFailure(
                    explain.dra_reason(str(err)), err.code, reach=None
                ) from None
        self._mark_validated(outcome)
        allowed = set(result.instance_types)
        kept = [info for info in filtered.remaining if info.name in allowed]
        if not kept:
            raise AllocationFailure(
                explain.dra_reason("no instance type can satisfy the allocation"),
                "no-instance-type",
                reach=None,
            )
        # Requirement tightening, then the FULL instance type filter again (design:
        # Constraint Propagation): zones, offerings and resources may all change.
        tightened = reqs.copy()
        tightened.add(result.requirements)
        dra = dra_node_resources(result)
        problem = pod_level_problem(outcome.pod, result)
        if problem is not None:
            raise AllocationFailure(explain.dra_reason(problem), "node-resources", reach=None)
        refiltered = filter_instance_types(kept, tightened, merged(total, dra), self._filter_memo)
        if not refiltered.remaining:
            raise AllocationFailure(
                explain.dra_reason(_no_instance_type(merged(total, dra), tightened, refiltered)),
                "instance-types",
                reach=None,
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

    def _plan_extended(
        self, groups, nc_id, node_pool, base, base_requests, outcome, requests, terms, trace_node
    ) -> _Plan:
        """DRAExtendedResource on a NodeClaim whose instance types offer some of the pod's
        extended resources natively: each group of instance types offering the same ones is
        planned with those counted against capacity and a claim for the rest; groups are tried
        cheapest offering first, the first that takes the pod wins (the NodeClaim keeps only
        its instance types); when none does, the first group's refusal is reported."""
        from allocator.scheduling.fit import cheapest_offering

        extended = outcome.pod_claims.extended

        def price(group) -> float:
            prices = [cheapest_offering(info, base) for info in group[1]]
            return min((p for p in prices if p is not None), default=float("inf"))

        first: AllocationFailure | None = None
        ordered = sorted(groups, key=price)
        for native, infos in ordered:
            try:
                plan = self._plan(
                    nc_id,
                    node_pool,
                    base,
                    infos,
                    base_requests,
                    outcome,
                    merged(requests, extended.native_requests(native)),
                    terms,
                    trace_node,
                    claims=extended.claims(outcome.pod_claims.claims, native),
                )
            except AllocationFailure as failure:
                first = first or failure
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
        raise first

    def _count_bound_refuses(
        self, probe: Probe, outcome: PodOutcome, claims: list[ResourceClaim]
    ) -> bool:
        """The device-count bound of a NodeClaim: when NodeClaims reach no
        in-cluster device, a request for more devices than an instance type has template
        devices left on this NodeClaim is refused by Allocate's count stage there. True when
        that holds for every candidate; only for pods whose claim specs passed Request
        Validation (so Allocate would get that far) and are simply unallocated."""
        if self.nodeclaims_reach_cluster or not self._is_validated(outcome):
            return False
        need = 0
        for claim in claims:
            if self.claim_state(claim) != "unallocated":
                return False
            for r in claim.spec.requests:
                ex = r.exactly
                if ex is not None and not ex.admin_access and ex.allocation_mode != "All":
                    need = max(need, ex.count)
        if not need:
            return False
        held = self.allocator.tracker.templates.get(probe.id, {})
        for info in probe.candidates:
            total = self._template_totals.get(info.name, -1)
            if total == -1:
                devices = [d for t in info.it.resource_slice_templates for d in t.devices]
                multi = any(d.allow_multiple_allocations for d in devices)
                total = self._template_totals[info.name] = None if multi else len(devices)
            if total is None or total - len(held.get(info.name, ())) >= need:
                return False
        return True

    def _reach_version(self, reach: tuple | None) -> int:
        """Grows whenever devices of these in-cluster pools are taken or freed (None: any)."""
        if reach is None:
            return -1 - self._cluster_version
        versions = self._pool_versions
        total = self._releases  # freed in-cluster devices: which pools is not tracked
        for k in reach:
            total += versions.get(k, 0)
        return total

    def _quick_allocate(
        self, probe: Probe, outcome: PodOutcome, term: Requirements, claims: list[ResourceClaim]
    ):
        """Allocate without words: its result, or a deferred AllocationFailure. A refusal
        is reused while nothing it read changed: the NodeClaim (its version), in-cluster
        devices (the cluster version), the claims' specs, the requirements (the pod's term
        must be empty: the NodeClaim's own then) and the instance types left to try."""
        allocator = self.allocator
        key = None
        if len(term) == 0 and probe.id in self._nc_versions:
            specs = tuple(self._funnel_key(c) for c in claims)
            if None not in specs and all(self.claim_state(c) == "unallocated" for c in claims):
                key = (probe.id, specs, tuple(probe.instance_types))
                nc_version = self._nc_versions[probe.id]
                hit = self._allocate_refusals.get(key)
                if (
                    hit is not None
                    and hit[0] == nc_version
                    and hit[2] == self._reach_version(hit[1])
                ):
                    _, reach, _, code, nodes = hit
                    allocator.dfs_nodes += nodes
                    if code != "validation":
                        self._mark_validated(outcome)
                    raise AllocationFailure("", code, True, reach)
        nodes = allocator.dfs_nodes
        try:
            result = allocator.allocate(probe, claims, pod=outcome.pod, explain=False)
        except AllocationError as err:
            self._note_validation(outcome, err)
            code = err.code
            # Only a finished search's refusal is reused (not a validation error or a timeout).
            reach = err.reach
            if key is not None and reach is not None:
                self._allocate_refusals[key] = (
                    nc_version,
                    reach,
                    self._reach_version(reach),
                    code,
                    allocator.dfs_nodes - nodes,
                )
            raise AllocationFailure("", code, True, reach) from None
        return result

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
        self._nc_versions[nc.id] = self._nc_versions.get(nc.id, 0) + 1
        for name in sorted(before - kept):
            self.allocator.release_instance_type(nc.id, name)
            if nc.id in self._holds_in_cluster or not self.nodeclaim_caches:
                # Freed in-cluster devices (or shares) may be in reach of any target; a
                # NodeClaim holding template devices only frees nothing another target sees.
                self._releases += 1
                self._cluster_version += 1
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
        # Every pool a committed device is in, and the NodeClaim's own templates, changed.
        versions = self._pool_versions
        for claim in result.claims:
            for d in claim.devices:
                key = PoolKey(d.driver, d.pool)
                versions[key] = versions.get(key, 0) + 1
        nc_id = result.allocation.node_claim_id
        self._target_versions[nc_id] = self._target_versions.get(nc_id, 0) + 1
        if any(d.source != "template" for claim in result.claims for d in claim.devices):
            self._cluster_version += 1  # in-cluster devices taken (NodeClaim refusals)
            self._holds_in_cluster.add(nc_id)
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

    def _note_validation(self, outcome: PodOutcome, err: AllocationError) -> None:
        """The device-count pre-check is used only for pods whose claims passed Request
        Validation once, so that a claim the allocator rejects (``exceeding maximum``, a
        missing DeviceClass ...) is reported with the allocator's own words on every node."""
        if err.code != "validation":
            self._mark_validated(outcome)

    def _mark_validated(self, outcome: PodOutcome) -> None:
        outcome.validated = True  # the pod's own: see PodOutcome.seen_validated
        for claim in outcome.pod_claims.claims:
            key = _spec_key(claim)
            if key is not None and key not in self._validated_specs:
                self._validated_specs.add(key)
                self.state_version += 1  # the device-count pre-check applies to more pods

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


def _target_code(err: AllocationError) -> str:
    """A target refused by counting carries the decisive cause's code (selector, counter ...)."""
    from allocator.explanation.funnel import decisive_reason

    code = err.code
    funnels = err.funnels
    if code == "no-instance-type" and funnels and all(f.whole is None for f in funnels):
        return decisive_reason(funnels[0]) or code
    return code


def _claim_error_funnels(outcome: PodOutcome) -> list[Funnel]:
    """A pod whose claims cannot even be generated or found: refused as a whole."""
    from allocator.explanation.funnel import whole_funnel

    error = outcome.pod_claims.error or ""
    claims = outcome.pod_claims.claims
    claim = claims[0].key if claims else outcome.pod.key
    return [whole_funnel(claim, "", 0, None, error)]


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
