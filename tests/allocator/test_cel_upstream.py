"""Verdicts Kubernetes itself documents for DRA selectors.

Rows restate, as (selector, device, verdict), the scenarios that
``k8s.io/dynamic-resource-allocation/cel`` checks in its own tests for the stored-expressions
environment (all DRA gates on: list-typed attributes, ``includes``, consumable capacity), the
examples of the Kubernetes CEL library reference (quantity, semver, regex, lists, sets, IP,
CIDR, URL, format) and the CEL language definition (heterogeneous equality, error absorption,
overflow). A verdict is True/False (compiles, matches or not), ``Compile("...")`` (refused
with "failed to compile" and that text) or ``Fails("...")`` (compiles; evaluation errs with
that text, so the device does not match).
"""

from __future__ import annotations

from typing import NamedTuple

import pytest

from allocator.cel import CelCompileError, SelectorEngine
from allocator.model import Device, DeviceCapacity, Version
from allocator.quantity import Quantity


class Compile(NamedTuple):
    message: str


class Fails(NamedTuple):
    message: str


NVIDIA = "gpu.nvidia.com"
G = 'device.attributes["gpu.nvidia.com"]'
GC = 'device.capacity["gpu.nvidia.com"]'


def gpu(attributes=None, capacity=None, multi=False) -> Device:
    return Device(
        name="gpu-0",
        attributes=dict(attributes or {}),
        capacity={k: DeviceCapacity(Quantity.parse(v)) for k, v in (capacity or {}).items()},
        allow_multiple_allocations=multi,
    )


H100 = gpu(
    {
        "productName": "NVIDIA H100 80GB HBM3",
        "architecture": "Hopper",
        "index": 1,
        "cudaComputeCapability": Version("9.0.0"),
        "driverVersion": Version("550.54.15"),
        "mig-capable": True,
        "services": "nvlink_fabric_manager",
        # list-typed attributes (DRAListTypeAttributes)
        "migProfiles": ("1g.10gb", "2g.20gb", "3g.40gb"),
        "nvlinkPeers": (0, 2, 3),
        "eccModes": (True, False),
        "supportedCudaVersions": (Version("12.2.0"), Version("12.4.0")),
        "topology.example.com/rack": "r7",
    },
    {"memory": "80Gi", "multiprocessors": "132"},
)
EMPTY = gpu()
TOO_LONG = gpu({"partitions": tuple(f"part-{i}" for i in range(65))})
JUST_64 = gpu({"partitions": tuple(f"part-{i}" for i in range(64))})

_TEN = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]"
NESTED = (
    f"{_TEN}.all(a, {_TEN}.all(b, {_TEN}.all(c, {_TEN}.all(d, {_TEN}.all(e, "
    f"{_TEN}.all(f, {_TEN}.all(g, int('1'.find('[0-9]*')) < 100)))))))"
)

