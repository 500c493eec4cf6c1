"""Extended resources served by DRA (KEP-5004, gate ``DRAExtendedResource``, beta in 1.36).

A pod asking for an extended resource (``example.com/gpu: 1`` in a container's requests or
limits) that a node does not offer natively (its ``status.allocatable`` has none of it) is served
by the DeviceClass whose ``spec.extendedResourceName`` names it, or whose implicit name
``deviceclass.resource.kubernetes.io/<class>`` is the one asked for. kube-scheduler's
DynamicResources plugin then makes one ResourceClaim for the pod (the "special" claim, owned by
the pod and annotated ``resource.kubernetes.io/extended-resource-claim: "true"``), last after
the pod's own claims, with ExactCount requests built per container; that is the claim built
here, as the same ``ResourceClaim`` model every other claim is.

Which way a resource goes is decided per node, as kube-scheduler's Filter does: a node whose
allocatable has the resource (non-zero) serves it natively (the NodeResourcesFit plugin counts
it against allocatable), a node without it serves it through the claim, and the resource is
then not counted against allocatable. Karpenter counts a pod's requests against an instance
type's capacity (``resources.Fits`` of ``RequestsForPods``) and has no rule for extended
resources served by DRA, so an instance type is treated as kube-scheduler treats the node it
would become: its capacity decides. Instance types of one NodeClaim that differ in what they
offer natively are split into groups (see ``instance_type_groups``).

With the gate off none of this happens: the request stays a plain extended resource, and a
node or instance type that does not offer it cannot take the pod.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from dataclasses import field

from allocator.model import (
    DeviceClass,
    DeviceRequest,
    ExactDeviceRequest,
    Pod,
    ResourceClaim,
    ResourceClaimSpec,
)
from allocator.quantity import Quantity, QuantityError
from allocator.records import record
from allocator.snapshot.names import extended_resource_name_problem

GATE = "DRAExtendedResource"
IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"
CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
CLAIM_SUFFIX = "-extended-resources"


# --- names (k8s.io/kubernetes pkg/apis/core/v1/helper, pkg/scheduler/util; the name rules
# themselves are in snapshot/names.py, where the loader checks a DeviceClass's) --------------


def is_extended_resource_name(name: str) -> bool:
    return extended_resource_name_problem(name) is None


def is_dra_extended_resource_name(name: str) -> bool:
    """An explicit extended resource name, or an implicit DeviceClass one."""
    return name.startswith(IMPLICIT_PREFIX) or is_extended_resource_name(name)


# --- which DeviceClass serves a resource -------------------------------------------------------


def _created(device_class: DeviceClass) -> str:
    meta = (device_class.raw or {}).get("metadata") or {}
    stamp = meta.get("creationTimestamp") if isinstance(meta, dict) else None
    return stamp if isinstance(stamp, str) else ""


def class_mapping(device_classes: dict[str, DeviceClass]) -> dict[str, str]:
    """Extended resource name -> DeviceClass name. Every class serves its implicit name; an
    explicit ``extendedResourceName`` shared by several classes goes to the one created last,
    and among those created at the same time to the name sorted first (the API's words)."""
    mapping: dict[str, str] = {}
    explicit: dict[str, DeviceClass] = {}
    for name in sorted(device_classes):
        dc = device_classes[name]
        mapping[IMPLICIT_PREFIX + name] = name
        ern = dc.extended_resource_name
        if not ern:
            continue
        held = explicit.get(ern)
        # RFC 3339 timestamps in UTC compare as text; names are visited in sorted order.
        if held is None or _created(dc) > _created(held):
            explicit[ern] = dc
    for ern, dc in explicit.items():
        mapping.setdefault(ern, dc.name)
    return mapping


# --- the pod's claim ---------------------------------------------------------------------------


def _container_requests(container: dict) -> dict[str, Quantity]:
    """A container's requests after API defaulting (a limit alone is also the request)."""
    resources = container.get("resources") if isinstance(container, dict) else None
    resources = resources if isinstance(resources, dict) else {}
    out: dict[str, Quantity] = {}
    for key in ("limits", "requests"):  # requests win over the defaulted limits
        values = resources.get(key)
        if not isinstance(values, dict):
            continue
        for name, value in values.items():
            try:
                quantity = Quantity.parse(value)
            except (QuantityError, TypeError, ValueError):
                continue  # the loader reports it
            if key == "requests" or name not in out:
                out[str(name)] = quantity
    return out


@record
class _Request:
    """A pod's extended resource served by DRA, and how many it asks for."""

    name: str
    count: int


def _container_request(
    index: int, requests: dict[str, Quantity], resource: str, reusable: Iterable
) -> tuple[_Request | None, bool]:
    """One container's request for ``resource`` (kube-scheduler's naming:
    ``container-<index in initContainers + containers>-request-<index of the resource among
    the container's sorted request names>``), after what ``reusable`` requests already give
    it; (None, uses) when it needs no request of its own."""
    quantity = requests.get(resource)
    wanted = quantity.as_int() if quantity is not None else None
    if not wanted or wanted <= 0:
        return None, False
    have = 0
    for other in reusable:
        if other is not None:
            have += other.count
            if have >= wanted:
                return None, True
    position = sorted(requests).index(resource)
    return _Request(f"container-{index}-request-{position}", wanted - have), True


def claim_requests(pod: Pod, classes: dict[str, str]) -> list[tuple[str, str, int]]:
    """(request name, DeviceClass, count) of the pod's claim for ``classes`` (resource ->
    class), as kube-scheduler's createRequestsAndMappings builds them: each long-lived
    container (regular containers and restartable init containers) gets its own request; a
    plain init container first reuses the devices of the long-lived containers that start
    after it, and only the largest extra any init container needs is requested. Sorted by
    request name."""
    spec = pod.raw.get("spec") if isinstance(pod.raw, dict) else None
    spec = spec if isinstance(spec, dict) else {}
    init = [c for c in spec.get("initContainers") or () if isinstance(c, dict)]
    regular = [c for c in spec.get("containers") or () if isinstance(c, dict)]
    containers = init + regular
    requests = [_container_requests(c) for c in containers]
    short_lived = [
        i for i, c in enumerate(containers) if i < len(init) and c.get("restartPolicy") != "Always"
    ]
    long_lived = [i for i in range(len(containers)) if i not in short_lived]
    out: list[tuple[str, str, int]] = []
    for resource in sorted(classes):
        own: list[_Request | None] = [None] * len(containers)
        for i in long_lived:
            own[i] = _container_request(i, requests[i], resource, ())[0]
        largest: _Request | None = None
        for i in short_lived:
            req, _ = _container_request(i, requests[i], resource, own[i:])
            if req is not None and (largest is None or req.count > largest.count):
                largest = req
        chosen = ([largest] if largest is not None else []) + [r for r in own if r is not None]
        out.extend((r.name, classes[resource], r.count) for r in chosen)
    out.sort(key=lambda r: r[0])
    return out


def build_claim(pod: Pod, classes: dict[str, str]) -> ResourceClaim | None:
    """The claim the scheduler makes for the pod's extended resources ``classes`` serves
    (resource -> DeviceClass); None when no container asks for a whole device of them.

    Named ``<pod>-extended-resources`` in the pod's namespace: kube-scheduler gives it that
    ``generateName`` and the apiserver adds a random suffix, which a simulation leaves off so
    that two runs name it the same."""
    requests = claim_requests(pod, classes)
    if not requests:
        return None
    name = pod.name + CLAIM_SUFFIX
    raw_requests = [
        {
            "name": request,
            "exactly": {"deviceClassName": cls, "allocationMode": "ExactCount", "count": count},
        }
        for request, cls, count in requests
    ]
    return ResourceClaim(
        namespace=pod.namespace,
        name=name,
        spec=ResourceClaimSpec(
            requests=[
                DeviceRequest(request, exactly=ExactDeviceRequest(cls, count=count))
                for request, cls, count in requests
            ]
        ),
        raw={
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {
                "namespace": pod.namespace,
                "name": name,
                "generateName": name + "-",
                "annotations": {CLAIM_ANNOTATION: "true"},
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": pod.name,
                        "uid": pod.uid,
                        "controller": True,
                    }
                ],
            },
            "spec": {"devices": {"requests": raw_requests}},
        },
    )


