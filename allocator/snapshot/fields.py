"""Typed field access that records problems with field paths instead of raising.

Every reader returns a usable default after recording a problem, so one pass over a snapshot
collects all of its problems (docs/SNAPSHOT.md: the user sees every problem at once).
"""

from __future__ import annotations

from typing import Any

from allocator.quantity import Quantity, QuantityError
from allocator.requirements import Requirement, RequirementError


class Context:
    """One document being read: where it is and the problems found in it."""

    __slots__ = ("file", "index", "kind", "namespace", "name", "problems")

    def __init__(
        self,
        file: str,
        index: int,
        kind: str,
        namespace: str | None,
        name: str | None,
        problems: list[str],
    ) -> None:
        self.file = file
        self.index = index
        self.kind = kind
        self.namespace = namespace
        self.name = name
        self.problems = problems

    def where(self) -> str:
        name = self.name or "<unnamed>"
        obj = f"{self.namespace}/{name}" if self.namespace is not None else name
        return f"{self.file} doc {self.index} {self.kind} {obj}"

    def problem(self, path: str, message: str) -> None:
        self.problems.append(f"{self.where()}: {path}: {message}")

    # --- containers --------------------------------------------------------------------------

    # The readers below run some 500,000 times for a 10 MB snapshot: one lookup each, and
    # the exact type tested first (documents hold plain dicts and lists).

    def map(self, d: dict, key: str, path: str, required: bool = False) -> dict:
        value = d.get(key) if isinstance(d, dict) else None
        if type(value) is dict:
            return value
        if value is None:
            if required:
                self.problem(path, "required")
            return {}
        if not isinstance(value, dict):
            self.problem(path, f"must be an object, not {_type(value)}")
            return {}
        return value

    def list(self, d: dict, key: str, path: str, required: bool = False) -> list:
        value = d.get(key) if isinstance(d, dict) else None
        if type(value) is list:
            return value
        if value is None:
            if required:
                self.problem(path, "required")
            return []
        if not isinstance(value, list):
            self.problem(path, f"must be a list, not {_type(value)}")
            return []
        return value

    def items(self, d: dict, key: str, path: str, required: bool = False) -> list[tuple[str, dict]]:
        """(path, entry) of a list of objects, skipping (with a problem) non-objects."""
        value = d.get(key) if isinstance(d, dict) else None
        if value is None and not required:
            return []  # most optional lists are absent
        out = []
        for i, entry in enumerate(self.list(d, key, path, required)):
            if type(entry) is dict or isinstance(entry, dict):
                out.append((f"{path}[{i}]", entry))
            else:
                self.problem(f"{path}[{i}]", f"must be an object, not {_type(entry)}")
        return out

    # --- scalars -----------------------------------------------------------------------------

    def str(self, d: dict, key: str, path: str, required: bool = False) -> str | None:
        value = d.get(key) if isinstance(d, dict) else None
        if type(value) is str and (value or not required):
            return value
        if value is None:
            if required:
                self.problem(path, "required")
            return None
        if not isinstance(value, str):
            self.problem(path, f"must be a string, not {_type(value)}")
            return None
        if required and not value:
            self.problem(path, "required")
            return None
        return value

    def int(
        self,
        d: dict,
        key: str,
        path: str,
        default: int | None = None,
        minimum: int | None = None,
    ) -> int | None:
        value = d.get(key) if isinstance(d, dict) else None
        if value is None:
            return default
        ok = isinstance(value, int) and not isinstance(value, bool)
        if ok and (minimum is None or value >= minimum):
            return value
        if minimum is not None:
            self.problem(path, f"must be an integer >= {minimum}")
        else:
            self.problem(path, f"must be an integer, not {_type(value)}")
        return default

    def bool(self, d: dict, key: str, path: str, default: bool = False) -> bool:
        value = d.get(key) if isinstance(d, dict) else None
        if value is None:
            return default
        if not isinstance(value, bool):
            self.problem(path, f"must be true or false, not {_type(value)}")
            return default
        return value

    def number(self, d: dict, key: str, path: str, default: float = 0.0) -> float:
        value = d.get(key) if isinstance(d, dict) else None
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float):
            # Prices sometimes arrive quoted.
            if isinstance(value, str):
                try:
                    return float(value)
                except ValueError:
                    pass
            self.problem(path, f"must be a number, not {_type(value)}")
            return default
        return float(value)

    def strings(self, d: dict, key: str, path: str) -> tuple[str, ...]:
        out = []
        for i, value in enumerate(self.list(d, key, path)):
            if not isinstance(value, str):
                self.problem(f"{path}[{i}]", f"must be a string, not {_type(value)}")
                continue
            out.append(value)
        return tuple(out)

    def string_map(self, d: dict, key: str, path: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for k, value in self.map(d, key, path).items():
            if not isinstance(value, str):
                self.problem(f"{path}.{k}", f"must be a string, not {_type(value)}")
                continue
            out[str(k)] = value
        return out

    def quantity(self, d: dict, key: str, path: str, required: bool = False) -> Quantity | None:
        value = d.get(key) if isinstance(d, dict) else None
        if value is None:
            if required:
                self.problem(path, "required")
            return None
        return self.parse_quantity(value, path)

    def parse_quantity(self, value: Any, path: str) -> Quantity | None:
        try:
            return Quantity.parse(value)
        except QuantityError as err:
            self.problem(path, f"invalid quantity: {err}")
            return None

    def quantity_map(self, d: dict, key: str, path: str) -> dict[str, Quantity]:
        out: dict[str, Quantity] = {}
        for k, value in self.map(d, key, path).items():
            q = self.parse_quantity(value, f"{path}.{k}")
            if q is not None:
                out[str(k)] = q
        return out

    def node_selector_requirements(self, d: dict, key: str, path: str) -> list[dict]:
        """A list of NodeSelectorRequirement(WithMinValues), validated, kept raw."""
        out = []
        for p, r in self.items(d, key, path):
            k = self.str(r, "key", f"{p}.key", required=True)
            op = self.str(r, "operator", f"{p}.operator", required=True)
            values = self.strings(r, "values", f"{p}.values")
            min_values = self.int(r, "minValues", f"{p}.minValues", minimum=1)
            if k is None or op is None:
                continue
            if op in ("In", "NotIn") and not values:
                self.problem(f"{p}.values", f"must not be empty for operator {op}")
                continue
            if op in ("Exists", "DoesNotExist") and values:
                self.problem(f"{p}.values", f"must be empty for operator {op}")
                continue
            try:
                Requirement.new(k, op, values, min_values)
            except RequirementError as err:
                self.problem(p, str(err))
                continue
            out.append(r)
        return out

    def node_selector(self, d: dict, key: str, path: str) -> dict | None:
        """A v1.NodeSelector, validated, returned raw (None when absent)."""
        if not isinstance(d, dict) or d.get(key) is None:
            return None
        ns = self.map(d, key, path)
        for p, term in self.items(ns, "nodeSelectorTerms", f"{path}.nodeSelectorTerms"):
            self.node_selector_requirements(term, "matchExpressions", f"{p}.matchExpressions")
            for fp, f in self.items(term, "matchFields", f"{p}.matchFields"):
                if f.get("key") != "metadata.name":
                    self.problem(f"{fp}.key", "only metadata.name is supported")
            self.node_selector_requirements(term, "matchFields", f"{p}.matchFields")
        return ns


def _type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


# Metadata maps the kind's own reader already checks (checking them twice would report twice).
_READ_BY_BUILDER = {
    "Namespace": ("labels",),
    "Node": ("labels", "annotations"),
    "NodeClaim": ("labels", "annotations"),
    "Pod": ("labels",),
}


def check_metadata(ctx: Context, md: dict) -> None:
    """Shapes of the metadata fields any kind may carry (code reads them from ``raw``)."""
    own = _READ_BY_BUILDER.get(ctx.kind, ())
    for key in ("labels", "annotations"):
        if key not in own:
            ctx.string_map(md, key, f"metadata.{key}")
    for key in ("uid", "generateName", "creationTimestamp", "deletionTimestamp"):
        ctx.str(md, key, f"metadata.{key}")
    for p, ref in ctx.items(md, "ownerReferences", "metadata.ownerReferences"):
        ctx.str(ref, "kind", f"{p}.kind", required=True)
        ctx.str(ref, "name", f"{p}.name", required=True)
        ctx.str(ref, "apiVersion", f"{p}.apiVersion")
        ctx.str(ref, "uid", f"{p}.uid")
        ctx.bool(ref, "controller", f"{p}.controller")
        ctx.bool(ref, "blockOwnerDeletion", f"{p}.blockOwnerDeletion")
