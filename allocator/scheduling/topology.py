"""Karpenter's topology (``scheduling/topology.go``): topology spread constraints, pod affinity
and anti-affinity, and the inverse rule (a running or placed pod's required anti-affinity keeps
the pods it selects away), decided over the snapshot instead of a kube client.

``Topology.build`` is called once per run with the pods to schedule (which never count, they
are being placed), the snapshot's pods and nodes, the existing nodes, the NodePools' domain
universe and the namespaces. A target asks ``add_requirements`` while deciding whether it can
take a pod (no state changes: a suggestion trial may ask too); the pod's placement is then
committed with ``record``; ``register`` makes a hostname known when a NodeClaim takes its
first pod; ``update`` re-reads a pod's constraints after its preferences were relaxed.

Counting is incremental: a group counts the snapshot's pods once, when the first pod needing
it is read, then only grows by ``record``. When no pod uses topology and no running pod has a
required anti-affinity there is no group, and every call returns at once.

Where Karpenter's Go iterates a map and the outcome depends on it, the choice here is fixed:

- spread: of the domains within maxSkew, the one with the fewest pods, ties to the domain name
  sorted first (Go: the first met in map order, a random one);
- affinity with no matching pod yet (a self-selecting pod starting the group): the first
  domain by name that both the pod and the target allow, and the first the pod allows;
- the order in which a pod's topologies are checked, which decides the one a refusal names:
  its spread constraints in spec order, then pod affinity terms (required, then preferred),
  then anti-affinity terms (required, then preferred), then other pods' anti-affinity in the
  order those pods were read (running pods by namespace/name, then the pods to schedule in
  the order given).

Also as Karpenter does, on purpose: a group is identified by what its hash sees (of a node
filter's requirements only their keys, so pods whose node selectors differ only in values
share a group; not ``minDomains``); a spread constraint without ``labelSelector`` counts every
running pod of the namespace but no pod placed in the run; pod affinity terms get
``matchLabelKeys`` / ``mismatchLabelKeys`` merged into their selector as kube-apiserver does
when it admits the pod (repeating an existing expression changes nothing).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping, Sequence

from allocator.model import (
    LabelSelector,
    LabelSelectorRequirement,
    Namespace,
    Node,
    Pod,
    PodAffinityTerm,
    Taint,
    TopologySpreadConstraint,
)
from allocator.records import record
from allocator.requirements import LABEL_HOSTNAME, Requirement, Requirements
from allocator.scheduling.topologydomaingroup import TopologyDomainGroup
from allocator.scheduling.topologygroup import (
    MAX_INT32,
    DomainCause,
    TopologyGroup,
    TopologyType,
    selector_identity,
)
from allocator.scheduling.topologynodefilter import (
    HONOR,
    IGNORE,
    TopologyNodeFilter,
    make_node_filter,
)

# kube-apiserver labels every namespace with its own name.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
_ANY_NODE = TopologyNodeFilter()


class PreferencePolicy(enum.Enum):
    """Karpenter's ``--preference-policy``: Respect treats preferences as required (relaxed
    later); Ignore drops them."""

    RESPECT = "Respect"
    IGNORE = "Ignore"


def ignored_for_topology(pod: Pod) -> bool:
    """Karpenter's ``IgnoredForTopology``: not bound, terminal, or terminating."""
    return not pod.node_name or pod.phase in ("Succeeded", "Failed") or pod.deleting


def uses_topology(pod: Pod) -> bool:
    """Whether the pod has a spread constraint or a pod affinity or anti-affinity term."""
    return bool(pod.topology_spread_constraints or pod.pod_affinity or pod.pod_anti_affinity)


def topology_needed(pods: Iterable[Pod], cluster_pods: Iterable[Pod]) -> bool:
    """Whether a run needs a ``Topology`` at all: a pod to schedule uses one, or a pod of the
    snapshot has a required anti-affinity (which may keep others away). When not, the run
    builds none (the common case: nothing to count)."""
    return any(uses_topology(p) for p in pods) or any(
        has_required_anti_affinity(p) for p in cluster_pods
    )


def has_required_anti_affinity(pod: Pod) -> bool:
    return pod.pod_anti_affinity is not None and bool(pod.pod_anti_affinity.required)


def _has_anti_affinity(pod: Pod) -> bool:
    anti = pod.pod_anti_affinity
    return anti is not None and bool(anti.required or anti.preferred)


