"""Everything besides devices that decides whether a pod fits a target (docs/SIMULATION.md).

Resources are kept as integer milli-units (``Quantity.milli_value``) so that the hot loop
compares ints, not Fractions. Requirement checks use Karpenter's ``Requirements`` algebra;
messages follow Karpenter's wording so that users recognise them.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from dataclasses import field
from operator import attrgetter

from allocator.features.taints import toleration_matches
from allocator.model import InstanceType, NodePool, Offering, Pod, Taint, Toleration
from allocator.quantity import BINARY_SI, DECIMAL_SI, Quantity, canonical_milli
from allocator.records import record
from allocator.requirements import (
    WELL_KNOWN_LABELS,
    Requirements,
    requirements_from_node_selector,
)

ZONE = "topology.kubernetes.io/zone"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
NODEPOOL = "karpenter.sh/nodepool"
INITIALIZED = "karpenter.sh/initialized"
HOSTNAME = "kubernetes.io/hostname"

Resources = dict[str, int]  # resource name -> milli-units
# kubelet's default --max-pods, for catalogs and nodes that do not state a pod capacity.
DEFAULT_MAX_PODS = 110_000

_BINARY = ("memory", "ephemeral-storage", "hugepages-")
# Taints a node carries while it initializes (Karpenter's KnownEphemeralTaints, matched by key
# and effect, and every key with a KnownEphemeralTaintKeyPrefixes prefix): on a managed node
# not yet initialized Karpenter ignores them, as it ignores the NodePool's startup taints.
EPHEMERAL_TAINTS = frozenset(
    {
        ("node.kubernetes.io/not-ready", "NoSchedule"),
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoSchedule"),
        ("node.cloudprovider.kubernetes.io/uninitialized", "NoSchedule"),
        ("karpenter.sh/unregistered", "NoExecute"),
    }
)
EPHEMERAL_TAINT_KEY_PREFIXES = ("readiness.k8s.io/",)  # the Node Readiness Controller's


# --- resources -------------------------------------------------------------------------------


def to_milli(quantities: dict[str, Quantity]) -> Resources:
    return {name: q.milli_value() for name, q in quantities.items()}


def pod_requests(pod: Pod) -> Resources:
    """The pod's requests plus one ``pods`` slot, as Karpenter's RequestsForPods counts."""
    requests = to_milli(pod.requests)
    requests["pods"] = requests.get("pods", 0) + 1000
    return requests


def add_into(total: Resources, more: Resources) -> None:
    for name, value in more.items():
        total[name] = total.get(name, 0) + value


def merged(*parts: Resources) -> Resources:
    total: Resources = {}
    for part in parts:
        add_into(total, part)
    return total


def exceeded(requests: Resources, available: Resources) -> list[str]:
    """Names of requested resources (non-zero) that ``available`` cannot cover."""
    return [
        name for name, value in requests.items() if value > 0 and value > available.get(name, 0)
    ]


def fits(requests: Resources, available: Resources) -> bool:
    for name, value in requests.items():
        if value > 0 and value > available.get(name, 0):
            return False
    return True


def format_quantity(name: str, milli: int) -> str:
    binary = name.startswith(_BINARY)
    return canonical_milli(milli, BINARY_SI if binary else DECIMAL_SI)


def format_resources(resources: Resources, quantities: dict | None = None) -> str:
    """Karpenter's resources.String: a JSON object of canonical quantities, keys sorted.
    ``quantities``: (name, milli-units) -> words already worked out (a run's, see
    RefusalCache.quantity_words)."""
    if quantities is None:
        shown = {name: format_quantity(name, value) for name, value in sorted(resources.items())}
    else:
        shown = {}
        for item in sorted(resources.items()):
            words = quantities.get(item)
            if words is None:
                words = quantities[item] = format_quantity(*item)
            shown[item[0]] = words
    return json.dumps(shown, separators=(",", ":"))


# --- taints ----------------------------------------------------------------------------------


def format_taint(taint: Taint) -> str:
    value = f"={taint.value}" if taint.value else ""
    return f"{taint.key}{value}:{taint.effect}"


def untolerated_taint(
    tolerations: list[Toleration], taints: Iterable[Taint], prefer_no_schedule: bool = True
) -> Taint | None:
    """The first taint no toleration covers. Karpenter's scheduler holds a PreferNoSchedule
    taint like any other (only relaxation tolerates it); ``prefer_no_schedule`` False leaves
    them out (a DaemonSet pod, as Karpenter counts daemon overhead)."""
    for taint in taints:
        if not prefer_no_schedule and taint.effect == "PreferNoSchedule":
            continue
        if not any(toleration_matches(t, taint) for t in tolerations):
            return taint
    return None


def is_ephemeral(taint: Taint, startup: Iterable[Taint] = ()) -> bool:
    """A taint Karpenter ignores on a managed node that is not initialized yet: a known
    ephemeral one, or one of the NodeClaim's startup taints (matched by key and effect)."""
    if (taint.key, taint.effect) in EPHEMERAL_TAINTS:
        return True
    if taint.key.startswith(EPHEMERAL_TAINT_KEY_PREFIXES):
        return True
    return any(s.key == taint.key and s.effect == taint.effect for s in startup)


