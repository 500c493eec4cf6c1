"""Size bounds on decoded snapshot documents, so hostile input is refused in well under a second.

A Kubernetes object is never deeper than a few dozen levels, never holds a megabyte string
or a hundred-digit number, and kubectl never writes YAML aliases; a document over any bound
is refused whole (``BoundError``, a ``SnapshotError``: CLI exit 2, HTTP 400), naming the
bound. The bounds follow what the Kubernetes stack enforces (Go's encoding/json nests at most
10,000 levels, go-yaml refuses "excessive aliasing"), tightened to what a snapshot needs.

``check_document`` is for callers that decode JSON themselves (the web API): it checks one
decoded value and returns it with YAML's non-string mapping keys turned into strings, as
sigs.k8s.io/yaml does.
"""

from __future__ import annotations

import math
from typing import Any

from allocator.snapshot.errors import BoundError

MAX_DEPTH = 100
"""Objects and lists nested in one another, counted from the top of a file."""
MAX_STRING_CHARS = 1 << 20
"""Characters in one string (also mapping keys)."""
MAX_NUMBER_DIGITS = 100
"""Decimal digits of one integer; larger numbers are refused, floats must be finite."""
MAX_ALIAS_NODES = 100_000
"""Objects, lists and scalars that YAML aliases add when expanded (a 381-byte "billion
laughs" expands to hundreds of millions)."""

_INT_LIMIT = 10**MAX_NUMBER_DIGITS
_CONTAINERS = (dict, list)


def _depth_problem() -> tuple[str, str]:
    return "MAX_DEPTH", f"nested deeper than {MAX_DEPTH} levels (bound MAX_DEPTH)"


def _string_problem(s: str) -> tuple[str, str] | None:
    if len(s) > MAX_STRING_CHARS:
        return (
            "MAX_STRING_CHARS",
            f"string of {len(s):,} characters, longer than {MAX_STRING_CHARS:,} "
            "(bound MAX_STRING_CHARS)",
        )
    return None


def _text_problem(s: str) -> tuple[str, str] | None:
    if not s.isascii():
        try:
            s.encode("utf-8")
        except UnicodeEncodeError as err:
            return (
                "unicode",
                f"string holds a lone surrogate {s[err.start]!r} (\\u{ord(s[err.start]):04x}), "
                "which is not Unicode text",
            )
    return None


def _scalar_problem(v: Any) -> tuple[str, str] | None:
    t = type(v)
    if t is int:
        if -_INT_LIMIT < v < _INT_LIMIT:
            return None
        return (
            "MAX_NUMBER_DIGITS",
            f"integer of more than {MAX_NUMBER_DIGITS} digits (bound MAX_NUMBER_DIGITS)",
        )
    if t is float:
        if math.isfinite(v):
            return None
        return "number", f"{v!r} is not a finite number (JSON has no NaN or Infinity)"
    if t is bool or v is None:
        return None
    if t is bytes:
        return "type", "binary value (!!binary): Kubernetes objects hold base64 strings instead"
    return "type", f"{type(v).__name__} value is not a JSON value (YAML tag not supported)"


def _key_text(k: Any) -> str | None:
    """A scalar mapping key as the string sigs.k8s.io/yaml makes of it; None if not scalar."""
    if isinstance(k, bool):
        return "true" if k else "false"
    if isinstance(k, int):
        return str(k) if -_INT_LIMIT < k < _INT_LIMIT else None
    if isinstance(k, float):
        return repr(k) if math.isfinite(k) else None
    if k is None:
        return "null"
    return None


def _first_problem(value: Any, depth: int, check_text: bool) -> tuple[tuple[str, str] | None, bool]:
    """The first bound a tree breaks (no path: the fast pass), and whether any key is not a
    string."""
    odd_keys = False
    stack = [(value, depth)]
    while stack:
        v, d = stack.pop()
        if d > MAX_DEPTH:
            return _depth_problem(), odd_keys
        if type(v) is dict:
            for k, x in v.items():
                if type(k) is str:
                    if len(k) > MAX_STRING_CHARS or (check_text and not k.isascii()):
                        p = _string_problem(k) or (_text_problem(k) if check_text else None)
                        if p:
                            return p, odd_keys
                else:
                    odd_keys = True
                    if _key_text(k) is None:
                        return ("type", f"mapping key {k!r} is not a string"), odd_keys
                tx = type(x)
                if tx is str:
                    if len(x) > MAX_STRING_CHARS or (check_text and not x.isascii()):
                        p = _string_problem(x) or (_text_problem(x) if check_text else None)
                        if p:
                            return p, odd_keys
                elif tx is dict or tx is list:
                    stack.append((x, d + 1))
                elif x is not None and tx is not bool:
                    p = _scalar_problem(x)
                    if p:
                        return p, odd_keys
        else:
            for x in v:
                tx = type(x)
                if tx is str:
                    if len(x) > MAX_STRING_CHARS or (check_text and not x.isascii()):
                        p = _string_problem(x) or (_text_problem(x) if check_text else None)
                        if p:
                            return p, odd_keys
                elif tx is dict or tx is list:
                    stack.append((x, d + 1))
                elif x is not None and tx is not bool:
                    p = _scalar_problem(x)
                    if p:
                        return p, odd_keys
    return None, odd_keys


