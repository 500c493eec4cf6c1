"""Device taints and tolerations (DRADeviceTaints, DRADeviceTaintRules).

A device's taints are those its driver publishes in the ResourceSlice plus one per
DeviceTaintRule whose selector picks the device. ``NoSchedule`` and ``NoExecute`` keep a device
from being allocated unless the request tolerates the taint; ``None`` is informational and
ignored by the scheduler. ``taint_rule_previews`` computes what the device taint eviction
controller would report for each rule (docs/RESULT.md, ``deviceTaintRules``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from allocator.checks import TAINT, Rejection, SearchState, Step
from allocator.featuregates import FeatureGates
from allocator.model import (
    Device,
    DeviceClass,
    DeviceID,
    DeviceTaint,
    DeviceTaintRule,
    DeviceToleration,
    Pod,
    ResourceClaim,
    ResourceSlice,
    Snapshot,
    Taint,
    Toleration,
)
from allocator.pools import DeviceWithID
from allocator.requests import ClaimData, RequestData

GATE = "DRADeviceTaints"

EFFECT_NO_SCHEDULE = "NoSchedule"
EFFECT_NO_EXECUTE = "NoExecute"
EFFECT_NONE = "None"
BLOCKING_EFFECTS = frozenset({EFFECT_NO_SCHEDULE, EFFECT_NO_EXECUTE})

# (device class name, driver, device) -> does the class select the device?
ClassMatcher = Callable[[str, str, Device], bool]


# --- tolerations -----------------------------------------------------------------------------


def toleration_matches(
    toleration: DeviceToleration | Toleration, taint: DeviceTaint | Taint
) -> bool:
    """Kubernetes' ToleratesTaint, the same for a pod's tolerations of node taints and a
    request's tolerations of device taints: effect (empty = any), key (empty = any), Exists
    or Equal; any other operator tolerates nothing."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    operator = toleration.operator or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.value or "") == (taint.value or "")
    return False


def tolerated(taint: DeviceTaint, tolerations: Iterable[DeviceToleration]) -> bool:
    return any(toleration_matches(t, taint) for t in tolerations)


def blocking_taints(
    taints: Iterable[DeviceTaint], tolerations: Iterable[DeviceToleration]
) -> list[DeviceTaint]:
    """The taints that keep the device from being allocated for a request with these
    tolerations: NoSchedule and NoExecute ones that no toleration matches."""
    tols = list(tolerations)
    return [t for t in taints if t.effect in BLOCKING_EFFECTS and not tolerated(t, tols)]


def tolerations_used(
    taints: Iterable[DeviceTaint], tolerations: Iterable[DeviceToleration]
) -> list[DeviceToleration]:
    """The request's tolerations that tolerate at least one taint of the device (reported on
    the device's result entry, docs/RESULT.md)."""
    taints = list(taints)
    return [tol for tol in tolerations if any(toleration_matches(tol, t) for t in taints)]


def describe_taint(taint: DeviceTaint) -> str:
    value = f"={taint.value}" if taint.value else ""
    return f"{taint.key}{value}:{taint.effect}"


def toleration_to_json(toleration: DeviceToleration | Toleration) -> dict[str, Any]:
    """A toleration as the result prints it (``operator``, ``key``, ``value``, ``effect``,
    ``tolerationSeconds``, empty ones left out; the order is part of the printed document).
    Device and pod tolerations have the same fields, so this serves both (result
    ``tolerations``, suggested patches)."""
    out: dict[str, Any] = {"operator": toleration.operator or "Equal"}
    if toleration.key:
        out["key"] = toleration.key
    if toleration.value:
        out["value"] = toleration.value
    if toleration.effect:
        out["effect"] = toleration.effect
    if toleration.toleration_seconds is not None:
        out["tolerationSeconds"] = toleration.toleration_seconds
    return out


# --- DeviceTaintRule selection ---------------------------------------------------------------


def rule_cel_selectors(rule: DeviceTaintRule) -> list[str]:
    """CEL selectors of the rule's deviceSelector (v1alpha3 shape), read from the raw object."""
    spec = (rule.raw or {}).get("spec") or {}
    selector = spec.get("deviceSelector") or {}
    out = []
    for entry in selector.get("selectors") or []:
        expression = ((entry or {}).get("cel") or {}).get("expression")
        if expression:
            out.append(expression)
    return out


