"""A checked CEL AST turned into nested Python closures (one per node), evaluated on an
activation dict. Building closures once per expression makes an evaluation a few function
calls per node, with no tree walking or dispatch on node kinds at run time.

Error absorption follows cel-go: ``&&``/``||`` (and the ``all``/``exists`` macros, which fold
with them) return the deciding value when the other side errs; a ternary evaluates only the
chosen branch; every other call is strict, so the first error propagates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from allocator.cel import lib
from allocator.cel import runtime as rt
from allocator.cel.checker import TYPE_IDENTS, Checked
from allocator.cel.parser import (
    Bind,
    Call,
    Comp,
    Has,
    Ident,
    ListLit,
    Lit,
    MapLit,
    Node,
    Select,
)
from allocator.cel.runtime import NONE, CelError, OptionalValue, TypeValue, UInt

Fn = Callable[[dict], Any]

_BINARY = {
    "_==_": rt.eq,
    "_!=_": lambda a, b: not rt.eq(a, b),
    "_<_": rt.lt,
    "_<=_": rt.le,
    "_>_": rt.gt,
    "_>=_": rt.ge,
    "_+_": rt.add,
    "_-_": rt.sub,
    "_*_": rt.mul,
    "_/_": rt.div,
    "_%_": rt.mod,
    "_[_]": rt.index,
    "_[?_]": rt.opt_index,
    "@in": rt.contains_in,
}


class Builder:
    def __init__(self, checked: Checked) -> None:
        self.checked = checked

    def build(self, n: Node) -> Fn:
        if isinstance(n, Lit):
            v = UInt(n.value) if n.kind == "uint" else n.value
            return lambda a: v
        if isinstance(n, Ident):
            q = self.checked.qualified.get(id(n))
            if q is not None:
                tv = TypeValue(_runtime_type_name(q))
                return lambda a: tv
            name = n.name
            return lambda a: a[name]
        if isinstance(n, Select):
            q = self.checked.qualified.get(id(n))
            if q is not None:
                tv = TypeValue(_runtime_type_name(q))
                return lambda a: tv
            operand = self.build(n.operand)
            field = n.field
            if n.optional:
                return lambda a: rt.opt_select(operand(a), field)

            def select(a: dict) -> Any:
                x = operand(a)
                if type(x) is dict and field in x:
                    return x[field]
                return rt.select(x, field)

            return select
        if isinstance(n, Has):
            operand = self.build(n.operand)
            field = n.field
            return lambda a: rt.has(operand(a), field)
        if isinstance(n, ListLit):
            return self._list(n)
        if isinstance(n, MapLit):
            return self._map(n)
        if isinstance(n, Bind):
            init = self.build(n.init)
            body = self.build(n.body)
            var = n.var

            def bind(a: dict) -> Any:
                inner = dict(a)
                inner[var] = init(a)
                return body(inner)

            return bind
        if isinstance(n, Comp):
            return self._comp(n)
        if isinstance(n, Call):
            return self._call(n)
        raise AssertionError(type(n))

    def _list(self, n: ListLit) -> Fn:
        elems = [self.build(e) for e in n.elems]
        if not n.optional:
            return lambda a: [e(a) for e in elems]
        optional = n.optional

        def build_list(a: dict) -> list:
            out = []
            for i, e in enumerate(elems):
                v = e(a)
                if i in optional:
                    if type(v) is not OptionalValue:
                        raise rt.no_overload("optional list element", v)
                    if v.present:
                        out.append(v.value)
                else:
                    out.append(v)
            return out

        return build_list

    def _map(self, n: MapLit) -> Fn:
        entries = [(self.build(k), self.build(v), opt) for k, v, opt in n.entries]

        def build_map(a: dict) -> dict:
            out: dict = {}
            for k, v, opt in entries:
                key = k(a)
                if type(key) not in (int, UInt, str, bool):
                    raise CelError(f"unsupported key type: {rt.type_name(key)}")
                if rt.map_get(out, key)[0]:
                    raise CelError(f"Failed with repeated key: {key}")
                val = v(a)
                if opt:
                    if type(val) is not OptionalValue:
                        raise rt.no_overload("optional map entry", val)
                    if not val.present:
                        continue
                    val = val.value
                out[key] = val
            return out

        return build_map

    def _call(self, n: Call) -> Fn:
        name = self.checked.qualified.get(id(n), n.name)
        args = [self.build(x) for x in n.args]
        if name == "_&&_" or name == "_||_":
            return _logic(args[0], args[1], name == "_&&_")
        if name == "_?_:_":
            c, t, f = args

            def cond(a: dict) -> Any:
                v = c(a)
                if v is True:
                    return t(a)
                if v is False:
                    return f(a)
                raise rt.no_overload("_?_:_", v)

            return cond
        if name == "!_":
            x = args[0]
            return lambda a: rt.logical_not(x(a))
        if name == "-_":
            x = args[0]
            return lambda a: rt.neg(x(a))
        if name in _BINARY and n.target is None:
            fn = _BINARY[name]
            left, right = args
            return lambda a: fn(left(a), right(a))
        if n.target is not None and id(n) not in self.checked.qualified:
            fn = lib.MEMBER_FUNCS[name]
            target = self.build(n.target)
            if not args:
                return lambda a: fn(target(a))
            if len(args) == 1:
                (x,) = args
                return lambda a: fn(target(a), x(a))
            return lambda a: fn(target(a), *[x(a) for x in args])
        fn = lib.GLOBAL_FUNCS[name]
        if not args:
            return lambda a: fn()
        if len(args) == 1:
            (x,) = args
            return lambda a: fn(x(a))
        return lambda a: fn(*[x(a) for x in args])

    def _comp(self, n: Comp) -> Fn:
        rng = self.build(n.range)
        expr = self.build(n.expr) if n.expr is not None else None
        pred = self.build(n.pred) if n.pred is not None else None
        v1, v2, kind = n.var, n.var2, n.kind

        if kind in ("optMap", "optFlatMap"):

            def opt_map(a: dict) -> Any:
                o = rng(a)
                if type(o) is not OptionalValue:
                    raise rt.no_overload(kind, o)
                if not o.present:
                    return NONE
                inner = dict(a)
                inner[v1] = o.value
                r = expr(inner)
                if kind == "optMap":
                    return OptionalValue(r)
                if type(r) is not OptionalValue:
                    raise rt.no_overload(kind, r)
                return r

            return opt_map

        # What one iteration costs (the loop's condition, step and body), in cel-go's units.
        weight = 2 + _weight(n.expr) + _weight(n.pred)

        def items(a: dict) -> list[tuple[Any, Any]]:
            r = rng(a)
            if isinstance(r, list | tuple):
                out = list(enumerate(r)) if v2 else [(x, None) for x in r]
            elif isinstance(r, dict):
                out = list(r.items()) if v2 else [(k, None) for k in r]
            else:
                raise rt.not_iterable(r)
            cost = a.get(COST)
            if cost is not None:
                cost[0] += weight * len(out)
                if cost[0] > COST_LIMIT:
                    raise CelError("operation cancelled: actual cost limit exceeded")
            return out

        def scope(a: dict, x: Any, y: Any) -> dict:
            inner = dict(a)
            inner[v1] = x
            if v2:
                inner[v2] = y
            return inner

        if kind in ("all", "all2", "exists", "exists2"):
            stop = kind.startswith("exists")  # the value that decides
            op = "_||_" if stop else "_&&_"

            def fold(a: dict) -> bool:
                err: CelError | None = None
                for x, y in items(a):
                    try:
                        v = expr(scope(a, x, y))
                    except CelError as e:
                        err = err or e
                        continue
                    if v is stop:
                        return stop
                    if v is not (not stop):
                        err = err or rt.no_overload(op, v)
                if err is not None:
                    raise err
                return not stop

            return fold
        if kind in ("exists_one", "existsOne2"):

            def one(a: dict) -> bool:
                count = 0
                for x, y in items(a):
                    v = expr(scope(a, x, y))
                    if v is True:
                        count += 1
                    elif v is not False:
                        raise rt.no_overload("_?_:_", v)
                return count == 1

            return one

        def test(inner: dict) -> bool:
            v = pred(inner)
            if v is True or v is False:
                return v
            raise rt.no_overload("_?_:_", v)

        if kind == "filter":
            return lambda a: [x for x, _ in items(a) if test(scope(a, x, None))]
        if kind in ("map", "transformList"):

            def mapped(a: dict) -> list:
                out = []
                for x, y in items(a):
                    inner = scope(a, x, y)
                    if pred is None or test(inner):
                        out.append(expr(inner))
                return out

            return mapped
        if kind == "transformMap":

            def tmap(a: dict) -> dict:
                out: dict = {}
                for x, y in items(a):
                    inner = scope(a, x, y)
                    if pred is None or test(inner):
                        out[x] = expr(inner)
                return out

            return tmap

        def tentry(a: dict) -> dict:  # transformMapEntry
            out: dict = {}
            for x, y in items(a):
                inner = scope(a, x, y)
                if pred is None or test(inner):
                    entry = expr(inner)
                    if not isinstance(entry, dict):
                        raise rt.no_overload("transformMapEntry", entry)
                    for k, v in entry.items():
                        if rt.map_get(out, k)[0]:
                            raise CelError(f"insert failed: key {k} already exists")
                        out[k] = v
            return out

        return tentry


# The activation key of an evaluation's running cost (a one-element list shared by every
# scope), and resourceapi.CELSelectorExpressionMaxCost, the limit kube-scheduler evaluates
# selectors with. Only comprehensions are charged (each iteration by the static cost of its
# body): nothing else can come near the limit, and a selector of nested loops over ten
# elements each errs after a fraction of a second instead of running for minutes.
COST = "@cost"
COST_LIMIT = 1_000_000


def _weight(n: Node | None) -> int:
    """cel-go's cost of evaluating ``n`` once, roughly: one per identifier, field selection
    and call, ten per list literal, thirty per map literal; a nested comprehension charges
    its own iterations."""
    if n is None or isinstance(n, Lit):
        return 0
    if isinstance(n, Ident):
        return 1
    if isinstance(n, Select | Has):
        return 1 + _weight(n.operand)
    if isinstance(n, Call):
        return 1 + _weight(n.target) + sum(_weight(x) for x in n.args)
    if isinstance(n, ListLit):
        return 10 + sum(_weight(x) for x in n.elems)
    if isinstance(n, MapLit):
        return 30 + sum(_weight(k) + _weight(v) for k, v, _ in n.entries)
    if isinstance(n, Comp):
        return _weight(n.range)
    if isinstance(n, Bind):
        return _weight(n.init) + _weight(n.body)
    return 1


def _logic(left: Fn, right: Fn, is_and: bool) -> Fn:
    decide = not is_and  # && is decided by false, || by true
    op = "_&&_" if is_and else "_||_"

    def logic(a: dict) -> Any:
        try:
            lv = left(a)
        except CelError as e:
            lv = e
        if lv is decide:
            return decide
        try:
            rv = right(a)
        except CelError as e:
            rv = e
        if rv is decide:
            return decide
        if lv is (not decide) and rv is (not decide):
            return not decide
        for v in (lv, rv):
            if isinstance(v, CelError):
                raise v
            if v is not True and v is not False:
                raise rt.no_overload(op, v)
        raise AssertionError

    return logic


def _runtime_type_name(q: str) -> str:
    t = TYPE_IDENTS[q]
    return "dyn" if t.kind == "dyn" else t.kind


def build(root: Node, checked: Checked) -> Fn:
    return Builder(checked).build(root)
