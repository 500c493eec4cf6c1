"""DistinctAttribute constraints and list-typed attributes (DRAListTypeAttributes).

Constraints are stateful like the design's MatchAttribute: every successful ``add`` is undone
by exactly one ``remove`` with the same arguments, in reverse order, so the DFS can backtrack.

- DistinctAttribute: every device allocated for the constrained requests has a different
  value of the attribute (a device lacking it fails). With list-typed attributes (gate on) the
  values of any two devices must be disjoint sets; a scalar counts as a one-element set.
- MatchAttribute with list-typed attributes (gate on): the intersection of all devices' value
  sets must stay non-empty. With the gate off a list value matches nothing (kube-scheduler
  does not know the type then).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import field
from typing import Any

from allocator.constraints import request_in_scope
from allocator.errors import ValidationError
from allocator.featuregates import FeatureGates
from allocator.features.attributes import as_value_set, is_list_value, lookup_attribute
from allocator.features.capacity import GATE as CAPACITY_GATE
from allocator.features.prioritized import constraint_applies
from allocator.model import AttributeValue, Device, DeviceConstraint, DeviceID
from allocator.records import record

LIST_GATE = "DRAListTypeAttributes"


@record
class DistinctAttributeConstraint:
    """``distinctAttribute``: no two constrained devices share a value."""

    attribute: str
    requests: tuple[str, ...] = ()
    list_semantics: bool = True
    # One entry per device added (and not removed), in order.
    _values: list[AttributeValue] = field(default_factory=list)
    last_failure: str | None = None

    @classmethod
    def from_api(
        cls, constraint: DeviceConstraint, gates: FeatureGates
    ) -> DistinctAttributeConstraint:
        if not constraint.distinct_attribute:
            raise ValueError("constraint has no distinctAttribute")
        return cls(
            attribute=constraint.distinct_attribute,
            requests=tuple(constraint.requests),
            list_semantics=gates.enabled(LIST_GATE),
        )

    def applies(self, request: str, subrequest: str | None = None) -> bool:
        return constraint_applies(self.requests, request, subrequest)

    def add(
        self, request: str, subrequest: str | None, device: Device, device_id: DeviceID
    ) -> bool:
        if not self.applies(request, subrequest):
            return True
        value = lookup_attribute(device, device_id.driver, self.attribute)
        if value is None:
            self.last_failure = f"device {device_id} has no attribute {self.attribute}"
            return False
        if not self._compatible(value):
            self.last_failure = (
                f"device {device_id}: {self.attribute}={_show(value)} is not distinct from "
                "the devices already chosen"
            )
            return False
        self._values.append(value)
        return True

    def remove(
        self, request: str, subrequest: str | None, device: Device, device_id: DeviceID
    ) -> None:
        if not self.applies(request, subrequest):
            return
        self._values.pop()

    def _compatible(self, value: AttributeValue) -> bool:
        if self.list_semantics:
            new = as_value_set(value)
            return all(not (new & as_value_set(old)) for old in self._values)
        if is_list_value(value):
            return False  # unknown type without the list gate
        return all(
            is_list_value(old) or type(old) is not type(value) or old != value
            for old in self._values
        )

    @property
    def size(self) -> int:
        return len(self._values)


@record
class ListMatchAttributeState:
    """The concrete-value path of ``matchAttribute`` when values may be lists.

    Keeps a stack of running intersections so ``remove`` restores the previous one."""

    attribute: str
    list_semantics: bool = True
    _stack: list[frozenset] = field(default_factory=list)

    def try_add(self, value: AttributeValue | None) -> bool:
        if value is None:
            return False
        if not self.list_semantics and is_list_value(value):
            return False
        new = as_value_set(value)
        if self._stack:
            current = self._stack[-1]
            if self.list_semantics:
                new = current & new
                if not new:
                    return False
            elif new != current:
                return False
        self._stack.append(new)
        return True

    def remove(self) -> None:
        self._stack.pop()

    @property
    def pinned(self) -> frozenset | None:
        return self._stack[-1] if self._stack else None


def match_values(pinned: AttributeValue, value: AttributeValue, gates: FeatureGates) -> bool:
    """Stateless form for a two-device check: do ``pinned`` and ``value`` match?"""
    if is_list_value(pinned) or is_list_value(value):
        if not gates.enabled(LIST_GATE):
            return False
        return bool(as_value_set(pinned) & as_value_set(value))
    return type(pinned) is type(value) and pinned == value


# Values named in a refusal message; the rest are counted.
SHOWN_VALUES = 8


def distinct_shortfall(
    attribute: str,
    chosen: Sequence[AttributeValue],
    list_semantics: bool,
    need: int,
    candidates: Iterable[Any],
) -> str | None:
    """Feasibility reasoning for ``distinctAttribute``, like MatchAttribute's: the devices
    still to choose (``need``) each take a value no other constrained device has, so the
    candidates (DeviceWithID-like: ``.device``, ``.id``) must offer at least ``need`` values
    different from the ``chosen`` ones. None when they may; else why not, naming the
    attribute and the values there are. Pairwise disjoint value sets (list semantics) are no
    more numerous than the elements of their union, so that bound is sound too."""
    if need <= 0:
        return None
    used: set = set()
    for value in chosen:
        used |= as_value_set(value) if list_semantics else {(type(value), value)}
    found: dict = {}  # (type, value) -> value, in the order met
    lists_off = 0  # list values skipped because the list gate is off
    for cand in candidates:
        value = lookup_attribute(cand.device, cand.id.driver, attribute)
        if value is None:
            continue
        if list_semantics:
            items = as_value_set(value)
            if not items:
                return None  # an empty list is disjoint from every list: no bound
            if items & used:
                continue
            for item in items:
                found.setdefault(item, item[1])
        else:
            if is_list_value(value):
                lists_off += 1  # a list without the list gate matches nothing
                continue
            found.setdefault((type(value), value), value)
        if len(found) >= need:
            return None
    # Decided: not enough values. Only words follow, and words never fail a search.
    try:
        return _shortfall_words(attribute, list(found.values()), need, bool(chosen), lists_off)
    except Exception:  # noqa: BLE001  a value the words cannot show must not end the run
        return (
            f"distinctAttribute {attribute}: {need} devices need a value of {attribute} of "
            f"their own, and the devices that could take them have only {len(found)}"
        )


def _shortfall_words(
    attribute: str, found: list[AttributeValue], need: int, chosen: bool, lists_off: int
) -> str:
    values = [_show(v) for v in sorted(found, key=_value_order)]
    shown = ", ".join(values[:SHOWN_VALUES])
    if len(values) > SHOWN_VALUES:
        shown += f" and {len(values) - SHOWN_VALUES} more"
    offered = f"only {len(values)}: {shown}" if values else "none"
    devices = "device needs" if need == 1 else "devices need"
    more = "more " if chosen else ""
    if lists_off:
        offered += f" ({lists_off} list-typed, which need the {LIST_GATE} feature, match nothing)"
    return (
        f"distinctAttribute {attribute}: {need} {more}{devices} a value of {attribute} of "
        f"{'its' if need == 1 else 'their'} own, and the devices that could take "
        f"{'it' if need == 1 else 'them'} have {offered}"
    )


def _value_order(value: AttributeValue) -> tuple:
    """By type, numbers by value, the rest as shown: versions (and anything else) need not
    be orderable."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (type(value).__name__, value, "")
    return (type(value).__name__, 0, _show(value))


