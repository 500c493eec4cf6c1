"""SelectorEngine: compiles DRA device selectors once and evaluates them with memoisation.

Compiling is parsing (``parser``), the Kubernetes DRA environment's type check (``checker``)
and building closures (``interp``), once per expression text; the verdict (a program or
"failed to compile" with the checker's message) is cached.

Device attributes are static within a snapshot, so a selector's verdict depends only on the
device fields it reads. ``compile`` finds those fields in the AST (``fields``); ``matches``
keys its memo on (expression, the values of exactly those fields) and evaluates only on a
miss. Expressions that read the device dynamically (iterate a map, compute a key) are keyed on
the whole normalised device view instead.

One engine per simulation, single-threaded: the memo and the device-view cache are not safe to
share across threads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from allocator.cel import runtime as rt
from allocator.cel.checker import CheckError, check
from allocator.cel.fields import device_fields
from allocator.cel.interp import COST, build
from allocator.cel.parser import ParseError, location, parse
from allocator.model import Device
from allocator.records import record


class CelCompileError(ValueError):
    """A selector that does not compile; the message contains "failed to compile"."""


@record
class MatchOutcome:
    """A selector's answer for one device: matched, or the runtime error."""

    matched: bool
    error: str | None = None  # the runtime error's message when evaluation failed


@record(eq=False)
class CompiledSelector:
    """A checked and compiled selector, with the device fields it reads."""

    expression: str
    program: Callable[[dict], Any]  # the expression's closure over an activation
    fields: tuple[tuple, ...] | None  # sorted device fields read; None: the whole device


_MISSING = ("<missing>",)


def split_name(name: str, driver: str) -> tuple[str, str]:
    """(domain, id) of a qualified name; an unqualified one belongs to the driver's domain."""
    domain, sep, ident = name.rpartition("/")
    return (domain, ident) if sep else (driver, name)


class _View:
    """A device normalised by domain (built lazily), with hashable keys for the memo."""

    __slots__ = (
        "device",
        "driver",
        "_attributes",
        "_capacity",
        "results",
        "_full_key",
        "_cel",
    )

    def __init__(self, device: Device, driver: str) -> None:
        self.device = device  # kept alive: the cache is keyed by id()
        self.driver = driver
        self._attributes: dict[str, dict[str, Any]] | None = None
        self._capacity: dict[str, dict[str, Any]] | None = None
        # Per-selector answers for this very device: a repeat asks no memo key at all.
        self.results: dict[CompiledSelector, MatchOutcome] = {}
        self._full_key: tuple | None = None
        self._cel: dict | None = None

    @property
    def attributes(self) -> dict[str, dict[str, Any]]:
        if self._attributes is None:
            self._attributes = {}
            for name, value in self.device.attributes.items():
                domain, ident = split_name(name, self.driver)
                self._attributes.setdefault(domain, {})[ident] = value
        return self._attributes

    @property
    def capacity(self) -> dict[str, dict[str, Any]]:
        if self._capacity is None:
            self._capacity = {}
            for name, cap in self.device.capacity.items():
                domain, ident = split_name(name, self.driver)
                self._capacity.setdefault(domain, {})[ident] = cap.value
        return self._capacity

    def field(self, f: tuple) -> Any:
        kind = f[0]
        if kind == "driver":
            return self.driver
        if kind == "allowMultipleAllocations":
            return self.device.allow_multiple_allocations
        # Direct lookup in the published names, without normalising the whole device.
        raw = self.device.attributes if kind == "attributes" else self.device.capacity
        domain, ident = f[1], f[2]
        v = raw.get(f"{domain}/{ident}", _MISSING)
        if domain == self.driver:
            short = raw.get(ident, _MISSING)
            if v is _MISSING:
                v = short
            elif short is not _MISSING:  # published twice (invalid): whatever the view holds
                normalised = self.attributes if kind == "attributes" else self.capacity
                return self._typed(normalised[domain][ident])
        if kind == "capacity" and v is not _MISSING:
            v = v.value
        return self._typed(v)

    @staticmethod
    def _typed(v: Any) -> tuple:
        # Typed: True == 1 in Python but not in CEL.
        return (type(v).__name__, v)

    def full_key(self) -> tuple:
        if self._full_key is None:

            def frozen(m: dict[str, dict[str, Any]]) -> tuple:
                return tuple(
                    (d, tuple(sorted((k, type(v).__name__, v) for k, v in ids.items())))
                    for d, ids in sorted(m.items())
                )

            self._full_key = (
                self.driver,
                self.device.allow_multiple_allocations,
                frozen(self.attributes),
                frozen(self.capacity),
            )
        return self._full_key

    def cel(self) -> dict:
        if self._cel is None:
            self._cel = {
                "driver": self.driver,
                "allowMultipleAllocations": bool(self.device.allow_multiple_allocations),
                "attributes": rt.Domains(
                    {
                        d: {k: to_cel(v) for k, v in ids.items()}
                        for d, ids in self.attributes.items()
                    }
                ),
                "capacity": rt.Domains(
                    {
                        d: {k: rt.QuantityValue(v) for k, v in ids.items()}
                        for d, ids in self.capacity.items()
                    }
                ),
            }
        return self._cel