# --- requirements ----------------------------------------------------------------------------


def pod_requirement_terms(pod: Pod) -> list[Requirements]:
    """The pod's node selector and required node affinity: one Requirements per ORed term."""
    base = Requirements.from_labels(pod.node_selector)
    terms = requirements_from_node_selector(pod.required_node_affinity)
    if not terms:
        return [base]
    out = []
    for term in terms:
        combined = term.copy()
        combined.add(base)
        out.append(combined)
    return out


def first_compatible_term(
    target: Requirements,
    terms: list[Requirements],
    allow_undefined: frozenset[str] = WELL_KNOWN_LABELS,
) -> tuple[Requirements | None, str | None]:
    """The first pod term the target is compatible with, else the first term's reason."""
    first_reason = None
    for term in terms:
        reason = target.compatible(term, allow_undefined=allow_undefined)
        if reason is None:
            return term, None
        if first_reason is None:
            first_reason = reason
    return None, first_reason


def format_requirements(reqs: Requirements) -> str:
    """Karpenter's Requirements.String: ``key In [a b], key Exists`` sorted by key."""
    return str(reqs)


def node_pool_requirements(pool: NodePool) -> Requirements:
    """NodePool template requirements (their ``minValues`` kept) plus template labels plus the
    nodepool label."""
    reqs = Requirements.from_node_selector_requirements(pool.requirements)
    labels = dict(pool.labels)
    labels[NODEPOOL] = pool.name
    reqs.add(Requirements.from_labels(labels))
    return reqs


# --- instance types --------------------------------------------------------------------------


@record
class InstanceTypeInfo:
    """An instance type with its requirements and allocatable precomputed once per run."""

    it: InstanceType
    name: str
    requirements: Requirements
    capacity: Resources
    offerings: list[tuple[Offering, Requirements | None]] = field(default_factory=list)
    # cheapest_offering by the zone and capacity-type requirements (when no offering has
    # requirements of its own, those two keys are all it reads).
    cheapest: dict[tuple, float | None] = field(default_factory=dict)
    plain_offerings: bool = True  # no offering has requirements of its own
    capacity_types: frozenset[str] = frozenset()  # of its offerings


# A candidate's name, read at C speed (``map``: a NodeClaim has 400 candidates, asked per pod).
info_name = attrgetter("name")


def instance_type_info(it: InstanceType) -> InstanceTypeInfo:
    reqs = Requirements.from_node_selector_requirements(list(it.requirements))
    zones = sorted({o.zone for o in it.offerings})
    capacity_types = sorted({o.capacity_type for o in it.offerings})
    extra = [{"key": INSTANCE_TYPE, "operator": "In", "values": [it.name]}]
    if zones and not reqs.has(ZONE):
        extra.append({"key": ZONE, "operator": "In", "values": zones})
    if capacity_types and not reqs.has(CAPACITY_TYPE):
        extra.append({"key": CAPACITY_TYPE, "operator": "In", "values": capacity_types})
    reqs.add(Requirements.from_node_selector_requirements(extra))
    offerings = []
    for offering in it.offerings:
        extra_reqs = (
            Requirements.from_node_selector_requirements(list(offering.requirements))
            if offering.requirements
            else None
        )
        offerings.append((offering, extra_reqs))
    capacity = to_milli(it.capacity)
    capacity.setdefault("pods", DEFAULT_MAX_PODS)
    plain = all(extra is None for _, extra in offerings)
    return InstanceTypeInfo(
        it,
        it.name,
        reqs,
        capacity,
        offerings,
        plain_offerings=plain,
        capacity_types=frozenset(capacity_types),
    )


