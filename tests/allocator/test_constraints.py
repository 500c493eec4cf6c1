"""MatchAttribute: stateful add/remove, scoping, and the two exclusive evaluation paths."""

from __future__ import annotations

from allocator.bindings import AttributeBindings
from allocator.constraints import (
    BindingFallback,
    ConstraintParseContext,
    MatchAttributeConstraint,
    parse_constraint,
)
from allocator.errors import ValidationError
from allocator.featuregates import ALL_ON
from allocator.model import DeviceConstraint, DeviceID
from allocator.pipeline import core_pipeline
from allocator.pools import TEMPLATE, DeviceWithID
from tests.allocator.builders import GPU, NIC, PCIE_ROOT, gpu, instance_type, match_attribute, nic


def cand(device, driver=GPU, pool="p5-gpus", source=TEMPLATE):
    return DeviceWithID(DeviceID(driver, pool, device.name), device, source)


def test_first_device_pins_and_backtrack_unpins():
    c = MatchAttributeConstraint(PCIE_ROOT)
    a = cand(gpu("gpu-0", pcie_root="pci-0"))
    b = cand(gpu("gpu-1", pcie_root="pci-1"))
    a2 = cand(gpu("gpu-2", pcie_root="pci-0"))
    assert c.add("gpu", a) is None
    assert "pci-1" in c.add("gpu", b)
    assert c.add("gpu", a2) is None
    c.remove("gpu", a2)
    c.remove("gpu", a)
    assert not c.pinned
    assert c.add("gpu", b) is None  # unpinned: pci-1 may now pin


def test_scoped_to_request_names():
    c = MatchAttributeConstraint(PCIE_ROOT, frozenset({"gpu", "nic"}))
    assert c.add("gpu", cand(gpu("gpu-0", pcie_root="pci-0"))) is None
    # An unconstrained request's device is neither checked nor recorded.
    assert c.add("storage", cand(gpu("gpu-1", pcie_root="pci-9"))) is None
    c.remove("storage", cand(gpu("gpu-1", pcie_root="pci-9")))
    assert c.pinned and c.value == "pci-0"
    assert c.add("nic", cand(nic("nic-0", pcie_root="pci-3"), NIC, "p5-nics")) is not None
    # A FirstAvailable subrequest counts as its parent request.
    assert c.applies("gpu/h100") and not c.applies("storage/any")


def test_concrete_path_rejects_devices_without_the_attribute():
    c = MatchAttributeConstraint(PCIE_ROOT)
    c.set_binding_fallback(BindingFallback(AttributeBindings(), "gpu-pool", "p5.48xlarge"))
    assert c.add("gpu", cand(gpu("gpu-0", pcie_root="pci-0"))) is None
    assert "has no attribute" in c.add("nic", cand(nic("nic-0"), NIC, "p5-nics"))


def bound_fallback():
    g0, _g1, n0 = (
        DeviceID(GPU, "p5-gpus", "gpu-0"),
        DeviceID(GPU, "p5-gpus", "gpu-1"),
        DeviceID(NIC, "p5-nics", "nic-0"),
    )
    it = instance_type("p5.48xlarge", bindings=[(PCIE_ROOT, [g0, n0])])
    b = AttributeBindings.build({"gpu-pool": [it]})
    return BindingFallback(b, "gpu-pool", "p5.48xlarge")


def test_binding_path_compares_through_bindings_and_rejects_concrete_values():
    c = MatchAttributeConstraint(PCIE_ROOT)
    c.set_binding_fallback(bound_fallback())
    g0 = cand(gpu("gpu-0"))  # pcieRoot only known at run time
    assert c.add("gpu", g0) is None and c.mode == c.BINDING
    assert "not bound" in c.add("gpu", cand(gpu("gpu-1")))
    assert "concrete" in c.add("gpu", cand(gpu("gpu-5", pcie_root="pci-0")))
    assert c.add("nic", cand(nic("nic-0"), NIC, "p5-nics")) is None


def test_binding_path_needs_a_fallback_nil_during_validation():
    c = MatchAttributeConstraint(PCIE_ROOT)
    assert "has no attribute" in c.add("gpu", cand(gpu("gpu-0")))
    # The same device with the fallback configured for its instance type starts the path.
    c.set_binding_fallback(bound_fallback())
    assert c.add("gpu", cand(gpu("gpu-0"))) is None
    # Another nodePool: the binding does not exist there.
    c.reset()
    fb = bound_fallback()
    c.set_binding_fallback(BindingFallback(fb.bindings, "spot-pool", "p5.48xlarge"))
    assert c.add("gpu", cand(gpu("gpu-0"))) is not None


def test_parsing_table_and_unsupported_kinds():
    ctx = ConstraintParseContext("default/train", ["gpu", "nic"], None)
    core = core_pipeline(ALL_ON).constraint_parser
    parsed = parse_constraint(match_attribute(PCIE_ROOT, "gpu", "nic"), ctx, core)
    assert isinstance(parsed, MatchAttributeConstraint)
    assert parsed.request_names == {"gpu", "nic"}
    weird = DeviceConstraint(raw={"sameRack": True})
    try:
        parse_constraint(weird, ctx, core)
        raise AssertionError("expected ValidationError")
    except ValidationError as e:
        assert "unsupported constraint type" in str(e) and "sameRack" in str(e)


def test_a_pipeline_with_another_constraint_kind_parses_it():
    from dataclasses import replace

    pipeline = core_pipeline(ALL_ON)
    rack = replace(
        pipeline,
        constraint_parsers=(
            *pipeline.constraint_parsers,
            ("sameRack", lambda dc, ctx: MatchAttributeConstraint("rack")),
        ),
    )
    same_rack = DeviceConstraint(raw={"sameRack": True})
    got = parse_constraint(
        same_rack, ConstraintParseContext("d/c", [], None), rack.constraint_parser
    )
    assert got.attribute == "rack"
    try:  # the core pipeline itself is unchanged
        parse_constraint(
            same_rack,
            ConstraintParseContext("d/c", [], None),
            core_pipeline(ALL_ON).constraint_parser,
        )
        raise AssertionError("expected ValidationError")
    except ValidationError as e:
        assert "sameRack" in str(e)
