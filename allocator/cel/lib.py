"""Run-time implementations of the DRA environment's functions, by name.

Each takes evaluated arguments (a member function its receiver first), checks their run-time
types (a ``dyn`` argument may hold anything) and raises ``CelError`` as cel-go reports it:
"no matching overload" for a wrong type, the library's message otherwise.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from allocator.cel import runtime as rt
from allocator.cel.runtime import (
    NONE,
    CelError,
    CIDRValue,
    Duration,
    FormatValue,
    IPValue,
    OptionalValue,
    QuantityValue,
    SemverValue,
    Timestamp,
    TypeValue,
    UInt,
    URLValue,
    no_overload,
)
from allocator.quantity import Quantity


def _str(name: str, *xs: Any) -> None:
    for x in xs:
        if type(x) is not str:
            raise no_overload(name, *xs)


def _int(name: str, *xs: Any) -> None:
    for x in xs:
        if type(x) is not int:
            raise no_overload(name, *xs)


def _list(name: str, x: Any) -> None:
    if not isinstance(x, list | tuple):
        raise no_overload(name, x)


# --- standard library ------------------------------------------------------------------------


def size(x: Any) -> int:
    if isinstance(x, str | bytes | list | tuple | dict):
        return len(x)
    raise no_overload("size", x)


def contains(s: Any, sub: Any) -> bool:
    _str("contains", s, sub)
    return sub in s


def starts_with(s: Any, p: Any) -> bool:
    _str("startsWith", s, p)
    return s.startswith(p)


def ends_with(s: Any, p: Any) -> bool:
    _str("endsWith", s, p)
    return s.endswith(p)


def matches(s: Any, pattern: Any) -> bool:
    _str("matches", s, pattern)
    return rt.regex(pattern).search(s) is not None


def _getter(name: str, fn: Callable[[Any], int], duration: Callable[[int], int] | None = None):
    def get(x: Any, tz: Any = None) -> int:
        if type(x) is Timestamp:
            d = x.datetime(rt.timezone.utc if tz is None else rt._tz(tz))
            return fn(d)
        if type(x) is Duration and duration is not None and tz is None:
            return duration(x.ns)
        raise no_overload(name, x)

    return get


def _ms(d: Any) -> int:
    return d.microsecond // 1000


TIME = {
    "getFullYear": _getter("getFullYear", lambda d: d.year),
    "getMonth": _getter("getMonth", lambda d: d.month - 1),
    "getDayOfYear": _getter("getDayOfYear", lambda d: d.timetuple().tm_yday - 1),
    "getDayOfMonth": _getter("getDayOfMonth", lambda d: d.day - 1),
    "getDate": _getter("getDate", lambda d: d.day),
    "getDayOfWeek": _getter("getDayOfWeek", lambda d: (d.weekday() + 1) % 7),
    "getHours": _getter("getHours", lambda d: d.hour, lambda ns: int(ns / 3600e9)),
    "getMinutes": _getter("getMinutes", lambda d: d.minute, lambda ns: int(ns / 60e9)),
    "getSeconds": _getter("getSeconds", lambda d: d.second, lambda ns: int(ns / 1e9)),
    "getMilliseconds": _getter("getMilliseconds", _ms, lambda ns: int(ns / 1e6) % 1000),
}


# --- Kubernetes quantity library ---------------------------------------------------------------


def quantity(s: Any) -> QuantityValue:
    _str("quantity", s)
    return QuantityValue(rt.parse_quantity(s))


def is_quantity(s: Any) -> bool:
    _str("isQuantity", s)
    try:
        rt.parse_quantity(s)
    except CelError:
        return False
    return True


def _q(name: str, *xs: Any) -> None:
    for x in xs:
        if type(x) is not QuantityValue:
            raise no_overload(name, *xs)


def sign(a: Any) -> int:
    _q("sign", a)
    return a.q.sign()


def _q_or_int(name: str, a: Any, b: Any) -> Quantity:
    _q(name, a)
    if type(b) is QuantityValue:
        return b.q
    if type(b) is int:
        return Quantity.parse(b)
    raise no_overload(name, a, b)


def q_add(a: Any, b: Any) -> QuantityValue:
    other = _q_or_int("add", a, b)
    return QuantityValue(a.q + other)


def q_sub(a: Any, b: Any) -> QuantityValue:
    other = _q_or_int("sub", a, b)
    return QuantityValue(a.q - other)


def q_mul(a: Any, b: Any) -> QuantityValue:
    _q("mul", a)
    _int("mul", b)
    return QuantityValue(Quantity(a.q.value * b, a.q.format))


def _q_div(a: Any, b: Any, digits: int) -> QuantityValue:
    _q("div", a)
    _int("div", b)
    if b == 0:
        raise CelError("division by zero error")
    v = a.q.value / b
    scale = 10**digits
    rounded = Fraction(round(v * scale), scale)
    return QuantityValue(Quantity(rounded, a.q.format))


def q_div(a: Any, b: Any, r: Any = None) -> QuantityValue:
    if r is None:
        return _q_div(a, b, 4)
    _int("div", r)
    if not 0 <= r <= 10:
        raise CelError(f"the valid range for roundVal is 0 to 10 but {r} was passed")
    return _q_div(a, b, r)


def q_div_int(a: Any, b: Any) -> QuantityValue:
    _q("divInt", a)
    _int("divInt", b)
    if b == 0:
        raise CelError("division by zero error")
    v = a.q.value / b
    return QuantityValue(Quantity(Fraction(math.trunc(v)), a.q.format))


def q_as_integer(a: Any) -> int:
    _q("asInteger", a)
    v = a.q.as_int()
    if v is None:
        raise CelError("cannot convert value to integer")
    return v


def q_is_integer(a: Any) -> bool:
    _q("isInteger", a)
    v = a.q.value
    return v.denominator == 1 and rt.INT64_MIN <= v.numerator <= rt.INT64_MAX


def q_as_float(a: Any) -> float:
    _q("asApproximateFloat", a)
    return a.q.as_float()


# --- semver ----------------------------------------------------------------------------------


def semver(s: Any, normalize: Any = False) -> SemverValue:
    if type(s) is not str or type(normalize) is not bool:
        raise no_overload("semver", s, normalize)
    v = rt.parse_semver(s, normalize)
    if v is None:
        raise CelError(f"could not parse semver {s!r}: invalid semantic version")
    return v


def is_semver(s: Any, normalize: Any = False) -> bool:
    if type(s) is not str or type(normalize) is not bool:
        raise no_overload("isSemver", s, normalize)
    return rt.parse_semver(s, normalize) is not None


def _sv(name: str, a: Any) -> SemverValue:
    if type(a) is not SemverValue:
        raise no_overload(name, a)
    return a


def compare_to(a: Any, b: Any) -> int:
    if type(a) is QuantityValue and type(b) is QuantityValue:
        return (a.q > b.q) - (a.q < b.q)
    if type(a) is SemverValue and type(b) is SemverValue:
        return a.compare(b)
    raise no_overload("compareTo", a, b)


def is_greater_than(a: Any, b: Any) -> bool:
    return compare_to(a, b) > 0


def is_less_than(a: Any, b: Any) -> bool:
    return compare_to(a, b) < 0


# --- strings extension (cel-go ext.Strings version 2) -------------------------------------------


def char_at(s: Any, i: Any) -> str:
    _str("charAt", s)
    _int("charAt", i)
    if not 0 <= i <= len(s):
        raise CelError(f"index out of range: {i}")
    return s[i : i + 1]


def index_of(x: Any, sub: Any, offset: Any = None) -> int:
    if isinstance(x, list | tuple) and offset is None:
        for i, v in enumerate(x):
            if rt.eq_quiet(v, sub):
                return i
        return -1
    _str("indexOf", x, sub)
    start = 0 if offset is None else offset
    _int("indexOf", start)
    if not 0 <= start <= len(x):
        raise CelError(f"index out of range: {start}")
    return x.find(sub, start)


def last_index_of(x: Any, sub: Any, offset: Any = None) -> int:
    if isinstance(x, list | tuple) and offset is None:
        for i in range(len(x) - 1, -1, -1):
            if rt.eq_quiet(x[i], sub):
                return i
        return -1
    _str("lastIndexOf", x, sub)
    if offset is None:
        return x.rfind(sub)
    _int("lastIndexOf", offset)
    if sub == "":
        return offset
    if not 0 <= offset < len(x):
        raise CelError(f"index out of range: {offset}")
    return x.rfind(sub, 0, offset + len(sub))


def lower_ascii(s: Any) -> str:
    _str("lowerAscii", s)
    return "".join(c.lower() if c.isascii() else c for c in s)


def upper_ascii(s: Any) -> str:
    _str("upperAscii", s)
    return "".join(c.upper() if c.isascii() else c for c in s)


def replace(s: Any, old: Any, new: Any, n: Any = -1) -> str:
    _str("replace", s, old, new)
    _int("replace", n)
    return s.replace(old, new, n if n >= 0 else -1)


def split(s: Any, sep: Any, n: Any = -1) -> list:
    _str("split", s, sep)
    _int("split", n)
    if n == 0:
        return []
    if sep == "":
        parts = list(s)
        if n > 0 and len(parts) > n:
            parts = parts[: n - 1] + ["".join(parts[n - 1 :])]
        return parts
    return s.split(sep, n - 1) if n > 0 else s.split(sep)


def substring(s: Any, start: Any, end: Any = None) -> str:
    _str("substring", s)
    stop = len(s) if end is None else end
    _int("substring", start, stop)
    if not 0 <= start <= len(s):
        raise CelError(f"index out of range: {start}")
    if not 0 <= stop <= len(s):
        raise CelError(f"index out of range: {stop}")
    if start > stop:
        raise CelError(f"invalid substring range. start: {start}, end: {stop}")
    return s[start:stop]


_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
_GO_SPACE += "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"


def trim(s: Any) -> str:
    _str("trim", s)
    return s.strip(_GO_SPACE)


def join(xs: Any, sep: Any = "") -> str:
    _list("join", xs)
    _str("join", sep)
    for x in xs:
        if type(x) is not str:
            raise no_overload("join", xs, sep)
    return sep.join(xs)


def quote(s: Any) -> str:
    _str("strings.quote", s)
    escapes = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    escapes |= {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\v": "\\v"}
    return '"' + "".join(escapes.get(c, c) for c in s) + '"'


_FORMAT = re.compile(r"%(?:\.(\d+))?([sdfeboxX%])")


_STRING_CLAUSE = (
    "error during formatting: string clause can only be used on strings, bools, bytes, ints, "
    "doubles, maps, lists, types, durations, and timestamps, was given "
)


def _go_quote(s: str) -> str:
    """Go's %q of a string (strconv.Quote) for the characters CEL strings hold."""
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif o < 0x20 or o == 0x7F:
            out.append(f"\\x{o:02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _format_nested(v: Any) -> str:
    """A list element or map value inside %s, as cel-go's strings extension (before
    version 4) writes it: strings and bytes quoted, doubles with six decimals,
    timestamps and durations as their CEL constructors."""
    t = type(v)
    if t is str:
        return _go_quote(v)
    if t is bytes:
        return "b" + _go_quote(v.decode("utf-8", "replace"))
    if t is float:
        if math.isnan(v) or math.isinf(v):
            return _go_quote(rt._go_float(v))
        return f"{v:.6f}"
    if t is Timestamp or t is Duration:
        name = "timestamp" if t is Timestamp else "duration"
        return f"{name}({_go_quote(_format_one('s', None, v))})"
    if t in (bool, int, UInt, TypeValue) or v is None or isinstance(v, list | tuple | dict):
        return _format_one("s", None, v)
    raise CelError(f"error during formatting: no formatting function for {rt.type_name(v)}")


def _format_key(k: Any) -> str:
    if type(k) is str:
        return _go_quote(k)
    if type(k) in (bool, int, UInt):
        return _format_one("s", None, k)
    raise CelError(
        f"error during formatting: no formatting function for map key of type {rt.type_name(k)}"
    )


def _format_one(spec: str, prec: str | None, v: Any) -> str:
    if spec == "s":
        if type(v) is bool:
            return "true" if v else "false"
        if isinstance(v, list | tuple):
            return "[" + ", ".join(_format_nested(x) for x in v) + "]"
        if isinstance(v, dict):
            items = sorted((_format_key(k), _format_nested(w)) for k, w in v.items())
            return "{" + ", ".join(f"{k}:{w}" for k, w in items) + "}"
        if v is None:
            return "null"
        if type(v) is float:
            return rt._go_float(v)
        if type(v) is UInt:
            return str(int(v))
        if type(v) is bytes:
            return v.decode("utf-8", "replace")
        if type(v) is TypeValue:
            return v.name
        if type(v) in (int, str, Duration, Timestamp):
            return rt.to_string(v)
        raise CelError(_STRING_CLAUSE + rt.type_name(v))
    if spec == "d":
        if type(v) not in (int, UInt):
            raise CelError("error during formatting: integer clause can only be used on integers")
        return str(int(v))
    if spec in "fe" and type(v) is str and v in ("NaN", "Infinity", "-Infinity"):
        v = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}[v]
    if spec == "b" and type(v) is bool:
        return "1" if v else "0"
    if spec in "fe":
        if type(v) not in (int, UInt, float):
            raise CelError(
                "error during formatting: fixed-point clause can only be used on doubles"
            )
        f = float(v)
        if math.isnan(f) or math.isinf(f):
            return rt._go_float(f)
        return f"{f:.{6 if prec is None else int(prec)}{spec}}"
    if type(v) is str and spec in "xX":
        h = v.encode().hex()
        return h if spec == "x" else h.upper()
    if type(v) is bytes and spec in "xX":
        return v.hex() if spec == "x" else v.hex().upper()
    if type(v) not in (int, UInt):
        raise CelError(f"error during formatting: only integers can be formatted with %{spec}")
    return format(int(v), spec)


