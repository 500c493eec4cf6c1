"""CEL values and run-time semantics (cel-spec, cel-go) for the DRA environment.

Values are plain Python objects: ``bool``, ``int`` (CEL int), ``UInt``, ``float``, ``str``,
``bytes``, ``None``, ``list``, ``dict``, and small classes for the other CEL and Kubernetes
types. A run-time error is the exception ``CelError``; the logical operators and the
``all``/``exists`` macros absorb it where CEL's commutative logic says so.

Equality is CEL's heterogeneous equality: values of different types are unequal (never an
error), except that int, uint and double compare numerically.
"""

from __future__ import annotations

import ipaddress
import math
import re
from datetime import UTC, datetime, timedelta, timezone
from fractions import Fraction
from functools import lru_cache
from typing import Any

from allocator.quantity import Quantity, QuantityError

INT64_MIN, INT64_MAX, UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1


class CelError(Exception):
    """A CEL run-time error (its message is cel-go's where it matters)."""


class UInt(int):
    """CEL ``uint``: an int of its own type, so ``type()`` and overloads tell them apart."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{int(self)}u"


def no_overload(name: str, *args: Any) -> CelError:
    shown = ", ".join(type_name(a) for a in args)
    return CelError(f"found no matching overload for '{name}' applied to '({shown})'")


# --- Kubernetes and CEL value classes ------------------------------------------------------


class TypeValue:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, TypeValue) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return self.name


class QuantityValue:
    __slots__ = ("q",)

    def __init__(self, q: Quantity) -> None:
        self.q = q

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, QuantityValue) and self.q.value == other.q.value

    def __hash__(self) -> int:
        return hash(self.q.value)

    def __repr__(self) -> str:
        return f"quantity({str(self.q)!r})"


class SemverValue:
    __slots__ = ("major", "minor", "patch", "pre", "text")

    def __init__(self, major: int, minor: int, patch: int, pre: tuple, text: str) -> None:
        self.major, self.minor, self.patch, self.pre, self.text = major, minor, patch, pre, text

    def compare(self, other: SemverValue) -> int:
        a = (self.major, self.minor, self.patch)
        b = (other.major, other.minor, other.patch)
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

    def __hash__(self) -> int:
        return hash((self.major, self.minor, self.patch, self.pre))

    def __repr__(self) -> str:
        return f"semver({self.text!r})"


class OptionalValue:
    __slots__ = ("value", "present")

    def __init__(self, value: Any = None, present: bool = True) -> None:
        self.value, self.present = value, present

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, OptionalValue) or self.present != other.present:
            return False
        return not self.present or eq(self.value, other.value)

    def __hash__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return f"optional.of({self.value!r})" if self.present else "optional.none()"


NONE = OptionalValue(None, False)


class IPValue:
    __slots__ = ("addr",)

    def __init__(self, addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> None:
        self.addr = addr

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, IPValue) and self.addr == other.addr

    def __hash__(self) -> int:
        return hash(self.addr)

    def __str__(self) -> str:
        return str(self.addr)


class CIDRValue:
    __slots__ = ("addr", "bits")

    def __init__(self, addr: ipaddress.IPv4Address | ipaddress.IPv6Address, bits: int) -> None:
        self.addr, self.bits = addr, bits

    def network(self) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
        return ipaddress.ip_network(f"{self.addr}/{self.bits}", strict=False)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, CIDRValue) and (self.addr, self.bits) == (other.addr, other.bits)

    def __hash__(self) -> int:
        return hash((self.addr, self.bits))

    def __str__(self) -> str:
        return f"{self.addr}/{self.bits}"


class URLValue:
    __slots__ = ("scheme", "host", "path", "raw_path", "query", "text")

    def __init__(self, text: str, scheme: str, host: str, path: str, query: str) -> None:
        self.text, self.scheme, self.host, self.path, self.query = text, scheme, host, path, query
        self.raw_path = path

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, URLValue) and self.text == other.text

    def __hash__(self) -> int:
        return hash(self.text)


class FormatValue:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, FormatValue) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)


class Duration:
    __slots__ = ("ns",)

    def __init__(self, ns: int) -> None:
        if not -(2**63) <= ns <= 2**63 - 1:
            raise CelError("duration out of range")
        self.ns = ns

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Duration) and other.ns == self.ns

    def __lt__(self, other: Duration) -> bool:
        return self.ns < other.ns

    def __le__(self, other: Duration) -> bool:
        return self.ns <= other.ns

    def __gt__(self, other: Duration) -> bool:
        return self.ns > other.ns

    def __ge__(self, other: Duration) -> bool:
        return self.ns >= other.ns

    def __hash__(self) -> int:
        return hash(self.ns)

    def __str__(self) -> str:
        s = Fraction(self.ns, 10**9)
        if s.denominator == 1:
            return f"{s.numerator}s"
        text = f"{self.ns / 1e9:.9f}".rstrip("0")
        return f"{text}s"


_TS_MIN = -62135596800 * 10**9  # 0001-01-01T00:00:00Z
_TS_MAX = 253402300799 * 10**9 + 999999999  # 9999-12-31T23:59:59.999999999Z


class Timestamp:
    __slots__ = ("ns",)

    def __init__(self, ns: int) -> None:
        if not _TS_MIN <= ns <= _TS_MAX:
            raise CelError("timestamp out of range")
        self.ns = ns

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Timestamp) and other.ns == self.ns

    def __lt__(self, other: Timestamp) -> bool:
        return self.ns < other.ns

    def __le__(self, other: Timestamp) -> bool:
        return self.ns <= other.ns

    def __gt__(self, other: Timestamp) -> bool:
        return self.ns > other.ns

    def __ge__(self, other: Timestamp) -> bool:
        return self.ns >= other.ns

    def __hash__(self) -> int:
        return hash(self.ns)

    def datetime(self, tz: Any = UTC) -> datetime:
        secs, ns = divmod(self.ns, 10**9)
        epoch = datetime(1970, 1, 1, tzinfo=UTC)
        return (epoch + timedelta(seconds=secs, microseconds=ns // 1000)).astimezone(tz)

    def __str__(self) -> str:
        d = self.datetime()
        frac = self.ns % 10**9
        base = d.strftime("%Y-%m-%dT%H:%M:%S")
        if frac:
            base += "." + f"{frac:09d}".rstrip("0")
        return base + "Z"


class Domains(dict):
    """``device.attributes`` / ``device.capacity``: an unknown domain reads as an empty map
    (Kubernetes' mapper returns a default for every key, so ``has()`` on it is true)."""

    __slots__ = ()


_TYPE_NAMES = {
    bool: "bool",
    int: "int",
    UInt: "uint",
    float: "double",
    str: "string",
    bytes: "bytes",
    type(None): "null_type",
    list: "list",
    tuple: "list",
    dict: "map",
    Domains: "map",
    TypeValue: "type",
    QuantityValue: "kubernetes.Quantity",
    SemverValue: "kubernetes.Semver",
    OptionalValue: "optional_type",
    IPValue: "net.IP",
    CIDRValue: "net.CIDR",
    URLValue: "kubernetes.URL",
    FormatValue: "kubernetes.NamedFormat",
    Duration: "google.protobuf.Duration",
    Timestamp: "google.protobuf.Timestamp",
}


def type_name(v: Any) -> str:
    return _TYPE_NAMES.get(type(v), type(v).__name__)


# The Go types cel-go names when a value cannot be iterated ("got 'types.Int', expected
# iterable type").
_GO_TYPE_NAMES = {
    bool: "types.Bool",
    int: "types.Int",
    UInt: "types.Uint",
    float: "types.Double",
    str: "types.String",
    bytes: "types.Bytes",
    type(None): "types.Null",
    TypeValue: "*types.Type",
    QuantityValue: "cel.Quantity",
    SemverValue: "cel.Semver",
    OptionalValue: "*types.Optional",
    IPValue: "cel.IP",
    CIDRValue: "cel.CIDR",
    URLValue: "cel.URL",
    FormatValue: "*library.NamedFormat",
    Duration: "types.Duration",
    Timestamp: "types.Timestamp",
}


def not_iterable(v: Any) -> CelError:
    go = _GO_TYPE_NAMES.get(type(v), type(v).__name__)
    return CelError(
        f"expression of type '{type_name(v)}' cannot be range of a comprehension "
        f"(got '{go}', expected iterable type)"
    )


# --- equality and ordering ---------------------------------------------------------------

_NUMERIC = (int, UInt, float)
# Kubernetes' CEL types whose Equal answers "no such overload" for another type; none as of
# apiserver's quantity.go (Equal with another type is false), kept for types that may differ.
_STRICT_EQUALITY: tuple[type, ...] = ()


def eq(a: Any, b: Any) -> bool:
    """CEL ``_==_`` as cel-go evaluates it: built-in values of different types are unequal,
    numbers compare across int/uint/double (Kubernetes' quantity is unequal to other types)."""
    ta, tb = type(a), type(b)
    if ta is tb:
        if ta is list or ta is tuple:
            return _list_eq(a, b)
        if ta is dict or ta is Domains:
            return _map_eq(a, b)
        return a == b
    if ta in _NUMERIC and tb in _NUMERIC:
        return a == b
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return _list_eq(a, b)
    if isinstance(a, dict) and isinstance(b, dict):
        return _map_eq(a, b)
    if ta in _STRICT_EQUALITY and b is not None:
        raise CelError("no such overload")
    return False


def eq_quiet(a: Any, b: Any) -> bool:
    """Equality where cel-go only looks for a true answer (``in``, ``indexOf``, sets)."""
    try:
        return eq(a, b)
    except CelError:
        return False


def _elem_eq(a: Any, b: Any) -> bool:
    # cel-go's list and map equality stop only at a false element comparison; an erring
    # one counts as equal.
    try:
        return eq(a, b)
    except CelError:
        return True


def _list_eq(a: Any, b: Any) -> bool:
    return len(a) == len(b) and all(_elem_eq(x, y) for x, y in zip(a, b, strict=True))


def _map_eq(a: dict, b: dict) -> bool:
    if len(a) != len(b):
        return False
    for k, v in a.items():
        found, w = map_get(b, k)
        if not found or not _elem_eq(v, w):
            return False
    return True


def map_get(m: dict, k: Any) -> tuple[bool, Any]:
    """CEL map lookup: numeric keys match across int/uint/double; a bool never matches 1."""
    tk = type(k)
    if tk is bool:
        for key, v in m.items():
            if type(key) is bool and key == k:
                return True, v
        return False, None
    if k in m:
        for key in (k,):
            v = m[key]
            # Python folds True into 1: make sure the stored key is not a bool.
            if any(type(x) is bool for x in m) and tk is not bool:
                for x, w in m.items():
                    if type(x) is not bool and x == k:
                        return True, w
                return False, None
            return True, v
    if tk is float and k.is_integer():
        return map_get(m, int(k)) if int(k) in m else (False, None)
    return False, None


def _cmp_ok(a: Any, b: Any) -> bool:
    ta, tb = type(a), type(b)
    if ta in _NUMERIC and tb in _NUMERIC:
        return True
    return ta is tb and ta in (str, bytes, bool, Duration, Timestamp)


def lt(a: Any, b: Any) -> bool:
    if not _cmp_ok(a, b):
        raise no_overload("_<_", a, b)
    return a < b


def le(a: Any, b: Any) -> bool:
    if not _cmp_ok(a, b):
        raise no_overload("_<=_", a, b)
    return a <= b


def gt(a: Any, b: Any) -> bool:
    if not _cmp_ok(a, b):
        raise no_overload("_>_", a, b)
    return a > b


def ge(a: Any, b: Any) -> bool:
    if not _cmp_ok(a, b):
        raise no_overload("_>=_", a, b)
    return a >= b


# --- arithmetic --------------------------------------------------------------------------


def _int_result(v: int) -> int:
    if not INT64_MIN <= v <= INT64_MAX:
        raise CelError("integer overflow")
    return v


def _uint_result(v: int) -> UInt:
    if not 0 <= v <= UINT64_MAX:
        raise CelError("unsigned integer overflow")
    return UInt(v)


def add(a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if ta is tb:
        if ta is int:
            return _int_result(a + b)
        if ta is UInt:
            return _uint_result(a + b)
        if ta in (float, str, bytes):
            return a + b
        if ta is list:
            return a + b
        if ta is Duration:
            return Duration(a.ns + b.ns)
    if ta is Timestamp and tb is Duration:
        return Timestamp(a.ns + b.ns)
    if ta is Duration and tb is Timestamp:
        return Timestamp(a.ns + b.ns)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return list(a) + list(b)
    raise no_overload("_+_", a, b)


def sub(a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if ta is tb:
        if ta is int:
            return _int_result(a - b)
        if ta is UInt:
            return _uint_result(a - b)
        if ta is float:
            return a - b
        if ta is Duration:
            return Duration(a.ns - b.ns)
        if ta is Timestamp:
            return Duration(a.ns - b.ns)
    if ta is Timestamp and tb is Duration:
        return Timestamp(a.ns - b.ns)
    raise no_overload("_-_", a, b)


def mul(a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if ta is tb:
        if ta is int:
            return _int_result(a * b)
        if ta is UInt:
            return _uint_result(a * b)
        if ta is float:
            return a * b
    raise no_overload("_*_", a, b)


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def div(a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if ta is tb:
        if ta is int:
            if b == 0:
                raise CelError("division by zero")
            return _int_result(_trunc_div(a, b))
        if ta is UInt:
            if b == 0:
                raise CelError("division by zero")
            return UInt(a // b)
        if ta is float:
            if b == 0.0:
                if a == 0.0 or math.isnan(a):
                    return math.nan
                return math.copysign(math.inf, a) * math.copysign(1.0, b)
            return a / b
    raise no_overload("_/_", a, b)


def mod(a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if ta is tb and ta in (int, UInt):
        if b == 0:
            raise CelError("modulus by zero")
        if ta is UInt:
            return UInt(a % b)
        return _int_result(a - b * _trunc_div(a, b))
    raise no_overload("_%_", a, b)


def neg(a: Any) -> Any:
    t = type(a)
    if t is int:
        return _int_result(-a)
    if t is float:
        return -a
    if t is Duration:
        return Duration(-a.ns)
    raise no_overload("-_", a)


def logical_not(a: Any) -> bool:
    if a is True:
        return False
    if a is False:
        return True
    raise no_overload("!_", a)


def index(x: Any, k: Any) -> Any:
    if type(x) is OptionalValue:
        return opt_index(x, k)
    if isinstance(x, dict):
        found, v = map_get(x, k)
        if found:
            return v
        if type(x) is Domains:
            return {}
        raise CelError(f"no such key: {k}")
    if isinstance(x, list | tuple):
        i = _list_index(k)
        if not 0 <= i < len(x):
            raise CelError(f"index out of range: {i}")
        return x[i]
    raise no_overload("_[_]", x, k)


def _list_index(k: Any) -> int:
    t = type(k)
    if t is int or t is UInt:
        return int(k)
    if t is float and k.is_integer():
        return int(k)
    raise CelError(f"unsupported index type '{type_name(k)}' in list")


def opt_index(x: Any, k: Any) -> OptionalValue:
    if isinstance(x, OptionalValue):
        if not x.present:
            return NONE
        x = x.value
    if isinstance(x, dict):
        found, v = map_get(x, k)
        if found:
            return OptionalValue(v)
        return OptionalValue({}) if type(x) is Domains else NONE
    if isinstance(x, list | tuple):
        i = _list_index(k)
        return OptionalValue(x[i]) if 0 <= i < len(x) else NONE
    raise no_overload("_[?_]", x, k)


def select(x: Any, field: str) -> Any:
    if type(x) is OptionalValue:
        return opt_select(x, field)
    if isinstance(x, dict):
        if field in x:
            return x[field]
        if type(x) is Domains:
            return {}
        raise CelError(f"no such key: {field}")
    raise CelError(f"type '{type_name(x)}' does not support field selection")


def opt_select(x: Any, field: str) -> OptionalValue:
    if isinstance(x, OptionalValue):
        if not x.present:
            return NONE
        x = x.value
    if isinstance(x, dict):
        if field in x:
            return OptionalValue(x[field])
        return OptionalValue({}) if type(x) is Domains else NONE
    raise CelError(f"type '{type_name(x)}' does not support field selection")


def has(x: Any, field: str) -> bool:
    if isinstance(x, dict):
        return True if type(x) is Domains else field in x
    raise CelError(f"invalid type for field selection: {type_name(x)}")


def contains_in(e: Any, coll: Any) -> bool:
    if isinstance(coll, list | tuple):
        return any(eq_quiet(e, x) for x in coll)
    if isinstance(coll, dict):
        return map_get(coll, e)[0]
    raise no_overload("@in", e, coll)


# --- regular expressions (RE2 syntax on Python's re) ---------------------------------------

_POSIX = {
    "alnum": "0-9A-Za-z",
    "alpha": "A-Za-z",
    "ascii": "\\x00-\\x7F",
    "blank": "\\t ",
    "cntrl": "\\x00-\\x1F\\x7F",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@[-`{-~",
    "space": "\\t\\n\\v\\f\\r ",
    "upper": "A-Z",
    "word": "0-9A-Za-z_",
    "xdigit": "0-9A-Fa-f",
}
_UNICODE_CLASSES = {"L": "[^\\W\\d_]", "N": "\\d", "Nd": "\\d"}


@lru_cache(maxsize=512)
def compile_regex(pattern: str) -> re.Pattern:
    """A Python regex for an RE2 pattern; ValueError (RE2's complaint) when RE2 rejects it."""
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = False
    # RE2's "$" is the end of the text unless (?m) is set; Python's also matches before a
    # final newline.
    multiline = re.search(r"\(\?[a-zA-Z]*m", pattern) is not None
    while i < n:
        c = pattern[i]
        if c == "$" and not in_class and not multiline:
            out.append("\\Z")
            i += 1
            continue
        if c == "\\":
            if i + 1 >= n:
                raise ValueError("error parsing regexp: trailing backslash at end of expression")
            d = pattern[i + 1]
            if d.isdigit() and d != "0" and not in_class:
                raise ValueError(f"error parsing regexp: invalid escape sequence: `\\{d}`")
            if d == "Z":
                raise ValueError("error parsing regexp: invalid escape sequence: `\\Z`")
            if d == "z":
                out.append("\\Z")
                i += 2
                continue
            if d == "Q":
                end = pattern.find("\\E", i + 2)
                lit = pattern[i + 2 :] if end < 0 else pattern[i + 2 : end]
                out.append(re.escape(lit))
                i = n if end < 0 else end + 2
                continue
            if d == "x" and i + 2 < n and pattern[i + 2] == "{":
                end = pattern.find("}", i + 3)
                if end < 0:
                    raise ValueError("error parsing regexp: invalid escape sequence")
                out.append(f"\\U{int(pattern[i + 3 : end] or '0', 16):08x}")
                i = end + 1
                continue
            if d in "pP":
                if i + 2 < n and pattern[i + 2] == "{":
                    end = pattern.find("}", i + 3)
                    name = pattern[i + 3 : end] if end > 0 else ""
                    i_next = end + 1
                else:
                    name = pattern[i + 2 : i + 3]
                    i_next = i + 3
                cls = _UNICODE_CLASSES.get(name.lstrip("^"))
                if cls is None:
                    raise ValueError(f"error parsing regexp: invalid character class range: {name}")
                if (d == "P") != name.startswith("^"):
                    cls = "(?:(?!" + cls + ").)"
                out.append(cls)
                i = i_next
                continue
            if d.isalpha() and d not in "dDsSwWbBAtnrfvax":
                raise ValueError(f"error parsing regexp: invalid escape sequence: `\\{d}`")
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            if c == "[" and pattern.startswith("[:", i):
                end = pattern.find(":]", i + 2)
                if end > 0:
                    name = pattern[i + 2 : end]
                    neg = name.startswith("^")
                    spec = _POSIX.get(name.lstrip("^"))
                    if spec is None:
                        raise ValueError(
                            f"error parsing regexp: invalid character class range: `[:{name}:]`"
                        )
                    if neg:
                        raise ValueError("negated POSIX classes are not supported here")
                    out.append(spec)
                    i = end + 2
                    continue
            if c == "]" and out and out[-1] not in ("[", "[^"):
                in_class = False
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            if pattern.startswith("[^", i):
                out.append("[^")
                i += 2
            else:
                out.append("[")
                i += 1
            if i < n and pattern[i] == "]":
                out.append("\\]")
                i += 1
            continue
        if c == "(" and pattern.startswith("(?", i):
            rest = pattern[i + 2 : i + 4]
            if rest[:1] in ("=", "!", ">", "#") or rest in ("<=", "<!") or rest[:1] == "(":
                raise ValueError(
                    "error parsing regexp: invalid or unsupported Perl syntax: `(?" + rest[:1] + "`"
                )
            if rest[:1] == "<":
                out.append("(?P<")
                i += 3
                continue
            if rest[:1] == "P" and pattern[i + 3 : i + 4] == "=":
                raise ValueError("error parsing regexp: invalid named capture")
        if c in "*+?}" and i + 1 < n and pattern[i + 1] == "+":
            raise ValueError("error parsing regexp: invalid nested repetition operator")
        if c == "{":
            m = re.match(r"\{(\d+)(,(\d*))?\}", pattern[i:])
            if m:
                lo = int(m.group(1))
                hi = int(m.group(3)) if m.group(3) else lo
                if lo > 1000 or hi > 1000 or (m.group(3) and hi < lo):
                    raise ValueError("error parsing regexp: invalid repeat count")
            elif re.match(r"\{,\d*\}", pattern[i:]):
                out.append("\\{")
                i += 1
                continue
        out.append(c)
        i += 1
    # RE2's \d, \s, \w and \b are ASCII; its Unicode classes need Python's Unicode mode.
    flags = 0 if "\\p" in pattern or "\\P" in pattern else re.ASCII
    try:
        return re.compile("".join(out), flags)
    except re.error as e:
        raise ValueError(f"error parsing regexp: {_go_words(e, pattern)}") from None
    except (OverflowError, RecursionError) as e:
        raise ValueError(f"error parsing regexp: {e}") from None


def _go_words(error: re.error, pattern: str) -> str:
    """Python's complaint about a pattern as Go's regexp words it, where they differ on
    patterns users write (unclosed classes and groups); Python's own words otherwise."""
    message = error.msg
    if message.startswith("unterminated character set"):
        start = pattern.rfind("[")
        return f"missing closing ]: `{pattern[start:] if start >= 0 else pattern}`"
    if message.startswith("missing ), unterminated subpattern"):
        return f"missing closing ): `{pattern}`"
    if message.startswith("unbalanced parenthesis"):
        return f"unexpected ): `{pattern}`"
    if message.startswith("nothing to repeat"):
        return "missing argument to repetition operator"
    return str(error)


def regex(pattern: Any) -> re.Pattern:
    try:
        return compile_regex(pattern)
    except ValueError as e:
        raise CelError(str(e)) from None


# --- durations and timestamps ------------------------------------------------------------

_DUR_UNITS = {"ns": 1, "us": 1000, "µs": 1000, "μs": 1000, "ms": 10**6, "s": 10**9}
_DUR_UNITS.update({"m": 60 * 10**9, "h": 3600 * 10**9})
_DUR_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(s: str) -> Duration:
    text = s
    neg = False
    if text[:1] in "+-":
        neg = text[0] == "-"
        text = text[1:]
    if text == "0":
        return Duration(0)
    if not text:
        raise CelError(f'invalid duration "{s}"')
    total = Fraction(0)
    pos = 0
    while pos < len(text):
        m = _DUR_PART.match(text, pos)
        if m is None:
            raise CelError(f'time: invalid duration "{s}"')
        total += Fraction(m.group(1)) * _DUR_UNITS[m.group(2)]
        pos = m.end()
    ns = int(total)
    return Duration(-ns if neg else ns)


_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$"
)


def parse_timestamp(s: str) -> Timestamp:
    m = _RFC3339.match(s)
    if m is None:
        raise CelError(f'parsing time "{s}" as RFC3339: cannot parse')
    y, mo, d, h, mi, sec = (int(m.group(i)) for i in range(1, 7))
    try:
        base = datetime(y, mo, d, h, mi, sec, tzinfo=UTC)
    except ValueError as e:
        raise CelError(f'parsing time "{s}": {e}') from None
    frac = m.group(7)
    ns = int((frac[1:] + "000000000")[:9]) if frac else 0
    off = m.group(8)
    offset = 0
    if off not in ("Z", "z"):
        sign = -1 if off[0] == "-" else 1
        offset = sign * (int(off[1:3]) * 3600 + int(off[4:6]) * 60)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    secs = int((base - epoch).total_seconds()) - offset
    return Timestamp(secs * 10**9 + ns)


def _tz(name: Any) -> Any:
    if not isinstance(name, str):
        raise no_overload("timezone", name)
    if name in ("", "UTC"):
        return UTC
    m = re.fullmatch(r"([+-]?)(\d{1,2}):(\d{2})", name)
    if m:
        delta = timedelta(hours=int(m.group(2)), minutes=int(m.group(3)))
        return timezone(-delta if m.group(1) == "-" else delta)
    try:
        from zoneinfo import ZoneInfo

        return ZoneInfo(name)
    except Exception:  # noqa: BLE001 - unknown zone names are CEL errors
        raise CelError(f"unknown time zone {name}") from None


# --- Kubernetes quantity -----------------------------------------------------------------


_QUANTITY_SUFFIXES = frozenset(
    ("", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
)


def _k8s_quantity_syntax(s: str) -> str | None:
    """apimachinery's ParseQuantity syntax: the normalised text, or None when it fails.

    Mirrors its scanner: an optional sign, digits, an optional fraction, then a suffix of the
    characters ``eEinumkKMGTP`` optionally followed by a signed exponent. The numeric part may
    be empty (``"Gi"`` is zero gibibytes); anything else (a space, a comma) is an error."""
    if not s:
        return None
    if s == "0":
        return "0"
    pos, end = 0, len(s)
    sign = ""
    if s[0] in "+-":
        sign = "-" if s[0] == "-" else ""
        pos = 1
    start = pos
    while pos < end and s[pos].isdigit() and s[pos].isascii():
        pos += 1
    whole = s[start:pos] or "0"
    frac = ""
    if pos < end and s[pos] == ".":
        pos += 1
        fstart = pos
        while pos < end and s[pos].isdigit() and s[pos].isascii():
            pos += 1
        frac = s[fstart:pos]
    suffix_start = pos
    while pos < end and s[pos] in "eEinumkKMGTP":
        pos += 1
    if pos < end and s[pos] in "+-":
        pos += 1
    while pos < end and s[pos].isdigit() and s[pos].isascii():
        pos += 1
    if pos < end:
        return None
    suffix = s[suffix_start:]
    if suffix not in _QUANTITY_SUFFIXES and not re.fullmatch(r"[eE][+-]?\d+", suffix):
        return None
    return f"{sign}{whole}{'.' + frac if frac else ''}{suffix}"


def parse_quantity(s: str) -> Quantity:
    text = _k8s_quantity_syntax(s)
    if text is None:
        raise CelError(
            f"quantity({s!r}): quantities must match the regular expression "
            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        )
    try:
        return Quantity.parse(text)
    except (QuantityError, ValueError) as e:
        raise CelError(str(e)) from None


# --- semver ------------------------------------------------------------------------------

_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)


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


# --- IP, CIDR, URL -------------------------------------------------------------------------


def parse_ip(s: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    if "%" in s:
        raise CelError(f'IP address "{s}" with zone value is not allowed')
    try:
        addr = ipaddress.ip_address(s)
    except ValueError as e:
        raise CelError(f'IP Address "{s}" parse error during conversion from string: {e}') from None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        raise CelError(f'IPv4-mapped IPv6 address "{s}" is not allowed')
    return addr


def parse_cidr(s: str) -> CIDRValue:
    addr_text, sep, bits_text = s.partition("/")
    problem = f"network address parse error during conversion from string: netip.ParsePrefix({s!r})"
    if not sep or not bits_text.isdigit() or not bits_text.isascii():
        raise CelError(problem + ": no '/'" if not sep else problem + ": bad bits")
    if len(bits_text) > 1 and bits_text[0] == "0":
        raise CelError(problem + ": bad bits")
    if "%" in addr_text:
        raise CelError(problem + ": IPv6 zones cannot be present in a prefix")
    try:
        addr = ipaddress.ip_address(addr_text)
    except ValueError as e:
        raise CelError(f"{problem}: {e}") from None
    bits = int(bits_text)
    if bits > addr.max_prefixlen:
        raise CelError(problem + ": bad bits")
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        raise CelError(f'IPv4-mapped IPv6 address "{s}" is not allowed')
    return CIDRValue(addr, bits)


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*")
_ESCAPE_OK = re.compile(r"%[0-9A-Fa-f]{2}")


def _check_escapes(s: str) -> bool:
    i = s.find("%")
    while i >= 0:
        if not _ESCAPE_OK.match(s, i):
            return False
        i = s.find("%", i + 1)
    return True


def parse_url(s: str, request: bool = True) -> URLValue:
    """Go's url.ParseRequestURI (request=True) / url.Parse, for what the library exposes."""
    err = CelError(f"URL parse error during conversion from string: parse {s!r}: invalid URI")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in s):
        raise err
    rest = s
    fragment = ""
    if not request and "#" in rest:
        rest, _, fragment = rest.partition("#")
    if request and not rest:
        raise err
    scheme = ""
    m = _SCHEME.match(rest)
    if m and rest[m.end() : m.end() + 1] == ":":
        scheme, rest = m.group().lower(), rest[m.end() + 1 :]
    elif rest[:1] == ":":
        raise err
    query = ""
    if "?" in rest:
        rest, _, query = rest.partition("?")
    host = ""
    if not rest.startswith("/"):
        if scheme:
            return URLValue(s, scheme, "", "", query)  # opaque (mailto:x)
        if request:
            raise err
        if ":" in rest.split("/", 1)[0]:
            raise err
    if (scheme or not request) and rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        rest = slash + path
        userinfo, at, hostport = authority.rpartition("@")
        if not at:
            hostport = authority
        if hostport.startswith("["):
            close = hostport.find("]")
            if close < 0:
                raise err
            port = hostport[close + 1 :]
            if port and not (port[0] == ":" and port[1:].isdigit() or port == ":"):
                raise err
        else:
            colon = hostport.rfind(":")
            if colon >= 0:
                port = hostport[colon + 1 :]
                if port and not port.isdigit():
                    raise err
        if not _check_escapes(hostport):
            raise err
        host = hostport
    if not _check_escapes(rest):
        raise err
    from urllib.parse import unquote

    return URLValue(s, scheme, host, unquote(rest), query)


def _escape_path(path: str) -> str:
    from urllib.parse import quote

    return quote(path, safe="/;:@&=+$,!~*'()-._")


# --- conversions -------------------------------------------------------------------------


def _go_float(d: float) -> str:
    """Go's strconv.FormatFloat(d, 'g', -1, 64)."""
    if math.isnan(d):
        return "NaN"
    if math.isinf(d):
        return "+Inf" if d > 0 else "-Inf"
    if d == 0:
        return "-0" if math.copysign(1, d) < 0 else "0"
    r = repr(d)
    mant, _, exp = r.partition("e")
    digits = mant.replace("-", "").replace(".", "").lstrip("0")
    # decimal exponent of the first significant digit
    e10 = (
        int(f"{abs(d):e}".split("e")[1])
        if exp == ""
        else int(exp) + (len(mant.replace("-", "").split(".")[0]) - 1)
    )
    digits = digits.rstrip("0") or "0"
    sign = "-" if d < 0 else ""
    if e10 < -4 or e10 >= 6:  # strconv's 'g' decides with precision 6 when shortest
        m = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{m}e{'+' if e10 >= 0 else '-'}{abs(e10):02d}"
    if e10 >= 0:
        if len(digits) <= e10 + 1:
            return sign + digits + "0" * (e10 + 1 - len(digits))
        return sign + digits[: e10 + 1] + "." + digits[e10 + 1 :]
    return sign + "0." + "0" * (-e10 - 1) + digits


def to_int(x: Any) -> int:
    t = type(x)
    if t is int:
        return x
    if t is UInt:
        if x > INT64_MAX:
            raise CelError("range error converting uint to int")
        return int(x)
    if t is float:
        if math.isnan(x) or not (-(2.0**63) <= x < 2.0**63):
            raise CelError("range error converting double to int")
        return int(x)
    if t is str:
        if not re.fullmatch(r"[+-]?\d+", x):
            raise CelError(f"cannot convert '{x}' to int")
        return _int_result(int(x))
    if t is Timestamp:
        return x.ns // 10**9
    if t is Duration:
        return x.ns
    raise no_overload("int", x)


def to_uint(x: Any) -> UInt:
    t = type(x)
    if t is UInt:
        return x
    if t is int:
        if x < 0:
            raise CelError("range error converting int to uint")
        return UInt(x)
    if t is float:
        if math.isnan(x) or not (0 <= x < 2.0**64):
            raise CelError("range error converting double to uint")
        return UInt(int(x))
    if t is str:
        if not re.fullmatch(r"\+?\d+", x):
            raise CelError(f"cannot convert '{x}' to uint")
        return _uint_result(int(x))
    raise no_overload("uint", x)


def to_double(x: Any) -> float:
    t = type(x)
    if t is float:
        return x
    if t is int or t is UInt:
        return float(x)
    if t is str:
        if re.fullmatch(r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[iI]nf(?:inity)?|NaN)", x):
            try:
                return float(x)
            except ValueError:
                pass
        raise CelError(f"cannot convert '{x}' to double")
    raise no_overload("double", x)


def to_string(x: Any) -> str:
    t = type(x)
    if t is str:
        return x
    if t is bool:
        return "true" if x else "false"
    if t is int or t is UInt:
        return str(int(x))
    if t is float:
        return _go_float(x)
    if t is bytes:
        try:
            return x.decode("utf-8")
        except UnicodeDecodeError:
            raise CelError("invalid UTF-8 in bytes, cannot convert to string") from None
    if t in (Timestamp, Duration, IPValue, CIDRValue):
        return str(x)
    raise no_overload("string", x)


def to_bytes(x: Any) -> bytes:
    if type(x) is bytes:
        return x
    if type(x) is str:
        return x.encode("utf-8")
    raise no_overload("bytes", x)


_BOOL_STRINGS = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True}
_BOOL_STRINGS.update({"0": False, "f": False, "F": False, "FALSE": False, "false": False})
_BOOL_STRINGS["False"] = False


def to_bool(x: Any) -> bool:
    if type(x) is bool:
        return x
    if type(x) is str:
        if x in _BOOL_STRINGS:
            return _BOOL_STRINGS[x]
        raise CelError("type conversion error from 'string' to 'bool'")
    raise no_overload("bool", x)


def to_duration(x: Any) -> Duration:
    if type(x) is Duration:
        return x
    if type(x) is str:
        return parse_duration(x)
    raise no_overload("duration", x)


def to_timestamp(x: Any) -> Timestamp:
    if type(x) is Timestamp:
        return x
    if type(x) is str:
        return parse_timestamp(x)
    if type(x) is int:
        return Timestamp(x * 10**9)
    raise no_overload("timestamp", x)


def type_of(x: Any) -> TypeValue:
    return TypeValue(type_name(x))
