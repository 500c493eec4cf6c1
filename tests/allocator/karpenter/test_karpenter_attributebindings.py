"""Karpenter attributebindings_test.go: building the binding graph (groups, symmetric pairs,
transitive closure, scoping by attribute, NodePool and instance type), Bound and HasBindings.

A ``p5.48xlarge`` declares which of its GPUs and EFA NICs will share a NVLink/PCIe zone once the
node runs; ``p5e.48xlarge`` declares its own groups.
"""

from __future__ import annotations

from allocator.bindings import AttributeBindings
from allocator.model import DeviceID
from tests.allocator.builders import instance_type

ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
XL, SM = "p5.48xlarge", "p5e.48xlarge"
DEV_A, DEV_B, DEV_C, DEV_D = (DeviceID("gpu.nvidia.com", "p5-gpus", f"gpu-{i}") for i in range(4))


def build(by_pool: dict[str, list[tuple[str, list[tuple[str, list[DeviceID]]]]]]):
    """{node pool: [(instance type, [(attribute, devices)])]} -> AttributeBindings."""
    return AttributeBindings.build(
        {
            pool: [instance_type(name, bindings=decls) for name, decls in its]
            for pool, its in by_pool.items()
        }
    )


def xl(*decls: tuple[str, list[DeviceID]]):
    return build({"gpu-pool": [(XL, list(decls))]})


def bound(ab, a, b, attr=ZONE, pool="gpu-pool", it=XL) -> bool:
    return ab.bound(attr, pool, it, a, b)


def has_bindings(ab, d, attr=ZONE, pool="gpu-pool", it=XL) -> bool:
    return bool(ab.bound_set(attr, pool, it, d))


def is_empty(ab) -> bool:
    return not any(
        ab.has(attr, pool, it)
        for attr in (ZONE, REGION)
        for pool in ("gpu-pool",)
        for it in (XL, SM)
    )


# --- Describe("BuildAttributeBindings") --------------------------------------------------------


def test_returns_empty_bindings_when_given_no_instance_types():
    """Karpenter: returns empty bindings when given no instance types."""
    assert is_empty(AttributeBindings.build({}))


def test_returns_empty_bindings_when_instance_types_have_no_attribute_bindings():
    """Karpenter: returns empty bindings when instance types have no AttributeBindings."""
    assert is_empty(build({"gpu-pool": [(XL, [])]}))


def test_skips_a_binding_with_fewer_than_2_devices():
    """Karpenter: skips a binding with fewer than 2 devices."""
    assert is_empty(xl((ZONE, [DEV_A])))


def test_skips_a_binding_with_zero_devices():
    """Karpenter: skips a binding with zero devices."""
    assert is_empty(xl((ZONE, [])))


def test_creates_a_symmetric_pair_from_a_2_device_binding():
    """Karpenter: creates a symmetric pair from a 2-device binding."""
    ab = xl((ZONE, [DEV_A, DEV_B]))
    assert bound(ab, DEV_A, DEV_B) and bound(ab, DEV_B, DEV_A)


def test_creates_all_pairs_bindings_from_a_3_device_binding():
    """Karpenter: creates all-pairs bindings from a 3-device binding."""
    ab = xl((ZONE, [DEV_A, DEV_B, DEV_C]))
    for a, b in [
        (DEV_A, DEV_B),
        (DEV_A, DEV_C),
        (DEV_B, DEV_A),
        (DEV_B, DEV_C),
        (DEV_C, DEV_A),
        (DEV_C, DEV_B),
    ]:
        assert bound(ab, a, b)


def test_accumulates_device_maps_when_multiple_bindings_share_the_same_attribute_node_pool_and_instance_type():
    """Karpenter: accumulates device maps when multiple bindings share the same attribute, node
    pool, and instance type."""
    ab = xl((ZONE, [DEV_A, DEV_B]), (ZONE, [DEV_C, DEV_D]))
    assert bound(ab, DEV_A, DEV_B) and bound(ab, DEV_C, DEV_D)
    assert not bound(ab, DEV_A, DEV_C)


def test_binding_is_transitive_across_separate_attribute_binding_declarations():
    """Karpenter: binding is transitive across separate AttributeBinding declarations."""
    ab = xl((ZONE, [DEV_A, DEV_B]), (ZONE, [DEV_B, DEV_C]))
    for a, b in [
        (DEV_A, DEV_B),
        (DEV_B, DEV_A),
        (DEV_B, DEV_C),
        (DEV_C, DEV_B),
        (DEV_A, DEV_C),
        (DEV_C, DEV_A),
    ]:
        assert bound(ab, a, b)


def test_transitive_closure_extends_beyond_a_single_intermediate_device():
    """Karpenter: transitive closure extends beyond a single intermediate device."""
    ab = xl((ZONE, [DEV_A, DEV_B]), (ZONE, [DEV_B, DEV_C]), (ZONE, [DEV_C, DEV_D]))
    devices = [DEV_A, DEV_B, DEV_C, DEV_D]
    for a in devices:
        for b in devices:
            if a != b:
                assert bound(ab, a, b)


def test_a_duplicate_device_entry_in_a_binding_does_not_prevent_real_bindings():
    """Karpenter: a duplicate device entry in a binding does not prevent real bindings."""
    # Karpenter also reports gpu-0 bound to itself here; the design removes self-loops (the
    # report lists this as a divergence), so only the real binding is checked.
    ab = xl((ZONE, [DEV_A, DEV_A, DEV_B]))
    assert bound(ab, DEV_A, DEV_B) and bound(ab, DEV_B, DEV_A)