def offering_allowed(offering: Offering, extra: Requirements | None, reqs: Requirements) -> bool:
    if not offering.available:
        return False
    if reqs.has(ZONE) and not reqs.get(ZONE).has(offering.zone):
        return False
    if reqs.has(CAPACITY_TYPE) and not reqs.get(CAPACITY_TYPE).has(offering.capacity_type):
        return False
    return extra is None or reqs.intersects(extra) is None


def cheapest_offering(info: InstanceTypeInfo, reqs: Requirements) -> float | None:
    key = None
    if info.plain_offerings:
        key = (_values_key(reqs, ZONE), _values_key(reqs, CAPACITY_TYPE))
        hit = info.cheapest.get(key, info)
        if hit is not info:
            return hit  # type: ignore[return-value]
    prices = [o.price for o, extra in info.offerings if offering_allowed(o, extra, reqs)]
    price = min(prices) if prices else None
    if key is not None:
        info.cheapest[key] = price
    return price


def cheapest_offerings(infos: Iterable[InstanceTypeInfo], reqs: Requirements) -> list:
    """``cheapest_offering`` of each of ``infos`` under ``reqs`` (the requirements' zone and
    capacity type read once for all)."""
    key = (_values_key(reqs, ZONE), _values_key(reqs, CAPACITY_TYPE))
    out = []
    for info in infos:
        if info.plain_offerings:
            hit = info.cheapest.get(key, info)
            if hit is not info:
                out.append(hit)
                continue
        out.append(cheapest_offering(info, reqs))
    return out


def _values_key(reqs: Requirements, key: str) -> tuple | None:
    if not reqs.has(key):
        return None
    r = reqs.get(key)
    return (r.complement, r._values, r.greater_than, r.less_than)


@record
class FilterOutcome:
    """The instance types left by a filter, and counts of why the others were not."""

    remaining: list[InstanceTypeInfo]  # in try order: cheapest allowed offering, then name
    # Why the others were left out; counted when none remained (a memo's fast answer with
    # some remaining does not count them: only ``failure_reason`` reads them).
    requirements_failed: int = 0
    resources_failed: int = 0
    offerings_failed: int = 0
    # Requirement keys whose minValues the instance types that passed fall short of: key ->
    # (distinct values they offer, minValues). Karpenter's Strict policy then keeps none.
    min_values_short: dict[str, tuple[int, int]] = field(default_factory=dict)
    # The candidates dropped, in the candidates' order, where the filter knows them without
    # reading every candidate (a NodeClaim's own list, narrowed by its index); else None.
    dropped: list[InstanceTypeInfo] | None = None

    def failure_reason(self) -> str:
        """Why nothing remained, in Karpenter's words."""
        if self.remaining:
            return ""
        if self.min_values_short:
            return min_values_message(self.min_values_short)
        parts = []
        if self.requirements_failed:
            parts.append("no instance type met the scheduling requirements")
        if self.resources_failed:
            parts.append("no instance type had enough resources")
        if self.offerings_failed:
            parts.append("no instance type had a required offering")
        return " or ".join(parts) if parts else "no instance types available"


@record
class NoInstanceType:
    """A NodeClaim's instance type filter that kept none, recorded as data (what it asked and
    what it counted) and worded only when read: for a pod that failed everywhere, or a
    refusal shown in full. One recorded refusal is worded once."""

    requests: Resources  # the NodeClaim's and the pod's, DaemonSet overhead apart
    requirements: Requirements
    outcome: FilterOutcome
    overheads: tuple[Resources, ...]  # each DaemonSet overhead group's
    quantities: dict | None = None  # format_resources' words of quantities, shared
    _words: str | None = None

    def words(self) -> str:
        """Karpenter's: the requests (with the overhead, ``min=..., max=...`` when the
        groups' differ), the requirements and why each instance type was left out."""
        if self._words is None:
            shown = self.shown_requests()
            why = self.outcome.failure_reason()
            reqs = format_requirements(self.requirements)
            if self.outcome.min_values_short:
                self._words = f"{why}, requirements={reqs}, resources={shown}"
            else:
                self._words = (
                    f"no instance type satisfied resources {shown} and requirements {reqs} ({why})"
                )
        return self._words

    def shown_requests(self) -> str:
        """The requests with the DaemonSet overhead as Karpenter's resourcesString shows it."""
        least: Resources = {}
        most: Resources = {}
        for overhead in self.overheads:
            for name, value in overhead.items():
                least[name] = min(least.get(name, value), value)
                most[name] = max(most.get(name, value), value)
        low = format_resources(merged(self.requests, least), self.quantities)
        if most == least:
            return low
        high = format_resources(merged(self.requests, most), self.quantities)
        return low if low == high else f"min={low}, max={high}"


