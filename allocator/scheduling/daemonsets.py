"""The DaemonSet pods a new node would run (Karpenter's ``getDaemonSetPods``): their requests
are a new NodeClaim's daemon overhead, their host ports are bound on it before any pod lands.

Per DaemonSet of the snapshot: its newest pod in the snapshot when it has one (the pod may
differ from the template: admission webhooks and LimitRanges change pods), else the pod its
template describes; the template's required node affinity replaces the pod's, as the DaemonSet
controller pins each pod to its node by rewriting it (and those pins are not read). DaemonSet pods whose DaemonSet is not in
the snapshot stand for it, one per DaemonSet (docs/SNAPSHOT.md).

Which of them a node runs (``DaemonPods``): for a new NodeClaim, per NodePool and instance
type (Karpenter's ``isDaemonPodCompatible``), grouped into ``DaemonOverheadGroup``s of the
instance types that run the same ones; for an existing node, by its labels and taints
(``getCompatibleDaemonPods``), the room they still need kept free on it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from allocator.model import DaemonSet, OwnerReference, Pod, Taint
from allocator.records import record
from allocator.requirements import WELL_KNOWN_LABELS, Requirement, Requirements
from allocator.scheduling.fit import (
    InstanceTypeInfo,
    Resources,
    add_into,
    pod_requests,
    pod_requirement_terms,
    untolerated_taint,
)
from allocator.scheduling.hostports import HostPortUsage, host_ports

REGISTERED = "karpenter.sh/registered"
INITIALIZED = "karpenter.sh/initialized"
# Karpenter's NewNodeClaimTemplate adds these two to a NodePool's requirements for DaemonSet
# scheduling only (a DaemonSet may select nodes Karpenter registered and initialized); they
# never reach the NodeClaim.
_SIMULATION_ONLY = Requirements()
_SIMULATION_ONLY.add(
    Requirement.new(REGISTERED, "In", ["true"]), Requirement.new(INITIALIZED, "In", ["true"])
)


def _daemon_owner(pod: Pod) -> OwnerReference | None:
    return next((ref for ref in pod.owner_references if ref.kind == "DaemonSet"), None)


def _controlled_by(ref: OwnerReference, ds: DaemonSet) -> bool:
    if ref.name != ds.name:
        return False
    return not (ref.uid and ds.uid) or ref.uid == ds.uid


def _without_node_pins(pod: Pod) -> Pod:
    """The pod with its affinity's ``matchFields`` dropped: the DaemonSet controller pins each
    pod to its node through them, and Karpenter reads only ``matchExpressions`` when it decides
    whether a DaemonSet runs on a new node."""
    affinity = pod.required_node_affinity
    terms = (affinity or {}).get("nodeSelectorTerms") or []
    if not any("matchFields" in term for term in terms):
        return pod
    stripped = [{k: v for k, v in term.items() if k != "matchFields"} for term in terms]
    return dataclasses.replace(
        pod, required_node_affinity={**affinity, "nodeSelectorTerms": stripped}
    )


def daemon_pods(daemon_sets: dict[str, DaemonSet], pods: list[Pod]) -> list[Pod]:
    """One pod per DaemonSet, by namespace and name."""
    newest: dict[str, Pod] = {}
    orphans: dict[tuple[str, str], Pod] = {}
    for pod in sorted(pods, key=lambda p: (p.namespace, p.name)):
        ref = _daemon_owner(pod)
        if ref is None:
            continue
        ds = daemon_sets.get(f"{pod.namespace}/{ref.name}")
        if ds is None:
            orphans.setdefault((pod.namespace, ref.name), pod)
        elif _controlled_by(ref, ds):
            seen = newest.get(ds.key)
            if seen is None or pod.creation_timestamp > seen.creation_timestamp:
                newest[ds.key] = pod
    out: dict[tuple[str, str], Pod] = dict(orphans)
    for key, ds in daemon_sets.items():
        if ds.template is None:
            continue
        pod = newest.get(key)
        if pod is None:
            pod = ds.template
        elif ds.template.required_node_affinity is not None:
            pod = dataclasses.replace(
                pod, required_node_affinity=ds.template.required_node_affinity
            )
        out[(ds.namespace, ds.name)] = pod
    return [_without_node_pins(out[k]) for k in sorted(out)]


def requests_of(pods: Iterable[Pod]) -> Resources:
    """Karpenter's RequestsForPods: the pods' requests summed."""
    total: Resources = {}
    for pod in pods:
        add_into(total, pod_requests(pod))
    return total


class DaemonPods:
    """The DaemonSet pods of one run, as Karpenter's scheduler asks which of them a node runs.

    Karpenter relaxes a DaemonSet pod's required node affinity for a NodePool's instance type by
    dropping its first term from the pod itself (``removeRequiredNodeAffinityTerm``), and the
    same pod objects serve every instance type, NodePool and existing node of the scheduler
    after that: a term dropped once stays dropped. ``_first`` is where each pod's terms start
    now; the templates must be asked first, in Karpenter's order, then the existing nodes.
    """

    __slots__ = ("_first", "_terms", "asked_by_template", "pods")

    def __init__(self, pods: list[Pod]) -> None:
        self.pods = pods
        self._terms = [pod_requirement_terms(pod) for pod in pods]
        self._first = [0] * len(pods)
        # Asking for a NodePool's instance type also adds a PreferNoSchedule toleration to the
        # pod (a DaemonSet pod ignores that preference), which existing nodes then see too.
        self.asked_by_template = False

    def _strict(self, i: int) -> Requirements:
        """Karpenter's NewStrictPodRequirements: node selector and the first term left."""
        return self._terms[i][self._first[i]]

    def for_instance_type(
        self, template: Requirements, taints: list[Taint], info: InstanceTypeInfo
    ) -> tuple[Pod, ...]:
        """Karpenter's isDaemonPodCompatible for each pod: the pool's taints tolerated
        (PreferNoSchedule always), the pod's strict requirements compatible with the pool's
        (undefined well-known labels allowed) and intersecting the instance type's; else its
        first required term dropped and tried again while more than one is left."""
        self.asked_by_template = True
        out = []
        for i, pod in enumerate(self.pods):
            if untolerated_taint(pod.tolerations, taints, prefer_no_schedule=False) is not None:
                continue
            terms = self._terms[i]
            while True:
                term = terms[self._first[i]]
                if (
                    template.compatible(term, WELL_KNOWN_LABELS) is None
                    and info.requirements.intersects(term) is None
                ):
                    out.append(pod)
                    break
                if self._first[i] + 1 >= len(terms):
                    break
                self._first[i] += 1
        return tuple(out)

    def for_node(self, labels: dict[str, str], taints: list[Taint]) -> list[Pod]:
        """Karpenter's getCompatibleDaemonPods: the pods that tolerate the node's taints and
        whose strict requirements its labels meet (no undefined label allowed)."""
        node = Requirements.from_labels(labels)
        out = []
        for i, pod in enumerate(self.pods):
            if untolerated_taint(
                pod.tolerations, taints, prefer_no_schedule=not self.asked_by_template
            ):
                continue
            if node.compatible(self._strict(i), frozenset()) is None:
                out.append(pod)
        return out