def _show(value: AttributeValue) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


# --- in the pipeline ---------------------------------------------------------------------------


class DistinctConstraint:
    """``distinctAttribute`` in the core's Constraint protocol (trace reason ``distinct``)."""

    reason_code = "distinct"
    checks_feasibility = True

    def __init__(self, attribute: str, request_names: frozenset[str], lists: bool) -> None:
        self.attribute = attribute
        self.request_names = request_names
        self.inner = DistinctAttributeConstraint(attribute, (), lists)

    def __repr__(self) -> str:
        return f"distinctAttribute {self.attribute}"

    def applies(self, request: str) -> bool:
        return request_in_scope(self.request_names, request)

    def add(self, request: str, cand) -> str | None:
        if not self.applies(request):
            return None
        if self.inner.add(request, None, cand.device, cand.id):
            return None
        return self.inner.last_failure or f"device {cand.id} is not distinct"

    def remove(self, request: str, cand) -> None:
        if self.applies(request):
            self.inner.remove(request, None, cand.device, cand.id)

    def set_binding_fallback(self, fallback) -> None:
        return None

    def feasibility(self, need: int, candidates: Iterable[Any]) -> str | None:
        """Enough distinct values left for the devices still to choose?"""
        inner = self.inner
        return distinct_shortfall(
            self.attribute, inner._values, inner.list_semantics, need, candidates
        )

    def reset(self) -> None:
        self.inner._values.clear()


def parse_distinct(dc, ctx) -> DistinctConstraint:
    """The ``distinctAttribute`` constraint parser (refused while its gate is off)."""
    gates = ctx.gates
    if not gates.enabled(CAPACITY_GATE):
        raise ValidationError(
            f"claim {ctx.claim_key}: unsupported constraint type 'distinctAttribute' (it needs "
            f"the {CAPACITY_GATE} feature)"
        )
    return DistinctConstraint(
        dc.distinct_attribute, frozenset(dc.requests), gates.enabled(LIST_GATE)
    )