_UNPRICED = object()  # a memo's cheapest offering not asked yet
_CANDIDATE_MASKS = 4096  # candidate lists whose masks an index keeps (then it starts again)
# Masks whose instance type lists an index keeps: each list holds up to one entry per
# instance type (400 in Karpenter's benchmark), so far fewer than the masks themselves.
_LISTED_MASKS = 128
# A mask that drops at most this many of a listed one is listed from that list: a NodeClaim
# filling up drops one or two instance types per pod, and deleting those from the list it
# had costs far less than reading 400 bits again.
_DERIVED_DROPS = 32


def _low_bits(mask: int) -> Iterator[int]:
    """Each set bit of ``mask`` as a power of two, lowest first."""
    while mask:
        low = mask & -mask
        yield low
        mask ^= low


@record
class _FilterEntry:
    """What a FilterMemo knows for one requirements' content."""

    # id(info) -> [info, requirements compatible, cheapest allowed offering or _UNPRICED]
    answers: dict[int, list] = field(default_factory=dict)
    # The compatible instance types with an allowed offering, in try order (price, then
    # name); None when answers were added since it was sorted.
    ordered: list[InstanceTypeInfo] | None = None
    index: CapacityIndex | None = None  # over ``answers``, built with ``ordered``


class CapacityIndex:
    """A FilterMemo entry's instance types as bits, so that filtering a NodeClaim's candidates
    is a few integer operations instead of a loop over them: bit i is the i-th of ``infos``,
    which lists the compatible priced ones in try order first (so ascending bits are the try
    order), then the others. Per resource, the capacities in ascending order and, for each
    position, the bits of the instance types with at least that much: the types that hold a
    request are one bisect away."""

    __slots__ = ("infos", "_position", "compatible", "priced", "_resources", "_masks", "_lists")

    def __init__(self, answers: dict[int, list], ordered: list[InstanceTypeInfo]) -> None:
        first = {id(info) for info in ordered}
        rest = [hit for key, hit in answers.items() if key not in first]
        infos = list(ordered) + [hit[0] for hit in rest]
        self.infos = infos
        self._position = {id(info): i for i, info in enumerate(infos)}
        self.priced = (1 << len(ordered)) - 1
        compatible = self.priced
        for i, hit in enumerate(rest, start=len(ordered)):
            if hit[1]:
                compatible |= 1 << i
        self.compatible = compatible
        names = {name for info in infos for name in info.capacity}
        self._resources: dict[str, tuple[list[int], list[int]]] = {}
        for name in names:
            by_capacity = sorted(range(len(infos)), key=lambda i: infos[i].capacity.get(name, 0))
            capacities = [infos[i].capacity.get(name, 0) for i in by_capacity]
            at_least = [0] * (len(infos) + 1)
            for k in range(len(infos) - 1, -1, -1):
                at_least[k] = at_least[k + 1] | (1 << by_capacity[k])
            self._resources[name] = (capacities, at_least)
        self._masks: dict[int, tuple[list[InstanceTypeInfo], int]] = {}
        self._lists: dict[int, list[InstanceTypeInfo]] = {}

    def candidates(self, candidates: list[InstanceTypeInfo]) -> int | None:
        """The bits of ``candidates`` (None: one is not indexed), remembered per list."""
        hit = self._masks.get(id(candidates))
        if hit is not None and hit[0] is candidates:
            return hit[1]
        position = self._position
        infos = self.infos
        mask = 0
        for info in candidates:
            i = position.get(id(info))
            if i is None or infos[i] is not info:
                return None
            mask |= 1 << i
        self.remember(candidates, mask, listed=False)
        return mask

    def remember(self, candidates: list[InstanceTypeInfo], mask: int, listed: bool = True) -> None:
        """``candidates``' bits are ``mask`` (a filter's result, which a NodeClaim keeps as its
        candidates: asked again, it is known). ``listed``: the list is one ``listed`` gave,
        in the order of its bits."""
        if len(self._masks) >= _CANDIDATE_MASKS:
            self._masks.clear()
        self._masks[id(candidates)] = (candidates, mask, listed)

    def in_bit_order(self, candidates: list[InstanceTypeInfo]) -> bool:
        """Whether ``candidates`` is a list ``listed`` gave (its order is that of its bits)."""
        hit = self._masks.get(id(candidates))
        return hit is not None and hit[0] is candidates and hit[2]

    def infos_of(self, mask: int) -> list[InstanceTypeInfo]:
        """The instance types of ``mask`` in the order of its bits, read bit by bit (for a
        mask of a few)."""
        infos = self.infos
        return [infos[low.bit_length() - 1] for low in _low_bits(mask)]

    def holding(self, requests: Resources, mask: int) -> int:
        """The bits of ``mask`` whose instance types have every (non-zero) request."""
        resources = self._resources
        for name, value in requests.items():
            if value > 0:
                found = resources.get(name)
                if found is None:
                    return 0
                capacities, at_least = found
                mask &= at_least[bisect_left(capacities, value)]
                if not mask:
                    return 0
        return mask

    def listed(self, mask: int, within: int = 0) -> list[InstanceTypeInfo]:
        """The instance types of ``mask``, in try order when they are priced ones: a new list
        (the caller's to keep), copied from the one built for that mask. Pods of one size ask
        every NodeClaim of one kind for the same mask, and reading 400 bits cost 30 times the
        copy. ``within``: a mask holding ``mask`` (the candidates'), whose list, if known, is
        the new one with a few instance types more."""
        known = self._lists.get(mask)
        if known is None:
            parent = self._lists.get(within) if within else None
            dropped = within & ~mask
            if parent is not None and not mask & ~within and dropped.bit_count() <= _DERIVED_DROPS:
                known = list(parent)
                # Bit i of ``within`` is at the position of the bits below it; the highest
                # first, so that the positions of the others stay.
                positions = [(within & (low - 1)).bit_count() for low in _low_bits(dropped)]
                for position in reversed(positions):
                    del known[position]
            else:
                infos = self.infos
                bits = bin(mask)[:1:-1]  # bit 0 first
                known = [infos[i] for i, bit in enumerate(bits) if bit == "1"]
            if len(self._lists) >= _LISTED_MASKS:
                self._lists.clear()
            self._lists[mask] = known
        return list(known)