def template_requirements(requirements: Requirements) -> Requirements:
    """A NodePool's requirements as DaemonSet scheduling reads them (registered, initialized)."""
    out = requirements.copy()
    out.add(_SIMULATION_ONLY)
    return out


@record
class DaemonOverheadGroup:
    """Karpenter's DaemonOverheadGroup: a NodePool's instance types that would run the same
    DaemonSet pods, their requests (the overhead a node of them carries) and host ports."""

    instance_types: frozenset[str]
    daemons: tuple[Pod, ...]
    overhead: Resources
    host_ports: HostPortUsage

    def copy(self) -> DaemonOverheadGroup:
        """For one NodeClaim: its pods' ports are added to each group's usage."""
        return DaemonOverheadGroup(
            self.instance_types, self.daemons, self.overhead, self.host_ports.copy()
        )


def overhead_groups(
    daemons: DaemonPods,
    requirements: Requirements,
    taints: list[Taint],
    instance_types: list[InstanceTypeInfo],
) -> tuple[DaemonOverheadGroup, ...]:
    """Karpenter's buildDaemonOverheadGroups for one NodePool: its instance types grouped by
    the DaemonSet pods each would run, in the order of each group's first instance type."""
    reqs = template_requirements(requirements)
    found: dict[tuple[str, ...], tuple[list[str], tuple[Pod, ...]]] = {}
    for info in instance_types:
        runs = daemons.for_instance_type(reqs, taints, info)
        key = tuple(sorted(pod.key for pod in runs))
        entry = found.get(key)
        if entry is None:
            found[key] = ([info.name], runs)
        else:
            entry[0].append(info.name)
    groups = []
    for names, runs in found.values():
        usage = HostPortUsage()
        for pod in runs:
            usage.add(pod, host_ports(pod))
        groups.append(DaemonOverheadGroup(frozenset(names), runs, requests_of(runs), usage))
    return tuple(groups)
