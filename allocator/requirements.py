"""Karpenter's node requirement algebra (``pkg/scheduling/requirement(s).go``).

A ``Requirement`` is the set of values a label key may take, kept in complement-set form so
that every NodeSelector operator is one representation:

    In [a b]      -> {a, b}
    NotIn [a b]   -> complement of {a, b}
    Exists        -> complement of {}
    DoesNotExist  -> {}
    Gt 4 / Lt 9   -> integer bounds on the values (and, on a complement set, kept as bounds)

``Requirement`` objects are immutable, so ``Requirements.copy()`` is a dict copy: cheap enough
for the DFS, which copies requirements on every topology tightening.

A NodeSelector's ``matchFields`` on ``metadata.name`` becomes a requirement on the pseudo key
``metadata.name`` (``NODE_NAME_KEY``): existing nodes carry it (``node_requirements``), in-flight
NodeClaims do not, so node-name-pinned selectors are incompatible with them, as in the design.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Set

NODE_NAME_KEY = "metadata.name"
LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_REGION = "topology.kubernetes.io/region"
LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"
LABEL_ARCH = "kubernetes.io/arch"
LABEL_OS = "kubernetes.io/os"
LABEL_WINDOWS_BUILD = "node.kubernetes.io/windows-build"
LABEL_CAPACITY_TYPE = "karpenter.sh/capacity-type"
LABEL_NODEPOOL = "karpenter.sh/nodepool"

WELL_KNOWN_LABELS: frozenset[str] = frozenset(
    {
        LABEL_NODEPOOL,
        LABEL_ZONE,
        LABEL_REGION,
        LABEL_INSTANCE_TYPE,
        LABEL_ARCH,
        LABEL_OS,
        LABEL_CAPACITY_TYPE,
        LABEL_WINDOWS_BUILD,
        LABEL_HOSTNAME,
    }
)

# Deprecated label keys are read as their stable names (Karpenter's NormalizedLabels).
NORMALIZED_LABELS: dict[str, str] = {
    "failure-domain.beta.kubernetes.io/zone": LABEL_ZONE,
    "failure-domain.beta.kubernetes.io/region": LABEL_REGION,
    "beta.kubernetes.io/arch": LABEL_ARCH,
    "beta.kubernetes.io/os": LABEL_OS,
    "beta.kubernetes.io/instance-type": LABEL_INSTANCE_TYPE,
}

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
_MAX_LEN = (1 << 63) - 1  # math.MaxInt64: the "size" of a complement set
_INT_RE = re.compile(r"[+-]?[0-9]+\Z")


class RequirementError(ValueError):
    """A NodeSelectorRequirement that cannot be read (unknown operator, bad Gt/Lt value)."""


def _as_int(value: str) -> int | None:
    # strconv.Atoi: optional sign and digits only.
    if _INT_RE.match(value):
        return int(value)
    return None


def _within(value: str, gt: int | None, lt: int | None) -> bool:
    if gt is None and lt is None:
        return True
    n = _as_int(value)
    if n is None:
        return False  # with bounds set, non-integer values are invalid
    if gt is not None and gt >= n:
        return False
    return not (lt is not None and lt <= n)


def _go_list(values: Iterable[str]) -> str:
    ordered = sorted(values)
    if len(ordered) > 5:
        ordered = ordered[:5] + [f"and {len(ordered) - 5} others"]
    return "[" + " ".join(ordered) + "]"


# How many intersections one requirement remembers before it forgets them all: a NodeClaim's
# requirement meets a new pod term on every attempt, and kept them all (4,000 pods onto 4,000
# NodeClaims held 14 GB).
_MET_KEPT = 64


class Requirement:
    """The allowed values of one key. Immutable."""

    __slots__ = (
        "key",
        "complement",
        "_values",
        "greater_than",
        "less_than",
        "min_values",
        "_met",
    )

    def __init__(
        self,
        key: str,
        complement: bool,
        values: frozenset[str] = frozenset(),
        greater_than: int | None = None,
        less_than: int | None = None,
        min_values: int | None = None,
    ) -> None:
        self.key = key
        self.complement = complement
        self._values = values
        self.greater_than = greater_than
        self.less_than = less_than
        self.min_values = min_values
        # Intersections computed with this requirement: id(other) -> (other, result). Both
        # sides are immutable, so a result is what computing it again gives; the loop
        # intersects the same NodeClaim and instance type requirements for every pod.
        self._met: dict[int, tuple[Requirement, Requirement]] | None = None

    @classmethod
    def new(
        cls,
        key: str,
        operator: str,
        values: Iterable[str] = (),
        min_values: int | None = None,
    ) -> Requirement:
        """Karpenter's NewRequirementWithFlexibility."""
        key = NORMALIZED_LABELS.get(key, key)
        values = list(values)
        if operator == "In":
            return cls(key, False, frozenset(values), min_values=min_values)
        if operator == "NotIn":
            return cls(key, True, frozenset(values), min_values=min_values)
        if operator == "Exists":
            return cls(key, True, min_values=min_values)
        if operator == "DoesNotExist":
            return cls(key, False, min_values=min_values)
        if operator in ("Gt", "Lt"):
            if len(values) != 1 or _as_int(str(values[0])) is None:
                raise RequirementError(
                    f"key {key}: operator {operator} needs exactly one integer value, "
                    f"got {values!r}"
                )
            bound = _as_int(str(values[0]))
            if operator == "Gt":
                return cls(key, True, greater_than=bound, min_values=min_values)
            return cls(key, True, less_than=bound, min_values=min_values)
        raise RequirementError(
            f"key {key}: unknown operator {operator!r}; expected one of {', '.join(OPERATORS)}"
        )

    # --- set algebra -------------------------------------------------------------------------

    def intersection(self, other: Requirement) -> Requirement:
        met = self._met
        if met is None:
            met = self._met = {}
        else:
            hit = met.get(id(other))
            if hit is not None and hit[0] is other:
                return hit[1]
        out = self._intersection(other)
        if len(met) >= _MET_KEPT:
            met.clear()
        met[id(other)] = (other, out)
        return out

    def _intersection(self, other: Requirement) -> Requirement:
        complement = self.complement and other.complement
        gt = _max_opt(self.greater_than, other.greater_than)
        lt = _min_opt(self.less_than, other.less_than)
        min_values = _max_opt(self.min_values, other.min_values)
        # No integer strictly between the bounds (Karpenter tests gt >= lt, which misses
        # Gt 4 + Lt 5): the key cannot take any value.
        if gt is not None and lt is not None and gt + 1 >= lt:
            return Requirement(self.key, False, min_values=min_values)
        if self.complement and other.complement:
            values = self._values | other._values
        elif self.complement:
            values = other._values - self._values
        elif other.complement:
            values = self._values - other._values
        else:
            values = self._values & other._values
        if gt is not None or lt is not None:
            values = frozenset(v for v in values if _within(v, gt, lt))
        if not complement:
            gt = lt = None  # bounds are already applied to a concrete set
        return Requirement(self.key, complement, values, gt, lt, min_values)

    def has(self, value: str) -> bool:
        if self.complement:
            return value not in self._values and _within(value, self.greater_than, self.less_than)
        return value in self._values and _within(value, self.greater_than, self.less_than)

    def any(self) -> str | None:
        """A value the requirement allows, chosen deterministically; None when there is none."""
        op = self.operator()
        if op == "In":
            return min(self._values)
        if op == "DoesNotExist":
            return None
        low = self.greater_than + 1 if self.greater_than is not None else 0
        high = self.less_than if self.less_than is not None else _MAX_LEN
        n = low
        while n < high:
            if str(n) not in self._values:
                return str(n)
            n += 1
        return None

    def values(self) -> set[str]:
        """The listed values: allowed ones for In, excluded ones for NotIn."""
        return set(self._values)

    def operator(self) -> str:
        if self.complement:
            return "NotIn" if len(self) < _MAX_LEN else "Exists"
        return "In" if self._values else "DoesNotExist"

    def __len__(self) -> int:
        if self.complement:
            return _MAX_LEN - len(self._values)
        return len(self._values)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Requirement):
            return NotImplemented
        return (
            self.key == other.key
            and self.complement == other.complement
            and self._values == other._values
            and self.greater_than == other.greater_than
            and self.less_than == other.less_than
            and self.min_values == other.min_values
        )

    def __hash__(self) -> int:
        return hash((self.key, self.complement, self._values, self.greater_than, self.less_than))

    def __str__(self) -> str:
        op = self.operator()
        if op in ("Exists", "DoesNotExist"):
            text = f"{self.key} {op}"
        else:
            text = f"{self.key} {op} {_go_list(self._values)}"
        if self.greater_than is not None:
            text += f" >{self.greater_than}"
        if self.less_than is not None:
            text += f" <{self.less_than}"
        if self.min_values is not None:
            text += f" minValues {self.min_values}"
        return text

    def __repr__(self) -> str:
        return f"Requirement({self})"

    def to_node_selector_requirements(self) -> list[dict]:
        """NodeSelectorRequirement dicts expressing this requirement (ANDed)."""
        out: list[dict] = []
        extra = {"minValues": self.min_values} if self.min_values is not None else {}
        if self.greater_than is not None:
            out.append({"key": self.key, "operator": "Gt", "values": [str(self.greater_than)]})
        if self.less_than is not None:
            out.append({"key": self.key, "operator": "Lt", "values": [str(self.less_than)]})
        if self.complement:
            if self._values:
                out.append({"key": self.key, "operator": "NotIn", "values": sorted(self._values)})
            elif not out:
                out.append({"key": self.key, "operator": "Exists"})
        elif self._values:
            out.append({"key": self.key, "operator": "In", "values": sorted(self._values)})
        else:
            out.append({"key": self.key, "operator": "DoesNotExist"})
        if extra:
            out[-1].update(extra)
        return out


