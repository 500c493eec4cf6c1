"""The result document (docs/RESULT.md), built once the loop has finished.

Template devices are listed only for the instance types a NodeClaim still has at the end of the
run, so the document is assembled from the final NodeClaims, not while placing pods.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from operator import attrgetter

from allocator.claims import in_cluster_devices
from allocator.edits import annotate_all
from allocator.explanation.cause import ClaimSlot, cause_of, request_funnels
from allocator.explanation.karpenter_search import (
    LongSearch,
    all_mode_requests,
    longest_search,
    stall_warning,
)
from allocator.funnel import MAX_FUNNELS, Funnel, FunnelGroup, funnel_groups
from allocator.model import Device, DeviceID, Pod, ResourceClaim, Snapshot
from allocator.records import record
from allocator.resultbudget import within_budget
from allocator.scheduling.explain import MAX_PLAIN_REASONS, grouped_reasons, target_kinds
from allocator.scheduling.finalization import finalized_requirements, node_claim_annotations
from allocator.scheduling.fit import HOSTNAME, cheapest_offerings, format_quantity, info_name
from allocator.scheduling.gating import initialization_gating
from allocator.scheduling.nodeclaim import NodeClaim
from allocator.scheduling.poddata import ShapeAttempt
from allocator.scheduling.setup import Run

SCHEMA_VERSION = "v1"


def _claim_entry(
    key: str, state: str, devices: list[dict], node_selector: dict | None, timeout: int
) -> dict:
    entry = {"claim": key, "state": state, "devices": devices}
    entry["nodeSelector"] = node_selector  # a v1.NodeSelector as the allocation records it
    if any("bindingConditions" in d for d in devices):
        entry["bindingTimeoutSeconds"] = timeout
    return entry


class _DeviceLookup:
    """Device objects behind the result's device entries (for the metadata preview): the
    newest generation of the in-cluster slices, and each instance type's templates."""

    def __init__(self, snapshot: Snapshot) -> None:
        from allocator.features.taints import newest_generation_slices

        self.snapshot = snapshot
        self.in_cluster: dict[DeviceID, Device] | None = None
        self.templates: dict[str, dict[DeviceID, Device]] = {}
        self._slices = newest_generation_slices

    def for_entries(self, devices: list[dict]):
        """A DeviceID -> Device lookup for one claim entry's devices: template devices come
        from the first instance type listed (the one node that launches), as the metadata
        preview reports them."""
        first_it = next((d["instanceType"] for d in devices if d.get("instanceType")), None)
        templates = self._templates(first_it) if first_it else {}
        from_templates = {
            DeviceID(d["driver"], d["pool"], d["device"])
            for d in devices
            if d.get("instanceType") == first_it and first_it
        }

        def lookup(device_id: DeviceID) -> Device | None:
            if device_id in from_templates:
                return templates.get(device_id)
            return self._in_cluster().get(device_id)

        return lookup

    def _in_cluster(self) -> dict[DeviceID, Device]:
        if self.in_cluster is None:
            self.in_cluster = {
                DeviceID(s.driver, s.pool, d.name): d
                for s in self._slices(self.snapshot.resource_slices)
                for d in s.devices
            }
        return self.in_cluster

    def _templates(self, instance_type: str) -> dict[DeviceID, Device]:
        found = self.templates.get(instance_type)
        if found is None:
            it = self.snapshot.instance_types.get(instance_type)
            found = {
                DeviceID(t.driver, t.pool, d.name): d
                for t in (it.resource_slice_templates if it is not None else ())
                for d in t.devices
            }
            self.templates[instance_type] = found
        return found


def _template_claim_names(pod: Pod) -> dict[str, str]:
    """Claim key -> ``spec.resourceClaims[].name`` for the pod's claims made from templates
    (the metadata protocol's podClaimName)."""
    from allocator.features.taints import pod_claim_entries

    from_template = {
        e.name
        for e in pod.resource_claims
        if e.resource_claim_template_name and not (e.resource_claim_name)
    }
    return {key: name for name, key in pod_claim_entries(pod) if name in from_template}


