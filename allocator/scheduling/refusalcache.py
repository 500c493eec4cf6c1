"""Refusals remembered within one run: a refusal is not searched for again while nothing it
read has changed.

Four memories, each keyed by what the refusal depends on and stamped with the versions of
what it read (versions only grow, so an equal stamp means nothing changed):

* count-stage funnels of existing nodes, per claim spec and request: a node whose cached count
  stage shows that a pod's requests cannot be met is refused without running Allocate there;
* refusals of the run's NodeClaims, per pod shape (with their words and funnels once a pod of
  that shape failed everywhere: explained once per cause, shared by the pods that see it), and
  of Allocate on a NodeClaim, per claim specs and instance types;
* the attempt of a pod of the same shape in the same state (replicas of one workload): it is
  replayed, renamed, instead of being run again;
* the scheduler's state version, so that a retry in an unchanged state is skipped.

Speed only: with ``enabled`` / ``nodeclaim_caches`` off every decision is the same (the
property tests in tests/explanation and tests/scheduling compare both).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import field
from itertools import repeat
from operator import sub

from allocator.errors import AllocationError
from allocator.funnel import Funnel, count_message, renamed
from allocator.model import Pod, PoolKey, ResourceClaim
from allocator.pools import TEMPLATE
from allocator.records import record
from allocator.scheduling import explain
from allocator.scheduling.decision import Refusal
from allocator.scheduling.fit import InstanceTypeInfo, NoInstanceType, info_name
from allocator.scheduling.poddata import FunnelEntry, PodOutcome, ShapeAttempt

ClaimState = Callable[[ResourceClaim], str]


@record
class CountStage:
    """A failed Allocate's count stage for one request on one single-instance-type target."""

    reach: tuple[PoolKey, ...]  # the in-cluster pools it read
    version: int  # RefusalCache.version of the target and ``reach`` then
    funnel: Funnel | None  # None: the request passed the count stage (the search must run)
    words: int | None  # what the refusal's words depend on besides the claim, as a small int


@record
class NodeClaimRefusal:
    """A NodeClaim of this run refused a pod of this shape."""

    nc_version: int
    reach: tuple
    reach_version: int
    reason: str  # its words, or "" when found without them
    deferred: bool
    dfs_nodes: int
    validated: bool  # the attempt marked the pod validated
    unfit: NoInstanceType | None  # the refusal's Refusal.unfit
    # Its words and funnels, built in full for the first pod of this shape that failed
    # everywhere while this refusal held (the state it read is the same for the next one).
    explained: ExplainedRefusal | None = None


@record
class ExplainedRefusal:
    """A deferred NodeClaim refusal in words, for the pod whose claims are ``claim_keys``;
    another pod of the same shape gets it with its own claims named instead."""

    claim_keys: list[str]
    reason: str
    funnels: list[FunnelEntry]

    def for_claims(self, claim_keys: list[str], code: str = "") -> Refusal:
        if claim_keys == self.claim_keys:
            return Refusal(self.reason, code, list(self.funnels), reach=None)
        names = dict(zip(self.claim_keys, claim_keys, strict=True))
        reason = renamed(self.reason, names)
        funnels = [(t, f, names.get(c or f.claim, c or f.claim)) for t, f, c in self.funnels]
        return Refusal(reason, code, funnels, reach=None)

    @staticmethod
    def shareable(refusal: Refusal, pod_key: str, claim_keys: list[str]) -> bool:
        """Whether the words name the pod only through its claims (``claim <key>``, as the
        renaming above assumes): a refusal naming the pod itself is not another pod's."""
        texts = [refusal.reason]
        texts += [f.whole for _, f, _ in refusal.funnels if f.whole]
        for text in texts:
            for key in claim_keys:
                text = text.replace(f"claim {key}", "")
            if pod_key in text or any(key in text for key in claim_keys):
                return False
        return True