class TopologyError(Exception):
    """No domain of one topology is left for the pod on this target (Karpenter's
    ``topologyError``), with what decided it: the group's type and key, its counts when it
    refused, the pod's and the target's domains, and the domains (with some of their pods)
    that kept the pod out. ``inverse``: the anti-affinity is another pod's."""

    def __init__(
        self,
        type_: TopologyType,
        key: str,
        counts: Mapping[str, int],
        counts_text: str,
        pod_domains: Requirement,
        node_domains: Requirement,
        causes: tuple[DomainCause, ...],
        inverse: bool,
    ) -> None:
        super().__init__(type_, key)
        self.type = type_
        self.key = key
        self.counts = counts
        self.counts_text = counts_text  # as Karpenter prints them
        self.pod_domains = pod_domains
        self.node_domains = node_domains
        self.causes = causes
        self.inverse = inverse

    def __str__(self) -> str:
        # Karpenter's words, its unclosed parenthesis included.
        return (
            f"unsatisfiable topology constraint for {self.type}, key={self.key} "
            f"(counts = {self.counts_text}, podDomains = {self.pod_domains}, "
            f"nodeDomains = {self.node_domains}"
        )

    def explained(self) -> str:
        """Karpenter's words, then the domains and pods that caused the refusal (a refusal's
        reason: bounded, a few domains with a few pods each)."""
        if not self.causes:
            return str(self)
        held = "; ".join(
            f"{self.key}={c.domain}: {c.count}" + (f" ({', '.join(c.pods)})" if c.pods else "")
            for c in self.causes
        )
        whose = "anti-affinity of the pods in" if self.inverse else "pods it selects in"
        return f"{self} [{whose} {held}]"


@record(frozen=True)
class _GroupSpec:
    """A topology a pod's constraint asks for, before it is looked up or created."""

    type: TopologyType
    key: str
    namespaces: frozenset[str]
    selector: LabelSelector | None
    max_skew: int
    min_domains: int | None
    node_filter: TopologyNodeFilter

    def identity(self) -> tuple:
        return (
            self.type,
            self.key,
            self.namespaces,
            self.max_skew,
            self.node_filter.identity(),
            selector_identity(self.selector),
        )


def _with_label_keys(
    selector: LabelSelector, labels: Mapping[str, str], keys: Iterable[str], operator: str
) -> LabelSelector:
    added = tuple(
        LabelSelectorRequirement(key, operator, (labels[key],)) for key in keys if key in labels
    )
    if not added:
        return selector
    return LabelSelector(selector.match_labels, selector.match_expressions + added)


def _affinity_selector(pod: Pod, term: PodAffinityTerm) -> LabelSelector | None:
    selector = term.label_selector
    if selector is None:
        return None  # kube-apiserver leaves a term that selects nothing alone
    selector = _with_label_keys(selector, pod.labels, term.match_label_keys, "In")
    return _with_label_keys(selector, pod.labels, term.mismatch_label_keys, "NotIn")


def _spread_selector(pod: Pod, tsc: TopologySpreadConstraint) -> LabelSelector | None:
    if tsc.label_selector is None:
        return None  # the loader refuses matchLabelKeys without a labelSelector
    return _with_label_keys(tsc.label_selector, pod.labels, tsc.match_label_keys, "In")


