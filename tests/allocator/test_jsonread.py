"""allocator/jsonread.py: orjson reads stored results and blobs; it reads an integer past 64 bits
as a float, so such text is read again by the standard library, and every value reads back as
the standard library reads it."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from allocator import jsonread, jsonwrite

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()  # lone surrogates included: orjson refuses to read them
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(_values)
def test_reads_what_was_written_as_the_standard_library_reads_it(value):
    text = jsonwrite.to_text(value)
    assert jsonread.loads(text) == json.loads(text)
    assert jsonread.loads(text.encode("utf-8", "surrogatepass")) == json.loads(text)


def test_an_integer_past_64_bits_stays_an_integer():
    # A device's capacity in bytes past 2**64 beside one at the 64-bit edge orjson reads itself.
    text = '{"capacity": 1180591620717411303424, "edge": 18446744073709551615}'
    value = jsonread.loads(text)
    assert value == {"capacity": 2**70, "edge": 2**64 - 1}
    assert type(value["capacity"]) is int


def test_a_long_run_of_digits_in_a_string_keeps_orjsons_reading():
    # A 20-digit UID-like label: the text check fires, nothing was read as a float.
    assert jsonread.loads('{"uid": "12345678901234567890", "n": 1.5}') == {
        "uid": "12345678901234567890",
        "n": 1.5,
    }


def test_nan_is_read_as_the_standard_library_reads_it():
    value = jsonread.loads('{"ratio": NaN}')
    assert value["ratio"] != value["ratio"]


def test_text_that_is_no_json_raises_the_standard_librarys_error():
    with pytest.raises(json.JSONDecodeError):
        jsonread.loads("not json")


@given(st.text(alphabet='0123456789 ,.-e"[]{}:a٣', max_size=60))
def test_long_number_check_agrees_with_the_regular_expression(text):
    expected = re.search(r"[0-9]{19}", text) is not None
    assert jsonread.has_long_number(text.encode()) is expected
