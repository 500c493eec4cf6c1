"""A JSON body parser that refuses what would otherwise fail deep inside a view or database:
nesting past Python's recursion limit, NaN/Infinity, NUL characters and lone surrogates."""

from __future__ import annotations

import json

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from dra_web import blobs


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


class SafeJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        raw = stream.read() if stream is not None else b""
        try:
            text = raw.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            raise ParseError("JSON body: not valid UTF-8 text") from None
        try:
            data = json.loads(text, parse_constant=_no_constant)
        except RecursionError:
            raise ParseError("JSON body: nested too deeply") from None
        except ValueError as exc:
            raise ParseError(f"JSON body: malformed JSON: {exc}") from None
        try:
            blobs.check_storable(data)
        except RecursionError:
            raise ParseError("JSON body: nested too deeply") from None
        except blobs.UnstorableText as exc:
            raise ParseError(f"JSON body: {exc}") from None
        return data
