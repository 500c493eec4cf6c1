"""What each device check says when it refuses a device, for the refusal funnel.

One function per reason code, ``(words, node_claim_id, instance_type, request, cand,
rejection) -> Refusal``: the message names the cause (the selector expression that was false
and the values it read, the claim holding the device and its pods, the counter set and what is
left, the taint no toleration matches ...), ``detail`` carries it structured (docs/RESULT.md), and ``group`` says which devices were refused the same way. ``EXPLAIN`` maps a reason code
to its function; a reason without one is worded by ``generic``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import field
from typing import Any

from allocator.checks import (
    COMPATIBILITY_GROUP,
    POOL_INCOMPLETE,
    POOL_INVALID,
    Refusal,
    Rejection,
)
from allocator.claims import ClaimAllocationMetadata
from allocator.features.taints import TaintIndex, describe_taint
from allocator.funnel import holder_text
from allocator.model import DeviceID, ResourceClaim
from allocator.pools import DeviceWithID
from allocator.quantity import Quantity
from allocator.records import record
from allocator.requests import RequestData
from allocator.tracker import AllocationTracker

_MISSING = object()


def _holds(devices, device_id: DeviceID) -> bool:
    """Whether a claim's devices on one instance type include this template device."""
    return any(
        d.source == "template"
        and d.device == device_id.device
        and d.pool == device_id.pool
        and d.driver == device_id.driver
        for d in devices or ()
    )


class HolderIndex:
    """Who holds a device: the claims of the snapshot allocated to it (and the pods they are
    reserved for), and the claims this run allocated (and the pods placed with them)."""

    def __init__(
        self,
        resource_claims: Mapping[str, ResourceClaim],
        claim_metadata: Mapping[str, ClaimAllocationMetadata],
        tracker: AllocationTracker,
        claim_users: Mapping[str, set[str]],
    ) -> None:
        self.resource_claims = resource_claims  # the snapshot's
        self.claim_metadata = claim_metadata  # the Allocator's, growing as claims commit
        self.tracker = tracker
        self.claim_users = claim_users  # the scheduler's, kept current as pods are placed
        self._seed: dict[DeviceID, list[dict]] | None = None
        self._run: dict[DeviceID, list[str]] = {}
        self._run_by_node_claim: dict[str, list[str]] = {}
        self._run_size = 0

    def _seed_index(self) -> dict[DeviceID, list[dict]]:
        if self._seed is None:
            self._seed = {}
            for claim in self.resource_claims.values():
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

    def _run_index(self) -> tuple[dict[DeviceID, list[str]], dict[str, list[str]]]:
        """In-cluster device -> the claims this run allocated to it, and NodeClaim -> the
        claims this run allocated there (in the order they were allocated): a NodeClaim's
        few claims are searched for a template device when one is asked about, rather than
        each device of each instance type indexed (72,000 entries on Karpenter's benchmark
        with DRA, 20 MiB)."""
        meta = self.claim_metadata
        if len(meta) != self._run_size:
            # Claims are only added during a run: index the new ones (insertion order).
            for key in list(meta)[max(self._run_size, 0) :]:
                m = meta[key]
                on_node_claim = False
                for devices in m.devices_by_instance_type.values():
                    for d in devices:
                        if d.source == "template":
                            on_node_claim = True
                            continue
                        ids = self._run.setdefault(DeviceID(d.driver, d.pool, d.device), [])
                        if key not in ids:
                            ids.append(key)
                if on_node_claim:
                    self._run_by_node_claim.setdefault(m.node_claim_id, []).append(key)
            self._run_size = len(meta)
        return self._run, self._run_by_node_claim

    def holders(
        self, device_id: DeviceID, node_claim: str | None = None, instance_type: str | None = None
    ) -> list[dict]:
        """``node_claim``/``instance_type`` given: a template device of that NodeClaim."""
        out: list[dict] = []
        if node_claim is not None:
            meta = self.claim_metadata
            keys = [
                key
                for key in self._run_index()[1].get(node_claim, ())
                if _holds(meta[key].devices_by_instance_type.get(instance_type or ""), device_id)
            ]
        else:
            tracker = self.tracker
            if device_id in tracker.preallocated:
                out.extend(self._seed_index().get(device_id, ()))
            keys = self._run_index()[0].get(device_id, ()) if device_id in tracker.cluster else ()
        for key in keys:
            out.append({"claim": key, "pods": sorted(self.claim_users.get(key, ())), "inRun": True})
        return out


@record
class Wording:
    """What the words of a refusal read beyond the device, the request and the target, for one
    Allocator: the run's selector engine (which selector failed, with the values it read), the
    features' taint index (the taints no toleration matches); and what the scheduler gives it:
    who holds a device, and a memo of selector refusals by the values read."""

    engine: Any
    taints: TaintIndex | None = None
    holders: HolderIndex | None = None
    selector_words: dict[tuple, Refusal] | None = None
    # Refusals whose words failed (shown as the check's plain reason instead): the run's
    # warnings, each once.
    failures: dict[str, None] = field(default_factory=dict)

    def failed(self, what: str, error: Exception) -> None:
        self.failures.setdefault(
            f"{what} could not be worded ({type(error).__name__}: {error}); "
            "shown as the check's plain reason",
            None,
        )


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
    return value.canonical() if isinstance(value, Quantity) else str(value)


