"""Karpenter constraint_test.go: MatchAttributeConstraint (concrete values, request and
subrequest scoping, backtracking with remove, the attribute-binding fallback, reset), the
attribute lookup, and attribute value equality.

The attribute is the zone a GPU's NVLink domain reports; ``p5.48xlarge`` template GPUs do not
publish it, the instance type declares which of them share one (AttributeBindings).
"""

from __future__ import annotations

from allocator.bindings import AttributeBindings, lookup_attribute
from allocator.constraints import BindingFallback, MatchAttributeConstraint, same_attribute_value
from allocator.model import Device, DeviceID, Version
from allocator.pools import TEMPLATE, DeviceWithID
from tests.allocator.builders import instance_type

DRIVER = "gpu.nvidia.com"
ZONE = "topology.kubernetes.io/zone"
IT = "p5.48xlarge"
DEV_A, DEV_B, DEV_C = (DeviceID(DRIVER, "p5-gpus", f"gpu-{c}") for c in "abc")


def with_zone(device_id: DeviceID, zone: str) -> DeviceWithID:
    return DeviceWithID(device_id, Device(device_id.device, {ZONE: zone}), TEMPLATE)


def without_zone(device_id: DeviceID) -> DeviceWithID:
    return DeviceWithID(device_id, Device(device_id.device), TEMPLATE)


def constraint(*requests: str) -> MatchAttributeConstraint:
    return MatchAttributeConstraint(ZONE, frozenset(requests))


def ok(c, request, cand) -> bool:
    return c.add(request, cand) is None


# --- Describe("direct comparison (concrete attribute values)") ---------------------------------


def test_should_accept_the_first_device_and_pin_its_value():
    """Karpenter: should accept the first device and pin its value."""
    c = constraint()
    assert ok(c, "req-a", with_zone(DEV_A, "us-west-2a"))
    assert c.value == "us-west-2a"


def test_should_accept_a_second_device_with_the_same_attribute_value():
    """Karpenter: should accept a second device with the same attribute value."""
    c = constraint()
    assert ok(c, "req-a", with_zone(DEV_A, "us-west-2a"))
    assert ok(c, "req-b", with_zone(DEV_B, "us-west-2a"))


def test_should_reject_a_device_with_a_different_attribute_value():
    """Karpenter: should reject a device with a different attribute value."""
    c = constraint()
    assert ok(c, "req-a", with_zone(DEV_A, "us-west-2a"))
    assert not ok(c, "req-b", with_zone(DEV_B, "us-east-1a"))


def test_should_reject_a_device_missing_the_attribute():
    """Karpenter: should reject a device missing the attribute."""
    assert not ok(constraint(), "req-a", without_zone(DEV_A))


def test_should_only_apply_to_named_requests_when_request_names_is_set():
    """Karpenter: should only apply to named requests when requestNames is set."""
    c = constraint("req-a")
    assert ok(c, "req-b", with_zone(DEV_B, "us-east-1a"))
    assert ok(c, "req-a", with_zone(DEV_A, "us-west-2a"))


def test_should_apply_to_all_requests_when_request_names_is_empty():
    """Karpenter: should apply to all requests when requestNames is empty."""
    c = constraint()
    assert ok(c, "req-a", with_zone(DEV_A, "us-west-2a"))
    assert not ok(c, "req-b", with_zone(DEV_B, "us-east-1a"))


def test_should_apply_to_sub_requests_when_request_names_contains_the_parent():
    """Karpenter: should apply to sub-requests when requestNames contains the parent."""
    c = constraint("gpu")
    assert ok(c, "gpu/a100", with_zone(DEV_A, "us-west-2a"))
    assert not ok(c, "gpu/a100", with_zone(DEV_B, "us-east-1a"))


def test_should_apply_to_sub_requests_when_request_names_contains_the_qualified_name():
    """Karpenter: should apply to sub-requests when requestNames contains the qualified name."""
    c = constraint("gpu/a100")
    assert ok(c, "gpu/a100", with_zone(DEV_A, "us-west-2a"))
    assert not ok(c, "gpu/a100", with_zone(DEV_B, "us-east-1a"))


