"""CEL value types and library functions of the Kubernetes DRA CEL environment.

cel-python binds methods by name, not by receiver type (``x.compareTo(y)`` calls the one
function registered as ``compareTo``), so functions whose name several Kubernetes libraries
share (``indexOf`` on strings and lists, ``compareTo`` on quantities and semvers, ``contains``
on strings and ``sets``) dispatch on the receiver here.

Errors raised as ``TypeError`` become cel-python's "no such overload" and ``ValueError`` its
"return error for overflow"; our own messages travel as ``CELEvalError``.
"""

from __future__ import annotations

import math
import re
from typing import Any

from celpy import celtypes
from celpy.evaluation import CELEvalError, base_functions

from allocator.quantity import Quantity, QuantityError

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def _is_bool(x: Any) -> bool:
    return isinstance(x, bool | celtypes.BoolType)


def _err(message: str) -> CELEvalError:
    return CELEvalError(message, ValueError, None)


# --- namespaces: `sets.contains(...)`, `strings.quote(...)`, `optional.of(...)` ----------------


class Namespace:
    """The value bound to ``sets``/``strings``/``optional`` so their functions can be called."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<namespace {self.name}>"


SETS = Namespace("sets")
STRINGS = Namespace("strings")
OPTIONAL = Namespace("optional")
NAMESPACE_VARS = {"sets": SETS, "strings": STRINGS, "optional": OPTIONAL}


# --- quantity ------------------------------------------------------------------------------


class QuantityValue:
    """Kubernetes' CEL ``quantity`` type."""

    __slots__ = ("q",)

    def __init__(self, q: Quantity) -> None:
        self.q = q

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, QuantityValue) and self.q.value == other.q.value

    def __ne__(self, other: Any) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self.q.value)

    def __repr__(self) -> str:
        return f"quantity({str(self.q)!r})"

    def __str__(self) -> str:
        return str(self.q)


def quantity(s: Any) -> QuantityValue:
    if not isinstance(s, str):
        raise TypeError("quantity() takes a string")
    try:
        return QuantityValue(Quantity.parse(str(s)))
    except (QuantityError, ValueError) as e:
        return _err(f"quantity({s!r}): {e}")


def is_quantity(s: Any) -> celtypes.BoolType:
    if not isinstance(s, str):
        raise TypeError("isQuantity() takes a string")
    try:
        Quantity.parse(str(s))
    except (QuantityError, ValueError):
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _as_quantity(x: Any) -> Quantity:
    if isinstance(x, QuantityValue):
        return x.q
    if isinstance(x, int) and not _is_bool(x):
        return Quantity.parse(int(x))
    raise TypeError(f"expected a quantity or int, got {type(x).__name__}")


# --- semver --------------------------------------------------------------------------------

_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)


class SemverValue:
    """Kubernetes' CEL ``semver`` type (and the value of ``version`` attributes)."""

    __slots__ = ("major", "minor", "patch", "pre", "text")

    def __init__(self, major: int, minor: int, patch: int, pre: tuple, text: str) -> None:
        self.major, self.minor, self.patch, self.pre, self.text = major, minor, patch, pre, text

    def _key(self) -> tuple:
        return (self.major, self.minor, self.patch)

    def compare(self, other: SemverValue) -> int:
        a, b = self._key(), other._key()
        if a != b:
            return -1 if a < b else 1
        # Semver precedence: a pre-release sorts before the release; identifiers compare
        # numerically when numeric, numeric before alphanumeric, shorter list first.
        if self.pre == other.pre:
            return 0
        if not self.pre:
            return 1
        if not other.pre:
            return -1
        for x, y in zip(self.pre, other.pre, strict=False):
            if x == y:
                continue
            if isinstance(x, int) and isinstance(y, int):
                return -1 if x < y else 1
            if isinstance(x, int):
                return -1
            if isinstance(y, int):
                return 1
            return -1 if x < y else 1
        return -1 if len(self.pre) < len(other.pre) else 1

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, SemverValue) and self.compare(other) == 0

    def __ne__(self, other: Any) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash((self._key(), self.pre))

    def __repr__(self) -> str:
        return f"semver({self.text!r})"

    def __str__(self) -> str:
        return self.text


def _normalize_semver(s: str) -> str:
    # Kubernetes' normalize: drop a leading "v", pad missing minor/patch with zeros and strip
    # leading zeros from the numeric parts.
    if s.startswith("v"):
        s = s[1:]
    m = re.match(r"^(\d+)(?:\.(\d+))?(?:\.(\d+))?(.*)$", s)
    if not m:
        return s
    parts = [str(int(p)) if p is not None else "0" for p in m.group(1, 2, 3)]
    return ".".join(parts) + m.group(4)