class FilterMemo:
    """filter_instance_types' memory for one run: per requirements' content, each instance
    type's requirement answer and cheapest allowed offering (neither reads anything else), and
    the compatible ones with an offering in try order, so that a filter asked again in the same
    content only checks resources (``indexed``: through the entry's CapacityIndex).

    The content is that of the keys an instance type or an offering defines, with zone and
    capacity type (all that Intersects and the offerings read): a new NodeClaim's hostname,
    which no instance type defines, does not make every NodeClaim's content a new one."""

    __slots__ = ("_keys", "_entries", "use_index")

    def __init__(self, infos: Iterable[InstanceTypeInfo] = (), *, indexed: bool = True) -> None:
        self._keys: set[str] = {ZONE, CAPACITY_TYPE}
        self._entries: dict[tuple, _FilterEntry] = {}
        self.use_index = indexed
        for info in infos:
            self._cover(info)

    def _cover(self, info: InstanceTypeInfo) -> None:
        """Make the content cover the keys ``info`` reads (forgetting what was keyed without)."""
        keys = info.requirements.keys()
        for _, extra in info.offerings:
            if extra is not None:
                keys |= extra.keys()
        if not keys <= self._keys:
            self._keys |= keys
            self._entries.clear()

    def indexed(
        self, reqs: Requirements, candidates: list[InstanceTypeInfo]
    ) -> tuple[CapacityIndex, int]:
        """The CapacityIndex of ``reqs``' content, knowing every candidate, and their bits."""
        entry = self._entries.get(reqs.content_key(self._keys))
        if entry is not None and entry.index is not None:
            mask = entry.index.candidates(candidates)
            if mask is not None:
                return entry.index, mask
        index = self.entry(reqs, candidates, set()).index
        return index, index.candidates(candidates)

    def entry(
        self, reqs: Requirements, candidates: list[InstanceTypeInfo], ids: set[int]
    ) -> _FilterEntry:
        """The entry of ``reqs``' content, knowing the answers of every candidate (``ids``:
        theirs; empty: each candidate checked)."""
        entry = self._entries.get(reqs.content_key(self._keys))
        if entry is None or not ids or not entry.answers.keys() >= ids:
            for info in candidates:
                self._cover(info)
            content = reqs.content_key(self._keys)
            entry = self._entries.get(content)
            if entry is None:
                entry = self._entries[content] = _FilterEntry()
            answers = entry.answers
            for info in candidates:
                hit = answers.get(id(info))
                if hit is None or hit[0] is not info:
                    compatible = reqs.intersects(info.requirements) is None
                    answers[id(info)] = [info, compatible, _UNPRICED]
                    entry.ordered = None
        if entry.ordered is None:
            priced = []
            for hit in entry.answers.values():
                if hit[1]:
                    if hit[2] is _UNPRICED:
                        hit[2] = cheapest_offering(hit[0], reqs)
                    if hit[2] is not None:
                        priced.append((hit[2], hit[0].name, hit[0]))
            priced.sort(key=lambda entry: (entry[0], entry[1]))
            entry.ordered = [info for _, _, info in priced]
            entry.index = CapacityIndex(entry.answers, entry.ordered) if self.use_index else None
        return entry