def test_should_skip_sub_requests_when_request_names_contains_a_different_qualified_name():
    """Karpenter: should skip sub-requests when requestNames contains a different qualified
    name."""
    c = constraint("gpu/h100")
    assert ok(c, "gpu/a100", with_zone(DEV_A, "us-west-2a"))
    assert ok(c, "gpu/a100", with_zone(DEV_B, "us-east-1a"))
    assert c.devices == []


def test_should_allow_interleaved_matching_and_non_matching_sub_request_adds():
    """Karpenter: should allow interleaved matching and non-matching sub-request Adds."""
    c = constraint("gpu/a100")
    assert ok(c, "gpu/h100", with_zone(DEV_A, "us-west-2a")) and c.devices == []
    assert ok(c, "gpu/a100", with_zone(DEV_A, "us-west-2a")) and len(c.devices) == 1
    assert ok(c, "gpu/h100", with_zone(DEV_B, "us-east-1a")) and len(c.devices) == 1
    assert not ok(c, "gpu/a100", with_zone(DEV_B, "us-east-1a"))


def test_should_enforce_constraint_across_different_sub_requests_under_parent_match():
    """Karpenter: should enforce constraint across different sub-requests under parent match."""
    c = constraint("gpu")
    assert ok(c, "gpu/a100", with_zone(DEV_A, "us-west-2a"))
    assert ok(c, "gpu/h100", with_zone(DEV_B, "us-west-2a"))


def test_should_reject_across_different_sub_requests_when_values_conflict_under_parent_match():
    """Karpenter: should reject across different sub-requests when values conflict under parent
    match."""
    c = constraint("gpu")
    assert ok(c, "gpu/a100", with_zone(DEV_A, "us-west-2a"))
    assert not ok(c, "gpu/h100", with_zone(DEV_B, "us-east-1a"))


# --- Describe("backtracking via Remove()") -----------------------------------------------------


def test_should_allow_a_different_value_after_removing_all_devices():
    """Karpenter: should allow a different value after removing all devices."""
    c = constraint()
    a = with_zone(DEV_A, "us-west-2a")
    assert ok(c, "req-a", a)
    c.remove("req-a", a)
    assert ok(c, "req-a", with_zone(DEV_A, "us-east-1a"))


def test_should_maintain_the_pin_after_removing_only_one_of_two_devices():
    """Karpenter: should maintain the pin after removing only one of two devices."""
    c = constraint()
    b = with_zone(DEV_B, "us-west-2a")
    assert ok(c, "req-a", with_zone(DEV_A, "us-west-2a"))
    assert ok(c, "req-b", b)
    c.remove("req-b", b)
    assert not ok(c, "req-c", with_zone(DEV_C, "us-east-1a"))
    assert ok(c, "req-c", with_zone(DEV_C, "us-west-2a"))


def test_should_be_a_no_op_for_non_matching_request_names():
    """Karpenter: should be a no-op for non-matching request names."""
    c = constraint("req-a")
    assert ok(c, "req-a", with_zone(DEV_A, "us-west-2a"))
    c.remove("req-b", with_zone(DEV_B, "us-west-2a"))
    assert not ok(c, "req-a", with_zone(DEV_B, "us-east-1a"))
    assert ok(c, "req-a", with_zone(DEV_B, "us-west-2a"))


def test_should_be_a_no_op_for_non_matching_sub_request_names():
    """Karpenter: should be a no-op for non-matching sub-request names."""
    c = constraint("gpu/h100")
    a = with_zone(DEV_A, "us-west-2a")
    assert ok(c, "gpu/a100", a)
    assert c.devices == [] and c.value is None
    c.remove("gpu/a100", a)
    assert c.devices == []
    assert ok(c, "gpu/h100", a)
    assert len(c.devices) == 1 and c.value == "us-west-2a"


def test_should_handle_remove_correctly_after_interleaved_matching_non_matching_sub_request_adds():
    """Karpenter: should handle Remove correctly after interleaved matching/non-matching
    sub-request Adds."""
    c = constraint("gpu/a100")
    a = with_zone(DEV_A, "us-west-2a")
    assert ok(c, "gpu/a100", a) and len(c.devices) == 1
    c.remove("gpu/h100", a)
    assert len(c.devices) == 1 and c.value is not None
    c.remove("gpu/a100", a)
    assert c.devices == [] and c.value is None