def _path_of_problem(value: Any, depth: int, check_text: bool, path: str = "") -> str | None:
    """The field path of the first problem (the slow pass, run only after a refusal)."""
    if depth > MAX_DEPTH:
        return path
    if isinstance(value, dict):
        for k, x in value.items():
            sub = f"{path}.{k}" if path else str(k)
            if isinstance(k, str):
                if _string_problem(k) or (check_text and _text_problem(k)):
                    return sub
            elif _key_text(k) is None:
                return sub
            found = _path_of_problem(x, depth + 1, check_text, sub)
            if found is not None:
                return found
        return None
    if isinstance(value, list):
        for i, x in enumerate(value):
            found = _path_of_problem(x, depth + 1, check_text, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    if isinstance(value, str):
        bad = _string_problem(value) or (check_text and _text_problem(value))
    else:
        bad = _scalar_problem(value)
    return path if bad else None


def _string_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            (k if isinstance(k, str) else _key_text(k)): _string_keys(x) for k, x in value.items()
        }
    if isinstance(value, list):
        return [_string_keys(x) for x in value]
    return value


def check_document(value: Any, where: str = "", *, depth: int = 1, check_text: bool = True) -> Any:
    """Check one decoded document against the bounds; raise ``BoundError`` naming the bound
    and the field, or return the document (non-string keys made strings).

    ``where`` prefixes the message (``FILE doc N Kind name``); ``depth`` is the document's own
    nesting level in its file; ``check_text=False`` skips the lone-surrogate check for
    decoders that cannot produce them (orjson, yaml-rs).
    """
    if type(value) not in _CONTAINERS:
        problem = (
            _string_problem(value) or (check_text and _text_problem(value))
            if isinstance(value, str)
            else _scalar_problem(value)
        )
        if problem:
            raise BoundError(f"{where}: {problem[1]}" if where else problem[1], problem[0])
        return value
    problem, odd_keys = _first_problem(value, depth, check_text)
    if problem is not None:
        path = _path_of_problem(value, depth, check_text)
        text = f"{path}: {problem[1]}" if path else problem[1]
        raise BoundError(f"{where}: {text}" if where else text, problem[0])
    return _string_keys(value) if odd_keys else value


def json_within_bounds(value: Any, depth: int = 1) -> bool:
    """Whether a document orjson decoded is within the bounds (no path, no message). orjson
    gives only string keys, integers within 64 bits (longer ones as finite floats) and finite
    floats (it refuses infinities), so depth and string lengths are all there is to check:
    level by level over the containers, in half of ``check_document``'s time. False: let
    ``check_document`` find the problem and name its field."""
    level = [value]
    while level:
        if depth > MAX_DEPTH:
            return False
        below = []
        for v in level:
            if type(v) is dict:
                if max(map(len, v), default=0) > MAX_STRING_CHARS:
                    return False
                children = v.values()
            else:
                children = v
            for x in children:
                t = type(x)
                if t is str:
                    if len(x) > MAX_STRING_CHARS:
                        return False
                elif t is dict or t is list:
                    below.append(x)
        level = below
        depth += 1
    return True


def check_expansion(docs: list[Any], where: str) -> None:
    """Refuse YAML whose aliases expand past MAX_ALIAS_NODES, nest past MAX_DEPTH once
    expanded, or refer to themselves. PyYAML shares one Python object per anchor, so this
    measures the expanded size without expanding (each distinct object is visited once)."""
    memo: dict[int, tuple[int, int]] = {}  # id -> (expanded node count, height)
    in_progress: set[int] = set()
    distinct = 0
    total = 0
    for root in docs:
        if type(root) not in _CONTAINERS:
            distinct += 1
            total += 1
            continue
        stack: list[tuple[Any, bool]] = [(root, False)]
        while stack:
            node, done = stack.pop()
            key = id(node)
            children = node.values() if type(node) is dict else node
            if done:
                size, height = 1, 0
                distinct += 1
                for c in children:
                    if type(c) in _CONTAINERS:
                        s, h = memo[id(c)]
                        size += s
                        height = max(height, h)
                    else:
                        size += 1
                        distinct += 1
                memo[key] = (size, height + 1)
                in_progress.discard(key)
                if height + 1 > MAX_DEPTH:
                    message, bound = _depth_problem()[1], "MAX_DEPTH"
                    raise BoundError(f"{where}: {message}", bound)
                continue
            if key in memo:
                continue
            in_progress.add(key)
            stack.append((node, True))
            for c in children:
                if type(c) in _CONTAINERS:
                    ck = id(c)
                    if ck in in_progress:
                        raise BoundError(f"{where}: a YAML alias refers to itself", "recursion")
                    if ck not in memo:
                        stack.append((c, False))
        total += memo[id(root)][0]
    added = total - distinct
    if added > MAX_ALIAS_NODES:
        raise BoundError(
            f"{where}: YAML aliases expand to {added:,} more nodes, more than "
            f"{MAX_ALIAS_NODES:,} (bound MAX_ALIAS_NODES)",
            "MAX_ALIAS_NODES",
        )
