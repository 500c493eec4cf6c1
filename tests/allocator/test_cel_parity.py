"""Kubernetes' verdicts for DRA selectors: does it compile, and does the device match.

Each row is what ``k8s.io/dynamic-resource-allocation/cel`` (the stored-expressions
environment) decides, as the Kubernetes CEL docs and cel-go's language definition document it:
"failed to compile" for type errors (even in a branch that ``||`` would skip), and at run time
CEL's heterogeneous equality and commutative error absorption.
"""

from __future__ import annotations

import pytest

from allocator.cel import CelCompileError, SelectorEngine
from allocator.model import Device, DeviceCapacity, Version
from allocator.quantity import Quantity

NVIDIA = "gpu.nvidia.com"
A = 'device.attributes["gpu.nvidia.com"]'
C = 'device.capacity["gpu.nvidia.com"]'

H100 = Device(
    name="gpu-0",
    attributes={
        "productName": "NVIDIA H100 80GB HBM3",
        "architecture": "Hopper",
        "index": 0,
        "minor": 3,
        "driverVersion": Version("550.54.15"),
        "uuid": "GPU-4f6ac2b0-1d8e-4b7e-9f0a-2c3d4e5f6a7b",
        "mig-capable": True,
        "resource.kubernetes.io/pcieRoot": "pci0000:00",
        "nic.example.com/ip": "10.0.3.17",
        "nic.example.com/endpoint": "https://fabric.example.com:8443/v1/topology?rack=r7&rack=r8",
    },
    capacity={"memory": DeviceCapacity(Quantity.parse("80Gi"))},
)

COMPILE_ERROR = "compile error"
RUNTIME_ERROR = "runtime error"