def parse_semver(s: str, normalize: bool = False) -> SemverValue | None:
    text = _normalize_semver(s) if normalize else s
    m = _SEMVER.match(text)
    if not m:
        return None
    pre = tuple(int(p) if p.isdigit() else p for p in m.group(4).split(".")) if m.group(4) else ()
    return SemverValue(int(m.group(1)), int(m.group(2)), int(m.group(3)), pre, text)


def semver(s: Any, normalize: Any = False) -> SemverValue:
    if not isinstance(s, str) or not _is_bool(normalize):
        raise TypeError("semver() takes a string and an optional bool")
    v = parse_semver(str(s), bool(normalize))
    if v is None:
        return _err(f"semver({s!r}): invalid semantic version")
    return v


def is_semver(s: Any, normalize: Any = False) -> celtypes.BoolType:
    if not isinstance(s, str) or not _is_bool(normalize):
        raise TypeError("isSemver() takes a string and an optional bool")
    return celtypes.BoolType(parse_semver(str(s), bool(normalize)) is not None)


# --- optional ------------------------------------------------------------------------------


class OptionalValue:
    """CEL's ``optional_type``: ``optional.of(x)`` / ``optional.none()``."""

    __slots__ = ("value",)
    _MISSING = object()

    def __init__(self, value: Any = _MISSING) -> None:
        self.value = value

    @property
    def present(self) -> bool:
        return self.value is not OptionalValue._MISSING

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, OptionalValue) and (
            (not self.present and not other.present) or self.value == other.value
        )

    def __hash__(self) -> int:
        return hash(self.value) if self.present else 0

    def __repr__(self) -> str:
        return f"optional.of({self.value!r})" if self.present else "optional.none()"


NONE = OptionalValue()


def _zero(v: Any) -> bool:
    if isinstance(v, int | float | str | bytes):
        return not v
    if isinstance(v, list | dict):
        return len(v) == 0
    return v is None


def opt_field(x: Any, key: Any) -> Any:
    """``x.?key`` and ``x[?key]`` (the parser rewrites both into this call)."""
    if isinstance(x, OptionalValue):
        if not x.present:
            return NONE
        x = x.value
    if isinstance(x, dict):
        return OptionalValue(x[key]) if key in x else NONE
    if isinstance(x, list):
        if not isinstance(key, int) or _is_bool(key):
            raise TypeError("list index must be an int")
        return OptionalValue(x[key]) if 0 <= key < len(x) else NONE
    raise TypeError(f"optional selection on {type(x).__name__}")


def _opt_value(o: Any) -> Any:
    if not isinstance(o, OptionalValue):
        raise TypeError("value() needs an optional")
    return o.value if o.present else _err("optional.none() dereference")


def _opt_has_value(o: Any) -> celtypes.BoolType:
    if not isinstance(o, OptionalValue):
        raise TypeError("hasValue() needs an optional")
    return celtypes.BoolType(o.present)


def _opt_or_value(o: Any, default: Any) -> Any:
    if not isinstance(o, OptionalValue):
        raise TypeError("orValue() needs an optional")
    return o.value if o.present else default


def _opt_or(o: Any, other: Any) -> Any:
    if not isinstance(o, OptionalValue) or not isinstance(other, OptionalValue):
        raise TypeError("or() needs two optionals")
    return o if o.present else other


# --- dispatching methods -------------------------------------------------------------------


def _compare_to(a: Any, b: Any) -> celtypes.IntType:
    if isinstance(a, QuantityValue) and isinstance(b, QuantityValue):
        return celtypes.IntType((a.q > b.q) - (a.q < b.q))
    if isinstance(a, SemverValue) and isinstance(b, SemverValue):
        return celtypes.IntType(a.compare(b))
    raise TypeError("compareTo needs two quantities or two semvers")


def _greater(a: Any, b: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_compare_to(a, b) > 0)


def _less(a: Any, b: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_compare_to(a, b) < 0)


def _q_add(a: Any, b: Any) -> QuantityValue:
    if not isinstance(a, QuantityValue):
        raise TypeError("add() needs a quantity")
    return QuantityValue(a.q + _as_quantity(b))


def _q_sub(a: Any, b: Any) -> QuantityValue:
    if not isinstance(a, QuantityValue):
        raise TypeError("sub() needs a quantity")
    return QuantityValue(a.q - _as_quantity(b))