def fmt(s: Any, args: Any) -> str:
    _str("format", s)
    _list("format", args)
    out: list[str] = []
    pos, i = 0, 0
    for m in _FORMAT.finditer(s):
        out.append(s[pos : m.start()])
        pos = m.end()
        if m.group(2) == "%":
            out.append("%")
            continue
        if i >= len(args):
            raise CelError(f"index {i} out of range")
        out.append(_format_one(m.group(2), m.group(1), args[i]))
        i += 1
    out.append(s[pos:])
    return "".join(out)


# --- sets ------------------------------------------------------------------------------------


def _lists(name: str, a: Any, b: Any) -> None:
    if not isinstance(a, list | tuple) or not isinstance(b, list | tuple):
        raise no_overload(name, a, b)


def sets_contains(a: Any, b: Any) -> bool:
    _lists("sets.contains", a, b)
    return all(any(rt.eq_quiet(x, y) for y in a) for x in b)


def sets_intersects(a: Any, b: Any) -> bool:
    _lists("sets.intersects", a, b)
    return any(any(rt.eq_quiet(x, y) for y in a) for x in b)


def sets_equivalent(a: Any, b: Any) -> bool:
    _lists("sets.equivalent", a, b)
    return sets_contains(a, b) and sets_contains(b, a)