# (expression, verdict): True/False = compiles and matches or not; RUNTIME_ERROR = compiles,
# the evaluation errs (not matched); COMPILE_ERROR = Kubernetes refuses the selector.
TABLE = [
    # --- the type check: refused at compile time, even where || would skip the branch
    ("device.driver + 1 == 2", COMPILE_ERROR),
    ("1 == 1.0", COMPILE_ERROR),
    ("1 == 1u", COMPILE_ERROR),
    ("!1", COMPILE_ERROR),
    ('"a" < 1', COMPILE_ERROR),
    (f'{A}.architecture in ["Hopper", 1]', COMPILE_ERROR),
    (f'{A}.architecture in ["Hopper", {A}.model]', COMPILE_ERROR),  # string then dyn
    ('{"a": 1, "b": "x"}.size() == 2', COMPILE_ERROR),
    ('device.driver.matches("[a-")', COMPILE_ERROR),
    ('device.driver.matches("(?=x)")', COMPILE_ERROR),  # RE2 has no lookahead
    ("device.model == 1", COMPILE_ERROR),
    ("has(device.model)", COMPILE_ERROR),
    ("true || device.driver + 1 == 2", COMPILE_ERROR),
    ("true || 1 == 1.0", COMPILE_ERROR),
    ('true || device.driver.matches("(")', COMPILE_ERROR),
    ("false && device.vendor == 1", COMPILE_ERROR),
    ("device.driver", COMPILE_ERROR),  # must evaluate to bool or dyn
    (f"{C}.memory", COMPILE_ERROR),
    (f"{C}.memory > 1", COMPILE_ERROR),  # quantities compare with compareTo
    (f'{C}.memory == "80Gi"', COMPILE_ERROR),
    ('quantity("1").sign() == 1', COMPILE_ERROR),  # sign is the global sign(q)
    ('[quantity("1Gi")].sum() == quantity("1Gi")', COMPILE_ERROR),
    ('quantity("1").compareTo(1) == 0', COMPILE_ERROR),
    ('duration("1x") < duration("1s")', COMPILE_ERROR),
    ("reduce([1], 0) == 1", COMPILE_ERROR),
    ("model == 1", COMPILE_ERROR),
    ("device.driver == 'a' &&", COMPILE_ERROR),
    ("9223372036854775808 > 1", COMPILE_ERROR),
    ("[1, 2].exists(1, true)", COMPILE_ERROR),
    ("size(device.driver, 1) == 1", COMPILE_ERROR),
    # --- dyn: attribute values are of unknown type, so any overload may apply
    (f"{A}.index + 1 == 1", True),
    (f"-{A}.index == 0", True),
    (f"{A}.index", RUNTIME_ERROR),  # compiles (dyn), an int at run time
    (f'{A}.architecture + {A}.productName != ""', True),
    (f'{A}.architecture in ["Hopper", "Blackwell"]', True),
    (f"[{A}.architecture, {A}.uuid].size() == 2", True),
    # --- heterogeneous equality at run time
    (f"{A}.index != true", True),
    (f"{A}.index == true", False),
    (f'{A}.index == "0"', False),
    (f"{A}.index == 0.0", True),
    (f"{A}.index == 0u", True),
    (f"{A}.minor < 3.5", True),
    (f"{A}.minor >= 3u", True),
    ("dyn(1) == 1.0", True),
    ("dyn(1u) == 1", True),
    ("dyn([1, 2]) == [1.0, 2.0]", True),
    ('dyn({"a": 1}) == {"a": 1u}', True),
    ('dyn(1) != dyn("1")', True),
    ("1 < 1.5 && 2u > 1 && 1.0 <= 1u", True),  # cross-type numeric comparisons
    # apiserver's Quantity.Equal: another type is simply unequal
    (f'{C}.memory == dyn("80Gi")', False),
    (f'"550.54.15" == {A}.driverVersion', False),
    (f'{A}.driverVersion in ["550.54.15"]', False),  # in only looks for a true comparison
    (f"{A}.driverVersion != null", True),
    (f"{A}.architecture < 1", RUNTIME_ERROR),
    # --- errors absorbed by && and || (CEL's commutative logic), also from macros
    (f'{A}.model == "x" || true', True),
    (f'false && {A}.model == "x"', False),
    (f'{A}.model == "x" && false', False),
    (f'{A}.model == "x" || false', RUNTIME_ERROR),
    ("[1, 2].filter(x, x / 0 == 1).size() == 0 || true", True),
    ("[1, 2].map(x, x / 0).size() == 2 || true", True),
    ("[0, 1].exists(x, 1 / x == 1)", True),  # the error for 0 is absorbed by exists
    ("[0, 1].all(x, 1 / x == 1)", RUNTIME_ERROR),
    ("[0, 1].all(x, x > 0 && 1 / x == 1)", False),
    ("[0, 1].exists_one(x, 1 / x == 1)", RUNTIME_ERROR),
    ("true ? true : 1 / 0 == 1", True),
    # --- the missing environment parts
    (f'cel.bind(gpu, {A}, gpu.architecture == "Hopper" && gpu.index == 0)', True),
    ("cel.bind(x, 2, cel.bind(y, x * 3, y == 6))", True),
    ('cel.bind(a, "H100", a.startsWith("H"))', True),
    ("type(device.driver) == string", True),
    (f"type({A}.index) == int", True),
    (f"type({A}.driverVersion) == int", False),
    ("type(1u) == uint && type(1.5) == double && type([]) == list && type({}) == map", True),
    ("type(type(1)) == type && type(null) == null_type && type(true) == bool", True),
    ("type(device.driver) == int || 1 == 1", True),
    ("[1, 2, 3].map(x, x > 1, x * 10) == [20, 30]", True),
    ('{"a": 1, "b": 2}.map(k, k == "b", k) == ["b"]', True),
    ("dyn(true)", True),
    ('ip("10.0.3.17").family() == 4', True),
    (f"ip({A.replace('gpu.nvidia.com', 'nic.example.com')}.ip).isGlobalUnicast()", True),
    ('cidr("10.0.0.0/16").containsIP(ip("10.0.3.17"))', True),
    ('cidr("10.0.0.0/16").containsIP("10.1.0.1")', False),
    ('cidr("10.0.0.0/8").containsCIDR("10.1.0.0/16")', True),
    ('cidr("192.168.0.1/24").masked() == cidr("192.168.0.0/24")', True),
    ('cidr("192.168.0.0/24").prefixLength() == 24', True),
    ('cidr("::1/128").ip() == ip("::1")', True),
    ('isIP("10.0.0.1") && !isIP("10.0.0.256") && !isIP("::ffff:1.2.3.4")', True),
    ('isCIDR("10.0.0.0/8") && !isCIDR("10.0.0.0/33")', True),
    ('ip.isCanonical("2001:db8::abcd") && !ip.isCanonical("2001:DB8::ABCD")', True),
    ('ip("::1").isLoopback() && ip("fe80::1").isLinkLocalUnicast()', True),
    ('string(ip("::1")) == "::1" && string(cidr("10.0.0.0/8")) == "10.0.0.0/8"', True),
    ('ip("10.0.0.256").family() == 4', RUNTIME_ERROR),
    ('url("https://example.com:80/path").getHost() == "example.com:80"', True),
    ('url("https://[::1]:80/").getHostname() == "::1"', True),
    ('url("https://example.com/").getPort() == ""', True),
    ('url("/absolute-path").getScheme() == ""', True),
    (
        'url("https://example.com/path with spaces/").getEscapedPath() == "/path%20with%20spaces/"',
        True,
    ),
    (
        'url("https://example.com/p?k1=a&k2=b&k2=c").getQuery() == {"k1": ["a"], "k2": ["b", "c"]}',
        True,
    ),
    ('isURL("https://user:pass@example.com:80/path?query=val#fragment")', True),
    ('!isURL("../relative-path") && !isURL("https://a:b:c/")', True),
    ('url("../relative-path").getScheme() == ""', RUNTIME_ERROR),
    ('sign(quantity("-1")) == -1 && sign(quantity("0")) == 0', True),
    # --- quantities as apimachinery parses them
    ('isQuantity("Gi")', True),
    ('quantity("Gi") == quantity("0")', True),
    ('isQuantity(" 1Gi")', False),
    ('isQuantity("1Gi ")', False),
    ('isQuantity("1,3G") || isQuantity("200K") || isQuantity("Three")', False),
    ('isQuantity("1.3G") && isQuantity("10000k") && isQuantity("1e3") && isQuantity("1.G")', True),
    ('quantity("50k").add(20).sub(quantity("100k")).sub(-50000) == quantity("20")', True),
    ('quantity("200M").compareTo(quantity("0.2G")) == 0', True),
    ('quantity("9999999999999999999999999999999999999G").isInteger()', False),
    (f'{C}.memory.compareTo(quantity("40Gi")) > 0', True),
    (f'{C}.memory == quantity("80Gi")', True),
    # --- semver attributes and the semver library
    (f'{A}.driverVersion.isGreaterThan(semver("550.0.0"))', True),
    (f"{A}.driverVersion.major() == 550", True),
    (f'{A}.driverVersion == semver("550.54.15")', True),
    ('semver("v1.2", true) == semver("1.2.0")', True),
    # --- the two-variable comprehensions and optional values
    ("[10, 20].all(i, v, v == (i + 1) * 10)", True),
    ('{"a": 1}.exists(k, v, k == "a" && v == 1)', True),
    ("[1, 2, 3].transformList(i, v, v > 1, v * 2) == [4, 6]", True),
    ('{"a": 1}.transformMap(k, v, v + 1) == {"a": 2}', True),
    (f'{A}.?model.orValue("none") == "none"', True),
    (f'{A}[?"architecture"].value() == "Hopper"', True),
    ("optional.of(1).optMap(x, x + 1).value() == 2", True),
    ('[?optional.none(), ?optional.of("a")] == ["a"]', True),
    # --- strings, lists, sets, regexes
    (f'{A}.productName.matches("^NVIDIA H[0-9]+")', True),
    (f'{A}.productName.find("H[0-9]+") == "H100"', True),
    (f'{A}.productName.findAll("[0-9]+") == ["100", "80", "3"]', True),
    ('"%s/%d".format(["gpu", 0]) == "gpu/0"', True),
    ('sets.intersects(["Hopper", "Ampere"], ["Ampere"])', True),
    ("[3, 1, 2].min() == 1 && [3, 1, 2].max() == 3 && [1, 2].isSorted()", True),
    ('["b", "a"].indexOf("a") == 1', True),
    ('format.dns1123Label().validate("gpu-0") == optional.none()', True),
    ('format.dns1123Label().validate("GPU_0").hasValue()', True),
    ('format.named("uuid").hasValue()', True),
    # --- conversions
    ('int("42") == 42 && uint(42) == 42u && double("1.5") == 1.5', True),
    ('string(1.5) == "1.5" && string(100.0) == "100" && string(true) == "true"', True),
    ('int("4 2") == 42', RUNTIME_ERROR),
    ("int(1e19) == 1", RUNTIME_ERROR),
    ('bool("true") && !bool("0")', True),
    ('duration("1h30m") == duration("90m") && duration("1s") < duration("2s")', True),
    ('timestamp("2024-01-02T03:04:05Z").getFullYear() == 2024', True),
    ("9223372036854775807 + 1 == 0", RUNTIME_ERROR),
    ("-9223372036854775808 < 0", True),
    ("7 / -2 == -3 && 7 % -2 == 1 && -7 % 2 == -1", True),
    ("1u - 2u == 0u", RUNTIME_ERROR),
    ("size(device.driver) == 14 && device.driver.size() == 14", True),
    ('"\\u00e9".size() == 1 && b"\\xff".size() == 1', True),
    (f"has({A}.uuid) && !has({A}.model)", True),
    ('has(device.attributes["unknown.example.com"].model)', False),
    ('device.attributes["unknown.example.com"].size() == 0', True),
]


@pytest.fixture(scope="module")
def engine() -> SelectorEngine:
    return SelectorEngine()


@pytest.mark.parametrize(("expression", "verdict"), TABLE)
def test_kubernetes_verdict(engine, expression, verdict):
    if verdict == COMPILE_ERROR:
        with pytest.raises(CelCompileError, match="failed to compile"):
            engine.compile(expression)
        return
    out = engine.matches(engine.compile(expression), H100, NVIDIA)
    if verdict == RUNTIME_ERROR:
        assert not out.matched and out.error, out
    else:
        assert out.error is None, out.error
        assert out.matched is verdict
