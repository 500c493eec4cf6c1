"""Turn uploaded files into a flat list of raw objects.

Accepted encodings: multi-document YAML, a JSON object, a JSON array, and ``kind: List`` /
``kind: *List`` wrappers with ``items`` in either. Objects are numbered per file from 1 in the
order they appear after flattening Lists, skipping empty YAML documents: "doc 7" is the
seventh object of the file (docs/SNAPSHOT.md).

Speed without changing what a file means:

- JSON is read by orjson; when orjson refuses a file, the standard library reads it again,
  only to word the message (line and column) as before.
- YAML keeps PyYAML's (libyaml's) YAML 1.1 meaning, which is what Kubernetes' go-yaml v2
  reads: ``yes``/``no``/``on``/``off`` are booleans, ``0755`` is octal, ``1_000`` an integer,
  merge keys ``<<`` work, timestamps stay strings, a duplicate key keeps its last value. The
  Rust parser yaml-rs (YAML 1.2) reads a file only when a scan finds nothing that YAML 1.1 and
  1.2 read differently (those scalars, tags, anchors and aliases, merge keys, directives,
  complex keys, characters libyaml refuses) and no deep indentation (yaml-rs recurses without
  a bound on block nesting); any other file, and any file yaml-rs refuses, goes to PyYAML,
  which also words every syntax error (file, line, column).
- Every decoded document is checked against ``allocator.snapshot.bounds`` before anything
  else reads it.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

# Imported with this module, never lazily: a long file is parsed on a worker thread, and
# yaml-rs (0.1.6) crashes the process when used after the thread that imported it ended.
import yaml_rs

from allocator import jsonread
from allocator.records import record
from allocator.snapshot import bounds
from allocator.snapshot.errors import BoundError

# The fast YAML path. yaml-rs reads YAML 1.2, PyYAML 1.1; a file goes the fast way only when
# neither the text scan below nor the check of yaml-rs' strings (``_diverges``) finds a scalar
# the two read differently (measured on both libraries). False alarms only cost speed: such a
# file is read by PyYAML.
# Plain scalars yaml-rs reads as numbers and PyYAML does not, or differently: leading zeros
# (``0755``, ``010`` are octal in 1.1, ``08`` a string), ``0o``/``0X`` forms, ``_1``,
# exponents (``1e3``, ``1.0e3`` are strings in PyYAML), signed fractions (``-.5``).
# Each must be the whole token, so a UID such as ``00e71d65-ec52-...`` (a string to both) does
# not send a snapshot full of them down the slow path.
_NUMBER_1_2 = (
    r"(?:(?:[-+]?0[0-9oOX_]|_[0-9])[0-9A-Fa-f_.oOxX]*"
    r"|[-+]?(?:[0-9][0-9_.]*|\.[0-9])[eE][-+]?[0-9][0-9_.]*|[-+]\.[0-9][0-9_.eE+-]*)"
    r"(?=[\s,\]}]|$)"
)
_TEXT_GUARDS = (
    # A number's first character, then the boundary before it (a lookbehind) and the number
    # from that character on (a lookahead inside a one-character lookbehind): starting with
    # the rarer character lets the scan skip to it in C instead of trying every blank of the
    # indentation (10 MB: 80 ms -> 50 ms; 15 MB with the blank first: 0.43 s -> 0.23 s).
    re.compile(r"[-+0-9_.](?<=[\s\[{,].)(?<=(?=" + _NUMBER_1_2 + r").)"),
    # JSON-style flow mappings: {"a":0755}; one literal start each is a fast search (33 ms of
    # a 10 MB file for ["']: together, 5 ms apart).
    re.compile(r'":(?=[-+0-9_.])' + _NUMBER_1_2),
    re.compile(r"':(?=[-+0-9_.])" + _NUMBER_1_2),
    re.compile(r"\n%"),  # directives (%YAML 1.1, %TAG)
)
# Deep block nesting: yaml-rs recurses without a bound (a segfault at some 30,000 levels).
# Unlike the guards above (which only say the two parsers read a text differently), it is
# checked before yaml-rs reads the text at all.
_DEEP_NESTING = re.compile(r"\n[ \t?-]{100}")
# Characters libyaml refuses (it names them with their position). In ASCII text those are the
# control characters but tab and line breaks: bytes.translate deletes every other character
# ten times faster than the regular expression reads them. The expression is compiled on the
# first text that is not ASCII (re keeps it): compiling its ranges costs 5 ms a process.
_REFUSED_CHARACTER = "[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
_ASCII_ACCEPTED = b"\t\n\r" + bytes(range(0x20, 0x7F))
# Line breaks to YAML 1.1 only: NEL and the Unicode line and paragraph separators.
_YAML11_LINE_BREAKS = ("\x85", "\u2028", "\u2029")


def _has_refused_character(text: str) -> bool:
    if text.isascii():
        return bool(text.encode("ascii").translate(None, _ASCII_ACCEPTED))
    return re.search(_REFUSED_CHARACTER, text) is not None


# Tags, anchors and aliases (only PyYAML's path bounds alias expansion), where a node can start:
# at a line's start or after an indicator; not after a word, so a CEL selector's ``a && !b``
# inside a quoted string keeps the fast path. Found by their rare first character, then the
# text before them is read back (a regular expression anchored at every line start and colon
# costs 0.4 s on 15 MB).
_NODE_PROPERTY = re.compile(r"[!&*](?:[^\s=]|(?<=!)\s)")
_NODE_START = frozenset(":?-,[{\n")
# Plain scalars PyYAML reads as booleans, numbers or special keys and yaml-rs as strings.
_YAML11_WORDS = frozenset(
    ["yes", "Yes", "YES", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF", "=", "<<"]
)
_SEXAGESIMAL = re.compile(r"[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$")
_SEXAGESIMAL_STARTS = frozenset("+-0123456789")


def _needs_pyyaml(text: str) -> bool:
    """Whether PyYAML must read the text: the two guards ``_fast_yaml_parse`` asks in turn."""
    return _unsafe_for_yaml_rs(text) or _read_otherwise(text)


def _unsafe_for_yaml_rs(text: str) -> bool:
    """What yaml-rs must not even read: deep block nesting (it recurses without a bound), and
    tags, anchors and aliases where a node can start (only PyYAML's path bounds alias
    expansion, and tags mean what PyYAML makes of them)."""
    if _DEEP_NESTING.search(text) or _DEEP_NESTING.search("\n" + text[:256]):
        return True
    if "!" not in text and "&" not in text and "*" not in text:
        return False
    for match in _NODE_PROPERTY.finditer(text):
        i = match.start() - 1
        while i >= 0 and text[i] in " \t":
            i -= 1
        if i < 0 or (
            text[i] in _NODE_START
            # A folded scalar's next line is indented; one at column 0 starts a node.
            and (text[i] != "\n" or i == match.start() - 1 or _ends_a_key(text, i))
        ):
            return True
    return False


def _read_otherwise(text: str) -> bool:
    """Whether YAML 1.1 (PyYAML) may read the text otherwise than yaml-rs (YAML 1.2) does, or
    refuse it: numbers, directives, characters libyaml refuses, YAML 1.1's own line breaks.
    Read-only over the text: it may run while yaml-rs parses it (``_fast_yaml_parse``)."""
    head = "\n" + text[:256]  # the guards look for a boundary before each token
    if any(rx.search(text) or rx.search(head) for rx in _TEXT_GUARDS):
        return True
    if _has_refused_character(text):
        return True
    # Line breaks to YAML 1.1 (PyYAML), text to YAML 1.2 (yaml-rs).
    return not text.isascii() and any(c in text for c in _YAML11_LINE_BREAKS)


def _ends_a_key(text: str, newline: int) -> bool:
    """Whether the line before ``text[newline]`` leaves a node to start on the next line, or
    may (blank, a comment, ``---``): not when it is the first part of a folded scalar, as
    go-yaml writes a long CEL selector whose next line starts with ``&&`` or ``!``."""
    start = text.rfind("\n", 0, newline) + 1
    line = text[start:newline].rstrip(" \t\r")
    if not line or line.lstrip().startswith("#") or line.startswith("---"):
        return True
    return line[-1] in _NODE_START


def _yaml11_reads_differently(s: str) -> bool:
    """Whether this string from yaml-rs, had it been a plain scalar, means something else
    to PyYAML (``yes``, ``on``, ``1:30``, ``<<``): a quoted one means the same to both, but
    the value cannot tell."""
    return s in _YAML11_WORDS or (
        ":" in s and s[:1] in _SEXAGESIMAL_STARTS and _SEXAGESIMAL.match(s) is not None
    )


def _diverges(docs: list[Any]) -> bool:
    """Whether yaml-rs' values hold a string PyYAML could read as something else, or a
    mapping key that is not a string (complex keys): PyYAML must then read the file."""
    # A walk over every value of a big file: the common case (a string that is neither a
    # YAML 1.1 word nor holds a colon) costs one set lookup and one substring test.
    words, sexagesimal = _YAML11_WORDS, _yaml11_reads_differently
    stack = list(docs)
    while stack:
        v = stack.pop()
        t = type(v)
        if t is dict:
            for k, x in v.items():
                if type(k) is not str or k in words or (":" in k and sexagesimal(k)):
                    return True
                tx = type(x)
                if tx is str:
                    if x in words or (":" in x and sexagesimal(x)):
                        return True
                elif tx is dict or tx is list:
                    stack.append(x)
        elif t is list:
            for x in v:
                tx = type(x)
                if tx is str:
                    if x in words or (":" in x and sexagesimal(x)):
                        return True
                elif tx is dict or tx is list:
                    stack.append(x)
        elif t is str and sexagesimal(v):
            return True
    return False


@record
class RawObject:
    """A decoded object and where it came from (file, place in the file)."""

    file: str
    index: int  # 1-based, per file
    obj: Any


def _looks_like_list_wrapper(obj: Any) -> bool:
    if not isinstance(obj, dict):
        return False
    kind = obj.get("kind")
    return isinstance(kind, str) and kind.endswith("List") and isinstance(obj.get("items"), list)


def _flatten(docs: list[Any]) -> list[tuple[Any, int]]:
    """Objects in file order (Lists and List wrappers unwrapped), each with its nesting level:
    1, as wrappers only hold objects (a file means the same however its objects are wrapped).
    Iterative, and wrapper nesting is bounded too."""
    out: list[tuple[Any, int]] = []
    stack: list[tuple[Any, int]] = [(doc, 1) for doc in reversed(docs)]
    while stack:
        doc, nesting = stack.pop()
        if doc is None:
            continue
        if nesting > bounds.MAX_DEPTH:
            raise BoundError(f"lists {bounds._depth_problem()[1]}", "MAX_DEPTH")
        if isinstance(doc, list):
            stack.extend((d, nesting + 1) for d in reversed(doc))
        elif _looks_like_list_wrapper(doc):
            stack.extend((d, nesting + 1) for d in reversed(doc["items"]))
        else:
            out.append((doc, 1))
    return out


def _pyyaml_docs(name: str, text: str, problems: list[str]) -> list[Any] | None:
    # PyYAML is imported only for a file it must read (10 ms a process, JSON needs none).
    from allocator.snapshot.pyyaml import pyyaml_docs

    return pyyaml_docs(name, text, problems)


# What yaml-rs' reading of a file is (``_yaml_rs_verdict``).
_WITHIN = 0  # reads as PyYAML reads it, and every object is within the bounds
_DIVERGES = 1  # PyYAML must read the file
_UNSURE = 2  # a bound may be broken: the two walks, _diverges then check_document, decide

# orjson refuses to write containers nested deeper than this (its recursion limit, pinned by
# a test): a file's objects written as one list inside _DEPTH_PAD more lists are refused
# exactly when one of them nests deeper than MAX_DEPTH, so orjson measures depth in C.
_ORJSON_MAX_NESTING = 254
_DEPTH_PAD = _ORJSON_MAX_NESTING - 1 - bounds.MAX_DEPTH
# A string of yaml-rs that PyYAML, had it been a plain scalar, reads otherwise (the YAML 1.1
# words and sexagesimal numbers of ``_yaml11_reads_differently``), as JSON writes the whole
# string: a value or a key. The lookahead rejects most strings at their first character.
_YAML11_JSON_STRING = re.compile(
    b'"(?=['
    + re.escape("".join(sorted({w[0] for w in _YAML11_WORDS} | set("-+0123456789"))).encode())
    + b"])("
    + b"|".join(re.escape(w.encode()) for w in sorted(_YAML11_WORDS, key=len, reverse=True))
    + rb"|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?(?:\\n)?"
    + rb')"'
)
# What yaml-rs reads as an infinity or NaN: .inf/.nan spelt in any case, and decimals past
# the float range (309 digits or more: underscores may stand between them).
_NON_FINITE_SPELLING = re.compile(r"\.(?:inf|nan)", re.IGNORECASE)
_DIGIT_RUNS = bytes.maketrans(b"123456789_", b"0000000000")
_FLOAT_OVERFLOW_DIGITS = b"0" * 300


def _may_read_non_finite(text: str) -> bool:
    """Whether yaml-rs may read an infinity or a NaN from this text (false alarms only cost
    the exact walk)."""
    if _NON_FINITE_SPELLING.search(text):
        return True
    return _FLOAT_OVERFLOW_DIGITS in text.encode("utf-8", "surrogatepass").translate(_DIGIT_RUNS)


def _written_within_bounds(objects: list[tuple[Any, int]]) -> bytes | None:
    """A file's objects (``_flatten``) written by orjson as one JSON list, or None when one of
    them may break a bound of ``bounds.check_document``: orjson refuses non-string keys,
    integers past 64 bits and, inside _DEPTH_PAD lists, nesting past MAX_DEPTH, and a string
    is never longer than the JSON of its object. Non-finite floats (written as null) are the
    caller's to rule out. Two passes in C instead of one in Python over every value."""
    if any(depth != 1 for _, depth in objects):
        return None  # _DEPTH_PAD counts from an object at the top
    dumps = orjson.dumps
    try:
        if any(len(dumps(obj)) > bounds.MAX_STRING_CHARS for obj, _ in objects):
            return None
        padded: list[Any] = [obj for obj, _ in objects]
        for _ in range(_DEPTH_PAD):
            padded = [padded]
        return dumps(padded)
    except orjson.JSONEncodeError:
        return None