def filter_instance_types(
    candidates: Iterable[InstanceTypeInfo],
    reqs: Requirements,
    requests: Resources,
    memo: FilterMemo | None = None,
    *,
    count: bool = True,
    min_values: bool = True,
) -> FilterOutcome:
    """Karpenter's filterInstanceTypesByRequirements: requirements, resources, offerings.

    ``memo``: the run's (``FilterMemo``); with it, the instance types that remain are those of
    the content's try order that are candidates and have the resources; when none remain, the
    full filter counts why (``count`` False: not even that, for a refusal worded later; an
    indexed memo counts anyway, at no cost).
    ``min_values`` False: the caller checks the requirements' minValues itself, on the
    instance types of several calls together (DaemonSet overhead groups)."""
    if memo is None:
        return _filter_counted(candidates, reqs, requests, None, min_values)
    if memo.use_index:
        if not isinstance(candidates, list):
            candidates = list(candidates)
        return _filter_indexed(candidates, reqs, requests, memo, min_values)
    candidates = list(candidates)
    ids = set(map(id, candidates))
    entry = memo.entry(reqs, candidates, ids)
    if len(candidates) < len(entry.ordered):  # a NodeClaim narrowed to a few types
        answers = entry.answers
        priced = []
        for info in candidates:
            hit = answers[id(info)]
            if hit[1] and fits(requests, info.capacity):
                if hit[2] is _UNPRICED:
                    hit[2] = cheapest_offering(info, reqs)
                if hit[2] is not None:
                    priced.append((hit[2], info.name, info))
        priced.sort(key=lambda entry: (entry[0], entry[1]))
        remaining = [info for _, _, info in priced]
    else:
        remaining = [
            info for info in entry.ordered if id(info) in ids and fits(requests, info.capacity)
        ]
    if not remaining:
        if not count:
            return FilterOutcome([])
        return _filter_counted(candidates, reqs, requests, entry.answers, min_values)
    return _with_min_values(FilterOutcome(remaining), reqs, min_values)