class Topology:
    """The topologies of one run (see the module docstring)."""

    def __init__(
        self,
        *,
        cluster_pods: Sequence[Pod],
        nodes: Mapping[str, Node],
        existing_nodes: Sequence[Node],
        domain_groups: Mapping[str, TopologyDomainGroup],
        namespaces: Mapping[str, Mapping[str, str]],
        excluded: frozenset[str],
        policy: PreferencePolicy,
    ) -> None:
        self.policy = policy
        self._cluster_pods = cluster_pods
        self._nodes = nodes
        self._existing_nodes = existing_nodes
        self._domain_groups = domain_groups
        self._namespaces = namespaces  # name -> labels
        self._excluded = excluded
        self._groups: dict[tuple, TopologyGroup] = {}
        self._inverse: dict[tuple, TopologyGroup] = {}
        # Pod key -> the other pods' anti-affinities that select it (their node filter is the
        # empty one: whether one counts a pod depends on the pod alone). Forgotten whenever an
        # anti-affinity group is added.
        self._selected_by: dict[str, list[TopologyGroup]] = {}
        self._by_key: dict[str, list[TopologyGroup]] = {}
        self._owned: dict[str, list[TopologyGroup]] = {}  # pod key -> groups it owns
        self._countable: dict[str, list[tuple[Pod, Node]]] | None = None
        self._node_requirements: dict[str, Requirements] = {}

    @classmethod
    def build(
        cls,
        *,
        pods: Sequence[Pod],
        cluster_pods: Sequence[Pod],
        nodes: Mapping[str, Node],
        existing_nodes: Sequence[Node],
        domain_groups: Mapping[str, TopologyDomainGroup],
        namespaces: Mapping[str, Namespace],
        policy: PreferencePolicy = PreferencePolicy.RESPECT,
    ) -> Topology:
        """The run's topology.

        ``pods``: the pods to schedule (they do not count where they run now); ``cluster_pods``:
        every pod of the snapshot; ``nodes``: every Node of the snapshot (a pod on a node that
        is not there does not count); ``existing_nodes``: the Nodes scheduling may place on,
        whose label values are domains even with no pod; ``domain_groups``: what NodePools can
        launch (``build_domain_groups``); ``namespaces``: the snapshot's Namespace objects (the
        namespaces of its pods exist too, with no labels of their own)."""
        labels: dict[str, Mapping[str, str]] = {}
        for pod in cluster_pods:
            labels.setdefault(pod.namespace, {NAMESPACE_NAME_LABEL: pod.namespace})
        for pod in pods:
            labels.setdefault(pod.namespace, {NAMESPACE_NAME_LABEL: pod.namespace})
        for name, ns in namespaces.items():
            labels[name] = {NAMESPACE_NAME_LABEL: name, **ns.labels}
        topology = cls(
            cluster_pods=cluster_pods,
            nodes=nodes,
            existing_nodes=existing_nodes,
            domain_groups=domain_groups,
            namespaces=labels,
            excluded=frozenset(p.key for p in pods),
            policy=policy,
        )
        topology._update_inverse_affinities()
        for pod in pods:
            topology.update(pod)
        return topology

    @property
    def empty(self) -> bool:
        """No topology at all: ``add_requirements`` adds nothing, ``record`` does nothing."""
        return not self._groups and not self._inverse

    # --- a pod's topologies ------------------------------------------------------------------

    def update(self, pod: Pod) -> None:
        """(Re)read the pod's constraints: it stops owning the groups it did and owns those
        its spec now asks for (after a relaxation, fewer)."""
        for group in self._owned.pop(pod.key, ()):
            group.owners.discard(pod.key)
        if (
            has_required_anti_affinity(pod)
            if self.policy is PreferencePolicy.IGNORE
            else _has_anti_affinity(pod)
        ):
            self._update_inverse_anti_affinity(pod, None)
        owned: list[TopologyGroup] = []
        for spec in self._specs(pod):
            identity = spec.identity()
            group = self._groups.get(identity)
            if group is None:
                group = self._new_group(spec, identity, pod)
                self._count_domains(group)
                self._groups[identity] = group
                self._by_key.setdefault(group.key, []).append(group)
            group.owners.add(pod.key)
            if group not in owned:
                owned.append(group)
        if owned:
            self._owned[pod.key] = owned

    def _specs(self, pod: Pod) -> Iterator[_GroupSpec]:
        respect = self.policy is PreferencePolicy.RESPECT
        for tsc in pod.topology_spread_constraints:
            if not respect and tsc.when_unsatisfiable != "DoNotSchedule":
                continue
            yield _GroupSpec(
                TopologyType.SPREAD,
                tsc.topology_key,
                frozenset((pod.namespace,)),
                _spread_selector(pod, tsc),
                tsc.max_skew,
                tsc.min_domains,
                make_node_filter(
                    pod, tsc.node_taints_policy or IGNORE, tsc.node_affinity_policy or HONOR
                ),
            )
        for type_, affinity in (
            (TopologyType.POD_AFFINITY, pod.pod_affinity),
            (TopologyType.POD_ANTI_AFFINITY, pod.pod_anti_affinity),
        ):
            if affinity is None:
                continue
            terms = list(affinity.required)
            if respect:
                terms.extend(w.term for w in affinity.preferred)
            for term in terms:
                yield self._affinity_spec(type_, pod, term)

    def _affinity_spec(self, type_: TopologyType, pod: Pod, term: PodAffinityTerm) -> _GroupSpec:
        return _GroupSpec(
            type_,
            term.topology_key,
            self._namespace_list(pod.namespace, term),
            _affinity_selector(pod, term),
            MAX_INT32,
            None,
            _ANY_NODE,
        )

    def _namespace_list(self, namespace: str, term: PodAffinityTerm) -> frozenset[str]:
        """Karpenter's ``buildNamespaceList``: the pod's namespace, or the listed ones plus
        those the namespace selector picks."""
        if not term.namespaces and term.namespace_selector is None:
            return frozenset((namespace,))
        if term.namespace_selector is None:
            return frozenset(term.namespaces)
        selector = term.namespace_selector
        picked = {name for name, labels in self._namespaces.items() if selector.matches(labels)}
        return frozenset(picked.union(term.namespaces))

    def _new_group(self, spec: _GroupSpec, identity: tuple, pod: Pod) -> TopologyGroup:
        domain_group = self._domain_groups.get(spec.key)
        domains = (
            domain_group.domains(pod.tolerations, spec.node_filter.taint_policy)
            if domain_group is not None
            else ()
        )
        return TopologyGroup(
            spec.type,
            spec.key,
            spec.namespaces,
            spec.selector,
            spec.max_skew,
            spec.min_domains,
            spec.node_filter,
            identity,
            domains,
        )

    # --- counting the snapshot ---------------------------------------------------------------

    def _node_reqs(self, node: Node) -> Requirements:
        reqs = self._node_requirements.get(node.name)
        if reqs is None:
            reqs = self._node_requirements[node.name] = Requirements.from_labels(node.labels)
        return reqs

    def _countable_pods(self, namespace: str) -> list[tuple[Pod, Node]]:
        """The namespace's pods that count for topology, with their nodes (read once)."""
        if self._countable is None:
            index: dict[str, list[tuple[Pod, Node]]] = {}
            for pod in self._cluster_pods:
                if ignored_for_topology(pod) or pod.key in self._excluded:
                    continue
                node = self._nodes.get(pod.node_name or "")
                if node is None:
                    continue  # a pod left behind by a deleted node does not run
                index.setdefault(pod.namespace, []).append((pod, node))
            self._countable = index
        return self._countable.get(namespace, [])

    def _count_domains(self, group: TopologyGroup) -> None:
        """Karpenter's ``countDomains``: the existing nodes' domains, then the running pods."""
        node_filter = group.node_filter
        for node in self._existing_nodes:
            if not node_filter.matches(node.taints, self._node_reqs(node)):
                continue
            domain = node.labels.get(group.key)
            if domain is not None:
                group.register(domain)
        selector = group.selector
        matched: dict[str, bool] = {}
        for namespace in sorted(group.namespaces):
            for pod, node in self._countable_pods(namespace):
                # Listing pods with no selector lists them all (Karpenter's list options).
                if selector is not None and not selector.matches(pod.labels):
                    continue
                domain = node.labels.get(group.key)
                if domain is None and group.key == LABEL_HOSTNAME:
                    domain = node.name  # the kubelet's label may not be there yet
                if domain is None:
                    continue
                ok = matched.get(node.name)
                if ok is None:
                    ok = matched[node.name] = node_filter.matches(
                        node.taints, self._node_reqs(node)
                    )
                if ok:
                    group.record((domain,), pod.key)

    def _update_inverse_affinities(self) -> None:
        """Running pods with a required anti-affinity (Karpenter's
        ``cluster.ForPodsWithAntiAffinity``): bound to a node the snapshot has, not finished."""
        running = [
            pod
            for pod in self._cluster_pods
            if has_required_anti_affinity(pod)
            and pod.node_name
            and pod.phase not in ("Succeeded", "Failed")
            and pod.key not in self._excluded
            and pod.node_name in self._nodes
        ]
        running.sort(key=lambda p: (p.namespace, p.name))
        for pod in running:
            self._update_inverse_anti_affinity(pod, self._nodes[pod.node_name or ""].labels)

    def _update_inverse_anti_affinity(self, pod: Pod, labels: Mapping[str, str] | None) -> None:
        # Only required terms: Karpenter does not enforce other pods' preferences.
        anti = pod.pod_anti_affinity
        for term in anti.required if anti is not None else ():
            spec = self._affinity_spec(TopologyType.POD_ANTI_AFFINITY, pod, term)
            identity = spec.identity()
            group = self._inverse.get(identity)
            if group is None:
                group = self._inverse[identity] = self._new_group(spec, identity, pod)
                self._selected_by.clear()
                self._by_key.setdefault(group.key, []).append(group)
            if labels is not None and group.key in labels:
                group.record((labels[group.key],), pod.key)
            group.owners.add(pod.key)

    # --- deciding and committing -------------------------------------------------------------

    def _matching(self, pod: Pod) -> Iterator[tuple[TopologyGroup, bool]]:
        """The topologies that decide where the pod may go: its own, then other pods'
        anti-affinities that select it (``inverse`` True). (Karpenter asks each of the latter
        whether it counts the pod on this target; with the empty node filter of pod
        affinity terms that is whether it selects the pod.)"""
        for group in self._owned.get(pod.key, ()):
            yield group, False
        for group in self._inverse_selecting(pod):
            yield group, True

    def _inverse_selecting(self, pod: Pod) -> list[TopologyGroup]:
        found = self._selected_by.get(pod.key)
        if found is None:
            found = [g for g in self._inverse.values() if g.selects(pod)]
            self._selected_by[pod.key] = found
        return found

    def hostname_anti_affinity_counts(self, pod: Pod) -> list[Mapping[str, int]]:
        """The selected pods counted per hostname by every anti-affinity on hostnames that
        decides where the pod may go (its own, and other pods' selecting it), live: a
        target whose one hostname counts one is refused by it (``_next_anti_affinity``)."""
        return [
            group.domains
            for group, _ in self._matching(pod)
            if group.type is TopologyType.POD_ANTI_AFFINITY and group.key == LABEL_HOSTNAME
        ]

    def add_requirements(
        self,
        pod: Pod,
        taints: Sequence[Taint],
        pod_requirements: Requirements,
        node_requirements: Requirements,
        *,
        explain: bool = True,
    ) -> Requirements | None:
        """Karpenter's ``AddRequirements``: what the pod's topologies make of
        ``node_requirements`` (the target's, with the pod's added): for each key a topology
        decides, the node's requirement narrowed to the domains every topology of that key
        allows; None when no topology applies to the pod. (Karpenter returns the node's whole
        requirements with these added; the other keys are unchanged, so the caller's
        compatibility check and addition read the same with only these.) ``pod_requirements``
        are the pod's strict ones (node selector and required affinity: a preference does not
        narrow the domains a pod could use). Changes nothing; raises ``TopologyError``.

        ``taints`` are the target's, as Karpenter passes them (and compatibility options) for
        other pods' anti-affinities to filter nodes by; their filter is the empty one, which
        reads neither. ``explain`` False: the error comes without the domains that caused it
        (a refusal worded later, by asking again)."""
        if self.empty:
            return None
        added: Requirements | None = None
        for group, inverse in self._matching(pod):
            pod_domains = pod_requirements.get(group.key)
            node_domains = node_requirements.get(group.key)
            domains = group.get(pod, pod_domains, node_domains)
            if len(domains) == 0:
                raise TopologyError(
                    group.type,
                    group.key,
                    group.counts_view(),
                    group.counts_text(),
                    pod_domains,
                    node_domains,
                    group.causes(pod_domains, node_domains) if explain else (),
                    inverse,
                )
            if added is None:
                added = Requirements()
            if domains.key not in added and node_requirements.has(domains.key):
                added.add_requirement(node_requirements.get(domains.key))
            added.add_requirement(domains)
        return added

    def record(self, pod: Pod, taints: Sequence[Taint], requirements: Requirements) -> None:
        """Karpenter's ``Record``: the pod was placed on a target with these taints and (final)
        requirements. Anti-affinity blocks every domain the pod may still land in; spread and
        affinity count it only once its domain is one value."""
        if self.empty:
            return
        for group in self._groups.values():
            if not group.counts(pod, taints, requirements):
                continue
            domains = requirements.get(group.key)
            if group.type is TopologyType.POD_ANTI_AFFINITY:
                group.record(sorted(domains.values()), pod.key)
            elif len(domains) == 1:
                group.record(domains.values(), pod.key)
        for group in self._inverse.values():
            if pod.key in group.owners:
                group.record(sorted(requirements.get(group.key).values()), pod.key)

    def register(self, key: str, domain: str) -> None:
        """Make ``domain`` of ``key`` known to every topology of that key (a hostname)."""
        for group in self._by_key.get(key, ()):
            group.register(domain)

    def unregister(self, key: str, domain: str) -> None:
        for group in self._by_key.get(key, ()):
            group.unregister(domain)

    # --- reading -----------------------------------------------------------------------------

    def constrains(self, pod: Pod) -> bool:
        """Whether any topology decides where the pod may go (its own, or another pod's
        anti-affinity selecting it): then its answers depend on every placement of the run."""
        if pod.key in self._owned:
            return True
        return bool(self._inverse_selecting(pod))

    def groups(self) -> list[TopologyGroup]:
        """Every topology (the pods' own, then running pods' anti-affinities), for reports."""
        return [*self._groups.values(), *self._inverse.values()]

    def owned(self, pod: Pod) -> list[TopologyGroup]:
        return list(self._owned.get(pod.key, ()))
