"""Compressed JSON blobs: how snapshots and traces are stored (zlib of compact UTF-8 JSON)."""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Sequence
from typing import Any

import orjson

from allocator import jsonread

# A NUL character as compact JSON writes it (an odd number of backslashes before "u0000":
# an even number is an escaped backslash followed by the text "u0000").
_NUL_ESCAPE = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")


class UnstorableText(ValueError):
    """A string that no database text column can hold (NUL, a lone UTF-16 surrogate)."""


def pack(value: Any, level: int = 6) -> bytes:
    try:  # orjson: a 100,000-node trace in a tenth of the time
        data = orjson.dumps(value)
    except orjson.JSONEncodeError:  # a lone surrogate, a non-string key, a huge integer
        data = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode(
            "utf-8", "surrogatepass"
        )
    return zlib.compress(data, level)


def unpack(blob: bytes | memoryview | None) -> Any:
    if blob is None:
        return None
    data = zlib.decompress(bytes(blob))
    try:  # orjson, about 2x faster than the standard library on big blobs
        return jsonread.loads(data)
    except json.JSONDecodeError:
        pass  # e.g. a lone surrogate in an old trace: the standard library reads it as text
    return json.loads(data.decode("utf-8", "surrogatepass"))


def _json_key(key: Any) -> str:
    # The string json.dumps itself writes for a non-string key (YAML allows 1.5: or true:).
    if isinstance(key, str):
        return key
    if key is True:
        return "true"
    if key is False:
        return "false"
    if key is None:
        return "null"
    if isinstance(key, float):
        return json.dumps(key)
    return str(key)


def _string_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {_json_key(k): _string_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_string_keys(v) for v in value]
    return value


# A number orjson may write otherwise than the standard library: an exponent, a fraction of
# four zeros or more (1e-05 is 0.00001 to orjson), 17 digits or more. False alarms (a string
# holding such text) only send the value to the standard library.
_NUMBER_WRITTEN_OTHERWISE = re.compile(rb"[:,\[]-?[0-9][0-9.]*(?:[eE]|\.0000|[0-9]{16})")
_ORJSON_CANONICAL = (
    orjson.OPT_SORT_KEYS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
)


def _canonical_by_orjson(value: Any) -> bytes | None:
    """``canonical``'s bytes written by orjson (ten times faster), byte for byte what the
    standard library writes; None when orjson refuses the value (non-string keys, a lone
    surrogate, a huge integer, a value JSON has no form for) or may write a number otherwise."""
    try:
        data = orjson.dumps(value, option=_ORJSON_CANONICAL)
    except orjson.JSONEncodeError:
        return None
    if _NUMBER_WRITTEN_OTHERWISE.search(b"[" + data):
        return None
    return data


def canonical(value: Any) -> bytes:
    """One byte form per JSON value (sorted keys, no spaces) for content hashing.

    Keys of mixed types (a YAML ``1.5:`` beside string keys) are compared as the strings JSON
    writes for them. Raises ``UnstorableText`` for a NUL or a lone surrogate in any string.
    """
    data = _canonical_by_orjson(value)
    if data is None:
        dump = dict(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        try:
            text = json.dumps(value, **dump)
        except TypeError:
            text = json.dumps(_string_keys(value), **dump)
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise UnstorableText(
                f"a lone UTF-16 surrogate ({text[exc.start]!r}) is not valid text"
            ) from None
    # The substring test first: the regular expression alone took 0.7 s on a 10 MB upload.
    if b"\\u0000" in data and _NUL_ESCAPE.search(data):
        raise UnstorableText("a NUL character (\\u0000) is not allowed in text")
    return data


# Digits as "0" and "E" as "e": where _NUMBER_WRITTEN_OTHERWISE matches, this text holds
# ".0000", sixteen "0"s, or "0e" / ".e" (an exponent after a digit or a point). The first two
# are rare and send the bytes to the regular expression; each of the others is checked by it
# in the 64 bytes before (a number orjson writes is shorter; a longer run of digits is within
# a string, a false alarm). On a 10 MB upload: 40 ms -> 25 ms, UIDs' "3e5f" included.
_DIGITS_AND_E = bytes.maketrans(b"123456789E", b"000000000e")
_EXPONENT_WINDOW = 64
_MAX_EXPONENT_CANDIDATES = 20_000


def _may_write_a_number_otherwise(data: bytes) -> bool:
    """Whether ``_NUMBER_WRITTEN_OTHERWISE`` finds a number of orjson's JSON ``data`` that
    the standard library may write otherwise (false alarms only cost speed)."""
    folded = data.translate(_DIGITS_AND_E)
    if b".0000" in folded or b"0000000000000000" in folded:
        return _NUMBER_WRITTEN_OTHERWISE.search(data) is not None
    search = _NUMBER_WRITTEN_OTHERWISE.search
    seen = 0
    for before in (b"0e", b".e"):
        at = folded.find(before)
        while at >= 0:
            seen += 1
            if seen > _MAX_EXPONENT_CANDIDATES:
                return search(data) is not None
            if search(data, max(0, at - _EXPONENT_WINDOW), at + 2):
                return True
            at = folded.find(before, at + 2)
    return False


def canonical_all(values: Sequence[Any]) -> tuple[list[bytes], bytes] | None:
    """(``canonical`` of each value, the JSON array of them), or None when one of them needs
    ``canonical``'s own reading (orjson refuses it, a number it may write otherwise, a NUL):
    the checks run once over all the bytes instead of once per value (12,000 objects of a
    10 MB upload: the per-value searches and copies took a third of the time)."""
    dumps = orjson.dumps
    try:
        parts = [dumps(value, option=_ORJSON_CANONICAL) for value in values]
    except orjson.JSONEncodeError:
        return None
    # Each value is searched after a "[" or a ",", as ``canonical`` searches it after a "[";
    # no match spans a "," and no value ends with a backslash, so one search answers for all.
    array = b"[" + b",".join(parts) + b"]"
    if _may_write_a_number_otherwise(array):
        return None
    if b"\\u0000" in array and _NUL_ESCAPE.search(array):
        return None
    return parts, array


def check_storable(value: Any) -> None:
    """Raise ``UnstorableText`` when ``value`` holds a string a database cannot store."""
    canonical(value)
