"""The answer to ``kubectl dra why POD``, from the cluster's objects and a result document
(``pods[]``, ``nodeClaims[]``). Pure: text in, text out, so the answer reads the same in a
test as on a terminal."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from allocator.funnel import clip_words, summary_lines
from dra_web.pages.presenters import suggestion_view

MAX_FIXES = 3
MAX_HOLDERS = 5
MAX_REASONS = 3
MAX_FUNNELS = 2
MAX_TYPES = 4


@dataclass(frozen=True, slots=True)
class Offering:
    zone: str
    capacity_type: str
    price: float
    available: bool


def pod_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def find_pod(items: Iterable[dict], namespace: str, name: str) -> dict | None:
    for item in items:
        md = item.get("metadata") or {}
        if (
            item.get("kind") == "Pod"
            and md.get("name") == name
            and (md.get("namespace") or "default") == namespace
        ):
            return item
    return None


def namespaces_with_pod(items: Iterable[dict], name: str) -> list[str]:
    return sorted(
        (item.get("metadata") or {}).get("namespace") or "default"
        for item in items
        if item.get("kind") == "Pod" and (item.get("metadata") or {}).get("name") == name
    )


def not_pending(pod: dict) -> str | None:
    """Why the pod is not a pending pod Karpenter would schedule (None when it is): where it
    runs, or that it is terminating."""
    md, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    key = pod_key(md.get("namespace") or "default", md.get("name") or "?")
    phase = status.get("phase")
    if md.get("deletionTimestamp"):
        return f"pod {key} is terminating (deletion requested at {md['deletionTimestamp']})"
    if spec.get("nodeName"):
        return (
            f"pod {key} is not pending: it runs on node {spec['nodeName']} (phase {phase or '-'})"
        )
    if phase in ("Succeeded", "Failed"):
        return f"pod {key} is not pending: it has finished (phase {phase})"
    return None


def pod_anchor(key: str) -> str:
    """The run page's anchor of a pod (``#pod-<namespace>-<name>``)."""
    return "pod-" + re.sub(r"[^A-Za-z0-9_-]+", "-", key).strip("-")


# --- the answer ------------------------------------------------------------------------------


def _target_text(target: Mapping[str, Any]) -> str:
    if target.get("kind") == "Node":
        return f"existing node {target.get('name')}"
    if target.get("new"):
        return f"new NodeClaim {target.get('name')}"
    return f"NodeClaim {target.get('name')} (launched, its node not registered yet)"


def _allowed(values_by_key: Mapping[str, list[str]], key: str, value: str) -> bool:
    allowed = values_by_key.get(key)
    return allowed is None or value in allowed


def cheapest_types(
    node_claim: Mapping[str, Any], offerings: Mapping[str, list[Offering]]
) -> list[tuple[str, float, Offering]]:
    """The NodeClaim's instance types, cheapest offering first, under its requirements."""
    reqs = {
        r["key"]: list(r.get("values") or [])
        for r in node_claim.get("requirements") or []
        if r.get("operator") == "In"
    }
    out = []
    for name in node_claim.get("instanceTypes") or []:
        usable = [
            o
            for o in offerings.get(name, [])
            if o.available
            and _allowed(reqs, "topology.kubernetes.io/zone", o.zone)
            and _allowed(reqs, "karpenter.sh/capacity-type", o.capacity_type)
        ]
        if usable:
            best = min(usable, key=lambda o: (o.price, o.zone, o.capacity_type))
            out.append((name, best.price, best))
    return sorted(out, key=lambda t: (t[1], t[0]))


