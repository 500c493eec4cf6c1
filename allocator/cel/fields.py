"""Which device fields a selector reads, for the memo key.

("driver",), ("allowMultipleAllocations",), ("attributes", domain, name) and
("capacity", domain, name); None when the expression reads the device in a way that cannot be
enumerated (a whole map, a computed key). ``cel.bind(x, device.attributes["d"], ...)`` is
followed: ``x.name`` in its body reads ("attributes", "d", "name").
"""

from __future__ import annotations

from allocator.cel.parser import Bind, Call, Comp, Has, Ident, ListLit, Lit, MapLit, Node, Select


class _Dynamic(Exception):
    pass


def _key(n: Node) -> str | None:
    return n.value if isinstance(n, Lit) and n.kind == "string" else None


def device_fields(root: Node) -> frozenset[tuple] | None:
    fields: set[tuple] = set()

    def chain(n: Node, aliases: dict[str, tuple | None]) -> tuple[tuple, list[Node]] | None:
        """(steps from the device root, computed sub-expressions) when ``n`` is a selection
        chain on ``device`` (or on a bound alias of part of it)."""
        steps: list[str] = []
        extra: list[Node] = []
        while True:
            if isinstance(n, Select):
                steps.append(n.field)
                n = n.operand
            elif isinstance(n, Call) and n.name in ("_[_]", "_[?_]") and n.target is None:
                k = _key(n.args[1])
                if k is None:
                    return None
                steps.append(k)
                n = n.args[0]
            else:
                break
        if isinstance(n, Ident):
            if n.name in aliases:
                base = aliases[n.name]
                if base is None:  # a local variable
                    return None
                return (*base, *reversed(steps)), extra
            if n.name == "device" and "device" not in aliases:
                return tuple(reversed(steps)), extra
        return None

    def record(steps: tuple) -> int:
        """Record the field a chain reads; how many of its steps that consumed."""
        if not steps:
            raise _Dynamic
        head = steps[0]
        if head in ("driver", "allowMultipleAllocations"):
            fields.add((head,))
            return 1
        if head in ("attributes", "capacity") and len(steps) >= 3:
            fields.add((head, steps[1], steps[2]))
            return 3
        raise _Dynamic

    def visit(n: Node, aliases: dict[str, tuple | None]) -> None:
        if isinstance(n, Has):
            c = chain(n.operand, aliases)
            if c is not None:
                record((*c[0], n.field))
                return
            visit(n.operand, aliases)
            return
        if isinstance(n, Select | Call) and not (isinstance(n, Call) and n.target is not None):
            c = chain(n, aliases)
            if c is not None:
                record(c[0])
                return
        if isinstance(n, Ident):
            if n.name in aliases:
                if aliases[n.name] is not None:
                    raise _Dynamic
            elif n.name == "device":
                raise _Dynamic
            return
        if isinstance(n, Bind):
            c = chain(n.init, aliases)
            inner: dict[str, tuple | None] = dict(aliases)
            if c is not None and c[0][:1] in (("attributes",), ("capacity",)) and len(c[0]) == 2:
                inner[n.var] = c[0]  # an alias of one domain's map: its reads are fields
            else:
                visit(n.init, aliases)
                inner[n.var] = None
            visit(n.body, inner)
            return
        if isinstance(n, Comp):
            visit(n.range, aliases)
            inner = dict(aliases)
            for v in (n.var, n.var2):
                if v:
                    inner[v] = None
            for part in (n.pred, n.expr):
                if part is not None:
                    visit(part, inner)
            return
        if isinstance(n, Select):
            visit(n.operand, aliases)
            return
        if isinstance(n, Call):
            if n.target is not None:
                visit(n.target, aliases)
            for x in n.args:
                visit(x, aliases)
            return
        if isinstance(n, ListLit):
            for x in n.elems:
                visit(x, aliases)
            return
        if isinstance(n, MapLit):
            for k, v, _ in n.entries:
                visit(k, aliases)
                visit(v, aliases)

    try:
        visit(root, {})
    except _Dynamic:
        return None
    return frozenset(fields)
