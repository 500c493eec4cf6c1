"""The decisive cause of a failed pod, in one line (docs/RESULT.md: ``pods[].cause``; the
``error`` keeps Karpenter's words, each refusal ending with its own decisive cause).

Read from the pod's funnels over every target it tried, the truth first:

1. a request refused as a whole everywhere (``exceeding maximum``, a DeviceClass not found):
   that refusal;
2. a request no device in reach matches (every device refused for what it *is*: selector,
   taint, ...): ``no device in reach matches the selector of claim X request gpu (productName
   is "NVIDIA L40S" on 6, "NVIDIA A10G" on 6 devices)``;
3. a request asking for more matching devices than any target has: ``no node or instance type
   has 12 matching devices for claim X request gpu (largest: 8)``;
4. else the largest state refusal over every target (allocated, counter, constraint ...).

A snapshot without a NodePool says so: no new NodeClaim can be created for the pod.
"""

from __future__ import annotations

from collections.abc import Iterable

from allocator.funnel import (
    DEVICE_IS,
    Funnel,
    RejectionGroup,
    is_state,
    lasting_rank,
    short_cause,
    show_value,
)
from allocator.records import record

MAX_VALUES = 4  # values a selector cause names


@record(frozen=True)
class Cause:
    """A failed pod's decisive cause, in words, with its reason code."""

    reason: str  # a funnel reason code, or "request", "count", "no-devices", "no-nodepool"
    message: str
    no_nodepool: bool = False  # the snapshot has no NodePool (said in the message too)

    def to_json(self) -> dict:
        out: dict = {"reason": self.reason, "message": self.message}
        if self.no_nodepool:
            out["noNodePool"] = True
        return out


NO_NODEPOOL = "the snapshot has no NodePool, so no new NodeClaim can be created for it"


def decisive_cause(
    entries: Iterable[tuple], has_nodepools: bool, memo: dict | None = None
) -> Cause | None:
    """``entries``: the pod's funnel log, (target, funnel[, claim]). None when the pod's
    funnels say nothing (it failed for what it asks of the node only) and NodePools exist.
    ``memo``: what was read of each funnel object, shared by every pod of a result while the
    funnels live (a cached funnel stands for many targets and many pods)."""
    facts: dict[object, object] = memo if memo is not None else {}
    named = (
        (entry[0], entry[1], entry[2] if len(entry) > 2 and entry[2] is not None else None)
        for entry in entries
    )
    return cause_of(request_funnels(named, facts), has_nodepools, facts)


# A claim as a funnel log names it: its key, or its place among the pod's claims.
ClaimSlot = int | str


def request_funnels(
    entries: Iterable[tuple[str, Funnel, ClaimSlot | None]], facts: dict[object, object]
) -> dict[tuple[ClaimSlot, str], list[tuple[Funnel, int]]]:
    """Per (claim, request), each funnel object once with the number of targets (and
    instance types refused alike) it stands for, those saying the same things merged: the
    cause reads numbers, never which target said them. A claim None: the funnel's own."""
    per_request: dict[tuple[ClaimSlot, str], dict[int, list]] = {}
    for _, f, claim in entries:
        seen = per_request.setdefault((f.claim if claim is None else claim, f.request), {})
        hit = seen.get(id(f))
        if hit is None:
            seen[id(f)] = [f, f.weight]
        else:
            hit[1] += f.weight
    return {key: _alike_merged(seen.values(), facts) for key, seen in per_request.items()}


def cause_of(
    per_request: dict[tuple[str, str], list[tuple[Funnel, int]]],
    has_nodepools: bool,
    facts: dict[object, object],
) -> Cause | None:
    """The decisive cause from ``request_funnels`` (claims named by their keys)."""
    found = _device_cause(per_request, facts)
    if has_nodepools:
        return found
    if found is None:
        return Cause("no-nodepool", NO_NODEPOOL, True)
    return Cause(found.reason, f"{found.message}; {NO_NODEPOOL}", True)


def _device_cause(
    per_request: dict[tuple[str, str], list[tuple[Funnel, int]]], facts: dict[object, object]
) -> Cause | None:
    if not per_request:
        return None
    # 1. Refused as a whole everywhere.
    for seen in per_request.values():
        if all(f.whole and not f.rejections and not f.candidates for f, _ in seen):
            return Cause("request", seen[0][0].whole or "")
    # 2. Nothing in reach is what the request asks for.
    for (claim, request), seen in per_request.items():
        devices = [(f, n) for f, n in seen if not (f.whole and not f.candidates)]
        if not devices or any(_matching(f, facts) for f, _ in devices):
            continue
        what = f"claim {claim} request {request}"
        if not any(f.candidates for f, _ in devices):
            return Cause("no-devices", f"no node or instance type has a device for {what}")
        return _nothing_matches(what, devices, facts)
    # 3. More than any target has.
    for (claim, request), seen in per_request.items():
        counted = [f for f, _ in seen if f.candidates]
        if not counted:
            continue
        largest = max(_matching(f, facts) for f in counted)
        needed = max(f.needed for f in counted)
        if largest < needed and all(_matching(f, facts) < f.needed for f in counted):
            return Cause(
                "count",
                f"no node or instance type has {needed} matching devices for claim {claim} "
                f"request {request} (largest: {largest})",
            )
    # 4. What the cluster's state does to the devices that match, largest first.
    best: tuple[tuple[bool, int, int], str, RejectionGroup] | None = None
    for (claim, request), seen in per_request.items():
        for f, _ in seen:
            for g in f.rejections:
                key = (not is_state(g.reason), -g.devices, lasting_rank(g.reason))
                if best is None or key < best[0]:
                    best = (key, f"claim {claim} request {request}", g)
    if best is None:
        return None
    _, what, g = best
    return Cause(g.reason, f"{what}: {g.devices} devices refused by {g.reason}: {short_cause(g)}")