# (selector, device, driver, verdict)
UPSTREAM = [
    # --- the DRA package's own scenarios -----------------------------------------------
    ("true", EMPTY, "", True),
    ("false", EMPTY, "", False),
    ("?!", EMPTY, "", Compile("Syntax error")),
    ("1", EMPTY, "", Compile("must evaluate to bool or the unknown type, not int")),
    (
        'device.attributes["no-such-domain"].noSuchAttr.isGreaterThan(quantity("0"))',
        EMPTY,
        "",
        Fails("no such key: noSuchAttr"),
    ),
    (
        'device.attributes["no-such-domain"]["noSuchAttr"].isGreaterThan(quantity("0"))',
        EMPTY,
        "",
        Fails("no such key: noSuchAttr"),
    ),
    ('"no-such-domain" in device.attributes', EMPTY, "", False),
    ('"topology.example.com" in device.attributes', H100, NVIDIA, True),
    ('"gpu.nvidia.com" in device.attributes', H100, NVIDIA, True),
    ('device.driver == ""', EMPTY, "", True),
    ('device.driver == "gpu.nvidia.com"', H100, NVIDIA, True),
    (f'{G}["mig-capable"]', H100, NVIDIA, True),
    (
        f"cel.bind(gpu, {G}, gpu.architecture == \"Hopper\" && gpu['mig-capable'])",
        H100,
        NVIDIA,
        True,
    ),
    ('device.attributes["topology.example.com"].rack == "r7"', H100, NVIDIA, True),
    (f"{G}.index > 0", H100, NVIDIA, True),
    (f'{G}.architecture == "Hopper"', H100, NVIDIA, True),
    # a macro over a scalar attribute compiles (dyn) and errs at run time
    (f"{G}.index.exists(x, x > 0)", H100, NVIDIA, Fails("got 'types.Int', expected iterable type")),
    (
        f'{G}["mig-capable"].exists(x, x == true)',
        H100,
        NVIDIA,
        Fails("got 'types.Bool', expected iterable type"),
    ),
    (
        f'{G}.architecture.exists(x, x == "Hopper")',
        H100,
        NVIDIA,
        Fails("got 'types.String', expected iterable type"),
    ),
    (
        f'{G}.driverVersion.exists(x, x.isGreaterThan(semver("0.0.1")))',
        H100,
        NVIDIA,
        Fails("got 'cel.Semver', expected iterable type"),
    ),
    # a list-typed attribute is not a bool result
    (
        f"{G}.migProfiles",
        H100,
        NVIDIA,
        Fails("CEL result of type list could not be converted to bool"),
    ),
    (f"{G}.migProfiles.size() == 3", H100, NVIDIA, True),
    (f"{G}.eccModes.size() == 2", H100, NVIDIA, True),
    (f"{G}.nvlinkPeers.size() == 3", H100, NVIDIA, True),
    (f"{G}.supportedCudaVersions.size() == 2", H100, NVIDIA, True),
    (f"{G}.nvlinkPeers.exists(p, p > 2)", H100, NVIDIA, True),
    (f'{G}.migProfiles.all(p, p != "")', H100, NVIDIA, True),
    (f'{G}.supportedCudaVersions.all(v, v.isGreaterThan(semver("12.0.0")))', H100, NVIDIA, True),
    (f"2 in {G}.nvlinkPeers", H100, NVIDIA, True),
    # includes: a list contains the value, a scalar equals it
    (f'{G}.migProfiles.includes("2g.20gb")', H100, NVIDIA, True),
    (f'{G}.migProfiles.includes("7g.80gb")', H100, NVIDIA, False),
    (f'{G}["mig-capable"].includes(true)', H100, NVIDIA, True),
    (f'{G}["mig-capable"].includes(false)', H100, NVIDIA, False),
    (f"{G}.eccModes.includes(false)", H100, NVIDIA, True),
    (f"{G}.index.includes(1)", H100, NVIDIA, True),
    (f"{G}.index.includes(2)", H100, NVIDIA, False),
    (f"{G}.nvlinkPeers.includes(3)", H100, NVIDIA, True),
    (f"{G}.nvlinkPeers.includes(1)", H100, NVIDIA, False),
    (f'{G}.architecture.includes("Hopper")', H100, NVIDIA, True),
    (f'{G}.architecture.includes("Ampere")', H100, NVIDIA, False),
    (f'{G}.driverVersion.includes(semver("550.54.15"))', H100, NVIDIA, True),
    (f'{G}.driverVersion.includes(semver("535.0.0"))', H100, NVIDIA, False),
    (f'{G}.supportedCudaVersions.includes(semver("12.4.0"))', H100, NVIDIA, True),
    (f'{G}.supportedCudaVersions.includes(semver("11.8.0"))', H100, NVIDIA, False),
    (f"{G}.nvlinkPeers.includes(2.0)", H100, NVIDIA, True),  # heterogeneous equality
    (f'{G}.nvlinkPeers.includes("2")', H100, NVIDIA, False),
    (f'{G}.partitions.includes("part-64")', JUST_64, NVIDIA, False),
    (f'{G}.partitions.includes("part-3")', TOO_LONG, NVIDIA, True),
    (
        f'{G}.partitions.includes("part-64")',
        TOO_LONG,
        NVIDIA,
        Fails("'includes' function cannot be applied to lists longer than 64 values"),
    ),
    ('"Hopper".includes(1)', EMPTY, "", False),  # declared (dyn, dyn): anything compiles
    (f'{G}.driverVersion.isGreaterThan(semver("0.0.1"))', H100, NVIDIA, True),
    (
        f'{G}.cudaComputeCapability.isGreaterThan(semver("v8.0", true)) && isSemver("v9.0.0", true)',
        H100,
        NVIDIA,
        True,
    ),
    (f'{GC}.memory.isGreaterThan(quantity("40Gi"))', H100, NVIDIA, True),
    (f'"memory" in {GC} && {GC}.memory.isGreaterThan(quantity("1Ki"))', H100, NVIDIA, True),
    (f'!("memory" in {GC}) || {GC}.memory.isGreaterThan(quantity("1Ki"))', EMPTY, NVIDIA, True),
    (
        f'{GC}["memory"].isGreaterThan(quantity("1Ki")) && {G}["mig-capable"] && '
        f'{G}["index"] > 0 && {G}["architecture"] == "Hopper" && '
        f'{G}["driverVersion"].isGreaterThan(semver("0.0.1"))',
        H100,
        NVIDIA,
        True,
    ),
    ('device.attributes.exists_one(d, d == "gpu.nvidia.com")', H100, NVIDIA, True),
    (f'{G}.exists_one(a, a == "services")', H100, NVIDIA, True),
    ('device.capacity.exists_one(d, d == "gpu.nvidia.com")', H100, NVIDIA, True),
    (f'{GC}.exists_one(c, c == "memory")', H100, NVIDIA, True),
    (f'{G}.services.split("_").size() >= 2', H100, NVIDIA, True),
    (f'{G}.services.matches("[^a]?fab")', H100, NVIDIA, True),
    (NESTED, EMPTY, "", Fails("actual cost limit exceeded")),
    ("device.allowMultipleAllocations == true", gpu(multi=True), NVIDIA, True),
    ("device.allowMultipleAllocations == false", EMPTY, NVIDIA, True),
    # --- Kubernetes CEL library reference ----------------------------------------------
    (
        'quantity("50k").add(20).sub(quantity("100k")).sub(-50000) == quantity("20")',
        EMPTY,
        "",
        True,
    ),
    ('quantity("200M").compareTo(quantity("0.2G")) == 0', EMPTY, "", True),
    ('quantity("50M").isLessThan(quantity("100M"))', EMPTY, "", True),
    ('quantity("50.5").asApproximateFloat() == 50.5', EMPTY, "", True),
    ('quantity("50k").asInteger() == 50000', EMPTY, "", True),
    ('quantity("50.5").isInteger()', EMPTY, "", False),
    ('quantity("1.5G").isInteger()', EMPTY, "", True),
    ('sign(quantity("-50k")) == -1', EMPTY, "", True),
    ('isQuantity("1.3G") && !isQuantity("1,3G")', EMPTY, "", True),
    ('quantity("1,3G") == quantity("1G")', EMPTY, "", Fails("")),
    ('quantity("9223372036854775807").add(1).asInteger() > 0', EMPTY, "", Fails("")),
    ('semver("1.2.3").major() == 1 && semver("1.2.3").minor() == 2', EMPTY, "", True),
    ('semver("1.2.3").patch() == 3', EMPTY, "", True),
    ('semver("1.2.3").compareTo(semver("2.0.0")) < 0', EMPTY, "", True),
    ('semver("1.2.3").isLessThan(semver("1.10.0"))', EMPTY, "", True),
    (
        'isSemver("1.2.3-beta.1+build.5") && !isSemver("v1.0.0") && !isSemver("1.0")',
        EMPTY,
        "",
        True,
    ),
    ('semver("v1.0.0") == semver("1.0.0")', EMPTY, "", Fails("")),
    ('"abc 123".find("[0-9]+") == "123"', EMPTY, "", True),
    ('"abc 123".find("xyz") == ""', EMPTY, "", True),
    ('"123 abc 456".findAll("[0-9]+") == ["123", "456"]', EMPTY, "", True),
    ('"123 abc 456".findAll("[0-9]+", 1) == ["123"]', EMPTY, "", True),
    ('"123 abc 456".findAll("xyz") == []', EMPTY, "", True),
    ("[1, 2, 3].isSorted() && ![2, 1].isSorted()", EMPTY, "", True),
    ("[1, 2, 3].sum() == 6 && [1.5, 2.5].sum() == 4.0", EMPTY, "", True),
    ("[1, 2, 3].min() == 1 && [1, 2, 3].max() == 3", EMPTY, "", True),
    ("[].min() == 1", EMPTY, "", Fails("")),
    ("[1, 2, 3, 2].indexOf(2) == 1 && [1, 2, 3, 2].lastIndexOf(2) == 3", EMPTY, "", True),
    ("[1, 2].indexOf(5) == -1", EMPTY, "", True),
    ("sets.contains([1, 2, 3], [2, 3]) && !sets.contains([1], [1, 2])", EMPTY, "", True),
    ("sets.equivalent([1, 2], [2, 1, 1]) && !sets.equivalent([1], [1, 2])", EMPTY, "", True),
    ("sets.equivalent([1], [1.0])", EMPTY, "", Compile("no matching overload")),  # list(A)
    ("sets.intersects([1], [1, 2]) && !sets.intersects([1], [])", EMPTY, "", True),
    ('"hello".charAt(1) == "e" && "hello".charAt(5) == ""', EMPTY, "", True),
    ('"hello".charAt(6) == ""', EMPTY, "", Fails("")),
    ('"hello mellow".indexOf("ello", 2) == 7 && "hello".lastIndexOf("l") == 3', EMPTY, "", True),
    ('"TacoCat".lowerAscii() == "tacocat" && "TacoCat".upperAscii() == "TACOCAT"', EMPTY, "", True),
    ('"hello hello".replace("he", "we", 1) == "wello hello"', EMPTY, "", True),
    ('"hello hello".split(" ") == ["hello", "hello"]', EMPTY, "", True),
    ('"tacocat".substring(4) == "cat" && "tacocat".substring(0, 4) == "taco"', EMPTY, "", True),
    ('"tacocat".substring(4, 2) == "c"', EMPTY, "", Fails("")),
    ('"  \\ttrim\\n ".trim() == "trim"', EMPTY, "", True),
    ('["a", "b"].join("-") == "a-b" && [].join() == ""', EMPTY, "", True),
    ('"%d of %s".format([1, "x"]) == "1 of x"', EMPTY, "", True),
    ('strings.quote("a\\nb") == "\\"a\\\\nb\\""', EMPTY, "", True),
    # string.format: a constant format string with a list literal is checked when compiling
    (
        '"%d".format([1.5]) == "1"',
        EMPTY,
        "",
        Compile("decimal clause can only be used on integers"),
    ),
    ('"%s %s".format(["a"]) == "a"', EMPTY, "", Compile("index 1 out of range")),
    ('"%s".format(["a", "b"]) == "a"', EMPTY, "", Compile("too many arguments supplied")),
    ('"%5s".format(["a"]) == "a"', EMPTY, "", Compile('unrecognized formatting clause "5"')),
    ('"%s".format([semver("1.0.0")]) == ""', EMPTY, "", Compile("string clause can only be used")),
    ('"%d".format([dyn(1.5)]) == "1"', EMPTY, "", Fails("can only be used on integers")),
    ('"%s".format([dyn(quantity("1Gi"))]) == "1Gi"', EMPTY, "", Fails("string clause")),
    ('"%s, %s".format([1u, type(1)]) == "1, int"', EMPTY, "", True),
    (
        '"%s".format([[1.0, "a", b"b", null, 2]]) == "[1.000000, \\"a\\", b\\"b\\", null, 2]"',
        EMPTY,
        "",
        True,
    ),
    ('"%s".format([{"b": 2, "a": 1}]) == "{\\"a\\":1, \\"b\\":2}"', EMPTY, "", True),
    ('"%b|%.1f|%f".format([true, 2.25, "NaN"]) == "1|2.2|NaN"', EMPTY, "", True),
    ('string(1000000.0) == "1e+06" && string(123456.0) == "123456"', EMPTY, "", True),
    ('"abc".reverse() == "cba"', EMPTY, "", Compile("undeclared reference to 'reverse'")),
    ('ip("192.168.0.1").family() == 4 && ip("::1").family() == 6', EMPTY, "", True),
    ('ip("127.0.0.1").isLoopback() && ip("0.0.0.0").isUnspecified()', EMPTY, "", True),
    (
        'ip("224.0.0.1").isLinkLocalMulticast() && ip("169.254.0.1").isLinkLocalUnicast()',
        EMPTY,
        "",
        True,
    ),
    (
        'ip("192.168.0.1").isGlobalUnicast() && !ip("255.255.255.255").isGlobalUnicast()',
        EMPTY,
        "",
        True,
    ),
    ('isIP("1.2.3.4") && !isIP("1.2.3.4/24") && !isIP("1.2.3")', EMPTY, "", True),
    ('ip("1.2.3") == ip("1.2.3.4")', EMPTY, "", Fails("")),
    ('cidr("192.168.0.0/16").containsIP("192.168.1.5")', EMPTY, "", True),
    ('cidr("192.168.0.0/24").containsCIDR(cidr("192.168.0.0/25"))', EMPTY, "", True),
    ('cidr("192.168.0.0/24").containsCIDR("192.168.0.0/23")', EMPTY, "", False),
    ('cidr("192.168.0.10/24").ip() == ip("192.168.0.10")', EMPTY, "", True),
    ('cidr("192.168.0.10/24").masked() == cidr("192.168.0.0/24")', EMPTY, "", True),
    ('cidr("::1/128").prefixLength() == 128', EMPTY, "", True),
    ('url("https://example.com:8443/path").getHostname() == "example.com"', EMPTY, "", True),
    ('url("https://example.com:8443/path").getPort() == "8443"', EMPTY, "", True),
    ('url("https://example.com/path").getScheme() == "https"', EMPTY, "", True),
    ('url("https://example.com/a%20b").getEscapedPath() == "/a%20b"', EMPTY, "", True),
    ('url("https://example.com/?k=a&k=b").getQuery()["k"] == ["a", "b"]', EMPTY, "", True),
    ('isURL("https://example.com") && !isURL("example.com")', EMPTY, "", True),
    ('format.dns1123Subdomain().validate("gpu.nvidia.com").hasValue()', EMPTY, "", False),
    ('format.dns1123Label().validate("Gpu").hasValue()', EMPTY, "", True),
    ('format.named("no-such-format").hasValue()', EMPTY, "", False),
    # --- the CEL language definition -----------------------------------------------------
    ("1 == 1.0", EMPTY, "", Compile("no matching overload")),
    ("dyn(1) == 1.0 && dyn(1u) == 1 && dyn(2.0) > 1", EMPTY, "", True),
    ('dyn(1) == "1"', EMPTY, "", False),
    ("[dyn(1), dyn(2.0)] == [1, 2]", EMPTY, "", True),
    # literals must be homogeneous: dyn is not the same type as int
    ("[1, dyn(2.0)] == [1, 2]", EMPTY, "", Compile("expected type 'int' but found 'dyn'")),
    ('{"a": dyn(1)} == {"a": 1.0}', EMPTY, "", True),
    ("null == null && dyn(null) != 0", EMPTY, "", True),
    ("1 / 0 == 0 || true", EMPTY, "", True),
    ("true || 1 / 0 == 0", EMPTY, "", True),
    ("false && 1 / 0 == 0", EMPTY, "", False),
    ("1 / 0 == 0 && false", EMPTY, "", False),
    ("1 / 0 == 0 && true", EMPTY, "", Fails("division by zero")),
    ("1 % 0 == 0", EMPTY, "", Fails("modulus by zero")),
    ("1.0 / 0.0 > 1e308", EMPTY, "", True),  # doubles follow IEEE 754
    ("[1, 0].exists(x, 1 / x == 1)", EMPTY, "", True),
    ("[0, 1].all(x, 1 / x == 1)", EMPTY, "", Fails("division by zero")),
    ("[0, 1].all(x, 1 / x == 2)", EMPTY, "", False),  # a false element decides
    ("9223372036854775807 + 1 > 0", EMPTY, "", Fails("overflow")),
    ("-9223372036854775807 - 2 < 0", EMPTY, "", Fails("overflow")),
    ("-(-9223372036854775807 - 1) > 0", EMPTY, "", Fails("overflow")),
    ("9223372036854775807 * 2 > 0", EMPTY, "", Fails("overflow")),
    ("(-9223372036854775807 - 1) / -1 < 0", EMPTY, "", Fails("overflow")),
    ("18446744073709551615u + 1u > 0u", EMPTY, "", Fails("overflow")),
    ("0u - 1u > 0u", EMPTY, "", Fails("overflow")),
    ("18446744073709551616u > 0u", EMPTY, "", Compile("")),
    ("int(18446744073709551615u) > 0", EMPTY, "", Fails("")),
    ("uint(-1) > 0u", EMPTY, "", Fails("")),
    ("int(2.9) == 2 && int(-2.9) == -2", EMPTY, "", True),
    ('"abc" < "abd" && b"abc" < b"abd" && "a" + "b" == "ab"', EMPTY, "", True),
    ('size("héllo") == 5 && size(b"h\\xc3\\xa9llo") == 6', EMPTY, "", True),
    ('string(b"\\xff") == ""', EMPTY, "", Fails("")),
    ('bytes("é") == b"\\xc3\\xa9"', EMPTY, "", True),
    ('duration("1h") > duration("59m") && duration("1h").getMinutes() == 60', EMPTY, "", True),
    (
        'timestamp("2024-01-01T00:00:00Z") + duration("24h") == timestamp("2024-01-02T00:00:00Z")',
        EMPTY,
        "",
        True,
    ),
    ('timestamp("2024-03-01T00:00:00Z").getMonth() == 2', EMPTY, "", True),
    # constant timestamps, durations and regular expressions are checked when compiling
    (
        'timestamp("not a time") < timestamp("2024-01-01T00:00:00Z")',
        EMPTY,
        "",
        Compile("timestamp"),
    ),
    ('duration("1 hour") > duration("1s")', EMPTY, "", Compile("duration")),
    ('"gpu".matches("[")', EMPTY, "", Compile("")),
    ('"gpu".find("(")', EMPTY, "", Compile("")),
    ("has(device.driver) && has(device.attributes)", EMPTY, "", True),  # declared fields
    ("has(device.vendor)", EMPTY, "", Compile("undefined field 'vendor'")),
    ('{"a": 1}.a == 1 && has({"a": 1}.a) && !has({"a": 1}.b)', EMPTY, "", True),
    ('{"a": 1}.b == 1', EMPTY, "", Fails("no such key")),
    ("[1, 2][2] == 1", EMPTY, "", Fails("index out of range")),
    ('{1: "a", 1: "b"}.size() == 1', EMPTY, "", Fails("")),
    ("true ? 1 : 2", EMPTY, "", Compile("must evaluate to bool")),
    ("true ? true : 1 == 1", EMPTY, "", True),
    ('type(1) == int && type("a") == string && type(dyn(1u)) == uint', EMPTY, "", True),
]


