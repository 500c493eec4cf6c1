"""The snapshot loader's fast paths against the full readings they shortcut: the same values,
the same refusals (allocator/snapshot/bounds.py, decode.py, resource.py)."""

from __future__ import annotations

import math
import re
from unittest import mock

import orjson
import pytest
import yaml_rs
from hypothesis import example, given, settings
from hypothesis import strategies as st

from allocator.model import DeviceRequestAllocationResult
from allocator.snapshot import bounds, decode, fields, loader, resource
from allocator.snapshot.decode import _has_long_number
from allocator.snapshot.errors import BoundError, SnapshotError
from allocator.snapshot.fields import Context
from allocator.snapshot.resource import read_attributes, read_attributes_checked
from tests.allocator.test_snapshot_hardening import pyyaml_reading

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


@given(_json_values, st.integers(0, 105))
def test_orjsons_writing_agrees_with_check_document_on_what_orjson_read(value, levels):
    """A JSON file orjson read is within the bounds when orjson writes its objects (depth
    measured inside _DEPTH_PAD lists, string lengths bounded by each object's JSON)."""
    doc = orjson.loads(orjson.dumps({"kind": "Pod", "metadata": _nested(value, levels)}))
    within = decode._written_within_bounds([(doc, 1)]) is not None
    if within:
        assert not _refused(doc, 1)
    elif len(orjson.dumps(doc)) <= bounds.MAX_STRING_CHARS:
        assert _refused(doc, 1)


@pytest.mark.parametrize("where", ["key", "value", "list"])
def test_a_string_past_max_string_chars_is_out_of_bounds(where):
    long = "x" * (bounds.MAX_STRING_CHARS + 1)
    doc = {
        "key": {"metadata": {"annotations": {long: "1"}}},
        "value": {"metadata": {"annotations": {"note": long}}},
        "list": {"spec": {"args": ["--model", long]}},
    }[where]
    assert not bounds.json_within_bounds(doc)
    assert decode._written_within_bounds([(doc, 1)]) is None
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


def _finite(value) -> bool:
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return not isinstance(value, float) or math.isfinite(value)


def _strings(value):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, str):
        yield value


def _text_of(docs) -> str:
    """A text that spells the values as the verdict must fear them: an infinity when there is
    one, and every string YAML 1.1 reads otherwise as a plain scalar."""
    lines = [] if all(_finite(d) for d in docs) else ["- .inf"]
    for s in _strings(docs):
        if decode._yaml11_reads_differently(s):
            lines.append(f"- {s.rstrip()}")
    return "\n".join(lines) + "\n"


@settings(max_examples=300, deadline=None)
@given(st.lists(_yaml_values, max_size=3), st.integers(0, 105), st.booleans())
def test_orjsons_reading_of_yaml_rs_values_agrees_with_diverges_and_check_document(
    docs, levels, as_list
):
    docs = [
        _nested({"kind": "Pod", "spec": d}, levels) if i == 0 else d for i, d in enumerate(docs)
    ]
    if as_list:
        docs = [{"apiVersion": "v1", "kind": "List", "items": docs}]
    verdict = decode._yaml_rs_verdict(docs, _text_of(docs))
    if verdict == decode._UNSURE:
        return  # the two exact walks decide, as before
    assert (verdict == decode._DIVERGES) is decode._diverges(docs)
    if verdict == decode._WITHIN:
        for obj, depth in decode._flatten(docs):
            assert not _refused(obj, depth)


@pytest.mark.parametrize("levels, verdict", [(99, decode._WITHIN), (100, decode._UNSURE)])
def test_orjson_measures_depth_to_max_depth_exactly(levels, verdict):
    """An object of MAX_DEPTH levels is within the bounds, one level more is not (orjson's
    recursion limit, which _DEPTH_PAD counts on, has not moved)."""
    docs = [_nested({"kind": "Pod"}, levels)]
    assert decode._yaml_rs_verdict(docs, "kind: Pod\n") == verdict
    assert _refused(docs[0], 1) is (verdict == decode._UNSURE)


def test_orjsons_recursion_limit_is_the_one_depth_pad_counts_on():
    orjson.dumps(_nested([], decode._ORJSON_MAX_NESTING - 1))
    with pytest.raises(orjson.JSONEncodeError):
        orjson.dumps(_nested([], decode._ORJSON_MAX_NESTING))


