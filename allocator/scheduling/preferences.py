"""Preferences treated as requirements, then relaxed one at a time (Karpenter's
``preferences.go`` and ``scheduler.go`` ``trySchedule``).

A pod is first tried with every preference as if it were required: its heaviest preferred
node affinity term joins its node requirements, and the first of its required node affinity
terms is the only one tried. When no target takes it, one thing is dropped, in this order, and
the pod is tried again: a required node affinity term (while more than one is left), a
preferred pod affinity term, a preferred pod anti-affinity term, a preferred node affinity term
(heaviest first), a ``ScheduleAnyway`` topology spread constraint, and last, when a NodePool
has a ``PreferNoSchedule`` taint, a toleration of every ``PreferNoSchedule`` taint. Each
attempt starts again from the pod as written.

A relaxed pod is a copy (``dataclasses.replace``) whose document (``raw``) and derived fields
have one preference fewer; the original is never changed.
"""

from __future__ import annotations

import copy
import dataclasses

from allocator.model import (
    Pod,
    PodAffinity,
    PreferredSchedulingTerm,
    Toleration,
    TopologySpreadConstraint,
)
from allocator.records import record
from allocator.requirements import RequirementError, Requirements
from allocator.scheduling.gosort import slice_sort

REQUIRED_NODE_AFFINITY_TERM = "required-node-affinity-term"
PREFERRED_POD_AFFINITY = "preferred-pod-affinity"
PREFERRED_POD_ANTI_AFFINITY = "preferred-pod-anti-affinity"
PREFERRED_NODE_AFFINITY = "preferred-node-affinity"
TOPOLOGY_SPREAD = "topology-spread"
PREFER_NO_SCHEDULE = "prefer-no-schedule"

_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
# The toleration relaxation adds (Karpenter's: operator Exists, effect PreferNoSchedule).
PREFER_NO_SCHEDULE_TOLERATION = {"operator": "Exists", "effect": "PreferNoSchedule"}


@record(frozen=True)
class Relaxation:
    """One preference dropped to place a pod (the result's ``relaxed`` entries)."""

    kind: str
    term: object  # what was dropped, as written in the pod (the toleration added, for the last)

    def to_json(self) -> dict:
        return {"kind": self.kind, "term": copy.deepcopy(self.term)}


@record(frozen=True)
class Preferences:
    """Karpenter's preference relaxation: what is dropped from a pod, one at a time."""

    # Whether relaxing may tolerate PreferNoSchedule taints: only when a NodePool has one.
    tolerate_prefer_no_schedule: bool = False

    def relax(self, pod: Pod) -> tuple[Pod, Relaxation] | None:
        """The pod with the next preference dropped, and what was dropped; None when nothing
        is left to relax."""
        for step in (
            _required_node_affinity_term,
            _preferred_pod_affinity,
            _preferred_pod_anti_affinity,
            _preferred_node_affinity,
            _topology_spread_schedule_anyway,
        ):
            found = step(pod)
            if found is not None:
                return found
        if self.tolerate_prefer_no_schedule:
            return _tolerate_prefer_no_schedule(pod)
        return None


def pod_requirements(pod: Pod) -> Requirements:
    """Karpenter's NewPodRequirements: the node selector, the heaviest preferred node affinity
    term and the first required node affinity term, all as requirements (expressions only)."""
    reqs = strict_pod_requirements(pod)
    preferred = preferred_node_affinity(pod)
    if preferred:
        try:
            heaviest = Requirements.from_node_selector_requirements(
                _expressions(preferred[0].get("preference"))
            )
        except RequirementError:
            return reqs  # a preference that cannot be read constrains nothing
        reqs.add(heaviest)
    return reqs


def strict_pod_requirements(pod: Pod) -> Requirements:
    """Karpenter's NewStrictPodRequirements: the node selector and the first required node
    affinity term (what topology counts domains by)."""
    reqs = Requirements.from_labels(pod.node_selector)
    terms = (pod.required_node_affinity or {}).get("nodeSelectorTerms") or []
    if terms:
        reqs.add(Requirements.from_node_selector_requirements(_expressions(terms[0])))
    return reqs


def preferred_node_affinity(pod: Pod) -> list[dict]:
    """The pod's preferred node affinity terms, heaviest first as Karpenter orders them (Go's
    ``sort.Slice`` by weight, once: later orderings find them sorted)."""
    terms = [t for t in _list(_node_affinity(pod).get(_PREFERRED)) if isinstance(t, dict)]
    if len(terms) > 1:
        slice_sort(terms, lambda a, b: _weight(a) > _weight(b))
    return terms


# --- the relaxations, in Karpenter's order -----------------------------------------------------


def _required_node_affinity_term(pod: Pod) -> tuple[Pod, Relaxation] | None:
    terms = (pod.required_node_affinity or {}).get("nodeSelectorTerms") or []
    if len(terms) <= 1:
        return None  # unlike preferences, the last required term stays
    required = {**pod.required_node_affinity, "nodeSelectorTerms": list(terms[1:])}
    raw = _with_node_affinity(pod, _REQUIRED, required)
    relaxed = dataclasses.replace(pod, required_node_affinity=required, raw=raw)
    return relaxed, Relaxation(REQUIRED_NODE_AFFINITY_TERM, terms[0])


def _preferred_pod_affinity(pod: Pod) -> tuple[Pod, Relaxation] | None:
    return _drop_heaviest(pod, "podAffinity", PREFERRED_POD_AFFINITY)