def rule_has_selector(rule: DeviceTaintRule) -> bool:
    # Without any selector a rule taints nothing: that guards against evicting everything.
    return bool(
        rule.device_class_name
        or rule.driver
        or rule.pool
        or rule.device
        or rule_cel_selectors(rule)
    )


def make_class_matcher(device_classes: dict[str, DeviceClass], engine: Any) -> ClassMatcher:
    """A matcher that evaluates a class's CEL selectors through the run's SelectorEngine.

    A class that does not exist selects nothing; a runtime error means "not selected", as
    everywhere else in the allocator."""

    def matches(class_name: str, driver: str, device: Device) -> bool:
        device_class = device_classes.get(class_name)
        if device_class is None or engine is None:
            return False
        for selector in device_class.selectors:
            if selector.cel is None:
                return False
            if not _cel_matches(engine, selector.cel, driver, device):
                return False
        return True

    return matches


def _cel_matches(engine: Any, expression: str, driver: str, device: Device) -> bool:
    try:
        compiled = engine.compile(expression)
    except ValueError:
        return False
    return bool(engine.matches(compiled, device, driver).matched)


class TaintIndex:
    """The effective taints of devices for one simulation: slice taints and rule taints.

    Gate ``DRADeviceTaints`` off: no device has taints. Gate ``DRADeviceTaintRules`` off:
    only the taints drivers publish count. Results are memoised per device object."""

    __slots__ = ("_cache", "_class_matcher", "_engine", "_on", "gates", "rules")

    def __init__(
        self,
        rules: Iterable[DeviceTaintRule] = (),
        device_classes: dict[str, DeviceClass] | None = None,
        engine: Any = None,
        *,
        gates: FeatureGates,
        class_matcher: ClassMatcher | None = None,
    ) -> None:
        self.gates = gates
        self._on = gates.enabled("DRADeviceTaints")  # read once: asked per device
        self._engine = engine
        rules_on = gates.enabled("DRADeviceTaints") and gates.enabled("DRADeviceTaintRules")
        self.rules = [r for r in rules if rule_has_selector(r)] if rules_on else []
        self._class_matcher = class_matcher or make_class_matcher(device_classes or {}, engine)
        self._cache: dict[tuple[DeviceID, int], tuple[DeviceTaint, ...]] = {}

    def rule_selects(self, rule: DeviceTaintRule, device_id: DeviceID, device: Device) -> bool:
        if not rule_has_selector(rule):
            return False
        if rule.driver and rule.driver != device_id.driver:
            return False
        if rule.pool and rule.pool != device_id.pool:
            return False
        if rule.device and rule.device != device_id.device:
            return False
        if rule.device_class_name and not self._class_matcher(
            rule.device_class_name, device_id.driver, device
        ):
            return False
        for expression in rule_cel_selectors(rule):
            if self._engine is None or not _cel_matches(
                self._engine, expression, device_id.driver, device
            ):
                return False
        return True

    def taints(self, device_id: DeviceID, device: Device) -> tuple[DeviceTaint, ...]:
        if not self._on:
            return ()
        if not self.rules:  # the device's own, as they are (no cache entry per device)
            return tuple(device.taints) if device.taints else ()
        key = (device_id, id(device))
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        found = list(device.taints)
        for rule in self.rules:
            if self.rule_selects(rule, device_id, device):
                found.append(rule.taint)
        result = tuple(found)
        self._cache[key] = result
        return result

    def blocking(
        self, device_id: DeviceID, device: Device, tolerations: Iterable[DeviceToleration]
    ) -> list[DeviceTaint]:
        """Untolerated NoSchedule/NoExecute taints; empty means the device may be allocated."""
        taints = self.taints(device_id, device)
        if not taints:
            return []
        return blocking_taints(taints, tolerations)

    def used_tolerations(
        self, device_id: DeviceID, device: Device, tolerations: Iterable[DeviceToleration]
    ) -> list[DeviceToleration]:
        taints = self.taints(device_id, device)
        if not taints:
            return []
        return tolerations_used(taints, tolerations)

    def unavailable(self, device_id: DeviceID, device: Device) -> bool:
        """True when a taint makes the device unallocatable for requests without tolerations."""
        return bool(self.blocking(device_id, device, ()))