def test_the_verdict_finds_long_strings_words_and_infinities():
    long = "x" * (bounds.MAX_STRING_CHARS + 1)
    docs = [{"kind": "Pod", "metadata": {"annotations": {"note": long}}}]
    assert decode._yaml_rs_verdict(docs, "kind: Pod\n") == decode._UNSURE
    for value in ("yes", "1:30", "1:30\n", "<<", "OFF"):
        plain = f"- {value.strip()}\n"
        docs = [{"kind": "Pod", "spec": {"replicas": value}}]
        assert decode._yaml_rs_verdict(docs, plain) == decode._DIVERGES, value
        docs = [{"kind": "Pod", "spec": {value: 1}}]
        assert decode._yaml_rs_verdict(docs, plain) == decode._DIVERGES, value
        # Quoted in the text, the string means the same to both parsers.
        assert decode._yaml_rs_verdict(docs, f"- '{value.strip()}'\n") == decode._WITHIN
    for value in ("yesterday", "10:00:00Z", '"yes"', "node:8080", "no-schedule"):
        docs = [{"kind": "Pod", "spec": {"replicas": value}}]
        assert decode._yaml_rs_verdict(docs, f"- {value}\n") == decode._WITHIN, value
    docs = [{"kind": "Pod", "spec": {"replicas": float("inf")}}]
    assert decode._yaml_rs_verdict(docs, "replicas: .inf\n") == decode._UNSURE


# Spellings of numbers around what yaml-rs reads as an infinity or a NaN.
_number_spellings = st.builds(
    lambda sign, digits, frac, special: special or f"{sign}1{digits}{frac}",
    st.sampled_from(["", "-", "+"]),
    st.builds(lambda n, sep: sep.join("9" * n), st.integers(1, 400), st.sampled_from(["", "_"])),
    st.sampled_from(["", ".0", ".5", "."]),
    st.sampled_from([None, None, ".inf", "-.Inf", "+.INF", ".nan", ".NaN", ".NAN", "inf", "nan"]),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_number_spellings, min_size=1, max_size=4))
def test_yaml_rs_reads_no_infinity_where_the_text_spells_none(spellings):
    text = "".join(f"k{i}: {s}\n" for i, s in enumerate(spellings))
    try:
        docs = yaml_rs.loads(text, parse_datetime=False)
    except Exception:
        return
    if not decode._may_read_non_finite(text):
        assert _finite(docs), text


# The number guard as first written: the blank before the number first. The guard in use
# starts from the number's first character (faster); both must find the same texts.
_NUMBER_GUARD_BLANK_FIRST = re.compile(r"[\s\[{,](?=[-+0-9_.])" + decode._NUMBER_1_2)


@settings(max_examples=500)
@given(st.text(alphabet=" \t\n,[{}]:-+_.0123456789eEoOxXab\u2028", max_size=24))
def test_number_guard_finds_what_the_blank_first_guard_finds(text):
    guard = decode._TEXT_GUARDS[0]
    assert (guard.search(text) is None) is (_NUMBER_GUARD_BLANK_FIRST.search(text) is None)
    spelled = f"replicas: {text}\n"
    assert (guard.search(spelled) is None) is (_NUMBER_GUARD_BLANK_FIRST.search(spelled) is None)


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


_capacity_specs = st.dictionaries(
    st.sampled_from(["memory", "cores", "dra.example.com/bandwidth"]),
    st.sampled_from(["80Gi", "132", "1.5", "x", "", 80, None])
    | st.dictionaries(
        st.sampled_from(["value", "requestPolicy"]),
        st.sampled_from(["80Gi", "10Gi", "nonsense", 3, None]),
        max_size=2,
    ),
    max_size=3,
)
_plain_devices = st.fixed_dictionaries(
    {"name": st.sampled_from(["gpu-0", "gpu-7"])},
    optional={
        "attributes": st.dictionaries(
            st.sampled_from(["model", "index", "driverVersion"]),
            st.sampled_from([{"string": "H100"}, {"int": 3}, {"version": "v550.54.15"}]),
            max_size=3,
        ),
        "capacity": st.dictionaries(
            st.sampled_from(["memory", "cores"]),
            st.sampled_from([{"value": "80Gi"}, {"value": "132"}, {"value": "x"}, {"value": 80}]),
            max_size=2,
        ),
    },
)
_messy_devices = st.fixed_dictionaries(
    {},
    optional={
        "name": st.sampled_from(["gpu-0", "", 7]),
        "attributes": _attribute_specs,
        "capacity": _capacity_specs | st.sampled_from([None, "80Gi", []]),
        "allowMultipleAllocations": st.booleans(),
        "basic": st.just({"attributes": {"model": {"string": "H100"}}}),
    },
)


