"""The top-level Allocator: shared state of one scheduling loop, Allocate, Commit, Release.

``allocate`` never mutates shared state; ``Allocation.commit`` and ``release_instance_type``
do, sequentially, after the scheduler has decided.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import field, replace
from typing import Any

from allocator.bindings import AttributeBindings
from allocator.checks import PathEntry
from allocator.claims import (
    ALLOCATED_IN_CLUSTER,
    AllocatedDevice,
    ClaimAllocationMetadata,
    ClaimOutcome,
    classify_claims,
    in_cluster_devices,
    merge_devices,
)
from allocator.dfs import DFSContext, ITOutcome, TimedOut, pool_variants
from allocator.eligibility import pool_refusal
from allocator.errors import AllocationError, AllocationTimeout, ValidationError
from allocator.explanation.builder import FunnelBuilder
from allocator.explanation.messages import Wording
from allocator.features.state import FeatureInputs, FeatureState
from allocator.funnel import Funnel, renamed, whole_funnel
from allocator.model import (
    DeviceClass,
    DeviceID,
    DeviceRequest,
    DeviceTaintRule,
    Namespace,
    Node,
    Pod,
    ResourceClaim,
    ResourceSlice,
)
from allocator.nodealike import NodeAlikeIndex
from allocator.nodeclaim import NodeClaimView
from allocator.pipeline import Pipeline
from allocator.pools import TEMPLATE, Pool, SliceUniverse, refilter, template_devices
from allocator.quantity import Quantity
from allocator.records import record
from allocator.requests import EXACT_COUNT, ClaimData, RequestData, SelectorMatcher
from allocator.requirements import LABEL_HOSTNAME, NODE_NAME_KEY, Requirement, Requirements
from allocator.templateshapes import (
    ReadAttributes,
    ShapeIndex,
    SharedOutcome,
    held_positions,
    read_attributes,
    shareable,
)
from allocator.trace import NULL_TRACE, Trace
from allocator.tracker import AllocationTracker
from allocator.validation import ValidationContext, validate_claim_request

__all__ = ["AllocationError", "Allocator", "AllocationResult", "Allocation"]


def _new_engine() -> Any:
    from allocator.cel import SelectorEngine

    return SelectorEngine()


class Allocator:
    def __init__(
        self,
        in_cluster_slices: list[ResourceSlice],
        allocated_devices: Iterable[DeviceID],
        bindings: AttributeBindings,
        device_classes: Mapping[str, DeviceClass],
        *,
        pipeline: Pipeline,
        deleting_pods: Iterable[str] = frozenset(),
        namespaces: Mapping[str, Namespace] | None = None,
        timeout: float = 5.0,
        engine: Any | None = None,
        clock: Callable[[], float] = time.monotonic,
        device_taint_rules: Iterable[DeviceTaintRule] = (),
        resource_claims: Mapping[str, ResourceClaim] | None = None,
        nodes: Mapping[str, Node] | None = None,
    ) -> None:
        """``pipeline``: the run's features (its ``gates``), device checks, constraint kinds,
        validators and the features' state (``allocator/pipeline.py``)."""
        self.pipeline = pipeline
        self.universe = SliceUniverse(in_cluster_slices, self.pipeline.pool_validators)
        self.tracker = AllocationTracker(allocated_devices)
        self.bindings = bindings
        self.device_classes = dict(device_classes)
        self.deleting_pods = frozenset(deleting_pods)
        self.namespaces = dict(namespaces or {})
        self.timeout = timeout
        self.engine = engine if engine is not None else _new_engine()
        self.clock = clock
        self.pool_cache: dict[str, list[Pool]] = {}
        # Count-stage funnels of fresh NodeClaims, kept across Allocate calls
        # (explanation/builder.py); None: not kept. The scheduler switches it on.
        self.fresh_funnels: dict | None = None
        # Count-stage funnels of existing nodes alike (allocator/nodealike.py), kept across
        # Allocate calls; None: not kept. The scheduler switches it on.
        self.alike_funnels: dict | None = None
        self.alike_nodes = NodeAlikeIndex()
        # Instance types of one template shape and state share one search when the search
        # builds no words (allocator/templateshapes.py); the scheduler switches it on.
        self.share_shapes = False
        self.shapes = ShapeIndex()
        # Shape keys per instance type (``ShapeKeys``): of NodeClaims holding no template
        # device, per reading of the claims; of the others, per NodeClaim and its holdings.
        self.shape_keys: dict[ReadAttributes, tuple[dict, dict]] = {}
        self.held_shape_keys: dict[str, tuple[int, dict[ReadAttributes, tuple[dict, dict]]]] = {}
        # What Allocate found on a NodeClaim that held nothing and reached no in-cluster pool,
        # for NodeClaims alike (``_fresh_key``; with ``share_shapes``).
        self.fresh_allocations: dict[tuple, FreshAllocation] = {}
        # NodeClaim id -> keys of the claims committed to it (release looks only at those).
        self._claims_of_node_claim: dict[str, set[str]] = {}
        self.claim_metadata: dict[str, ClaimAllocationMetadata] = {}
        self.dfs_nodes = 0  # total DFS nodes, for the result's stats
        # Template candidates per instance type: (the template list they were built from, them).
        self._template_cache: dict[str, tuple[list, list]] = {}
        self.resource_claims = dict(resource_claims or {})
        # The refusal funnels of the last Allocate that failed (funnel.py).
        self.last_funnels: list[Funnel] = []
        # (request, instance type) -> (the template list read, the count of its devices the
        # request's selectors accept, or None): ``template_matches``.
        self._template_matches: dict[tuple, tuple[list, int | None]] = {}
        self._request_keys: dict[int, tuple[DeviceRequest, str]] = {}
        # What the DRA features keep across Allocate calls (counters in use, ...): None when
        # the pipeline has no features (core_pipeline).
        self.features: FeatureState | None = None
        if pipeline.setup is not None:
            self.features = pipeline.setup(
                FeatureInputs(
                    gates=pipeline.gates,
                    in_cluster_slices=in_cluster_slices,
                    pools=self.universe.pools.values(),
                    preallocated=self.tracker.preallocated,
                    resource_claims=self.resource_claims,
                    deleting_pods=self.deleting_pods,
                    reallocation_predicates=pipeline.reallocation_predicates,
                    device_taint_rules=list(device_taint_rules),
                    device_classes=self.device_classes,
                    engine=self.engine,
                    nodes=dict(nodes) if nodes is not None else None,
                )
            )
        self._check_factories = pipeline.check_factories(self.features)
        # What a refusal's words read; the scheduler adds who holds a device and a memo.
        self.wording = Wording(
            self.engine, taints=self.features.taints if self.features is not None else None
        )

    # --- Allocate -----------------------------------------------------------------------------

    def allocate(
        self,
        node_claim: NodeClaimView,
        claims: list[ResourceClaim],
        *,
        trace: Trace = NULL_TRACE,
        trace_parent: int | None = None,
        pod: Any = None,
        explain: bool = True,
        word_refusals: bool = True,
    ) -> AllocationResult:
        """``pod`` (optional) lets the features count per-container node resources.
        ``explain`` False: a failure's words and funnels are not built (the decision, the
        result of a success and the DFS nodes counted are the same). ``word_refusals`` False
        as well: neither are the words of the instance types a success was refused by counting
        (``failed_instance_types`` holds a placeholder for them), for a result nothing will
        commit (a trial): only a commit's record of the instance types lost reads them."""
        self.last_funnels = []
        effective = node_claim.requirements.copy()
        classified = classify_claims(
            claims,
            effective,
            node_claim.id,
            self.claim_metadata,
            self.deleting_pods,
            self.pipeline.reallocation_predicates,
        )
        outcomes: dict[int, ClaimOutcome] = {}
        for c in classified:
            if c.state == ALLOCATED_IN_CLUSTER:
                outcomes[c.index] = ClaimOutcome(
                    c.claim.key,
                    c.state,
                    in_cluster_devices(c.claim),
                    c.claim.allocation.node_selector if c.claim.allocation else None,
                )
            elif c.metadata is not None:
                outcomes[c.index] = ClaimOutcome(
                    c.claim.key,
                    c.state,
                    merge_devices(c.metadata.devices_by_instance_type, None),
                    c.metadata.node_selector,
                    dict(c.metadata.devices_by_instance_type),
                )
        to_dfs = [c for c in classified if c.needs_dfs]
        instance_types = list(node_claim.instance_types)
        slices_by_it = node_claim.resource_slices()
        fresh_key = (
            self._fresh_key(
                node_claim, to_dfs, effective, instance_types, slices_by_it, explain, word_refusals
            )
            if to_dfs and len(to_dfs) == len(claims) and not trace.enabled
            else None
        )
        if fresh_key is not None:
            found_before = self.fresh_allocations.get(fresh_key)
            if found_before is not None:
                return self._fresh_result(
                    found_before, node_claim, claims, to_dfs, effective, slices_by_it, pod
                )
        if not to_dfs:
            result = AllocationResult(
                instance_types,
                effective,
                Allocation(self, node_claim.id, {}, None, [], {}),
                [outcomes[i] for i in range(len(claims))],
            )
            result.node_resources = self._node_resources(
                claims, result.claims, {}, pod, slices_by_it
            )
            return result

        # Where a NodeClaim reaches no in-cluster slice nothing is gathered: each instance
        # type's view is then worked out only if its own search runs (DFSContext._prepare_it),
        # not for every one, and its requirements are asked for only then.
        it_reqs = (
            {it: node_claim.instance_type_requirements(it) for it in instance_types}
            if node_claim.node_name is None and self.universe.reaches_unnamed_nodes
            else None
        )
        requirements_of: Callable[[str], Requirements | None] = (
            it_reqs.get if it_reqs is not None else node_claim.instance_type_requirements
        )
        variants = (
            [effective] if it_reqs is None else pool_variants(effective, list(it_reqs.values()))
        )
        cached = self.pool_cache.get(node_claim.id)
        if cached is not None:
            superset = refilter(cached, variants)
        else:
            superset = self.universe.gather(node_claim.node_name, variants)
        templates = self._template_devices(slices_by_it)
        matcher = SelectorMatcher(self.engine)
        claim_data = []
        self.last_funnels = []
        for c in to_dfs:
            ctx = ValidationContext(
                claim=c.claim,
                claim_index=c.index,
                pools=superset,
                template_devices_by_it=templates,
                instance_types=instance_types,
                engine=self.engine,
                device_classes=self.device_classes,
                matcher=matcher,
                rules=self.pipeline,
                namespaces=self.namespaces,
            )
            try:
                claim_data.append(validate_claim_request(ctx))
            except ValidationError as err:
                # Refused as a whole: a funnel with no devices and the validation's words.
                funnel = whole_refusal(c.claim, err)
                self.last_funnels = [funnel]
                raise ValidationError(str(err), request=err.request, funnels=[funnel]) from err

        start = self.clock()
        first_views = None
        if (
            it_reqs is not None
            and len(variants) == len(instance_types)
            and all(r is not None for r in it_reqs.values())
        ):
            first_views = dict(zip(instance_types, variants, strict=True))
        # Count-stage funnels are shared between NodeClaims that reach templates only and
        # hold no in-cluster device (untraced: a trace shows every device); the template
        # devices a NodeClaim holds are part of the memo's key.
        fresh = (
            not any(self.tracker.cluster_by_node_claim.get(node_claim.id, {}).values())
            and not trace.enabled
            and not superset
            and not node_claim.id.startswith("node/")
        )
        dfs = DFSContext(
            checks=self._check_factories,
            reusable=self.pipeline.reusable,
            gates=self.pipeline.gates,
            tracker=self.tracker,
            bindings=self.bindings,
            node_claim_id=node_claim.id,
            node_pool=node_claim.node_pool,
            claims=claim_data,
            matcher=matcher,
            superset=superset,
            pool_refusals={p.key: r for p in superset if (r := pool_refusal(p)) is not None},
            templates_by_it=templates,
            template_slices_by_it=slices_by_it,
            requirements=effective,
            explainer=self._explainer(fresh, node_claim, superset, claim_data, trace),
            first_views=first_views,
            deadline=start + self.timeout,
            clock=self.clock,
            trace=trace,
            explain=explain,
        )
        try:
            results: list[ITOutcome] = []
            timed_out = False
            # Without words: the requirements each instance type started from (they accumulate
            # across instance types), to word its count-stage refusal if another one succeeds.
            started_from: list[Requirements] = []
            shapes = self._shape_sharing(dfs, node_claim, slices_by_it, templates)
            found: dict[tuple, SharedOutcome] = {}
            # A worded refusal shared by a shape: the result index of the instance type that
            # searched, and the instance types that took its outcome (its funnels stand for them).
            alike: dict[int, list[str]] = {}
            searched: dict[tuple, int] = {}
            # The loop runs once per instance type (400 per NodeClaim in Karpenter's benchmark):
            # what it reads on every turn is looked up once here.
            clock = self.clock
            deadline = dfs.deadline
            explain = dfs.explain
            tried = instance_types or [""]
            keys = shapes.keys(tried) if shapes is not None else [None] * len(tried)
            for it, key in zip(tried, keys, strict=True):
                if clock() > deadline:
                    timed_out = True
                    break
                try:
                    if not explain:
                        started_from.append(dfs.requirements)
                    known = found.get(key) if key is not None else None
                    if known is not None:
                        out = known.out
                        if explain and not out.ok:
                            results.append(ITOutcome(it, False, reason=out.reason, nodes=out.nodes))
                            alike.setdefault(searched[key], []).append(it)
                        else:
                            results.append(known.outcome(it, templates[it]))
                        dfs.nodes += out.nodes
                        continue
                    before = dfs.requirements
                    out = dfs.run_instance_type(it, requirements_of(it), trace_parent)
                    results.append(out)
                    if key is not None and dfs.requirements is before:
                        shared = shareable(out, templates[it], slices_by_it[it])
                        if shared is not None:
                            found[key] = shared
                            searched[key] = len(results) - 1
                except TimedOut:
                    timed_out = True  # the IT's trace node already says "timeout"
                    break
            self.dfs_nodes += dfs.nodes
            if timed_out:
                raise AllocationTimeout(
                    f"allocation timed out after {self.timeout:g}s of device search "
                    f"({dfs.nodes} DFS nodes)"
                )
            succeeded = [r for r in results if r.ok]
            if succeeded and not dfs.explain and word_refusals and any(r.unworded for r in results):
                _word_count_refusals(
                    dfs,
                    results,
                    started_from,
                    requirements_of,
                    trace_parent,
                    shapes,
                    slices_by_it,
                    templates,
                )
            if not succeeded:
                refused = tuple((r.instance_type, r.reason or "failed") for r in results)
                reasons = _grouped_refusals(refused)
                # The refusal funnels (explanation), and for the scheduler's cache of refusals the
                # count stage of a single instance type with the pools in reach.
                self.last_funnels = [
                    replace(f, alike=tuple(alike[i])) if i in alike else f
                    for i, r in enumerate(results)
                    for f in r.funnels
                ]
                raise AllocationError(
                    f"{NO_INSTANCE_TYPE}{reasons}",
                    code="no-instance-type",
                    funnels=self.last_funnels,
                    counted=results[0].counted if len(results) == 1 else None,
                    reach=tuple(sorted({p.key for p in superset})),
                    refused=refused,
                )
            per_it = {r.instance_type: r.path for r in succeeded}
            by_claim = _allocated_by_claim(per_it, [c.index for c in to_dfs])
            for c in to_dfs:
                by_it = by_claim[c.index]
                first_path = [e for e in succeeded[0].path if e.claim_index == c.index]
                outcomes[c.index] = ClaimOutcome(
                    c.claim.key,
                    c.state,
                    merge_devices(by_it, None),
                    _node_selector(first_path, node_claim.node_name or node_claim.id),
                    by_it,
                )
            result_its = [r.instance_type for r in succeeded if r.instance_type]
            failed = {r.instance_type: r.reason or "" for r in results if not r.ok}
            fresh = None
            if (
                fresh_key is not None
                and not superset
                and dfs.requirements is effective  # no device added a requirement
                and all(outcomes[c.index].node_selector is None for c in to_dfs)
                and not _names_its_target(per_it)
            ):
                if len(self.fresh_allocations) >= MAX_FRESH_ALLOCATIONS:
                    self.fresh_allocations.clear()  # many kinds of NodeClaims: memory bounded
                fresh = self.fresh_allocations[fresh_key] = FreshAllocation(
                    per_it,
                    list(result_its),
                    dict(failed),
                    dfs.nodes,
                    [
                        (outcomes[c.index].devices, outcomes[c.index].devices_by_instance_type)
                        for c in to_dfs
                    ],
                    [c.claim.key for c in to_dfs],
                )
            allocation = Allocation(
                self,
                node_claim.id,
                per_it,
                superset,
                [(c.claim.key, c.index) for c in to_dfs],
                {c.index: outcomes[c.index] for c in to_dfs},
                fresh,
            )
            result = AllocationResult(
                result_its,
                dfs.requirements,
                allocation,
                [outcomes[i] for i in range(len(claims))],
                failed,
                dfs.nodes,
            )
            result.node_resources = self._node_resources(
                claims, result.claims, per_it, pod, slices_by_it
            )
            return result
        finally:
            dfs.release()

    def _fresh_key(
        self,
        node_claim: NodeClaimView,
        to_dfs: list,
        effective: Requirements,
        instance_types: list[str],
        slices_by_it: Mapping[str, list],
        explain: bool,
        word_refusals: bool,
    ) -> tuple | None:
        """What Allocate reads on a NodeClaim that holds no device and reaches no in-cluster
        pool: its claims' specs, its NodePool, its requirements but its own hostname, its
        instance types (each with its template list), and what words it builds. Karpenter's
        benchmark with DRA claims asks 150 fresh NodeClaims of 400 instance types each, of a
        handful of such keys: each key's searches run once. None where more may be read:
        held devices, in-cluster pools, counters or shares in use, DeviceTaintRules."""
        if not self.share_shapes or node_claim.node_name is not None:
            return None
        if self.universe.reaches_unnamed_nodes or self.pool_cache.get(node_claim.id):
            return None
        tracker = self.tracker
        if any(tracker.templates.get(node_claim.id, {}).values()) or any(
            tracker.cluster_by_node_claim.get(node_claim.id, {}).values()
        ):
            return None
        features = self.features
        if features is not None and (
            features.taints.rules
            or features.counters.template_committed
            or features.capacity.shares
        ):
            return None
        return (
            tuple((c.claim.namespace, repr(c.claim.spec)) for c in to_dfs),
            node_claim.node_pool,
            tuple(item for item in effective.content_key() if item[0] != LABEL_HOSTNAME),
            tuple(instance_types),
            tuple(id(slices_by_it.get(it)) for it in instance_types),
            explain,
            word_refusals,
        )

    def _fresh_result(
        self,
        found: FreshAllocation,
        node_claim: NodeClaimView,
        claims: list[ResourceClaim],
        to_dfs: list,
        effective: Requirements,
        slices_by_it: Mapping[str, list],
        pod: Any,
    ) -> AllocationResult:
        """The result Allocate gave on a NodeClaim alike (``_fresh_key``), for this one and
        these claims: the same devices per instance type (shared, read only), the same DFS
        nodes counted, the refused instance types' words naming these claims."""
        self.dfs_nodes += found.dfs_nodes
        names = {
            old: c.claim.key
            for old, c in zip(found.claim_keys, to_dfs, strict=True)
            if old != c.claim.key
        }
        failed = found.failed_instance_types
        if names and failed:
            words = {w: renamed(w, names) for w in set(failed.values())}
            failed = {it: words[w] for it, w in failed.items()}
        outcomes = {
            c.index: ClaimOutcome(c.claim.key, c.state, devices, None, by_it)
            for c, (devices, by_it) in zip(to_dfs, found.claims, strict=True)
        }
        allocation = Allocation(
            self,
            node_claim.id,
            found.per_it,
            [],
            [(c.claim.key, c.index) for c in to_dfs],
            outcomes,
            found,
        )
        result = AllocationResult(
            list(found.instance_types),
            effective,
            allocation,
            [outcomes[i] for i in range(len(claims))],
            dict(failed),
            found.dfs_nodes,
        )
        result.node_resources = self._node_resources(
            claims, result.claims, found.per_it, pod, slices_by_it
        )
        return result

    def _explainer(
        self,
        fresh: bool,
        node_claim: NodeClaimView,
        superset: list[Pool],
        claim_data: list[ClaimData],
        trace: Trace,
    ) -> FunnelBuilder:
        """The search's explainer: with the count-stage funnels fresh NodeClaims share, or
        those of existing nodes alike (untraced, without DeviceTaintRules or attribute
        bindings, holding none of the devices in reach; ``allocator/nodealike.py``)."""
        if fresh:
            return FunnelBuilder(self.wording, self.fresh_funnels)
        if (
            self.alike_funnels is None
            or trace.enabled
            or node_claim.node_name is None
            or (self.features is not None and self.features.taints.rules)
            or self.bindings.instance_types()
        ):
            return FunnelBuilder(self.wording, None)
        alike = self.alike_nodes.node(
            node_claim.node_name, superset, self.tracker, read_attributes(claim_data)
        )
        return FunnelBuilder(self.wording, self.alike_funnels if alike else None, alike)

    def _shape_sharing(
        self,
        dfs: DFSContext,
        node_claim: NodeClaimView,
        slices_by_it: Mapping[str, list],
        templates: Mapping[str, list],
    ) -> ShapeKeys | None:
        """Instance types of one template shape and state share one search (see
        ``allocator/templateshapes.py``): only for an untraced search on a NodeClaim that
        reaches template devices only, without DeviceTaintRules."""
        if (
            not self.share_shapes
            or dfs.trace.enabled
            or dfs.superset
            or node_claim.node_name is not None
            or (self.features is not None and self.features.taints.rules)
        ):
            return None
        return ShapeKeys(
            self, dfs, slices_by_it, templates, read_attributes(dfs.claims), self.bindings
        )

    def _node_resources(
        self,
        claims: list[ResourceClaim],
        outcomes: list[ClaimOutcome],
        per_it: Mapping[str, list[PathEntry]],
        pod: Pod | None,
        slices_by_it: Mapping[str, list],
    ) -> dict[str, Quantity]:
        node_resources = self.pipeline.node_resources
        if node_resources is None or self.features is None:
            return {}
        return node_resources(
            self.features.devices, self.pipeline.gates, claims, outcomes, per_it, pod, slices_by_it
        )

    def claims_on(self, node_claim_id: str) -> Iterable[str]:
        """The keys of the claims committed to a NodeClaim (its devices' holders)."""
        return self._claims_of_node_claim.get(node_claim_id, ())

    def template_matches(
        self, request: DeviceRequest, instance_type: str, templates: list
    ) -> int | None:
        """How many of an instance type's template devices (``templates``, its slice
        templates) the ExactCount request's device class and own CEL selectors accept: an
        upper bound of the devices Allocate's count stage finds eligible there, for a
        NodeClaim that reaches no in-cluster device. None when it bounds nothing: no such
        request (FirstAvailable, All), an unknown class, a selector that does not compile or
        fails at run time on a device, a device several allocations may share."""
        spec = self._request_keys.get(id(request))
        if spec is None or spec[0] is not request:
            # Claims of one template share their requests; other claims' are alike by content.
            spec = self._request_keys[id(request)] = (request, repr(request))
        key = (spec[1], instance_type)
        hit = self._template_matches.get(key)
        if hit is not None and hit[0] is templates:
            return hit[1]
        found = self._count_template_matches(request, instance_type, templates)
        self._template_matches[key] = (templates, found)
        return found

    def _count_template_matches(
        self, request: DeviceRequest, instance_type: str, templates: list
    ) -> int | None:
        exact = request.exactly
        if exact is None or request.first_available or (exact.allocation_mode or "") == "All":
            return None
        device_class = self.device_classes.get(exact.device_class_name)
        if device_class is None:
            return None
        compiled = []
        for sel in (*device_class.selectors, *exact.selectors):
            if sel.cel is None:
                return None
            try:
                compiled.append(self.engine.compile(sel.cel))
            except ValueError:
                return None
        data = RequestData(
            request.name,
            device_class,
            exact.count,
            EXACT_COUNT,
            [*device_class.selectors, *exact.selectors],
            compiled,
            exact=exact,
        )
        matcher = SelectorMatcher(self.engine)
        matching = 0
        for cand in self._template_devices({instance_type: templates})[instance_type]:
            if cand.device.allow_multiple_allocations:
                return None
            matched, error = matcher.match(data, 0, cand)
            if error is not None:
                return None
            matching += matched
        return matching

    def _template_devices(self, slices_by_it: Mapping[str, list]) -> dict[str, list]:
        """Template candidates per instance type, built once per instance type's template list
        (every in-flight NodeClaim offering that instance type shares them; the candidates are
        read-only, and everything per NodeClaim is keyed by the NodeClaim as well)."""
        out = {}
        cache = self._template_cache
        for it, templates in slices_by_it.items():
            hit = cache.get(it)
            if hit is None or hit[0] is not templates:
                hit = cache[it] = (templates, template_devices({it: templates})[it])
            out[it] = hit[1]
        return out

    # --- Release and queries ------------------------------------------------------------------

    def release_instance_type(self, node_claim_id: str, instance_type: str) -> None:
        self.tracker.release_instance_type(node_claim_id, instance_type)
        if self.features is not None:
            self.features.release(node_claim_id, instance_type)
        for key in self._claims_of_node_claim.get(node_claim_id, ()):
            meta = self.claim_metadata.get(key)
            if meta is not None and meta.node_claim_id == node_claim_id:
                meta.devices_by_instance_type.pop(instance_type, None)

    def claim_devices(self, claim_key: str) -> list[AllocatedDevice]:
        meta = self.claim_metadata.get(claim_key)
        if meta is None:
            return []
        return merge_devices(meta.devices_by_instance_type, None)

    def allocated_cluster_devices(self) -> set[DeviceID]:
        return self.tracker.allocated_cluster_devices()


