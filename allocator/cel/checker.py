"""The compile-time type check of the Kubernetes DRA CEL environment.

What it declares is what Kubernetes' stored-expressions environment for DRA has (the base
environment of ``k8s.io/apiserver/pkg/cel/environment`` at its newest version, plus the DRA
``device`` variable and ``cel.bind``): CEL's standard library with cross-type numeric
comparisons and optional types; the Kubernetes libraries for quantities, semvers, lists,
regexes, URLs, IPs, CIDRs and formats; cel-go's strings (version 2), sets, bindings and
two-variable comprehensions. Checks that follow cel-go's: undeclared names, overload
resolution (``dyn`` matches every overload; several matches with different results give
``dyn``), unknown fields of ``device``, homogeneous list and map literals, constant regular
expressions, durations and timestamps that do not parse, and a result that is not ``bool``
or ``dyn``.
"""

from __future__ import annotations

import re

from allocator.cel.parser import (
    Bind,
    Call,
    Comp,
    Has,
    Ident,
    ListLit,
    Lit,
    MapLit,
    MessageLit,
    Node,
    Select,
)


class CheckError(ValueError):
    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.pos = pos


# --- types -------------------------------------------------------------------------------


class T:
    """A CEL type: a kind (``int``, ``list``, ``kubernetes.Quantity``...) and parameters."""

    __slots__ = ("kind", "params", "_hash")

    def __init__(self, kind: str, params: tuple[T, ...] = ()) -> None:
        self.kind, self.params = kind, params
        self._hash = hash((kind, params))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, T) and self.kind == other.kind and self.params == other.params

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        if self.kind == "?":
            return "dyn"
        if self.params:
            return f"{self.kind}({', '.join(str(p) for p in self.params)})"
        return self.kind


BOOL, INT, UINT, DOUBLE = T("bool"), T("int"), T("uint"), T("double")
STRING, BYTES, NULL, DYN = T("string"), T("bytes"), T("null_type"), T("dyn")
FREE = T("?")  # the element type of an empty literal: fits anything, like a free type variable
DURATION, TIMESTAMP = T("google.protobuf.Duration"), T("google.protobuf.Timestamp")
QUANTITY, SEMVER = T("kubernetes.Quantity"), T("kubernetes.Semver")
IP, CIDR, URL = T("net.IP"), T("net.CIDR"), T("kubernetes.URL")
FORMAT = T("kubernetes.NamedFormat")
DEVICE = T("kubernetes.DRADevice")


def LIST(e: T) -> T:
    return T("list", (e,))


def MAP(k: T, v: T) -> T:
    return T("map", (k, v))


def OPT(e: T) -> T:
    return T("optional_type", (e,))


def TYPE(e: T) -> T:
    return T("type", (e,))


DEVICE_FIELDS = {
    "driver": STRING,
    "attributes": MAP(STRING, MAP(STRING, DYN)),
    "capacity": MAP(STRING, MAP(STRING, QUANTITY)),
    "allowMultipleAllocations": BOOL,
}

# Identifiers that name types (``type(x) == string``).
TYPE_IDENTS = {
    "bool": BOOL,
    "int": INT,
    "uint": UINT,
    "double": DOUBLE,
    "string": STRING,
    "bytes": BYTES,
    "null_type": NULL,
    "list": LIST(DYN),
    "map": MAP(DYN, DYN),
    "type": TYPE(DYN),
    "dyn": DYN,
    "optional_type": OPT(DYN),
    "google.protobuf.Duration": DURATION,
    "google.protobuf.Timestamp": TIMESTAMP,
    "net.CIDR": CIDR,
}

# --- function declarations ---------------------------------------------------------------

_PARAMS = {"A", "B", "K", "V"}