def _shown(value: Any) -> str:
    if value is _MISSING:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return str(_jsonable(value))


def _failing_selector(
    words: Wording, req: RequestData, cand: DeviceWithID
) -> tuple[int, Any, Any] | None:
    """(index, compiled selector, outcome) of the first selector the device fails."""
    engine = words.engine
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


def selector(
    words: Wording,
    node_claim_id: str,
    instance_type: str,
    req: RequestData,
    cand: DeviceWithID,
    rejection: Rejection,
) -> Refusal:
    found = _failing_selector(words, req, cand)
    if found is None:
        return Refusal(rejection.reason, rejection.message)
    index, sel, outcome = found
    source = _source(req, index)
    if outcome.error:
        return cel_error_refusal(sel.expression, source, outcome.error)
    read = [_read(cand, f) for f in (sel.fields or ())]
    # Devices of one kind read the same values: one Refusal for all of them (the words are
    # built from the expression, its source and the values alone; refusals are not changed
    # afterwards). Only plain values are compared, by type and value.
    key = None
    memo = words.selector_words if sel.fields is not None else None
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


def cel_error(
    words: Wording,
    node_claim_id: str,
    instance_type: str,
    req: RequestData,
    cand: DeviceWithID,
    rejection: Rejection,
) -> Refusal:
    found = _failing_selector(words, req, cand)
    if found is None or not found[2].error:
        return Refusal(rejection.reason, rejection.message, {}, ("error", rejection.message))
    index, sel, outcome = found
    return cel_error_refusal(sel.expression, _source(req, index), outcome.error)


# --- allocated ---------------------------------------------------------------------------------


def allocated(
    words: Wording,
    node_claim_id: str,
    instance_type: str,
    req: RequestData,
    cand: DeviceWithID,
    rejection: Rejection,
) -> Refusal:
    index = words.holders
    holders: list[dict] = []
    if index is not None:
        if cand.source == "template":
            holders = index.holders(cand.id, node_claim_id, instance_type)
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


def taint(
    words: Wording,
    node_claim_id: str,
    instance_type: str,
    req: RequestData,
    cand: DeviceWithID,
    rejection: Rejection,
) -> Refusal:
    tolerations = req.exact.tolerations if req.exact is not None else []
    index = words.taints
    blocking = index.blocking(cand.id, cand.device, tolerations) if index is not None else []
    if not blocking:
        return Refusal("taint", _without_device(rejection.message, cand))
    t = blocking[0]
    shown = ", ".join(describe_taint(b) for b in blocking)
    return Refusal(
        "taint",
        f"taint {shown} not tolerated by request {req.name}",
        {"taint": {"key": t.key, "value": t.value or "", "effect": t.effect}},
        tuple(describe_taint(b) for b in blocking),
    )


def counter(
    words: Wording,
    node_claim_id: str,
    instance_type: str,
    req: RequestData,
    cand: DeviceWithID,
    rejection: Rejection,
) -> Refusal:
    facts = rejection.facts
    if facts is None:
        return Refusal("counter", _without_device(rejection.message, cand))
    pool = f"{cand.id.driver}/{cand.id.pool}"
    counter_set, name, needed, left = (
        facts["counterSet"],
        facts["counter"],
        facts["needed"],
        facts["left"],
    )
    return Refusal(
        "counter",
        f"counter set {counter_set} of pool {pool}: counter {name} needs {needed}, "
        f"{left} of {facts['total']} left",
        {"counterSet": counter_set, "counter": name, "needed": needed, "left": left},
        (counter_set, name, needed, left),
    )


def _without_device(message: str, cand: DeviceWithID) -> str:
    """A check's per-device message without the device's name (the group lists devices)."""
    text = message.replace(f"device {cand.id}: ", "").replace(f"device {cand.id} ", "")
    return text.replace(str(cand.id), "the device")


def generic(
    words: Wording,
    node_claim_id: str,
    instance_type: str,
    req: RequestData,
    cand: DeviceWithID,
    rejection: Rejection,
) -> Refusal:
    message = _without_device(rejection.message, cand)
    detail: dict[str, Any] = {}
    if rejection.reason in (POOL_INCOMPLETE, POOL_INVALID, COMPATIBILITY_GROUP):
        detail = {"pool": f"{cand.id.driver}/{cand.id.pool}"}
    return Refusal(rejection.reason, message, detail, (message,))


Explain = Callable[[Wording, str, str, RequestData, DeviceWithID, Rejection], Refusal]

# A check's refusal is worded by its reason code; ``generic`` words the others.
EXPLAIN: dict[str, Explain] = {
    "selector": selector,
    "cel-error": cel_error,
    "allocated": allocated,
    "taint": taint,
    "counter": counter,
}