@pytest.fixture(scope="module")
def engine() -> SelectorEngine:
    return SelectorEngine()


@pytest.mark.parametrize(("expression", "device", "driver", "verdict"), UPSTREAM)
def test_upstream_verdict(engine, expression, device, driver, verdict):
    if isinstance(verdict, Compile):
        with pytest.raises(CelCompileError) as caught:
            engine.compile(expression)
        assert "failed to compile" in str(caught.value)
        assert verdict.message in str(caught.value)
        return
    out = engine.matches(engine.compile(expression), device, driver)
    if isinstance(verdict, Fails):
        assert not out.matched, out
        assert out.error and verdict.message in out.error, out.error
    else:
        assert out.error is None, out.error
        assert out.matched is verdict


def test_a_long_chain_of_conditions_compiles_as_cel_go_balances_it(engine):
    # cel-go's parser builds && and || chains as balanced trees: 400 conditions are shallow
    chain = " && ".join(
        f'device.attributes["gpu.nvidia.com"].index != {i + 100}' for i in range(400)
    )
    out = engine.matches(engine.compile(chain), H100, NVIDIA)
    assert out.error is None and out.matched is True
    either = " || ".join(f'device.attributes["gpu.nvidia.com"].index == {i}' for i in range(400))
    assert engine.matches(engine.compile(either), H100, NVIDIA).matched is True


def test_an_expression_over_cel_gos_size_limit_does_not_compile(engine):
    too_big = "true" + " && true" * 12_500  # more than 100,000 code points
    with pytest.raises(CelCompileError, match="expression code point size exceeds limit"):
        engine.compile(too_big)