@given(_plain_devices | _messy_devices, st.booleans())
def test_plain_devices_read_as_the_full_reading_reads_them(raw, legacy):
    fast_problems: list[str] = []
    full_problems: list[str] = []
    path = "spec.devices[0]"
    fast = resource.read_device(_ctx(fast_problems), raw, path, legacy)
    full = resource.read_device_checked(_ctx(full_problems), raw, path, legacy)
    assert fast == full
    assert fast_problems == full_problems


def _devices_one_by_one(spec: dict, legacy: bool) -> tuple[list, list[str]]:
    """``read_devices`` without its fast path for a whole slice (each device on its own)."""
    problems: list[str] = []
    with mock.patch.object(resource, "_plain_devices", lambda entries: None):
        devices = resource.read_devices(_ctx(problems), spec, "spec", legacy)
    return devices, problems


# A plain device but for one more field: only the full reading reads it.
_plain_devices_and_more = st.builds(
    lambda device, more: {**device, **more},
    _plain_devices,
    st.sampled_from(
        [
            {"allowMultipleAllocations": True},
            {"basic": {"attributes": {"model": {"string": "H100"}}}},
            {"taints": [{"key": "gpu.nvidia.com/xid", "effect": "NoSchedule"}]},
        ]
    ),
)


@given(
    st.lists(
        _plain_devices
        | _plain_devices_and_more
        | _messy_devices
        | st.sampled_from([None, "gpu-0", 3]),
        max_size=4,
    ),
    st.booleans(),
)
def test_a_slices_devices_read_as_one_by_one(entries, legacy):
    fast_problems: list[str] = []
    spec = {"devices": entries}
    fast = resource.read_devices(_ctx(fast_problems), spec, "spec", legacy)
    assert (fast, fast_problems) == _devices_one_by_one(spec, legacy)


def test_a_node_of_eight_gpus_is_read_by_the_slice_fast_path():
    entries = [
        {
            "name": f"gpu-{i}",
            "attributes": {
                "model": {"string": "H100"},
                "driverVersion": {"version": "v550.54.15"},
                "index": {"int": i},
            },
            "capacity": {"memory": {"value": "80Gi"}},
        }
        for i in range(8)
    ]
    fast = resource._plain_devices(entries)
    assert fast is not None
    assert fast == _devices_one_by_one({"devices": entries}, False)[0]
    # Read once per text: one quantity and one version for the eight devices.
    assert len({id(d.capacity["memory"].value) for d in fast}) == 1
    assert len({id(d.attributes["driverVersion"]) for d in fast}) == 1
    assert str(fast[3].attributes["driverVersion"]) == "550.54.15"


_plain_results = st.fixed_dictionaries(
    {
        "request": st.sampled_from(["gpu", "gpus/h100"]),
        "driver": st.just("gpu.nvidia.com"),
        "pool": st.sampled_from(["ip-10-0-1-7", "p5.48xlarge-gpus"]),
        "device": st.sampled_from(["gpu-0", "gpu-7"]),
    }
)
_results_and_more = st.builds(
    lambda result, more: {**result, **more},
    _plain_results,
    st.sampled_from(
        [
            {"adminAccess": True},
            {"shareID": "2f1c"},
            {"consumedCapacity": {"memory": "10Gi"}},
            {"bindingConditions": ["dra.example.com/attached"]},
            {"tolerations": [{"key": "gpu.nvidia.com/xid", "operator": "Exists"}]},
            {"device": ""},
            {"pool": 7},
        ]
    ),
)
_messy_results = st.dictionaries(
    st.sampled_from(["request", "driver", "pool", "device", "adminAccess"]),
    st.sampled_from(["gpu", "", None, 3, True]),
    max_size=5,
)