# --- Describe("attribute binding fallback") ----------------------------------------------------


def bindings(*groups: tuple[DeviceID, ...]) -> AttributeBindings:
    it = instance_type(IT, bindings=[(ZONE, list(g)) for g in groups])
    return AttributeBindings.build({"gpu-pool": [it]})


def bound(*requests: str, groups=((DEV_A, DEV_B),)) -> MatchAttributeConstraint:
    c = constraint(*requests)
    c.set_binding_fallback(BindingFallback(bindings(*groups), "gpu-pool", IT))
    return c


def test_should_accept_two_bound_devices_that_both_lack_the_attribute():
    """Karpenter: should accept two bound devices that both lack the attribute."""
    c = bound()
    assert ok(c, "req-a", without_zone(DEV_A))
    assert ok(c, "req-b", without_zone(DEV_B))


def test_should_reject_the_first_device_if_it_has_no_binding_entries():
    """Karpenter: should reject the first device if it has no binding entries."""
    assert not ok(bound(), "req-c", without_zone(DEV_C))


def test_should_reject_unbound_devices_that_lack_the_attribute():
    """Karpenter: should reject unbound devices that lack the attribute."""
    c = bound()
    assert ok(c, "req-a", without_zone(DEV_A))
    assert not ok(c, "req-c", without_zone(DEV_C))


def test_should_not_use_bindings_when_concrete_values_are_present():
    """Karpenter: should not use bindings when concrete values are present."""
    c = bound()
    assert ok(c, "req-a", with_zone(DEV_A, "us-west-2a"))
    assert not ok(c, "req-b", with_zone(DEV_B, "us-east-1a"))


def test_should_reject_concrete_values_after_binding_was_established():
    """Karpenter: should reject concrete values after binding was established."""
    c = bound()
    assert ok(c, "req-a", without_zone(DEV_A))
    assert not ok(c, "req-b", with_zone(DEV_B, "us-west-2a"))


def test_should_reject_binding_fallback_after_concrete_value_was_established():
    """Karpenter: should reject binding fallback after concrete value was established."""
    c = bound()
    assert ok(c, "req-a", with_zone(DEV_A, "us-west-2a"))
    assert not ok(c, "req-b", without_zone(DEV_B))


def test_should_reset_evaluation_path_on_full_backtrack():
    """Karpenter: should reset evaluation path on full backtrack."""
    c = bound()
    a = without_zone(DEV_A)
    assert ok(c, "req-a", a)
    c.remove("req-a", a)
    assert ok(c, "req-a", with_zone(DEV_A, "us-west-2a"))


def test_should_accept_a_third_bound_device_via_transitivity():
    """Karpenter: should accept a third bound device via transitivity."""
    c = bound(groups=((DEV_A, DEV_B), (DEV_B, DEV_C)))
    assert ok(c, "req-a", without_zone(DEV_A))
    assert ok(c, "req-b", without_zone(DEV_B))
    assert ok(c, "req-c", without_zone(DEV_C))


def test_should_allow_re_establishing_via_binding_after_full_backtrack_from_binding():
    """Karpenter: should allow re-establishing via binding after full backtrack from binding."""
    c = bound()
    a = without_zone(DEV_A)
    assert ok(c, "req-a", a)
    c.remove("req-a", a)
    assert ok(c, "req-a", a)
    assert ok(c, "req-b", without_zone(DEV_B))


def test_should_clear_used_binding_flag_on_reset_allowing_switch_to_concrete_path():
    """Karpenter: should clear UsedBinding flag on Reset allowing switch to concrete path."""
    c = bound()
    assert ok(c, "req-a", without_zone(DEV_A))
    assert c.mode == MatchAttributeConstraint.BINDING
    c.reset()
    assert ok(c, "req-a", with_zone(DEV_A, "us-west-2a"))


def test_should_use_binding_fallback_when_reached_via_parent_match_sub_request():
    """Karpenter: should use binding fallback when reached via parent-match sub-request."""
    c = bound("gpu")
    assert ok(c, "gpu/a100", without_zone(DEV_A))
    assert c.mode == MatchAttributeConstraint.BINDING
    assert ok(c, "gpu/a100", without_zone(DEV_B))
    assert len(c.devices) == 2


