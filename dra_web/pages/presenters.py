"""Turn a run's result document (CONTRACT section 4) into what the pages show.

Pure functions over plain dicts: the result may come from any version of the scheduler, so
every field is read with a default and unknown fields are passed through, never required.
"""

from __future__ import annotations

import re
from collections import Counter, OrderedDict
from collections.abc import Collection
from typing import Any

# Short phrases for the reasons a target refuses a pod, in the order they are tested. The
# aggregate reads like kube-scheduler's "0/12 nodes are available: 8 Insufficient ..." line.
REASON_PHRASES: tuple[tuple[str, str], ...] = (
    ("all instance types pruned", "all instance types pruned"),
    ("no instance type can satisfy", "no instance type can satisfy the allocation"),
    ("exceeding maximum", "too many devices (exceeding maximum)"),
    ("admin access", "admin access not allowed in namespace"),
    ("failed to compile", "CEL selector failed to compile"),
    ("unsupported selector type", "unsupported selector type"),
    ("unsupported constraint type", "unsupported constraint type"),
    ("only exactly requests", "only Exactly requests supported"),
    ("incomplete", "incomplete pool"),
    ("not found", "not found"),
    ("untolerated taint", "untolerated taint"),
    ("taint", "untolerated taint"),
    ("limit", "NodePool limits exceeded"),
    ("insufficient", "insufficient resources"),
    ("resources", "insufficient resources"),
    ("incompatible", "incompatible requirements"),
    ("affinity", "incompatible requirements"),
    ("constraint", "device constraint not satisfiable"),
    ("timeout", "allocation timed out"),
    ("timed out", "allocation timed out"),
    ("device", "no free device"),
    ("allocat", "no free device"),
    ("invalid", "invalid pool"),
)


_NODEPOOL_PREFIX = re.compile(r'^incompatible with nodepool "[^"]*",\s*', re.IGNORECASE)
_DRA_PREFIX = "allocating dynamic resources"


def reason_phrase(reason: str | None) -> str:
    """The short phrase a reason is counted under."""
    text = _NODEPOOL_PREFIX.sub("", (reason or "").strip())
    dra = text.lower().startswith(_DRA_PREFIX)
    if dra:
        # Karpenter wraps every allocator error this way: classify what follows, and count
        # an otherwise unexplained DRA failure as "no free device".
        text = text[len(_DRA_PREFIX) :].lstrip(" ,:")
    low = text.lower()
    for needle, phrase in REASON_PHRASES:
        if dra and phrase == "insufficient resources":
            continue
        if needle in low:
            return phrase
    if dra:
        return "no free device"
    first = re.split(r"[:;,(]", text, maxsplit=1)[0].strip()
    return (first[:60] or "unknown reason").rstrip(".")


def target_group(target: str | None, node_claims: Collection[str] = ()) -> str:
    """``nodepool/NAME`` -> NodePools; ``node/NAME`` -> NodeClaims when NAME is one this run
    creates (the result names them ``node/`` too), nodes otherwise."""
    prefix, _, name = (target or "").partition("/")
    if prefix.lower() == "nodepool":
        return "NodePools"
    if prefix.lower() == "node" and name not in node_claims:
        return "nodes"
    return "NodeClaims"


def aggregate_reasons(reasons: list[dict[str, Any]], node_claims: Collection[str] = ()) -> str:
    """``0/12 nodes: 8 no free device, 4 incompatible requirements; 0/2 NodePools: ...``.

    Groups are nodes, then in-flight NodeClaims, then NodePools last (as Karpenter logs).
    """
    groups: OrderedDict[str, Counter] = OrderedDict(
        (name, Counter()) for name in ("nodes", "NodeClaims", "NodePools")
    )
    for entry in reasons or []:
        group = target_group(entry.get("target"), node_claims)
        groups[group][reason_phrase(entry.get("reason"))] += 1
    parts = []
    for name, counts in groups.items():
        total = sum(counts.values())
        if not total:
            continue
        detail = ", ".join(
            f"{n} {phrase}" for phrase, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        )
        parts.append(f"0/{total} {name}: {detail}")
    return "; ".join(parts)


def node_claim_names(result: dict[str, Any] | None) -> set[str]:
    return {nc.get("name") for nc in (result or {}).get("nodeClaims") or []}