def _filter_indexed(
    candidates: list[InstanceTypeInfo],
    reqs: Requirements,
    requests: Resources,
    memo: FilterMemo,
    min_values: bool,
) -> FilterOutcome:
    """The memo's filter through its entry's CapacityIndex: the candidates, those holding the
    requests and those priced are bit masks; what remains is their intersection in try order,
    and the refusals are counted as _filter_counted counts them (each candidate once, by the
    first check it fails: requirements, resources, offerings)."""
    index, mask = memo.indexed(reqs, candidates)
    holding = index.holding(requests, mask)
    kept = holding & index.priced
    if kept:
        remaining = index.listed(kept, mask)
        gone = mask & ~kept
        dropped = (
            index.infos_of(gone)
            if gone.bit_count() <= _DERIVED_DROPS and index.in_bit_order(candidates)
            else None
        )
        index.remember(remaining, kept)
        return _with_min_values(FilterOutcome(remaining, dropped=dropped), reqs, min_values)
    compatible = mask & index.compatible
    return FilterOutcome(
        [],
        requirements_failed=(mask & ~compatible).bit_count(),
        resources_failed=(compatible & ~holding).bit_count(),
        offerings_failed=(compatible & holding).bit_count(),
    )


def _with_min_values(outcome: FilterOutcome, reqs: Requirements, min_values: bool) -> FilterOutcome:
    short = min_values_shortfall(outcome.remaining, reqs) if min_values else None
    if short:
        outcome.remaining = []
        outcome.min_values_short = short
        outcome.dropped = None
    return outcome


def _filter_counted(
    candidates: Iterable[InstanceTypeInfo],
    reqs: Requirements,
    requests: Resources,
    answers: dict[int, list] | None,
    min_values: bool = True,
) -> FilterOutcome:
    """The filter in full: every candidate asked, every refusal counted (``answers``: a
    FilterMemo entry's, which knows every candidate)."""
    outcome = FilterOutcome([])
    priced: list[tuple[float, str, InstanceTypeInfo]] = []
    for info in candidates:
        hit = answers[id(info)] if answers is not None else None
        compatible = hit[1] if hit is not None else reqs.intersects(info.requirements) is None
        if not compatible:
            outcome.requirements_failed += 1
            continue
        if not fits(requests, info.capacity):
            outcome.resources_failed += 1
            continue
        if hit is None:
            price = cheapest_offering(info, reqs)
        else:
            if hit[2] is _UNPRICED:
                hit[2] = cheapest_offering(info, reqs)
            price = hit[2]
        if price is None:
            outcome.offerings_failed += 1
            continue
        priced.append((price, info.name, info))
    priced.sort(key=lambda entry: (entry[0], entry[1]))
    outcome.remaining = [info for _, _, info in priced]
    if outcome.remaining and min_values:
        short = min_values_shortfall(outcome.remaining, reqs)
        if short:
            outcome.remaining = []
            outcome.min_values_short = short
    return outcome


def min_values_shortfall(
    infos: Iterable[InstanceTypeInfo], reqs: Requirements
) -> dict[str, tuple[int, int]]:
    """Karpenter's SatisfiesMinValues: for each requirement with ``minValues``, the distinct
    values of that label the instance types offer; the keys that offer fewer, with (how many,
    minValues). Empty when every minValues is met (or none is set)."""
    wanted = [(r.key, r.min_values) for r in reqs if r.min_values is not None]
    if not wanted:
        return {}
    seen: dict[str, set[str]] = {key: set() for key, _ in wanted}
    for info in infos:
        for key, _ in wanted:
            if info.requirements.has(key):
                seen[key].update(info.requirements.get(key).values())
    return {key: (len(seen[key]), need) for key, need in wanted if len(seen[key]) < need}


def min_values_message(short: dict[str, tuple[int, int]]) -> str:
    """Karpenter's words, with the keys that fell short and by how much."""
    detail = ", ".join(
        f"{key} ({have} of minValues {need})" for key, (have, need) in sorted(short.items())
    )
    return f"minValues requirement is not met for label(s) {detail}"


# --- NodePool limits -------------------------------------------------------------------------


NODES = "nodes"  # the NodePool limit on how many nodes it may have (Karpenter's resources.Node)


def within_limits(capacity: Resources, remaining: Resources | None) -> bool:
    """Karpenter's filterByRemainingResources: launching this type must not cross a limit
    (an instance type offers no ``nodes``: it passes while that limit is not overrun)."""
    if remaining is None:
        return True
    return all(capacity.get(name, 0) <= left for name, left in remaining.items())


def max_capacity(infos: Iterable[InstanceTypeInfo]) -> Resources:
    """Karpenter charges a NodeClaim against limits at its largest candidate type."""
    out: Resources = {}
    for info in infos:
        for name, value in info.capacity.items():
            if value > out.get(name, 0):
                out[name] = value
    return out
