"""allocator/jsonwrite.py: orjson writes the result and the trace; whatever it refuses the
standard library writes, and both read back as the same value."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from allocator import jsonwrite

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()  # lone surrogates included: orjson refuses them
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(_values, st.booleans())
def test_text_reads_back_as_the_standard_library_writes_it(value, indent):
    assert json.loads(jsonwrite.to_text(value, indent=indent)) == json.loads(json.dumps(value))


@given(_values, st.booleans())
def test_bytes_read_back_as_the_standard_library_writes_it(value, indent):
    data = jsonwrite.to_bytes(value, indent=indent)
    assert json.loads(data) == json.loads(json.dumps(value))


def test_a_result_is_indented_by_two_spaces_as_before():
    result = {"pods": [{"name": "ml-training/train-0", "node": "ip-10-0-1-7"}], "stats": {}}
    assert jsonwrite.to_text(result, indent=True) == json.dumps(result, indent=2)


def test_non_ascii_text_is_written_as_utf8():
    # A NodePool named in Japanese, as a user may: orjson writes it unescaped.
    assert jsonwrite.to_bytes({"nodePool": "gpu-東京"}) == '{"nodePool":"gpu-東京"}'.encode()


def test_what_orjson_refuses_is_written_by_the_standard_library():
    # A 2**64 quantity in bytes and a lone surrogate in a label value.
    value = {"bytes": 2**64, "label": "\udc80"}
    assert json.loads(jsonwrite.to_text(value)) == value
    assert jsonwrite.to_bytes(value) == b'{"bytes":18446744073709551616,"label":"\\udc80"}'