def taint_reason(device_id: DeviceID, taints: list[DeviceTaint]) -> str:
    """The trace message for a device rejected by taints (reason code ``taint``)."""
    listed = ", ".join(describe_taint(t) for t in taints)
    return f"device {device_id} has taints that the request does not tolerate: {listed}"


# --- DeviceTaintRule previews (what the eviction controller reports) --------------------------


def newest_generation_slices(slices: Iterable[ResourceSlice]) -> list[ResourceSlice]:
    newest: dict[tuple[str, str], int] = {}
    slices = list(slices)
    for s in slices:
        key = (s.driver, s.pool)
        newest[key] = max(newest.get(key, s.generation), s.generation)
    return [s for s in slices if s.generation == newest[(s.driver, s.pool)]]


def pod_claim_entries(pod: Pod) -> list[tuple[str, str]]:
    """(spec.resourceClaims[].name, claim key) of the claims a pod uses, resolved as the
    resourceclaim controller names them; entries whose status says no claim are skipped."""
    out = []
    for entry in pod.resource_claims:
        if entry.resource_claim_name:
            out.append((entry.name, f"{pod.namespace}/{entry.resource_claim_name}"))
        elif entry.resource_claim_template_name:
            if entry.name in pod.resource_claim_statuses:
                name = pod.resource_claim_statuses[entry.name]
                if name:
                    out.append((entry.name, f"{pod.namespace}/{name}"))
            else:
                out.append((entry.name, f"{pod.namespace}/{pod.name}-{entry.name}"))
    return out


def pod_claim_keys(pod: Pod) -> list[str]:
    return [key for _, key in pod_claim_entries(pod)]


def claim_consumers(claim: ResourceClaim, pods: Iterable[Pod]) -> list[Pod]:
    """Pods of the snapshot that use an allocated claim: those it is reserved for, and bound
    pods that reference it. Terminating pods are already on their way out and not counted."""
    reserved = {(claim.namespace, ref.name) for ref in claim.reserved_for if ref.resource == "pods"}
    out = []
    for pod in pods:
        if pod.deleting:
            continue
        if (pod.namespace, pod.name) in reserved or (
            pod.node_name and claim.key in pod_claim_keys(pod)
        ):
            out.append(pod)
    return out


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def taint_rule_message(
    effect: str, published: int, allocated: int, pods: int, namespaces: int
) -> str:
    """The status message the eviction controller shows, in the docs' wording."""
    devices = (
        f"{_plural(published, 'published device')} selected. "
        f"{_plural(allocated, 'allocated device')} selected."
    )
    if effect == EFFECT_NONE:
        return (
            f"{devices}\n"
            f"{_plural(pods, 'pod')} would be evicted in {_plural(namespaces, 'namespace')} "
            "if the effect was NoExecute.\n"
            "This information will not be updated again. "
            "Recreate the DeviceTaintRule to trigger an update."
        )
    if effect == EFFECT_NO_EXECUTE:
        if pods == 0:
            return f"{devices}\nNo pods need to be evicted."
        verb = "needs" if pods == 1 else "need"
        where = "1 namespace" if namespaces == 1 else f"{namespaces} different namespaces"
        return f"{devices}\n{_plural(pods, 'pod')} {verb} to be evicted in {where}."
    return f"{devices}\nNew allocations of these devices are blocked; NoSchedule evicts no pods."