class ShapeKeys:
    """The key under which an instance type's search is shared in one Allocate: its template
    shape and the positions of the devices the NodeClaim holds there; None when it runs its
    own search (pruned by Request Validation, attribute bindings, counters or shares in use).

    The keys are kept for the run (``Allocator.shape_keys``) per reading of the claims,
    whether words are built, and what the NodeClaim holds (its tracker version; a NodeClaim
    holding nothing shares the keys of every other): a NodeClaim of 400 instance types is
    asked again for every pod that tries it."""

    __slots__ = (
        "_allocator",
        "_dfs",
        "_slices",
        "_templates",
        "_read",
        "_excluded",
        "_held",
        "_features",
        "_kept",
        "_shapes",
    )

    def __init__(
        self,
        allocator: Allocator,
        dfs: DFSContext,
        slices_by_it: Mapping[str, list],
        templates: Mapping[str, list],
        read: ReadAttributes,
        bindings: AttributeBindings,
    ) -> None:
        self._allocator = allocator
        self._dfs = dfs
        self._slices = slices_by_it
        self._templates = templates
        self._read = read
        excluded = set(bindings.instance_types())
        for c in dfs.claims:
            excluded.update(c.pruned_instance_types)
        self._excluded = excluded
        tracker = allocator.tracker
        node_claim_id = dfs.node_claim_id
        self._held = tracker.templates.get(node_claim_id) or {}
        features = allocator.features
        in_use = features is not None and (
            features.counters.template_committed or features.capacity.shares
        )
        self._features = features if in_use else None
        self._shapes = allocator.shapes.shapes_for(read)
        # Words off, words on: instance type -> (its template list, its key).
        self._kept: tuple[dict[str, tuple[list, tuple]], dict[str, tuple[list, tuple]]]
        if any(self._held.values()):
            version = tracker.versions.get(node_claim_id, 0)
            kept = allocator.held_shape_keys.get(node_claim_id)
            if kept is None or kept[0] != version:
                kept = allocator.held_shape_keys[node_claim_id] = (version, {})
            self._kept = kept[1].setdefault(read, ({}, {}))
        else:
            self._kept = allocator.shape_keys.setdefault(read, ({}, {}))

    def keys(self, instance_types: list[str]) -> list[tuple | None]:
        """``key`` of each instance type, in one pass: an Allocate asks for all of them (400
        per NodeClaim in Karpenter's benchmark), and most are kept already."""
        if self._features is not None:
            return [self.key(it) for it in instance_types]
        kept = self._kept[self._dfs.explain]
        slices = self._slices
        excluded = self._excluded
        key = self.key
        out: list[tuple | None] = []
        for it in instance_types:
            if it in excluded:
                out.append(None)
                continue
            hit = kept.get(it)
            out.append(hit[1] if hit is not None and hit[0] is slices.get(it) else key(it))
        return out

    def key(self, instance_type: str) -> tuple | None:
        if instance_type in self._excluded:
            return None
        dfs = self._dfs
        features = self._features
        if features is not None:
            devices = self._templates.get(instance_type)
            if devices is not None and features.holds_on_templates(
                dfs.node_claim_id, instance_type, devices
            ):
                return None
        kept = self._kept[dfs.explain]
        templates = self._slices.get(instance_type)
        hit = kept.get(instance_type)
        if hit is not None and hit[0] is templates:
            return hit[1]
        key = self._key(instance_type, dfs.explain)
        if key is not None:
            kept[instance_type] = (templates, key)
        return key

    def _key(self, instance_type: str, explain: bool) -> tuple | None:
        devices = self._templates.get(instance_type)
        if devices is None:
            return None
        templates = self._slices[instance_type]
        shape = self._shapes.get(instance_type)
        if shape is None or shape.templates is not templates:
            shape = self._allocator.shapes.shape(instance_type, templates, devices, self._read)
        positions = held_positions(shape, self._held.get(instance_type))
        if explain:  # words name devices: only instance types naming them alike share
            return (shape.key, positions, shape.device_names)
        return (shape.key, positions)