def _yaml_rs_verdict(docs: list[Any], text: str, non_finite: bool | None = None) -> int:
    """``_diverges`` and the bounds of ``bounds.check_document`` without a Python walk over
    the values yaml-rs read from ``text``: orjson writes the file's objects (refusing
    non-string keys, integers past 64 bits and nesting past MAX_DEPTH, see _DEPTH_PAD) and
    one regular expression reads the strings it wrote; those YAML 1.1 reads otherwise
    diverge only where the text holds them plain (``_plain_somewhere``). An infinity or NaN
    (orjson writes null) is looked for in the text (``_may_read_non_finite``); an object whose
    JSON is longer than MAX_STRING_CHARS may hold a string past the bound. Whatever orjson
    refuses or may hide is ``_UNSURE``: the exact walks decide and word it. ``non_finite``:
    ``_may_read_non_finite(text)`` when the caller read it already."""
    if non_finite if non_finite is not None else _may_read_non_finite(text):
        return _UNSURE
    if any(type(d) is not dict and type(d) is not list for d in docs if d is not None):
        return _UNSURE
    try:
        written = _written_within_bounds(_flatten(docs))
    except BoundError:
        return _UNSURE
    if written is None:
        return _UNSURE
    found = {m.group(1) for m in _YAML11_JSON_STRING.finditer(written)}
    if found and (len(found) > _MAX_SPELLINGS or _plain_somewhere(text, found)):
        return _DIVERGES
    return _WITHIN