# --- Kubernetes lists library ----------------------------------------------------------------

_ORDERED = (int, UInt, float, bool, str, bytes, Duration, Timestamp)


def _ordered_list(name: str, xs: Any) -> list:
    _list(name, xs)
    for x in xs:
        if type(x) not in _ORDERED:
            raise no_overload(name, xs)
    return list(xs)


def is_sorted(xs: Any) -> bool:
    ys = _ordered_list("isSorted", xs)
    return all(rt.le(ys[i], ys[i + 1]) for i in range(len(ys) - 1))


def list_sum(xs: Any) -> Any:
    _list("sum", xs)
    if not xs:
        return 0
    total = xs[0]
    if type(total) not in (int, UInt, float, Duration):
        raise no_overload("sum", xs)
    for x in xs[1:]:
        total = rt.add(total, x)
    return total


def list_min(xs: Any) -> Any:
    ys = _ordered_list("min", xs)
    if not ys:
        raise CelError("min(list) called on an empty list")
    best = ys[0]
    for y in ys[1:]:
        if rt.lt(y, best):
            best = y
    return best


def list_max(xs: Any) -> Any:
    ys = _ordered_list("max", xs)
    if not ys:
        raise CelError("max(list) called on an empty list")
    best = ys[0]
    for y in ys[1:]:
        if rt.gt(y, best):
            best = y
    return best