def _word_count_refusals(
    dfs: DFSContext,
    results: list[ITOutcome],
    started_from: list[Requirements],
    requirements_of: Callable[[str], Requirements | None],
    trace_parent: int | None,
    shapes: ShapeKeys | None,
    slices_by_it: Mapping[str, list],
    templates: Mapping[str, list],
) -> None:
    """A success found without words (``explain`` off) is the success found with them, but
    for the reasons of the instance types refused at the count stage: those are worded here,
    each from the requirements it started from (the count stage reads nothing the search of
    another instance type changes, and counts no DFS node), so that the result is the one
    ``explain`` on gives (a success keeps the words of the types it refused, not their
    funnels). Worded once per template shape and state (``shapes``)."""
    final = dfs.requirements
    nodes = dfs.nodes
    dfs.explain = True
    found: dict[tuple, SharedOutcome] = {}
    try:
        for i, r in enumerate(results):
            if r.unworded:
                dfs.requirements = started_from[i]
                it = r.instance_type
                key = shapes.key(it) if shapes is not None else None
                if key is not None:
                    key = (*key, id(started_from[i]))
                    known = found.get(key)
                    if known is not None:
                        # A success reads only the words of the types it refused: no funnels.
                        results[i] = ITOutcome(it, False, reason=known.out.reason)
                        continue
                results[i] = dfs.run_instance_type(it, requirements_of(it), trace_parent)
                if key is not None:
                    shared = shareable(results[i], templates[it], slices_by_it[it])
                    if shared is not None:
                        found[key] = shared
    finally:
        dfs.explain = False
        dfs.requirements = final
        dfs.nodes = nodes  # the count stage counts none: nothing to add