def earlier_claims(claims: dict[str, ResourceClaim]) -> dict[tuple[str, str, str], ResourceClaim]:
    """The snapshot's extended resource claims (annotated ``"true"``) by the (namespace, name,
    uid) of the pod that controls them, built once per run."""
    out: dict[tuple[str, str, str], ResourceClaim] = {}
    for claim in claims.values():
        meta = (claim.raw or {}).get("metadata") or {}
        annotations = meta.get("annotations") if isinstance(meta, dict) else None
        if not isinstance(annotations, dict) or annotations.get(CLAIM_ANNOTATION) != "true":
            continue
        for ref in meta.get("ownerReferences") or ():
            if isinstance(ref, dict) and ref.get("kind") == "Pod" and ref.get("controller") is True:
                owner = (claim.namespace, str(ref.get("name")), str(ref.get("uid") or ""))
                out.setdefault(owner, claim)
    return out


def existing_claim(
    pod: Pod, claims: dict[str, ResourceClaim], earlier: dict[tuple[str, str, str], ResourceClaim]
) -> ResourceClaim | None:
    """The pod's claim from an earlier scheduling cycle, if the snapshot has it: named by
    ``status.extendedResourceClaimStatus``, or annotated as the extended resource claim and
    controlled by the pod (kube-scheduler's findExtendedResourceClaim)."""
    status = pod.raw.get("status") if isinstance(pod.raw, dict) else None
    named = (status or {}).get("extendedResourceClaimStatus") if isinstance(status, dict) else None
    if isinstance(named, dict) and isinstance(named.get("resourceClaimName"), str):
        found = claims.get(f"{pod.namespace}/{named['resourceClaimName']}")
        if found is not None:
            return found
    return earlier.get((pod.namespace, pod.name, pod.uid or ""))