def _max_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


def _min_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def _exists(key: str) -> Requirement:
    return Requirement(key, True)


class Requirements:
    """Karpenter's ``scheduling.Requirements``: key -> Requirement, combined by intersection."""

    __slots__ = ("_reqs",)

    def __init__(self, requirements: Iterable[Requirement] = ()) -> None:
        self._reqs: dict[str, Requirement] = {}
        for r in requirements:
            self.add_requirement(r)

    # --- construction ------------------------------------------------------------------------

    @classmethod
    def from_node_selector_requirements(cls, reqs: Iterable[Mapping] | None) -> Requirements:
        """From NodeSelectorRequirement dicts (``minValues`` honoured when present)."""
        out = cls()
        for r in reqs or ():
            out.add_requirement(
                Requirement.new(
                    str(r.get("key", "")),
                    str(r.get("operator", "")),
                    [str(v) for v in (r.get("values") or ())],
                    r.get("minValues"),
                )
            )
        return out

    @classmethod
    def from_labels(cls, labels: Mapping[str, str] | None) -> Requirements:
        out = cls()
        for key, value in (labels or {}).items():
            out.add_requirement(Requirement.new(key, "In", [str(value)]))
        return out

    @classmethod
    def from_node_selector_term(cls, term: Mapping | None) -> Requirements:
        """One NodeSelectorTerm: matchExpressions plus matchFields on metadata.name."""
        term = term or {}
        out = cls.from_node_selector_requirements(term.get("matchExpressions") or ())
        for f in term.get("matchFields") or ():
            if f.get("key") != NODE_NAME_KEY:
                raise RequirementError(
                    f"matchFields key {f.get('key')!r}: only {NODE_NAME_KEY} is supported"
                )
            out.add_requirement(
                Requirement.new(
                    NODE_NAME_KEY,
                    str(f.get("operator", "")),
                    [str(v) for v in (f.get("values") or ())],
                )
            )
        return out

    # --- mutation ----------------------------------------------------------------------------

    def add_requirement(self, requirement: Requirement) -> None:
        existing = self._reqs.get(requirement.key)
        if existing is not None:
            requirement = requirement.intersection(existing)
        self._reqs[requirement.key] = requirement

    def add(self, *others: Requirements | Requirement) -> None:
        """In-place intersection with every requirement of ``others`` (Karpenter's Add)."""
        for other in others:
            if isinstance(other, Requirement):
                self.add_requirement(other)
            else:
                for r in other._reqs.values():
                    self.add_requirement(r)

    def intersect(self, other: Requirements) -> Requirements:
        out = self.copy()
        out.add(other)
        return out

    def copy(self) -> Requirements:
        out = Requirements.__new__(Requirements)
        out._reqs = dict(self._reqs)
        return out

    # --- queries -----------------------------------------------------------------------------

    def keys(self) -> set[str]:
        return set(self._reqs)

    def has(self, key: str) -> bool:
        return key in self._reqs

    def get(self, key: str) -> Requirement:
        """The key's requirement; an undefined key allows any value (Exists)."""
        r = self._reqs.get(key)
        return r if r is not None else _exists(key)

    def __contains__(self, key: object) -> bool:
        return key in self._reqs

    def __iter__(self) -> Iterator[Requirement]:
        return iter(self._reqs.values())

    def __len__(self) -> int:
        return len(self._reqs)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Requirements):
            return NotImplemented
        return self._reqs == other._reqs

    __hash__ = None  # type: ignore[assignment]  # mutable

    def content_key(self, keys: Set[str] | None = None) -> tuple:
        """A hashable value equal for requirements of equal content (now: they may change);
        with ``keys``, of the requirements on those keys only."""
        if keys is None:
            return tuple(sorted(self._reqs.items()))
        return tuple(sorted(item for item in self._reqs.items() if item[0] in keys))

    def compatible(
        self, other: Requirements, allow_undefined: Iterable[str] = WELL_KNOWN_LABELS
    ) -> str | None:
        """Karpenter's Compatible: None when ``other`` can be met by ``self``, else why not.

        Keys of ``other`` that ``self`` does not define are allowed only when they are in
        ``allow_undefined`` or when ``other`` only excludes values (NotIn / DoesNotExist).
        """
        allowed = (
            allow_undefined
            if isinstance(allow_undefined, frozenset | set)
            else set(allow_undefined)
        )
        errors: list[str] = []
        for key in sorted(other._reqs):
            if key in allowed or key in self._reqs:
                continue
            op = other._reqs[key].operator()
            if op in ("NotIn", "DoesNotExist"):
                continue
            errors.append(f'label "{key}" does not have known values')
        reason = self.intersects(other)
        if reason:
            errors.append(reason)
        return "; ".join(errors) if errors else None

    def is_compatible(
        self, other: Requirements, allow_undefined: Iterable[str] = WELL_KNOWN_LABELS
    ) -> bool:
        return self.compatible(other, allow_undefined) is None

    def intersects(self, other: Requirements) -> str | None:
        """Karpenter's Intersects: keys defined on both sides must share a value."""
        errors: list[str] = []
        mine = self._reqs
        for key in sorted(mine.keys() & other._reqs.keys()):
            existing = mine[key]
            incoming = other._reqs[key]
            if len(existing.intersection(incoming)) == 0:
                if incoming.operator() in ("NotIn", "DoesNotExist") and existing.operator() in (
                    "NotIn",
                    "DoesNotExist",
                ):
                    continue
                errors.append(f"key {key}, {incoming} not in {existing}")
        return "; ".join(errors) if errors else None

    def labels(self) -> dict[str, str]:
        """Labels implied by single-valued In requirements (pseudo keys excluded)."""
        out: dict[str, str] = {}
        for key, r in self._reqs.items():
            if key == NODE_NAME_KEY or r.complement or len(r._values) != 1:
                continue
            (out[key],) = r._values
        return out

    def to_node_selector_requirements(self) -> list[dict]:
        """Sorted by key, values sorted (docs/RESULT.md); pseudo keys excluded."""
        out: list[dict] = []
        for key in sorted(self._reqs):
            if key == NODE_NAME_KEY:
                continue
            out.extend(self._reqs[key].to_node_selector_requirements())
        return out

    def __str__(self) -> str:
        return ", ".join(str(self._reqs[k]) for k in sorted(self._reqs))

    def __repr__(self) -> str:
        return f"Requirements({self})"


