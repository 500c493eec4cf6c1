"""Constraints: stateful inter-device rules evaluated during the DFS.

Each ``add`` that succeeds is undone by exactly one ``remove`` (stack discipline), which is
what lets the DFS backtrack. Parsing goes by the constraint's field name through the parsers
of the run's pipeline (``allocator/pipeline.py``), so further kinds (``distinctAttribute``)
plug in without edits here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from allocator.bindings import AttributeBindings, lookup_attribute
from allocator.errors import ValidationError
from allocator.featuregates import FeatureGates
from allocator.model import AttributeValue, DeviceConstraint
from allocator.pools import DeviceWithID
from allocator.records import record


@record(frozen=True)
class BindingFallback:
    """The (nodePool, instanceType) context in which runtime-only attributes are compared."""

    bindings: AttributeBindings
    node_pool: str | None
    instance_type: str


class Constraint(Protocol):
    request_names: frozenset[str]  # empty: every request of the claim
    reason_code: str  # the trace's reason when the constraint refuses a device
    # Whether ``feasibility`` reasons about the devices still to choose (distinctAttribute);
    # MatchAttribute's pinned-value reasoning is the DFS's own.
    checks_feasibility: bool

    def applies(self, request: str) -> bool: ...
    def add(self, request: str, cand: DeviceWithID) -> str | None: ...  # None: accepted
    def remove(self, request: str, cand: DeviceWithID) -> None: ...
    def set_binding_fallback(self, fallback: BindingFallback | None) -> None: ...
    def reset(self) -> None: ...
    def feasibility(self, need: int, candidates: Iterable[DeviceWithID]) -> str | None:
        """Can ``need`` more devices, taken from ``candidates`` (a superset of those that could
        still fill the constrained requests), satisfy the constraint? None when they may."""
        ...


def request_in_scope(names: frozenset[str], request: str) -> bool:
    """A subrequest ``req/sub`` is in scope when ``req`` is named."""
    if not names or request in names:
        return True
    parent, sep, _ = request.partition("/")
    return bool(sep) and parent in names


def same_attribute_value(a: AttributeValue | None, b: AttributeValue | None) -> bool:
    """Equal values of the same attribute type: a bool never equals an int (Python's True == 1
    does), as typed DeviceAttributes compare in Kubernetes and Karpenter."""
    if a is None or b is None:
        return False
    return type(a) is type(b) and a == b


class MatchAttributeConstraint:
    """All devices of the constrained requests share one value of ``attribute``.

    The first device decides the evaluation path: a concrete value pins the value (devices
    lacking the attribute are then rejected); a device lacking the attribute takes the binding
    path (devices are compared through AttributeBindings for the current nodePool and instance
    type, and devices with a concrete value are then rejected).
    """

    __slots__ = ("attribute", "request_names", "fallback", "devices", "mode", "value")

    CONCRETE = "concrete"
    BINDING = "binding"
    reason_code = "constraint"
    checks_feasibility = False

    def __init__(self, attribute: str, request_names: frozenset[str] = frozenset()) -> None:
        self.attribute = attribute
        self.request_names = request_names
        self.fallback: BindingFallback | None = None  # nil during validation
        self.devices: list[DeviceWithID] = []
        self.mode: str | None = None
        self.value: AttributeValue | None = None

    def __repr__(self) -> str:
        return f"matchAttribute {self.attribute}"

    def set_binding_fallback(self, fallback: BindingFallback | None) -> None:
        self.fallback = fallback

    def reset(self) -> None:
        self.devices.clear()
        self.mode = None
        self.value = None

    def applies(self, request: str) -> bool:
        return request_in_scope(self.request_names, request)

    def _lookup(self, cand: DeviceWithID) -> AttributeValue | None:
        return lookup_attribute(cand.device, self.attribute, cand.id.driver)

    def check(self, cand: DeviceWithID) -> str | None:
        """Whether ``cand`` could be added now (no state change)."""
        value = self._lookup(cand)
        if self.mode is None:
            if value is not None:
                return None
            fb = self.fallback
            # Only a device that takes part in a binding for this (nodePool, IT) can start the
            # binding path; without bindings a missing attribute fails as in Kubernetes.
            if fb is None or not fb.bindings.bound_set(
                self.attribute, fb.node_pool, fb.instance_type, cand.id
            ):
                return f"device {cand.id} has no attribute {self.attribute}"
            return None
        if self.mode == self.CONCRETE:
            if value is None:
                return (
                    f"device {cand.id} has no attribute {self.attribute} "
                    f"(other devices have {self.attribute}={self.value})"
                )
            if not same_attribute_value(value, self.value):
                return f"device {cand.id} has {self.attribute}={value}, not {self.value}"
            return None
        # Binding path.
        if value is not None:
            return (
                f"device {cand.id} has a concrete {self.attribute}={value} but the constraint "
                "is evaluated through attribute bindings"
            )
        fb = self.fallback
        first = self.devices[0]
        if fb is None or not fb.bindings.bound(
            self.attribute, fb.node_pool, fb.instance_type, first.id, cand.id
        ):
            return f"device {cand.id} is not bound to {first.id} under {self.attribute}"
        return None

    def add(self, request: str, cand: DeviceWithID) -> str | None:
        if not request_in_scope(self.request_names, request):
            return None
        reason = self.check(cand)
        if reason is not None:
            return reason
        if self.mode is None:
            value = self._lookup(cand)
            if value is not None:
                self.mode, self.value = self.CONCRETE, value
            else:
                self.mode = self.BINDING
        self.devices.append(cand)
        return None

    def remove(self, request: str, cand: DeviceWithID) -> None:
        if not request_in_scope(self.request_names, request):
            return
        self.devices.pop()
        if not self.devices:  # the pinning device went: unpinned again
            self.mode = None
            self.value = None

    @property
    def pinned(self) -> bool:
        return self.mode is not None

    def feasibility(self, need: int, candidates: Iterable[DeviceWithID]) -> str | None:
        return None  # pinned-value reasoning is the DFS's (``DFSContext.match_feasibility``)


# --- parsing table ---------------------------------------------------------------------------

ConstraintParser = Callable[[DeviceConstraint, "ConstraintParseContext"], Constraint]


@record
class ConstraintParseContext:
    """What a constraint parser reads: the claim, its request names, the gates."""

    claim_key: str
    request_names: list[str]  # the claim's request names, for scoping checks
    gates: FeatureGates  # the run's, from its pipeline


def constraint_kind(dc: DeviceConstraint) -> str:
    if dc.match_attribute:
        return "matchAttribute"
    if dc.distinct_attribute:
        return "distinctAttribute"
    others = sorted(k for k in dc.raw if k != "requests")
    return others[0] if others else "(empty)"


def parse_match_attribute(dc: DeviceConstraint, ctx: ConstraintParseContext) -> Constraint:
    """The design's ``matchAttribute`` (the core pipeline's one constraint kind)."""
    assert dc.match_attribute is not None
    return MatchAttributeConstraint(dc.match_attribute, frozenset(dc.requests))


def parse_constraint(
    dc: DeviceConstraint,
    ctx: ConstraintParseContext,
    parser_for: Callable[[str], ConstraintParser | None],
) -> Constraint:
    """Parse with the parser of the constraint's kind (``Pipeline.constraint_parser``); the
    parser may raise ValidationError (say, when its feature gate is off)."""
    kind = constraint_kind(dc)
    parser = parser_for(kind)
    if parser is None:
        raise ValidationError(f"claim {ctx.claim_key}: unsupported constraint type {kind!r}")
    return parser(dc, ctx)