def whole_refusal(claim: ResourceClaim, err: ValidationError) -> Funnel:
    """A claim refused as a whole by Request Validation, as a funnel: the request the error
    names, or the claim's first."""
    names = [r.name for r in claim.spec.requests]
    request = err.request if err.request in names else (names[0] if names else "")
    needed = 0
    for r in claim.spec.requests:
        if r.name == request and r.exactly is not None:
            needed = r.exactly.count if r.exactly.allocation_mode != "All" else 0
    return whole_funnel(claim.key, request, needed, None, str(err))


def _allocated_by_claim(
    per_it: Mapping[str, list[PathEntry]], claim_indexes: list[int]
) -> dict[int, dict[str, list[AllocatedDevice]]]:
    """Per claim, the devices each instance type chose (every instance type listed, also
    with none for the claim), in one pass over the paths. Instance types of one template
    shape share their result fields (``SharedOutcome``): each field set is made public once
    and shared by their devices (read only from here on)."""
    by_claim: dict[int, dict[str, list[AllocatedDevice]]] = {i: {} for i in claim_indexes}
    public: dict[int, dict[str, Any]] = {}
    last: dict[str, Any] | None = None  # the fields met last and what of them is public
    shown: dict[str, Any] = {}
    for it, path in per_it.items():
        lists = {}
        for i, by_it in by_claim.items():
            lists[i] = by_it[it] = []
        for e in path:
            extra = e.extra
            if extra is not last:
                last = extra
                found = public.get(id(extra))
                if found is None:
                    found = public[id(extra)] = {k: v for k, v in extra.items() if k[:1] != "_"}
                shown = found
            cand = e.cand
            device_id = cand.id
            lists[e.claim_index].append(
                AllocatedDevice(
                    e.request,
                    device_id.driver,
                    device_id.pool,
                    device_id.device,
                    cand.source,
                    cand.instance_type,
                    shown,
                )
            )
    return by_claim