def _preferred_pod_anti_affinity(pod: Pod) -> tuple[Pod, Relaxation] | None:
    return _drop_heaviest(pod, "podAntiAffinity", PREFERRED_POD_ANTI_AFFINITY)


def _preferred_node_affinity(pod: Pod) -> tuple[Pod, Relaxation] | None:
    terms = preferred_node_affinity(pod)
    if not terms:
        return None
    raw = _with_node_affinity(pod, _PREFERRED, terms[1:])
    typed = tuple(
        PreferredSchedulingTerm(weight=_weight(t), preference=t.get("preference") or {})
        for t in terms[1:]
    )
    relaxed = dataclasses.replace(pod, raw=raw, preferred_node_affinity=typed)
    return relaxed, Relaxation(PREFERRED_NODE_AFFINITY, terms[0])


def _topology_spread_schedule_anyway(pod: Pod) -> tuple[Pod, Relaxation] | None:
    spec = _spec(pod)
    constraints = list(_list(spec.get("topologySpreadConstraints")))
    for i, tsc in enumerate(constraints):
        if isinstance(tsc, dict) and tsc.get("whenUnsatisfiable") == "ScheduleAnyway":
            # Karpenter moves the last constraint into its place.
            constraints[i] = constraints[-1]
            constraints.pop()
            raw = _with_spec(pod, {**spec, "topologySpreadConstraints": constraints})
            relaxed = dataclasses.replace(
                pod, raw=raw, topology_spread_constraints=_swap_remove_anyway(pod)
            )
            return relaxed, Relaxation(TOPOLOGY_SPREAD, tsc)
    return None


def _tolerate_prefer_no_schedule(pod: Pod) -> tuple[Pod, Relaxation] | None:
    for t in pod.tolerations:
        if not t.key and t.operator == "Exists" and t.effect == "PreferNoSchedule" and not t.value:
            return None
    added = Toleration(key=None, operator="Exists", effect="PreferNoSchedule")
    spec = _spec(pod)
    raw = _with_spec(
        pod,
        {**spec, "tolerations": [*_list(spec.get("tolerations")), PREFER_NO_SCHEDULE_TOLERATION]},
    )
    relaxed = dataclasses.replace(pod, tolerations=[*pod.tolerations, added], raw=raw)
    return relaxed, Relaxation(PREFER_NO_SCHEDULE, dict(PREFER_NO_SCHEDULE_TOLERATION))


def _drop_heaviest(pod: Pod, kind: str, relaxation: str) -> tuple[Pod, Relaxation] | None:
    affinity = _affinity(pod)
    section = affinity.get(kind)
    terms = [t for t in _list(section.get(_PREFERRED))] if isinstance(section, dict) else []
    if not terms:
        return None
    terms.sort(key=lambda t: -_weight(t))  # Go's SliceStable by weight, descending
    changed = {**affinity, kind: {**section, _PREFERRED: terms[1:]}}
    raw = _with_spec(pod, {**_spec(pod), "affinity": changed})
    # The typed terms (what topology reads) lose the same term, in the same order.
    affinity_kind = kind == "podAffinity"
    typed: PodAffinity | None = pod.pod_affinity if affinity_kind else pod.pod_anti_affinity
    if typed is not None and typed.preferred:
        ordered = sorted(typed.preferred, key=lambda t: -t.weight)
        typed = dataclasses.replace(typed, preferred=tuple(ordered[1:]))
    if affinity_kind:
        relaxed = dataclasses.replace(pod, raw=raw, pod_affinity=typed)
    else:
        relaxed = dataclasses.replace(pod, raw=raw, pod_anti_affinity=typed)
    return relaxed, Relaxation(relaxation, terms[0])


def _swap_remove_anyway(pod: Pod) -> tuple[TopologySpreadConstraint, ...]:
    """The typed constraints with the first ScheduleAnyway one replaced by the last, as the
    document's list (Karpenter's removeTopologySpreadScheduleAnyway)."""
    constraints = list(pod.topology_spread_constraints)
    for i, tsc in enumerate(constraints):
        if tsc.when_unsatisfiable == "ScheduleAnyway":
            constraints[i] = constraints[-1]
            constraints.pop()
            break
    return tuple(constraints)


# --- reading and copying the pod document ----------------------------------------------------


def _spec(pod: Pod) -> dict:
    spec = pod.raw.get("spec") if isinstance(pod.raw, dict) else None
    return spec if isinstance(spec, dict) else {}


def _affinity(pod: Pod) -> dict:
    affinity = _spec(pod).get("affinity")
    return affinity if isinstance(affinity, dict) else {}


def _node_affinity(pod: Pod) -> dict:
    node_affinity = _affinity(pod).get("nodeAffinity")
    return node_affinity if isinstance(node_affinity, dict) else {}


def _with_spec(pod: Pod, spec: dict) -> dict:
    return {**pod.raw, "spec": spec}


def _with_node_affinity(pod: Pod, key: str, value) -> dict:
    affinity = _affinity(pod)
    node_affinity = {**_node_affinity(pod), key: value}
    return _with_spec(pod, {**_spec(pod), "affinity": {**affinity, "nodeAffinity": node_affinity}})


def _list(value) -> list:
    return value if isinstance(value, list) else []


def _weight(term) -> int:
    weight = term.get("weight") if isinstance(term, dict) else None
    return weight if isinstance(weight, int) and not isinstance(weight, bool) else 0


def _expressions(term) -> list[dict]:
    if not isinstance(term, dict):
        return []
    return [
        {k: v for k, v in e.items() if k in ("key", "operator", "values")}
        for e in _list(term.get("matchExpressions"))
        if isinstance(e, dict)
    ]