# --- Kubernetes regex library ------------------------------------------------------------------


# ResourceSliceMaxAttributeValuesPerDevice: the longest list ``includes`` looks through.
INCLUDES_MAX_VALUES = 64


def includes(target: Any, value: Any) -> bool:
    """DRA's ``<attribute>.includes(value)``: a list-typed attribute contains the value, a
    scalar one equals it. Only a true comparison counts; past 64 values it errs."""
    if isinstance(target, list | tuple):
        for i, item in enumerate(target):
            if i >= INCLUDES_MAX_VALUES:
                raise CelError(
                    "'includes' function cannot be applied to lists longer than "
                    f"{INCLUDES_MAX_VALUES} values"
                )
            if rt.eq_quiet(item, value):
                return True
        return False
    return rt.eq_quiet(target, value)


def find(s: Any, pattern: Any) -> str:
    _str("find", s, pattern)
    m = rt.regex(pattern).search(s)
    return m.group(0) if m else ""


def find_all(s: Any, pattern: Any, n: Any = -1) -> list:
    _str("findAll", s, pattern)
    _int("findAll", n)
    if n == 0:
        return []
    found = [m.group(0) for m in rt.regex(pattern).finditer(s)]
    return found[:n] if n > 0 else found


# --- URLs, IPs and CIDRs ---------------------------------------------------------------------


