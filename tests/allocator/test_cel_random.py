"""Random selectors over realistic GPU devices: the memo never changes a verdict, and every
failure is a CEL error with a message (no Python exception escapes the engine)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from allocator.cel import CelCompileError, SelectorEngine
from allocator.model import Device, DeviceCapacity, Version
from allocator.quantity import Quantity

G = 'device.attributes["gpu.nvidia.com"]'
C = 'device.capacity["gpu.nvidia.com"]'
MODELS = ["H100", "A100", "L40S", "B200"]


def gpu(i: int) -> Device:
    attributes = {
        "productName": f"NVIDIA {MODELS[i % 4]} 80GB HBM3",
        "model": MODELS[i % 4],
        "index": i % 8,
        "driverVersion": Version(f"5{50 + i % 3}.54.15"),
        "mig-capable": i % 2 == 0,
        "migProfiles": ("1g.10gb", "3g.40gb") if i % 3 else ("7g.80gb",),
        "nvlinkPeers": tuple(range(i % 4)),
        "resource.kubernetes.io/pcieRoot": f"pci0000:{i % 4:02x}",
    }
    if i % 5 == 0:
        del attributes["model"]  # some devices do not publish every attribute
    return Device(
        name=f"gpu-{i}",
        attributes=attributes,
        capacity={"memory": DeviceCapacity(Quantity.parse(["40Gi", "80Gi", "141Gi"][i % 3]))},
    )


DEVICES = [gpu(i) for i in range(24)]

INTS = st.sampled_from(
    [f"{G}.index", f"{G}.nvlinkPeers.size()", "1", "0", "-3", "9223372036854775807", f"{G}.model"]
)
STRS = st.sampled_from(
    [f"{G}.productName", f"{G}.model", f'{G}["resource.kubernetes.io/pcieRoot"]', '"H100"', '""']
)
BOOL_ATOMS = st.sampled_from(
    [
        "true",
        "false",
        f'{G}["mig-capable"]',
        f"has({G}.model)",
        f'"model" in {G}',
        f'{G}.migProfiles.includes("3g.40gb")',
        f"{G}.nvlinkPeers.includes(1)",
        f'{G}.driverVersion.isGreaterThan(semver("550.0.0"))',
        f'{C}.memory.compareTo(quantity("80Gi")) >= 0',
        f'{C}.memory.isLessThan(quantity("100Gi"))',
        f'{G}.migProfiles.exists(p, p.startsWith("3g"))',
        f"{G}.nvlinkPeers.all(p, 4 / p > 1)",
        f"{G}.index.exists(x, x > 0)",
        'device.driver == "gpu.nvidia.com"',
        f"cel.bind(g, {G}, g.index % 2 == 0)",
        f'{G}.?model.orValue("none") != "none"',
        f"type({G}.index) == int",
        f'{G}.productName.matches("H[0-9]+")',
        # read the device dynamically (the memo keys on the whole device)
        'device.attributes.exists(d, d.startsWith("gpu"))',
        f'{G}.exists(k, k == "model")',
        f'{G}[{G}.model == "H100" ? "index" : "model"] == 0',
    ]
)


@st.composite
def comparisons(draw) -> str:
    if draw(st.booleans()):
        op = draw(st.sampled_from(["==", "!=", "<", ">=", "in"]))
        left, right = draw(INTS), draw(INTS)
        if op == "in":
            return f"{left} in [{right}, 2]"
        arith = draw(st.sampled_from(["", " + 1", " * 2", " / 2", " % 3", " - 1"]))
        return f"{left}{arith} {op} {right}"
    op = draw(st.sampled_from(["==", "!=", "<", ".startsWith", ".contains", ".endsWith"]))
    left, right = draw(STRS), draw(STRS)
    if op.startswith("."):
        return f"{left}{op}({right})"
    return f"{left} {op} {right}"


BOOLS = st.recursive(
    st.one_of(BOOL_ATOMS, comparisons()),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["&&", "||"]), inner).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        ),
        inner.map(lambda x: f"!{x}"),
        st.tuples(inner, inner, inner).map(lambda t: f"({t[0]} ? {t[1]} : {t[2]})"),
    ),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(BOOLS)
def test_memo_never_changes_a_verdict_and_errors_are_cel_errors(expression):
    shared = SelectorEngine()
    try:
        selector = shared.compile(expression)
    except CelCompileError as e:
        assert "failed to compile" in str(e)
        return
    for device in DEVICES:
        memoised = shared.matches(selector, device, "gpu.nvidia.com")
        fresh_engine = SelectorEngine()
        fresh = fresh_engine.matches(fresh_engine.compile(expression), device, "gpu.nvidia.com")
        assert (memoised.matched, memoised.error) == (fresh.matched, fresh.error), device.name
        if memoised.error is not None:
            assert memoised.error and not memoised.error.startswith("evaluation error"), memoised
        else:
            assert memoised.matched in (True, False)
    # the memo did its job: devices that read the same values were evaluated once
    assert shared.evaluations <= len(DEVICES)
