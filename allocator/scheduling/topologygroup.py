"""One topology: the count of selected pods per domain of a key (Karpenter's
``topologygroup.go``), and the domains a pod may go to under it (``get``).

A group is shared by every pod whose constraint has the same identity (a Deployment's 100
replicas with self anti-affinity are one group with 100 owners). Counts only grow: ``record``
when a pod is placed (or found running), ``register`` when a domain becomes possible.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from types import MappingProxyType

from allocator.model import LabelSelector, Pod, Taint
from allocator.records import record
from allocator.requirements import LABEL_HOSTNAME, NORMALIZED_LABELS, Requirement, Requirements
from allocator.scheduling.topologynodefilter import TopologyNodeFilter

MAX_INT32 = 2**31 - 1  # maxSkew of pod affinity terms, and the "no count yet" minimum
# Pods remembered per domain to name in a refusal (the count says how many there are).
_MEMBERS_PER_DOMAIN = 5
_CAUSE_DOMAINS = 10
_COUNTS_SHOWN = 25  # Karpenter's pretty.Map limit in a refusal


class TopologyType(enum.Enum):
    SPREAD = "topology spread"
    POD_AFFINITY = "pod affinity"
    POD_ANTI_AFFINITY = "pod anti-affinity"

    def __str__(self) -> str:
        return self.value


@record(frozen=True)
class DomainCause:
    """A domain that refused a pod: its count and (some of) the pods counted there."""

    domain: str
    count: int
    pods: tuple[str, ...]


def selector_identity(selector: LabelSelector | None) -> tuple | None:
    """What Karpenter's ``hashSelector`` sees: match labels and expressions as sets (so an
    expression added twice, by kube-apiserver and by Karpenter for matchLabelKeys, is one)."""
    if selector is None:
        return None
    return (
        frozenset(selector.match_labels),
        frozenset((e.key, e.operator, frozenset(e.values)) for e in selector.match_expressions),
    )


class TopologyGroup:
    __slots__ = (
        "type",
        "key",
        "_requirement_key",
        "namespaces",
        "selector",
        "max_skew",
        "min_domains",
        "node_filter",
        "identity",
        "owners",
        "domains",
        "empty_domains",
        "_members",
        "_sorted",
        "_counts_view",
        "_counts_text",
        "_min_all",
    )

    def __init__(
        self,
        type_: TopologyType,
        key: str,
        namespaces: frozenset[str],
        selector: LabelSelector | None,
        max_skew: int,
        min_domains: int | None,
        node_filter: TopologyNodeFilter,
        identity: tuple,
        domains: Iterable[str] = (),
    ) -> None:
        self.type = type_
        self.key = key
        # The key of the requirements it answers with (a deprecated key read as its stable one,
        # as Karpenter's NewRequirement does).
        self._requirement_key = NORMALIZED_LABELS.get(key, key)
        self.namespaces = namespaces
        # None selects no pod (a term without labelSelector is a no-op).
        self.selector = selector
        self.max_skew = max_skew
        self.min_domains = min_domains
        self.node_filter = node_filter
        self.identity = identity
        self.owners: set[str] = set()  # keys of the pods this group constrains
        self.domains: dict[str, int] = {}
        self.empty_domains: set[str] = set()  # domains known to hold no selected pod
        self._members: dict[str, list[str]] = {}
        self._sorted: list[str] | None = None
        self._counts_view: Mapping[str, int] | None = None
        self._counts_text: str | None = None
        # (minimum count, domains) over all domains: a pod that may use any domain reads it
        # on every target (forgotten with the counts).
        self._min_all: tuple[int, int] | None = None
        for domain in domains:
            self.domains[domain] = 0
            self.empty_domains.add(domain)

    def __repr__(self) -> str:
        return f"TopologyGroup({self.type}, key={self.key}, domains={self.domains})"

    # --- counting ----------------------------------------------------------------------------

    def selects(self, pod: Pod) -> bool:
        return (
            pod.namespace in self.namespaces
            and self.selector is not None
            and self.selector.matches(pod.labels)
        )

    def counts(self, pod: Pod, taints: Iterable[Taint], requirements: Requirements) -> bool:
        """Whether the pod would count here, placed on a node with these taints and
        requirements."""
        return self.selects(pod) and self.node_filter.matches(taints, requirements)

    def record(self, domains: Iterable[str], pod: str | None = None) -> None:
        for domain in domains:
            count = self.domains.get(domain)
            if count is None:
                self._sorted = None
                count = 0
            self.domains[domain] = count + 1
            self.empty_domains.discard(domain)
            self._counts_view = None
            self._counts_text = None
            self._min_all = None
            if pod is not None:
                members = self._members.setdefault(domain, [])
                if len(members) < _MEMBERS_PER_DOMAIN:
                    members.append(pod)

    def register(self, domain: str) -> None:
        if domain not in self.domains:
            self.domains[domain] = 0
            self.empty_domains.add(domain)
            self._sorted = None
            self._counts_view = None
            self._counts_text = None
            self._min_all = None

    def unregister(self, domain: str) -> None:
        if domain in self.domains:
            del self.domains[domain]
            self._sorted = None
            self._counts_view = None
            self._counts_text = None
            self._min_all = None
        self.empty_domains.discard(domain)

    def sorted_domains(self) -> list[str]:
        if self._sorted is None:
            self._sorted = sorted(self.domains)
        return self._sorted

    def counts_view(self) -> Mapping[str, int]:
        """The counts as they are now, unchanged by later records (shared until one)."""
        if self._counts_view is None:
            self._counts_view = MappingProxyType(dict(self.domains))
        return self._counts_view

    def counts_text(self) -> str:
        """The counts as Karpenter's refusal prints them (pretty.Map: the first 25 domains by
        name, then how many others), kept until the counts change: every target refused by
        this group in between words them alike."""
        if self._counts_text is None:
            keys = sorted(self.domains)
            text = ", ".join(f"{k}: {self.domains[k]}" for k in keys[:_COUNTS_SHOWN])
            if len(keys) > _COUNTS_SHOWN:
                text += f" and {len(keys) - _COUNTS_SHOWN} other(s)"
            self._counts_text = text
        return self._counts_text

    # --- choosing domains --------------------------------------------------------------------

    def get(self, pod: Pod, pod_domains: Requirement, node_domains: Requirement) -> Requirement:
        """The domains of this topology the pod may go to, within ``node_domains`` (the
        target's) and ``pod_domains`` (the pod's own requirements); DoesNotExist when none."""
        if self.type is TopologyType.SPREAD:
            return self._next_spread(pod, pod_domains, node_domains)
        if self.type is TopologyType.POD_AFFINITY:
            return self._next_affinity(pod, pod_domains, node_domains)
        return self._next_anti_affinity(pod_domains, node_domains)

    def _in(self, domains: Iterable[str]) -> Requirement:
        return Requirement(self._requirement_key, False, frozenset(domains))

    def _none(self) -> Requirement:
        return Requirement(self._requirement_key, False)

    def _single_hostname(self, node_domains: Requirement) -> str | None:
        # A new NodeClaim's hostname is not registered before it takes its first pod, so its
        # one value is looked up directly (a missing domain counts 0).
        if self.key != LABEL_HOSTNAME:
            return None
        values = node_domains.values()
        if len(values) != 1:
            return None
        (host,) = values
        return host

    def _candidates(self, node_domains: Requirement) -> list[str]:
        """Known domains within the node's, by name (the order ties are broken in)."""
        if node_domains.operator() == "In":
            return sorted(d for d in node_domains.values() if d in self.domains)
        return [d for d in self.sorted_domains() if node_domains.has(d)]

    def _next_spread(
        self, pod: Pod, pod_domains: Requirement, node_domains: Requirement
    ) -> Requirement:
        minimum = self._domain_min_count(pod_domains)
        self_selecting = 1 if self.selects(pod) else 0
        host = self._single_hostname(node_domains)
        if host is not None:
            # Karpenter can always open a new hostname domain: the global minimum is 0.
            if self.domains.get(host, 0) + self_selecting <= self.max_skew:
                return self._in([host])
            return self._none()
        best = ""
        best_count = MAX_INT32
        for domain in self._candidates(node_domains):
            count = self.domains[domain] + self_selecting
            if count - minimum <= self.max_skew and count < best_count:
                best, best_count = domain, count
        if best == "":  # as Karpenter: an empty domain name is no choice
            return self._none()
        return self._in([best])

    def _domain_min_count(self, pod_domains: Requirement) -> int:
        if self.key == LABEL_HOSTNAME:
            return 0  # a new hostname domain can always be created
        unconstrained = (
            pod_domains.operator() == "Exists"
            and pod_domains.greater_than is None
            and pod_domains.less_than is None
        )
        if unconstrained and self._min_all is not None:
            minimum, supported = self._min_all
        else:
            minimum = MAX_INT32
            supported = 0
            for domain, count in self.domains.items():
                if pod_domains.has(domain):
                    supported += 1
                    if count < minimum:
                        minimum = count
            if unconstrained:
                self._min_all = (minimum, supported)
        if self.min_domains is not None and supported < self.min_domains:
            minimum = 0
        return minimum

    def _bootstraps(self, pod: Pod, pod_domains: Requirement) -> bool:
        """A self-selecting pod may start the group where no selected pod is yet (or none is
        in a domain it can use)."""
        if not self.selects(pod):
            return False
        if len(self.domains) == len(self.empty_domains):
            return True
        return not any(
            count > 0 and pod_domains.has(domain) for domain, count in self.domains.items()
        )

    def _next_affinity(
        self, pod: Pod, pod_domains: Requirement, node_domains: Requirement
    ) -> Requirement:
        host = self._single_hostname(node_domains)
        if host is not None:
            if not pod_domains.has(host):
                return self._none()
            if self.domains.get(host, 0) > 0 or self._bootstraps(pod, pod_domains):
                return self._in([host])
            return self._none()
        options: set[str] = set()
        if node_domains.operator() == "In":
            for domain in node_domains.values():
                if pod_domains.has(domain) and self.domains.get(domain, 0) > 0:
                    options.add(domain)
        else:
            for domain, count in self.domains.items():
                if count > 0 and pod_domains.has(domain) and node_domains.has(domain):
                    options.add(domain)
        if options:
            return self._in(options)
        if self._bootstraps(pod, pod_domains):
            # The first domain (by name) the pod and the node share, and the first the pod
            # can use at all; the node's requirements then keep what it can take.
            ordered = self.sorted_domains()
            for domain in ordered:
                if pod_domains.has(domain) and node_domains.has(domain):
                    options.add(domain)
                    break
            for domain in ordered:
                if pod_domains.has(domain):
                    options.add(domain)
                    break
        return self._in(options) if options else self._none()

    def _next_anti_affinity(
        self, pod_domains: Requirement, node_domains: Requirement
    ) -> Requirement:
        host = self._single_hostname(node_domains)
        if host is not None:
            if self.domains.get(host, 0) == 0:
                return self._in([host])
            return self._none()
        empty = self.empty_domains
        if node_domains.operator() == "In" and len(node_domains) < len(empty):
            options = {d for d in node_domains.values() if d in empty and pod_domains.has(d)}
        else:
            options = {d for d in empty if node_domains.has(d) and pod_domains.has(d)}
        return self._in(options) if options else self._none()

    # --- explaining a refusal ----------------------------------------------------------------

    def causes(self, pod_domains: Requirement, node_domains: Requirement) -> tuple:
        """The domains holding selected pods that kept a pod out (anti-affinity, spread: those
        it could have used; affinity: those it would have had to go to), by name, with some
        of the pods counted there."""
        if node_domains.operator() == "In" and self.type is not TopologyType.POD_AFFINITY:
            domains = sorted(node_domains.values())
        else:
            domains = self.sorted_domains()
        out = []
        for domain in domains:
            count = self.domains.get(domain, 0)
            if count == 0:
                continue
            if self.type is not TopologyType.POD_AFFINITY and not (
                pod_domains.has(domain) and node_domains.has(domain)
            ):
                continue
            out.append(DomainCause(domain, count, tuple(self._members.get(domain, ()))))
            if len(out) == _CAUSE_DOMAINS:
                break
        return tuple(out)