def url(s: Any) -> URLValue:
    _str("url", s)
    rt.parse_url(s, request=True)
    return rt.parse_url(s, request=False)


def is_url(s: Any) -> bool:
    _str("isURL", s)
    try:
        rt.parse_url(s, request=True)
    except CelError:
        return False
    return True


def _u(name: str, u: Any) -> URLValue:
    if type(u) is not URLValue:
        raise no_overload(name, u)
    return u


def _hostname(host: str) -> str:
    if host.startswith("["):
        return host[1 : host.find("]")]
    colon = host.rfind(":")
    return host[:colon] if colon >= 0 else host


def _port(host: str) -> str:
    if host.startswith("["):
        rest = host[host.find("]") + 1 :]
        return rest[1:] if rest.startswith(":") else ""
    colon = host.rfind(":")
    return host[colon + 1 :] if colon >= 0 else ""


def _query(q: str) -> dict:
    from urllib.parse import unquote_plus

    out: dict[str, list[str]] = {}
    for part in q.split("&"):
        if not part or ";" in part:
            continue
        k, _, v = part.partition("=")
        try:
            out.setdefault(unquote_plus(k, errors="strict"), []).append(
                unquote_plus(v, errors="strict")
            )
        except UnicodeDecodeError:
            continue
    return out


URL_MEMBERS = {
    "getScheme": lambda u: _u("getScheme", u).scheme,
    "getHost": lambda u: _u("getHost", u).host,
    "getHostname": lambda u: _hostname(_u("getHostname", u).host),
    "getPort": lambda u: _port(_u("getPort", u).host),
    "getEscapedPath": lambda u: rt._escape_path(_u("getEscapedPath", u).path),
    "getQuery": lambda u: _query(_u("getQuery", u).query),
}


def ip(s: Any) -> IPValue:
    if type(s) is CIDRValue:
        return IPValue(s.addr)
    _str("ip", s)
    return IPValue(rt.parse_ip(s))


def is_ip(s: Any) -> bool:
    _str("isIP", s)
    try:
        rt.parse_ip(s)
    except CelError:
        return False
    return True


def ip_is_canonical(s: Any) -> bool:
    _str("ip.isCanonical", s)
    return str(rt.parse_ip(s)) == s


def _ip(name: str, x: Any) -> Any:
    if type(x) is not IPValue:
        raise no_overload(name, x)
    return x.addr


def _global_unicast(a: Any) -> bool:
    # Go's netip: private addresses count as global unicast; the v4 broadcast does not.
    if a.version == 4 and a == rt.ipaddress.IPv4Address("255.255.255.255"):
        return False
    return not (a.is_unspecified or a.is_loopback or a.is_multicast or a.is_link_local)


def _link_local_multicast(a: Any) -> bool:
    if a.version == 4:
        return a in rt.ipaddress.ip_network("224.0.0.0/24")
    return (int(a) >> 112) & 0xFF0F == 0xFF02


IP_MEMBERS = {
    "family": lambda x: _ip("family", x).version,
    "isUnspecified": lambda x: _ip("isUnspecified", x).is_unspecified,
    "isLoopback": lambda x: _ip("isLoopback", x).is_loopback,
    "isLinkLocalMulticast": lambda x: _link_local_multicast(_ip("isLinkLocalMulticast", x)),
    "isLinkLocalUnicast": lambda x: (
        _ip("isLinkLocalUnicast", x).is_link_local
        if x.addr.version == 6
        else x.addr in rt.ipaddress.ip_network("169.254.0.0/16")
    ),
    "isGlobalUnicast": lambda x: _global_unicast(_ip("isGlobalUnicast", x)),
}