def _alike_merged(seen: Iterable[list], facts: dict[object, object]) -> list[tuple[Funnel, int]]:
    """The funnels of one request, those saying the same things (every number, word and
    value the cause reads; not which devices or instance type) merged into the first, with
    the targets of all: 5,000 nodes whose GPUs are all of another model are one funnel."""
    merged: dict[tuple, list] = {}
    for f, n in seen:
        key = facts.get(("content", id(f)))
        if key is None:
            key = facts[("content", id(f))] = _content(f, facts)
        hit = merged.get(key)
        if hit is None:
            merged[key] = [f, n]
        else:
            hit[1] += n
    return [(f, n) for f, n in merged.values()]


def _content(f: Funnel, facts: dict[object, object]) -> tuple:
    return (
        f.needed,
        f.whole,
        f.candidates,
        f.usable,
        tuple(
            (g.reason, g.devices, g.message, g.also, tuple(_reads(g, facts))) for g in f.rejections
        ),
    )


def _matching(f: Funnel, facts: dict[object, object]) -> int:
    """The devices in reach that are what the request asks for (usable, or refused only for
    the cluster's state)."""
    hit = facts.get(id(f))
    if hit is None:
        hit = facts[id(f)] = f.usable + sum(g.devices for g in f.rejections if is_state(g.reason))
    return hit  # type: ignore[return-value]


def _nothing_matches(
    what: str, seen: list[tuple[Funnel, int]], facts: dict[object, object]
) -> Cause:
    by_reason: dict[str, int] = {}
    for f, n in seen:
        for g in f.rejections:
            by_reason[g.reason] = by_reason.get(g.reason, 0) + g.devices * n
    reason = min(by_reason, key=lambda r: (lasting_rank(r), -by_reason[r]))
    groups = [(g, n) for f, n in seen for g in f.rejections if g.reason == reason]
    if reason == "selector":
        return Cause(
            "selector",
            f"no device in reach matches the selector of {what} ({_values(groups, facts)})",
        )
    shown = short_cause(max((g for g, _ in groups), key=lambda g: g.devices))
    check = reason if reason in DEVICE_IS else f"the {reason} check"
    return Cause(reason, f"no device in reach of {what} passes {check} ({shown})")


def _reads(g: RejectionGroup, facts: dict[object, object]) -> list[tuple[str, str]]:
    """The attribute values a selector group read, shown (once per group object)."""
    hit = facts.get(id(g))
    if hit is None:
        values = g.detail.get("values") if isinstance(g.detail, dict) else None
        shown: list[tuple[str, str]] = []
        if isinstance(values, dict):
            for name, vals in values.items():
                shown.append((name, " or ".join(show_value(v) for v in vals) if vals else "unset"))
        hit = facts[id(g)] = shown
    return hit  # type: ignore[return-value]


def _values(groups: list[tuple[RejectionGroup, int]], facts: dict[object, object]) -> str:
    """``productName is "L40S" on 6, "A10G" on 6 devices``: per group of devices, the value
    its selector read that the fewest other groups share (what sets the group apart), counted
    over the groups (each as many times as the targets it stands for), by attribute."""
    reads = [(_reads(g, facts), g.devices * n, n) for g, n in groups]
    share: dict[tuple[str, str], int] = {}
    for shown, _, times in reads:
        for pair in shown:
            share[pair] = share.get(pair, 0) + times
    by_name: dict[str, dict[str, int]] = {}
    unread = 0
    for shown, devices, _ in reads:
        if not shown:
            unread += devices
            continue
        name, value = min(shown, key=lambda pair: share[pair])  # first of the rarest
        counts = by_name.setdefault(name, {})
        counts[value] = counts.get(value, 0) + devices
    parts = []
    for name, counts in by_name.items():
        ordered = sorted(counts.items(), key=lambda kv: -kv[1])
        shown_values = ", ".join(f"{v} on {n}" for v, n in ordered[:MAX_VALUES])
        if len(ordered) > MAX_VALUES:
            rest = sum(n for _, n in ordered[MAX_VALUES:])
            shown_values += f", {len(ordered) - MAX_VALUES} more values on {rest}"
        parts.append(f"{name} is {shown_values} devices")
    if unread:
        parts.append(f"false on {unread} devices")
    return "; ".join(parts)
