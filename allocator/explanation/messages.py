"""What each device check says when it refuses a device, for the refusal funnel.

One function per reason code, ``(ctx, claim, request, cand, rejection) -> Refusal``: the message
names the cause (the selector expression that was false and the values it read, the claim
holding the device and its pods, the counter set and what is left, the taint no toleration
matches ...), ``detail`` carries it structured (docs/RESULT.md), and ``group`` says which
devices were refused the same way. The checks' ``explain`` methods call these; ``EXPLAIN``
maps a reason code to its function for checks that have none.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from allocator.dfs import Refusal
from allocator.explanation.funnel import holder_text
from allocator.model import DeviceID

HOLDERS = "holders"  # the key of the HolderIndex in the Allocator's extensions

_MISSING = object()


# --- selector and cel-error --------------------------------------------------------------------


def _read(cand, f: tuple) -> tuple[str, Any]:
    """(shown name, value) of one device field a selector reads (``_MISSING`` when absent)."""
    kind = f[0]
    if kind == "driver":
        return "driver", cand.id.driver
    if kind == "allowMultipleAllocations":
        return "allowMultipleAllocations", bool(cand.device.allow_multiple_allocations)
    domain, ident = f[1], f[2]
    raw = cand.device.attributes if kind == "attributes" else cand.device.capacity
    value = raw.get(f"{domain}/{ident}", _MISSING)
    if value is _MISSING and domain == cand.id.driver:
        value = raw.get(ident, _MISSING)
    if kind == "capacity" and value is not _MISSING:
        value = value.value
    name = ident if domain == cand.id.driver else f"{domain}/{ident}"
    return name, value


def _jsonable(value: Any) -> Any:
    if value is _MISSING:
        return None
    if isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    canonical = getattr(value, "canonical", None)
    return canonical() if callable(canonical) else str(value)


def _shown(value: Any) -> str:
    if value is _MISSING:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return str(_jsonable(value))


def _failing_selector(ctx, claim, req, cand) -> tuple[int, Any, Any] | None:
    """(index, compiled selector, outcome) of the first selector the device fails."""
    engine = ctx.matcher.engine
    for i, sel in enumerate(req.compiled):
        outcome = engine.matches(sel, cand.device, cand.id.driver)
        if not outcome.matched:
            return i, sel, outcome
    return None


def _source(req, index: int) -> str:
    cls = req.device_class
    own = len(cls.selectors) if cls is not None else 0
    if index < own:
        return f"DeviceClass {cls.name}"
    return f"request {req.name}"


def selector(ctx, claim, req, cand, rejection) -> Refusal:
    found = _failing_selector(ctx, claim, req, cand)
    if found is None:
        return Refusal(rejection[0], rejection[1])
    index, sel, outcome = found
    source = _source(req, index)
    if outcome.error:
        return cel_error_refusal(sel.expression, source, outcome.error)
    read = [_read(cand, f) for f in (sel.fields or ())]
    # Devices of one kind read the same values: one Refusal for all of them (the words are
    # built from the expression, its source and the values alone; refusals are not changed
    # afterwards). Only plain values are compared, by type and value.
    key = None
    memo = ctx.extensions.get(SELECTOR_WORDS) if sel.fields is not None else None
    if memo is not None and all(v is _MISSING or type(v) in _PLAIN for _, v in read):
        key = (sel.expression, source, tuple((n, type(v), v) for n, v in read))
        hit = memo.get(key)
        if hit is not None:
            return hit
    refusal = _selector_refusal(sel, source, read)
    if key is not None:
        memo[key] = refusal
    return refusal


_PLAIN = frozenset({str, int, float, bool})
SELECTOR_WORDS = "selector-words"  # the Allocator's extensions: selector refusals by values


def _selector_refusal(sel, source: str, read: list[tuple[str, Any]]) -> Refusal:
    values = {name: [_jsonable(v)] if v is not _MISSING else [] for name, v in read}
    shown = ", ".join(f"{name} is {_shown(v)}" for name, v in read)
    message = f"{sel.expression}: " + (shown or "false for this device")
    group = (sel.expression, tuple((n, repr(v)) for n, v in read))
    return Refusal(
        "selector",
        message,
        {"expression": sel.expression, "source": source, "values": values},
        group,
    )


def cel_error_refusal(expression: str, source: str, error: str) -> Refusal:
    return Refusal(
        "cel-error",
        f"{expression}: {error}",
        {"expression": expression, "source": source, "error": error},
        (expression, error),
    )


def cel_error(ctx, claim, req, cand, rejection) -> Refusal:
    found = _failing_selector(ctx, claim, req, cand)
    if found is None or not found[2].error:
        return Refusal(rejection[0], rejection[1], {}, ("error", rejection[1]))
    index, sel, outcome = found
    return cel_error_refusal(sel.expression, _source(req, index), outcome.error)


# --- allocated ---------------------------------------------------------------------------------


class HolderIndex:
    """Who holds a device: the claims of the snapshot allocated to it (and the pods they are
    reserved for), and the claims this run allocated (and the pods placed with them)."""

    def __init__(self, allocator, claim_users: Mapping[str, set[str]]) -> None:
        self.allocator = allocator
        self.claim_users = claim_users  # the scheduler's, kept current as pods are placed
        self._seed: dict[DeviceID, list[dict]] | None = None
        self._run: dict[tuple, list[str]] = {}
        self._run_size = 0

    def _seed_index(self) -> dict[DeviceID, list[dict]]:
        if self._seed is None:
            self._seed = {}
            for claim in self.allocator.resource_claims.values():
                if claim.allocation is None:
                    continue
                pods = sorted(
                    f"{claim.namespace}/{ref.name}"
                    for ref in claim.reserved_for
                    if ref.resource == "pods"
                )
                holder = {"claim": claim.key, "pods": pods, "inRun": False}
                for r in claim.allocation.devices:
                    self._seed.setdefault(DeviceID(r.driver, r.pool, r.device), []).append(holder)
        return self._seed

    def _run_index(self) -> dict[tuple, list[str]]:
        """(device, None) or (device, NodeClaim, instance type) for template devices -> the
        claims this run allocated to it."""
        meta = self.allocator.claim_metadata
        if len(meta) != self._run_size:
            # Claims are only added during a run: index the new ones (insertion order).
            for key in list(meta)[max(self._run_size, 0) :]:
                m = meta[key]
                for it, devices in m.devices_by_instance_type.items():
                    for d in devices:
                        device_id = DeviceID(d.driver, d.pool, d.device)
                        where = (
                            (device_id, m.node_claim_id, it)
                            if d.source == "template"
                            else (device_id, None)
                        )
                        ids = self._run.setdefault(where, [])
                        if key not in ids:
                            ids.append(key)
            self._run_size = len(meta)
        return self._run

    def holders(
        self, device_id: DeviceID, node_claim: str | None = None, instance_type: str | None = None
    ) -> list[dict]:
        """``node_claim``/``instance_type`` given: a template device of that NodeClaim."""
        out: list[dict] = []
        if node_claim is not None:
            keys = self._run_index().get((device_id, node_claim, instance_type), ())
        else:
            tracker = self.allocator.tracker
            if device_id in tracker.preallocated:
                out.extend(self._seed_index().get(device_id, ()))
            keys = (
                self._run_index().get((device_id, None), ()) if device_id in tracker.cluster else ()
            )
        for key in keys:
            out.append({"claim": key, "pods": sorted(self.claim_users.get(key, ())), "inRun": True})
        return out


def allocated(ctx, claim, req, cand, rejection) -> Refusal:
    index = ctx.extensions.get(HOLDERS)
    holders: list[dict] = []
    if index is not None:
        if cand.source == "template":
            holders = index.holders(cand.id, ctx.node_claim_id, ctx.instance_type)
        else:
            holders = index.holders(cand.id)
    if not holders:
        if cand.source == "template":
            message = "already allocated on this NodeClaim's instance type"
        else:
            message = "already allocated"
        return Refusal("allocated", message, {"holders": []})
    message = "allocated to " + ", ".join(holder_text(h) for h in holders)
    return Refusal("allocated", message, {"holders": holders})


# --- taint, counter and the others ---------------------------------------------------------------


def taint(ctx, claim, req, cand, rejection) -> Refusal:
    from allocator.features.taints import describe_taint

    state = ctx.extensions.get("features")
    tolerations = req.exact.tolerations if req.exact is not None else []
    blocking = state.taints.blocking(cand.id, cand.device, tolerations) if state else []
    if not blocking:
        return Refusal("taint", _without_device(rejection[1], cand))
    t = blocking[0]
    shown = ", ".join(describe_taint(b) for b in blocking)
    return Refusal(
        "taint",
        f"taint {shown} not tolerated by request {req.name}",
        {"taint": {"key": t.key, "value": t.value or "", "effect": t.effect}},
        tuple(describe_taint(b) for b in blocking),
    )


_COUNTER = re.compile(
    r"needs (?P<needed>\S+) of counter (?P<counter>\S+) in counter set (?P<set>\S+), "
    r"only (?P<left>\S+) of (?P<total>\S+) left"
)


def counter(ctx, claim, req, cand, rejection) -> Refusal:
    m = _COUNTER.search(rejection[1])
    if m is None:
        return Refusal("counter", _without_device(rejection[1], cand))
    pool = f"{cand.id.driver}/{cand.id.pool}"
    return Refusal(
        "counter",
        f"counter set {m['set']} of pool {pool}: counter {m['counter']} needs {m['needed']}, "
        f"{m['left']} of {m['total']} left",
        {
            "counterSet": m["set"],
            "counter": m["counter"],
            "needed": m["needed"],
            "left": m["left"],
        },
        (m["set"], m["counter"], m["needed"], m["left"]),
    )


def _without_device(message: str, cand) -> str:
    """A check's per-device message without the device's name (the group lists devices)."""
    text = message.replace(f"device {cand.id}: ", "").replace(f"device {cand.id} ", "")
    return text.replace(str(cand.id), "the device")


def generic(ctx, claim, req, cand, rejection) -> Refusal:
    message = _without_device(rejection[1], cand)
    detail: dict[str, Any] = {}
    if rejection[0] in ("pool-incomplete", "pool-invalid", "compatibility-group"):
        detail = {"pool": f"{cand.id.driver}/{cand.id.pool}"}
    return Refusal(rejection[0], message, detail, (message,))


Explain = Callable[..., Refusal]

# Checks without an ``explain`` of their own are worded by their reason code.
EXPLAIN: dict[str, Explain] = {
    "selector": selector,
    "cel-error": cel_error,
    "allocated": allocated,
    "taint": taint,
    "counter": counter,
}
