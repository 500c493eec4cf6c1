"""The NodeClaim report: what the result says about each NodeClaim beyond docs/RESULT.md's
core fields (the run page's NodeClaims section).

Two parts, so the scheduling loop stays fast:

* ``PruneLog`` is fed by the scheduler when a placement is applied (``NodeClaim.add``): it
  keeps references to the instance type lists each stage of ``NodeClaim.plan`` started from
  and ended with, and works out which instance types a stage dropped, and why, only then (once per
  placement, never per probe). It also keeps the NodeClaim's requirements without the DRA
  contributions (NodePool template plus the pods' node selectors and affinity terms).
* ``extend_node_claims`` runs once at the end of the run and adds to each ``nodeClaims`` entry:
  ``instanceTypesPruned``, ``requirementsBeforeDRA``, ``templateSlices``, ``deviceTaints``,
  ``bindingConditions`` and ``initializationGating`` (the devices it holds are its pods'
  ``claims[].devices``: a NodeClaim of 400 instance types lists each device 400 times, and
  the result held them twice);
  ``extend_pod_claims`` adds ``claims[].deviceTaints`` to placed pods (existing nodes too).

Both are called by ``result.build_result``; docs/INTERFACES.md lists the shapes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import field
from operator import attrgetter, itemgetter
from typing import Any

from allocator.model import DeviceID
from allocator.records import record
from allocator.requirements import Requirements
from allocator.scheduling.finalization import REQUESTED_DRA_DRIVERS
from allocator.scheduling.fit import (
    CAPACITY_TYPE,
    HOSTNAME,
    ZONE,
    InstanceTypeInfo,
    Resources,
    exceeded,
    fits,
    format_resources,
    info_name,
    offering_allowed,
)
from allocator.scheduling.gating import NOT_PUBLISHED, requested_drivers
from allocator.scheduling.zonepinning import zone_pins

# A candidate's templates, read at C speed (400 per NodeClaim).
_TEMPLATES = attrgetter("it.resource_slice_templates")

DEVICES = "devices"
REQUIREMENTS = "requirements"
RESOURCES = "resources"
OFFERINGS = "offerings"
LIMITS = "limits"

# Stage kinds recorded by ``NodeClaim.plan`` (cheap tuples of references).
# (FILTER_STAGE, candidates, requirements, requests, remaining, dropped or None if unknown)
FILTER_STAGE = "filter"
DRA_STAGE = "dra"  # (DRA_STAGE, candidates, AllocationResult, kept)
# DRAExtendedResource: instance types left for a group offering the pod's extended resources
# differently (natively or not) than the group kept: (stage, dropped infos, message).
EXTENDED_STAGE = "extended-resources"


@record
class Pruned:
    """An instance type a stage dropped. Its words are built only when the report is written:
    a ``resources`` refusal keeps the numbers (what the pods asked, what the type has), since
    a run records many more than it shows."""

    name: str
    reason: str  # devices | requirements | resources | offerings | limits
    text: str = ""
    wanted: Resources | None = None  # resources: the requests over capacity
    has: Resources | None = None  # resources: the capacity of those

    @property
    def message(self) -> str:
        if self.wanted is not None and self.has is not None:
            return (
                f"not enough resources, requests {format_resources(self.wanted)}, "
                f"capacity {format_resources(self.has)}"
            )
        return self.text

    def to_json(self) -> dict:
        return {"name": self.name, "reason": self.reason, "message": self.message}


@record
class PruneLog:
    """Per NodeClaim id: the instance types dropped (in the order they were dropped, each once:
    a NodeClaim's candidates only shrink) and its requirements before DRA."""

    pruned: dict[str, dict[str, Pruned]] = field(default_factory=dict)
    before_dra: dict[str, Requirements] = field(default_factory=dict)

    def started(
        self,
        nc_id: str,
        pool_name: str,
        pool_requirements: Requirements,
        launchable: list[InstanceTypeInfo],
        candidates: list[InstanceTypeInfo],
        remaining: Resources | None,
    ) -> None:
        """A new NodeClaim: the NodePool's types its limits left out, and its base
        requirements (the NodePool template, without the hostname placeholder)."""
        self.before_dra[nc_id] = pool_requirements.copy()
        log = self.pruned.setdefault(nc_id, {})
        if len(candidates) == len(launchable) or remaining is None:
            return
        kept = {info.name for info in candidates}
        for info in launchable:
            if info.name not in kept and info.name not in log:
                log[info.name] = Pruned(
                    info.name, LIMITS, limits_message(pool_name, info, remaining)
                )

    def applied(self, nc_id: str, term: Requirements | None, stages: Iterable[tuple]) -> None:
        """A placement was applied to the NodeClaim: classify what each stage dropped."""
        if term is not None:
            before = self.before_dra.get(nc_id)
            if before is not None:
                before.add(term)
        log = self.pruned.setdefault(nc_id, {})
        for stage in stages:
            if stage[0] == FILTER_STAGE:
                _, candidates, reqs, requests, remaining, dropped = stage
                if len(remaining) == len(candidates):
                    continue  # the filter keeps a part of its candidates: it dropped none
                if dropped is None:
                    kept = set(map(info_name, remaining))
                    dropped = [info for info in candidates if info.name not in kept]
                for info in dropped:
                    if info.name not in log:
                        log[info.name] = classify_filtered(info, reqs, requests)
            elif stage[0] == EXTENDED_STAGE:
                for info in stage[1]:
                    if info.name not in log:
                        log[info.name] = Pruned(info.name, RESOURCES, stage[2])
            elif stage[0] == DRA_STAGE:
                _, candidates, result, kept_infos = stage
                kept = set(map(info_name, kept_infos))
                failed = result.failed_instance_types
                for info in candidates:
                    if info.name not in kept and info.name not in log:
                        message = failed.get(info.name) or (
                            "the device search found no allocation for the pod's claims"
                        )
                        log[info.name] = Pruned(info.name, DEVICES, message)

    def for_claim(self, nc_id: str, final: Iterable[str]) -> list[dict]:
        pruned = self.pruned.get(nc_id)
        if not pruned:
            return []
        final = set(final)
        return [p.to_json() for p in pruned.values() if p.name not in final]


# --- readable reasons ---------------------------------------------------------------------------


def limits_message(pool_name: str, info: InstanceTypeInfo, remaining: Resources) -> str:
    over = {
        name: info.capacity.get(name, 0)
        for name, left in sorted(remaining.items())
        if info.capacity.get(name, 0) > left
    }
    left = {name: max(remaining[name], 0) for name in over}
    return (
        f'launching it would exceed the limits of nodepool "{pool_name}": capacity '
        f"{format_resources(over)}, remaining {format_resources(left)}"
    )


def classify_filtered(info: InstanceTypeInfo, reqs: Requirements, requests: Resources) -> Pruned:
    """Why Karpenter's instance type filter dropped ``info``, checked in the filter's order:
    requirements, resources, offerings."""
    problem = reqs.intersects(info.requirements)
    if problem is not None:
        return Pruned(info.name, REQUIREMENTS, f"incompatible requirements, {problem}")
    if not fits(requests, info.capacity):
        names = exceeded(requests, info.capacity)
        wanted = {n: requests[n] for n in names}
        has = {n: info.capacity.get(n, 0) for n in names}
        return Pruned(info.name, RESOURCES, wanted=wanted, has=has)
    return Pruned(info.name, OFFERINGS, offerings_message(info, reqs))


def offerings_message(info: InstanceTypeInfo, reqs: Requirements) -> str:
    wanted = []
    for key in (ZONE, CAPACITY_TYPE):
        if reqs.has(key):
            wanted.append(str(reqs.get(key)))
    offered = []
    for offering, extra in info.offerings:
        state = "available" if offering.available else "unavailable"
        if offering.available and not offering_allowed(offering, extra, reqs):
            state = "incompatible"
        offered.append(f"{offering.zone}/{offering.capacity_type} ({state})")
    return (
        f"no available offering compatible with {', '.join(wanted) or 'the requirements'}; "
        f"offerings: {', '.join(offered) or 'none'}"
    )


# --- the end-of-run report ----------------------------------------------------------------------


def _requirements_json(reqs: Requirements | None) -> list[dict]:
    if reqs is None:
        return []
    return [r for r in reqs.to_node_selector_requirements() if r["key"] != HOSTNAME]


def template_slices(
    infos: Iterable[InstanceTypeInfo], memo: dict[str, tuple[list, dict]] | None = None
) -> list[dict]:
    """Per kept instance type that publishes devices (by name): the ResourceSlices a node of
    that type will publish (the others have none to list: 400 instance types without devices
    made most of a NodeClaim's entry). ``memo``: each instance type's entry, built once for
    every NodeClaim offering it (the entries are read only: the result shares them)."""
    if memo is None:
        memo = {}
    out = []
    # Those without templates are passed over before sorting (a stable sort: the same order).
    for info in sorted(filter(_TEMPLATES, infos), key=info_name):
        templates = info.it.resource_slice_templates
        hit = memo.get(info.name)
        if hit is None or hit[0] is not templates:
            hit = memo[info.name] = (templates, _template_slices_entry(info.name, templates))
        out.append(hit[1])
    return out


def _template_slices_entry(name: str, templates: list) -> dict:
    return {
        "instanceType": name,
        "slices": [
            {"driver": t.driver, "pool": t.pool, "devices": [d.name for d in t.devices]}
            for t in templates
        ],
    }


_DRIVER_AND_REQUEST = itemgetter("driver", "request")


def held_claims(pods: list[str], pod_entries: dict[str, dict]) -> list[tuple[str, dict]]:
    """(pod, claim entry) of every claim the pods hold: their devices are the entries'
    ``devices`` (template devices once per kept instance type, 400 per claim in Karpenter's
    benchmark: read where they stand, not copied)."""
    return [(pod, claim) for pod in pods for claim in pod_entries[pod]["claims"]]


def _toleration_matches(tol: dict, taint) -> bool:
    """Kubernetes' ToleratesTaint, on a toleration as the result prints it."""
    if tol.get("effect") and tol["effect"] != taint.effect:
        return False
    if tol.get("key") and tol["key"] != taint.key:
        return False
    if (tol.get("operator") or "Equal") == "Exists":
        return True
    return (tol.get("value") or "") == (taint.value or "")


def _taint_text(taint) -> str:
    return f"{taint.key}={taint.value}" if taint.value else taint.key


class _Devices:
    """Device objects by (instance type or None, DeviceID): the templates of the snapshot's
    instance types and the allocator's in-cluster universe."""

    def __init__(self, snapshot, allocator) -> None:
        self.snapshot = snapshot
        self.state = allocator.features
        self._templates: dict[str, dict[DeviceID, Any]] = {}
        self._tainted: set[str] | None = None  # instance types with tainted template devices

    def tainted_templates(self, templates_by_it: dict[str, list]) -> set[str]:
        """Of these instance types, those whose template devices include one with taints of
        its own (the templates a target offers are its instance types', the snapshot's, as
        ``get`` reads them)."""
        if self._tainted is None:
            self._tainted = {
                name
                for name, it in self.snapshot.instance_types.items()
                if any(d.taints for t in it.resource_slice_templates for d in t.devices)
            }
        return self._tainted.intersection(templates_by_it)

    def get(self, instance_type: str | None, device_id: DeviceID):
        if instance_type is None:
            return self.state.devices.get(device_id) if self.state is not None else None
        found = self._templates.get(instance_type)
        if found is None:
            it = self.snapshot.instance_types.get(instance_type)
            found = {
                DeviceID(t.driver, t.pool, d.name): d
                for t in (it.resource_slice_templates if it is not None else ())
                for d in t.devices
            }
            self._templates[instance_type] = found
        return found.get(device_id)

    def taints(self, instance_type: str | None, device_id: DeviceID) -> tuple:
        if self.state is None:
            return ()
        device = self.get(instance_type, device_id)
        if device is None:
            return ()
        return self.state.taints.taints(device_id, device)


def _request_tolerations(claim, request_name: str) -> list:
    """The tolerations of a claim's request as the result names it (``req`` or ``req/sub``)."""
    name, _, sub = request_name.partition("/")
    for request in claim.spec.requests:
        if request.name != name:
            continue
        if not sub:
            return list(request.exactly.tolerations) if request.exactly is not None else []
        for entry in request.first_available:
            if entry.name == sub:
                return list(entry.request.tolerations)
    return []


def _tolerated(
    held: list[tuple[str, dict]], pod_entries: dict[str, dict], devices: _Devices
) -> list[dict]:
    """For each held device (``held_claims``) whose entry printed tolerations: the blocking
    taints of the device that one of them covered (effect None is informational: nothing to
    tolerate)."""
    from allocator.features.taints import BLOCKING_EFFECTS

    printed: dict[tuple, list] = {}
    for pod in dict.fromkeys(pod for pod, _ in held):
        for c in pod_entries[pod]["claims"]:
            for x in c["devices"]:
                if x.get("tolerations"):
                    key = (pod, c["claim"], x["request"], x["driver"], x["pool"], x["device"])
                    printed[key + (x["instanceType"],)] = x["tolerations"]
    out, seen = [], set()
    if not printed:
        return out
    for pod, claim in held:
        claim_key = claim["claim"]
        for d in claim["devices"]:
            tols = printed.get(
                (pod, claim_key, d["request"], d["driver"], d["pool"], d["device"])
                + (d["instanceType"],)
            )
            if not tols:
                continue
            device_id = DeviceID(d["driver"], d["pool"], d["device"])
            for taint in devices.taints(d["instanceType"], device_id):
                if taint.effect not in BLOCKING_EFFECTS:
                    continue
                tol = next((t for t in tols if _toleration_matches(t, taint)), None)
                if tol is None:
                    continue
                key = (pod, claim_key, d["request"], device_id, _taint_text(taint), taint.effect)
                if key in seen:
                    continue
                seen.add(key)
                out.append(
                    {
                        "pod": pod,
                        "claim": claim_key,
                        "request": d["request"],
                        "driver": d["driver"],
                        "pool": d["pool"],
                        "device": d["device"],
                        "taint": _taint_text(taint),
                        "effect": taint.effect,
                        "toleration": tol,
                    }
                )
    return out


def _requests_by_driver(
    held: list[tuple[str, dict]], claims: dict
) -> dict[str, dict[tuple[str, str], list]]:
    """Per driver: the requests (claim key, request name) that took devices of that driver
    (``held_claims``), with their tolerations. ``claims``: claim key -> ResourceClaim."""
    by_driver: dict[str, dict[tuple[str, str], list]] = {}
    # A request's devices on 400 instance types name it 400 times: each is looked at once.
    for driver, claim_key, request in dict.fromkeys(
        (driver, claim["claim"], request)
        for _, claim in held
        for driver, request in dict.fromkeys(map(_DRIVER_AND_REQUEST, claim["devices"]))
    ):
        claim = claims.get(claim_key)
        if claim is None:
            continue
        requests = by_driver.setdefault(driver, {})
        key = (claim_key, request)
        if key not in requests:
            requests[key] = _request_tolerations(claim, request)
    return by_driver


def _excluded(
    allocator, target_id: str, templates_by_it: dict[str, list], by_driver, devices: _Devices
) -> list[dict]:
    """Devices the target could reach (the in-cluster pools its device search gathered, kept
    at commit, and its instance types' templates) with a NoSchedule/NoExecute taint that a
    request using that driver does not tolerate, with the claims of those requests."""
    from allocator.features.taints import BLOCKING_EFFECTS, tolerated

    if not by_driver or devices.state is None:
        return []
    index = devices.state.taints
    # Without DeviceTaintRules a device's taints are its own: the untainted are passed over.
    rules = bool(index.rules)
    reach: list[tuple[str | None, DeviceID, Any]] = []
    for pool in allocator.pool_cache.get(target_id) or ():
        if pool.key.driver in by_driver:
            reach.extend(
                (None, cand.id, cand.device)
                for cand in pool.devices
                if cand.source != "template" and (rules or cand.device.taints)
            )
    # Without rules, only instance types with a tainted template device have any to list
    # (400 instance types of untainted GPUs per NodeClaim are not walked one by one).
    names = templates_by_it.keys() if rules else devices.tainted_templates(templates_by_it)
    for it_name in sorted(names):
        for t in templates_by_it[it_name]:
            if t.driver in by_driver:
                reach.extend(
                    (it_name, DeviceID(t.driver, t.pool, d.name), d)
                    for d in t.devices
                    if rules or d.taints
                )
    out = []
    for it_name, device_id, device in reach:
        for taint in index.taints(device_id, device):
            if taint.effect not in BLOCKING_EFFECTS:
                continue
            blocked = sorted(
                {
                    claim
                    for (claim, _), tols in by_driver[device_id.driver].items()
                    if not tolerated(taint, tols)
                }
            )
            if blocked:
                out.append(
                    {
                        "driver": device_id.driver,
                        "pool": device_id.pool,
                        "device": device_id.device,
                        "instanceType": it_name,
                        "taint": _taint_text(taint),
                        "effect": taint.effect,
                        "claims": blocked,
                    }
                )
    return out


def device_taints(
    nc, pod_entries, held: list[tuple[str, dict]], devices: _Devices, allocator, pod_claims: dict
) -> dict:
    """``tolerated``: for each held device, the taints a toleration of its request covered.
    ``excluded``: devices the NodeClaim could reach with a taint that a request of its pods'
    claims using that driver does not tolerate (see ``_excluded``)."""
    claims = {c.key: c for pod in nc.pods for c in pod_claims[pod.key].claims}
    by_driver = _requests_by_driver(held, claims)
    # Read only for the drivers of the requests held (none: nothing to exclude).
    templates = (
        {info.name: info.it.resource_slice_templates for info in nc.candidates} if by_driver else {}
    )
    excluded = _excluded(allocator, nc.id, templates, by_driver, devices)
    return {"excluded": excluded, "tolerated": _tolerated(held, pod_entries, devices)}


def extend_pod_claims(pod_entries: list[dict], outcomes, run, snapshot) -> None:
    """``claims[].deviceTaints`` of placed pods, when there is something to say: the taints
    their devices' requests tolerated and, for claims the device search placed in this run,
    the reachable devices a taint kept from them. The placements on new NodeClaims say the
    same per NodeClaim; this covers existing nodes as well."""
    devices = _Devices(snapshot, run.allocator)
    if devices.state is None or not run.pipeline.gates.enabled("DRADeviceTaints"):
        return
    for entry, outcome in zip(pod_entries, outcomes, strict=True):
        if not entry["scheduled"] or not entry["claims"]:
            continue
        target = outcome.target
        templates = dict(target.resource_slices())
        claims = {c.key: c for c in outcome.pod_claims.claims}
        one = {entry["pod"]: entry}
        for claim_entry in entry["claims"]:
            held = [(entry["pod"], claim_entry)]
            tolerated_list = _tolerated(held, one, devices)
            excluded = []
            if claim_entry["state"] in ("unallocated", "reallocated"):
                by_driver = _requests_by_driver(held, claims)
                excluded = _excluded(run.allocator, target.id, templates, by_driver, devices)
            if excluded or tolerated_list:
                for x in excluded:
                    del x["claims"]  # this claim
                for t in tolerated_list:
                    del t["pod"], t["claim"]
                claim_entry["deviceTaints"] = {"excluded": excluded, "tolerated": tolerated_list}


def binding_conditions(pods: list[str], pod_entries: dict[str, dict]) -> list[dict]:
    """Held devices whose binding waits on conditions or pins the node: the pod stays in
    PreBind until the conditions are True (or fails on a failure condition)."""
    out, seen = [], set()
    for pod in pods:
        for claim in pod_entries[pod]["claims"]:
            for d in claim["devices"]:
                if not (
                    d.get("bindingConditions")
                    or d.get("bindingFailureConditions")
                    or d.get("bindsToNode")
                ):
                    continue
                key = (pod, claim["claim"], d["request"], d["driver"], d["pool"], d["device"])
                if key in seen:
                    continue
                seen.add(key)
                out.append(
                    {
                        "pod": pod,
                        "claim": claim["claim"],
                        "request": d["request"],
                        "driver": d["driver"],
                        "pool": d["pool"],
                        "device": d["device"],
                        "conditions": list(d.get("bindingConditions") or []),
                        "failureConditions": list(d.get("bindingFailureConditions") or []),
                        "bindsToNode": bool(d.get("bindsToNode")),
                        "timeoutSeconds": claim.get("bindingTimeoutSeconds"),
                    }
                )
    return out


def new_node_claim_gating(name: str, annotations: dict[str, str]) -> dict | None:
    """A new NodeClaim asking for DRA drivers starts gated: no node, so no pool published yet
    (design: NodeClaim Initialization Gating). None when it asks for none (not gated)."""
    annotation = annotations.get(REQUESTED_DRA_DRIVERS)
    if annotation is None:
        return None
    return {
        "nodeClaim": name,
        "node": None,
        "status": "Unknown",
        "reason": NOT_PUBLISHED,
        "missingDrivers": requested_drivers(annotation),
    }


def extend_node_claims(entries: list[dict], run, snapshot, pod_entries: dict[str, dict]) -> None:
    """Add the report fields to each ``nodeClaims`` entry (same order as the run's NodeClaims)."""
    scheduler = run.scheduler
    log: PruneLog = scheduler.state.prunes
    devices = _Devices(snapshot, run.allocator)
    by_name = {nc.name: nc for nc in scheduler.node_claims}
    # The requirements a NodeClaim of each NodePool starts from (its NodePool's).
    starts = {template.name: template.requirements for template in scheduler.templates}
    slices_memo: dict[str, tuple[list, dict]] = {}
    for entry in entries:
        nc = by_name[entry["name"]]
        held = held_claims(entry["pods"], pod_entries)
        entry["instanceTypesPruned"] = log.for_claim(nc.id, entry["instanceTypes"])
        entry["requirementsBeforeDRA"] = _requirements_json(log.before_dra.get(nc.id))
        entry["templateSlices"] = template_slices(nc.candidates, slices_memo)
        entry["deviceTaints"] = device_taints(
            nc, pod_entries, held, devices, run.allocator, run.pod_claims
        )
        entry["bindingConditions"] = binding_conditions(entry["pods"], pod_entries)
        entry["initializationGating"] = new_node_claim_gating(nc.name, entry["annotations"])
        entry["zonePinnedBy"] = [
            pin.to_json()
            for pin in zone_pins(
                starts.get(nc.node_pool) or Requirements(),
                nc.pods,
                scheduler.state.volumes.alternatives,
                {
                    key: [
                        c["nodeSelector"]
                        for c in pod_entries[key]["claims"]
                        if isinstance(c.get("nodeSelector"), dict)
                    ]
                    for key in entry["pods"]
                },
            )
        ]