def _t(s: str) -> T:
    s = s.strip()
    named = {
        "bool": BOOL,
        "int": INT,
        "uint": UINT,
        "double": DOUBLE,
        "string": STRING,
        "bytes": BYTES,
        "null": NULL,
        "dyn": DYN,
        "duration": DURATION,
        "timestamp": TIMESTAMP,
        "quantity": QUANTITY,
        "semver": SEMVER,
        "ip": IP,
        "cidr": CIDR,
        "url": URL,
        "format": FORMAT,
        "?": FREE,
    }
    if s in named:
        return named[s]
    if s in _PARAMS:
        return T("$" + s)
    m = re.fullmatch(r"(\w+)\((.*)\)", s)
    assert m, s
    inner = _split(m.group(2))
    kind = {"list": "list", "map": "map", "opt": "optional_type", "type": "type"}[m.group(1)]
    return T(kind, tuple(_t(p) for p in inner))


def _split(s: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for c in s:
        if c == "," and depth == 0:
            out.append(cur)
            cur = ""
            continue
        depth += c == "("
        depth -= c == ")"
        cur += c
    if cur.strip():
        out.append(cur)
    return out


def _sig(text: str) -> tuple[tuple[T, ...], T]:
    args, result = text.split("->")
    return tuple(_t(a) for a in _split(args)), _t(result)


NUMS = ("int", "uint", "double")
COMPARABLE = ("int", "uint", "double", "bool", "string", "bytes", "duration", "timestamp")

# name -> list of signatures; member functions list the receiver first.
GLOBAL: dict[str, list[str]] = {
    "!_": ["bool -> bool"],
    "-_": ["int -> int", "double -> double", "duration -> duration"],
    "_&&_": ["bool, bool -> bool"],
    "_||_": ["bool, bool -> bool"],
    "_?_:_": ["bool, A, A -> A"],
    "_==_": ["A, A -> bool"],
    "_!=_": ["A, A -> bool"],
    "_+_": [
        "int, int -> int",
        "uint, uint -> uint",
        "double, double -> double",
        "string, string -> string",
        "bytes, bytes -> bytes",
        "list(A), list(A) -> list(A)",
        "timestamp, duration -> timestamp",
        "duration, timestamp -> timestamp",
        "duration, duration -> duration",
    ],
    "_-_": [
        "int, int -> int",
        "uint, uint -> uint",
        "double, double -> double",
        "timestamp, timestamp -> duration",
        "timestamp, duration -> timestamp",
        "duration, duration -> duration",
    ],
    "_*_": ["int, int -> int", "uint, uint -> uint", "double, double -> double"],
    "_/_": ["int, int -> int", "uint, uint -> uint", "double, double -> double"],
    "_%_": ["int, int -> int", "uint, uint -> uint"],
    "_[_]": [
        "list(A), int -> A",
        "map(K, V), K -> V",
        "opt(list(A)), int -> opt(A)",
        "opt(map(K, V)), K -> opt(V)",
    ],
    "_[?_]": [
        "list(A), int -> opt(A)",
        "map(K, V), K -> opt(V)",
        "opt(list(A)), int -> opt(A)",
        "opt(map(K, V)), K -> opt(V)",
    ],
    "@in": ["A, list(A) -> bool", "A, map(A, B) -> bool"],
    "size": ["string -> int", "bytes -> int", "list(A) -> int", "map(K, V) -> int"],
    "matches": ["string, string -> bool"],
    "int": [
        "int -> int",
        "uint -> int",
        "double -> int",
        "string -> int",
        "timestamp -> int",
        "duration -> int",
    ],
    "uint": ["uint -> uint", "int -> uint", "double -> uint", "string -> uint"],
    "double": ["double -> double", "int -> double", "uint -> double", "string -> double"],
    "string": [
        "string -> string",
        "int -> string",
        "uint -> string",
        "double -> string",
        "bool -> string",
        "bytes -> string",
        "timestamp -> string",
        "duration -> string",
        "ip -> string",
        "cidr -> string",
    ],
    "bytes": ["bytes -> bytes", "string -> bytes"],
    "bool": ["bool -> bool", "string -> bool"],
    "dyn": ["A -> dyn"],
    "type": ["A -> type(A)"],
    "duration": ["string -> duration", "duration -> duration"],
    "timestamp": ["string -> timestamp", "int -> timestamp", "timestamp -> timestamp"],
    # Kubernetes quantity library: sign is a global function only.
    "quantity": ["string -> quantity"],
    "isQuantity": ["string -> bool"],
    "sign": ["quantity -> int"],
    # Kubernetes semver library (version 1: the optional normalize flag)
    "semver": ["string -> semver", "string, bool -> semver"],
    "isSemver": ["string -> bool", "string, bool -> bool"],
    # Kubernetes URL, IP and CIDR libraries
    "url": ["string -> url"],
    "isURL": ["string -> bool"],
    "ip": ["string -> ip"],
    "isIP": ["string -> bool"],
    "ip.isCanonical": ["string -> bool"],
    "cidr": ["string -> cidr"],
    "isCIDR": ["string -> bool"],
    # cel-go sets and strings extensions, optional types
    "sets.contains": ["list(A), list(A) -> bool"],
    "sets.equivalent": ["list(A), list(A) -> bool"],
    "sets.intersects": ["list(A), list(A) -> bool"],
    "strings.quote": ["string -> string"],
    "optional.of": ["A -> opt(A)"],
    "optional.ofNonZeroValue": ["A -> opt(A)"],
    "optional.none": [" -> opt(?)"],
    # Kubernetes format library
    "format.named": ["string -> opt(format)"],
    **{
        f"format.{n}": [" -> format"]
        for n in (
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
    },
}

_TIME_GETTERS = (
    "getFullYear",
    "getMonth",
    "getDayOfYear",
    "getDayOfMonth",
    "getDate",
    "getDayOfWeek",
)

MEMBER: dict[str, list[str]] = {
    "size": ["string -> int", "bytes -> int", "list(A) -> int", "map(K, V) -> int"],
    "contains": ["string, string -> bool"],
    "startsWith": ["string, string -> bool"],
    "endsWith": ["string, string -> bool"],
    "matches": ["string, string -> bool"],
    **{g: ["timestamp -> int", "timestamp, string -> int"] for g in _TIME_GETTERS},
    **{
        g: ["timestamp -> int", "timestamp, string -> int", "duration -> int"]
        for g in ("getHours", "getMinutes", "getSeconds", "getMilliseconds")
    },
    # quantity
    "isGreaterThan": ["quantity, quantity -> bool", "semver, semver -> bool"],
    "isLessThan": ["quantity, quantity -> bool", "semver, semver -> bool"],
    "compareTo": ["quantity, quantity -> int", "semver, semver -> int"],
    "asApproximateFloat": ["quantity -> double"],
    "asInteger": ["quantity -> int"],
    "isInteger": ["quantity -> bool"],
    "add": ["quantity, quantity -> quantity", "quantity, int -> quantity"],
    "sub": ["quantity, quantity -> quantity", "quantity, int -> quantity"],
    "mul": ["quantity, int -> quantity"],
    "div": ["quantity, int -> quantity", "quantity, int, int -> quantity"],
    "divInt": ["quantity, int -> quantity"],
    # semver
    "major": ["semver -> int"],
    "minor": ["semver -> int"],
    "patch": ["semver -> int"],
    # strings extension (version 2) and the Kubernetes lists library share indexOf
    "charAt": ["string, int -> string"],
    "indexOf": ["string, string -> int", "string, string, int -> int", "list(A), A -> int"],
    "lastIndexOf": ["string, string -> int", "string, string, int -> int", "list(A), A -> int"],
    "lowerAscii": ["string -> string"],
    "upperAscii": ["string -> string"],
    "replace": ["string, string, string -> string", "string, string, string, int -> string"],
    "split": ["string, string -> list(string)", "string, string, int -> list(string)"],
    "substring": ["string, int -> string", "string, int, int -> string"],
    "trim": ["string -> string"],
    "join": ["list(string) -> string", "list(string), string -> string"],
    "format": ["string, list(dyn) -> string"],
    # Kubernetes lists library
    "isSorted": [f"list({c}) -> bool" for c in COMPARABLE],
    "sum": [f"list({c}) -> {c}" for c in ("int", "uint", "double", "duration")],
    "min": [f"list({c}) -> {c}" for c in COMPARABLE],
    "max": [f"list({c}) -> {c}" for c in COMPARABLE],
    # DRA's own: <attribute>.includes(value), for scalar and list-typed attributes alike
    "includes": ["dyn, dyn -> bool"],
    # Kubernetes regex library
    "find": ["string, string -> string"],
    "findAll": ["string, string -> list(string)", "string, string, int -> list(string)"],
    # URLs
    "getScheme": ["url -> string"],
    "getHost": ["url -> string"],
    "getHostname": ["url -> string"],
    "getPort": ["url -> string"],
    "getEscapedPath": ["url -> string"],
    "getQuery": ["url -> map(string, list(string))"],
    # IP and CIDR
    "family": ["ip -> int"],
    "isUnspecified": ["ip -> bool"],
    "isLoopback": ["ip -> bool"],
    "isLinkLocalMulticast": ["ip -> bool"],
    "isLinkLocalUnicast": ["ip -> bool"],
    "isGlobalUnicast": ["ip -> bool"],
    "containsIP": ["cidr, string -> bool", "cidr, ip -> bool"],
    "containsCIDR": ["cidr, string -> bool", "cidr, cidr -> bool"],
    "ip": ["cidr -> ip"],
    "prefixLength": ["cidr -> int"],
    "masked": ["cidr -> cidr"],
    # optional types
    "value": ["opt(A) -> A"],
    "hasValue": ["opt(A) -> bool"],
    "or": ["opt(A), opt(A) -> opt(A)"],
    "orValue": ["opt(A), A -> A"],
    # Kubernetes format library
    "validate": ["format, string -> opt(list(string))"],
}

for _name in ("_<_", "_<=_", "_>_", "_>=_"):
    GLOBAL[_name] = [f"{a}, {b} -> bool" for a in NUMS for b in NUMS] + [
        f"{c}, {c} -> bool" for c in ("bool", "string", "bytes", "duration", "timestamp")
    ]


def _compile_table(table: dict[str, list[str]]) -> dict[str, list[tuple[tuple[T, ...], T]]]:
    out = {}
    for name, sigs in table.items():
        out[name] = [_sig(s) for s in sigs]
    return out


# Namespaces whose dotted functions are called as ``ns.fn(...)``.
NAMESPACES = frozenset(n.split(".")[0] for n in GLOBAL if "." in n)
_TABLES: list[dict] = []


def _tables() -> tuple[dict, dict]:
    """The parsed overload tables, built on the first check (a CLI run without selectors
    never pays for them)."""
    if not _TABLES:
        _TABLES.extend((_compile_table(GLOBAL), _compile_table(MEMBER)))
    return _TABLES[0], _TABLES[1]


# --- assignability -----------------------------------------------------------------------


_NULLABLE = frozenset(
    {
        "null_type",
        DURATION.kind,
        TIMESTAMP.kind,
        DEVICE.kind,
        QUANTITY.kind,
        SEMVER.kind,
        IP.kind,
        CIDR.kind,
        URL.kind,
        FORMAT.kind,
    }
)


def _is_param(t: T) -> bool:
    return t.kind.startswith("$")


def _subst(t: T, s: dict[str, T]) -> T:
    if _is_param(t):
        return s.get(t.kind, DYN)
    if t.params:
        return T(t.kind, tuple(_subst(p, s) for p in t.params))
    return t


def _assignable(param: T, arg: T, s: dict[str, T]) -> bool:
    if _is_param(param):
        bound = s.get(param.kind)
        if bound is None:
            s[param.kind] = arg
            return True
        # Another constraint on a bound parameter: unify, keeping the most general type.
        if _assignable(bound, arg, s) or _assignable(arg, bound, s):
            s[param.kind] = _most_general(bound, arg)
            return True
        return False
    if param.kind in ("dyn", "?") or arg.kind in ("dyn", "?"):
        return True
    if param.kind == "null_type" or arg.kind == "null_type":
        # cel-go's legacy nullness: null fits null, durations, timestamps and objects.
        other = arg if param.kind == "null_type" else param
        return other.kind in _NULLABLE
    if param.kind == "type":
        return arg.kind == "type"  # cel-go: any type value is assignable to a type
    if param.kind != arg.kind or len(param.params) != len(arg.params):
        return False
    return all(_assignable(p, a, s) for p, a in zip(param.params, arg.params, strict=True))


def _most_general(a: T, b: T) -> T:
    if a.kind == "dyn" or b.kind == "?":
        return a if a.kind == "dyn" else (b if b.kind == "dyn" else a)
    if b.kind == "dyn" or a.kind == "?":
        return b
    if a.kind == b.kind and len(a.params) == len(b.params) and a.params:
        return T(
            a.kind, tuple(_most_general(x, y) for x, y in zip(a.params, b.params, strict=True))
        )
    return a


def equivalent(a: T, b: T) -> bool:
    if a.kind == "?" or b.kind == "?":
        return True
    if a.kind != b.kind or len(a.params) != len(b.params):
        return False
    return all(equivalent(x, y) for x, y in zip(a.params, b.params, strict=True))


def resolve(overloads: list[tuple[tuple[T, ...], T]], args: list[T]) -> T | None:
    """The result type of a call, or None when no overload matches."""
    result: T | None = None
    for params, out in overloads:
        if len(params) != len(args):
            continue
        s: dict[str, T] = {}
        if all(_assignable(p, a, s) for p, a in zip(params, args, strict=True)):
            r = _subst(out, s)
            if result is None:
                result = r
            elif result != r:
                result = DYN
    return result


# --- constant validation (cel-go's AST validators and regex precompilation) --------------


def regex_error(pattern: str) -> str | None:
    from allocator.cel.runtime import compile_regex

    try:
        compile_regex(pattern)
    except ValueError as e:
        return str(e)
    return None


# --- the checker -------------------------------------------------------------------------


class Checked:
    """Per node its type, and the resolved qualified names (``sets.contains``, ``string``)."""

    __slots__ = ("types", "qualified")

    def __init__(self, types: dict[int, T], qualified: dict[int, str]) -> None:
        self.types = types
        self.qualified = qualified  # id(Call/Select/Ident node) -> resolved global name


class Checker:
    def __init__(self) -> None:
        self.types: dict[int, T] = {}
        self.qualified: dict[int, str] = {}
        self.format_depth = 0

    def fail(self, node: Node, message: str) -> None:
        raise CheckError(message, node.pos)

    def check(self, root: Node) -> T:
        t = self.visit(root, {})
        if t.kind not in ("bool", "dyn", "?"):
            self.fail(root, f"must evaluate to bool or the unknown type, not {t}")
        return t

    def visit(self, n: Node, scope: dict[str, T]) -> T:
        t = self._visit(n, scope)
        self.types[id(n)] = t
        return t

    def _qualified_name(self, n: Node, scope: dict[str, T]) -> str | None:
        parts: list[str] = []
        while isinstance(n, Select) and not n.optional:
            parts.append(n.field)
            n = n.operand
        if not isinstance(n, Ident) or n.name in scope:
            return None
        parts.append(n.name)
        return ".".join(reversed(parts))

    def _visit(self, n: Node, scope: dict[str, T]) -> T:
        if isinstance(n, Lit):
            return {
                "bool": BOOL,
                "int": INT,
                "uint": UINT,
                "double": DOUBLE,
                "string": STRING,
                "bytes": BYTES,
                "null": NULL,
            }[n.kind]
        if isinstance(n, Ident):
            if n.name in scope:
                return scope[n.name]
            if n.name == "device":
                return DEVICE
            if n.name in TYPE_IDENTS:
                self.qualified[id(n)] = n.name
                return TYPE(TYPE_IDENTS[n.name])
            self.fail(n, f"undeclared reference to '{n.name}' (in container '')")
        if isinstance(n, Select):
            q = self._qualified_name(n, scope)
            if q is not None and q in TYPE_IDENTS:
                self.qualified[id(n)] = q
                return TYPE(TYPE_IDENTS[q])
            operand = self.visit(n.operand, scope)
            return self._select(n, operand, n.field, n.optional)
        if isinstance(n, Has):
            operand = self.visit(n.operand, scope)
            if operand == DEVICE:
                self._select(n, operand, n.field, False)
            elif operand.kind not in ("map", "dyn", "?"):
                self.fail(n, f"invalid type argument to has() macro: {operand}")
            return BOOL
        if isinstance(n, ListLit):
            elems = []
            for i, e in enumerate(n.elems):
                t = self.visit(e, scope)
                if i in n.optional:
                    if t.kind == "optional_type":
                        t = t.params[0]
                    elif t.kind not in ("dyn", "?"):
                        self.fail(e, f"expected type 'optional_type' but found '{t}'")
                elems.append(t)
            return LIST(self._homogeneous(n, elems))
        if isinstance(n, MapLit):
            keys, values = [], []
            for k, v, optional in n.entries:
                kt = self.visit(k, scope)
                vt = self.visit(v, scope)
                if optional:
                    if vt.kind == "optional_type":
                        vt = vt.params[0]
                    elif vt.kind not in ("dyn", "?"):
                        self.fail(v, f"expected type 'optional_type' but found '{vt}'")
                if kt.kind not in ("int", "uint", "string", "bool", "dyn", "?"):
                    self.fail(k, f"unsupported map key type: {kt}")
                keys.append(kt)
                values.append(vt)
            return MAP(self._homogeneous(n, keys), self._homogeneous(n, values))
        if isinstance(n, MessageLit):
            self.fail(n, f"undeclared reference to '{n.type_name}' (in container '')")
        if isinstance(n, Bind):
            init = self.visit(n.init, scope)
            return self.visit(n.body, {**scope, n.var: init})
        if isinstance(n, Comp):
            return self._comp(n, scope)
        if isinstance(n, Call):
            return self._call(n, scope)
        raise AssertionError(type(n))

    def _homogeneous(self, n: Node, types: list[T]) -> T:
        if not types:
            return FREE
        first = types[0]
        for t in types[1:]:
            if not equivalent(first, t):
                if self.format_depth:
                    return DYN
                self.fail(n, f"expected type '{first}' but found '{t}'")
            if first.kind == "?" or (first.params and FREE in first.params):
                first = t
        return first

    def _select(self, n: Node, operand: T, name: str, optional: bool) -> T:
        if optional:
            inner = operand.params[0] if operand.kind == "optional_type" else operand
            return OPT(self._select(n, inner, name, False))
        if operand.kind == "optional_type":  # x.?a.b: selections after .? stay optional
            return OPT(self._select(n, operand.params[0], name, False))
        if operand == DEVICE:
            if name not in DEVICE_FIELDS:
                self.fail(n, f"undefined field '{name}'")
            return DEVICE_FIELDS[name]
        if operand.kind == "map":
            return operand.params[1]
        if operand.kind in ("dyn", "?"):
            return DYN
        self.fail(n, f"type '{operand}' does not support field selection")
        raise AssertionError

    def _comp(self, n: Comp, scope: dict[str, T]) -> T:
        r = self.visit(n.range, scope)
        kind = n.kind
        if kind in ("optMap", "optFlatMap"):
            if r.kind not in ("optional_type", "dyn", "?"):
                self.fail(n, f"found no matching overload for '{kind}' applied to '({r})'")
            inner = r.params[0] if r.kind == "optional_type" else DYN
            body = self.visit(n.expr, {**scope, n.var: inner})
            if kind == "optMap":
                return OPT(body)
            if body.kind not in ("optional_type", "dyn", "?"):
                self.fail(n, f"expected type 'optional_type' but found '{body}'")
            return body if body.kind == "optional_type" else OPT(DYN)
        if r.kind == "list":
            v1, v2 = (INT, r.params[0]) if n.var2 else (r.params[0], None)
        elif r.kind == "map":
            v1, v2 = r.params[0], (r.params[1] if n.var2 else None)
        elif r.kind in ("dyn", "?"):
            v1, v2 = DYN, DYN
        else:
            self.fail(
                n.range,
                f"expression of type '{r}' cannot be range of a comprehension "
                "(must be list, map, or dynamic)",
            )
            raise AssertionError
        if v1 == FREE:
            v1 = DYN
        inner = {**scope, n.var: v1}
        if n.var2:
            inner[n.var2] = DYN if v2 in (None, FREE) else v2
        if n.pred is not None:
            p = self.visit(n.pred, inner)
            if p.kind not in ("bool", "dyn", "?"):
                self.fail(n.pred, f"found no matching overload for '_&&_' applied to '({p})'")
        if kind in ("all", "exists", "exists_one", "all2", "exists2", "existsOne2"):
            p = self.visit(n.expr, inner)
            if p.kind not in ("bool", "dyn", "?"):
                op = "_&&_" if kind.startswith("all") else "_||_"
                self.fail(n.expr, f"found no matching overload for '{op}' applied to '({p})'")
            return BOOL
        if kind == "filter":
            return LIST(v1)
        body = self.visit(n.expr, inner)
        if kind in ("map", "transformList"):
            return LIST(body)
        if kind == "transformMap":
            return MAP(v1, body)
        # transformMapEntry: the expression is a map literal of the new entry
        if body.kind not in ("map", "dyn", "?"):
            self.fail(n.expr, f"expected type 'map' but found '{body}'")
        return body if body.kind == "map" else MAP(DYN, DYN)

    def _call(self, n: Call, scope: dict[str, T]) -> T:
        GLOBALS, MEMBERS = _tables()  # noqa: N806
        name = n.name
        overloads = None
        args_nodes = n.args
        if n.target is not None:
            q = self._qualified_name(n.target, scope)
            if q is not None and f"{q}.{name}" in GLOBALS:
                name = f"{q}.{name}"
                self.qualified[id(n)] = name
                overloads = GLOBALS[name]
            elif q is not None and q.split(".")[0] in NAMESPACES and q not in scope:
                self.fail(n, f"undeclared reference to '{q}.{name}' (in container '')")
        is_format = name == "format"
        if is_format:
            self.format_depth += 1
        try:
            if overloads is not None:
                arg_types = [self.visit(a, scope) for a in args_nodes]
            elif n.target is not None:
                overloads = MEMBERS.get(name)
                if overloads is None and name in GLOBALS:
                    overloads = []  # a global function called as a method: no overload fits
                if overloads is None:
                    self.fail(n, f"undeclared reference to '{name}' (in container '')")
                arg_types = [self.visit(n.target, scope)] + [
                    self.visit(a, scope) for a in args_nodes
                ]
            else:
                overloads = GLOBALS.get(name)
                if overloads is None:
                    self.fail(n, f"undeclared reference to '{name}' (in container '')")
                arg_types = [self.visit(a, scope) for a in args_nodes]
        finally:
            if is_format:
                self.format_depth -= 1
        result = resolve(overloads, arg_types)
        if result is None:
            shown = ", ".join(str(t) for t in arg_types)
            label = name if n.target is None or name in self.qualified.values() else name
            self.fail(n, f"found no matching overload for '{label}' applied to '({shown})'")
        self._validate_constants(n, name)
        return result

    def _format_problem(self, fmt: str, args: list[Node]) -> str | None:
        return _format_problem_of(self, fmt, args)

    def _validate_constants(self, n: Call, name: str) -> None:
        if name == "format" and n.target is not None:
            target, args = n.target, n.args
            constant = isinstance(target, Lit) and target.kind == "string"
            if constant and len(args) == 1 and isinstance(args[0], ListLit):
                problem = self._format_problem(target.value, args[0].elems)
                if problem is not None:
                    self.fail(n, problem)
        elif name in ("matches", "find", "findAll"):
            # s.matches(re) / matches(s, re) / s.find(re) / s.findAll(re[, n])
            pattern = n.args[0] if n.target is not None else n.args[1]
            if isinstance(pattern, Lit) and pattern.kind == "string":
                problem = regex_error(pattern.value)
                if problem is not None:
                    self.fail(pattern, f"invalid matches argument: {problem}")
        elif name in ("duration", "timestamp") and n.target is None and len(n.args) == 1:
            a = n.args[0]
            if isinstance(a, Lit) and a.kind == "string":
                from allocator.cel.runtime import CelError, parse_duration, parse_timestamp

                try:
                    (parse_duration if name == "duration" else parse_timestamp)(a.value)
                except CelError as e:
                    self.fail(a, f"invalid {name} argument: {e}")


# The static kinds each clause of a constant format string accepts (the strings
# extension's format validator; dyn is always accepted).
_FORMAT_KINDS = {
    "s": (
        "list",
        "map",
        "int",
        "uint",
        "double",
        "bool",
        "string",
        "google.protobuf.Timestamp",
        "bytes",
        "google.protobuf.Duration",
        "type",
        "null_type",
    ),
    "d": ("int", "uint"),
    "o": ("int", "uint"),
    "f": ("double", "string"),
    "e": ("double", "string"),
    "b": ("int", "uint", "bool"),
    "x": ("int", "uint", "string", "bytes"),
    "X": ("int", "uint", "string", "bytes"),
}
_FORMAT_ERRORS = {
    "s": "string clause can only be used on strings, bools, bytes, ints, doubles, maps, "
    "lists, types, durations, and timestamps",
    "d": "decimal clause can only be used on integers",
    "o": "octal clause can only be used on integers",
    "f": "fixed-point clause can only be used on doubles",
    "e": "scientific clause can only be used on doubles",
    "b": "only integers and bools can be formatted as binary",
    "x": "only integers, byte buffers, and strings can be formatted as hex",
    "X": "only integers, byte buffers, and strings can be formatted as hex",
}


def _format_kind_ok(t: T | None, clause: str) -> bool:
    return t is None or t.kind in ("dyn", "?") or t.kind in _FORMAT_KINDS[clause]


def _format_problem_of(checker: Checker, fmt: str, args: list[Node]) -> str | None:
    """What cel-go's string.format validator reports for a constant format string applied
    to a list literal (a compile error), or None."""
    types = checker.types

    def string_ok(node: Node) -> Node | None:
        if not _format_kind_ok(types.get(id(node)), "s"):
            return node
        children: list[Node] = []
        if isinstance(node, ListLit):
            children = list(node.elems)
        elif isinstance(node, MapLit):
            for k, v, _ in node.entries:
                children += [k, v]
        for c in children:
            bad = string_ok(c)
            if bad is not None:
                return bad
        return None

    i, arg, requested = 0, 0, 0
    while i < len(fmt):
        if fmt[i] != "%":
            i += 1
            continue
        if i + 1 < len(fmt) and fmt[i + 1] == "%":
            i += 2
            continue
        requested += 1
        if i + 1 >= len(fmt):
            return "unexpected end of string"
        if arg >= len(args):
            return f"index {arg} out of range"
        j = i + 1
        if fmt[j] == ".":
            j += 1
            start = j
            while True:
                if j >= len(fmt):
                    return (
                        "could not parse formatting clause: error while parsing precision: "
                        "could not find end of precision specifier"
                    )
                if not ("0" <= fmt[j] <= "9"):
                    break
                j += 1
            if j == start:
                return (
                    "could not parse formatting clause: error while parsing precision: "
                    'error while converting precision to integer: strconv.Atoi: parsing "": '
                    "invalid syntax"
                )
        clause = fmt[j]
        if clause not in _FORMAT_KINDS:
            return f'could not parse formatting clause: unrecognized formatting clause "{clause}"'
        node = args[arg]
        bad = string_ok(node) if clause == "s" else None
        if clause != "s" and not _format_kind_ok(types.get(id(node)), clause):
            bad = node
        if bad is not None:
            shown = types.get(id(bad))
            given = shown.kind if shown is not None else "dyn"
            return f"error during formatting: {_FORMAT_ERRORS[clause]}, was given {given}"
        i = j + 1
        arg += 1
    if len(args) > requested:
        return (
            f"too many arguments supplied to string.format (expected {requested}, got {len(args)})"
        )
    return None


def check(root: Node) -> Checked:
    c = Checker()
    c.check(root)
    return Checked(c.types, c.qualified)