def _node_selector(path: list[PathEntry], target: str | None = None) -> dict | None:
    """The NodeSelector an allocation records: merged device topology; a nodeName pin as
    ``metadata.name``; None for AllNodes and template devices only. A device that binds to
    the node (DRADeviceBindingConditions) records the chosen node ``target`` instead."""
    if target and any(e.extra.get("bindsToNode") for e in path):
        return {
            "nodeSelectorTerms": [
                {
                    "matchFields": [
                        {
                            "key": NODE_NAME_KEY,
                            "operator": "In",
                            "values": [target.removeprefix("node/")],
                        }
                    ]
                }
            ]
        }
    reqs = Requirements()
    node_names: set[str] = set()
    for e in path:
        term = e.extra.get("_term")
        if term is not None:
            reqs.add(term)
        elif e.cand.source != TEMPLATE and e.cand.node_name:
            node_names.add(e.cand.node_name)
    if not len(reqs) and not node_names:
        return None
    term_json: dict[str, Any] = {}
    exprs = reqs.to_node_selector_requirements()
    if exprs:
        term_json["matchExpressions"] = exprs
    fields = []
    if reqs.has(NODE_NAME_KEY):
        fields = reqs.get(NODE_NAME_KEY).to_node_selector_requirements()
    if node_names:
        fields.append({"key": NODE_NAME_KEY, "operator": "In", "values": sorted(node_names)})
    if fields:
        term_json["matchFields"] = fields
    return {"nodeSelectorTerms": [term_json]}