def cidr(s: Any) -> CIDRValue:
    _str("cidr", s)
    return rt.parse_cidr(s)


def is_cidr(s: Any) -> bool:
    _str("isCIDR", s)
    try:
        rt.parse_cidr(s)
    except CelError:
        return False
    return True


def _c(name: str, x: Any) -> CIDRValue:
    if type(x) is not CIDRValue:
        raise no_overload(name, x)
    return x


def contains_ip(c: Any, x: Any) -> bool:
    net = _c("containsIP", c)
    if type(x) is str:
        x = IPValue(rt.parse_ip(x))
    if type(x) is not IPValue:
        raise no_overload("containsIP", c, x)
    return x.addr.version == net.addr.version and x.addr in net.network()


def contains_cidr(c: Any, x: Any) -> bool:
    net = _c("containsCIDR", c)
    if type(x) is str:
        x = rt.parse_cidr(x)
    if type(x) is not CIDRValue:
        raise no_overload("containsCIDR", c, x)
    if x.addr.version != net.addr.version:
        return False
    return x.bits >= net.bits and x.addr in net.network()


def masked(c: Any) -> CIDRValue:
    net = _c("masked", c).network()
    return CIDRValue(net.network_address, net.prefixlen)


def string_conv(x: Any) -> str:
    return rt.to_string(x)


# --- optional types --------------------------------------------------------------------------


def _zero(v: Any) -> bool:
    if v is None or v is False:
        return True
    if type(v) in (int, UInt, float, str, bytes):
        return not v
    if isinstance(v, list | tuple | dict):
        return len(v) == 0
    if type(v) in (Duration, Timestamp):
        return v.ns == 0
    return False


def _opt(name: str, o: Any) -> OptionalValue:
    if type(o) is not OptionalValue:
        raise no_overload(name, o)
    return o


def opt_value(o: Any) -> Any:
    if not _opt("value", o).present:
        raise CelError("optional.none() dereference")
    return o.value


def opt_or(o: Any, other: Any) -> OptionalValue:
    _opt("or", o)
    _opt("or", other)
    return o if o.present else other


def opt_or_value(o: Any, default: Any) -> Any:
    return o.value if _opt("orValue", o).present else default


# --- Kubernetes format library -------------------------------------------------------------------

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def _validate_format(name: str, s: str) -> list[str]:
    def label(rx: re.Pattern, limit: int, what: str, prefix: bool = False) -> list[str]:
        text = s
        if prefix:
            text = s[:-1] if s.endswith("-") else s
        errs = []
        if len(s) > limit:
            errs.append(f"must be no more than {limit} characters")
        if not rx.fullmatch(text):
            errs.append(f"a {what} must consist of lower case alphanumeric characters")
        return errs

    if name == "dns1123Label":
        return label(_DNS1123_LABEL, 63, "lowercase RFC 1123 label")
    if name == "dns1123LabelPrefix":
        return label(_DNS1123_LABEL, 63, "lowercase RFC 1123 label", prefix=True)
    if name == "dns1035Label":
        return label(_DNS1035_LABEL, 63, "DNS-1035 label")
    if name == "dns1035LabelPrefix":
        return label(_DNS1035_LABEL, 63, "DNS-1035 label", prefix=True)
    if name == "dns1123Subdomain":
        return label(_DNS1123_SUBDOMAIN, 253, "lowercase RFC 1123 subdomain")
    if name == "dns1123SubdomainPrefix":
        return label(_DNS1123_SUBDOMAIN, 253, "lowercase RFC 1123 subdomain", prefix=True)
    if name == "qualifiedName":
        prefix, sep, base = s.rpartition("/")
        errs = []
        if sep and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(prefix)):
            errs.append("prefix part must be a DNS-1123 subdomain")
        if not base or len(base) > 63 or not _QUALIFIED.fullmatch(base):
            errs.append("name part must consist of alphanumeric characters, '-', '_' or '.'")
        return errs
    if name == "labelValue":
        if len(s) > 63 or not _LABEL_VALUE.fullmatch(s):
            return ["a valid label must be an empty string or consist of alphanumeric characters"]
        return []
    if name == "uuid":
        return [] if _UUID.fullmatch(s) else ["does not match the UUID format"]
    if name == "byte":
        import base64

        try:
            base64.b64decode(s, validate=True)
        except ValueError:
            return ["invalid base64"]
        return []
    if name == "date":
        if not _DATE.fullmatch(s):
            return ["invalid date"]
        try:
            rt.datetime.strptime(s, "%Y-%m-%d")
        except ValueError:
            return ["invalid date"]
        return []
    if name == "datetime":
        try:
            rt.parse_timestamp(s)
        except CelError:
            return ["invalid datetime"]
        return []
    if name == "uri":
        try:
            rt.parse_url(s, request=True)
        except CelError:
            return ["invalid URI"]
        return []
    return []