# A string that YAML 1.1 reads otherwise means the same to both parsers when it was quoted or
# a block scalar (go-yaml quotes "no", "on", "yes" and "1:30" when it writes them): the text
# decides. A plain scalar that is only the word starts at the text's or a line's start (after
# indentation), after a colon, a flow indicator, or a block indicator ("- ", "? ", "--- ")
# and blanks; it ends at the line's end or before a flow indicator, a comment or a colon.
# Other places (a word inside a longer plain scalar) are false alarms that only cost speed.
# Lines break at \n and \r (YAML 1.1 also at NEL and the Unicode line and paragraph
# separators: ``_needs_pyyaml`` sends a text holding one to PyYAML). Each word is searched
# for as a literal first (3 ms in 10 MB; one pattern for every place a node starts took
# 250 ms), so only a few different ones are.
_MAX_SPELLINGS = 16
_PLAIN_END = r"[ \t]*(?:$|[\r\n,\]}#:])"


def _plain_somewhere(text: str, spellings: set[bytes]) -> bool:
    for spelling in spellings:
        word = re.escape(spelling.decode("ascii").removesuffix("\\n"))
        if re.match(word + _PLAIN_END, text):
            return True
        after_blank = re.compile(rf"{word}(?<=[\n\r\[{{,: \t?-]{word}){_PLAIN_END}", re.MULTILINE)
        if any(_starts_a_plain_scalar(text, m.start()) for m in after_blank.finditer(text)):
            return True
    return False