def _claim_requirements(path: list[PathEntry]) -> Requirements:
    """The topology a claim's devices impose on any pod reusing it: the merged node selector
    terms, and the node identity of nodeName-pinned in-cluster devices (``metadata.name``)."""
    reqs = Requirements()
    node_names: set[str] = set()
    for e in path:
        term = e.extra.get("_term")
        if term is not None:
            reqs.add(term)
        elif e.cand.source != TEMPLATE and e.cand.node_name:
            node_names.add(e.cand.node_name)
    if node_names:
        reqs.add(Requirement.new(NODE_NAME_KEY, "In", sorted(node_names)))
    return reqs


@record
class AllocationResult:
    """Allocate's answer on a target: the instance types that held and the devices."""

    instance_types: list[str]  # ITs whose DFS succeeded (all of them when nothing to allocate)
    requirements: Requirements  # accumulated: allocated claims' and picked devices' topology
    allocation: Allocation
    claims: list[ClaimOutcome]  # one per claim passed in, in order
    # Why each pruned instance type failed (for explanations).
    failed_instance_types: dict[str, str] = field(default_factory=dict)
    dfs_nodes: int = 0
    # Node resources the devices add to the pod's requests (DRANodeAllocatableResources).
    node_resources: dict[str, Any] = field(default_factory=dict)


