"""Catalog documents as multi-document YAML that a person can read: small maps and lists of
scalars (a requirement, an offering, an attribute, a quantity) on one line, the rest in block
style."""

from __future__ import annotations

import yaml

_FLOW_MAX_CHARS = 110


def _scalar(value) -> bool:
    return isinstance(value, str | int | float | bool) or value is None


def _small(value) -> bool:
    if isinstance(value, list):
        return all(_scalar(v) for v in value)
    if isinstance(value, dict):
        return all(_scalar(v) or (isinstance(v, list) and _small(v)) for v in value.values())
    return False


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data) -> bool:  # a reader sees every value where it applies
        return True


def _represent_dict(dumper: _Dumper, data: dict):
    flow = _small(data) and len(repr(data)) <= _FLOW_MAX_CHARS
    return dumper.represent_mapping("tag:yaml.org,2002:map", data.items(), flow_style=flow)


def _represent_list(dumper: _Dumper, data: list):
    flow = _small(data) and len(repr(data)) <= _FLOW_MAX_CHARS
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_Dumper.add_representer(dict, _represent_dict)
_Dumper.add_representer(list, _represent_list)


def to_yaml(documents: list[dict], header: str = "") -> str:
    """``header`` (comment lines) then the documents, each opened by ``---``."""
    body = yaml.dump_all(
        documents,
        Dumper=_Dumper,
        sort_keys=False,
        explicit_start=True,
        allow_unicode=True,
        width=120,
    )
    return header + body
