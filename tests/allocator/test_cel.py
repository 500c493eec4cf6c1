"""The DRA CEL environment: device fields, Kubernetes CEL libraries, errors and memoisation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from allocator.cel import CelCompileError, MatchOutcome, SelectorEngine
from allocator.model import Device, DeviceCapacity, Version
from allocator.quantity import Quantity

NVIDIA = "gpu.nvidia.com"


def nvidia_gpu(
    name: str = "gpu-0",
    product: str = "NVIDIA H100 80GB HBM3",
    architecture: str = "Hopper",
    memory: str = "80Gi",
    uuid: str = "GPU-4f6ac2b0-1d8e-4b7e-9f0a-2c3d4e5f6a7b",
    **extra,
) -> Device:
    return Device(
        name=name,
        attributes={
            "productName": product,
            "architecture": architecture,
            "brand": "Nvidia",
            "cudaComputeCapability": Version("9.0.0"),
            "driverVersion": Version("550.54.15"),
            "index": 0,
            "uuid": uuid,
            "resource.kubernetes.io/pcieRoot": "pci0000:00",
            "gpu.nvidia.com/mig-capable": True,
            **extra,
        },
        capacity={"memory": DeviceCapacity(Quantity.parse(memory))},
    )


H100 = nvidia_gpu()


@pytest.fixture
def engine() -> SelectorEngine:
    return SelectorEngine()


def run(engine: SelectorEngine, expr: str, device: Device = H100, driver=NVIDIA) -> MatchOutcome:
    return engine.matches(engine.compile(expr), device, driver)


def holds(engine: SelectorEngine, expr: str, device: Device = H100) -> bool:
    out = run(engine, expr, device)
    assert out.error is None, out.error
    return out.matched


# --- device fields and domains ---------------------------------------------------------------


def test_driver_and_driver_domain_attributes(engine):
    assert holds(engine, 'device.driver == "gpu.nvidia.com"')
    assert not holds(engine, 'device.driver == "nic.example.com"')
    # "productName" is published unqualified, so it lives in the driver's domain.
    assert holds(
        engine, 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"'
    )
    assert holds(engine, 'device.attributes["gpu.nvidia.com"]["architecture"] == "Hopper"')
    # Published qualified with the driver's own domain: same map.
    assert holds(engine, 'device.attributes["gpu.nvidia.com"]["mig-capable"] == true')
    assert holds(engine, 'device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:00"')
    # The unqualified name is not visible under another domain.
    assert not holds(engine, 'has(device.attributes["resource.kubernetes.io"].productName)')


def test_same_device_under_another_driver_moves_its_domain(engine):
    assert holds(engine, 'has(device.attributes["gpu.nvidia.com"].uuid)', H100)
    out = engine.matches(
        engine.compile('device.attributes["gpu.example.com"].architecture == "Hopper"'),
        H100,
        "gpu.example.com",
    )
    assert out == MatchOutcome(True, None)


def test_attribute_types(engine):
    assert holds(engine, 'device.attributes["gpu.nvidia.com"].index == 0')
    assert holds(engine, 'device.attributes["gpu.nvidia.com"]["mig-capable"]')
    assert holds(engine, 'device.attributes["gpu.nvidia.com"].uuid.startsWith("GPU-")')
    assert holds(
        engine, 'device.attributes["gpu.nvidia.com"].driverVersion.isGreaterThan(semver("550.0.0"))'
    )
    assert holds(engine, 'device.attributes["gpu.nvidia.com"].driverVersion.major() == 550')
    listy = nvidia_gpu(links=("nvlink0", "nvlink1"))
    assert holds(engine, '"nvlink1" in device.attributes["gpu.nvidia.com"].links', listy)
    assert holds(engine, 'device.attributes["gpu.nvidia.com"].links.size() == 2', listy)


def test_capacity_is_quantities_and_allow_multiple(engine):
    assert holds(
        engine, 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("80Gi")) == 0'
    )
    assert holds(engine, 'device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("40Gi"))')
    assert not holds(engine, "device.allowMultipleAllocations")
    shared = nvidia_gpu()
    shared.allow_multiple_allocations = True
    assert holds(engine, "device.allowMultipleAllocations == true", shared)


def test_unknown_domain_is_an_empty_map(engine):
    assert not holds(engine, 'has(device.attributes["x.io"].foo)')
    assert holds(engine, 'device.attributes["x.io"].size() == 0')
    out = run(engine, 'device.attributes["x.io"]["foo"] == "bar"')
    assert out == MatchOutcome(False, "no such key: foo")


# --- runtime errors ----------------------------------------------------------------------------


def test_missing_attribute_is_not_matched_with_the_message(engine):
    out = run(engine, 'device.attributes["gpu.nvidia.com"].model == "H100"')
    assert not out.matched
    assert out.error == "no such key: model"


def test_type_errors_and_non_bool_results_do_not_raise(engine):
    out = run(engine, 'device.attributes["gpu.nvidia.com"].index + "x" == "0x"')
    assert out == MatchOutcome(
        False, "found no matching overload for '_+_' applied to '(int, string)'"
    )
    out = run(engine, 'device.attributes["gpu.nvidia.com"]["productName"]["x"] == 1')
    assert not out.matched and out.error
    # Statically unknown type, a string at run time: not matched, message kept.
    out = run(engine, 'device.attributes["gpu.nvidia.com"].architecture')
    assert out == MatchOutcome(False, "CEL result of type string could not be converted to bool")
    out = run(engine, 'quantity("bogus") == quantity("1")')
    assert not out.matched and "bogus" in out.error
    out = run(engine, 'semver("1.2") == semver("1.2.0")')
    assert not out.matched and "invalid semantic version" in out.error


def test_error_and_error_keeps_the_first_message(engine):
    out = run(
        engine,
        'device.attributes["gpu.nvidia.com"].model == "x" && device.attributes["x.io"]["y"] == 1',
    )
    assert out == MatchOutcome(False, "no such key: model")


def test_error_short_circuit_like_cel(engine):
    # false && error is false; error || true is true (CEL's commutative logic).
    assert not holds(engine, 'false && device.attributes["gpu.nvidia.com"].model == "x"')
    assert holds(engine, 'device.attributes["gpu.nvidia.com"].model == "x" || true')


# --- compile errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "needle"),
    [
        ('device.attributes["gpu.nvidia.com"].model ==', "syntax error"),
        ('device.attributes["gpu.nvidia.com"', "syntax error"),
        ('device.driver == "a" &&& true', "syntax error"),
        ('model == "H100"', "undeclared reference to 'model'"),
        ('device.attributes["d"].x.frobnicate()', "undeclared reference to 'frobnicate'"),
        ("device.driver", "must evaluate to bool or the unknown type, not string"),
        (
            'device.capacity["gpu.nvidia.com"].memory',
            "must evaluate to bool or the unknown type, not kubernetes.Quantity",
        ),
        ("1 + 2", "must evaluate to bool or the unknown type, not int"),
        ('"H100"', "must evaluate to bool or the unknown type, not string"),
        ("[true]", "must evaluate to bool or the unknown type, not list(bool)"),
        ('device.attributes["d"].exists(1, true)', "argument must be a simple name"),
        ('device.attributes["d"].index * 2', "must evaluate to bool or the unknown type, not int"),
        ('device.attributes["d"].? == "x"', "Syntax error"),
        ('device.driver == "gpu.nvidia.com', "syntax error at line 1"),
        ("[1, 2].reduce(a, b, 0, a + b) == 3", "undeclared reference to 'reduce'"),
    ],
)
def test_compile_errors(engine, expr, needle):
    with pytest.raises(CelCompileError) as e:
        engine.compile(expr)
    assert "failed to compile" in str(e.value)
    assert needle in str(e.value)
    # Cached failures raise the same error again.
    with pytest.raises(CelCompileError, match="failed to compile"):
        engine.compile(expr)


def test_compile_is_cached_by_text(engine):
    a = engine.compile('device.driver == "gpu.nvidia.com"')
    assert engine.compile('device.driver == "gpu.nvidia.com"') is a
    assert engine.compile('device.driver=="gpu.nvidia.com"') is not a


def test_macro_variables_are_declared(engine):
    assert holds(engine, "[1, 2, 3].all(i, i > 0) && [1, 2].exists(x, x == 2)")
    assert holds(engine, "[1, 2, 3].exists_one(i, i > 2)")
    assert holds(engine, "[1, 2, 3].map(i, i * 2) == [2, 4, 6]")
    assert holds(engine, "[1, 2, 3].filter(i, i % 2 == 1) == [1, 3]")
    assert holds(engine, 'device.attributes["gpu.nvidia.com"].exists(k, k == "uuid")')


# --- Kubernetes quantity library ---------------------------------------------------------------


@pytest.mark.parametrize(
    "expr",
    [
        'quantity("1Gi") == quantity("1024Mi")',
        'quantity("1Gi").compareTo(quantity("1G")) == 1',
        'quantity("500m").compareTo(quantity("1")) == -1',
        'quantity("80Gi").isGreaterThan(quantity("40Gi"))',
        'quantity("40Gi").isLessThan(quantity("80Gi"))',
        'quantity("1Gi").add(quantity("1Gi")) == quantity("2Gi")',
        'quantity("1").add(2) == quantity("3")',
        'quantity("2Gi").sub(quantity("1Gi")) == quantity("1Gi")',
        'sign(quantity("5").sub(7)) == -1',
        'sign(quantity("0")) == 0',
        'quantity("1Ki").asInteger() == 1024',
        'quantity("1500m").asApproximateFloat() == 1.5',
        'quantity("1500m").isInteger() == false',
        'quantity("2k").isInteger()',
        'isQuantity("80Gi") && !isQuantity("eighty")',
    ],
)
def test_quantity_library(engine, expr):
    assert holds(engine, expr)


def test_quantity_compare_takes_only_quantities(engine):
    # add/sub accept ints; compareTo and friends do not (as in Kubernetes): a compile error.
    for expr in ('quantity("1").compareTo(1) == 0', 'quantity("1").isGreaterThan(semver("1.0.0"))'):
        with pytest.raises(CelCompileError, match="found no matching overload"):
            engine.compile(expr)


def test_quantity_as_integer_of_a_fraction_is_an_error(engine):
    out = run(engine, 'quantity("1500m").asInteger() == 1')
    assert not out.matched and "cannot convert value to integer" in out.error


# --- Kubernetes semver library -----------------------------------------------------------------


@pytest.mark.parametrize(
    "expr",
    [
        'semver("1.2.3").major() == 1 && semver("1.2.3").minor() == 2',
        'semver("1.2.3").patch() == 3',
        'semver("v1.2", true) == semver("1.2.0")',
        'semver("v01.02.03", true).minor() == 2',
        'semver("1.10.0").isGreaterThan(semver("1.9.9"))',
        'semver("1.0.0-rc.1").isLessThan(semver("1.0.0"))',
        'semver("1.0.0-alpha").compareTo(semver("1.0.0-alpha.1")) == -1',
        'semver("1.0.0-alpha.beta").compareTo(semver("1.0.0-beta")) == -1',
        'semver("1.0.0-2").compareTo(semver("1.0.0-10")) == -1',
        'semver("2.0.0").compareTo(semver("2.0.0+build.5")) == 0',
        'isSemver("1.2.3") && !isSemver("v1.2.3") && isSemver("v1.2.3", true)',
        '!isSemver("1.2") && isSemver("1.2", true) && !isSemver("latest", true)',
    ],
)
def test_semver_library(engine, expr):
    assert holds(engine, expr)


# --- strings extension -------------------------------------------------------------------------

PRODUCT = 'device.attributes["gpu.nvidia.com"].productName'


@pytest.mark.parametrize(
    "expr",
    [
        f'{PRODUCT}.charAt(7) == "H"',
        f'{PRODUCT}.indexOf("H100") == 7',
        f'{PRODUCT}.indexOf("8", 12) == 12',
        f'{PRODUCT}.indexOf("A100") == -1',
        f'{PRODUCT}.lastIndexOf("H") == 17',
        f'{PRODUCT}.lowerAscii() == "nvidia h100 80gb hbm3"',
        f'{PRODUCT}.upperAscii().startsWith("NVIDIA H100")',
        f'{PRODUCT}.replace(" ", "-") == "NVIDIA-H100-80GB-HBM3"',
        f'{PRODUCT}.replace(" ", "-", 1) == "NVIDIA-H100 80GB HBM3"',
        f'{PRODUCT}.split(" ") == ["NVIDIA", "H100", "80GB", "HBM3"]',
        f'{PRODUCT}.split(" ", 2) == ["NVIDIA", "H100 80GB HBM3"]',
        f'{PRODUCT}.split(" ").join("_") == "NVIDIA_H100_80GB_HBM3"',
        '["a", "b"].join() == "ab"',
        f'{PRODUCT}.substring(7, 11) == "H100"',
        f'{PRODUCT}.substring(17) == "HBM3"',
        '"  Hopper \\t".trim() == "Hopper"',
        'strings.quote("say \\"hi\\"\\n") == "\\"say \\\\\\"hi\\\\\\"\\\\n\\""',
        '"%s has %d GiB (%.1f%%)".format(["H100", 80, 99.5]) == "H100 has 80 GiB (99.5%)"',
        '"%x".format([255]) == "ff"',
        f'{PRODUCT}.contains("80GB")',
        f'{PRODUCT}.matches("^NVIDIA H[0-9]+")',
    ],
)
def test_strings_extension(engine, expr):
    assert holds(engine, expr)


def test_string_index_out_of_range_is_a_runtime_error(engine):
    out = run(engine, f'{PRODUCT}.substring(5, 100) == ""')
    assert not out.matched and "index out of range" in out.error
    out = run(engine, f'{PRODUCT}.charAt(-1) == ""')
    assert not out.matched and "index out of range" in out.error


# --- lists and sets ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expr",
    [
        'sets.contains(["Hopper", "Ampere"], ["Hopper"])',
        '!sets.contains(["Hopper"], ["Hopper", "Ampere"])',
        "sets.contains([1, 2], [])",
        'sets.intersects(["Hopper", "Ampere"], ["Blackwell", "Ampere"])',
        '!sets.intersects(["Hopper"], ["Ampere"])',
        "sets.equivalent([1, 2, 2], [2, 1])",
        "!sets.equivalent([1, 2], [1, 3])",
        "[1, 2, 2, 5].isSorted() && ![3, 1].isSorted()",
        '["a", "b"].isSorted()',
        "[1, 2, 3].sum() == 6 && [].sum() == 0",
        "[1.5, 2.5].sum() == 4.0",
        "[4, 1, 9].min() == 1 && [4, 1, 9].max() == 9",
        '["gpu-0", "gpu-1", "gpu-0"].indexOf("gpu-0") == 0',
        '["gpu-0", "gpu-1", "gpu-0"].lastIndexOf("gpu-0") == 2',
        '["gpu-0"].indexOf("gpu-9") == -1',
        'device.attributes["gpu.nvidia.com"].architecture in ["Hopper", "Blackwell"]',
        '"pcieRoot" in device.attributes["resource.kubernetes.io"]',
    ],
)
def test_list_and_set_helpers(engine, expr):
    assert holds(engine, expr)


def test_max_of_empty_list_is_an_error(engine):
    out = run(engine, "[].max() == 1")
    assert not out.matched and "empty" in out.error


# --- optional syntax ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expr",
    [
        'device.attributes["gpu.nvidia.com"].?model.orValue("unknown") == "unknown"',
        'device.attributes["gpu.nvidia.com"].?architecture.orValue("x") == "Hopper"',
        'device.attributes["gpu.nvidia.com"].?architecture.hasValue()',
        '!device.attributes["gpu.nvidia.com"].?model.hasValue()',
        '!device.attributes["x.io"].?model.hasValue()',
        'device.attributes["gpu.nvidia.com"][?"architecture"].value() == "Hopper"',
        'device.attributes[?"x.io"].?model.orValue("none") == "none"',
        "device.attributes.?gone.?model.orValue(1) == 1",
        'device.attributes["gpu.nvidia.com"].?links[1].orValue("-") == "nvlink1"',
        'device.attributes["gpu.nvidia.com"].?links[5].orValue("-") == "-"',
        "optional.of(1).value() == 1 && !optional.none().hasValue()",
        'optional.ofNonZeroValue("").orValue("empty") == "empty"',
        'optional.none().or(optional.of("H100")).value() == "H100"',
        '{"a": 1}.?b.orValue(2) == 2',
    ],
)
def test_optional_syntax(engine, expr):
    assert holds(engine, expr, nvidia_gpu(links=("nvlink0", "nvlink1")))


def test_optional_none_value_is_a_runtime_error(engine):
    out = run(engine, 'device.attributes["gpu.nvidia.com"].?model.value() == "x"')
    assert not out.matched and "optional.none()" in out.error


# --- memoisation -------------------------------------------------------------------------------


def fleet(n: int, models: list[str]) -> list[Device]:
    return [
        Device(
            name=f"gpu-{i}",
            attributes={"model": models[i % len(models)], "uuid": f"GPU-{i:08x}", "index": i % 8},
            capacity={"memory": DeviceCapacity(Quantity.parse("80Gi"))},
        )
        for i in range(n)
    ]


def test_memo_evaluates_once_per_distinct_read_value(engine):
    devices = fleet(1000, ["H100", "A100", "L40S", "B200"])
    sel = engine.compile('device.attributes["gpu.nvidia.com"].model == "H100"')
    assert sel.fields == (("attributes", "gpu.nvidia.com", "model"),)
    matched = [engine.matches(sel, d, NVIDIA).matched for d in devices]
    assert sum(matched) == 250
    assert engine.evaluations == 4
    assert engine.memo_hits == 996
    # A second selector has its own memo entries.
    sel2 = engine.compile(
        'device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("40Gi"))'
    )
    assert all(engine.matches(sel2, d, NVIDIA).matched for d in devices)
    assert engine.evaluations == 5


def test_memo_key_normalises_the_driver_domain(engine):
    # "model" and "gpu.nvidia.com/model" are the same attribute of a gpu.nvidia.com device.
    a = Device(name="a", attributes={"model": "H100"})
    b = Device(name="b", attributes={"gpu.nvidia.com/model": "H100"})
    sel = engine.compile('device.attributes["gpu.nvidia.com"].model == "H100"')
    assert engine.matches(sel, a, NVIDIA).matched
    assert engine.matches(sel, b, NVIDIA).matched
    assert engine.evaluations == 1
    # Published by another driver, "model" is in that driver's domain: a different key.
    out = engine.matches(sel, a, "gpu.example.com")
    assert not out.matched and out.error
    assert engine.evaluations == 2


def test_memo_distinguishes_types_and_missing(engine):
    sel = engine.compile('device.attributes["gpu.nvidia.com"].flag == true')
    on = Device(name="a", attributes={"flag": True})
    one = Device(name="b", attributes={"flag": 1})
    missing = Device(name="c", attributes={})
    assert engine.matches(sel, on, NVIDIA) == MatchOutcome(True, None)
    assert not engine.matches(sel, one, NVIDIA).matched
    assert engine.matches(sel, missing, NVIDIA).error
    assert engine.evaluations == 3


def test_runtime_errors_are_memoised_with_their_message(engine):
    sel = engine.compile('device.attributes["gpu.nvidia.com"].model == "H100"')
    devices = fleet(10, ["H100"])
    for d in devices:
        d.attributes.pop("model")
    first = engine.matches(sel, devices[0], NVIDIA)
    assert not first.matched and "model" in first.error
    for d in devices:
        assert engine.matches(sel, d, NVIDIA) == first
    assert engine.evaluations == 1


def test_dynamic_reads_key_on_the_whole_device(engine):
    devices = fleet(16, ["H100", "A100"])  # uuid differs per device
    sel = engine.compile('device.attributes["gpu.nvidia.com"].exists(k, k == "model")')
    assert sel.fields is None
    assert all(engine.matches(sel, d, NVIDIA).matched for d in devices)
    assert engine.evaluations == 16
    # Computed key: dynamic too, but identical devices still share a memo entry.
    sel = engine.compile('device.attributes["gpu.nvidia.com"]["mo" + "del"] == "H100"')
    assert sel.fields is None
    twins = [Device(name=f"gpu-{i}", attributes={"model": "H100"}) for i in range(5)]
    assert all(engine.matches(sel, d, NVIDIA).matched for d in twins)
    assert engine.evaluations == 17


def test_fields_read_by_has_optional_and_nested_index(engine):
    sel = engine.compile(
        'has(device.attributes["x.io"].foo) || device.attributes["gpu.nvidia.com"].?model'
        '.orValue("") == "H100" || device.driver == "a" || device.allowMultipleAllocations'
    )
    assert sel.fields == (
        ("allowMultipleAllocations",),
        ("attributes", "gpu.nvidia.com", "model"),
        ("attributes", "x.io", "foo"),
        ("driver",),
    )
    sel = engine.compile(
        'device.attributes["gpu.nvidia.com"].links[device.attributes["gpu.nvidia.com"].index] == "x"'
    )
    assert sel.fields == (
        ("attributes", "gpu.nvidia.com", "index"),
        ("attributes", "gpu.nvidia.com", "links"),
    )
    assert engine.compile("[1].all(x, x == 1)").fields == ()


@settings(max_examples=60, deadline=None)
@given(
    models=st.lists(
        st.sampled_from(["H100", "A100", "L40S", "B200", "H200"]), min_size=1, max_size=40
    ),
    wanted=st.sampled_from(["H100", "A100", "GH200"]),
)
def test_memo_agrees_with_fresh_evaluation(models, wanted):
    engine = SelectorEngine()
    expr = f'device.attributes["gpu.nvidia.com"].model == "{wanted}"'
    devices = [Device(name=f"gpu-{i}", attributes={"model": m}) for i, m in enumerate(models)]
    got = [engine.matches(engine.compile(expr), d, NVIDIA).matched for d in devices]
    assert got == [m == wanted for m in models]
    assert engine.evaluations == len(set(models))


def test_repeat_question_for_the_same_device_is_a_memo_hit(engine):
    sel = engine.compile('device.attributes["gpu.nvidia.com"].architecture == "Hopper"')
    for _ in range(5):
        assert engine.matches(sel, H100, NVIDIA).matched
    assert (engine.evaluations, engine.memo_hits) == (1, 4)


MEMO_EXPRESSIONS = [
    'device.attributes["gpu.nvidia.com"].model == "H100"',
    'has(device.attributes["gpu.nvidia.com"].model) && device.driver == "gpu.nvidia.com"',
    'device.attributes["gpu.nvidia.com"].?index.orValue(-1) >= 2',
    'device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("40Gi"))',
    'device.attributes["gpu.nvidia.com"].exists(k, k == "model")',
    'device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:00"',
    'device.allowMultipleAllocations || device.driver.endsWith(".example.com")',
]


@settings(max_examples=40, deadline=None)
@given(
    specs=st.lists(
        st.tuples(
            st.sampled_from([NVIDIA, "gpu.example.com"]),
            st.sampled_from([None, "H100", "A100", 1, True]),
            st.sampled_from([None, 0, 3]),
            st.sampled_from(["40Gi", "80Gi", None]),
            st.sampled_from([None, "pci0000:00", "pci0000:80"]),
            st.booleans(),
        ),
        min_size=1,
        max_size=12,
    )
)
def test_memoised_answers_equal_fresh_evaluations(specs):
    """Whatever the memo key holds, it must never change an answer."""
    engine = SelectorEngine()
    devices = []
    for i, (driver, model, index, memory, pcie, shared) in enumerate(specs):
        attrs: dict = {"uuid": f"GPU-{i}"}
        if model is not None:
            attrs["model"] = model
        if index is not None:
            attrs["index"] = index
        if pcie is not None:
            attrs["resource.kubernetes.io/pcieRoot"] = pcie
        cap = {"memory": DeviceCapacity(Quantity.parse(memory))} if memory else {}
        dev = Device(
            name=f"d{i}", attributes=attrs, capacity=cap, allow_multiple_allocations=shared
        )
        devices.append((dev, driver))
    for expr in MEMO_EXPRESSIONS:
        sel = engine.compile(expr)
        for dev, driver in devices:
            fresh = SelectorEngine()
            assert engine.matches(sel, dev, driver) == fresh.matches(
                fresh.compile(expr), dev, driver
            )


VERSIONS = st.tuples(
    st.integers(0, 30),
    st.integers(0, 30),
    st.integers(0, 30),
    st.sampled_from(["", "-alpha", "-alpha.1", "-beta", "-rc.2", "-rc.10"]),
)


def _precedence(v: tuple) -> tuple:
    # Semver 2.0.0 precedence for the shapes above: a release sorts after its pre-releases.
    pre = v[3].lstrip("-")
    ids = (
        tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split(".")) if pre else ()
    )
    return (v[0], v[1], v[2], 0 if pre else 1, ids)


SEMVER_ENGINE = SelectorEngine()


@settings(max_examples=80, deadline=None)
@given(a=VERSIONS, b=VERSIONS)
def test_semver_compare_follows_semver_precedence(a, b):
    engine = SEMVER_ENGINE
    sa, sb = (f"{v[0]}.{v[1]}.{v[2]}{v[3]}" for v in (a, b))
    want = (_precedence(a) > _precedence(b)) - (_precedence(a) < _precedence(b))
    assert holds(engine, f'semver("{sa}").compareTo(semver("{sb}")) == {want}')


def test_pathological_text_is_a_compile_error_not_a_crash(engine):
    with pytest.raises(CelCompileError, match="failed to compile") as e:
        engine.compile("(" * 3000 + "true" + ")" * 3000)
    assert len(str(e.value)) < 400  # the expression is shortened in the message
    with pytest.raises(CelCompileError, match="syntax error"):
        engine.compile("")


def test_name_published_twice_keys_on_what_cel_sees(engine):
    # Invalid in Kubernetes, but the memo must still agree with evaluation: the later wins.
    twice = Device(name="x", attributes={"model": "A100", "gpu.nvidia.com/model": "H100"})
    once = Device(name="y", attributes={"model": "A100"})
    sel = engine.compile('device.attributes["gpu.nvidia.com"].model == "A100"')
    assert not engine.matches(sel, twice, NVIDIA).matched
    assert engine.matches(sel, once, NVIDIA).matched
    assert engine.evaluations == 2