def _add_metadata(entry: dict, claim: ResourceClaim, pod: Pod, lookup: _DeviceLookup) -> None:
    """``claims[].metadata``: the DeviceMetadata files (KEP-5304) the containers using an
    allocated claim would see, ``[{"path", "document"}]``."""
    from allocator.features.metadata import claim_metadata

    devices = entry["devices"]
    if not devices:
        return
    pod_claim_name = _template_claim_names(pod).get(claim.key)
    entry["metadata"] = claim_metadata(claim, devices, lookup.for_entries(devices), pod_claim_name)


def _cluster_devices(claim: ResourceClaim) -> list[dict]:
    return [d.to_json() for d in in_cluster_devices(claim)]


@record
class _LogReading:
    """What the result reads of a pod's funnel log, its claims named by their place among
    the pod's claims: pods whose claims have the same specs get the same (cached) funnels
    from the same targets, and the log is read once for all of them."""

    kinds: dict[str, tuple]  # scheduling/explain.py target_kinds
    groups: list[tuple[ClaimSlot | None, FunnelGroup]]  # funnel.py funnel_groups
    requests: dict[tuple[ClaimSlot, str], list[tuple[Funnel, int]]]  # cause.py request_funnels
    longest: LongSearch | None  # explanation/karpenter_search.py longest_search


@record
class _Memos:
    """What was read of each funnel object and each funnel log, shared by every pod of one
    result (the outcomes keep the funnels alive; a cached funnel stands for many targets and
    many pods)."""

    signatures: dict = field(default_factory=dict)  # funnel.py signature
    causes: dict = field(default_factory=dict)  # explanation/cause.py facts
    # (target, funnel id, claim place) of every entry -> what was read of that log.
    readings: dict[tuple, _LogReading] = field(default_factory=dict)
    # id(ShapeAttempt) -> (it, the reading of its log): a remembered attempt's pod and the
    # replicas that replayed it read it without walking their logs (PodOutcome.attempt).
    by_attempt: dict[int, tuple[ShapeAttempt, _LogReading]] = field(default_factory=dict)
    # NodeClaims' instance types, requirements and prices (_node_claim_offer).
    node_claim_offers: dict[tuple, tuple] = field(default_factory=dict)
    # Grouped reasons per reasons (their length and ends, then compared whole), kinds and
    # reason kinds: failed replicas of one workload are refused alike by the same targets.
    grouped: dict[tuple, tuple] = field(default_factory=dict)
    # Failed pods and where Karpenter's own search would walk longest (their readings').
    searches: list[tuple[str, LongSearch]] = field(default_factory=list)

    def grouped_reasons(self, outcome, kinds: Mapping[str, tuple] | None) -> list[dict]:
        """``explain.grouped_reasons`` of the pod, worked out once per reasons alike (4,000
        replicas refused by 1,000 targets group 1,000 reasons once, not 4,000 times); each
        pod gets its own entries (the result budget edits them in place)."""
        reasons, other = outcome.reasons, outcome.reason_kinds
        key = (len(reasons), reasons[0] if reasons else None, reasons[-1] if reasons else None)
        found = self.grouped.get(key)
        # Replicas share their reason kinds (and often the kinds): a dict compares entry by
        # entry even with itself.
        if (
            found is None
            or found[1] is not kinds
            or (found[2] is not other and found[2] != other)
            or found[0] != reasons
        ):
            found = self.grouped[key] = (
                reasons,
                kinds,
                other,
                grouped_reasons(reasons, kinds=kinds, reason_kinds=other),
            )
        return [
            {**e, "exampleTargets": list(e["exampleTargets"])} if "exampleTargets" in e else dict(e)
            for e in found[3]
        ]

    def reading(self, outcome) -> tuple[_LogReading, list[str]]:
        """The pod's funnel log as read, and its claims' keys (a place names one of them)."""
        claim_keys = [c.key for c in outcome.pod_claims.claims]
        source = outcome.attempt
        if source is not None:
            known = self.by_attempt.get(id(source))
            if known is not None and known[0] is source:
                return known[1], claim_keys
        place = {key: i for i, key in enumerate(claim_keys)}
        log = outcome.funnel_log
        # One pass for the key: the failed replicas of one workload read one log (5,000
        # entries per pod on 5,000 nodes), the entries are built only the first time.
        parts: list[tuple[str, int, ClaimSlot]] = []
        append = parts.append
        for entry in log:
            claim = entry[2] if len(entry) > 2 and entry[2] is not None else entry[1].claim
            append((entry[0], id(entry[1]), place.get(claim, claim)))
        key = tuple(parts)
        found = self.readings.get(key)
        if found is None:
            entries = [(e[0], e[1], part[2]) for e, part in zip(log, parts, strict=True)]
            found = self.readings[key] = _LogReading(
                target_kinds(entries, self.signatures),
                funnel_groups(entries, self.signatures),
                request_funnels(entries, self.causes),
                longest_search(entries, all_mode_requests(outcome.pod_claims.claims)),
            )
        if source is not None:
            self.by_attempt[id(source)] = (source, found)
        return found, claim_keys


