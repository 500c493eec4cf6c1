"""The refusal funnel (CONTRACT section 4, "Why a pod was refused, and what would fix it").

For one request on one target (an existing node, a NodeClaim, an instance type): the devices in
reach, and for each the first device check (in search order) that refused it. Devices refused
the same way form one ``RejectionGroup``; ``usable + sum(devices) == candidates`` always.

A funnel depends on the request's spec, the device source and the allocation state, never on
the pod, so the scheduler computes it once and reuses it (``scheduling/refusalcache.py``).
The checks produce the refusals (``dfs.DFSContext.refusal``); this module only groups, aggregates and
words them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

MAX_EXAMPLES = 5  # example devices per rejection group, example targets per funnel
MAX_CAUSES = 3  # rejection groups an error message names
MAX_HOLDERS = 3  # holders a group message names


@dataclass(frozen=True, slots=True)
class RejectionGroup:
    reason: str  # the trace's reason code (allocated, selector, taint, counter, ...)
    devices: int
    message: str  # names the cause (expression and values read, holder, counter ...)
    example_devices: tuple[str, ...]  # up to 5 "driver/pool/device"
    detail: Mapping[str, Any] = field(default_factory=dict)  # per reason, JSON-able


@dataclass(frozen=True, slots=True)
class Funnel:
    claim: str
    request: str
    needed: int
    instance_type: str | None
    candidates: int
    usable: int
    rejections: tuple[RejectionGroup, ...]
    whole: str | None = None  # the request refused as a whole (e.g. exceeding maximum): why

    @property
    def refused(self) -> int:
        return sum(g.devices for g in self.rejections)

    def for_claim(self, claim: str) -> Funnel:
        """The same funnel for another claim of the same spec (funnels are pod-independent)."""
        if claim == self.claim:
            return self
        whole = self.whole
        if whole:  # a search's words name the claim it got stuck on
            whole = whole.replace(f"claim {self.claim} ", f"claim {claim} ")
        return Funnel(
            claim,
            self.request,
            self.needed,
            self.instance_type,
            self.candidates,
            self.usable,
            self.rejections,
            whole,
        )


def device_suffix(n: int) -> str:
    return f" on {n} device" + ("" if n == 1 else "s")


def holder_text(holder: Mapping[str, Any]) -> str:
    """``claim ns/name (reserved for ns/pod)`` or the pod of this run that took it."""
    pods = list(holder.get("pods") or ())
    if holder.get("inRun"):
        who = ", ".join(pods) if pods else "a pod of this run"
        return f"claim {holder['claim']} of {who} (placed in this run)"
    if pods:
        return f"claim {holder['claim']} (reserved for {', '.join(pods)})"
    return f"claim {holder['claim']}"


def holders_message(holders: list[Mapping[str, Any]]) -> str:
    shown = ", ".join(holder_text(h) for h in holders[:MAX_HOLDERS])
    if len(holders) > MAX_HOLDERS:
        shown += f" and {len(holders) - MAX_HOLDERS} more claims"
    return f"allocated to {shown}"


def _merge_detail(into: dict[str, Any], other: Mapping[str, Any]) -> None:
    """Union of the lists a group's devices report (holders, values read)."""
    holders = other.get("holders")
    if holders:
        have = into.setdefault("holders", [])
        known = {h["claim"] for h in have}
        for h in holders:
            if h["claim"] not in known:
                known.add(h["claim"])
                have.append(dict(h))
    values = other.get("values")
    if isinstance(values, Mapping):
        mine = into.setdefault("values", {})
        for name, vals in values.items():
            merged = set(map(_freeze, mine.get(name, []))) | set(map(_freeze, vals))
            mine[name] = sorted(merged, key=_sort_key)


def _freeze(v: Any) -> Any:
    return tuple(v) if isinstance(v, list) else v


def _sort_key(v: Any) -> tuple:
    return (type(v).__name__, str(v))


class _Group:
    __slots__ = ("reason", "count", "message", "examples", "detail")

    def __init__(self, reason: str, message: str, detail: Mapping[str, Any]) -> None:
        self.reason = reason
        self.count = 0
        self.message = message
        self.examples: list[str] = []
        self.detail: dict[str, Any] = {k: v for k, v in detail.items()}
        if "holders" in self.detail:
            self.detail["holders"] = [dict(h) for h in self.detail["holders"]]
        if isinstance(self.detail.get("values"), Mapping):
            self.detail["values"] = {k: list(v) for k, v in self.detail["values"].items()}