def failure_overview(pods: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """Across every failed pod: how many failed for each phrase of its ``error``."""
    counts = Counter(reason_phrase(p.get("error")) for p in pods if not p.get("scheduled"))
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def split_pod_key(key: str) -> tuple[str, str]:
    namespace, _, name = (key or "").partition("/")
    return (namespace, name) if name else ("default", namespace)


def target_text(target: dict[str, Any] | None) -> str:
    if not target:
        return "—"
    kind = target.get("kind") or ""
    name = target.get("name") or ""
    suffix = " (new)" if target.get("new") else ""
    return f"{kind} {name}{suffix}".strip()


def result_view(result: dict[str, Any] | None) -> dict[str, Any]:
    """The run page's view of a result: failed pods first, NodeClaims with cost, pools."""
    result = result or {}
    pods = list(result.get("pods") or [])
    failed = [p for p in pods if not p.get("scheduled")]
    scheduled = [p for p in pods if p.get("scheduled")]
    node_claims = list(result.get("nodeClaims") or [])
    names = node_claim_names(result)
    for pod in failed:
        pod["aggregate"] = aggregate_reasons(pod.get("reasons") or [], names)
    for nc in node_claims:
        nc["cost"] = node_claim_cost(nc)
    stats = dict(result.get("stats") or {})
    stats.setdefault("pods", len(pods))
    stats.setdefault("scheduled", len(scheduled))
    stats.setdefault("failed", len(failed))
    return {
        "pods": pods,
        "failed": failed,
        "scheduled": scheduled,
        "node_claims": node_claims,
        "stats": stats,
        "failure_overview": failure_overview(pods),
        "feature_gates": result.get("featureGates") or {},
        "pools": result.get("pools") or [],
        "device_taint_rules": result.get("deviceTaintRules") or [],
        "gating": result.get("initializationGating") or [],
        "disruption": result.get("disruption"),
        "warnings": result.get("warnings") or [],
        "total_cost": sum(nc["cost"]["price"] or 0 for nc in node_claims),
    }


def node_claim_cost(nc: dict[str, Any]) -> dict[str, Any]:
    """The price of the cheapest remaining instance type, as the result records it.

    The scheduler may put prices on the NodeClaim (``price``, ``cost`` or per instance type in
    ``instanceTypeDetails``/``offerings``); without them the cost is unknown (None)."""
    for key in ("price", "cost", "hourlyPrice"):
        value = nc.get(key)
        if isinstance(value, int | float):
            return {"price": float(value), "instanceType": None}
        if isinstance(value, dict) and isinstance(value.get("price"), int | float):
            return {"price": float(value["price"]), "instanceType": value.get("instanceType")}
    best: tuple[float, str] | None = None
    for detail in nc.get("instanceTypeDetails") or nc.get("offerings") or []:
        if not isinstance(detail, dict):
            continue
        price = detail.get("price")
        if isinstance(price, int | float) and (best is None or price < best[0]):
            best = (float(price), detail.get("name") or detail.get("instanceType") or "")
    if best:
        return {"price": best[0], "instanceType": best[1]}
    return {"price": None, "instanceType": None}


def cheapest_prices(instance_types: dict[str, Any]) -> dict[str, float]:
    """Cheapest available offering price per instance type, from the snapshot's catalog."""
    out: dict[str, float] = {}
    for name, it in instance_types.items():
        prices = [o.price for o in getattr(it, "offerings", []) if o.available]
        if prices:
            out[name] = min(prices)
    return out


def fill_costs_from_catalog(node_claims: list[dict[str, Any]], prices: dict[str, float]) -> None:
    """Where the result carries no price, price a NodeClaim by its cheapest instance type."""
    for nc in node_claims:
        if nc.get("cost", {}).get("price") is not None:
            continue
        options = [(prices[it], it) for it in nc.get("instanceTypes") or [] if it in prices]
        if options:
            price, it = min(options)
            nc["cost"] = {"price": price, "instanceType": it}


def devices_by_claim(pods: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Every device held per NodeClaim: (pod, claim, device entry), for the NodeClaims tab."""
    held: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        target = pod.get("target") or {}
        if target.get("kind") != "NodeClaim":
            continue
        for claim in pod.get("claims") or []:
            for device in claim.get("devices") or []:
                held.setdefault(target.get("name") or "", []).append(
                    {"pod": pod.get("pod"), "claim": claim.get("claim"), **device}
                )
    return held


def option_changes(a: dict[str, Any] | None, b: dict[str, Any] | None) -> list[str]:
    """How two runs' options differ, in words: ``DRADeviceTaints on → off``, ``disrupt ...``."""
    a, b = a or {}, b or {}
    out = []
    gates_a, gates_b = a.get("featureGates") or {}, b.get("featureGates") or {}
    for gate in sorted(set(gates_a) | set(gates_b)):
        va, vb = gates_a.get(gate, True), gates_b.get(gate, True)
        if va != vb:
            out.append(f"{gate} {'on' if va else 'off'} → {'on' if vb else 'off'}")
    for key in sorted((set(a) | set(b)) - {"featureGates"}):
        if a.get(key) != b.get(key):
            out.append(f"{key} {a.get(key)!r} → {b.get(key)!r}")
    return out


def device_conditions(pods: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Across every placement: devices chosen despite a taint (tolerated), devices whose
    binding waits on conditions or pins the node, and devices a taint kept from a claim (from
    the claims' ``deviceTaints``), with the pod and target they serve."""
    tolerated, binding, excluded = [], [], []
    for pod in pods:
        target = target_text(pod.get("target"))
        for claim in pod.get("claims") or []:
            # The result's own account (allocator/scheduling/report.py), when it has one.
            for x in (claim.get("deviceTaints") or {}).get("excluded") or []:
                excluded.append(
                    {"pod": pod.get("pod"), "target": target, "claim": claim.get("claim"), **x}
                )
            for d in claim.get("devices") or []:
                entry = {"pod": pod.get("pod"), "target": target, "claim": claim.get("claim"), **d}
                if d.get("tolerations"):
                    tolerated.append(entry)
                if (
                    d.get("bindingConditions")
                    or d.get("bindsToNode")
                    or d.get("bindingFailureConditions")
                ):
                    entry["bindingTimeoutSeconds"] = claim.get("bindingTimeoutSeconds")
                    binding.append(entry)
    return {"tolerated": tolerated, "binding": binding, "excluded": excluded}
