"""The refusal funnel (docs/RESULT.md, "Why a pod was refused, and what would fix it").

For one request on one target (an existing node, a NodeClaim, an instance type): the devices in
reach, and for each the most lasting check that refuses it (``DEVICE_IS`` before ``STATE_DOES``;
the others kept as ``also``). Devices refused the same way form one ``RejectionGroup``;
``usable + sum(devices) == candidates`` always.

A funnel depends on the request's spec, the device source and the allocation state, never on
the pod, so the scheduler computes it once and reuses it (``scheduling/refusalcache.py``). The
checks refuse, ``explanation/messages.py`` words each refusal and ``explanation/builder.py``
collects them per request; this module only groups, aggregates and words them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import field
from itertools import islice
from typing import Any

from allocator.records import record

MAX_EXAMPLES = 5  # example devices per rejection group, example targets per funnel
MAX_CAUSES = 3  # rejection groups an error message names
MAX_HOLDERS = 3  # holders a group message names
MAX_FUNNELS = 6  # kinds of refusal a pod's explanation shows, in the order first met

# The order in which a device's refusals decide (docs/RESULT.md): what the device *is* (the
# request or the supply must change) before what the cluster's state *does* to it (it may
# pass: a holder leaves, a counter frees up). A device refused by several checks is counted
# under the first of them here; the others are kept as ``also``.
DEVICE_IS = (
    "selector",
    "cel-error",
    "pool-incomplete",
    "pool-invalid",
    "admin-access",
    "node-operations",
    "taint",
    "binding-condition",
    "compatibility-group",
)
STATE_DOES = ("counter", "capacity", "distinct", "constraint", "topology", "allocated")
_RANK = {code: i for i, code in enumerate((*DEVICE_IS, *STATE_DOES))}


def lasting_rank(reason: str) -> int:
    """A reason's place in the decisive order; a code not listed comes between the two
    families (it is a check's own, not the cluster's state)."""
    return _RANK.get(reason, len(DEVICE_IS))


def is_state(reason: str) -> bool:
    """The refusal may pass as the cluster's state changes (nothing about the device)."""
    return lasting_rank(reason) > len(DEVICE_IS)


@record(frozen=True)
class RejectionGroup:
    """Devices a funnel refused for one reason: the cause in words, and examples."""

    reason: str  # the trace's reason code (allocated, selector, taint, counter, ...)
    devices: int
    message: str  # names the cause (expression and values read, holder, counter ...)
    example_devices: tuple[str, ...]  # up to 5 "driver/pool/device"
    detail: Mapping[str, Any] = field(default_factory=dict)  # per reason, JSON-able
    also: tuple[str, ...] = ()  # other checks refusing some of these devices, decisive order


@record(frozen=True)
class Funnel:
    """Why a request found too few devices: candidates, usable, and each refusal counted."""

    claim: str
    request: str
    needed: int
    instance_type: str | None
    candidates: int
    usable: int
    rejections: tuple[RejectionGroup, ...]
    whole: str | None = None  # the request refused as a whole (e.g. exceeding maximum): why
    # Other instance types of the same NodeClaim refused alike (the same template shape and
    # state, so the same numbers): one funnel stands for all of them, not one per type.
    alike: tuple[str, ...] = ()

    @property
    def refused(self) -> int:
        return sum(g.devices for g in self.rejections)

    @property
    def weight(self) -> int:
        """How many instance types (or one target) the funnel stands for."""
        return 1 + len(self.alike)

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
            self.alike,
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


def holders_message(holders: list[Mapping[str, Any]], total: int | None = None) -> str:
    """The first few holders named, the rest counted (``total``: every holder's count)."""
    total = len(holders) if total is None else total
    shown = ", ".join(holder_text(h) for h in holders[:MAX_HOLDERS])
    if total > min(len(holders), MAX_HOLDERS):
        shown += f" and {total - min(len(holders), MAX_HOLDERS)} more claims"
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
    __slots__ = ("reason", "count", "message", "examples", "detail", "also")

    def __init__(self, reason: str, message: str, detail: Mapping[str, Any]) -> None:
        self.reason = reason
        self.count = 0
        self.message = message
        self.examples: list[str] = []
        self.also: set[str] = set()
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
    usable), in search order; each refusal counts under its decisive (most lasting) check.
    Groups are ordered by size (largest first), ties by the decisive order, then in the order
    their first device was met."""
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
        if refusal.also:
            g.also.update(refusal.also)
        if len(g.examples) < MAX_EXAMPLES:
            g.examples.append(device)
    # Largest first; between groups of one size the more lasting cause; then first met.
    ordered = sorted(groups.values(), key=lambda g: (-g.count, lasting_rank(g.reason)))
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
        also=tuple(sorted(g.also, key=lambda r: (lasting_rank(r), r))),
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
            f"{name} is " + " or ".join(show_value(v) for v in vals) if vals else f"{name} unset"
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


def show_value(v: Any) -> str:
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list | tuple):
        return "[" + ", ".join(show_value(x) for x in v) + "]"
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


def count_message(claim_key: str, request: str, needed: int, funnel: Funnel) -> str:
    """The count-stage refusal of one ExactCount request, ending with the decisive cause.
    Built from the (pod-independent) funnel alone, so that the scheduler words a cached refusal
    exactly as the search would."""
    return (
        f"claim {claim_key} request {request}: {funnel.usable} of {needed} devices available"
        + cause_suffix(funnel)
    )


def renamed(words: str, names: Mapping[str, str]) -> str:
    """Words naming claims (``claim <key>``) with each key of ``names`` replaced by its value:
    a refusal of claims of one spec is another pod's with its own claims named."""
    for old, new in names.items():
        words = words.replace(f"claim {old}", f"claim {new}")
    return words


