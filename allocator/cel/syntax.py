"""Compile-time work on selector text and its cel-python AST.

- ``rewrite_optional``: cel-python's grammar has no optional syntax, so ``x.?f`` and ``x[?k]``
  become the ordinary method call ``x.cel__opt("f")`` / ``x.cel__opt(k)`` before parsing. As in
  CEL, selections that follow an optional selection in the same chain (``x.?a.b``, ``x.?a[0]``)
  stay optional.
- ``device_fields``: which device fields an expression reads, for the memo key.
- ``check``: undeclared names and expressions that cannot be boolean.
"""

from __future__ import annotations

import ast as pyast

from lark import Token, Tree

from allocator.cel.values import KNOWN_FUNCTIONS, MACROS, NAMESPACE_VARS

OPT = "cel__opt"


class RewriteError(ValueError):
    pass


def _skip_string(text: str, i: int) -> int:
    """Index just past the string literal whose quote (or r/b prefix) starts at ``i``."""
    j = i
    while text[j] in "rRbB":
        j += 1
    raw = j > i and "r" in text[i:j].lower()
    q = text[j]
    if text.startswith(q * 3, j):
        end = text.find(q * 3, j + 3)
        if end < 0:
            raise RewriteError("unterminated string literal")
        return end + 3
    k = j + 1
    while k < len(text):
        c = text[k]
        if c == "\\" and not raw:
            k += 2
            continue
        if c == q:
            return k + 1
        if c == "\n":
            break
        k += 1
    raise RewriteError("unterminated string literal")


def _ident_at(text: str, i: int) -> int:
    j = i
    while j < len(text) and (text[j].isalnum() or text[j] == "_"):
        j += 1
    return j


def _skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n\f":
        i += 1
    return i


def rewrite_optional(text: str) -> str:
    if ".?" not in text and "[?" not in text.replace(" ", ""):
        return text
    out: list[str] = []
    stack: list[bool] = []  # True: a "[?" (or chained "[") whose "]" closes a cel__opt call
    chain = False  # just after an optional selection: following selections are optional too
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'" or (
            c in "rRbB" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_"))
        ):
            j = i
            while j < n and text[j] in "rRbB" and j - i < 2:
                j += 1
            if j < n and text[j] in "\"'":
                end = _skip_string(text, i)
                out.append(text[i:end])
                i, chain = end, False
                continue
        if c.isalpha() or c == "_":
            end = _ident_at(text, i)
            out.append(text[i:end])
            i, chain = end, False
            continue
        if c == ".":
            j = _skip_ws(text, i + 1)
            prev_digit = i > 0 and text[i - 1].isdigit()
            if j < n and text[j] == "?" and not prev_digit:
                k = _skip_ws(text, j + 1)
                end = _ident_at(text, k)
                if end == k:
                    raise RewriteError(f"expected a field name after '.?' at {i}")
                out.append(f'.{OPT}("{text[k:end]}")')
                i, chain = end, True
                continue
            if chain:
                k = j
                end = _ident_at(text, k)
                after = _skip_ws(text, end)
                if end > k and not (after < n and text[after] == "("):
                    out.append(f'.{OPT}("{text[k:end]}")')
                    i = end
                    continue
            out.append(c)
            i, chain = i + 1, False
            continue
        if c == "[":
            j = _skip_ws(text, i + 1)
            if j < n and text[j] == "?":
                out.append(f".{OPT}(")
                stack.append(True)
                i, chain = j + 1, False
                continue
            if chain:
                out.append(f".{OPT}(")
                stack.append(True)
                i, chain = i + 1, False
                continue
            stack.append(False)
            out.append(c)
            i += 1
            continue
        if c in "({":
            stack.append(False)
        elif c in ")}":
            if stack:
                stack.pop()
        elif c == "]":
            opt = stack.pop() if stack else False
            out.append(")" if opt else "]")
            i, chain = i + 1, opt
            continue
        if c not in " \t\r\n\f":
            chain = False
        out.append(c)
        i += 1
    return "".join(out)


# --- AST helpers ---------------------------------------------------------------------------