def build_funnel(
    claim: str,
    request: str,
    needed: int,
    instance_type: str | None,
    refusals: Iterable[tuple[str, Any]],
    whole: str | None = None,
) -> Funnel:
    """``refusals``: per candidate device ("driver/pool/device", its ``Refusal`` or None when
    usable), in search order. Groups are ordered by size (largest, the decisive cause, first),
    ties in the order their first device was met."""
    groups: dict[tuple, _Group] = {}
    candidates = usable = 0
    for device, refusal in refusals:
        candidates += 1
        if refusal is None:
            usable += 1
            continue
        key = (refusal.reason, refusal.group)
        g = groups.get(key)
        if g is None:
            g = groups[key] = _Group(refusal.reason, refusal.message, refusal.detail)
        elif refusal.detail:
            _merge_detail(g.detail, refusal.detail)
        g.count += 1
        if len(g.examples) < MAX_EXAMPLES:
            g.examples.append(device)
    ordered = sorted(groups.values(), key=lambda g: -g.count)  # stable: ties keep first-met
    return Funnel(
        claim=claim,
        request=request,
        needed=needed,
        instance_type=instance_type or None,
        candidates=candidates,
        usable=usable,
        rejections=tuple(_finish(g) for g in ordered),
        whole=whole,
    )


def _finish(g: _Group) -> RejectionGroup:
    holders = g.detail.get("holders")
    base = holders_message(holders) if holders and len(holders) > 1 else g.message
    return RejectionGroup(
        reason=g.reason,
        devices=g.count,
        message=base + device_suffix(g.count),
        example_devices=tuple(g.examples),
        detail=g.detail,
    )


def whole_funnel(
    claim: str, request: str, needed: int, instance_type: str | None, why: str
) -> Funnel:
    """A request refused as a whole (exceeding maximum, a validation error ...)."""
    return Funnel(claim, request, needed, instance_type or None, 0, 0, (), why)


# --- words -------------------------------------------------------------------------------------


def short_cause(g: RejectionGroup) -> str:
    """The cause without the device count and, for selectors, without the expression (the
    values read say it): ``productName is "Tesla T4"``."""
    values = g.detail.get("values")
    if g.reason == "selector" and isinstance(values, Mapping) and values:
        return "; ".join(
            f"{name} is " + " or ".join(_show_value(v) for v in vals) if vals else f"{name} unset"
            for name, vals in values.items()
        )
    message = g.message
    suffix = device_suffix(g.devices)
    if message.endswith(suffix):
        message = message[: -len(suffix)]
    expression = g.detail.get("expression")
    if expression and message.startswith(f"{expression}: "):
        message = message[len(expression) + 2 :]
    return message


def _show_value(v: Any) -> str:
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_show_value(x) for x in v) + "]"
    return str(v)


def cause_text(f: Funnel) -> str:
    """What ends a refusal message: ``(4 rejected by selector: productName is "Tesla T4")``,
    the decisive (largest) group first."""
    if f.whole and not f.rejections:
        return f"({f.whole})"
    if not f.rejections:
        return "(no devices in reach)" if f.candidates == 0 else ""
    parts = [
        f"{g.devices} rejected by {g.reason}: {short_cause(g)}" for g in f.rejections[:MAX_CAUSES]
    ]
    if len(f.rejections) > MAX_CAUSES:
        parts.append(f"{len(f.rejections) - MAX_CAUSES} more causes")
    return "(" + "; ".join(parts) + ")"


def decisive_reason(f: Funnel) -> str | None:
    """The trace reason code of the decisive cause: the largest rejection group's."""
    return f.rejections[0].reason if f.rejections else None


# --- JSON and aggregation ----------------------------------------------------------------------


def rejection_json(g: RejectionGroup) -> dict[str, Any]:
    return {
        "reason": g.reason,
        "devices": g.devices,
        "message": g.message,
        "exampleDevices": list(g.example_devices),
        "detail": _jsonable(g.detail),
    }


def _jsonable(v: Any) -> Any:
    if isinstance(v, Mapping):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple | set | frozenset):
        return [_jsonable(x) for x in v]
    if isinstance(v, str | int | float | bool) or v is None:
        return v
    return str(v)