def _launch_lines(
    result: Mapping[str, Any], entry: Mapping[str, Any], offerings: Mapping[str, list[Offering]]
) -> list[str]:
    target = entry.get("target") or {}
    node_claim = next(
        (nc for nc in result.get("nodeClaims") or [] if nc.get("name") == target.get("name")),
        None,
    )
    if target.get("kind") != "NodeClaim" or not target.get("new") or node_claim is None:
        return ["  nothing new for this pod"]
    lines = [f"  NodeClaim {node_claim['name']} from NodePool {node_claim.get('nodePool')}"]
    ranked = cheapest_types(node_claim, offerings)
    if ranked:
        shown = ", ".join(f"{name} ${price:.4g}/h" for name, price, _ in ranked[:MAX_TYPES])
        more = f" (+{len(ranked) - MAX_TYPES} more)" if len(ranked) > MAX_TYPES else ""
        lines.append(f"    instance types, cheapest first: {shown}{more}")
        best = ranked[0][2]
        lines.append(f"    cheapest offering: {best.zone}, {best.capacity_type}")
    else:
        lines.append(f"    instance types: {', '.join(node_claim.get('instanceTypes') or [])}")
    drivers = (node_claim.get("annotations") or {}).get("karpenter.sh/requested-dra-drivers")
    if drivers:
        lines.append(f"    DRA drivers: {drivers}")
    others = [p for p in node_claim.get("pods") or [] if p != entry.get("pod")]
    if others:
        lines.append(
            f"    shared with {_count(len(others), 'other pending pod')}: {', '.join(others[:3])}"
        )
    return lines


def _devices_line(entry: Mapping[str, Any]) -> str | None:
    shown: dict[str, list[str]] = {}
    for claim in entry.get("claims") or []:
        for device in claim.get("devices") or []:
            where = device.get("instanceType") or f"{device.get('driver')}/{device.get('pool')}"
            names = shown.setdefault(f"{where} {device.get('driver')}", [])
            if device.get("device") not in names:
                names.append(device.get("device"))
    if not shown:
        return None
    where, names = next(iter(shown.items()))
    listed = ", ".join(names[:6]) + (f" +{len(names) - 6}" if len(names) > 6 else "")
    more = f" (and on {len(shown) - 1} other instance types)" if len(shown) > 1 else ""
    return f"Devices: {where}: {listed}{more}"


def holders(entry: Mapping[str, Any]) -> list[str]:
    """Who holds the devices the pod's requests were refused for (``allocated`` rejections)."""
    out: list[str] = []
    for funnel in entry.get("explanation") or []:
        for rejection in funnel.get("rejections") or []:
            if rejection.get("reason") != "allocated":
                continue
            for holder in (rejection.get("detail") or {}).get("holders") or []:
                pods = ", ".join(holder.get("pods") or []) or "no pod"
                run = " (taken earlier in this simulation)" if holder.get("inRun") else ""
                text = f"claim {holder.get('claim')}, reserved for {pods}{run}"
                if text not in out:
                    out.append(text)
            if not (rejection.get("detail") or {}).get("holders") and rejection.get("message"):
                text = clip_words(rejection["message"])
                if text not in out:
                    out.append(text)
    return out


def _decisive_funnel(funnels: list[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The funnel whose refusal decides: a NodePool's when one was tried (Karpenter's error
    names the NodePools last, its decisive cause), else the last one."""
    for funnel in reversed(funnels):
        if any(str(t).startswith("nodepool/") for t in funnel.get("exampleTargets") or []):
            return funnel
    return funnels[-1] if funnels else None


def decisive_cause(entry: Mapping[str, Any]) -> str:
    """The refusal that decides, in one line: the result's ``cause`` (what the devices are
    before what holds them), else the decisive funnel's first rejection, else the last
    target's reason, else the error."""
    cause = entry.get("cause")
    if isinstance(cause, Mapping) and cause.get("message"):
        return clip_words(str(cause["message"]), 240)
    funnel = _decisive_funnel(list(entry.get("explanation") or []))
    if funnel is not None:
        where = ", ".join(funnel.get("exampleTargets") or [])
        it = f" ({funnel['instanceType']})" if funnel.get("instanceType") else ""
        head = f"request {funnel.get('request')} of claim {funnel.get('claim')} on {where}{it}"
        for rejection in funnel.get("rejections") or []:
            return clip_words(
                f"{head}: {rejection.get('devices')} devices refused by "
                f"{rejection.get('reason')}: {rejection.get('message')}",
                240,
            )
        if funnel.get("message"):
            return clip_words(f"{head}: {funnel['message']}", 240)
    reasons = entry.get("reasons") or []
    if reasons:
        return clip_words(f"{reasons[-1].get('target')}: {reasons[-1].get('reason')}", 240)
    return clip_words(entry.get("error") or "not scheduled", 240)


