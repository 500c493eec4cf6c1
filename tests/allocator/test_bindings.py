"""Attribute Bindings and the attribute lookup."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from allocator.bindings import AttributeBindings, lookup_attribute
from allocator.model import Device, DeviceID
from tests.allocator.builders import GPU, NIC, PCIE_ROOT, instance_type

G0, G1, G2 = (DeviceID(GPU, "p5-gpus", f"gpu-{i}") for i in range(3))
N0, N1 = (DeviceID(NIC, "p5-nics", f"nic-{i}") for i in range(2))


def build(bindings, it="p5.48xlarge", node_pool="gpu-pool"):
    return AttributeBindings.build({node_pool: [instance_type(it, bindings=bindings)]})


def test_group_binds_every_pair_symmetrically():
    b = build([(PCIE_ROOT, [G0, N0, G1])])
    for x in (G0, N0, G1):
        for y in (G0, N0, G1):
            assert b.bound(PCIE_ROOT, "gpu-pool", "p5.48xlarge", x, y) == (x != y)


def test_transitive_closure_across_groups():
    # G0~N0 and N0~G1 declared separately: G0~G1 follows; G2 stays alone.
    b = build([(PCIE_ROOT, [G0, N0]), (PCIE_ROOT, [N0, G1]), (PCIE_ROOT, [G2, N1])])
    assert b.bound(PCIE_ROOT, "gpu-pool", "p5.48xlarge", G0, G1)
    assert b.bound(PCIE_ROOT, "gpu-pool", "p5.48xlarge", G1, G0)
    assert b.bound_set(PCIE_ROOT, "gpu-pool", "p5.48xlarge", G0) == {N0, G1}
    assert not b.bound(PCIE_ROOT, "gpu-pool", "p5.48xlarge", G0, G2)


def test_long_chain_is_closed_from_a_snapshot_of_direct_bindings():
    chain = [DeviceID(GPU, "p", f"gpu-{i}") for i in range(6)]
    b = build([(PCIE_ROOT, [chain[i], chain[i + 1]]) for i in range(5)])
    assert b.bound_set(PCIE_ROOT, "gpu-pool", "p5.48xlarge", chain[0]) == set(chain[1:])
    assert b.bound_set(PCIE_ROOT, "gpu-pool", "p5.48xlarge", chain[3]) == set(chain) - {chain[3]}


def test_groups_of_one_and_self_loops_are_ignored():
    b = build([(PCIE_ROOT, [G0]), (PCIE_ROOT, [G1, G1])])
    assert not b.has(PCIE_ROOT, "gpu-pool", "p5.48xlarge")
    b = build([(PCIE_ROOT, [G0, G0, N0])])
    assert b.bound_set(PCIE_ROOT, "gpu-pool", "p5.48xlarge", G0) == {N0}


def test_bindings_do_not_cross_attribute_node_pool_or_instance_type():
    p5 = instance_type("p5.48xlarge", bindings=[(PCIE_ROOT, [G0, N0])])
    p4 = instance_type("p4d.24xlarge", bindings=[("numaNode", [G0, N0])])
    b = AttributeBindings.build({"gpu-pool": [p5, p4], "spot-pool": [p4]})
    assert b.bound(PCIE_ROOT, "gpu-pool", "p5.48xlarge", G0, N0)
    assert not b.bound(PCIE_ROOT, "gpu-pool", "p4d.24xlarge", G0, N0)
    assert not b.bound(PCIE_ROOT, "spot-pool", "p5.48xlarge", G0, N0)
    assert not b.bound("numaNode", "gpu-pool", "p5.48xlarge", G0, N0)
    assert b.bound("numaNode", "spot-pool", "p4d.24xlarge", G0, N0)


@given(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=12))
def test_bound_is_an_equivalence_without_self(pairs):
    ds = [DeviceID(GPU, "p", f"gpu-{i}") for i in range(8)]
    b = build([(PCIE_ROOT, [ds[x], ds[y]]) for x, y in pairs])
    rel = lambda x, y: b.bound(PCIE_ROOT, "gpu-pool", "p5.48xlarge", x, y)  # noqa: E731
    for x in ds:
        assert not rel(x, x)
        for y in ds:
            assert rel(x, y) == rel(y, x)
            for z in ds:
                if rel(x, y) and rel(y, z) and x != z:
                    assert rel(x, z)


def test_lookup_fully_qualified_then_driver_qualified_fallback():
    d = Device("gpu-0", {"pcieRoot": "pci0000:00", "resource.kubernetes.io/pcieRoot": "pci0000:80"})
    # Fully qualified first.
    assert lookup_attribute(d, "resource.kubernetes.io/pcieRoot", GPU) == "pci0000:80"
    # Domain equals the driver: falls back to the ID part.
    assert lookup_attribute(d, "gpu.nvidia.com/pcieRoot", GPU) == "pci0000:00"
    # Another domain never falls back.
    assert lookup_attribute(d, "nic.example.com/pcieRoot", GPU) is None


def test_lookup_unqualified_name_finds_driver_qualified_attribute():
    d = Device("gpu-0", {"gpu.nvidia.com/model": "H100"})
    assert lookup_attribute(d, "model", GPU) == "H100"
    assert lookup_attribute(d, "model", NIC) is None