def _q_as_integer(a: Any) -> celtypes.IntType:
    if not isinstance(a, QuantityValue):
        raise TypeError("asInteger() needs a quantity")
    v = a.q.as_int()
    if v is None:
        return _err(f"cannot convert value to integer: {a.q} is not an integer or overflows int64")
    return celtypes.IntType(v)


def _q_as_float(a: Any) -> celtypes.DoubleType:
    if not isinstance(a, QuantityValue):
        raise TypeError("asApproximateFloat() needs a quantity")
    return celtypes.DoubleType(a.q.as_float())


def _q_is_integer(a: Any) -> celtypes.BoolType:
    if not isinstance(a, QuantityValue):
        raise TypeError("isInteger() needs a quantity")
    v = a.q.value
    return celtypes.BoolType(v.denominator == 1 and INT64_MIN <= v.numerator <= INT64_MAX)


def _q_sign(a: Any) -> celtypes.IntType:
    if not isinstance(a, QuantityValue):
        raise TypeError("sign() needs a quantity")
    return celtypes.IntType(a.q.sign())


def _major(a: Any) -> celtypes.IntType:
    if not isinstance(a, SemverValue):
        raise TypeError("major() needs a semver")
    return celtypes.IntType(a.major)


def _minor(a: Any) -> celtypes.IntType:
    if not isinstance(a, SemverValue):
        raise TypeError("minor() needs a semver")
    return celtypes.IntType(a.minor)


def _patch(a: Any) -> celtypes.IntType:
    if not isinstance(a, SemverValue):
        raise TypeError("patch() needs a semver")
    return celtypes.IntType(a.patch)


_base_contains = base_functions["contains"]


def _contains(a: Any, *args: Any) -> Any:
    if a is SETS:
        return _sets_contains(*args)
    return _base_contains(a, *args)


def _check_lists(*ls: Any) -> None:
    for x in ls:
        if not isinstance(x, list):
            raise TypeError("sets functions take lists")


def _sets_contains(a: Any, b: Any) -> celtypes.BoolType:
    _check_lists(a, b)
    return celtypes.BoolType(all(x in a for x in b))


def _intersects(ns: Any, a: Any, b: Any) -> celtypes.BoolType:
    if ns is not SETS:
        raise TypeError("intersects() is sets.intersects(list, list)")
    _check_lists(a, b)
    return celtypes.BoolType(any(x in a for x in b))


def _equivalent(ns: Any, a: Any, b: Any) -> celtypes.BoolType:
    if ns is not SETS:
        raise TypeError("equivalent() is sets.equivalent(list, list)")
    _check_lists(a, b)
    return celtypes.BoolType(all(x in a for x in b) and all(x in b for x in a))


def _of(ns: Any, v: Any) -> OptionalValue:
    if ns is not OPTIONAL:
        raise TypeError("of() is optional.of(value)")
    return OptionalValue(v)


def _none(ns: Any) -> OptionalValue:
    if ns is not OPTIONAL:
        raise TypeError("none() is optional.none()")
    return NONE


def _of_non_zero(ns: Any, v: Any) -> OptionalValue:
    if ns is not OPTIONAL:
        raise TypeError("ofNonZeroValue() is optional.ofNonZeroValue(value)")
    return NONE if _zero(v) else OptionalValue(v)


# --- strings extension ---------------------------------------------------------------------


def _need_str(*xs: Any) -> None:
    for x in xs:
        if not isinstance(x, str):
            raise TypeError("expected a string")


def _need_int(*xs: Any) -> None:
    for x in xs:
        if not isinstance(x, int) or _is_bool(x):
            raise TypeError("expected an int")


def _char_at(s: Any, i: Any) -> celtypes.StringType:
    _need_str(s)
    _need_int(i)
    if not 0 <= i <= len(s):
        return _err(f"index out of range: {i}")
    return celtypes.StringType(s[i : i + 1])


def _index_of(x: Any, sub: Any, offset: Any = None) -> celtypes.IntType:
    if isinstance(x, list):
        if offset is not None:
            raise TypeError("list indexOf takes one argument")
        for i, v in enumerate(x):
            if v == sub:
                return celtypes.IntType(i)
        return celtypes.IntType(-1)
    _need_str(x, sub)
    start = 0 if offset is None else offset
    _need_int(start)
    if not 0 <= start <= len(x):
        return _err(f"index out of range: {start}")
    return celtypes.IntType(x.find(sub, start))


