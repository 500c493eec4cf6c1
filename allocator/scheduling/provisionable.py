"""Which pending pods Karpenter provisions for, and why it ignores the others (docs/
SIMULATION.md; the result's ``ignoredPods``).

Karpenter's provisioner lists unbound pods, keeps those ``IsProvisionable``
(``pkg/utils/pod/scheduling.go``: kube-scheduler marked it unschedulable, it is not being
preempted for, no DaemonSet or Node owns it) and then drops those ``Validate`` refuses
(``provisioner.go``: a ``karpenter.sh/nodepool DoesNotExist`` requirement, node selector and
required node affinity terms Karpenter cannot satisfy, unusable PersistentVolumeClaims). Such a
pod is never scheduled, not even to an existing node; the result lists it with the reason.

A scheduling gate is reported before the rest: kube-scheduler never marks a gated pod
unschedulable, and the gate is what the user has to look at. A pod without any ``status`` (a
hand-written snapshot) counts as marked unschedulable.
"""

from __future__ import annotations

import re
from enum import StrEnum

from allocator.model import Pod
from allocator.records import record
from allocator.requirements import (
    LABEL_CAPACITY_TYPE,
    LABEL_HOSTNAME,
    LABEL_NODEPOOL,
    NORMALIZED_LABELS,
    WELL_KNOWN_LABELS,
    RequirementError,
    Requirements,
)
from allocator.scheduling.volumes import (
    Storage,
    VolumeProblem,
    VolumeTopology,
    validate_claims,
    volume_topology,
)


class IgnoreCode(StrEnum):
    SCHEDULING_GATE = "scheduling-gate"
    PREEMPTING = "preempting"
    NOT_UNSCHEDULABLE = "not-marked-unschedulable"
    DAEMONSET = "daemonset-pod"
    MIRROR = "mirror-pod"
    NOT_ON_KARPENTER = "karpenter-nodepool-does-not-exist"
    UNSUPPORTED_REQUIREMENT = "unsupported-requirement"
    VOLUME = "volume"
    VOLUME_TOPOLOGY = "volume-topology"


@record(frozen=True)
class IgnoreReason:
    """Why Karpenter does not provision for a pod."""

    code: IgnoreCode
    message: str
    volume: VolumeProblem | None = None  # the volume behind a VOLUME / VOLUME_TOPOLOGY reason

    def __str__(self) -> str:
        return self.message


@record(frozen=True)
class IgnoredPod:
    """A pod Karpenter does not provision for, and why."""

    pod: Pod
    reason: IgnoreReason

    def to_json(self) -> dict:
        return {"pod": self.pod.key, "reason": self.reason.message, "code": str(self.reason.code)}


# --- IsProvisionable ---------------------------------------------------------------------------

POD_SCHEDULED = "PodScheduled"
UNSCHEDULABLE = "Unschedulable"


def _owned_by(pod: Pod, kind: str, api_version: str) -> str | None:
    """The owner's name when an owner reference of that kind (and API version, when the
    reference states one) exists: Karpenter's IsOwnedBy."""
    for ref in pod.owner_references:
        if ref.kind == kind and ref.api_version in ("", api_version):
            return ref.name
    return None


def failed_to_schedule(pod: Pod) -> bool:
    """kube-scheduler marked the pod: a PodScheduled condition with reason Unschedulable (a
    pod with no status at all counts as marked)."""
    if not pod.has_status:
        return True
    return any(c.type == POD_SCHEDULED and c.reason == UNSCHEDULABLE for c in pod.conditions)


def provisionable_problem(pod: Pod) -> IgnoreReason | None:
    """Karpenter's IsProvisionable for an unbound pod, with the reason when it is not."""
    owner = _owned_by(pod, "DaemonSet", "apps/v1")
    if owner is not None:
        return IgnoreReason(
            IgnoreCode.DAEMONSET,
            f"owned by DaemonSet {pod.namespace}/{owner}: the DaemonSet controller places it",
        )
    owner = _owned_by(pod, "Node", "v1")
    if owner is not None:
        return IgnoreReason(
            IgnoreCode.MIRROR, f"mirror pod of node {owner}: the kubelet runs it there"
        )
    if pod.scheduling_gates:
        plural = "s" if len(pod.scheduling_gates) > 1 else ""
        return IgnoreReason(
            IgnoreCode.SCHEDULING_GATE,
            f"scheduling gate{plural} {', '.join(pod.scheduling_gates)}",
        )
    if pod.nominated_node_name:
        return IgnoreReason(
            IgnoreCode.PREEMPTING,
            f"nominated to node {pod.nominated_node_name} (preemption in progress)",
        )
    if not failed_to_schedule(pod):
        scheduled = next((c for c in pod.conditions if c.type == POD_SCHEDULED), None)
        if scheduled is None:
            seen = "no PodScheduled condition"
        else:
            reason = f", reason {scheduled.reason}" if scheduled.reason else ""
            seen = f"PodScheduled is {scheduled.status or 'unset'}{reason}"
        return IgnoreReason(
            IgnoreCode.NOT_UNSCHEDULABLE,
            f"kube-scheduler has not marked it unschedulable ({seen})",
        )
    return None