FORMAT_NAMES = frozenset(
    (
        "dns1123Label",
        "dns1123Subdomain",
        "dns1035Label",
        "qualifiedName",
        "dns1123LabelPrefix",
        "dns1123SubdomainPrefix",
        "dns1035LabelPrefix",
        "labelValue",
        "uri",
        "uuid",
        "byte",
        "date",
        "datetime",
    )
)


def format_named(name: Any) -> OptionalValue:
    _str("format.named", name)
    return OptionalValue(FormatValue(name)) if name in FORMAT_NAMES else NONE


def format_validate(f: Any, s: Any) -> OptionalValue:
    if type(f) is not FormatValue or type(s) is not str:
        raise no_overload("validate", f, s)
    errs = _validate_format(f.name, s)
    return OptionalValue(errs) if errs else NONE


# --- tables ------------------------------------------------------------------------------------

GLOBAL_FUNCS: dict[str, Callable[..., Any]] = {
    "size": size,
    "matches": matches,
    "int": rt.to_int,
    "uint": rt.to_uint,
    "double": rt.to_double,
    "string": string_conv,
    "bytes": rt.to_bytes,
    "bool": rt.to_bool,
    "dyn": lambda x: x,
    "type": rt.type_of,
    "duration": rt.to_duration,
    "timestamp": rt.to_timestamp,
    "quantity": quantity,
    "isQuantity": is_quantity,
    "sign": sign,
    "semver": semver,
    "isSemver": is_semver,
    "url": url,
    "isURL": is_url,
    "ip": ip,
    "isIP": is_ip,
    "ip.isCanonical": ip_is_canonical,
    "cidr": cidr,
    "isCIDR": is_cidr,
    "sets.contains": sets_contains,
    "sets.equivalent": sets_equivalent,
    "sets.intersects": sets_intersects,
    "strings.quote": quote,
    "optional.of": lambda v: OptionalValue(v),
    "optional.ofNonZeroValue": lambda v: NONE if _zero(v) else OptionalValue(v),
    "optional.none": lambda: NONE,
    "format.named": format_named,
    **{f"format.{n}": (lambda n=n: FormatValue(n)) for n in FORMAT_NAMES},
}

MEMBER_FUNCS: dict[str, Callable[..., Any]] = {
    "size": size,
    "contains": contains,
    "startsWith": starts_with,
    "endsWith": ends_with,
    "matches": matches,
    **TIME,
    "isGreaterThan": is_greater_than,
    "isLessThan": is_less_than,
    "compareTo": compare_to,
    "asApproximateFloat": q_as_float,
    "asInteger": q_as_integer,
    "isInteger": q_is_integer,
    "add": q_add,
    "sub": q_sub,
    "mul": q_mul,
    "div": q_div,
    "divInt": q_div_int,
    "major": lambda a: _sv("major", a).major,
    "minor": lambda a: _sv("minor", a).minor,
    "patch": lambda a: _sv("patch", a).patch,
    "charAt": char_at,
    "indexOf": index_of,
    "lastIndexOf": last_index_of,
    "lowerAscii": lower_ascii,
    "upperAscii": upper_ascii,
    "replace": replace,
    "split": split,
    "substring": substring,
    "trim": trim,
    "join": join,
    "format": fmt,
    "isSorted": is_sorted,
    "sum": list_sum,
    "min": list_min,
    "max": list_max,
    "includes": includes,
    "find": find,
    "findAll": find_all,
    **URL_MEMBERS,
    **IP_MEMBERS,
    "containsIP": contains_ip,
    "containsCIDR": contains_cidr,
    "ip": ip,
    "prefixLength": lambda c: _c("prefixLength", c).bits,
    "masked": masked,
    "value": opt_value,
    "hasValue": lambda o: _opt("hasValue", o).present,
    "or": opt_or,
    "orValue": opt_or_value,
    "validate": format_validate,
}
