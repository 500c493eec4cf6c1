"""PyYAML's reading of a file: the exact YAML 1.1 path (see ``decode``), which also words
every syntax error with its line and column. Its own module so that a process reading only
JSON, or YAML that yaml-rs reads, never imports PyYAML (whose reader compiles a large
character class when imported).
"""

from __future__ import annotations

from typing import Any

import yaml

from allocator.snapshot import bounds
from allocator.snapshot.errors import BoundError

_BASE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when built with it


class _Loader(_BASE_LOADER):  # type: ignore[misc, valid-type]
    """Safe loader that keeps timestamps as strings, as Kubernetes' JSON does, and refuses
    integers longer than the bounds before Python converts them (a 5,000-digit integer would
    otherwise raise a bare ValueError).

    An unquoted ``creationTimestamp: 2026-12-01T10:00:00Z`` must stay a string: the queue
    orders by it and raw documents must stay JSON-serialisable.
    """

    def construct_yaml_int(self, node):  # type: ignore[no-untyped-def]
        digits = sum(c.isdigit() for c in node.value)
        if digits > bounds.MAX_NUMBER_DIGITS:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"integer of {digits:,} digits, more than {bounds.MAX_NUMBER_DIGITS} "
                "(bound MAX_NUMBER_DIGITS)",
                node.start_mark,
            )
        return super().construct_yaml_int(node)


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _BASE_LOADER.yaml_implicit_resolvers.items()
}
LOADER: Any = _Loader


def pyyaml_docs(name: str, text: str, problems: list[str]) -> list[Any] | None:
    """The documents of ``text`` as PyYAML reads them, within the bounds; None with the
    problems (named by ``name``, the line and column where PyYAML gives them) appended."""
    try:
        docs = list(yaml.load_all(text, Loader=LOADER))
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = f" line {mark.line + 1} column {mark.column + 1}" if mark else ""
        problems.append(f"{name}{line}: malformed YAML: {err.problem or err}")
        return None
    except yaml.YAMLError as err:
        problems.append(f"{name}: malformed YAML: {err}")
        return None
    except RecursionError:
        problems.append(f"{name}: YAML {bounds._depth_problem()[1]}")
        return None
    except (ValueError, TypeError, OverflowError) as err:
        # A constructor refusing a scalar (e.g. a float key that is not hashable).
        problems.append(f"{name}: malformed YAML: {err}")
        return None
    try:
        bounds.check_expansion(docs, name)
    except BoundError as err:
        problems.extend(err.problems)
        return None
    return docs
