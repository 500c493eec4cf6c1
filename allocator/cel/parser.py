"""CEL text to an AST, with the standard macros expanded (cel-spec's grammar, cel-go's macros).

A hand-written lexer and recursive-descent parser: no grammar is built at start-up, so a CLI
run pays nothing for it. Operators become ``Call`` nodes named as in cel-go (``_+_``, ``!_``,
``@in``, ``_[_]``, ``_?_:_``); macros (``has``, ``all``, ``exists``, ``exists_one``, ``map``,
``filter``, the two-variable comprehensions, ``cel.bind``, ``optMap``/``optFlatMap``) become
``Comp``/``Has``/``Bind`` nodes. Errors carry cel-go's wording where it matters
("Syntax error: ...", "undeclared reference", ...).
"""

from __future__ import annotations

import re
from typing import Any

MAX_DEPTH = 250  # cel-go's default maximum recursion depth of the parser

RESERVED = frozenset(
    [
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    ]
)


class ParseError(ValueError):
    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


# --- AST ---------------------------------------------------------------------------------


class Node:
    """An AST node; ``pos`` is its offset in the text (for error messages)."""

    __slots__ = ("pos",)
    _fields: tuple[str, ...] = ()

    def __init__(self, *args: Any, pos: int = 0) -> None:
        # Plain classes, not dataclasses: building a dataclass costs about a millisecond of
        # start-up each, paid by every CLI run.
        self.pos = pos
        for name, value in zip(self._fields, args, strict=True):
            setattr(self, name, value)

    def __repr__(self) -> str:
        inner = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
        return f"{type(self).__name__}({inner})"


class Lit(Node):
    __slots__ = ("kind", "value")
    _fields = ("kind", "value")
    kind: str  # bool int uint double string bytes null
    value: Any


class Ident(Node):
    __slots__ = ("name",)
    _fields = ("name",)
    name: str


class Select(Node):
    __slots__ = ("operand", "field", "optional")
    _fields = ("operand", "field", "optional")
    operand: Node
    field: str
    optional: bool  # x.?f

    def __init__(self, operand: Node, field: str, optional: bool = False, *, pos: int = 0):
        self.pos, self.operand, self.field, self.optional = pos, operand, field, optional


class Call(Node):
    __slots__ = ("name", "args", "target")
    _fields = ("name", "args", "target")
    name: str
    args: list[Node]
    target: Node | None  # receiver of a member call

    def __init__(self, name: str, args: list[Node], target: Node | None = None, *, pos: int = 0):
        self.pos, self.name, self.args, self.target = pos, name, args, target


class ListLit(Node):
    __slots__ = ("elems", "optional")
    _fields = ("elems", "optional")
    elems: list[Node]
    optional: frozenset[int]  # indexes of [?x] elements


class MapLit(Node):
    __slots__ = ("entries",)
    _fields = ("entries",)
    entries: list[tuple[Node, Node, bool]]  # key, value, optional ({?k: v})


class MessageLit(Node):
    __slots__ = ("type_name", "fields")
    _fields = ("type_name", "fields")
    type_name: str
    fields: list[tuple[str, Node]]


class Has(Node):
    __slots__ = ("operand", "field")
    _fields = ("operand", "field")
    operand: Node
    field: str


class Comp(Node):
    """A macro comprehension. kind: all exists exists_one map filter all2 exists2
    existsOne2 transformList transformMap transformMapEntry optMap optFlatMap."""

    __slots__ = ("kind", "range", "var", "var2", "pred", "expr")
    _fields = ("kind", "range", "var", "var2", "pred", "expr")
    kind: str
    range: Node
    var: str
    var2: str | None
    pred: Node | None  # the filter of map/transform*(.., filter, expr)
    expr: Node | None


class Bind(Node):
    __slots__ = ("var", "init", "body")
    _fields = ("var", "init", "body")
    var: str
    init: Node
    body: Node