@given(
    st.lists(
        _plain_results | _results_and_more | _messy_results | st.sampled_from([None, "gpu-0"]),
        max_size=3,
    )
)
@example([{"request": "gpu", "driver": "gpu.nvidia.com", "pool": "ip-10-0-1-7", "device": ""}])
@example([{"request": "gpu", "driver": "gpu.nvidia.com", "pool": 7, "device": "gpu-0"}])
@settings(max_examples=300)
def test_an_allocations_results_read_as_one_by_one(results):
    status = {"allocation": {"devices": {"results": results}}}
    fast_problems: list[str] = []
    fast = resource.read_allocation(_ctx(fast_problems), status)
    full_problems: list[str] = []
    with mock.patch.object(resource, "_plain_results", lambda entries: None):
        full = resource.read_allocation(_ctx(full_problems), status)
    assert (fast, fast_problems) == (full, full_problems)


def test_plain_results_take_the_fast_path():
    results = [
        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "ip-10-0-1-7", "device": f"gpu-{i}"}
        for i in range(2)
    ]
    assert resource._plain_results(results) == [
        DeviceRequestAllocationResult("gpu", "gpu.nvidia.com", "ip-10-0-1-7", "gpu-0"),
        DeviceRequestAllocationResult("gpu", "gpu.nvidia.com", "ip-10-0-1-7", "gpu-1"),
    ]


# --- characters libyaml refuses ------------------------------------------------------------------


@given(
    st.text(
        alphabet=st.characters(max_codepoint=0x100) | st.sampled_from("\ufeff\ud800é"), max_size=40
    )
)
def test_refused_characters_found_as_the_regular_expression_finds_them(text):
    expected = re.search(decode._REFUSED_CHARACTER, text) is not None
    assert decode._has_refused_character(text) is expected


# --- YAML 1.1 words, plain or quoted -------------------------------------------------------------

_WORDS = ["yes", "no", "On", "OFF", "1:30", "190:20:30", "=", "<<", "no way", "nope", "10:00:00Z"]
_PLACES = [
    "k: {w}",
    "{w}: 1",
    "- {w}",
    "- - {w}",
    "k: [a, {w}]",
    "k: {{j: {w}}}",
    '{{"j":{w}}}',
    "k:\n  {w}",
    "k: |\n  {w}",
    "k: >-\n  {w}",
    "k: {w} # why",
    "? {w}\n: 1",
    "--- {w}",
]


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(_WORDS), st.sampled_from(_PLACES), st.sampled_from(["", "'", '"'])
        ),
        min_size=1,
        max_size=4,
    ),
    st.sampled_from(["\n", "\r\n", "\r", "\x85", "\u2028"]),
    st.sampled_from(["", "note: café — ok\n"]),
)
def test_words_yaml_11_reads_otherwise_take_the_fast_path_only_when_quoted(parts, newline, other):
    """go-yaml quotes "no" and "1:30" when it writes them: quoted, they are strings to both
    parsers and the file keeps the fast path; plain, PyYAML reads the file."""
    docs = [place.format(w=f"{quote}{word}{quote}") for word, place, quote in parts]
    text = "".join(d if d.startswith("---") else f"---\n{d}" for d in (f"{d}\n" for d in docs))
    text = (other + text).replace("\n", newline)
    expected = pyyaml_reading(text)
    fast = decode._fast_yaml_docs(text)
    if fast is not None:
        assert expected is not None, text
        assert decode._flatten(fast) == decode._flatten(expected), text
    # (A document that is a scalar or a list of scalars holds no object: the exact walk decides
    # it, as before.)
    quoted = all(quote and not place.startswith("-") for _, place, quote in parts)
    if expected is not None and quoted and newline in ("\n", "\r\n", "\r"):
        assert fast is not None, text