def test_transitive_closure_handles_cycles_correctly():
    """Karpenter: transitive closure handles cycles correctly."""
    ab = xl((ZONE, [DEV_A, DEV_B]), (ZONE, [DEV_B, DEV_C]), (ZONE, [DEV_C, DEV_A]))
    assert bound(ab, DEV_A, DEV_B) and bound(ab, DEV_A, DEV_C) and bound(ab, DEV_B, DEV_C)


def test_same_device_pair_can_be_bound_independently_under_multiple_attributes():
    """Karpenter: same device pair can be bound independently under multiple attributes."""
    ab = xl((ZONE, [DEV_A, DEV_B]), (REGION, [DEV_A, DEV_B]))
    assert bound(ab, DEV_A, DEV_B) and bound(ab, DEV_A, DEV_B, attr=REGION)


def test_transitivity_does_not_cross_attribute_boundaries():
    """Karpenter: transitivity does not cross attribute boundaries."""
    ab = xl((ZONE, [DEV_A, DEV_B]), (REGION, [DEV_B, DEV_C]))
    assert not bound(ab, DEV_A, DEV_C)
    assert not bound(ab, DEV_A, DEV_C, attr=REGION)


def test_tracks_different_attributes_independently():
    """Karpenter: tracks different attributes independently."""
    ab = xl((ZONE, [DEV_A, DEV_B]), (REGION, [DEV_B, DEV_C]))
    assert bound(ab, DEV_A, DEV_B)
    assert bound(ab, DEV_B, DEV_C, attr=REGION)
    assert not bound(ab, DEV_A, DEV_B, attr=REGION)


def test_tracks_the_same_attribute_across_different_node_pools_independently():
    """Karpenter: tracks the same attribute across different node pools independently."""
    ab = build(
        {
            "gpu-pool": [(XL, [(ZONE, [DEV_A, DEV_B])])],
            "training-pool": [(XL, [(ZONE, [DEV_B, DEV_C])])],
        }
    )
    assert bound(ab, DEV_A, DEV_B)
    assert bound(ab, DEV_B, DEV_C, pool="training-pool")
    assert not bound(ab, DEV_A, DEV_B, pool="training-pool")


def test_tracks_the_same_attribute_across_multiple_instance_types_in_a_pool_independently():
    """Karpenter: tracks the same attribute across multiple instance types in a pool
    independently."""
    ab = build({"gpu-pool": [(SM, [(ZONE, [DEV_A, DEV_B])]), (XL, [(ZONE, [DEV_B, DEV_C])])]})
    assert bound(ab, DEV_A, DEV_B, it=SM)
    assert bound(ab, DEV_B, DEV_C, it=XL)
    assert not bound(ab, DEV_A, DEV_B, it=XL)


# --- Describe("Bound") -------------------------------------------------------------------------

PAIR = xl((ZONE, [DEV_A, DEV_B]))


def test_returns_true_for_a_fully_known_tuple():
    """Karpenter: returns true for a fully known tuple."""
    assert bound(PAIR, DEV_A, DEV_B)


def test_is_symmetric_bound_a_b_and_bound_b_a_are_both_true():
    """Karpenter: is symmetric: Bound(A, B) and Bound(B, A) are both true."""
    assert bound(PAIR, DEV_A, DEV_B) and bound(PAIR, DEV_B, DEV_A)


def test_returns_false_for_an_unknown_attribute():
    """Karpenter: returns false for an unknown attribute."""
    assert not bound(PAIR, DEV_A, DEV_B, attr=REGION)


def test_returns_false_for_an_unknown_node_pool():
    """Karpenter: returns false for an unknown node pool."""
    assert not bound(PAIR, DEV_A, DEV_B, pool="training-pool")


def test_returns_false_for_an_unknown_instance_type():
    """Karpenter: returns false for an unknown instance type."""
    assert not bound(PAIR, DEV_A, DEV_B, it=SM)


def test_returns_false_for_an_unknown_device_a():
    """Karpenter: returns false for an unknown deviceA."""
    assert not bound(PAIR, DEV_C, DEV_B)


def test_returns_false_when_device_b_is_not_in_device_as_binding_set():
    """Karpenter: returns false when deviceB is not in deviceA's binding set."""
    assert not bound(PAIR, DEV_A, DEV_C)


def test_returns_false_when_device_a_and_device_b_are_the_same_device_without_bindings():
    """Karpenter: returns false when deviceA and deviceB are the same device without
    bindings."""
    assert not bound(PAIR, DEV_C, DEV_C)


def test_returns_false_on_a_nil_attribute_bindings():
    """Karpenter: returns false on a nil AttributeBindings."""
    assert not bound(AttributeBindings(), DEV_A, DEV_B)


# --- Describe("HasBindings") -------------------------------------------------------------------


def test_returns_true_for_a_device_that_participates_in_a_binding():
    """Karpenter: returns true for a device that participates in a binding."""
    assert has_bindings(PAIR, DEV_A) and has_bindings(PAIR, DEV_B)


def test_returns_false_for_a_device_not_in_any_binding_group():
    """Karpenter: returns false for a device not in any binding group."""
    assert not has_bindings(PAIR, DEV_C)


def test_has_bindings_returns_false_for_an_unknown_attribute():
    """Karpenter: returns false for an unknown attribute."""
    assert not has_bindings(PAIR, DEV_A, attr=REGION)


def test_has_bindings_returns_false_for_an_unknown_node_pool():
    """Karpenter: returns false for an unknown node pool."""
    assert not has_bindings(PAIR, DEV_A, pool="training-pool")


def test_has_bindings_returns_false_for_an_unknown_instance_type():
    """Karpenter: returns false for an unknown instance type."""
    assert not has_bindings(PAIR, DEV_A, it=SM)


def test_has_bindings_returns_false_on_a_nil_attribute_bindings():
    """Karpenter: returns false on a nil AttributeBindings."""
    assert not has_bindings(AttributeBindings(), DEV_A)