def to_cel(v: Any) -> Any:
    """A snapshot attribute value (bool, int, str, Version, tuple) as a CEL value."""
    if isinstance(v, bool | int | str):
        return v
    if isinstance(v, tuple | list):
        return [to_cel(x) for x in v]
    text = str(v)  # allocator.model.Version
    parsed = rt.parse_semver(text) or rt.parse_semver(text, normalize=True)
    return parsed if parsed is not None else text


def _shown(expression: str) -> str:
    return repr(expression if len(expression) <= 200 else expression[:200] + "...")


def _pointer(expression: str, offset: int) -> str:
    line, col = location(expression, offset)
    text = expression.split("\n")[line - 1] if expression else ""
    if len(text) > 200:
        return f"at line {line}, column {col}"
    return f"at line {line}, column {col}:\n | {text}\n | {'.' * col}^"


class SelectorEngine:
    """Compiles and evaluates DRA CEL selectors for one simulation (one thread).

    ``evaluations`` counts CEL evaluations actually performed; ``memo_hits`` the answers served
    from the memo.
    """

    def __init__(self) -> None:
        self._compiled: dict[str, CompiledSelector] = {}
        self._errors: dict[str, str] = {}
        self._views: dict[tuple[int, str], _View] = {}
        self._memo: dict[tuple, MatchOutcome] = {}
        self.evaluations = 0
        self.memo_hits = 0

    def compile(self, expression: str) -> CompiledSelector:
        hit = self._compiled.get(expression)
        if hit is not None:
            return hit
        if expression in self._errors:
            raise CelCompileError(self._errors[expression])
        try:
            tree = parse(expression)
            checked = check(tree)
            fields = device_fields(tree)
            program = build(tree, checked)
        except ParseError as e:
            msg = (
                f"failed to compile CEL expression {_shown(expression)}: syntax error "
                f"{_pointer(expression, e.offset)}: {e}"
            )
            self._errors[expression] = msg
            raise CelCompileError(msg) from None
        except CheckError as e:
            msg = (
                f"failed to compile CEL expression {_shown(expression)}: {e} "
                f"({_pointer(expression, e.pos)})"
            )
            self._errors[expression] = msg
            raise CelCompileError(msg) from None
        except RecursionError:
            msg = (
                f"failed to compile CEL expression {_shown(expression)}: "
                "expression recursion limit exceeded"
            )
            self._errors[expression] = msg
            raise CelCompileError(msg) from None
        except Exception as e:  # noqa: BLE001 - odd input must not crash a run
            msg = f"failed to compile CEL expression {_shown(expression)}: {type(e).__name__}: {e}"
            self._errors[expression] = msg
            raise CelCompileError(msg) from None
        selector = CompiledSelector(
            expression, program, None if fields is None else tuple(sorted(fields))
        )
        self._compiled[expression] = selector
        return selector

    def _view(self, device: Device, driver: str) -> _View:
        key = (id(device), driver)
        view = self._views.get(key)
        if view is None or view.device is not device:
            view = self._views[key] = _View(device, driver)
        return view

    def matches(self, selector: CompiledSelector, device: Device, driver: str) -> MatchOutcome:
        view = self._view(device, driver)
        known = view.results.get(selector)
        if known is not None:
            self.memo_hits += 1
            return known
        if selector.fields is None:
            key: tuple = (selector.expression, view.full_key())
        else:
            key = (selector.expression, *(view.field(f) for f in selector.fields))
        try:
            hit = self._memo.get(key)
        except TypeError:  # an unhashable attribute value: evaluate without the memo
            key, hit = (), None
        if hit is not None:
            self.memo_hits += 1
            view.results[selector] = hit
            return hit
        outcome = self._evaluate(selector, view)
        if key:
            self._memo[key] = outcome
        view.results[selector] = outcome
        return outcome

    def _evaluate(self, selector: CompiledSelector, view: _View) -> MatchOutcome:
        self.evaluations += 1
        try:
            result = selector.program({"device": view.cel(), COST: [0]})
        except rt.CelError as e:
            return MatchOutcome(False, str(e))
        except RecursionError:
            return MatchOutcome(False, "expression recursion limit exceeded")
        except Exception as e:  # noqa: BLE001 - a library edge case must not crash a run
            return MatchOutcome(False, f"evaluation error: {type(e).__name__}: {e}")
        if result is True or result is False:
            return MatchOutcome(result, None)
        return MatchOutcome(
            False, f"CEL result of type {rt.type_name(result)} could not be converted to bool"
        )