def _starts_a_plain_scalar(text: str, start: int) -> bool:
    i = start - 1
    while i >= 0 and text[i] in " \t":
        i -= 1
    if i < 0 or text[i] in "\n\r[{,:":
        return True
    return text[i] in "-?" and i + 1 < start  # an indicator, blanks, then the word


def _fast_yaml_docs(text: str) -> list[Any] | None:
    """yaml-rs' reading, or None when PyYAML must read the file."""
    docs, _ = _fast_yaml_read(text)
    return docs


def _fast_yaml_read(text: str) -> tuple[list[Any] | None, bool]:
    """(yaml-rs' reading or None when PyYAML must read the file, whether every object of it
    is already known to be within the bounds)."""
    docs, non_finite = _fast_yaml_parse(text)
    if docs is None:
        return None, False
    verdict = _decided_verdict(docs, text, non_finite)
    if verdict == _DIVERGES:
        return None, False
    return docs, verdict == _WITHIN


def _decided_verdict(docs: list[Any], text: str, non_finite: bool | None) -> int:
    """``_yaml_rs_verdict`` with the exact walk deciding divergence where it is unsure:
    _WITHIN (yaml-rs' objects stand), _DIVERGES (PyYAML must read the file) or _UNSURE (each
    object is held to the bounds by ``check_document``)."""
    verdict = _yaml_rs_verdict(docs, text, non_finite)
    if verdict == _UNSURE and _diverges(docs):
        return _DIVERGES
    return verdict