def _claim_name(slot: ClaimSlot | None, claim_keys: list[str]) -> str | None:
    return claim_keys[slot] if isinstance(slot, int) else slot


def _pod_entry(outcome, run, options, lookup: _DeviceLookup, memos: _Memos) -> dict:
    timeout = options.binding_timeout_seconds
    target = outcome.target
    claims_json = []
    if outcome.scheduled:
        # The NodeClaim's instance types at the end of the run (devices_for keeps theirs).
        its = (
            target.instance_types
            if outcome.claim_outcomes and isinstance(target, NodeClaim)
            else None
        )
        claims = {c.key: c for c in outcome.pod_claims.claims}
        for co in outcome.claim_outcomes:
            devices = [d.to_json() for d in co.devices_for(its)]
            entry = _claim_entry(co.key, co.state, devices, co.node_selector, timeout)
            if co.key in claims:
                _add_metadata(entry, claims[co.key], outcome.pod, lookup)
            claims_json.append(entry)
    else:
        for claim in outcome.pod_claims.claims:
            state = outcome.claim_states.get(claim.key, "unallocated")
            if state == "allocated-in-memory":
                devices = [d.to_json() for d in run.allocator.claim_devices(claim.key)]
                meta = run.allocator.claim_metadata.get(claim.key)
                selector = meta.node_selector if meta is not None else None
            else:
                devices = _cluster_devices(claim)
                selector = claim.allocation.node_selector if claim.allocation else None
            claim_entry = _claim_entry(claim.key, state, devices, selector, timeout)
            _add_metadata(claim_entry, claim, outcome.pod, lookup)
            claims_json.append(claim_entry)
    entry = {
        "pod": outcome.pod.key,
        "scheduled": outcome.scheduled,
        "target": target.target_json() if target is not None else None,
        "claims": claims_json,
        "error": outcome.error,
    }
    reading: _LogReading | None = None
    claim_keys: list[str] = []
    if not outcome.scheduled or len(outcome.reasons) > MAX_PLAIN_REASONS:
        try:
            reading, claim_keys = memos.reading(outcome)
        except Exception as error:  # noqa: BLE001  an explanation never breaks a run
            run.allocator.wording.failed(f"the explanation of pod {outcome.pod.key}", error)
    if not outcome.scheduled and reading is not None and reading.longest is not None:
        memos.searches.append((outcome.pod.key, reading.longest))
    entry["reasons"] = memos.grouped_reasons(
        outcome, reading.kinds if reading is not None else None
    )
    if not outcome.scheduled:
        entry["explanation"] = []
        cause = None
        if reading is not None:
            try:
                groups = reading.groups
                if len(groups) > MAX_FUNNELS:  # bounded whatever the cluster: the rest counted
                    entry["explanationOmitted"] = len(groups) - MAX_FUNNELS
                entry["explanation"] = [
                    g.to_json(_claim_name(slot, claim_keys)) for slot, g in groups[:MAX_FUNNELS]
                ]
                requests = {
                    (_claim_name(slot, claim_keys), request): funnels
                    for (slot, request), funnels in reading.requests.items()
                }
                cause = cause_of(requests, bool(run.scheduler.templates), memos.causes)
            except Exception as error:  # noqa: BLE001  an explanation never breaks a run
                run.allocator.wording.failed(f"the explanation of pod {outcome.pod.key}", error)
                entry["explanation"] = []
                cause = None
        if cause is not None:
            entry["cause"] = cause.to_json()
    if outcome.relaxed:
        entry["relaxed"] = [r.to_json() for r in outcome.relaxed]
    if outcome.dra_node_resources:
        entry["draNodeResources"] = {
            name: format_quantity(name, value)
            for name, value in sorted(outcome.dra_node_resources.items())
        }
    return entry