@pytest.mark.parametrize("newline", ["\x85", "\u2028", "\u2029"])
def test_yaml_11_line_breaks_send_the_file_to_pyyaml(newline):
    """NEL and the Unicode separators break lines to YAML 1.1 only: yaml-rs read
    ``---<NEL>k: yes`` as one key ``---<NEL>k``, PyYAML as ``{k: True}``."""
    text = f"---{newline}k: yes{newline}"
    assert decode._needs_pyyaml(text)
    assert decode._fast_yaml_docs(text) is None


# --- the whole decode, fast path against PyYAML ---------------------------------------------------

_SCALARS = [
    "yes",
    "'yes'",
    '"on"',
    "off",
    "0755",
    "'0755'",
    "1:30",
    '"1:30"',
    "1e3",
    "-.5",
    "0x1F",
    "1_000",
    "12345678901234567890123",
    "1" + "0" * 120,
    ".inf",
    "~",
    "null",
    "gpu-0",
    "us-west-2a",
    "p5.48xlarge",
    "'80Gi'",
    '"2026-12-01T10:00:00Z"',
    "&a x",
    "*a",
    "!!str 1",
    "'a && !b'",
    '"x: no"',
    "no way",
]
_ENTRIES = [
    "k{i}: {v}",
    "k{i}: [{v}, x]",
    "k{i}: {{j: {v}}}",
    "k{i}:\n  - {v}",
    "k{i}: {v}\nk{i}: {v}",  # a duplicate key: the last value wins
    "<<: {{m{i}: {v}}}",
]


def _decoded(text: str) -> tuple[list, list[str]]:
    problems: list[str] = []
    objects = decode.decode_file("cluster.yaml", text.encode(), problems)
    return [(o.index, o.obj) for o in objects], problems


# ConfigMaps of entries, each spelling one of the scalars above somewhere.
_configmap_entries = st.lists(
    st.lists(st.tuples(st.sampled_from(_ENTRIES), st.sampled_from(_SCALARS)), max_size=4),
    min_size=1,
    max_size=3,
)


def _configmaps(documents: list[list[tuple[str, str]]]) -> str:
    return "".join(
        "---\napiVersion: v1\nkind: ConfigMap\n"
        + "".join(entry.format(i=i, v=value) + "\n" for i, (entry, value) in enumerate(doc))
        for doc in documents
    )


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(_configmap_entries)
def test_a_file_decodes_as_pyyaml_decodes_it(documents):
    """decode_file with its fast paths (yaml-rs, orjson's checks) gives the objects it gives
    when PyYAML reads every file, and refuses what it refuses (worded by the bound's field on
    the fast path, by PyYAML's line otherwise)."""
    text = _configmaps(documents)
    fast = _decoded(text)
    original = decode._fast_yaml_parse
    decode._fast_yaml_parse = lambda text: (None, None)
    try:
        plain = _decoded(text)
    finally:
        decode._fast_yaml_parse = original
    assert fast[0] == plain[0], text
    assert bool(fast[1]) is bool(plain[1]), (text, fast[1], plain[1])


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(
    _configmap_entries,
    st.sampled_from(["{}", "kind: Namespace\nmetadata: {name: ml}\n"]),
)
def test_a_file_read_before_its_verdict_settles_as_decode_file_decodes_it(documents, other):
    """The upload builds from yaml-rs' objects before its verdict: ``within`` holds only when
    those very objects are decode_file's, and ``settle`` (or ``Decoded.settled``) gives the
    objects and problems decode_file gives, whatever the verdict."""
    text = _configmaps(documents)
    expected: list[str] = []
    objects = decode.decode_file("cluster.yaml", text.encode(), expected)
    problems: list[str] = []
    read, unchecked = decode.read_file("cluster.yaml", text.encode(), problems)
    if unchecked is None:  # PyYAML read it: decoded at once
        assert ([o.obj for o in read], problems) == ([o.obj for o in objects], expected)
        return
    assert read is unchecked.objects
    settled = decode.settle(unchecked, problems)
    assert [(o.index, o.obj) for o in settled] == [(o.index, o.obj) for o in objects], text
    assert problems == expected
    if unchecked.within():  # the upload's snapshot built before the verdict stands
        assert settled is read
    files = [("other.json" if other == "{}" else "other.yaml", other), ("cluster.yaml", text)]
    unsettled = loader.decode_files(files, check=False)
    at_once = loader.decode_files(files)
    assert unsettled.settled().files == at_once.files
    assert unsettled.within() is unchecked.within()


