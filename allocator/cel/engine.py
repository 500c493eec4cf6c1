"""SelectorEngine: compiles DRA device selectors once and evaluates them with memoisation.

Device attributes are static within a snapshot, so a selector's verdict depends only on the
device fields it reads. ``compile`` finds those fields in the AST; ``matches`` keys its memo on
(expression, the values of exactly those fields) and evaluates only on a miss. Expressions that
read the device dynamically (iterate a map, compute a key) are keyed on the whole normalised
device view instead.

One engine per simulation, single-threaded: the memo, the device-view cache and cel-python's
evaluator state are not safe to share across threads.

Runner: cel-python's interpreter, with the grammar's pass-through levels removed from the AST
(``syntax.collapse``) and the base activation built once. Its ``CompiledRunner`` was tried and
not used: its transpiler names extension functions by module path (which the generated code
cannot import), rejects ``list.min()`` and still clones the activation on every evaluation.
With the memo, evaluations are rare (one per distinct value of the fields read).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import celpy
import celpy.evaluation
from celpy import celtypes
from celpy.evaluation import CELEvalError, Evaluator

from allocator.cel.syntax import RewriteError, check, collapse, device_fields, rewrite_optional
from allocator.cel.values import FUNCTIONS, NAMESPACE_VARS, to_cel
from allocator.model import Device

# cel-python's evaluator calls typing.cast(Tuple[Result, ...], x) on every node; building those
# subscripted types hashes the large ``Result`` Union each time, which is ~40% of an evaluation.
# The aliases are used only for static typing (no isinstance, no get_type_hints), so making them
# Any removes that cost without changing behaviour.
for _alias in ("Result", "Result_Function", "CELFunction"):
    setattr(celpy.evaluation, _alias, Any)


class _Runner(celpy.InterpretedRunner):
    """cel-python's interpreted runner, building the base activation once, not per evaluation."""

    def __init__(self, environment: celpy.Environment, ast: Any, functions: Any) -> None:
        super().__init__(environment, ast, functions)
        self._base = self.new_activation()

    def evaluate(self, context: Any) -> Any:
        # set_activation() clones the base, so it is never mutated by an evaluation.
        return Evaluator(ast=self.ast, activation=self._base).evaluate(context)


class CelCompileError(ValueError):
    """A selector that does not compile; the message contains "failed to compile"."""


@dataclass(slots=True)
class MatchOutcome:
    matched: bool
    error: str | None = None  # the runtime error's message when evaluation failed


@dataclass(slots=True, eq=False)
class CompiledSelector:
    expression: str
    program: Any  # celpy Runner
    fields: tuple[tuple, ...] | None  # sorted device fields read; None: the whole device


_MISSING = ("<missing>",)


class _Domains(celtypes.MapType):
    """``device.attributes`` / ``device.capacity``: an unknown domain is an empty map."""

    def __missing__(self, key: Any) -> celtypes.MapType:
        return celtypes.MapType()


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
        self._cel: celtypes.MapType | None = None

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

    def cel(self) -> celtypes.MapType:
        if self._cel is None:
            self._cel = celtypes.MapType(
                {
                    celtypes.StringType("driver"): celtypes.StringType(self.driver),
                    celtypes.StringType("allowMultipleAllocations"): celtypes.BoolType(
                        self.device.allow_multiple_allocations
                    ),
                    celtypes.StringType("attributes"): _domains(self.attributes),
                    celtypes.StringType("capacity"): _domains(self.capacity),
                }
            )
        return self._cel


def _domains(m: dict[str, dict[str, Any]]) -> _Domains:
    return _Domains(
        {
            celtypes.StringType(d): celtypes.MapType(
                {celtypes.StringType(k): to_cel(v) for k, v in ids.items()}
            )
            for d, ids in m.items()
        }
    )


def _shown(expression: str) -> str:
    return repr(expression if len(expression) <= 200 else expression[:200] + "...")


_OPERATORS = {
    "addition_add": "_+_",
    "addition_sub": "_-_",
    "multiplication_mul": "_*_",
    "multiplication_div": "_/_",
    "multiplication_mod": "_%_",
    "relation_lt": "_<_",
    "relation_le": "_<=_",
    "relation_gt": "_>_",
    "relation_ge": "_>=_",
    "relation_eq": "_==_",
    "relation_ne": "_!=_",
    "relation_in": "@in",
    "unary_neg": "-_",
    "unary_not": "!_",
}
_TOKEN = re.compile(r"Token\('RULE', '(\w+)'\)")
_CLASS = re.compile(r"<class '(?:[\w.]+\.)?(\w+?)(?:Type)?'>")


def _message(e: Any) -> str:
    """A runtime error as cel-go words it where cel-python's text differs."""
    if not isinstance(e, CELEvalError):
        return f"{type(e).__name__}: {e}"
    msg = str(e.args[0]) if e.args else "CEL evaluation error"
    if msg == "no such key" and len(e.args) > 2 and e.args[2]:
        return f"no such key: {e.args[2][0]}"
    if msg.startswith("no such member in mapping: "):
        return "no such key: " + msg.removeprefix("no such member in mapping: ").strip("'")
    msg = _TOKEN.sub(lambda m: _OPERATORS.get(m.group(1), m.group(1)), msg)
    return _CLASS.sub(lambda m: m.group(1).lower(), msg)


class SelectorEngine:
    """Compiles and evaluates DRA CEL selectors for one simulation (one thread).

    ``evaluations`` counts CEL evaluations actually performed; ``memo_hits`` the answers served
    from the memo.
    """

    def __init__(self) -> None:
        # cel-python builds its lark grammar once per process (~0.2 s); later Environments
        # reuse it and cost microseconds. One per engine: Environment.compile keeps state.
        self._env = celpy.Environment(runner_class=_Runner)
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
            text = rewrite_optional(expression)
            tree = self._env.compile(text)
            problem = check(tree)
            if problem is not None:
                raise CelCompileError(problem)
            fields = device_fields(tree)
            program = self._env.program(collapse(tree), functions=FUNCTIONS)
        except celpy.CELParseError as e:
            where = f" at line {e.line}, column {e.column}" if e.line is not None else ""
            context = str(e.args[0]).rstrip() if e.args else ""
            msg = f"failed to compile CEL expression {_shown(expression)}: syntax error{where}:\n{context}"
            self._errors[expression] = msg
            raise CelCompileError(msg) from None
        except (RewriteError, CelCompileError) as e:
            msg = f"failed to compile CEL expression {_shown(expression)}: {e}"
            self._errors[expression] = msg
            raise CelCompileError(msg) from None
        except (RecursionError, Exception) as e:  # cel-python internals on odd input
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
            result = selector.program.evaluate({"device": view.cel(), **NAMESPACE_VARS})
        except Exception as e:  # cel-python raises for some errors, returns others
            return MatchOutcome(False, _message(e))
        if isinstance(result, CELEvalError):
            return MatchOutcome(False, _message(result))
        if not isinstance(result, celtypes.BoolType):
            return MatchOutcome(
                False, f"CEL result of type {type(result).__name__} is not a boolean"
            )
        return MatchOutcome(bool(result), None)
