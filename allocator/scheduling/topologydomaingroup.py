"""The universe of topology domains NodePools can launch into (Karpenter's
``topologydomaingroup.go`` and ``buildDomainGroups``).

For each label key, the values a NodeClaim of some NodePool could carry, each with the taint
sets of the NodePools offering it, so that a pod that must honour taints only sees the domains
of NodePools whose taints it tolerates.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from allocator.model import NodePool, Taint, Toleration
from allocator.requirements import Requirements
from allocator.scheduling.topologynodefilter import IGNORE, tolerates_all


class TopologyDomainGroup:
    """Domain -> the taint sets of the NodePools offering it."""

    __slots__ = ("_taints",)

    def __init__(self) -> None:
        self._taints: dict[str, list[tuple[Taint, ...]]] = {}

    def insert(self, domain: str, taints: Sequence[Taint] = ()) -> None:
        sets = self._taints.get(domain)
        # A domain offered without taints is open to every pod: no other set matters.
        if sets is None or not taints:
            self._taints[domain] = [tuple(taints)]
            return
        if not sets[0]:
            return
        sets.append(tuple(taints))

    def domains(self, tolerations: Sequence[Toleration], taint_policy: str) -> list[str]:
        """The domains a pod sees: all of them unless its taint policy is other than Ignore
        (Honor, or unset for pod affinity terms), then those offered by some NodePool whose
        taints the pod tolerates all of."""
        if taint_policy == IGNORE:
            return list(self._taints)
        return [
            domain
            for domain, sets in self._taints.items()
            if any(tolerates_all(taints, tolerations) for taints in sets)
        ]

    def __contains__(self, domain: object) -> bool:
        return domain in self._taints

    def __len__(self) -> int:
        return len(self._taints)


def build_domain_groups(
    pools: Iterable[tuple[NodePool, Sequence[Requirements]]],
) -> dict[str, TopologyDomainGroup]:
    """Karpenter's ``buildDomainGroups``, from each NodePool with the requirements of the
    instance types the cloud provider offers it.

    Per instance type, the NodePool's requirements and template labels intersected with the
    instance type's (a NodePool limited to two zones does not gain the type's third): every
    value of every key becomes a domain (for a NotIn requirement, as Karpenter reads it, its
    excluded values). Then the NodePool's own In requirements and labels, also without
    instance types."""
    groups: dict[str, TopologyDomainGroup] = {}
    for pool, instance_types in pools:
        base = Requirements.from_node_selector_requirements(pool.requirements)
        base.add(Requirements.from_labels(pool.labels))
        for it_requirements in instance_types:
            requirements = base.copy()
            requirements.add(it_requirements)
            for requirement in requirements:
                group = groups.setdefault(requirement.key, TopologyDomainGroup())
                for domain in sorted(requirement.values()):
                    group.insert(domain, pool.taints)
        for requirement in base:
            if requirement.operator() != "In":
                continue
            group = groups.setdefault(requirement.key, TopologyDomainGroup())
            for domain in sorted(requirement.values()):
                group.insert(domain, pool.taints)
    return groups