# --- lexer -------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t\n\r\f]+|//[^\n]*)
  | (?P<float>(?:[0-9]+\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+|\.[0-9]+(?:[eE][+-]?[0-9]+)?))
  | (?P<hex>0[xX][0-9a-fA-F]+[uU]?)
  | (?P<int>[0-9]+[uU]?)
  | (?P<string>(?:[rR][bB]?|[bB][rR]?)?(?:\"\"\"|'''|"|'))
  | (?P<ident>[_a-zA-Z][_a-zA-Z0-9]*)
  | (?P<op>\|\||&&|==|!=|<=|>=|\.\?|\[\?|[-+*/%!<>?:.,\[\](){}])
    """,
    re.VERBOSE,
)

_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "?": "?",
    '"': '"',
    "'": "'",
    "`": "`",
}


class Tok:
    __slots__ = ("kind", "value", "pos", "text")

    def __init__(self, kind: str, value: Any, pos: int, text: str = "") -> None:
        self.kind = kind  # int uint double string bytes ident op eof
        self.value, self.pos, self.text = value, pos, text


def _string_token(text: str, i: int, prefix: str, quote: str) -> tuple[Tok, int]:
    raw = "r" in prefix.lower()
    is_bytes = "b" in prefix.lower()
    j = i + len(prefix) + len(quote)
    out: list[str] = []
    triple = len(quote) == 3
    n = len(text)
    while True:
        if j >= n:
            raise ParseError("Syntax error: token recognition error: unterminated string", i)
        if text.startswith(quote, j):
            j += len(quote)
            break
        c = text[j]
        if c in "\r\n" and not triple:
            raise ParseError("Syntax error: token recognition error: newline in string", j)
        if c == "\\" and not raw:
            j, piece = _escape(text, j, is_bytes)
            out.append(piece)
            continue
        out.append(c)
        j += 1
    s = "".join(out)
    if is_bytes:
        # Escapes in bytes literals are byte values; other characters are UTF-8.
        value = b"".join(
            bytes([ord(ch) - 0xDC00]) if 0xDC00 <= ord(ch) <= 0xDCFF else ch.encode("utf-8")
            for ch in s
        )
        return Tok("bytes", value, i, text[i:j]), j
    return Tok("string", s, i, text[i:j]), j


def _escape(text: str, j: int, is_bytes: bool) -> tuple[int, str]:
    if j + 1 >= len(text):
        raise ParseError("Syntax error: token recognition error: bad escape", j)
    c = text[j + 1]
    if c in _ESCAPES:
        return j + 2, _ESCAPES[c]
    if c in "xX":
        h = text[j + 2 : j + 4]
        if len(h) != 2 or not all(ch in "0123456789abcdefABCDEF" for ch in h):
            raise ParseError("Syntax error: token recognition error: bad escape", j)
        v = int(h, 16)
        return j + 4, (chr(0xDC00 + v) if is_bytes else chr(v))
    if c in "uU":
        if is_bytes:
            raise ParseError("Syntax error: token recognition error: bad escape", j)
        width = 4 if c == "u" else 8
        h = text[j + 2 : j + 2 + width]
        if len(h) != width or not all(ch in "0123456789abcdefABCDEF" for ch in h):
            raise ParseError("Syntax error: token recognition error: bad escape", j)
        v = int(h, 16)
        if v > 0x10FFFF or 0xD800 <= v <= 0xDFFF:
            raise ParseError("Syntax error: invalid unicode code point", j)
        return j + 2 + width, chr(v)
    if c in "0123":
        o = text[j + 1 : j + 4]
        if len(o) != 3 or not all(ch in "01234567" for ch in o):
            raise ParseError("Syntax error: token recognition error: bad escape", j)
        v = int(o, 8)
        return j + 4, (chr(0xDC00 + v) if is_bytes else chr(v))
    raise ParseError("Syntax error: token recognition error: bad escape", j)


def tokenize(text: str) -> list[Tok]:
    toks: list[Tok] = []
    i, n = 0, len(text)
    while i < n:
        m = _TOKEN.match(text, i)
        if m is None:
            raise ParseError(f"Syntax error: token recognition error at: '{text[i]}'", i)
        kind = m.lastgroup
        s = m.group()
        if kind == "ws":
            i = m.end()
            continue
        if kind == "string":
            quote = s.lstrip("rRbB")
            tok, i = _string_token(text, i, s[: len(s) - len(quote)], quote)
            toks.append(tok)
            continue
        if kind == "float":
            toks.append(Tok("double", float(s), i, s))
        elif kind in ("hex", "int"):
            unsigned = s[-1] in "uU"
            digits = s[:-1] if unsigned else s
            v = int(digits, 16) if kind == "hex" else int(digits)
            toks.append(Tok("uint" if unsigned else "int", v, i, s))
        elif kind == "ident":
            toks.append(Tok("ident", s, i, s))
        else:
            toks.append(Tok("op", s, i, s))
        i = m.end()
    toks.append(Tok("eof", None, n, "<EOF>"))
    return toks


# --- parser ------------------------------------------------------------------------------

_RELATIONS = {"<": "_<_", "<=": "_<=_", ">": "_>_", ">=": "_>=_", "==": "_==_", "!=": "_!=_"}
INT64_MIN, INT64_MAX, UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1


class Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = tokenize(text)
        self.i = 0
        self.depth = 0
        self.neg_literal = False

    # helpers
    def peek(self, k: int = 0) -> Tok:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def at(self, op: str) -> bool:
        t = self.toks[self.i]
        return t.kind == "op" and t.value == op

    def take(self) -> Tok:
        t = self.toks[self.i]
        self.i += 1
        return t

    def expect(self, op: str) -> Tok:
        t = self.toks[self.i]
        if t.kind != "op" or t.value != op:
            self.fail(t, f"expecting '{op}'")
        self.i += 1
        return t

    def fail(self, t: Tok, what: str = "") -> None:
        near = t.text if t.kind != "eof" else "<EOF>"
        extra = f", {what}" if what else ""
        raise ParseError(f"Syntax error: mismatched input '{near}'{extra}", t.pos)

    def parse(self) -> Node:
        e = self.expr()
        if self.peek().kind != "eof":
            t = self.peek()
            raise ParseError(f"Syntax error: extraneous input '{t.text}' expecting <EOF>", t.pos)
        return e

    def _enter(self, t: Tok) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ParseError("expression recursion limit exceeded", t.pos)

    # grammar
    def expr(self) -> Node:
        t = self.peek()
        self._enter(t)
        try:
            cond = self.or_()
            if self.at("?"):
                q = self.take()
                a = self.or_()
                self.expect(":")
                b = self.expr()
                return Call("_?_:_", [cond, a, b], pos=q.pos)
            return cond
        finally:
            self.depth -= 1

    def or_(self) -> Node:
        terms, ops = [self.and_()], []
        while self.at("||"):
            ops.append(self.take().pos)
            terms.append(self.and_())
        return _balanced("_||_", terms, ops)

    def and_(self) -> Node:
        terms, ops = [self.relation()], []
        while self.at("&&"):
            ops.append(self.take().pos)
            terms.append(self.relation())
        return _balanced("_&&_", terms, ops)

    def relation(self) -> Node:
        left = self.addition()
        while True:
            t = self.peek()
            if t.kind == "op" and t.value in _RELATIONS:
                self.take()
                left = Call(_RELATIONS[t.value], [left, self.addition()], pos=t.pos)
            elif t.kind == "ident" and t.value == "in":
                self.take()
                left = Call("@in", [left, self.addition()], pos=t.pos)
            else:
                return left

    def addition(self) -> Node:
        left = self.multiplication()
        while self.at("+") or self.at("-"):
            t = self.take()
            left = Call(f"_{t.value}_", [left, self.multiplication()], pos=t.pos)
        return left

    def multiplication(self) -> Node:
        left = self.unary()
        while self.at("*") or self.at("/") or self.at("%"):
            t = self.take()
            left = Call(f"_{t.value}_", [left, self.unary()], pos=t.pos)
        return left

    def unary(self) -> Node:
        t = self.peek()
        if self.at("!"):
            ops = []
            while self.at("!"):
                ops.append(self.take())
            operand = self.member()
            # cel-go: an even run of "!" cancels out; an odd run is one negation.
            if len(ops) % 2 == 0:
                return operand
            return Call("!_", [operand], pos=t.pos)
        if self.at("-"):
            ops = []
            while self.at("-"):
                ops.append(self.take())
            nxt = self.peek()
            if len(ops) % 2 == 1 and nxt.kind in ("int", "double") and self._literal_ends_here():
                # A negative numeric literal (so -9223372036854775808 is an int).
                self.neg_literal = True
                operand = self.member()
                if isinstance(operand, Lit) and operand.kind in ("int", "double"):
                    v = -operand.value
                    if operand.kind == "int" and v < INT64_MIN:
                        raise ParseError("invalid int literal", nxt.pos)
                    return Lit(operand.kind, v, pos=t.pos)
                return Call("-_", [operand], pos=t.pos)
            operand = self.member()
            if len(ops) % 2 == 0:
                return operand
            return Call("-_", [operand], pos=t.pos)
        return self.member()

    def _literal_ends_here(self) -> bool:
        nxt = self.peek(1)
        return not (nxt.kind == "op" and nxt.value in (".", "[", ".?", "[?"))

    def member(self) -> Node:
        node = self.primary()
        while True:
            t = self.peek()
            if t.kind != "op":
                return node
            if t.value in (".", ".?"):
                self.take()
                name = self.take()
                if name.kind != "ident":
                    self.fail(name, "expecting IDENTIFIER")
                if t.value == "." and self.at("("):
                    self.take()
                    args = self.args(")")
                    node = self.member_call(node, name.value, args, name.pos)
                else:
                    node = Select(node, name.value, optional=t.value == ".?", pos=name.pos)
            elif t.value in ("[", "[?"):
                self.take()
                index = self.expr()
                self.expect("]")
                name = "_[?_]" if t.value == "[?" else "_[_]"
                node = Call(name, [node, index], pos=t.pos)
            else:
                return node

    def args(self, close: str) -> list[Node]:
        out: list[Node] = []
        if self.at(close):
            self.take()
            return out
        while True:
            out.append(self.expr())
            if self.at(","):
                self.take()
                continue
            self.expect(close)
            return out

    def primary(self) -> Node:
        t = self.take()
        k = t.kind
        if k == "int":
            limit = INT64_MAX + (1 if self.neg_literal else 0)
            self.neg_literal = False
            if t.value > limit:
                raise ParseError(f"invalid int literal: {t.text}", t.pos)
            return Lit("int", t.value, pos=t.pos)
        if k == "uint":
            if t.value > UINT64_MAX:
                raise ParseError(f"invalid uint literal: {t.text}", t.pos)
            return Lit("uint", t.value, pos=t.pos)
        if k == "double":
            return Lit("double", t.value, pos=t.pos)
        if k == "string":
            return Lit("string", t.value, pos=t.pos)
        if k == "bytes":
            return Lit("bytes", t.value, pos=t.pos)
        if k == "ident":
            name = t.value
            if name == "true" or name == "false":
                return Lit("bool", name == "true", pos=t.pos)
            if name == "null":
                return Lit("null", None, pos=t.pos)
            if name in RESERVED or name == "in":
                raise ParseError(f"Syntax error: reserved identifier: {name}", t.pos)
            if self.at("("):
                self.take()
                args = self.args(")")
                return self.global_call(name, args, t.pos)
            if self.at("{"):
                return self.message(name, t.pos)
            if self.at(".") and self._qualified_message_ahead():
                parts = [name]
                while self.at("."):
                    self.take()
                    parts.append(self.take().value)
                return self.message(".".join(parts), t.pos)
            return Ident(name, pos=t.pos)
        if k == "op":
            v = t.value
            if v == ".":
                # A leading dot: the root namespace (".device"), same resolution here.
                name = self.take()
                if name.kind != "ident":
                    self.fail(name, "expecting IDENTIFIER")
                if self.at("("):
                    self.take()
                    return self.global_call(name.value, self.args(")"), name.pos)
                return Ident(name.value, pos=name.pos)
            if v == "(":
                e = self.expr()
                self.expect(")")
                return e
            if v == "[":
                return self.list_lit(t)
            if v == "[?":  # a list literal whose first element is optional
                self.i -= 1
                self.toks[self.i] = Tok("op", "[", t.pos, "[")
                self.toks.insert(self.i + 1, Tok("op", "?", t.pos + 1, "?"))
                return self.list_lit(self.take())
            if v == "{":
                return self.map_lit(t)
        self.fail(t)
        raise AssertionError  # unreachable

    def _qualified_message_ahead(self) -> bool:
        j = self.i
        while (
            self.toks[j].kind == "op"
            and self.toks[j].value == "."
            and self.toks[j + 1].kind == "ident"
        ):
            j += 2
        return self.toks[j].kind == "op" and self.toks[j].value == "{"

    def message(self, name: str, pos: int) -> Node:
        self.expect("{")
        fields: list[tuple[str, Node]] = []
        while not self.at("}"):
            f = self.take()
            if f.kind != "ident":
                self.fail(f, "expecting IDENTIFIER")
            self.expect(":")
            fields.append((f.value, self.expr()))
            if not self.at(","):
                break
            self.take()
        self.expect("}")
        return MessageLit(name, fields, pos=pos)

    def list_lit(self, t: Tok) -> Node:
        elems: list[Node] = []
        opt: set[int] = set()
        while not self.at("]"):
            if self.at("?"):
                self.take()
                opt.add(len(elems))
            elems.append(self.expr())
            if not self.at(","):
                break
            self.take()
        self.expect("]")
        return ListLit(elems, frozenset(opt), pos=t.pos)

    def map_lit(self, t: Tok) -> Node:
        entries: list[tuple[Node, Node, bool]] = []
        while not self.at("}"):
            optional = False
            if self.at("?"):
                self.take()
                optional = True
            k = self.expr()
            self.expect(":")
            entries.append((k, self.expr(), optional))
            if not self.at(","):
                break
            self.take()
        self.expect("}")
        return MapLit(entries, pos=t.pos)

    # macros
    def global_call(self, name: str, args: list[Node], pos: int) -> Node:
        if name == "has" and len(args) == 1:
            a = args[0]
            if not isinstance(a, Select) or a.optional:
                raise ParseError("invalid argument to has() macro", pos)
            return Has(a.operand, a.field, pos=pos)
        return Call(name, args, pos=pos)

    def member_call(self, target: Node, name: str, args: list[Node], pos: int) -> Node:
        n = len(args)

        def var(a: Node) -> str:
            if not isinstance(a, Ident):
                raise ParseError("argument must be a simple name", a.pos)
            return a.name

        if isinstance(target, Ident) and target.name == "cel" and name == "bind" and n == 3:
            return Bind(var(args[0]), args[1], args[2], pos=pos)
        if name in ("all", "exists", "exists_one") and n == 2:
            return Comp(name, target, var(args[0]), None, None, args[1], pos=pos)
        if name in ("all", "exists", "existsOne") and n == 3:
            v1, v2 = var(args[0]), var(args[1])
            self._distinct(v1, v2, pos)
            return Comp(name + "2", target, v1, v2, None, args[2], pos=pos)
        if name == "map" and n in (2, 3):
            pred = args[1] if n == 3 else None
            return Comp("map", target, var(args[0]), None, pred, args[-1], pos=pos)
        if name == "filter" and n == 2:
            return Comp("filter", target, var(args[0]), None, args[1], None, pos=pos)
        if name in ("transformList", "transformMap", "transformMapEntry") and n in (3, 4):
            v1, v2 = var(args[0]), var(args[1])
            self._distinct(v1, v2, pos)
            pred = args[2] if n == 4 else None
            return Comp(name, target, v1, v2, pred, args[-1], pos=pos)
        if name in ("optMap", "optFlatMap") and n == 2:
            return Comp(name, target, var(args[0]), None, None, args[1], pos=pos)
        return Call(name, args, target, pos=pos)

    @staticmethod
    def _distinct(v1: str, v2: str, pos: int) -> None:
        if v1 == v2:
            raise ParseError(f"duplicate variable name: {v1}", pos)


def _balanced(fn: str, terms: list[Node], ops: list[int]) -> Node:
    """A chain of ``&&`` (or ``||``) as the balanced tree cel-go's parser builds, so a long
    chain is shallow (the logic is associative; only the depth changes)."""

    def tree(lo: int, hi: int) -> Node:
        mid = (lo + hi + 1) // 2
        left = terms[mid] if mid == lo else tree(lo, mid - 1)
        right = terms[mid + 1] if mid == hi else tree(mid + 1, hi)
        return Call(fn, [left, right], pos=ops[mid])

    return terms[0] if not ops else tree(0, len(ops) - 1)


# cel-go's default limit on an expression's size, in code points.
MAX_CODE_POINTS = 100_000


def parse(text: str) -> Node:
    if len(text) > MAX_CODE_POINTS:
        raise ParseError(
            f"expression code point size exceeds limit: size: {len(text)}, limit {MAX_CODE_POINTS}",
            0,
        )
    return Parser(text).parse()


def location(text: str, offset: int) -> tuple[int, int]:
    """(line, column) of an offset, 1-based line and 0-based column as cel-go prints them."""
    before = text[:offset]
    line = before.count("\n") + 1
    col = offset - (before.rfind("\n") + 1)
    return line, col
