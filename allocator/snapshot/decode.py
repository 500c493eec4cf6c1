"""Turn uploaded files into a flat list of raw objects.

Accepted encodings: multi-document YAML, a JSON object, a JSON array, and ``kind: List`` /
``kind: *List`` wrappers with ``items`` in either. Objects are numbered per file from 1 in the
order they appear after flattening Lists, skipping empty YAML documents: "doc 7" is the
seventh object of the file (CONTRACT section 1).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import yaml

_BASE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when built with it


class _Loader(_BASE_LOADER):  # type: ignore[misc, valid-type]
    """Safe loader that keeps timestamps as strings, as Kubernetes' JSON does.

    An unquoted ``creationTimestamp: 2026-12-01T10:00:00Z`` must stay a string: the queue
    orders by it and raw documents must stay JSON-serialisable.
    """


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _BASE_LOADER.yaml_implicit_resolvers.items()
}
_YAML_LOADER: Any = _Loader


@dataclass(slots=True)
class RawObject:
    file: str
    index: int  # 1-based, per file
    obj: Any


def _looks_like_list_wrapper(obj: Any) -> bool:
    if not isinstance(obj, dict):
        return False
    kind = obj.get("kind")
    return isinstance(kind, str) and kind.endswith("List") and isinstance(obj.get("items"), list)


def _flatten(docs: list[Any]) -> list[Any]:
    out: list[Any] = []
    for doc in docs:
        if doc is None:
            continue
        if isinstance(doc, list):
            out.extend(_flatten(doc))
        elif _looks_like_list_wrapper(doc):
            out.extend(_flatten(doc["items"]))
        else:
            out.append(doc)
    return out


def _yaml_docs(name: str, text: str, problems: list[str]) -> list[Any]:
    try:
        return list(yaml.load_all(text, Loader=_YAML_LOADER))
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = f" line {mark.line + 1} column {mark.column + 1}" if mark else ""
        problems.append(f"{name}{line}: malformed YAML: {err.problem or err}")
    except yaml.YAMLError as err:
        problems.append(f"{name}: malformed YAML: {err}")
    return []


def decode_file(name: str, content: bytes | str, problems: list[str]) -> list[RawObject]:
    """Decode one file; malformed content adds a problem naming the file and line."""
    if isinstance(content, bytes):
        try:
            text = content.decode("utf-8-sig")
        except UnicodeDecodeError as err:
            problems.append(f"{name}: not UTF-8 text (byte {err.start})")
            return []
    else:
        text = content
    stripped = text.lstrip()
    docs: list[Any]
    if stripped[:1] in ("{", "["):
        try:
            docs = [json.loads(text)]
        except json.JSONDecodeError as err:
            if name.endswith(".json"):
                problems.append(
                    f"{name} line {err.lineno} column {err.colno}: malformed JSON: {err.msg}"
                )
                return []
            # YAML flow style also starts with { or [.
            docs = _yaml_docs(name, text, problems)
    else:
        docs = _yaml_docs(name, text, problems)
    return [RawObject(name, i, obj) for i, obj in enumerate(_flatten(docs), start=1)]
