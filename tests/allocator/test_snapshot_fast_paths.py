"""The snapshot loader's fast paths against the full readings they shortcut: the same values,
the same refusals (allocator/snapshot/bounds.py, decode.py, resource.py)."""

from __future__ import annotations

import re

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from allocator.snapshot import bounds, decode
from allocator.snapshot.decode import _has_long_number
from allocator.snapshot.errors import BoundError
from allocator.snapshot.fields import Context
from allocator.snapshot.resource import read_attributes, read_attributes_checked

# --- bounds ------------------------------------------------------------------------------------

_json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
_json_values = st.recursive(
    _json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)


def _nested(value, levels: int):
    for i in range(levels):
        value = {"spec": value} if i % 2 else [value]
    return value


def _refused(value, depth: int) -> bool:
    try:
        bounds.check_document(value, "cluster.json doc 1", depth=depth, check_text=False)
    except BoundError:
        return True
    return False


@given(_json_values, st.integers(0, 105), st.integers(1, 3))
def test_json_within_bounds_agrees_with_check_document(value, levels, depth):
    doc = orjson.loads(orjson.dumps({"kind": "Pod", "metadata": _nested(value, levels)}))
    assert bounds.json_within_bounds(doc, depth) is not _refused(doc, depth)


@pytest.mark.parametrize("where", ["key", "value", "list"])
def test_a_string_past_max_string_chars_is_out_of_bounds(where):
    long = "x" * (bounds.MAX_STRING_CHARS + 1)
    doc = {
        "key": {"metadata": {"annotations": {long: "1"}}},
        "value": {"metadata": {"annotations": {"note": long}}},
        "list": {"spec": {"args": ["--model", long]}},
    }[where]
    assert not bounds.json_within_bounds(doc)
    assert _refused(doc, 1)


# yaml-rs' values: strings YAML 1.1 reads otherwise, odd keys, big and non-finite numbers.
_yaml_scalars = (
    _json_scalars
    | st.sampled_from(["yes", "off", "<<", "1:30", "us-west-2a", "12:00:00Z", "node:8080"])
    | st.integers(min_value=-(10**101), max_value=10**101)
    | st.sampled_from([float("inf"), float("-inf"), float("nan")])
)
_yaml_keys = st.text(max_size=8) | st.sampled_from(["on", "1:30"]) | st.integers() | st.none()
_yaml_values = st.recursive(
    _yaml_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_yaml_keys, inner, max_size=3),
    max_leaves=12,
)


@given(st.lists(_yaml_values, max_size=3), st.integers(0, 105))
def test_one_walk_over_yaml_rs_values_agrees_with_diverges_and_check_document(docs, levels):
    docs = [
        _nested({"kind": "Pod", "spec": d}, levels) if i == 0 else d for i, d in enumerate(docs)
    ]
    verdict = decode._yaml_rs_verdict(docs)
    if verdict == decode._UNSURE:
        return  # the two exact walks decide, as before
    assert (verdict == decode._DIVERGES) is decode._diverges(docs)
    if verdict == decode._WITHIN:
        for obj, depth in decode._flatten(docs):
            assert not _refused(obj, depth)


def test_one_walk_finds_a_string_past_max_string_chars_unsure():
    long = "x" * (bounds.MAX_STRING_CHARS + 1)
    docs = [{"kind": "Pod", "metadata": {"annotations": {"note": long}}}]
    assert decode._yaml_rs_verdict(docs) == decode._UNSURE
    assert decode._yaml_rs_verdict([{"kind": "Pod", "spec": {"replicas": "yes"}}]) == (
        decode._DIVERGES
    )


# --- 19 digits in a row --------------------------------------------------------------------------


@given(st.text(alphabet='0123456789 ,.-e"[]{}:a٣', max_size=60))
def test_long_number_check_agrees_with_the_regular_expression(text):
    expected = re.search(r"[0-9]{19}", text) is not None
    assert _has_long_number(text, None) is expected
    assert _has_long_number(text, text.encode()) is expected


# --- device attributes -----------------------------------------------------------------------

_attribute_specs = st.dictionaries(
    st.sampled_from(["model", "uuid", "index", "driverVersion", "resource.kubernetes.io/pcieRoot"]),
    st.dictionaries(
        st.sampled_from(["string", "int", "bool", "version", "strings", "ints", "other"]),
        st.none()
        | st.booleans()
        | st.integers(-3, 3)
        | st.sampled_from(["H100", "", "v550.54.15", "550.54.15"])
        | st.lists(st.sampled_from(["a", 1, True]), max_size=2),
        max_size=2,
    )
    | st.sampled_from(["H100", None, 3]),
    max_size=4,
)


def _ctx(problems: list[str]) -> Context:
    return Context("slices.yaml", 1, "ResourceSlice", None, "ip-10-0-1-7-gpus", problems)


@given(_attribute_specs)
def test_plain_attributes_read_as_the_checked_reading_reads_them(attributes):
    fast_problems: list[str] = []
    checked_problems: list[str] = []
    device = {"name": "gpu-0", "attributes": attributes}
    path = "spec.devices[0].attributes"
    fast = read_attributes(_ctx(fast_problems), device, path)
    checked = read_attributes_checked(_ctx(checked_problems), device, path)
    assert fast == checked
    assert list(fast) == list(checked)
    assert fast_problems == checked_problems