@record(eq=False)
class ExtendedClaim:
    """A pending pod's extended resources that a DeviceClass can serve, and its claim.

    ``resources``: resource name -> the pod's request in milli-units (what the node resource
    fit leaves out where DRA serves it); ``claim``: the claim for all of them, or the pod's
    allocated claim of an earlier cycle (``fixed``), which is used as it is."""

    pod: Pod
    resources: dict[str, int]
    classes: dict[str, str]
    claim: ResourceClaim | None
    fixed: bool = False
    _variants: dict[frozenset[str], ResourceClaim | None] = field(default_factory=dict)

    def native(self, capacity: dict[str, int]) -> frozenset[str]:
        """The resources a node (or instance type) with this allocatable offers natively."""
        return frozenset(r for r in self.resources if capacity.get(r, 0) > 0)

    def native_requests(self, native: frozenset[str]) -> dict[str, int]:
        return {r: v for r, v in self.resources.items() if r in native}

    def without(self, requests: dict[str, int]) -> dict[str, int]:
        """``requests`` minus every resource DRA may serve (the node resource fit's share)."""
        return {r: v for r, v in requests.items() if r not in self.resources}

    def claims(self, claims: list[ResourceClaim], native: frozenset[str]) -> list[ResourceClaim]:
        """The pod's claims on a target offering ``native`` natively: its extended resource
        claim then asks only for the others (and is left out when none is left)."""
        if not native or self.fixed or self.claim is None:
            return claims
        if native not in self._variants:
            rest = {r: c for r, c in self.classes.items() if r not in native}
            self._variants[native] = build_claim(self.pod, rest) if rest else None
        variant = self._variants[native]
        out = [c for c in claims if c.key != self.claim.key]
        if variant is not None:
            out.append(variant)
        return out


def pod_extended_claim(
    pod: Pod,
    requests: dict[str, Quantity],
    mapping: dict[str, str],
    claims: dict[str, ResourceClaim],
    earlier: dict[tuple[str, str, str], ResourceClaim] | None = None,
) -> ExtendedClaim | None:
    """The pod's extended resources a DeviceClass serves (``mapping`` from ``class_mapping``;
    empty with the gate off), or None when it asks for none."""
    # Extended resources come in whole units (pod validation); a fractional one stays plain.
    classes = {
        name: mapping[name]
        for name, quantity in requests.items()
        if quantity.sign() > 0
        and quantity.is_integer()
        and name in mapping
        and is_dra_extended_resource_name(name)
    }
    if not classes:
        return None
    resources = {name: requests[name].milli_value() for name in classes}
    found = existing_claim(pod, claims, earlier if earlier is not None else earlier_claims(claims))
    if found is not None and found.allocation is not None:
        return ExtendedClaim(pod, resources, classes, found, fixed=True)
    return ExtendedClaim(pod, resources, classes, build_claim(pod, classes))


def instance_type_groups(ext: ExtendedClaim, infos: list) -> list[tuple[frozenset[str], list]]:
    """The instance types split by which of the pod's extended resources they offer natively,
    each group in the given order, groups in the order of their first instance type."""
    groups: dict[frozenset[str], list] = {}
    for info in infos:
        groups.setdefault(ext.native(info.capacity), []).append(info)
    return list(groups.items())


# --- what a user edits (fix suggestions) --------------------------------------------------------


