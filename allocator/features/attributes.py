"""Device attribute helpers shared by the feature modules: lookup, list-typed values, JSON.

Attribute keys are stored as published: ``model`` (the driver's own domain implied) or
``domain.example.com/model``. A constraint or partition-type attribute always names the fully
qualified form; kube-scheduler falls back to the bare identifier when the domain is the
device's driver.
"""

from __future__ import annotations

from typing import Any

from allocator.constraints import MatchAttributeConstraint, request_in_scope
from allocator.model import AttributeValue, Device, Version
from allocator.pools import DeviceWithID

LIST_GATE = "DRAListTypeAttributes"


def lookup_attribute(device: Device, driver: str, name: str) -> AttributeValue | None:
    """The value of attribute ``name`` on ``device`` (published by ``driver``), or None."""
    attributes = device.attributes
    if name in attributes:
        return attributes[name]
    domain, sep, identifier = name.partition("/")
    if sep and domain == driver and identifier in attributes:
        return attributes[identifier]
    if not sep:
        qualified = f"{driver}/{name}"
        if qualified in attributes:
            return attributes[qualified]
    return None


def is_list_value(value: AttributeValue | None) -> bool:
    return isinstance(value, tuple)


def as_value_set(value: AttributeValue) -> frozenset[tuple[type, object]]:
    """A scalar as a one-element set, a list as the set of its elements (typed, so that
    ``True`` and ``1`` stay different values as they are in Kubernetes)."""
    items = value if isinstance(value, tuple) else (value,)
    return frozenset((type(item), item) for item in items)


def encode_attribute(value: AttributeValue) -> dict:
    """The ResourceSlice JSON form of an attribute value (``{"string": "H100"}``...)."""
    if isinstance(value, tuple):
        if not value:
            return {"strings": []}
        first = value[0]
        if isinstance(first, bool):
            return {"bools": list(value)}
        if isinstance(first, int):
            return {"ints": list(value)}
        if isinstance(first, Version):
            return {"versions": [str(v) for v in value]}
        return {"strings": [str(v) for v in value]}
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, Version):
        return {"version": str(value)}
    return {"string": str(value)}


# --- matchAttribute with list-typed values, in the pipeline ------------------------------------


def _show_set(values: frozenset) -> str:
    return "[" + ", ".join(sorted(str(v) for _, v in values)) + "]"


# A pinned value: (type, value) for a scalar, a frozenset of (type, value) for list values.
Pin = tuple | frozenset


def _pin(value: Any) -> Pin:
    return as_value_set(value) if is_list_value(value) else (type(value), value)


def _meet(current: Pin, value: Any) -> Pin | None:
    """The pinned values that ``value`` keeps (None: no common value)."""
    if isinstance(current, frozenset) or is_list_value(value):
        have = current if isinstance(current, frozenset) else frozenset((current,))
        common = have & as_value_set(value)
        return common or None
    return current if current == (type(value), value) else None  # scalars: type and value


def _show_pin(pin: Pin) -> Any:
    if isinstance(pin, frozenset):
        return next(iter(pin))[1] if len(pin) == 1 else _show_set(pin)
    return pin[1]


class ListMatchAttributeConstraint(MatchAttributeConstraint):
    """``matchAttribute`` whose concrete path knows list-typed values: with the gate on the
    devices' value sets must keep a non-empty intersection (a scalar is a one-value set);
    with it off a list value matches nothing. Scalars compare by type and value."""

    __slots__ = ("lists", "stack")

    def __init__(self, attribute: str, request_names: frozenset[str], lists: bool) -> None:
        super().__init__(attribute, request_names)
        self.lists = lists
        self.stack: list[Pin] = []

    def check(self, cand: DeviceWithID) -> str | None:
        value = self._lookup(cand)
        if value is not None and not self.lists and is_list_value(value):
            return (
                f"device {cand.id} has a list-typed {self.attribute}, which needs the "
                f"{LIST_GATE} feature"
            )
        if self.mode == self.CONCRETE and value is not None:
            if _meet(self.stack[-1], value) is None:
                shown = _show_set(as_value_set(value)) if is_list_value(value) else value
                return f"device {cand.id} has {self.attribute}={shown}, not {self.value}"
            return None
        return super().check(cand)

    def add(self, request: str, cand: DeviceWithID) -> str | None:
        if not request_in_scope(self.request_names, request):
            return None
        reason = self.check(cand)
        if reason is not None:
            return reason
        value = self._lookup(cand)
        if self.mode is None:
            self.mode = self.CONCRETE if value is not None else self.BINDING
        if self.mode == self.CONCRETE:
            pin = _meet(self.stack[-1], value) if self.stack else _pin(value)
            self.stack.append(pin)
            self.value = _show_pin(pin)
        self.devices.append(cand)
        return None

    def remove(self, request: str, cand: DeviceWithID) -> None:
        if not request_in_scope(self.request_names, request):
            return
        if self.mode == self.CONCRETE:
            self.stack.pop()
        super().remove(request, cand)
        if self.stack:
            self.value = _show_pin(self.stack[-1])

    def reset(self) -> None:
        super().reset()
        self.stack.clear()


def parse_match_attribute(dc, ctx) -> ListMatchAttributeConstraint:
    """The ``matchAttribute`` constraint parser of the features' pipeline."""
    return ListMatchAttributeConstraint(
        dc.match_attribute, frozenset(dc.requests), ctx.gates.enabled(LIST_GATE)
    )