def _fix_lines(entry: Mapping[str, Any], node_claims: list[str]) -> list[str]:
    views = suggestion_view(entry.get("suggestions"), node_claims)
    if not views:
        return ["  none verified: no single change lets the pod in"]
    lines = []
    for i, view in enumerate(views[:MAX_FIXES], 1):
        lines.append(f"  {i}. [{view['kind']}] {clip_words(view['message'], 200)}")
        lines.extend(f"       {line}" for line in view["patch"].rstrip("\n").splitlines())
        if view.get("recreate"):
            lines.append(f"       recreate ({view.get('workload') or 'the object'}):")
            lines.extend(f"         {step}" for step in view.get("recreate_steps") or [])
    if len(views) > MAX_FIXES:
        lines.append(f"  ... {len(views) - MAX_FIXES} more (see them with --open)")
    return lines


def answer(
    result: Mapping[str, Any],
    key: str,
    offerings: Mapping[str, list[Offering]],
    context_line: str = "",
) -> str:
    """The text ``kubectl dra why`` prints for pod ``key`` ("namespace/name")."""
    out = [f"Pod {key}" + (f" ({context_line})" if context_line else "")]
    ignored = next((p for p in result.get("ignoredPods") or [] if p.get("pod") == key), None)
    if ignored is not None:
        out.append(f"Karpenter would not provision for it: {ignored.get('reason')}")
        return "\n".join(out) + "\n"
    entry = next((p for p in result.get("pods") or [] if p.get("pod") == key), None)
    if entry is None:
        out.append("not among the pods the simulation schedules")
        return "\n".join(out) + "\n"
    node_claims = [nc.get("name") for nc in result.get("nodeClaims") or []]
    if entry.get("scheduled"):
        target = entry.get("target") or {}
        out.append(f"Placed: yes, on {_target_text(target)}")
        if target.get("kind") == "Node":
            out.append(
                "  it fits an existing node: kube-scheduler should bind it; if it stays pending, "
                "the reason is outside what the simulation models"
            )
        devices = _devices_line(entry)
        if devices:
            out.append(devices)
        out.append("Karpenter would launch:")
        out.extend(_launch_lines(result, entry, offerings))
    else:
        out.append("Placed: no")
        out.append(f"Cause: {decisive_cause(entry)}")
        held = holders(entry)
        if held:
            more = f" and {len(held) - MAX_HOLDERS} more" if len(held) > MAX_HOLDERS else ""
            out.append("Held by: " + "; ".join(held[:MAX_HOLDERS]) + more)
        funnels = entry.get("explanation") or []
        if funnels:
            out.append("Devices looked at:")
            for funnel in funnels[:MAX_FUNNELS]:
                out.extend(summary_lines(funnel, "  "))
        reasons = entry.get("reasons") or []
        if reasons:
            out.append("Targets tried:")
            for reason in reasons[:MAX_REASONS]:
                count = f" (+{reason['targets'] - 1} alike)" if reason.get("targets", 1) > 1 else ""
                out.append(
                    f"  {reason.get('target')}{count}: {clip_words(reason.get('reason') or '')}"
                )
            if len(reasons) > MAX_REASONS:
                out.append(f"  ... {len(reasons) - MAX_REASONS} more")
        out.append("Fixes (each verified by re-running the pod with it):")
        out.extend(_fix_lines(entry, node_claims))
        out.append("Karpenter would launch:")
        out.append("  nothing for this pod")
    stats = result.get("stats") or {}
    out.append(
        f"In all: {stats.get('scheduled', 0)} of {stats.get('pods', 0)} pending pods placed, "
        f"{_count(len(node_claims), 'new NodeClaim')}."
    )
    return "\n".join(out) + "\n"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