@record
class AllocateRefusal:
    """Allocate refused these claim specs on a NodeClaim with these instance types."""

    nc_version: int
    reach: tuple
    reach_version: int
    code: str
    dfs_nodes: int
    # The refusal in words, once a failed pod asked for them (another pod with claims of the
    # same specs gets them with its own claims named).
    explained: ExplainedRefusal | None = None


@record
class WordedRefusal:
    """Allocate's answer, in words, over every instance type of a NodeClaim (``error`` None:
    it did not refuse): pods of one workload but of other sizes keep some of them each, and
    their refusals are this one narrowed (``allocator.narrowed``)."""

    nc_version: int
    reach: tuple
    reach_version: int
    error: AllocationError | None
    claim_keys: list[str]
    # Narrowed, per instance types kept (None: not narrowed); and the refusals of single
    # instance types searched alone for it (None: not refused), in the words of claim_keys.
    narrowed: dict[tuple, ExplainedRefusal | None] = field(default_factory=dict)
    alone: dict[str, AllocationError | None] = field(default_factory=dict)


@record
class RefusalCache:
    """Refusals remembered while nothing they read changed (speed only)."""

    enabled: bool = True  # count-stage funnels, retry skipping, replay (SimulationOptions)
    nodeclaim_caches: bool = True  # NodeClaim refusals found without words first, remembered
    # A NodeClaim's refusal by its instance type filter, found without words, is worded from
    # what the filter recorded (Refusal.unfit) rather than asked again in full.
    explain_recorded: bool = False
    # Whether a NodeClaim can reach any in-cluster device (a slice not pinned to a node): the
    # device-count bound of NodeClaims counts template devices only, so needs False.
    nodeclaims_reach_cluster: bool = True
    state_version: int = 0  # anything a pod's attempt reads changed (retry skipping)
    replayed: int = 0  # attempts replayed from a pod of the same shape (bench, tests)
    # (claim spec key, request) -> target id -> CountStage.
    funnels: dict[tuple, dict[str, CountStage]] = field(default_factory=dict)
    # (NodeClaim id, pod shape) -> NodeClaimRefusal.
    nodeclaim_refusals: dict[tuple, NodeClaimRefusal] = field(default_factory=dict)
    # (NodeClaim id, claim funnel keys) whose device-count bound refuses every one of the
    # NodeClaim's instance types: it lasts as long as the NodeClaim (see NodeClaim._lasting).
    lasting_bounds: set[tuple] = field(default_factory=set)
    # (NodeClaim id, claim spec keys, instance types) -> AllocateRefusal.
    allocate_refusals: dict[tuple, AllocateRefusal] = field(default_factory=dict)
    # NodeClaim id -> claim spec keys -> the worded refusal over all its instance types (a
    # NodeClaim's are dropped when it changes).
    _worded: dict[str, dict[tuple, WordedRefusal]] = field(default_factory=dict)
    # NodeClaim._alike_key -> words over all the instance types that NodeClaims alike share.
    _alike_words: dict[tuple, WordedRefusal] = field(default_factory=dict)
    shapes: dict[tuple, ShapeAttempt] = field(default_factory=dict)  # pod shape -> attempt
    validated_specs: set[tuple] = field(default_factory=set)
    # Versions: a NodeClaim's grows whenever it takes a pod; the cluster's whenever in-cluster
    # devices are committed or freed; a pool's (and a target's own templates') on every commit
    # to it; ``releases`` on every release of an instance type that may free in-cluster devices.
    _nc_versions: dict[str, int] = field(default_factory=dict)
    _cluster_version: int = 0
    _pool_versions: dict[PoolKey, int] = field(default_factory=dict)
    _target_versions: dict[str, int] = field(default_factory=dict)
    _releases: int = 0
    _holds_in_cluster: set[str] = field(default_factory=set)  # given in-cluster devices here
    # Words, computed once: (claim, words shape id) -> reason; words shapes; claim -> key.
    _refusal_words: dict[tuple, str] = field(default_factory=dict)
    # (resource, milli-units) -> its canonical quantity (fit.format_resources' words).
    quantity_words: dict[tuple[str, int], str] = field(default_factory=dict)
    _word_shapes: dict[tuple, int] = field(default_factory=dict)
    _funnel_keys: dict[int, tuple] = field(default_factory=dict)  # id(claim) -> (claim, key)
    _causes: dict[int, tuple[Funnel, str]] = field(default_factory=dict)
    _device_refusals: dict[tuple, Refusal] = field(default_factory=dict)
    _template_totals: dict[str, int | None] = field(default_factory=dict)
    # NodeClaim id -> (its version, its instance types, the most template devices one of
    # them has left; None: one allows multiple allocations).
    _templates_left: dict[str, tuple[int, list, int | None]] = field(default_factory=dict)
    # The last pod ``shape`` read and what it read of it: a pod's attempt asks twice (before
    # its replay and for its PodData), and its fields do not change in a run (a relaxed pod
    # is a new Pod).
    _last_pod: tuple[Pod, tuple] | None = None

    @property
    def epoch(self) -> int:
        """Grows whenever a target's answers may change other than by a placement on it: an
        instance type released with in-cluster devices, caches invalidated."""
        return self._releases

    def invalidate(self) -> None:
        """Forget every cached refusal and replayable attempt (the allocation state changed
        other than through a placement: a trial freed devices ...)."""
        self.funnels.clear()
        self.shapes.clear()
        self.nodeclaim_refusals.clear()
        self.lasting_bounds.clear()
        self.allocate_refusals.clear()
        self._worded.clear()
        self._alike_words.clear()
        self._templates_left.clear()
        self._cluster_version += 1
        self._releases += 1
        self.state_version += 1

    # --- what changed ----------------------------------------------------------------------

    def committed(self, result) -> None:
        """An allocation was committed: every in-cluster pool a device is in and the target's
        own templates changed. Template devices change no pool another target reaches (a
        refusal's reach lists in-cluster pools only): the target's version says they did."""
        nc_id = result.allocation.node_claim_id
        self._target_versions[nc_id] = self._target_versions.get(nc_id, 0) + 1
        # Each pool once; a NodeClaim's claim lists its template devices once per instance
        # type (400 in Karpenter's benchmark), none of them counted here.
        in_cluster = {
            (d.driver, d.pool)
            for claim in result.claims
            for d in claim.devices
            if d.source != TEMPLATE
        }
        if not in_cluster:
            return
        versions = self._pool_versions
        for driver, pool in in_cluster:
            key = PoolKey(driver, pool)
            versions[key] = versions.get(key, 0) + 1
        self._cluster_version += 1  # in-cluster devices taken (NodeClaim refusals)
        self._holds_in_cluster.add(nc_id)

    def nodeclaim_changed(self, nc_id: str) -> None:
        self._nc_versions[nc_id] = self._nc_versions.get(nc_id, 0) + 1
        self._worded.pop(nc_id, None)

    def released(self, nc_id: str) -> None:
        """The NodeClaim released an instance type."""
        if nc_id in self._holds_in_cluster or not self.nodeclaim_caches:
            # Freed in-cluster devices (or shares) may be in reach of any target; a NodeClaim
            # holding template devices only frees nothing another target sees.
            self._releases += 1
            self._cluster_version += 1

    def version(self, target_id: str, reach: tuple[PoolKey, ...]) -> int:
        # Every count only grows: an equal sum means nothing in reach changed.
        total = self._releases + self._target_versions.get(target_id, 0)
        versions = self._pool_versions
        for k in reach:
            total += versions.get(k, 0)
        return total

    def reach_version(self, reach: tuple | None) -> int:
        """Grows whenever devices of these in-cluster pools are taken or freed (None: any)."""
        if reach is None:
            return -1 - self._cluster_version
        versions = self._pool_versions
        total = self._releases  # freed in-cluster devices: which pools is not tracked
        for k in reach:
            total += versions.get(k, 0)
        return total

    # --- Request Validation (the device-count pre-check applies to validated pods) ---------

    def mark_validated(self, outcome: PodOutcome) -> None:
        outcome.validated = True  # the pod's own: see PodOutcome.seen_validated
        for claim in outcome.pod_claims.claims:
            key = spec_key(claim)
            if key is not None and key not in self.validated_specs:
                self.validated_specs.add(key)
                self.state_version += 1  # the device-count pre-check applies to more pods

    def note_validation(self, outcome: PodOutcome, err: AllocationError) -> None:
        """The device-count pre-check is used only for pods whose claims passed Request
        Validation once, so that a claim the allocator rejects (``exceeding maximum``, a
        missing DeviceClass ...) is reported with the allocator's own words on every node."""
        if err.code != "validation":
            self.mark_validated(outcome)

    def specs_validated(self, claims: list[ResourceClaim]) -> bool:
        """Every claim shares its spec with a validated one (``mark_validated`` would add
        none)."""
        specs = self.validated_specs
        for claim in claims:
            key = spec_key(claim)
            if key is None or key not in specs:
                return False
        return True

    def is_validated(self, outcome: PodOutcome) -> bool:
        """Validated itself, or every claim shares its spec with a validated one (claims from
        one template). All-mode requests depend on the pools a target reaches: not shared."""
        return outcome.validated or self.specs_validated(outcome.pod_claims.claims)

    # --- count-stage funnels of existing nodes ---------------------------------------------

    def specs(self, claims: list[ResourceClaim], claim_state: ClaimState) -> list | None:
        """What the count stage of a pod's Allocate reads, pod-independently: per claim its
        key, spec key and ExactCount requests (name, count, table), in search order. None when
        a claim is not simply unallocated (Allocate would classify it, re-use its devices ...)
        or has no spec key (All mode depends on the pools): such pods always run Allocate."""
        if not self.enabled or not claims:
            return None
        out = []
        for claim in claims:
            if claim_state(claim) != ("unallocated"):
                return None
            key = self.funnel_key(claim)
            if key is None:
                return None
            requests = [
                (r.name, r.exactly.count, self.funnels.setdefault((key, r.name), {}))
                for r in claim.spec.requests
                if r.exactly is not None
            ]
            out.append((claim.key, key, requests))
        return out

    def funnel_key(self, claim: ResourceClaim) -> tuple | None:
        """What a claim's funnels depend on: its namespace and its spec's content (claims from
        one template share it; a claim changed for a trial does not). None for All mode."""
        hit = self._funnel_keys.get(id(claim))
        if hit is None or hit[0] is not claim:
            key = None if spec_key(claim) is None else (claim.namespace, repr(claim.spec))
            hit = self._funnel_keys[id(claim)] = (claim, key)
        return hit[1]

    def funnel_refusal(self, target, specs: list, outcome: PodOutcome) -> Refusal | None:
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
                version = base  # ``version``, inlined: this runs once per pod and node
                for k in hit.reach:
                    version += pool_versions.get(k, 0)
                if version != hit.version:
                    return None
                funnel = hit.funnel
                if funnel is None:
                    continue
                if not outcome.validated:
                    self.mark_validated(outcome)
                # Many nodes refuse the same way: one string for all of them.
                key = (claim_key, hit.words)
                reason = self._refusal_words.get(key)
                if reason is None:
                    it = target.instance_types[0] if target.instance_types else ""
                    # Allocate's words exactly: one instance type, refused at the count stage.
                    reason = self._refusal_words[key] = explain.dra_reason(
                        "no instance type can satisfy the allocation: "
                        + (f"{it}: " if it else "")
                        + count_message(claim_key, name, count, funnel)
                    )
                return Refusal(reason, funnels=[(target.reason_target, funnel, claim_key)])
        return None

    def cached_funnels(self, target, specs: list) -> list[FunnelEntry] | None:
        """The funnel of the first request the count stage refuses, from the cache."""
        if len(target.instance_types) > 1:
            return None
        for claim_key, _, requests in specs:
            for _, _, table in requests:
                hit = table.get(target.id)
                if hit is None or self.version(target.id, hit.reach) != hit.version:
                    return None
                if hit.funnel is not None:
                    return [(target.reason_target, hit.funnel, claim_key)]
        return None

    def remember(self, target, claims: list[ResourceClaim], err: AllocationError) -> None:
        """Cache the count stage of a failed Allocate on a single-instance-type target."""
        counted = err.counted
        if not self.enabled or counted is None or len(target.instance_types) > 1:
            return
        reach = err.reach
        version = self.version(target.id, reach)
        it = target.instance_types[0] if target.instance_types else ""
        for index, name, funnel in counted:
            key = self.funnel_key(claims[index])
            if key is None:
                continue
            words = None
            if funnel is not None:
                # What the refusal's words depend on besides the claim, as a small int.
                shape = (it, name, funnel.usable, self._cause(funnel))
                words = self._word_shapes.setdefault(shape, len(self._word_shapes))
            table = self.funnels.setdefault((key, name), {})
            table[target.id] = CountStage(reach, version, funnel, words)

    def _cause(self, funnel: Funnel) -> str:
        """``cause_text`` of a cached funnel, computed once per funnel object."""
        hit = self._causes.get(id(funnel))
        if hit is None or hit[0] is not funnel:
            from allocator.funnel import cause_text

            hit = self._causes[id(funnel)] = (funnel, cause_text(funnel))
        return hit[1]

    def device_refusal(self, target, needed: int, bound: int) -> Refusal:
        """A node the device-count pre-check refuses: the same outcome and wording as the DFS
        there (nothing could be allocated). Many nodes refuse alike: one shared Refusal."""
        it = target.instance_types[0] if target.instance_types else target.name
        key = (it, needed, bound)
        refusal = self._device_refusals.get(key)
        if refusal is None:
            reason = explain.dra_reason(
                f"no instance type can satisfy the allocation: {it}: the claims need "
                f"{needed} devices, at most {bound} unallocated devices are reachable from "
                "the node"
            )
            refusal = self._device_refusals[key] = Refusal(reason, "devices", counted=True)
        return refusal

    # --- NodeClaims of this run and new ones ------------------------------------------------

    def nodeclaim_version(self, nc_id: str) -> int:
        return self._nc_versions.get(nc_id, 0)

    def knows_nodeclaim(self, nc_id: str) -> bool:
        return nc_id in self._nc_versions

    def nodeclaim_refusal(self, key: tuple, nc_id: str) -> NodeClaimRefusal | None:
        hit = self.nodeclaim_refusals.get(key)
        if (
            hit is not None
            and hit.nc_version == self._nc_versions.get(nc_id, 0)
            and hit.reach_version == self.reach_version(hit.reach)
        ):
            return hit
        return None

    def remember_nodeclaim_refusal(
        self,
        key: tuple,
        nc_version: int,
        refusal: Refusal,
        dfs_nodes: int,
        validated: bool,
    ) -> None:
        """Reused: a finished search's refusal, or one found before Allocate ran (it read
        nothing in-cluster); not a timeout, a validation error or a refusal of the result."""
        if (refusal.reach == () or refusal.deferred) and refusal.reach is not None:
            self.nodeclaim_refusals[key] = NodeClaimRefusal(
                nc_version,
                refusal.reach,
                self.reach_version(refusal.reach),
                refusal.reason,
                refusal.deferred,
                dfs_nodes,
                validated,
                refusal.unfit,
            )

    def allocate_refusal(self, key: tuple, nc_id: str) -> AllocateRefusal | None:
        hit = self.allocate_refusals.get(key)
        if (
            hit is not None
            and hit.nc_version == self._nc_versions[nc_id]
            and hit.reach_version == self.reach_version(hit.reach)
        ):
            return hit
        return None

    def remember_worded(
        self,
        key: tuple,
        nc_version: int,
        error: AllocationError | None,
        claim_keys: list[str],
    ) -> WordedRefusal:
        """What Allocate gave, in words, under ``key`` (an ``allocate_refusals`` key over all
        the NodeClaim's instance types) in version ``nc_version`` of the NodeClaim: ``error``,
        naming the claims ``claim_keys``, or None when it did not refuse."""
        reach = error.reach if error is not None and error.reach is not None else ()
        entry = WordedRefusal(nc_version, reach, self.reach_version(reach), error, claim_keys)
        self._worded.setdefault(key[0], {})[key[1]] = entry
        return entry

    def alike_words(self, alike: tuple) -> WordedRefusal | None:
        """Words over all the instance types of a NodeClaim alike (``NodeClaim._alike_key``)
        that name nothing of its own, while no device was freed."""
        return self._alike_words.get(alike)

    def remember_alike_words(self, alike: tuple, worded: WordedRefusal) -> None:
        self._alike_words[alike] = worded

    def worded(self, key: tuple, nc_id: str) -> WordedRefusal | None:
        """What Allocate gave, in words, over all the instance types of the NodeClaim of
        ``key`` for the same claim specs, while nothing it read changed."""
        found = self._worded.get(key[0], {}).get(key[1])
        if (
            found is None
            or found.nc_version != self._nc_versions[nc_id]
            or found.reach_version != self.reach_version(found.reach)
        ):
            return None
        return found

    def remember_allocate_refusal(
        self,
        key: tuple,
        nc_version: int,
        reach: tuple,
        code: str,
        dfs_nodes: int,
        explained: ExplainedRefusal | None = None,
    ) -> None:
        self.allocate_refusals[key] = AllocateRefusal(
            nc_version, reach, self.reach_version(reach), code, dfs_nodes, explained
        )

    def most_templates_left(
        self, nc_id: str, candidates: list[InstanceTypeInfo], held: dict[str, set]
    ) -> int | None:
        """The most template devices one of a NodeClaim's instance types has left (``held``:
        those it holds, per instance type), remembered for a NodeClaim of the run while it is
        unchanged (it changes, and its version grows, whenever it takes a pod or loses
        instance types; a NodePool's next NodeClaim, not launched yet, is not remembered).
        None when an instance type allows multiple allocations (no bound)."""
        version = self._nc_versions.get(nc_id)
        hit = self._templates_left.get(nc_id)
        if hit is not None and hit[0] == version and hit[1] is candidates:
            return hit[2]
        most = self.templates_left(candidates, held)
        if version is not None:
            self._templates_left[nc_id] = (version, candidates, most)
        return most

    def templates_left(
        self, candidates: Iterable[InstanceTypeInfo], held: Mapping[str, set]
    ) -> int | None:
        """The most template devices one of ``candidates`` has left (``held``: those taken,
        per instance type); -1 without candidates; None when one allows multiple
        allocations (no bound)."""
        # Asked of 400 instance types per NodeClaim state in Karpenter's benchmark: read at C
        # speed once each instance type's total is known.
        infos = list(candidates)
        names = list(map(info_name, infos))
        totals = list(map(self._template_totals.get, names, repeat(-1)))
        if -1 in totals:  # not worked out yet
            totals = [self.template_total(info) for info in infos]
        if None in totals:
            return None
        if not totals:
            return -1
        return max(map(sub, totals, map(len, map(held.get, names, repeat(())))))

    def template_total(self, info: InstanceTypeInfo) -> int | None:
        """An instance type's template devices (None: one allows multiple allocations)."""
        total = self._template_totals.get(info.name, -1)
        if total == -1:
            devices = [d for t in info.it.resource_slice_templates for d in t.devices]
            multi = any(d.allow_multiple_allocations for d in devices)
            total = self._template_totals[info.name] = None if multi else len(devices)
        return total

    # --- retries and replicas ---------------------------------------------------------------

    def unchanged(self, outcome: PodOutcome, traced: bool) -> bool:
        """Nothing the pod's last attempt read has changed since: a retry would repeat it
        exactly (same reasons, same DFS work). An attempt that built no words is run again."""
        return (
            self.enabled
            and not traced
            and outcome.explained
            and outcome.seen_version == self.state_version
            and outcome.seen_validated == outcome.validated
        )

    def shape(
        self, pod: Pod, outcome: PodOutcome, claim_state: ClaimState, traced: bool
    ) -> tuple | None:
        """Everything an attempt reads from the pod (``pod``: the outcome's, or as relaxed so
        far), but its name: pods of one Deployment or Job share it (their claims differ by
        name only). None when a claim is not simply unallocated or the run is traced (the
        trace shows every attempt)."""
        if not self.enabled or traced or outcome.pod_claims.error:
            return None
        keys = []
        for claim in outcome.pod_claims.claims:
            state = claim_state(claim)
            key = self.funnel_key(claim)
            if state != "unallocated" or key is None:
                return None
            keys.append(key)
        last = self._last_pod
        if last is not None and last[0] is pod:
            read = last[1]
        else:
            read = (
                pod.namespace,
                repr(sorted(pod.requests.items())),
                pod.container_count,
                repr(pod.node_selector),
                repr(pod.required_node_affinity),
                repr(pod.tolerations),
                repr(pod.resource_claims),
                repr(pod.raw.get("spec")),
                # An ephemeral volume's claim is the pod's own: pods of one spec differ by it.
                tuple(pod.volumes),
            )
            self._last_pod = (pod, read)
        return (*read, tuple(keys), outcome.validated)

    def seen_shape(self, shape: tuple) -> ShapeAttempt | None:
        """A pod just like this one failed in this very state: so does this one."""
        seen = self.shapes.get(shape)
        return seen if seen is not None and seen.version == self.state_version else None

    def remember_shape(self, shape: tuple, version: int, outcome: PodOutcome) -> None:
        if _names_pod(outcome):
            return  # a reason naming the pod itself is not another pod's
        outcome.attempt = self.shapes[shape] = ShapeAttempt(
            version,
            [c.key for c in outcome.pod_claims.claims],
            outcome.reasons,
            outcome.funnel_log,
            outcome.validated,
            outcome.dfs_nodes,
            outcome.error,
            outcome.reason_kinds,
        )

    def replay(self, outcome: PodOutcome, seen: ShapeAttempt, claim_state: ClaimState) -> None:
        """This pod's attempt, from the attempt of a pod of the same shape in the same state:
        the same targets refuse it with the same words, naming its own claims."""
        names = {a: b.key for a, b in zip(seen.claim_keys, outcome.pod_claims.claims, strict=True)}
        words: dict[str, str] = {}  # targets refused alike share their words

        def renamed_once(text: str) -> str:
            hit = words.get(text)
            if hit is None:
                hit = words[text] = renamed(text, names)
            return hit

        outcome.attempts += 1
        outcome.attempt = seen
        outcome.explained = True  # only explained attempts are remembered
        outcome.reason_kinds = seen.reason_kinds  # by target, read only
        same_names = all(a == b for a, b in names.items())  # no claims: nothing renamed
        if same_names:
            outcome.reasons = list(seen.reasons)
        else:
            outcome.reasons = [(t, renamed_once(r)) for t, r in seen.reasons]
        outcome.funnel_log = [
            (t, f, names.get(c or f.claim, c or f.claim)) for t, f, c in seen.funnel_log
        ]
        if seen.validated and not outcome.validated:
            self.mark_validated(outcome)
        if same_names and seen.error is not None:
            outcome.error = seen.error
        else:
            outcome.error = explain.summarize(outcome.reasons, outcome.reason_kinds)
        outcome.claim_states = {c.key: claim_state(c) for c in outcome.pod_claims.claims}
        outcome.dfs_nodes = seen.dfs_nodes
        self.replayed += 1


def _names_pod(outcome: PodOutcome) -> bool:
    """Whether a reason names the pod itself (not only its claims): not replayable."""
    keys = [c.key for c in outcome.pod_claims.claims]
    for text in {r for _, r in outcome.reasons}:
        for key in keys:
            text = text.replace(key, "")
        if outcome.pod.key in text:
            return True
    return False


def spec_key(claim: ResourceClaim) -> tuple | None:
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