def _fast_yaml_parse(text: str) -> tuple[list[Any] | None, bool | None]:
    """yaml-rs' reading before its verdict (None when PyYAML must read the file: the text
    says so, or yaml-rs refused it), and ``_may_read_non_finite(text)`` when it was read."""
    if _unsafe_for_yaml_rs(text):
        return None, None
    non_finite = None
    if len(text) < _OVERLAP_FROM:
        if _read_otherwise(text):
            return None, None
        result = _yaml_rs_reading(text)
    else:
        # yaml-rs parses with the interpreter's lock released for much of its time: the scan
        # for what YAML 1.1 reads otherwise, and for what yaml-rs may read as an infinity,
        # runs meanwhile (10 MB: 0.40 -> 0.29 s), and a
        # text it sends to PyYAML costs a parse on the other core only. Imported here: every
        # process would pay its 5 ms, most never read a file this large.
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=1) as parser:
            parsing = parser.submit(_yaml_rs_reading, text)
            otherwise = _read_otherwise(text)
            non_finite = None if otherwise else _may_read_non_finite(text)
            result = parsing.result()
        if otherwise:
            return None, None
    if result is _REFUSED:
        return None, None
    # yaml-rs returns a multi-document stream as a list and one document as itself; both
    # flatten to the same objects (a top-level list is a list of objects either way).
    return (result if isinstance(result, list) else [result]), non_finite


# Texts from this size on are scanned while yaml-rs parses them (a thread per file: below it,
# starting one costs more than the overlap saves).
_OVERLAP_FROM = 1 << 20
_REFUSED = object()  # yaml-rs refused the text: PyYAML decides, and words the message


def _yaml_rs_reading(text: str) -> Any:
    try:
        return yaml_rs.loads(
            text,
            parse_datetime=False,
            duplicate_key_policy=yaml_rs.DuplicateKeyPolicy.LastWins,
        )
    except Exception:
        return _REFUSED


