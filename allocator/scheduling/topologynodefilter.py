"""Which nodes a topology spread constraint counts (Karpenter's ``topologynodefilter.go``).

A spread constraint counts the pods on the nodes its pod could use: with
``nodeAffinityPolicy: Honor`` (the default) those its node selector and required node affinity
terms allow, with ``nodeTaintsPolicy: Honor`` (default Ignore) those whose taints it tolerates.
Pod affinity and anti-affinity count every node: their filter is the empty one, whose policies
are neither Honor nor Ignore (as Karpenter's zero value), so it matches every node but still
makes the domain list honour taints (``TopologyDomainGroup.domains``).
"""

from __future__ import annotations

from collections.abc import Iterable

from allocator.features.taints import toleration_matches
from allocator.model import Pod, Taint, Toleration
from allocator.records import record
from allocator.requirements import Requirements

HONOR = "Honor"
IGNORE = "Ignore"
_STRICT: frozenset[str] = frozenset()  # no label may be undefined (Karpenter passes no options)


def tolerates_all(taints: Iterable[Taint], tolerations: Iterable[Toleration]) -> bool:
    """Karpenter's ``Taints.Tolerates``: every taint, whatever its effect (PreferNoSchedule
    too), is tolerated by some toleration."""
    tolerations = tuple(tolerations)
    return all(any(toleration_matches(t, taint) for t in tolerations) for taint in taints)


def _toleration_identity(t: Toleration) -> tuple:
    return (t.key, t.operator, t.value, t.effect, t.toleration_seconds)


@record(frozen=True)
class TopologyNodeFilter:
    """The nodes a topology group counts domains on (its node affinity and taint policies)."""

    # One per ORed required node affinity term (each with the node selector); empty: any node.
    requirements: tuple[Requirements, ...] = ()
    taint_policy: str = ""  # Honor | Ignore; "" for pod (anti-)affinity
    affinity_policy: str = ""  # Honor | Ignore; "" for pod (anti-)affinity
    tolerations: tuple[Toleration, ...] = ()

    def matches(self, taints: Iterable[Taint], requirements: Requirements) -> bool:
        """Whether a node with these taints and requirements takes part in the topology."""
        if self.affinity_policy == HONOR and not self._matches_requirements(requirements):
            return False
        return not (self.taint_policy == HONOR and not tolerates_all(taints, self.tolerations))

    def _matches_requirements(self, requirements: Requirements) -> bool:
        if not self.requirements:
            return True
        return any(requirements.compatible(r, _STRICT) is None for r in self.requirements)

    def identity(self) -> tuple:
        """What Karpenter's topology group hash sees of the filter: of each requirement only its
        key and minValues (its values are unexported, so pods whose node selectors differ only
        in values share one topology group), the policies, the tolerations (as a set)."""
        terms = frozenset(
            frozenset((r.key, r.min_values) for r in reqs) for reqs in self.requirements
        )
        tolerations = frozenset(_toleration_identity(t) for t in self.tolerations)
        return (terms, self.taint_policy, self.affinity_policy, tolerations)


def make_node_filter(pod: Pod, taint_policy: str, affinity_policy: str) -> TopologyNodeFilter:
    """Karpenter's ``MakeTopologyNodeFilter``: the node selector, ANDed into each required
    node affinity term (their matchExpressions; matchFields do not count)."""
    selector = Requirements.from_labels(pod.node_selector)
    affinity = pod.required_node_affinity
    if affinity is None:
        terms: tuple[Requirements, ...] = (selector,)
    else:
        out = []
        for term in affinity.get("nodeSelectorTerms") or ():
            reqs = selector.copy()
            reqs.add(Requirements.from_node_selector_requirements(term.get("matchExpressions")))
            out.append(reqs)
        terms = tuple(out)
    return TopologyNodeFilter(terms, taint_policy, affinity_policy, tuple(pod.tolerations))