def _request_origin(ext: ExtendedClaim, request: str) -> tuple[str, int, str] | None:
    """(``initContainers`` | ``containers``, index there, resource) a request of the claim was
    made for: ``container-<i>-request-<j>`` is container i of initContainers + containers and
    resource j of its sorted request names."""
    match = re.fullmatch(r"container-(\d+)-request-(\d+)", request)
    spec = ext.pod.raw.get("spec") if isinstance(ext.pod.raw, dict) else None
    if match is None or not isinstance(spec, dict):
        return None
    index, position = int(match.group(1)), int(match.group(2))
    init = [c for c in spec.get("initContainers") or () if isinstance(c, dict)]
    regular = [c for c in spec.get("containers") or () if isinstance(c, dict)]
    containers = init + regular
    if index >= len(containers):
        return None
    names = sorted(_container_requests(containers[index]))
    if position >= len(names) or names[position] not in ext.classes:
        return None
    if index < len(init):
        return "initContainers", index, names[position]
    return "containers", index - len(init), names[position]


@record
class FewerDevices:
    """A pod changed so that one request of its extended resource claim asks for fewer
    devices: the container's quantity is lowered by what the request loses."""

    pod: Pod
    extended: ExtendedClaim
    change: dict  # as a suggestion states it: the container's ``resources``
    container: str
    resource: str
    before: int
    after: int


def with_fewer_devices(ext: ExtendedClaim, request: str, count: int) -> FewerDevices | None:
    """``ext``'s pod with the container behind ``request`` asking for ``count`` devices there;
    None when no container quantity makes that request."""
    from allocator.snapshot.core import build_pod
    from allocator.snapshot.fields import Context

    if ext.fixed or ext.claim is None:
        return None
    origin = _request_origin(ext, request)
    current = next((r for r in ext.claim.spec.requests if r.name == request), None)
    if origin is None or current is None or current.exactly is None:
        return None
    group, index, resource = origin
    raw = copy.deepcopy(ext.pod.raw)
    container = raw["spec"][group][index]
    before = _container_requests(container)[resource].as_int() or 0
    after = before - (current.exactly.count - count)
    if after < 1 or after >= before:
        return None
    resources = container.setdefault("resources", {})
    for key in ("requests", "limits"):
        values = resources.get(key)
        if isinstance(values, dict) and resource in values:
            values[resource] = str(after)
    problems: list[str] = []
    ctx = Context("suggestion", 0, "Pod", ext.pod.namespace, ext.pod.name, problems)
    pod = build_pod(ctx, raw)
    changed = pod_extended_claim(pod, pod.requests, ext.classes, {})
    if problems or changed is None:
        return None
    change = {
        "object": f"Pod {ext.pod.key}",
        "field": f"spec.{group}[{index}].resources",
        "op": "set",
        "value": copy.deepcopy(resources),
    }
    name = str(container.get("name") or "")
    return FewerDevices(pod, changed, change, name, resource, before, after)


def intent_devices(pod_raw: dict, device_class_docs: Iterable[dict]) -> dict | None:
    """``spec.devices`` of the claim the scheduler makes for the pod document ``pod_raw``,
    from the snapshot's DeviceClass documents (the pages show it as the claim's intent)."""
    classes: dict[str, DeviceClass] = {}
    for doc in device_class_docs:
        meta = doc.get("metadata") if isinstance(doc, dict) else None
        spec = doc.get("spec") if isinstance(doc, dict) else None
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            continue
        ern = spec.get("extendedResourceName") if isinstance(spec, dict) else None
        classes[meta["name"]] = DeviceClass(
            meta["name"], extended_resource_name=ern if isinstance(ern, str) else None, raw=doc
        )
    mapping = class_mapping(classes)
    meta = pod_raw.get("metadata") if isinstance(pod_raw, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    pod = Pod(str(meta.get("namespace") or "default"), str(meta.get("name") or ""), "", raw=pod_raw)
    spec = pod_raw.get("spec") if isinstance(pod_raw, dict) else None
    spec = spec if isinstance(spec, dict) else {}
    wanted = {
        name
        for c in list(spec.get("initContainers") or ()) + list(spec.get("containers") or ())
        if isinstance(c, dict)
        for name in _container_requests(c)
    }
    chosen = {r: mapping[r] for r in wanted if r in mapping and is_dra_extended_resource_name(r)}
    claim = build_claim(pod, chosen) if chosen else None
    return claim.raw["spec"]["devices"] if claim is not None else None
