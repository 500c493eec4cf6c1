"""Device attribute helpers shared by the feature modules: lookup, list-typed values, JSON.

Attribute keys are stored as published: ``model`` (the driver's own domain implied) or
``domain.example.com/model``. A constraint or partition-type attribute always names the fully
qualified form; kube-scheduler falls back to the bare identifier when the domain is the
device's driver.
"""

from __future__ import annotations

from allocator.model import AttributeValue, Device, Version


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
