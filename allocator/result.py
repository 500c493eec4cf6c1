"""The result document (CONTRACT section 4), built once the loop has finished.

Template devices are listed only for the instance types a NodeClaim still has at the end of the
run, so the document is assembled from the final NodeClaims, not while placing pods.
"""

from __future__ import annotations

from allocator.claims import in_cluster_devices
from allocator.model import ResourceClaim, Snapshot
from allocator.scheduling.finalization import node_claim_annotations
from allocator.scheduling.fit import HOSTNAME, cheapest_offering, format_quantity
from allocator.scheduling.gating import initialization_gating
from allocator.scheduling.nodeclaims import InFlightNodeClaim

SCHEMA_VERSION = "v1"


def _claim_entry(
    key: str, state: str, devices: list[dict], node_selector: dict | None, timeout: int
) -> dict:
    entry = {"claim": key, "state": state, "devices": devices}
    entry["nodeSelector"] = node_selector  # a v1.NodeSelector as the allocation records it
    if any("bindingConditions" in d for d in devices):
        entry["bindingTimeoutSeconds"] = timeout
    return entry


def _cluster_devices(claim: ResourceClaim) -> list[dict]:
    return [d.to_json() for d in in_cluster_devices(claim)]


def _pod_entry(outcome, run, options) -> dict:
    timeout = options.binding_timeout_seconds
    target = outcome.target
    claims_json = []
    if outcome.scheduled:
        final_its = set(target.instance_types) if isinstance(target, InFlightNodeClaim) else None
        its = sorted(final_its) if final_its is not None else None
        for co in outcome.claim_outcomes:
            devices = [d.to_json() for d in co.devices_for(its)]
            claims_json.append(_claim_entry(co.key, co.state, devices, co.node_selector, timeout))
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
            claims_json.append(_claim_entry(claim.key, state, devices, selector, timeout))
    entry = {
        "pod": outcome.pod.key,
        "scheduled": outcome.scheduled,
        "target": target.target_json() if target is not None else None,
        "claims": claims_json,
        "error": outcome.error,
        "reasons": [{"target": t, "reason": r} for t, r in outcome.reasons],
    }
    if outcome.dra_node_resources:
        entry["draNodeResources"] = {
            name: format_quantity(name, value)
            for name, value in sorted(outcome.dra_node_resources.items())
        }
    return entry


def _node_claim_entry(nc: InFlightNodeClaim, pod_entries: dict[str, dict]) -> dict:
    drivers = [
        device["driver"]
        for pod in nc.pods
        for claim in pod_entries[pod.key]["claims"]
        for device in claim["devices"]
    ]
    prices = [cheapest_offering(info, nc.requirements) for info in nc.candidates]
    prices = [p for p in prices if p is not None]
    return {
        "name": nc.name,
        "nodePool": nc.node_pool,
        "instanceTypes": sorted(nc.instance_types),
        "requirements": [
            r for r in nc.requirements.to_node_selector_requirements() if r["key"] != HOSTNAME
        ],
        "annotations": node_claim_annotations(drivers),
        "pods": [pod.key for pod in nc.pods],
        "price": min(prices) if prices else None,
    }


def build_result(snapshot: Snapshot, options, run, outcomes, seconds: float) -> dict:
    from allocator.scheduling.disruption import disruption_report

    pod_entries = [_pod_entry(o, run, options) for o in outcomes]
    by_key = {entry["pod"]: entry for entry in pod_entries}
    node_claims = [_node_claim_entry(nc, by_key) for nc in run.scheduler.node_claims]
    scheduled = sum(1 for e in pod_entries if e["scheduled"])
    placed = {e["pod"] for e in pod_entries if e["scheduled"]}
    dfs_nodes = run.allocator.dfs_nodes
    return {
        "schemaVersion": SCHEMA_VERSION,
        "pods": pod_entries,
        "nodeClaims": node_claims,
        "stats": {
            "pods": len(pod_entries),
            "scheduled": scheduled,
            "failed": len(pod_entries) - scheduled,
            "dfsNodes": int(dfs_nodes),
            "seconds": round(seconds, 6),
            "nodeClaims": len(node_claims),
        },
        "featureGates": options.gates.as_dict(),
        "pools": _pools(snapshot, run, options),
        "deviceTaintRules": _taint_rules(snapshot, run, options),
        "initializationGating": initialization_gating(snapshot),
        "disruption": disruption_report(run.disrupted, run.pods.displaced, placed),
        "warnings": list(snapshot.warnings),
    }


def _pools(snapshot: Snapshot, run, options) -> list[dict]:
    """KEP-5677 pool status over the snapshot's pools, after the run's allocations (exclusive
    holds from the tracker, shares from the capacity ledger: the features' run_pool_status)."""
    from allocator.features.plugin import run_pool_status

    return run_pool_status(snapshot.resource_slices, run.allocator, options.gates)


def _taint_rules(snapshot: Snapshot, run, options) -> list[dict]:
    from allocator.features.taints import taint_rule_previews

    return taint_rule_previews(snapshot, engine=run.allocator.engine, gates=options.gates)