def test_a_build_before_the_verdicts_is_asked_for_by_name():
    text = (
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: gpu-node-1\nspec:\n  unschedulable: yes\n"
    )
    unsettled = loader.decode_files([("nodes.yaml", text)], check=False)
    with pytest.raises(ValueError, match="settle them first"):
        loader.load_decoded(unsettled)
    # yaml-rs reads "yes", a string the Node refuses; YAML 1.1 (Kubernetes' go-yaml) reads true.
    assert not unsettled.within()
    with pytest.raises(SnapshotError, match="must be true or false"):
        loader.load_decoded(unsettled, unchecked=True)
    assert loader.load_decoded(unsettled.settled()).nodes["gpu-node-1"].unschedulable


# --- the typed readers' exact-type fast paths ------------------------------------------------


class _PlainReaders(Context):
    """Context's container and string readers as first written (one isinstance chain each),
    the reference for the readers' exact-type shortcuts."""

    __slots__ = ()

    def map(self, d, key, path, required=False):
        value = d.get(key) if isinstance(d, dict) else None
        if value is None:
            if required:
                self.problem(path, "required")
            return {}
        if not isinstance(value, dict):
            self.problem(path, f"must be an object, not {fields._type(value)}")
            return {}
        return value

    def list(self, d, key, path, required=False):
        value = d.get(key) if isinstance(d, dict) else None
        if value is None:
            if required:
                self.problem(path, "required")
            return []
        if not isinstance(value, list):
            self.problem(path, f"must be a list, not {fields._type(value)}")
            return []
        return value

    def items(self, d, key, path, required=False):
        out = []
        for i, entry in enumerate(self.list(d, key, path, required)):
            if not isinstance(entry, dict):
                self.problem(f"{path}[{i}]", f"must be an object, not {fields._type(entry)}")
                continue
            out.append((f"{path}[{i}]", entry))
        return out

    def str(self, d, key, path, required=False):
        value = d.get(key) if isinstance(d, dict) else None
        if value is None:
            if required:
                self.problem(path, "required")
            return None
        if not isinstance(value, str):
            self.problem(path, f"must be a string, not {fields._type(value)}")
            return None
        if required and not value:
            self.problem(path, "required")
            return None
        return value


_reader_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.sampled_from(["", "gpu.nvidia.com"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["name", "device"]), inner, max_size=2)
    ),
    max_leaves=6,
)


@given(
    st.sampled_from(["map", "list", "items", "str"]),
    st.one_of(
        st.dictionaries(st.sampled_from(["results", "pool"]), _reader_values), _reader_values
    ),
    st.booleans(),
)
def test_readers_read_as_the_plain_readers_read(reader, document, required):
    fast_problems: list[str] = []
    plain_problems: list[str] = []
    fast = Context("claims.yaml", 3, "ResourceClaim", "ml", "train-0-gpu", fast_problems)
    plain = _PlainReaders("claims.yaml", 3, "ResourceClaim", "ml", "train-0-gpu", plain_problems)
    path = "status.allocation.devices.results"
    got = getattr(fast, reader)(document, "results", path, required)
    expected = getattr(plain, reader)(document, "results", path, required)
    assert got == expected
    assert fast_problems == plain_problems


def test_long_yaml_files_one_after_another_in_a_fresh_process():
    # A file of 1 MiB or more is parsed by yaml-rs on a worker thread while this thread scans
    # it. yaml-rs 0.1.6 crashes the process (SIGSEGV) when it is used from a thread after
    # the thread that imported it has ended, so the decoder imports it with itself, never
    # on the worker: the second file here would otherwise bring the process down.
    import subprocess
    import sys

    script = (
        "from allocator.snapshot import loader\n"
        "docs = [f'apiVersion: v1\\nkind: Namespace\\nmetadata:\\n  name: team-{i}\\n'"
        " for i in range(30000)]\n"
        "text = '---\\n'.join(docs).encode()\n"
        "assert len(text) > 1 << 20\n"
        "decoded = loader.decode_files([('a.yaml', text), ('b.yaml', text)])\n"
        "print(len(decoded.objects))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["60000"]