def cause_suffix(funnel: Funnel) -> str:
    """``cause_text`` as the end of a message: after a space, or nothing."""
    cause = cause_text(funnel)
    return f" {cause}" if cause else ""


def names_any(texts: Iterable[str], funnels: Iterable[Funnel], names: Iterable[str]) -> bool:
    """Whether ``texts`` or the words of ``funnels`` (why a request was refused as a whole,
    each group's message and detail) name one of ``names``: words naming a target's own
    things (its node, pools, holders) are not another target's to share."""
    shown = list(texts)
    for f in funnels:
        shown.append(f.whole or "")
        for g in f.rejections:
            shown.append(g.message)
            shown.append(repr(g.detail))
    return any(name in text for text in shown for name in names if name)


def decisive_reason(f: Funnel) -> str | None:
    """The trace reason code of the decisive cause: the largest rejection group's."""
    return f.rejections[0].reason if f.rejections else None


# --- JSON and aggregation ----------------------------------------------------------------------


def rejection_json(g: RejectionGroup) -> dict[str, Any]:
    detail = g.detail
    holders = detail.get("holders")
    if holders and len(holders) > MAX_HOLDERS:  # the first few named, the rest counted
        detail = {**detail, "holders": holders[:MAX_HOLDERS], "claims": len(holders)}
    return {
        "reason": g.reason,
        "devices": g.devices,
        "message": g.message,
        "exampleDevices": list(g.example_devices),
        "also": list(g.also),
        "detail": _jsonable(detail),
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
# devices were refused for that reason share a funnel, its holders summarised, so that the
# explanation does not grow with the number of nodes.
_TARGET_SPECIFIC = frozenset({"allocated"})


def signature(f: Funnel) -> tuple:
    """The kind of refusal: the request and the causes (reason, the words where they do not
    name per-target facts, what also refused), not the numbers nor the instance type (every
    size of an instance family refuses a request for a model the same way)."""
    return (
        f.claim,
        f.request,
        f.needed,
        f.instance_type is None,
        f.whole,
        tuple(
            sorted(
                (g.reason, "" if g.reason in _TARGET_SPECIFIC else g.message, g.also)
                for g in f.rejections
            )
        ),
    )


def json_signature(f: Mapping[str, Any]) -> tuple:
    """``signature`` of a funnel as the trace records it (funnel_json without targets)."""
    return (
        f.get("claim"),
        f.get("request"),
        f.get("needed"),
        f.get("instanceType") is None,
        f.get("message"),
        tuple(
            sorted(
                (
                    r.get("reason"),
                    "" if r.get("reason") in _TARGET_SPECIFIC else r.get("message"),
                    tuple(r.get("also") or ()),
                )
                for r in f.get("rejections") or ()
            )
        ),
    )


def trace_target_key(subtree: list[Mapping[str, Any]]) -> tuple:
    """How a target refused a pod, read from its trace node and the nodes under it, grouped as
    the result's ``reasons`` are: by the kinds of device refusal where devices were counted
    (the words of an ``allocated`` refusal name each node's holders, the kind does not), else
    by the target's words. A NodePool's new NodeClaim is never grouped."""
    head = subtree[0]
    if head["label"].startswith("nodepool/"):
        return ("nodepool", head["id"])  # each NodePool its own, as in reasons
    # Each kind once: a target's node and its instance type's may carry the same funnel.
    funnels = tuple(
        dict.fromkeys(json_signature(f) for node in subtree for f in node.get("funnel") or ())
    )
    if funnels:
        return (head["status"], head["reason"], "devices", funnels)
    return (head["status"], head["reason"], "words", head["message"])


class _Holders:
    """Who holds the devices an ``allocated`` group stands for, over every target: counts,
    and the first few named."""

    __slots__ = ("devices", "claims", "pods", "in_run", "named")

    def __init__(self) -> None:
        self.devices = 0
        self.claims: set[str] = set()
        self.pods: set[str] = set()
        self.in_run: set[str] = set()
        self.named: list[Mapping[str, Any]] = []

    def add(self, g: RejectionGroup, weight: int = 1) -> None:
        self.devices += g.devices * weight
        for h in g.detail.get("holders") or ():
            claim = h["claim"]
            if claim not in self.claims:
                self.claims.add(claim)
                if len(self.named) < MAX_HOLDERS:
                    self.named.append(h)
            self.pods.update(h.get("pods") or ())
            if h.get("inRun"):
                self.in_run.add(claim)

    def summary(self, g: RejectionGroup, targets: int) -> dict[str, Any]:
        out = rejection_json(g)
        if not self.claims or targets <= 1:  # one target's own words and holders
            return out
        out["message"] = (
            holders_message(self.named, len(self.claims))
            + device_suffix(g.devices)
            + f" (on {targets} targets: {self.devices} devices held by {len(self.claims)} "
            f"claims of {len(self.pods)} pods, {len(self.in_run)} claims placed in this run)"
        )
        out["detail"] = {
            "holders": _jsonable(self.named),
            "claims": len(self.claims),
            "pods": len(self.pods),
            "placedInRun": len(self.in_run),
            "devices": self.devices,
        }
        return out


class FunnelGroup:
    """One entry of ``pods[].explanation`` being gathered: the funnels of one kind of refusal
    over every target. Read only once gathered (many pods may share it)."""

    __slots__ = ("funnel", "targets", "holders", "instance_types")

    def __init__(self, funnel: Funnel) -> None:
        self.funnel = funnel  # the first target's: its numbers and words are shown
        # Each target once, in the order met (the first are the examples): a NodeClaim's
        # instance types refusing alike are one target.
        self.targets: dict[str, None] = {}
        self.holders: dict[str, _Holders] = {}
        self.instance_types: dict[str, None] = {}

    def add(self, target: str, f: Funnel) -> None:
        if f.instance_type is not None:
            self.instance_types[f.instance_type] = None
            for name in f.alike:
                self.instance_types[name] = None
        if target:  # "": refused before any target
            self.targets[target] = None
        for g in f.rejections:
            if g.reason in _TARGET_SPECIFIC:
                self.holders.setdefault(g.reason, _Holders()).add(g, f.weight)

    def to_json(self, claim: str | None = None) -> dict:
        """``claim``: the claim it is shown for (the funnel's own by default)."""
        funnel = self.funnel if claim is None else self.funnel.for_claim(claim)
        examples = list(islice(self.targets, MAX_EXAMPLES))
        out = funnel_json(funnel, examples, len(self.targets))
        if len(self.instance_types) > 1:
            out["instanceTypes"] = len(self.instance_types)
            # By name (numbers as numbers): instance types refused alike are met by shape, so
            # the order they were met in says nothing.
            names = sorted(self.instance_types, key=_natural)
            out["exampleInstanceTypes"] = names[:MAX_EXAMPLES]
        rejections = []
        for g, entry in zip(funnel.rejections, out["rejections"], strict=True):
            holders = self.holders.get(g.reason)
            rejections.append(holders.summary(g, len(self.targets)) if holders else entry)
        out["rejections"] = rejections
        return out


def _natural(name: str) -> tuple:
    """``p5.4xlarge`` before ``p5.48xlarge``, ``fake-it-2`` before ``fake-it-10``."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in _DIGITS.split(name))


_DIGITS = re.compile(r"(\d+)")


def aggregate(entries: Iterable[tuple], memo: dict | None = None) -> list[dict]:
    """``pods[].explanation``: funnels of every target, one entry per kind of refusal (the
    first target's numbers and words, the holders summarised over all), in the order first
    met. ``entries``: (target, funnel) or (target, funnel, claim) where a cached funnel stands
    for another claim of the same spec (renamed here, once per group rather than per
    target)."""
    named = (
        (entry[0], entry[1], entry[2] if len(entry) > 2 and entry[2] is not None else None)
        for entry in entries
    )
    return [g.to_json(claim) for claim, g in funnel_groups(named, memo)]


def funnel_groups(
    entries: Iterable[tuple[str, Funnel, Any]], memo: dict | None = None
) -> list[tuple[Any, FunnelGroup]]:
    """The groups of ``aggregate`` with the claim each is shown for: ``entries`` are
    (target, funnel, claim), the claim None for the funnel's own, or any token the caller
    names afterwards (the place of a claim among the pod's: many pods share one log)."""
    groups: dict[tuple, tuple[Any, FunnelGroup]] = {}
    # Funnel object id -> signature; pass one dict for many calls while the funnels live (a
    # cached funnel stands for many targets and many pods).
    sigs: dict[int, tuple] = memo if memo is not None else {}
    for target, f, claim in entries:
        sig = sigs.get(id(f))
        if sig is None:
            sig = sigs[id(f)] = signature(f)[1:]  # without the claim: named when shown
        key = (f.claim if claim is None else claim, sig)
        hit = groups.get(key)
        if hit is None:
            hit = groups[key] = (claim, FunnelGroup(f))
        hit[1].add(target, f)
    return list(groups.values())


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
