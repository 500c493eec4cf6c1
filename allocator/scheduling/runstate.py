"""What every target's decision reads and every commit writes during one run: the allocator,
the claims allocated so far and who uses them, the refusal cache, the device-count pre-check,
the trace and the topology. Built once per run by ``setup.build_run``.
"""

from __future__ import annotations

from dataclasses import field

from allocator.errors import AllocationError
from allocator.features.nodeallocatable import DeclaringDevices, claim_maps_node_resources
from allocator.model import DeviceID, ResourceClaim
from allocator.records import record
from allocator.scheduling import explain
from allocator.scheduling.devicecount import DeviceCounter
from allocator.scheduling.fit import FilterMemo
from allocator.scheduling.hooks import NO_TOPOLOGY, Topology
from allocator.scheduling.initialization import claim_state_before_dfs
from allocator.scheduling.poddata import PodOutcome
from allocator.scheduling.refusalcache import RefusalCache
from allocator.scheduling.report import PruneLog
from allocator.scheduling.volumes import RunVolumes
from allocator.trace import NULL_TRACE, Trace

MAX_RESOURCE_WORDS = 20_000  # remembered "exceeds node resources" words; memory stays bounded


@record(eq=False)
class RunState:
    """What a run's targets share: the allocator, caches, topology, trace."""

    allocator: object  # allocator.Allocator
    cache: RefusalCache
    deleting_pods: set[str]
    counter: DeviceCounter | None = None  # the device-count pre-check of existing nodes
    trace: Trace = NULL_TRACE
    # False during a trial: a decision nothing commits (Allocate then builds no words that
    # only a commit's record of the instance types a NodeClaim lost reads).
    committing: bool = True
    topology: Topology = NO_TOPOLOGY
    volumes: RunVolumes = field(default_factory=RunVolumes)  # the pods' volumes, by pod
    prunes: PruneLog = field(default_factory=PruneLog)  # why NodeClaims lost instance types
    # filter_instance_types' answers per requirements' content (None: not remembered).
    filter_memo: FilterMemo | None = None
    in_memory: set[str] = field(default_factory=set)  # claims allocated earlier in this run
    claim_users: dict[str, set[str]] = field(default_factory=dict)  # claim -> pods placed here
    maps_node_resources: dict[str, bool] = field(default_factory=dict)  # claim -> devices map
    # "exceeds node resources" words per (requests, what is left of them): thousands of full
    # nodes refuse every pod that passes them, and the words are read only if it fails.
    resource_words: dict[tuple, str] = field(default_factory=dict)
    # Per instance type, its template devices declaring node resources (claim_maps_...).
    declaring_devices: DeclaringDevices = field(default_factory=dict)

    def claim_state(self, claim: ResourceClaim) -> str:
        """How the allocator will classify the claim (``claim_state_before_dfs``)."""
        return claim_state_before_dfs(
            claim,
            self.deleting_pods,
            claim.key in self.in_memory,
            self.allocator.pipeline.reallocation_predicates,
        )

    def to_allocate(self, claims: list[ResourceClaim]) -> list[ResourceClaim]:
        """The claims the DFS will have to place (for the device-count pre-check)."""
        return [c for c in claims if self.claim_state(c) in ("unallocated", "reallocated")]

    def invalidate_caches(self) -> None:
        """Forget every cached refusal: the allocation state changed other than through a
        placement (a trial that frees devices ...)."""
        self.cache.invalidate()
        if self.allocator.fresh_funnels is not None:
            self.allocator.fresh_funnels.clear()
        if self.allocator.alike_funnels is not None:
            self.allocator.alike_funnels.clear()
        self.allocator.fresh_allocations.clear()

    def commit(self, result, claims: list[ResourceClaim]) -> None:
        """Commit an allocation the scheduler decided on (design: Commit Protocol)."""
        result.allocation.commit()
        self.cache.committed(result)
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

    def placed(self, outcome: PodOutcome, target) -> None:
        """The pod's claims are used by it now (shared-claim checks, holders in messages)."""
        for claim in outcome.pod_claims.claims:
            self.claim_users.setdefault(claim.key, set()).add(outcome.pod.key)
        for co in outcome.claim_outcomes:
            if co.state in ("unallocated", "reallocated"):
                self.maps_node_resources[co.key] = self._maps(
                    co.devices_for(None), target.resource_slices()
                )

    def shared_mapping_problem(self, outcome: PodOutcome) -> str | None:
        """DRANodeAllocatableResources: a claim whose devices map node resources directly
        (not just overhead) cannot be shared by several pods; a pod naming such a claim that
        another pod already has (reservedFor, or placed earlier in this run) is unschedulable."""
        from allocator.claims import in_cluster_devices
        from allocator.features.nodeallocatable import shared_mapping_claim_error

        pod = outcome.pod
        for claim in outcome.pod_claims.claims:
            state = self.claim_state(claim)
            if state == "allocated-in-memory":
                maps = self.maps_node_resources.get(claim.key, False)
            elif state == "allocated-in-cluster":
                maps = self.maps_node_resources.get(claim.key)
                if maps is None:
                    maps = self._maps(in_cluster_devices(claim), None)
                    self.maps_node_resources[claim.key] = maps
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
        features = self.allocator.features
        return features is not None and claim_maps_node_resources(
            features.devices,
            self.allocator.pipeline.gates,
            devices,
            templates_by_it,
            self.declaring_devices,
        )

    def exceeds(self, requests: dict[str, int], available: dict[str, int]) -> str:
        """``exceeds(requests, available)`` worded once per distinct pair."""
        key = (*requests.items(), *(available.get(name, 0) for name in requests))
        memo = self.resource_words
        words = memo.get(key)
        if words is None:
            if len(memo) >= MAX_RESOURCE_WORDS:  # pods of many shapes on nodes of many sizes
                memo.clear()
            words = memo[key] = explain.exceeds(requests, available)
        return words

    # --- the trace -------------------------------------------------------------------------

    def target_trace(self, pod_node: int, label: str) -> int:
        if not self.trace.enabled:
            return -1
        return self.trace.add(pod_node, "target", label)

    def refused(self, pod_node: int, label: str, code: str, reason: str) -> str:
        """A target refused before any device search: one failed trace node says why."""
        if self.trace.enabled:
            self.trace.add(pod_node, "target", label, "failed", code, reason)
        return reason

    def traced_refusal(self, pod_node: int, label: str, refusal) -> None:
        """A target refused from the refusal cache (its devices were counted out for an earlier
        pod of the same claims, nothing changed since): one failed node with that funnel."""
        from allocator.funnel import decisive_reason, funnel_json

        funnels = [f.for_claim(claim) if claim else f for _, f, claim in refusal.funnels]
        code = (decisive_reason(funnels[0]) if funnels else None) or "devices"
        funnel = [funnel_json(f) for f in funnels]
        self.trace.add(pod_node, "target", label, "failed", code, refusal.reason, funnel=funnel)

    def trace_funnels(self, node: int, err: AllocationError) -> None:
        from allocator.funnel import funnel_json

        funnels = err.funnels
        if node >= 0 and funnels:
            self.trace.nodes[node]["funnel"] = [funnel_json(f) for f in funnels]


def target_code(err: AllocationError) -> str:
    """A target refused by counting carries the decisive cause's code (selector, counter ...)."""
    from allocator.funnel import decisive_reason

    code = err.code
    funnels = err.funnels
    if code == "no-instance-type" and funnels and all(f.whole is None for f in funnels):
        return decisive_reason(funnels[0]) or code
    return code


def dra_node_resources(result) -> dict[str, int]:
    """What the allocated devices add to the pod's node resources (DRANodeAllocatableResources),
    in milli-units like every other request."""
    return {name: q.milli_value() for name, q in result.node_resources.items()}


def pod_level_problem(pod, result) -> str | None:
    """Pod-level ``spec.resources.requests`` must cover the containers' requests plus what the
    devices add (DRANodeAllocatableResources)."""
    from allocator.features.nodeallocatable import NodeAllocatableError, pod_level_limit_problem

    if not result.node_resources:
        return None
    try:
        return pod_level_limit_problem(pod, result.node_resources)
    except NodeAllocatableError as err:
        return str(err)