def taint_rule_previews(
    snapshot: Snapshot,
    engine: Any = None,
    *,
    gates: FeatureGates,
    class_matcher: ClassMatcher | None = None,
) -> list[dict[str, Any]]:
    """Per DeviceTaintRule of the snapshot as uploaded (docs/RESULT.md ``deviceTaintRules``).

    ``publishedDevices``: devices of ResourceSlices (newest generation of each pool) that the
    rule selects; ``allocatedDevices``: those of them allocated to a claim; ``podsToEvict``: for
    NoExecute (and None, as a dry run of NoExecute) the pods using such a claim whose allocation
    does not tolerate the taint (a toleration with tolerationSeconds only delays eviction);
    ``namespaces``: how many namespaces those pods are in. Returns [] when the rule gates are off.
    """
    if not (gates.enabled("DRADeviceTaints") and gates.enabled("DRADeviceTaintRules")):
        return []
    index = TaintIndex(
        snapshot.device_taint_rules,
        snapshot.device_classes,
        engine=engine,
        gates=gates,
        class_matcher=class_matcher,
    )
    devices: list[tuple[DeviceID, Device]] = []
    seen: set[DeviceID] = set()
    for s in newest_generation_slices(snapshot.resource_slices):
        for device in s.devices:
            device_id = DeviceID(s.driver, s.pool, device.name)
            if device_id not in seen:
                seen.add(device_id)
                devices.append((device_id, device))
    allocations: dict[DeviceID, list[tuple[ResourceClaim, list[DeviceToleration]]]] = {}
    for claim in snapshot.resource_claims.values():
        if claim.allocation is None:
            continue
        for result in claim.allocation.devices:
            allocations.setdefault(result.device_id, []).append((claim, result.tolerations))

    previews = []
    for rule in snapshot.device_taint_rules:
        selected = [d for d in devices if index.rule_selects(rule, d[0], d[1])]
        allocated = [d for d in selected if d[0] in allocations]
        evicted: dict[str, Pod] = {}
        if rule.taint.effect in (EFFECT_NO_EXECUTE, EFFECT_NONE):
            as_no_execute = DeviceTaint(rule.taint.key, rule.taint.value, EFFECT_NO_EXECUTE)
            for device_id, _ in allocated:
                for claim, tolerations in allocations[device_id]:
                    lasting = [t for t in tolerations if t.toleration_seconds is None]
                    if tolerated(as_no_execute, lasting):
                        continue
                    for pod in claim_consumers(claim, snapshot.pods):
                        evicted[pod.key] = pod
        namespaces = len({pod.namespace for pod in evicted.values()})
        previews.append(
            {
                "name": rule.name,
                "effect": rule.taint.effect,
                "taint": {
                    "key": rule.taint.key,
                    "value": rule.taint.value,
                    "effect": rule.taint.effect,
                },
                "publishedDevices": len(selected),
                "allocatedDevices": len(allocated),
                "podsToEvict": len(evicted),
                "namespaces": namespaces,
                "pods": sorted(evicted),
                "devices": [str(d[0]) for d in selected],
                "message": taint_rule_message(
                    rule.taint.effect, len(selected), len(allocated), len(evicted), namespaces
                ),
            }
        )
    return previews


# --- in the pipeline ---------------------------------------------------------------------------


class TaintCheck:
    """A device with a NoSchedule / NoExecute taint its request does not tolerate is refused
    (trace reason ``taint``); the tolerations used go into the allocation result."""

    name = "taint"
    prefilter_it_independent = True

    def __init__(self, ctx: SearchState, index: TaintIndex) -> None:
        self.index = index

    def prefilter(
        self, ctx: SearchState, claim: ClaimData, request: RequestData, cand: DeviceWithID
    ) -> Rejection | None:
        tolerations = request.exact.tolerations if request.exact is not None else []
        blocking = self.index.blocking(cand.id, cand.device, tolerations)
        if blocking:
            return Rejection(TAINT, taint_reason(cand.id, blocking))
        return None

    def try_add(self, ctx: SearchState, step: Step, cand: DeviceWithID) -> Rejection | None:
        rejection = self.prefilter(ctx, step.claim, step.request, cand)
        if rejection is not None:
            return rejection
        if step.request.exact is not None:
            used = self.index.used_tolerations(cand.id, cand.device, step.request.exact.tolerations)
            if used:
                ctx.extra["tolerations"] = [toleration_to_json(t) for t in used]
        return None

    def remove(self, ctx: SearchState, step: Step, cand: DeviceWithID) -> None:
        return None