_WRAPPERS = {
    "expr",
    "conditionalor",
    "conditionaland",
    "relation",
    "addition",
    "multiplication",
    "unary",
    "member",
    "primary",
    "paren_expr",
}


def unwrap(t: Tree | Token) -> Tree | Token:
    while isinstance(t, Tree) and t.data in _WRAPPERS and len(t.children) == 1:
        t = t.children[0]
    return t


def string_literal(t: Tree | Token) -> str | None:
    t = unwrap(t)
    if isinstance(t, Tree) and t.data == "literal":
        tok = t.children[0]
        if tok.type == "STRING_LIT" and tok.value[:1] in "\"'":
            try:
                return pyast.literal_eval(tok.value)
            except (ValueError, SyntaxError):
                return None
    return None


def _ident(t: Tree | Token) -> str | None:
    t = unwrap(t)
    if isinstance(t, Tree) and t.data == "ident":
        return t.children[0].value
    return None


def _args(t: Tree) -> list:
    if len(t.children) > 2 and isinstance(t.children[2], Tree):
        return list(t.children[2].children)
    return []


# --- which device fields an expression reads -----------------------------------------------

DYNAMIC = None  # the expression reads device fields in a way we cannot enumerate


def _chain(t: Tree | Token) -> tuple[Tree | Token, list]:
    """(root, steps) of a selection chain; a step is a key string or a Tree (computed key)."""
    steps: list = []
    t = unwrap(t)
    while isinstance(t, Tree):
        if t.data == "member_dot":
            steps.append(t.children[1].value)
            t = unwrap(t.children[0])
        elif t.data == "member_index":
            key = string_literal(t.children[1])
            steps.append(key if key is not None else t.children[1])
            t = unwrap(t.children[0])
        elif t.data == "member_dot_arg" and t.children[1].value == OPT and len(_args(t)) == 1:
            arg = _args(t)[0]
            key = string_literal(arg)
            steps.append(key if key is not None else arg)
            t = unwrap(t.children[0])
        else:
            break
    steps.reverse()
    return t, steps


def device_fields(tree: Tree) -> frozenset[tuple] | None:
    """The device fields ``tree`` reads: ("driver",), ("allowMultipleAllocations",),
    ("attributes", domain, name), ("capacity", domain, name); DYNAMIC (None) when the
    expression uses a device map as a whole or with computed keys."""
    fields: set[tuple] = set()
    dynamic = False

    def visit(t: Tree | Token) -> None:
        nonlocal dynamic
        if dynamic or not isinstance(t, Tree):
            return
        root, steps = _chain(t)
        if steps and _ident(root) == "device":
            head = steps[0]
            if head in ("driver", "allowMultipleAllocations"):
                fields.add((head,))
                rest = steps[1:]
            elif head in ("attributes", "capacity"):
                if len(steps) < 3 or not all(isinstance(s, str) for s in steps[1:3]):
                    dynamic = True
                    return
                fields.add((head, steps[1], steps[2]))
                rest = steps[3:]
            else:  # an unknown field: evaluation reports it; key on everything
                dynamic = True
                return
            for s in rest:
                if isinstance(s, Tree):
                    visit(s)
            return
        if _ident(t) == "device":
            dynamic = True
            return
        for c in t.children:
            visit(c)

    visit(tree)
    return None if dynamic else frozenset(fields)


# --- checks --------------------------------------------------------------------------------

ROOT_VARIABLES = frozenset({"device"}) | frozenset(NAMESPACE_VARS)