def _last_index_of(x: Any, sub: Any, offset: Any = None) -> celtypes.IntType:
    if isinstance(x, list):
        if offset is not None:
            raise TypeError("list lastIndexOf takes one argument")
        for i in range(len(x) - 1, -1, -1):
            if x[i] == sub:
                return celtypes.IntType(i)
        return celtypes.IntType(-1)
    _need_str(x, sub)
    if offset is None:
        return celtypes.IntType(x.rfind(sub))
    _need_int(offset)
    if not 0 <= offset < max(len(x), 1):
        return _err(f"index out of range: {offset}")
    return celtypes.IntType(x.rfind(sub, 0, offset + len(sub)))


def _lower_ascii(s: Any) -> celtypes.StringType:
    _need_str(s)
    return celtypes.StringType("".join(c.lower() if c.isascii() else c for c in s))


def _upper_ascii(s: Any) -> celtypes.StringType:
    _need_str(s)
    return celtypes.StringType("".join(c.upper() if c.isascii() else c for c in s))


def _replace(s: Any, old: Any, new: Any, n: Any = -1) -> celtypes.StringType:
    _need_str(s, old, new)
    _need_int(n)
    return celtypes.StringType(s.replace(old, new, n if n >= 0 else -1))


def _split(s: Any, sep: Any, n: Any = -1) -> celtypes.ListType:
    _need_str(s, sep)
    _need_int(n)
    if n == 0:
        return celtypes.ListType([])
    if sep == "":
        parts = list(s)
        if n > 0 and len(parts) > n:
            parts = parts[: n - 1] + ["".join(parts[n - 1 :])]
    else:
        parts = s.split(sep, n - 1) if n > 0 else s.split(sep)
    return celtypes.ListType(celtypes.StringType(p) for p in parts)


def _join(xs: Any, sep: Any = "") -> celtypes.StringType:
    if not isinstance(xs, list):
        raise TypeError("join() needs a list of strings")
    _need_str(sep, *xs)
    return celtypes.StringType(sep.join(xs))


def _substring(s: Any, start: Any, end: Any = None) -> celtypes.StringType:
    _need_str(s)
    end = len(s) if end is None else end
    _need_int(start, end)
    if not 0 <= start <= end <= len(s):
        return _err(f"index out of range: substring({start}, {end}) of length {len(s)}")
    return celtypes.StringType(s[start:end])


def _trim(s: Any) -> celtypes.StringType:
    _need_str(s)
    return celtypes.StringType(s.strip())