def node_requirements(labels: Mapping[str, str] | None, node_name: str | None) -> Requirements:
    """An existing node's requirements: its labels plus its name (for matchFields pins)."""
    out = Requirements.from_labels(labels)
    if node_name:
        out.add_requirement(Requirement(NODE_NAME_KEY, False, frozenset({node_name})))
    return out


def _terms(ns: Mapping | None) -> list[Mapping]:
    return list((ns or {}).get("nodeSelectorTerms") or ())


def requirements_from_node_selector(ns: Mapping | None) -> list[Requirements]:
    """One Requirements per ORed NodeSelectorTerm; [] for a missing selector."""
    return [Requirements.from_node_selector_term(t) for t in _terms(ns)]


def _term_is_empty(term: Mapping) -> bool:
    return not (term.get("matchExpressions") or term.get("matchFields"))


def node_selector_compatible(
    ns: Mapping | None,
    reqs: Requirements,
    allow_undefined: Iterable[str] = WELL_KNOWN_LABELS,
) -> bool:
    """Whether some term of ``ns`` is compatible with ``reqs`` (None selector: always).

    An empty term matches no node, as in Kubernetes.
    """
    if ns is None:
        return True
    for term in _terms(ns):
        if _term_is_empty(term):
            continue
        if reqs.compatible(Requirements.from_node_selector_term(term), allow_undefined) is None:
            return True
    return False


def _expression_matches(expr: Mapping, value: str | None) -> bool:
    op = expr.get("operator")
    values = [str(v) for v in (expr.get("values") or ())]
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        if value is None or len(values) != 1:
            return False
        n, bound = _as_int(value), _as_int(values[0])
        if n is None or bound is None:
            return False
        return n > bound if op == "Gt" else n < bound
    return False


def node_selector_matches_labels(
    ns: Mapping | None, labels: Mapping[str, str], node_name: str | None = None
) -> bool:
    """Kubernetes NodeSelector matching against a node's labels (and name for matchFields)."""
    if ns is None:
        return True
    for term in _terms(ns):
        if _term_is_empty(term):
            continue
        ok = all(
            _expression_matches(e, labels.get(e.get("key")))
            for e in term.get("matchExpressions") or ()
        )
        if ok:
            for f in term.get("matchFields") or ():
                if f.get("key") != NODE_NAME_KEY or not _expression_matches(f, node_name):
                    ok = False
                    break
        if ok:
            return True
    return False