def test_should_skip_binding_fallback_for_non_matching_sub_request():
    """Karpenter: should skip binding fallback for non-matching sub-request."""
    c = bound("gpu/h100")
    assert ok(c, "gpu/a100", without_zone(DEV_A))
    assert c.mode is None and c.devices == []


# --- Describe("Reset()") -----------------------------------------------------------------------


def test_should_clear_pinned_attribute_value_and_allow_re_pinning_to_a_different_value():
    """Karpenter: should clear pinned attribute value and allow re-pinning to a different
    value."""
    c = constraint()
    assert ok(c, "req-a", with_zone(DEV_A, "us-west-2a"))
    c.reset()
    assert ok(c, "req-a", with_zone(DEV_A, "us-east-1a"))


def test_should_clear_all_mutable_state():
    """Karpenter: should clear all mutable state."""
    c = constraint()
    assert ok(c, "req-a", with_zone(DEV_A, "us-west-2a"))
    assert ok(c, "req-b", with_zone(DEV_B, "us-west-2a"))
    c.reset()
    assert c.devices == [] and c.value is None and c.mode is None


# --- Describe("LookupAttribute") ---------------------------------------------------------------

NVIDIA = "nvidia.com"


def test_should_find_a_fully_qualified_attribute():
    """Karpenter: should find a fully qualified attribute."""
    d = Device("gpu-0", {"nvidia.com/model": "H100"})
    assert lookup_attribute(d, "nvidia.com/model", NVIDIA) == "H100"


def test_should_fall_back_to_driver_qualified_lookup():
    """Karpenter: should fall back to driver-qualified lookup."""
    d = Device("gpu-0", {"model": "H100"})
    assert lookup_attribute(d, "nvidia.com/model", NVIDIA) == "H100"


def test_should_return_nil_when_attribute_is_not_found():
    """Karpenter: should return nil when attribute is not found."""
    assert lookup_attribute(Device("gpu-0"), "nvidia.com/model", NVIDIA) is None


def test_should_return_nil_when_attribute_name_has_no_domain_separator():
    """Karpenter: should return nil when attribute name has no domain separator."""
    assert lookup_attribute(Device("gpu-0", {"model": "H100"}), "memory", NVIDIA) is None


def test_should_not_fall_back_when_domain_prefix_does_not_match_driver():
    """Karpenter: should not fall back when domain prefix does not match driver."""
    assert lookup_attribute(Device("gpu-0", {"model": "H100"}), "other.com/model", NVIDIA) is None


# --- Describe("AttributeValuesEqual") ----------------------------------------------------------


def test_should_compare_string_values():
    """Karpenter: should compare string values."""
    assert same_attribute_value("a", "a")
    assert not same_attribute_value("a", "b")


def test_should_compare_int_values():
    """Karpenter: should compare int values."""
    assert same_attribute_value(42, 42)
    assert not same_attribute_value(42, 43)


def test_should_compare_bool_values():
    """Karpenter: should compare bool values."""
    assert same_attribute_value(True, True)
    assert not same_attribute_value(True, False)


def test_should_compare_version_values():
    """Karpenter: should compare version values."""
    assert same_attribute_value(Version("1.2.3"), Version("1.2.3"))
    assert not same_attribute_value(Version("1.2.3"), Version("1.2.4"))


def test_should_return_false_for_mismatched_types():
    """Karpenter: should return false for mismatched types."""
    assert not same_attribute_value("a", 1)
    # Python's True == 1 must not leak into matchAttribute: a bool and an int differ.
    assert not same_attribute_value(True, 1)
    assert not same_attribute_value(Version("1.2.3"), "1.2.3")
    c = MatchAttributeConstraint("gpu.nvidia.com/cliqueId")
    one = DeviceWithID(DEV_A, Device("gpu-a", {"cliqueId": 1}), TEMPLATE)
    true = DeviceWithID(DEV_B, Device("gpu-b", {"cliqueId": True}), TEMPLATE)
    assert ok(c, "gpu", one)
    assert not ok(c, "gpu", true)


def test_should_return_false_for_nil_values():
    """Karpenter: should return false for nil values."""
    assert not same_attribute_value(None, None)