def _node_claim_entry(
    nc: NodeClaim, pod_entries: dict[str, dict], offers: dict[tuple, tuple]
) -> dict:
    drivers = [
        device["driver"]
        for pod in nc.pods
        for claim in pod_entries[pod.key]["claims"]
        for device in claim["devices"]
    ]
    instance_types, requirements, price = _node_claim_offer(nc, offers)
    return {
        "name": nc.name,
        "nodePool": nc.node_pool,
        "instanceTypes": instance_types,
        "requirements": requirements,
        "annotations": node_claim_annotations(drivers),
        "pods": [pod.key for pod in nc.pods],
        "price": price,
    }


_PLAIN_OFFERINGS = attrgetter("plain_offerings")


def _node_claim_offer(
    nc: NodeClaim, offers: dict[tuple, tuple]
) -> tuple[list[str], list[dict], float | None]:
    """A NodeClaim's instance types by name, its requirements as Karpenter writes them (its
    hostname apart) and its cheapest offering's price: the same for NodeClaims of the same instance
    types and requirements but their hostnames (one kind of pod, one NodeClaim each), when
    no offering has requirements of its own (which might read more). Shared, read only."""
    key = None
    if all(map(_PLAIN_OFFERINGS, nc.candidates)):
        key = (
            tuple(map(info_name, nc.candidates)),
            nc.requirements.content_key(nc.requirements.keys() - {HOSTNAME}),
        )
        hit = offers.get(key)
        if hit is not None:
            return hit
    prices = cheapest_offerings(nc.candidates, nc.requirements)
    priced = [(price, info.name) for price, info in zip(prices, nc.candidates, strict=True)]
    by_price = [
        name for _, name in sorted(priced, key=lambda pn: (pn[0] is None, pn[0] or 0, pn[1]))
    ]
    finalized = finalized_requirements(nc.requirements, by_price, nc.candidates)
    known = [p for p in prices if p is not None]
    offer = (
        sorted(nc.instance_types),
        [r for r in finalized.to_node_selector_requirements() if r["key"] != HOSTNAME],
        min(known) if known else None,
    )
    if key is not None:
        offers[key] = offer
    return offer