# --- Validate ----------------------------------------------------------------------------------

# Karpenter's v1.WellKnownLabels: the scheduler's well-known labels but kubernetes.io/hostname,
# which the API's list does not have.
KARPENTER_WELL_KNOWN_LABELS = WELL_KNOWN_LABELS - {LABEL_HOSTNAME}
RESTRICTED_LABEL_DOMAINS = frozenset({"karpenter.sh"})
RESTRICTED_LABELS = frozenset({LABEL_HOSTNAME})
WELL_KNOWN_VALUES = {LABEL_CAPACITY_TYPE: ("on-demand", "reserved", "spot")}

_NAME_RE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")
_PREFIX_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_VALUE_RE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?\Z")
_INT_RE = re.compile(r"[+-]?[0-9]+\Z")

NOT_ON_KARPENTER_MESSAGE = (
    f"configured to not run on a Karpenter provisioned node (requirement {LABEL_NODEPOOL} "
    "DoesNotExist)"
)


def _go_list(values) -> str:
    return "[" + " ".join(values) + "]"


def restricted_label_problem(key: str) -> str | None:
    """Karpenter's IsRestrictedLabel."""
    if key in KARPENTER_WELL_KNOWN_LABELS:
        return None
    domain = key.split("/", 1)[0] if "/" in key else ""
    restricted = any(domain == d or domain.endswith(f".{d}") for d in RESTRICTED_LABEL_DOMAINS)
    if restricted or key in RESTRICTED_LABELS:
        return (
            f"using label {key} is not allowed as it might interfere with the internal "
            "provisioning logic; specify a well known label: "
            f"{_go_list(sorted(KARPENTER_WELL_KNOWN_LABELS))}, or a custom label that does not "
            f"use a restricted domain: {_go_list(sorted(RESTRICTED_LABEL_DOMAINS))}"
        )
    return None


def _qualified_name_problems(key: str) -> list[str]:
    # apimachinery's IsQualifiedName, in short.
    prefix, _, name = key.rpartition("/")
    problems = []
    if "/" in key and (not prefix or len(prefix) > 253 or not _PREFIX_RE.match(prefix)):
        problems.append("prefix part must be a lowercase RFC 1123 subdomain")
    if not name or len(name) > 63 or not _NAME_RE.match(name):
        problems.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
            "and end with an alphanumeric character, at most 63 characters"
        )
    return problems


def requirement_problems(key: str, operator: str, values: tuple[str, ...] | list[str]) -> list[str]:
    """Karpenter's ValidateRequirement for one pod requirement, as Validate calls it."""
    key = NORMALIZED_LABELS.get(key, key)
    problems: list[str] = []
    restricted = restricted_label_problem(key)
    if restricted:
        problems.append(restricted)
    known = WELL_KNOWN_VALUES.get(key)
    if known and operator == "In" and not any(v in known for v in values):
        problems.append(
            f"no valid values found in {_go_list(values)} for {key}, expected one of: "
            f"{_go_list(known)}, got: {_go_list(values)}"
        )
    problems.extend(
        f"key {key} is not a qualified name, {p}" for p in _qualified_name_problems(key)
    )
    for value in values:
        if len(value) > 63 or not _VALUE_RE.match(value):
            problems.append(
                f"invalid value {value} for key {key}, a valid label must be an empty string or "
                "consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                "with an alphanumeric character, at most 63 characters"
            )
    if operator == "In" and not values:
        problems.append(f"key {key} with operator {operator} must have a value defined")
    if operator in ("Gt", "Lt") and (
        len(values) != 1 or not _INT_RE.match(values[0]) or int(values[0]) < 0
    ):
        problems.append(
            f"key {key} with operator {operator} must have a single positive integer value"
        )
    return problems


def _term_problems(term: dict) -> list[str]:
    problems = []
    if term.get("matchFields"):
        problems.append("node selector term with matchFields is not supported")
    for expr in term.get("matchExpressions") or ():
        problems.extend(
            requirement_problems(
                str(expr.get("key", "")),
                str(expr.get("operator", "")),
                [str(v) for v in expr.get("values") or ()],
            )
        )
    return problems