def _quote(ns: Any, s: Any) -> celtypes.StringType:
    if ns is not STRINGS:
        raise TypeError("quote() is strings.quote(string)")
    _need_str(s)
    escapes = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    escapes |= {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\v": "\\v"}
    return celtypes.StringType('"' + "".join(escapes.get(c, c) for c in s) + '"')


_FORMAT = re.compile(r"%(?:\.(\d+))?([sdfeboxX%])")


def _format_one(spec: str, prec: str | None, v: Any) -> str:
    if spec == "s":
        if _is_bool(v):
            return "true" if v else "false"
        if isinstance(v, list):
            return "[" + ", ".join(_format_one("s", None, x) for x in v) + "]"
        return str(v)
    if spec == "d":
        _need_int(v)
        return str(int(v))
    if spec in "fe":
        if not isinstance(v, int | float) or _is_bool(v):
            raise TypeError("%f/%e need a number")
        return f"{float(v):.{6 if prec is None else int(prec)}{spec}}"
    if spec in "boxX":
        if isinstance(v, str):
            return v.encode().hex() if spec == "x" else v.encode().hex().upper()
        _need_int(v)
        return format(int(v), spec)
    raise TypeError(f"unsupported format %{spec}")


def _format(s: Any, args: Any) -> celtypes.StringType:
    _need_str(s)
    if not isinstance(args, list):
        raise TypeError("format() takes a list of arguments")
    out: list[str] = []
    pos, i = 0, 0
    for m in _FORMAT.finditer(s):
        out.append(s[pos : m.start()])
        pos = m.end()
        if m.group(2) == "%":
            out.append("%")
            continue
        if i >= len(args):
            return _err(f"format: not enough arguments for {s!r}")
        out.append(_format_one(m.group(2), m.group(1), args[i]))
        i += 1
    out.append(s[pos:])
    return celtypes.StringType("".join(out))


# --- lists extension -----------------------------------------------------------------------


def _comparable(xs: Any) -> list:
    if not isinstance(xs, list):
        raise TypeError("expected a list")
    out = []
    for x in xs:
        if isinstance(x, QuantityValue):
            out.append(x.q)
        elif isinstance(x, SemverValue):
            out.append((x.major, x.minor, x.patch))
        else:
            out.append(x)
    return out


def _is_sorted(xs: Any) -> celtypes.BoolType:
    ys = _comparable(xs)
    return celtypes.BoolType(all(ys[i] <= ys[i + 1] for i in range(len(ys) - 1)))


def _sum(xs: Any) -> Any:
    if not isinstance(xs, list):
        raise TypeError("sum() needs a list")
    if not xs:
        return celtypes.IntType(0)
    if all(isinstance(x, QuantityValue) for x in xs):
        total = xs[0].q
        for x in xs[1:]:
            total = total + x.q
        return QuantityValue(total)
    if all(isinstance(x, int) and not _is_bool(x) for x in xs):
        return celtypes.IntType(sum(int(x) for x in xs))
    if all(isinstance(x, float) for x in xs):
        return celtypes.DoubleType(math.fsum(xs))
    raise TypeError("sum() needs a list of ints, doubles or quantities")


def _max(xs: Any, *more: Any) -> Any:
    if more:  # max(a, b, ...) form
        xs = [xs, *more]
    if not isinstance(xs, list):
        raise TypeError("max() needs a list")
    if not xs:
        return _err("max() of an empty list")
    ys = _comparable(xs)
    best = 0
    for i in range(1, len(ys)):
        if ys[i] > ys[best]:
            best = i
    return xs[best]


def _and(x: Any, y: Any) -> Any:
    # cel-python reports error && error as a type error; keep the first real message.
    if isinstance(x, CELEvalError) and isinstance(y, CELEvalError):
        return x
    return celtypes.logical_and(x, y)


def _or(x: Any, y: Any) -> Any:
    if isinstance(x, CELEvalError) and isinstance(y, CELEvalError):
        return x
    return celtypes.logical_or(x, y)


FUNCTIONS: dict[str, Any] = {
    "_&&_": _and,
    "_||_": _or,
    # Kubernetes quantity library
    "quantity": quantity,
    "isQuantity": is_quantity,
    "compareTo": _compare_to,
    "isGreaterThan": _greater,
    "isLessThan": _less,
    "add": _q_add,
    "sub": _q_sub,
    "asInteger": _q_as_integer,
    "asApproximateFloat": _q_as_float,
    "isInteger": _q_is_integer,
    "sign": _q_sign,
    # Kubernetes semver library
    "semver": semver,
    "isSemver": is_semver,
    "major": _major,
    "minor": _minor,
    "patch": _patch,
    # sets library and the string "contains" it shares a name with
    "contains": _contains,
    "intersects": _intersects,
    "equivalent": _equivalent,
    # optional types
    "of": _of,
    "none": _none,
    "ofNonZeroValue": _of_non_zero,
    "value": _opt_value,
    "hasValue": _opt_has_value,
    "orValue": _opt_or_value,
    "or": _opt_or,
    "cel__opt": opt_field,
    # strings extension
    "charAt": _char_at,
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "lowerAscii": _lower_ascii,
    "upperAscii": _upper_ascii,
    "replace": _replace,
    "split": _split,
    "join": _join,
    "substring": _substring,
    "trim": _trim,
    "quote": _quote,
    "format": _format,
    # lists library (min() is a cel-python built-in macro)
    "isSorted": _is_sorted,
    "sum": _sum,
    "max": _max,
}

# Names cel-python itself evaluates (macros and built-ins), for the compile-time name check.
# cel-python also has a non-standard reduce() macro; Kubernetes has none, so it is not declared.
MACROS = frozenset({"has", "all", "exists", "exists_one", "map", "filter", "min"})
KNOWN_FUNCTIONS = frozenset(FUNCTIONS) | frozenset(base_functions) | MACROS


def to_cel(v: Any) -> Any:
    """A snapshot attribute value (bool, int, str, Version, tuple) as a CEL value."""
    if isinstance(v, bool):
        return celtypes.BoolType(v)
    if isinstance(v, int):
        return celtypes.IntType(v)
    if isinstance(v, str):
        return celtypes.StringType(v)
    if isinstance(v, tuple | list):
        return celtypes.ListType(to_cel(x) for x in v)
    if isinstance(v, Quantity):
        return QuantityValue(v)
    text = str(v)  # allocator.model.Version
    parsed = parse_semver(text) or parse_semver(text, normalize=True)
    return parsed if parsed is not None else celtypes.StringType(text)