# NodeClaims alike whose Allocate result is kept (``Allocator.fresh_allocations``).
MAX_FRESH_ALLOCATIONS = 256
# Result fields that name the claim or the node a device went to: not another's.
_TARGET_FIELDS = ("shareID", "bindsToNode")


def _names_its_target(per_it: Mapping[str, list[PathEntry]]) -> bool:
    """Whether a device's result fields name its claim (a capacity share) or its node."""
    seen: set[int] = set()
    for path in per_it.values():
        for e in path:
            extra = e.extra
            if id(extra) in seen:
                continue
            seen.add(id(extra))
            if any(name in extra for name in _TARGET_FIELDS):
                return True
    return False


@record(eq=False)
class FreshAllocation:
    """What Allocate found on a NodeClaim that held nothing and reached no in-cluster pool
    (``Allocator._fresh_key``); read only, shared by the results of NodeClaims alike."""

    per_it: dict[str, list[PathEntry]]
    instance_types: list[str]
    failed_instance_types: dict[str, str]
    dfs_nodes: int
    # Per claim searched (in order): its devices, and those of each instance type.
    claims: list[tuple[list[AllocatedDevice], dict[str, list[AllocatedDevice]]]]
    claim_keys: list[str]  # the claims searched, as the refused instance types' words name them
    rows: CommitRows | None = None  # worked out by the first commit (``Allocation.commit``)


class Allocation:
    """The opaque handle: nothing changes until ``commit``."""

    def __init__(
        self,
        allocator: Allocator,
        node_claim_id: str,
        per_it: dict[str, list[PathEntry]],
        superset: list[Pool] | None,
        claims: list[tuple[str, int]],
        outcomes: dict[int, ClaimOutcome],
        shared: FreshAllocation | None = None,
    ) -> None:
        """``shared``: the fresh allocation ``per_it`` is, when it is one (its commit rows are
        worked out once for every NodeClaim alike)."""
        self._allocator = allocator
        self.node_claim_id = node_claim_id
        self._per_it = per_it
        self._superset = superset
        self._claims = claims
        self._outcomes = outcomes
        self._shared = shared
        self.committed = False

    def device_ids(self) -> dict[str, list[DeviceID]]:
        return {it: [e.cand.id for e in path] for it, path in self._per_it.items()}

    def commit(self) -> None:
        if self.committed:
            return
        self.committed = True
        a = self._allocator
        node_claim_id = self.node_claim_id
        tracker = a.tracker
        features = a.features
        shared = self._shared
        rows = shared.rows if shared is not None else None
        if rows is None:
            rows = _commit_rows(self._per_it, [index for _, index in self._claims])
            if shared is not None:  # NodeClaims alike commit the same rows
                shared.rows = rows
        held, topology, templated = rows
        tracker.record_instance_types(node_claim_id, held)
        if features is not None:
            features.commit_paths(node_claim_id, self._per_it)
        if self._superset is not None:
            a.pool_cache[node_claim_id] = self._superset
        for key, index in self._claims:
            outcome = self._outcomes[index]
            a._claims_of_node_claim.setdefault(node_claim_id, set()).add(key)
            a.claim_metadata[key] = ClaimAllocationMetadata(
                node_claim_id=node_claim_id,
                used_templates=index in templated,
                requirements=_claim_requirements(topology[index]),
                # Its own mapping (a release drops instance types from it); the device lists
                # are read only, shared with the outcome.
                devices_by_instance_type=dict(outcome.devices_by_instance_type),
                node_selector=outcome.node_selector,
            )