def check(tree: Tree) -> str | None:
    """A compile error message, or None. Mirrors what the Kubernetes type checker rejects that
    cel-python would only notice at run time: undeclared names and non-boolean results."""
    problem: list[str] = []

    def visit(t: Tree | Token, bound: frozenset[str]) -> None:
        if problem or not isinstance(t, Tree):
            return
        if t.data == "ident":
            name = t.children[0].value
            if name not in ROOT_VARIABLES and name not in bound:
                problem.append(f"undeclared reference to '{name}'")
            return
        if t.data in ("ident_arg", "member_dot_arg"):
            name = t.children[0 if t.data == "ident_arg" else 1].value
            if name not in KNOWN_FUNCTIONS:
                problem.append(f"undeclared reference to function '{name}'")
                return
            if t.data == "member_dot_arg" and name in MACROS and name != "min":
                args = _args(t)
                var = _ident(args[0]) if args else None
                visit(t.children[0], bound)
                if var is None:
                    problem.append(f"{name}() needs a variable name as its first argument")
                    return
                for a in args[1:]:
                    visit(a, bound | {var})
                return
        for c in t.children:
            visit(c, bound)

    visit(tree, frozenset())
    if problem:
        return problem[0]
    kind = _static_kind(tree)
    if kind is not None and kind != "bool":
        return f"must evaluate to bool, got {kind}"
    return None


_BOOL_METHODS = frozenset(
    {
        "has",
        "all",
        "exists",
        "exists_one",
        "contains",
        "startsWith",
        "endsWith",
        "matches",
        "isGreaterThan",
        "isLessThan",
        "isInteger",
        "isQuantity",
        "isSemver",
        "hasValue",
        "intersects",
        "equivalent",
        "isSorted",
    }
)
_STRING_METHODS = frozenset(
    {"lowerAscii", "upperAscii", "replace", "charAt", "substring", "trim", "join", "quote"}
)
_INT_METHODS = frozenset(
    {"size", "indexOf", "lastIndexOf", "compareTo", "major", "minor", "patch", "sign"}
)


def _static_kind(t: Tree | Token) -> str | None:
    """The type of an expression where it is evident from its shape; None when unknown."""
    t = unwrap(t)
    if not isinstance(t, Tree):
        return None
    d = t.data
    if d in ("conditionalor", "conditionaland") or (d == "relation" and len(t.children) == 2):
        return "bool"
    if d == "unary":
        return "bool" if unwrap(t.children[0]).data == "unary_not" else "number"
    if d in ("addition", "multiplication"):
        # No arithmetic yields a bool; name the operand type where the shape shows it.
        return _static_kind(t.children[-1]) or ("number" if d == "multiplication" else "sum")
    if d == "literal":
        return {
            "BOOL_LIT": "bool",
            "INT_LIT": "int",
            "UINT_LIT": "uint",
            "FLOAT_LIT": "double",
            "STRING_LIT": "string",
            "MLSTRING_LIT": "string",
            "BYTES_LIT": "bytes",
            "NULL_LIT": "null",
        }[t.children[0].type]
    if d == "list_lit":
        return "list"
    if d == "map_lit":
        return "map"
    if d in ("ident_arg", "member_dot_arg"):
        name = t.children[0 if d == "ident_arg" else 1].value
        if name in _BOOL_METHODS:
            return "bool"
        if name in _STRING_METHODS:
            return "string"
        if name in _INT_METHODS:
            return "int"
        if name == "quantity":
            return "quantity"
        if name == "semver":
            return "semver"
        return None
    root, steps = _chain(t)
    if _ident(root) == "device" and steps:
        if steps == ["driver"]:
            return "string"
        if steps in (["attributes"], ["capacity"]) or (
            len(steps) == 2 and steps[0] in ("attributes", "capacity")
        ):
            return "map"
        if len(steps) == 3 and steps[0] == "capacity":
            return "quantity"
    return None


_COLLAPSIBLE = frozenset(
    {"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication", "unary"}
    | {"member"}
)


def collapse(tree: Tree) -> Tree:
    """Drop single-child grammar wrappers (``expr`` > ``conditionalor`` > ... > ``member``).

    cel-python's evaluator visits every node, and a leaf sits under ten of them; its operator
    methods only ever *visit* their operands, so removing the pass-through levels keeps the
    meaning and cuts evaluation time severalfold. ``primary`` stays: it dispatches on its child.
    """
    while (
        tree.data in _COLLAPSIBLE and len(tree.children) == 1 and isinstance(tree.children[0], Tree)
    ):
        tree = tree.children[0]
    tree.children = [collapse(c) if isinstance(c, Tree) else c for c in tree.children]
    return tree