def build_result(
    snapshot: Snapshot, options, run, outcomes, seconds: float, suggestions=None
) -> dict:
    from allocator.scheduling.disruption import disruption_report
    from allocator.scheduling.report import extend_node_claims, extend_pod_claims

    lookup = _DeviceLookup(snapshot)
    memos = _Memos()
    pod_entries = [_pod_entry(o, run, options, lookup, memos) for o in outcomes]
    by_key = {entry["pod"]: entry for entry in pod_entries}
    node_claims = [
        _node_claim_entry(nc, by_key, memos.node_claim_offers) for nc in run.scheduler.node_claims
    ]
    extend_node_claims(node_claims, run, snapshot, by_key)  # scheduling/report.py
    extend_pod_claims(pod_entries, outcomes, run, snapshot)
    scheduled = sum(1 for e in pod_entries if e["scheduled"])
    placed = {e["pod"] for e in pod_entries if e["scheduled"]}
    dfs_nodes = run.allocator.dfs_nodes
    result = {
        "schemaVersion": SCHEMA_VERSION,
        "pods": pod_entries,
        "ignoredPods": [ignored.to_json() for ignored in run.pods.ignored],
        "nodeClaims": node_claims,
        "stats": {
            "pods": len(pod_entries),
            "scheduled": scheduled,
            "failed": len(pod_entries) - scheduled,
            "ignored": len(run.pods.ignored),
            "dfsNodes": int(dfs_nodes),
            "seconds": round(seconds, 6),
            "nodeClaims": len(node_claims),
        },
        "featureGates": run.pipeline.gates.as_dict(),
        "kubernetesVersion": options.kubernetes_version,
        "pools": _pools(snapshot, run),
        "deviceTaintRules": _taint_rules(snapshot, run),
        "initializationGating": initialization_gating(snapshot),
        "disruption": disruption_report(run.disrupted, run.pods.displaced, placed),
        "warnings": [*snapshot.warnings, *snapshot.unsimulated, *run.allocator.wording.failures],
    }
    if suggestions is not None:
        _add_suggestions(result, suggestions, snapshot)
    failures = run.allocator.wording.failures
    known = len(failures)
    try:
        stall = stall_warning(memos.searches)
    except Exception as error:  # noqa: BLE001  an estimate in words never breaks a run
        run.allocator.wording.failed("the estimate of Karpenter's own device search", error)
    else:
        if stall is not None:
            result["warnings"].append(stall)
    for entry in result["pods"]:
        if not entry["scheduled"]:
            try:
                within_budget(entry)
            except Exception as error:  # noqa: BLE001  trimming words never breaks a run
                run.allocator.wording.failed(f"the entry of pod {entry['pod']}", error)
    if len(failures) > known:
        result["warnings"].extend(list(failures)[known:])
    return result


def _add_suggestions(result: dict, report, snapshot: Snapshot) -> None:
    """``pods[].suggestions`` (``[]`` for placed pods and when no single change helps) and
    their cost in ``stats`` (allocator/suggestions/); each with its JSON patch,
    manifest and ``recreate`` (allocator/edits.py)."""
    for entry in result["pods"]:
        entry["suggestions"] = report.by_pod.get(entry["pod"], [])
    annotate_all((e["suggestions"] for e in result["pods"]), snapshot.documents)
    result["stats"]["suggestionSeconds"] = round(report.seconds, 6)
    result["stats"]["suggestionTrials"] = report.trials
    result["stats"]["suggestionReruns"] = report.reruns


def _pools(snapshot: Snapshot, run: Run) -> list[dict]:
    """KEP-5677 pool status over the snapshot's pools, after the run's allocations (exclusive
    holds from the tracker, shares from the capacity ledger: the features' run_pool_status)."""
    from allocator.features.poolstatus import run_pool_status

    features = run.allocator.features
    return run_pool_status(
        snapshot.resource_slices,
        run.allocator.allocated_cluster_devices(),
        features.capacity if features is not None else None,
        features.taints if features is not None else None,
        run.pipeline.gates,
    )


def _taint_rules(snapshot: Snapshot, run: Run) -> list[dict]:
    from allocator.features.taints import taint_rule_previews

    return taint_rule_previews(snapshot, engine=run.allocator.engine, gates=run.pipeline.gates)