# What a commit records of an allocation's paths: per instance type its in-cluster and
# template devices held; per claim index its devices carrying topology; the claims that took
# template devices.
CommitRows = tuple[
    list[tuple[str, list[DeviceID], list[DeviceID]]], dict[int, list[PathEntry]], set[int]
]


def _commit_rows(per_it: Mapping[str, list[PathEntry]], indexes: list[int]) -> CommitRows:
    """In one pass over the paths: per claim whether it took template devices and its devices
    that carry topology (a term, or an in-cluster device's node: a template device without a
    term adds none, ``_claim_requirements``), and per instance type the devices held."""
    topology: dict[int, list[PathEntry]] = {index: [] for index in indexes}
    templated: set[int] = set()
    held: list[tuple[str, list[DeviceID], list[DeviceID]]] = []
    for it, path in per_it.items():
        cluster: list[DeviceID] = []
        template: list[DeviceID] = []
        for e in path:
            cand = e.cand
            extra = e.extra
            if cand.source == TEMPLATE:
                templated.add(e.claim_index)
                if "_term" in extra:
                    topology[e.claim_index].append(e)
            else:
                topology[e.claim_index].append(e)
            # Admin access and shares of multi-allocatable devices reserve nothing.
            if extra.get("_no_reserve"):
                continue
            (template if cand.source == TEMPLATE else cluster).append(cand.id)
        held.append((it, cluster, template))
    return held, topology, templated


MAX_NAMED_INSTANCE_TYPES = 3  # instance types named per kind of refusal; the others counted


NO_INSTANCE_TYPE = "no instance type can satisfy the allocation: "


def narrowed(
    err: AllocationError,
    instance_types: Sequence[str],
    search: Callable[[str], AllocationError | None],
) -> AllocationError | None:
    """The refusal Allocate gives on ``instance_types`` where it gave ``err`` on more of them,
    in the same state, for the same claims and requirements: each instance type's refusal is
    its own (a refusal reads nothing of the others, and with none succeeding the requirements
    never grew), and a search shared by instance types of one shape stands for those of them
    that remain. Where that search ran on an instance type left out, the first one alike that
    remains is searched alone (``search``: Allocate's refusal on that one instance type, None
    if it does not refuse), as Allocate on ``instance_types`` would search it.

    None when ``instance_types`` are not a part of ``err``'s in the same order, or when
    ``err`` read in-cluster pools (fewer instance types may reach fewer of them)."""
    if err.code != "no-instance-type" or err.reach != () or len(instance_types) < 2:
        return None
    position = {it: i for i, it in enumerate(instance_types)}
    refused = tuple(pair for pair in err.refused if pair[0] in position)
    if len(refused) != len(instance_types) or any(
        a != b for (a, _), b in zip(refused, instance_types, strict=True)
    ):
        return None
    words = dict(refused)
    # Each search's funnels (the instance type searched, in ``err``'s order), then where the
    # search runs on ``instance_types``.
    searched: dict[str | None, list[Funnel]] = {}
    for f in err.funnels:
        searched.setdefault(f.instance_type, []).append(f)
    placed: list[tuple[int, list[Funnel]]] = []
    for instance_type, funnels in searched.items():
        if instance_type is None:
            return None
        remaining = tuple(it for it in funnels[0].alike if it in position)
        if instance_type in position:
            placed.append(
                (
                    position[instance_type],
                    [f if f.alike == remaining else replace(f, alike=remaining) for f in funnels],
                )
            )
        elif remaining:
            first, rest = remaining[0], remaining[1:]
            own = search(first)
            if own is None or own.refused != ((first, words[first]),):
                return None
            placed.append((position[first], [replace(f, alike=rest) for f in own.funnels]))
    placed.sort(key=lambda entry: entry[0])
    return AllocationError(
        f"{NO_INSTANCE_TYPE}{_grouped_refusals(refused)}",
        code=err.code,
        funnels=[f for _, funnels in placed for f in funnels],
        reach=err.reach,
        refused=refused,
    )


def _grouped_refusals(refused: Iterable[tuple[str, str]]) -> str:
    """``it-a, it-b and 398 more: <why>; it-c: <why>``: instance types refused in the same
    words share one clause, in the order first met (400 instance types refusing a pod the
    same way make one clause, not 400). ``refused``: (instance type, words) in order."""
    by_words: dict[str, list[str]] = {}
    for instance_type, words in refused:
        by_words.setdefault(words, []).append(instance_type or "")
    parts = []
    for words, names in by_words.items():
        named = [n for n in names if n]
        if not named:
            parts.append(words)
            continue
        shown = ", ".join(named[:MAX_NAMED_INSTANCE_TYPES])
        if len(named) > MAX_NAMED_INSTANCE_TYPES:
            shown += f" and {len(named) - MAX_NAMED_INSTANCE_TYPES} more"
        parts.append(f"{shown}: {words}")
    return "; ".join(parts)