def _json_docs(
    name: str, text: str, data: bytes | None, problems: list[str]
) -> tuple[list[Any] | None, bool]:
    """(documents or None, whether orjson read them); ``[]``: not JSON, read it as YAML."""
    try:
        return [orjson.loads(data if data is not None else text)], True
    except orjson.JSONDecodeError:
        pass
    # Word the message as the standard library does (and accept what it accepts but orjson
    # refuses, such as integers past 64 bits; NaN and lone surrogates are refused by the
    # bounds).
    try:
        return [json.loads(text)], False
    except json.JSONDecodeError as err:
        if name.endswith(".json"):
            problems.append(
                f"{name} line {err.lineno} column {err.colno}: malformed JSON: {err.msg}"
            )
            return None, False
        return [], False  # YAML flow style also starts with { or [
    except RecursionError:
        problems.append(f"{name}: JSON {bounds._depth_problem()[1]}")
        return None, False
    except ValueError as err:  # e.g. an integer past Python's conversion limit
        problems.append(f"{name}: malformed JSON: {err}")
        return None, False


def _has_long_number(text: str, data: bytes | None) -> bool:
    """Whether 19 digits stand in a row (an integer orjson may have read as a float)."""
    return jsonread.has_long_number(
        data if data is not None else text.encode("utf-8", "surrogatepass")
    )


# A long YAML stream is read in pieces by a second process while this one builds
# (``allocator.snapshot.beside``). A "---" line at a line's start always starts a document
# (YAML 1.2 forbids it inside any node; where that would cut a node, a piece fails to parse
# and the file is decoded whole), so the pieces' documents, one after another, are the
# stream's. Each piece holds two such lines at least: yaml-rs then returns its documents as a
# list, never one document that is itself a list.
_DOCUMENT_MARKER = "\n---\n"


def stream_pieces(content: bytes | str, size: int) -> list[str] | None:
    """A YAML stream of more than ``2 * size`` characters cut before "---" lines into pieces
    of about ``size`` characters (``read_piece`` reads each); None when it cannot be cut, or
    is not a UTF-8 YAML stream: ``decode_file`` decodes it (and words what is wrong)."""
    if len(content) < 2 * size:
        return None
    head = content[:4096]
    if isinstance(head, bytes):
        head = head.decode("utf-8-sig", "ignore")
    if head.lstrip()[:1] in ("{", "["):
        return None  # JSON (which holds no "---" line either: it is only found sooner)
    if isinstance(content, bytes):
        try:
            text = content.decode("utf-8-sig")
        except UnicodeDecodeError:
            return None
    else:
        text = content
    pieces: list[str] = []
    start = search = 0
    while True:
        marker = text.find(_DOCUMENT_MARKER, max(search, start + size))
        if marker < 0:
            break
        cut = marker + 1
        if not _two_markers(text, start, cut):
            search = cut  # one document so far: cut at a later marker
            continue
        if not _two_markers(text, cut, len(text)):
            break
        pieces.append(text[start:cut])
        start = search = cut
    if not pieces:
        return None
    pieces.append(text[start:])
    return pieces


def _two_markers(text: str, start: int, end: int) -> bool:
    """Whether two "---" lines start in ``text[start:end]`` (``start``: 0 or a line's start)."""
    found = 1 if text.startswith(_DOCUMENT_MARKER[1:], start) else 0
    at = start
    while found < 2:
        marker = text.find(_DOCUMENT_MARKER, at, end)
        if marker < 0:
            return False
        found += 1
        at = marker + 1
    return True


def read_piece(text: str) -> list[Any] | None:
    """The objects of one of ``stream_pieces`` (Lists flattened), when yaml-rs' reading of it
    stands as ``decode_file`` keeps it (the verdict ``_WITHIN``); None when the stream must be
    decoded whole: PyYAML reads it, or its objects are each held to the bounds."""
    docs, within = _fast_yaml_read(text)
    if docs is None or not within:
        return None
    return [obj for obj, _ in _flatten(docs)]  # within the bounds: _flatten raises nothing


@record
class Unchecked:
    """A file yaml-rs read, before its verdict (``_yaml_rs_verdict``): its objects as read
    stand only if ``within`` says so; otherwise ``settle`` reads the file as ``decode_file``
    does."""

    name: str
    text: str
    docs: list[Any]
    non_finite: bool | None
    objects: list[RawObject]  # yaml-rs' objects, numbered as decode_file numbers them

    def within(self) -> bool:
        """Whether yaml-rs' reading is the file's, and every object is within the bounds:
        ``objects`` are then what ``decode_file`` gives, the very objects."""
        return _yaml_rs_verdict(self.docs, self.text, self.non_finite) == _WITHIN