def _heaviest_preference(pod: Pod) -> list[dict]:
    """The matchExpressions of the pod's heaviest preferred node affinity term (first of the
    heaviest), which Karpenter's pod requirements start from."""
    spec = pod.raw.get("spec") if isinstance(pod.raw.get("spec"), dict) else {}
    affinity = spec.get("affinity") if isinstance(spec.get("affinity"), dict) else {}
    node = affinity.get("nodeAffinity") if isinstance(affinity.get("nodeAffinity"), dict) else {}
    terms = node.get("preferredDuringSchedulingIgnoredDuringExecution")
    best: list[dict] = []
    best_weight = None
    for term in terms if isinstance(terms, list) else ():
        if not isinstance(term, dict) or not isinstance(term.get("preference"), dict):
            continue
        weight = term.get("weight") if isinstance(term.get("weight"), int) else 0
        if best_weight is None or weight > best_weight:
            best_weight = weight
            expressions = term["preference"].get("matchExpressions")
            best = (
                [e for e in expressions if isinstance(e, dict)]
                if isinstance(expressions, list)
                else []
            )
    return best


def _avoids_karpenter(pod: Pod) -> bool:
    """The pod's requirements (node selector, heaviest preference, first required term) leave
    ``karpenter.sh/nodepool`` DoesNotExist: Karpenter's validateKarpenterManagedLabelCanExist."""
    requirements = Requirements.from_labels(pod.node_selector)
    terms = ((pod.required_node_affinity or {}).get("nodeSelectorTerms")) or []
    try:
        requirements.add(Requirements.from_node_selector_requirements(_heaviest_preference(pod)))
        if terms:
            first = terms[0].get("matchExpressions") or []
            requirements.add(Requirements.from_node_selector_requirements(first))
    except RequirementError:
        return False
    return LABEL_NODEPOOL in requirements and requirements.get(LABEL_NODEPOOL).operator() == (
        "DoesNotExist"
    )


def validation_problem(pod: Pod, storage: Storage) -> IgnoreReason | None:
    """Karpenter's Validate: every problem, joined as its combined error reads; the code is
    that of the first."""
    found: list[tuple[IgnoreCode, str]] = []
    if _avoids_karpenter(pod):
        found.append((IgnoreCode.NOT_ON_KARPENTER, NOT_ON_KARPENTER_MESSAGE))
    for key, value in sorted(pod.node_selector.items()):
        for problem in requirement_problems(key, "In", [value]):
            found.append((IgnoreCode.UNSUPPORTED_REQUIREMENT, problem))
    for term in (pod.required_node_affinity or {}).get("nodeSelectorTerms") or ():
        for problem in _term_problems(term):
            found.append((IgnoreCode.UNSUPPORTED_REQUIREMENT, problem))
    volume = validate_claims(pod, storage)
    if volume is not None:
        found.append((IgnoreCode.VOLUME, volume.message))
    if not found:
        return None
    return IgnoreReason(found[0][0], "; ".join(m for _, m in found), volume)


def ignore_reason(pod: Pod, storage: Storage) -> IgnoreReason | None:
    """Why Karpenter ignores an unbound pod, or None when it provisions for it."""
    return provisionable_problem(pod) or validation_problem(pod, storage)


# --- the pods of one run -------------------------------------------------------------------------


@record
class Provisioning:
    """The pending pods split as Karpenter's provisioner splits them."""

    pending: list[Pod]  # provisioned for, in the order given
    ignored: list[IgnoredPod]  # in the order given
    volume_topology: dict[str, VolumeTopology]  # pod key -> its volume alternatives (if any)


def partition(pods: list[Pod], storage: Storage) -> Provisioning:
    """Unbound pods go through IsProvisionable and Validate; every remaining pod (pods moved
    off deleting nodes included) through the volume topology lookup, which drops the pods
    whose volumes cannot be read (the provisioner's getVolumeTopologyRequirements)."""
    out = Provisioning([], [], {})
    for pod in pods:
        reason = ignore_reason(pod, storage) if pod.node_name is None else None
        if reason is None:
            topology = volume_topology(pod, storage)
            if isinstance(topology, VolumeProblem):
                reason = IgnoreReason(
                    IgnoreCode.VOLUME_TOPOLOGY,
                    f"failed getting volume topology requirements, {topology.message}",
                    topology,
                )
            elif topology:
                out.volume_topology[pod.key] = topology
        if reason is None:
            out.pending.append(pod)
        else:
            out.ignored.append(IgnoredPod(pod, reason))
    return out