def funnel_json(f: Funnel, targets: list[str] | None = None, count: int | None = None) -> dict:
    """One funnel as the result (``targets`` given) or the trace (without them) shows it."""
    out: dict[str, Any] = {
        "claim": f.claim,
        "request": f.request,
        "needed": f.needed,
        "instanceType": f.instance_type,
    }
    if targets is not None:
        out["targets"] = count if count is not None else len(targets)
        out["exampleTargets"] = list(targets[:MAX_EXAMPLES])
    out["candidates"] = f.candidates
    out["usable"] = f.usable
    out["rejections"] = [rejection_json(g) for g in f.rejections]
    if f.whole:
        out["message"] = f.whole
    return out


# Reasons whose messages name per-target facts (the holders of a node's devices): targets whose
# devices were refused for that reason in the same numbers share a funnel, so that the
# explanation does not grow with the number of nodes.
_TARGET_SPECIFIC = frozenset({"allocated"})


def signature(f: Funnel) -> tuple:
    return (
        f.claim,
        f.request,
        f.needed,
        f.instance_type,
        f.candidates,
        f.usable,
        f.whole,
        tuple(
            (g.reason, g.devices, "" if g.reason in _TARGET_SPECIFIC else g.message)
            for g in f.rejections
        ),
    )


def aggregate(entries: Iterable[tuple], memo: dict | None = None) -> list[dict]:
    """``pods[].explanation``: funnels of every target, one entry per way of refusing (first
    target's messages and example devices), in the order first met. ``entries``: (target,
    funnel) or (target, funnel, claim) where a cached funnel stands for another claim of the
    same spec (renamed here, once per group rather than once per target)."""
    groups: dict[tuple, list] = {}
    # Funnel object id -> signature; pass one dict for many calls while the funnels live (a
    # cached funnel stands for many targets and many pods).
    sigs: dict[int, tuple] = memo if memo is not None else {}
    for entry in entries:
        target, f = entry[0], entry[1]
        claim = entry[2] if len(entry) > 2 and entry[2] is not None else f.claim
        sig = sigs.get(id(f))
        if sig is None:
            sig = sigs[id(f)] = signature(f)[1:]  # without the claim: renamed below
        key = (claim, sig)
        hit = groups.get(key)
        if hit is None:
            hit = groups[key] = [f.for_claim(claim), [], 0]
        if target:  # "" for a pod refused before any target (its claims)
            hit[2] += 1
            if len(hit[1]) < MAX_EXAMPLES and target not in hit[1]:
                hit[1].append(target)
    return [funnel_json(f, targets, n) for f, targets, n in groups.values()]


# --- the command line's summary ----------------------------------------------------------------

LINE_CHARS = 240


def clip_words(text: str, limit: int = LINE_CHARS) -> str:
    """``text`` on one line, shortened at a word boundary (never inside a word)."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit - 4)
    return (text[:cut] if cut > 0 else text[: limit - 4]).rstrip(" ;,") + " ..."


def summary_lines(entry: Mapping[str, Any], indent: str = "  ") -> list[str]:
    """One aggregated funnel (``pods[].explanation[]``) in two readable lines: where and how
    many devices, then what refused them, the decisive cause first."""
    where = ""
    targets = entry.get("targets") or 0
    examples = list(entry.get("exampleTargets") or [])
    if examples:
        more = f" and {targets - len(examples)} more" if targets > len(examples) else ""
        where = f" on {', '.join(examples[:2])}" + (f" +{targets - 2}" if targets > 2 else more)
    it = f" ({entry['instanceType']})" if entry.get("instanceType") else ""
    head = f"claim {entry['claim']} request {entry['request']}{where}{it}: "
    if entry["candidates"] or entry["rejections"]:
        head += (
            f"{entry['usable']} of {entry['candidates']} devices usable, {entry['needed']} needed"
        )
    else:
        head += "refused as a whole"
    causes = [f"{r['devices']} {r['reason']}: {r['message']}" for r in entry["rejections"]]
    if entry.get("message"):
        causes.append(entry["message"])
    lines = [indent + clip_words(head)]
    if causes:
        lines.append(indent + "  " + clip_words("; ".join(causes)))
    return lines