def decode_file(name: str, content: bytes | str, problems: list[str]) -> list[RawObject]:
    """Decode one file; malformed content adds a problem naming the file and line."""
    objects, unchecked = read_file(name, content, problems)
    return objects if unchecked is None else settle(unchecked, problems)


def read_file(
    name: str, content: bytes | str, problems: list[str]
) -> tuple[list[RawObject], Unchecked | None]:
    """``decode_file`` but for yaml-rs' verdict: a file yaml-rs read comes back with its
    objects as read and its ``Unchecked`` (``settle`` finishes it), any other file decoded
    (None)."""
    data: bytes | None = None
    if isinstance(content, bytes):
        try:
            text = content.decode("utf-8-sig")
        except UnicodeDecodeError as err:
            problems.append(f"{name}: not UTF-8 text (byte {err.start})")
            return [], None
        data = content if not content.startswith(b"\xef\xbb\xbf") else None
    else:
        text = content
    stripped = text.lstrip()
    docs: list[Any] | None
    exact_text = True  # whether strings may hold lone surrogates (json, PyYAML)
    by_orjson = False
    if stripped[:1] in ("{", "["):
        docs, by_orjson = _json_docs(name, text, data, problems)
        if docs == []:
            docs = _pyyaml_docs(name, text, problems)
        elif by_orjson and _has_long_number(text, data) and jsonread.read_inexactly(docs):
            docs = [json.loads(text)]
            by_orjson = False
        elif by_orjson:
            exact_text = False
    else:
        docs, non_finite = _fast_yaml_parse(text)
        if docs is not None:
            try:
                flat = _flatten(docs)
            except BoundError:
                flat = []  # nothing to build before the verdict, which refuses it
            objects = [RawObject(name, i, obj) for i, (obj, _) in enumerate(flat, start=1)]
            return objects, Unchecked(name, text, docs, non_finite, objects)
        docs = _pyyaml_docs(name, text, problems)
    return _objects(name, docs, problems, exact_text=exact_text, by_orjson=by_orjson), None


def settle(unchecked: Unchecked, problems: list[str]) -> list[RawObject]:
    """A file yaml-rs read, as ``decode_file`` decodes it: yaml-rs' objects when its verdict
    says they stand, else the file read again by PyYAML or each object held to the bounds."""
    verdict = _decided_verdict(unchecked.docs, unchecked.text, unchecked.non_finite)
    if verdict == _WITHIN:
        return unchecked.objects
    if verdict == _DIVERGES:
        docs = _pyyaml_docs(unchecked.name, unchecked.text, problems)
        return _objects(unchecked.name, docs, problems, exact_text=True)
    return _objects(unchecked.name, unchecked.docs, problems, exact_text=False)


def _objects(
    name: str,
    docs: list[Any] | None,
    problems: list[str],
    *,
    exact_text: bool,
    by_orjson: bool = False,
) -> list[RawObject]:
    """A file's documents as numbered objects, each held to the bounds (a refusal: none)."""
    if docs is None:
        return []
    try:
        flat = _flatten(docs)
    except BoundError as err:
        problems.append(f"{name}: {err.problems[0]}")
        return []
    # orjson reads only string keys, 64-bit integers and finite floats: depth and string
    # lengths are all its objects may break.
    if by_orjson and _written_within_bounds(flat) is not None:
        return [RawObject(name, i, obj) for i, (obj, _) in enumerate(flat, start=1)]
    out = []
    for i, (obj, depth) in enumerate(flat, start=1):
        if by_orjson and type(obj) is dict and bounds.json_within_bounds(obj, depth):
            out.append(RawObject(name, i, obj))
            continue
        try:
            obj = bounds.check_document(
                obj, _where(name, i, obj), depth=depth, check_text=exact_text
            )
        except BoundError as err:
            problems.extend(err.problems)
            return []  # one refusal is enough: nothing of an over-bound file is read
        out.append(RawObject(name, i, obj))
    return out


def _where(name: str, index: int, obj: Any) -> str:
    where = f"{name} doc {index}"
    if isinstance(obj, dict) and isinstance(obj.get("kind"), str):
        md = obj.get("metadata")
        label = ""
        if isinstance(md, dict) and isinstance(md.get("name"), str):
            ns = md.get("namespace")
            label = f" {ns}/{md['name']}" if isinstance(ns, str) else f" {md['name']}"
        where += f" {obj['kind'][:100]}{label[:300]}"
    return where
