"""Karpenter request_test.go: Request Validation (ValidateClaimRequest) of a claim against the
pools in reach (a rack of three H100s) and the instance types' template devices: classes,
merged selectors, constraints, All mode, FirstAvailable and the 32-device limit."""

from __future__ import annotations

import pytest

from allocator.cel import SelectorEngine
from allocator.cel.engine import CelCompileError
from allocator.errors import ValidationError
from allocator.featuregates import ALL_ON
from allocator.model import DeviceConstraint, DeviceRequest, DeviceSelector, ExactDeviceRequest
from allocator.pipeline import build_pipeline
from allocator.pools import SliceUniverse, template_devices
from allocator.requests import SelectorMatcher
from allocator.requirements import Requirements
from allocator.validation import ValidationContext, validate_claim_request
from tests.allocator.builders import instance_type
from tests.allocator.karpenter.kit import (
    GPU,
    all_req,
    body,
    capacity_device,
    claim,
    dev,
    device_class,
    devs,
    first_of,
    match,
    req,
    slice_,
    tmpl,
)

CLASSES = {
    "gpu": device_class("gpu", f'device.attributes["{GPU}"].model == "H100"'),
    "nic": device_class("nic", 'device.attributes["nic.example.com"].speed == "100G"'),
    "empty-class": device_class("empty-class"),
}
RACK = [slice_("rack-a", devs("gpu-0", "gpu-1", "gpu-2"))]


def validate(c, slices=RACK, templates: dict[str, int] | None = None, instance_types=()):
    """Request Validation as the Allocator runs it (the full pipeline, FirstAvailable on);
    ``templates``: instance type -> how many template devices it brings."""
    pools = SliceUniverse(list(slices), build_pipeline(ALL_ON).pool_validators).gather(
        None, [Requirements()]
    )
    its = [
        instance_type(name, [tmpl(f"{name}-gpus", [f"{name}-dev-{i}" for i in range(n)])])
        for name, n in (templates or {}).items()
    ] + list(instance_types)
    engine = SelectorEngine()
    return validate_claim_request(
        ValidationContext(
            claim=c,
            claim_index=0,
            pools=pools,
            template_devices_by_it=template_devices(
                {it.name: it.resource_slice_templates for it in its}
            ),
            instance_types=[it.name for it in its],
            engine=engine,
            device_classes=CLASSES,
            matcher=SelectorMatcher(engine),
            rules=build_pipeline(ALL_ON),
        )
    )


def refused(c, text: str, **kw) -> None:
    with pytest.raises(ValidationError, match=text):
        validate(c, **kw)


def empty(name: str, count: int = 1, **kw):
    return req(name, "empty-class", count, **kw)


# --- Describe("ValidateClaimRequest") ----------------------------------------------------------


def test_should_validate_a_simple_exact_count_request():
    """Karpenter: should validate a simple ExactCount request."""
    (r,) = validate(claim("test-claim", empty("gpu-req", 2))).requests
    assert (r.name, r.num_devices, r.allocation_mode) == ("gpu-req", 2, "ExactCount")
    assert r.exact.capacity is None


def test_should_populate_capacity_requests_when_capacity_is_set():
    """Karpenter: should populate CapacityRequests when Capacity is set."""
    (r,) = validate(
        claim("test-claim", empty("gpu-req", capacity={f"{GPU}/vram": "16Gi"}))
    ).requests
    assert str(r.exact.capacity.requests[f"{GPU}/vram"]) == "16Gi"


def test_should_validate_multiple_requests_in_a_single_claim():
    """Karpenter: should validate multiple requests in a single claim."""
    data = validate(claim("test-claim", req("gpu-req", "gpu"), req("nic-req", "nic", 2)))
    assert [(r.name, r.num_devices) for r in data.requests] == [("gpu-req", 1), ("nic-req", 2)]


def test_should_validate_an_empty_claim_with_no_requests():
    """Karpenter: should validate an empty claim with no requests."""
    assert validate(claim("test-claim")).requests == []


def test_should_fail_when_device_class_is_not_found():
    """Karpenter: should fail when DeviceClass is not found."""
    refused(claim("test-claim", req("gpu-req", "tpu.google.com")), "not found")


def test_should_fail_when_a_request_has_neither_exactly_nor_first_available():
    """Karpenter: should fail when a request has neither Exactly nor FirstAvailable."""
    refused(claim("test-claim", DeviceRequest(name="gpu-req")), "only Exactly")


def test_should_fail_when_a_request_has_an_empty_first_available_list():
    """Karpenter: should fail when a request has an empty FirstAvailable list."""
    refused(claim("test-claim", DeviceRequest(name="gpu-req", first_available=[])), "gpu-req")


def test_should_fail_when_an_all_mode_request_encounters_an_invalid_pool():
    """Karpenter: should fail when an All mode request encounters an invalid pool."""
    dup = [slice_("s1", devs("gpu-0"), count=2), slice_("s2", devs("gpu-0"), count=2)]
    refused(claim("test-claim", all_req("req", "empty-class")), "invalid", slices=dup)


def test_should_fail_when_an_all_mode_request_encounters_an_incomplete_pool():
    """Karpenter: should fail when an All mode request encounters an incomplete pool."""
    short = [slice_("s1", devs("gpu-0"), count=2)]
    refused(claim("test-claim", all_req("req", "empty-class")), "incomplete", slices=short)


def test_should_combine_selectors_from_class_and_request():
    """Karpenter: should combine selectors from class and request."""
    extra = 'device.attributes["gpu.nvidia.com"].memory == "80Gi"'
    (r,) = validate(claim("test-claim", req("gpu-req", "gpu", selector=extra))).requests
    assert [s.cel for s in r.selectors] == [CLASSES["gpu"].selectors[0].cel, extra]


def test_should_fail_when_a_request_has_a_non_cel_selector():
    """Karpenter: should fail when a request has a non-CEL selector."""
    bad = ExactDeviceRequest("empty-class", selectors=[DeviceSelector(cel=None, raw={})])
    refused(claim("test-claim", DeviceRequest(name="gpu-req", exactly=bad)), "unsupported selector")


def test_should_build_match_attribute_constraints_from_the_claim():
    """Karpenter: should build MatchAttribute constraints from the claim."""
    data = validate(claim("test-claim", empty("gpu-req"), constraints=[match(f"{GPU}/numa")]))
    (c,) = data.constraints
    assert c.attribute == f"{GPU}/numa" and c.request_names == frozenset()


def test_should_build_match_attribute_constraints_scoped_to_specific_requests():
    """Karpenter: should build MatchAttribute constraints scoped to specific requests."""
    c1 = claim(
        "test-claim", empty("req-a"), empty("req-b"), constraints=[match(f"{GPU}/numa", "req-a")]
    )
    (c,) = validate(c1).constraints
    assert c.request_names == frozenset({"req-a"})


def test_should_build_multiple_match_attribute_constraints():
    """Karpenter: should build multiple MatchAttribute constraints."""
    c1 = claim(
        "test-claim",
        empty("req-a"),
        constraints=[match(f"{GPU}/numa"), match("resource.kubernetes.io/pcieRoot")],
    )
    assert [c.attribute for c in validate(c1).constraints] == [
        f"{GPU}/numa",
        "resource.kubernetes.io/pcieRoot",
    ]


def test_should_fail_on_unsupported_constraint_types():
    """Karpenter: should fail on unsupported constraint types."""
    refused(
        claim("test-claim", empty("req"), constraints=[DeviceConstraint(raw={})]),
        "unsupported constraint",
    )


def test_should_succeed_when_total_devices_across_multiple_requests_equal_allocation_results_max_size():
    """Karpenter: should succeed when total devices across multiple requests equal
    AllocationResultsMaxSize."""
    assert len(validate(claim("test-claim", empty("a", 16), empty("b", 16))).requests) == 2


def test_should_fail_when_total_devices_across_multiple_requests_exceed_allocation_results_max_size():
    """Karpenter: should fail when total devices across multiple requests exceed
    AllocationResultsMaxSize."""
    refused(claim("test-claim", empty("a", 16), empty("b", 17)), "exceeding maximum")


def test_should_fail_when_a_cel_expression_in_a_request_does_not_compile():
    """Karpenter: should fail when a CEL expression in a request does not compile."""
    refused(
        claim("test-claim", empty("req", selector="this is not valid CEL")), "failed to compile"
    )


# --- Context("All mode") -----------------------------------------------------------------------


def test_should_validate_an_all_mode_request_with_valid_pools():
    """Karpenter: should validate an All mode request with valid pools."""
    (r,) = validate(claim("test-claim", all_req("req", "empty-class"))).requests
    assert r.allocation_mode == "All" and r.num_devices == 0
    assert [d.id.device for d in r.all_devices] == ["gpu-0", "gpu-1", "gpu-2"]


def test_should_populate_all_template_devices_by_it_for_all_mode_with_template_devices():
    """Karpenter: should populate AllTemplateDevicesByIT for All mode with template devices."""
    (r,) = validate(
        claim("test-claim", all_req("req", "empty-class")),
        slices=[],
        templates={"c5.large": 5, "c5.xlarge": 10},
    ).requests
    assert {it: len(ds) for it, ds in r.all_template_devices_by_it.items()} == {
        "c5.large": 5,
        "c5.xlarge": 10,
    }


def test_should_filter_all_mode_devices_by_selectors():
    """Karpenter: should filter All mode devices by selectors."""
    slices = [
        slice_(
            "s-gpu",
            [dev("h100-0", {f"{GPU}/model": "H100"}), dev("a100-0", {f"{GPU}/model": "A100"})],
            pool="pool-gpu",
        )
    ]
    (r,) = validate(claim("test-claim", all_req("req", "gpu")), slices=slices).requests
    assert [d.id.device for d in r.all_devices] == ["h100-0"]


def test_should_aggregate_devices_across_multiple_pools_in_all_mode():
    """Karpenter: should aggregate devices across multiple pools in All mode."""
    slices = [slice_("s1", devs("gpu-0")), slice_("s2", devs("gpu-1"), pool="pool-b")]
    (r,) = validate(claim("test-claim", all_req("req", "empty-class")), slices=slices).requests
    assert sorted(d.id.device for d in r.all_devices) == ["gpu-0", "gpu-1"]


def test_should_fail_when_any_pool_is_invalid_in_all_mode_even_if_others_are_valid():
    """Karpenter: should fail when any pool is invalid in All mode even if others are valid."""
    slices = [
        slice_("good", devs("gpu-0"), pool="pool-good"),
        slice_("bad", devs("gpu-1", "gpu-1"), pool="pool-bad"),
    ]
    refused(claim("test-claim", all_req("req", "empty-class")), "invalid", slices=slices)


def test_should_return_empty_all_devices_when_no_pool_devices_match_selectors_in_all_mode():
    """Karpenter: should return empty AllDevices when no pool devices match selectors in All
    mode."""
    (r,) = validate(claim("test-claim", all_req("req", "nic"))).requests
    assert not r.all_devices


def test_should_validate_all_mode_with_empty_pools():
    """Karpenter: should validate All mode with empty pools."""
    (r,) = validate(claim("test-claim", all_req("req", "empty-class")), slices=[]).requests
    assert not r.all_devices


def test_should_fail_when_all_mode_in_cluster_devices_exceed_allocation_results_max_size():
    """Karpenter: should fail when All mode in-cluster devices exceed AllocationResultsMaxSize."""
    big = [slice_("s-big", devs(*(f"dev-{i}" for i in range(33))), pool="pool-big")]
    refused(claim("test-claim", all_req("req", "empty-class")), "exceeding maximum", slices=big)


def test_should_fail_when_all_mode_in_cluster_devices_plus_exact_count_exceed_allocation_results_max_size():
    """Karpenter: should fail when All mode in-cluster devices plus ExactCount exceed
    AllocationResultsMaxSize."""
    c = claim("test-claim", all_req("all-req", "empty-class"), empty("exact-req", 30))
    refused(c, "exceeding maximum")


# --- Context("FirstAvailable") -----------------------------------------------------------------


def test_should_validate_a_first_available_request_with_class_and_sub_request_selector_merging():
    """Karpenter: should validate a FirstAvailable request with class and sub-request selector
    merging."""
    extra = 'device.attributes["gpu.nvidia.com"].memory == "80Gi"'
    (parent,) = validate(
        claim("test-claim", first_of("gpu-req", ("h100", body("gpu", selector=extra))))
    ).requests
    (sub,) = parent.alternatives
    assert sub.name == "gpu-req/h100"
    assert [s.cel for s in sub.selectors] == [CLASSES["gpu"].selectors[0].cel, extra]


def test_should_validate_multiple_sub_requests_preserving_priority_order():
    """Karpenter: should validate multiple sub-requests preserving priority order."""
    fa = first_of(
        "gpu-req",
        ("h100", body("gpu", 2)),
        ("a100", body("empty-class", 1)),
        ("any", body("empty-class", 3)),
    )
    (parent,) = validate(claim("test-claim", fa)).requests
    assert [(a.name, a.num_devices) for a in parent.alternatives] == [
        ("gpu-req/h100", 2),
        ("gpu-req/a100", 1),
        ("gpu-req/any", 3),
    ]


def test_should_fail_when_a_sub_request_references_a_nonexistent_device_class():
    """Karpenter: should fail when a sub-request references a nonexistent DeviceClass."""
    refused(claim("test-claim", first_of("gpu-req", ("tpu", body("tpu.google.com")))), "not found")


def test_should_fail_when_a_sub_request_has_an_invalid_cel_selector():
    """Karpenter: should fail when a sub-request has an invalid CEL selector."""
    fa = first_of("gpu-req", ("h100", body("gpu", selector="this is not valid CEL")))
    refused(claim("test-claim", fa), "failed to compile")


def test_should_use_the_min_device_count_across_sub_requests_for_the_upfront_limit_check():
    """Karpenter: should use the MIN device count across sub-requests for the upfront limit
    check."""
    fa = first_of("gpu-req", ("h100", body("empty-class", 4)), ("a100", body("empty-class", 2)))
    refused(claim("test-claim", fa, empty("other", 31)), "exceeding maximum")


def test_should_pass_upfront_when_only_the_smaller_sub_request_fits_within_the_limit():
    """Karpenter: should pass upfront when only the smaller sub-request fits within the limit."""
    fa = first_of("gpu-req", ("h100", body("empty-class", 4)), ("a100", body("empty-class", 2)))
    assert len(validate(claim("test-claim", fa, empty("other", 30))).requests) == 2


def test_should_include_all_mode_sub_request_device_counts_in_the_min_floor():
    """Karpenter: should include All-mode sub-request device counts in the MIN floor."""
    fa = first_of(
        "gpu-req",
        ("all-gpus", body("empty-class", all_mode=True)),
        ("one-gpu", body("empty-class", 1)),
    )
    assert len(validate(claim("test-claim", fa, empty("other", 31))).requests) == 2


def test_should_populate_all_devices_for_an_all_mode_sub_request():
    """Karpenter: should populate AllDevices for an All-mode sub-request."""
    (parent,) = validate(
        claim("test-claim", first_of("gpu-req", ("all", body("empty-class", all_mode=True))))
    ).requests
    assert [d.id.device for d in parent.alternatives[0].all_devices] == ["gpu-0", "gpu-1", "gpu-2"]


def test_should_fail_when_an_all_mode_sub_request_encounters_an_invalid_pool():
    """Karpenter: should fail when an All-mode sub-request encounters an invalid pool."""
    dup = [slice_("s1", devs("gpu-0", "gpu-0"))]
    fa = first_of("gpu-req", ("all", body("empty-class", all_mode=True)))
    refused(claim("test-claim", fa), "invalid", slices=dup)


def test_should_mix_exact_count_and_all_mode_sub_requests_in_the_same_first_available():
    """Karpenter: should mix ExactCount and All-mode sub-requests in the same FirstAvailable."""
    fa = first_of(
        "gpu-req", ("two", body("empty-class", 2)), ("all", body("empty-class", all_mode=True))
    )
    (parent,) = validate(claim("test-claim", fa)).requests
    assert [a.allocation_mode for a in parent.alternatives] == ["ExactCount", "All"]
    assert len(parent.alternatives[1].all_devices) == 3


def test_should_validate_a_claim_with_both_exactly_and_first_available_requests():
    """Karpenter: should validate a claim with both Exactly and FirstAvailable requests."""
    fa = first_of("gpu-req", ("h100", body("gpu")))
    data = validate(claim("test-claim", empty("exact-req", 2), fa))
    assert [r.name for r in data.requests] == ["exact-req", "gpu-req"]
    assert data.requests[0].alternatives == [] and len(data.requests[1].alternatives) == 1


def test_should_set_parent_request_data_with_name_and_sub_requests_only_no_class_selectors():
    """Karpenter: should set parent RequestData with name and SubRequests only (no
    class/selectors)."""
    (parent,) = validate(claim("test-claim", first_of("gpu-req", ("h100", body("gpu"))))).requests
    assert parent.name == "gpu-req"
    assert parent.device_class is None and parent.selectors == []
    assert len(parent.alternatives) == 1


def _rack(n: int):
    return [slice_(f"s-{n}", devs(*(f"dev-{i}" for i in range(n))), pool=f"pool-{n}")]


def test_should_prune_instance_types_whose_template_devices_would_exceed_allocation_results_max_size():
    """Karpenter: should prune instance types whose template devices would exceed
    AllocationResultsMaxSize."""
    data = validate(
        claim("test-claim", all_req("req", "empty-class")),
        slices=_rack(20),
        templates={"c5.large": 10, "c5.xlarge": 20},
    )
    (r,) = data.requests
    assert len(r.all_devices) == 20
    assert list(r.all_template_devices_by_it) == ["c5.large"]
    assert "c5.xlarge" in data.pruned_instance_types


def test_should_account_for_exact_count_devices_in_base_total_when_pruning_template_devices():
    """Karpenter: should account for ExactCount devices in base total when pruning template
    devices."""
    data = validate(
        claim("test-claim", all_req("all-req", "empty-class"), empty("exact-req", 10)),
        slices=_rack(15),
        templates={"c5.large": 5, "c5.xlarge": 10},
    )
    r = data.requests[0]
    assert len(r.all_devices) == 15
    assert list(r.all_template_devices_by_it) == ["c5.large"]


def test_should_fail_when_all_instance_types_are_pruned():
    """Karpenter: should fail when all instance types are pruned."""
    refused(
        claim("test-claim", all_req("req", "empty-class")),
        "all instance types pruned",
        slices=_rack(30),
        templates={"c5.large": 5, "c5.xlarge": 5},
    )


def test_should_not_fail_when_template_devices_exist_but_no_all_mode_requests_reference_them():
    """Karpenter: should not fail when template devices exist but no All mode requests reference
    them."""
    (r,) = validate(claim("test-claim", empty("req")), templates={"c5.large": 5}).requests
    assert r.allocation_mode == "ExactCount"


def test_should_prune_its_based_on_the_min_sub_request_template_count():
    """Karpenter: should prune ITs based on the MIN sub-request template count."""
    fa = first_of(
        "gpu-req",
        ("all-gpus-a", body("empty-class", all_mode=True)),
        ("all-gpus-b", body("empty-class", all_mode=True)),
    )
    data = validate(
        claim("test-claim", fa), slices=_rack(20), templates={"c5.large": 10, "c5.xlarge": 20}
    )
    first = data.requests[0].alternatives[0]
    assert list(first.all_template_devices_by_it) == ["c5.large"]
    assert "c5.xlarge" in data.pruned_instance_types


def test_should_fail_when_all_its_are_pruned_due_to_sub_request_template_overflow():
    """Karpenter: should fail when all ITs are pruned due to sub-request template overflow."""
    fa = first_of("gpu-req", ("all-gpus", body("empty-class", all_mode=True)))
    refused(
        claim("test-claim", fa),
        "all instance types pruned",
        slices=_rack(30),
        templates={"c5.large": 5, "c5.xlarge": 5},
    )


def test_should_not_prune_any_it_when_a_template_free_sub_request_sets_the_min_to_zero():
    """Karpenter: should not prune any IT when a template-free sub-request sets the MIN to
    zero."""
    fa = first_of(
        "gpu-req",
        ("all-gpus", body("empty-class", all_mode=True)),
        ("one-gpu", body("empty-class", 1)),
    )
    data = validate(
        claim("test-claim", fa), slices=_rack(25), templates={"c5.large": 5, "c5.xlarge": 10}
    )
    assert sorted(data.requests[0].alternatives[0].all_template_devices_by_it) == [
        "c5.large",
        "c5.xlarge",
    ]
    assert not data.pruned_instance_types


def test_should_populate_all_template_devices_by_it_for_an_all_mode_sub_request():
    """Karpenter: should populate AllTemplateDevicesByIT for an All-mode sub-request."""
    fa = first_of("gpu-req", ("all", body("empty-class", all_mode=True)))
    data = validate(claim("test-claim", fa), slices=[], templates={"c5.large": 2})
    assert [
        len(v) for v in data.requests[0].alternatives[0].all_template_devices_by_it.values()
    ] == [2]


def test_should_populate_capacity_requests_on_sub_requests():
    """Karpenter: should populate CapacityRequests on sub-requests."""
    fa = first_of("gpu-req", ("shared", body("empty-class", capacity={f"{GPU}/vram": "16Gi"})))
    (sub,) = validate(claim("test-claim", fa)).requests[0].alternatives
    assert str(sub.exact.capacity.requests[f"{GPU}/vram"]) == "16Gi"


def test_should_fail_when_a_sub_request_has_a_non_cel_selector():
    """Karpenter: should fail when a sub-request has a non-CEL selector."""
    bad = ExactDeviceRequest("empty-class", selectors=[DeviceSelector(cel=None, raw={})])
    refused(claim("test-claim", first_of("gpu-req", ("h100", bad))), "unsupported selector")


# --- Describe("DeviceMatchesSelectors") --------------------------------------------------------


def matches(device, *expressions: str) -> bool:
    """All selectors match the device (AND semantics), as the DFS asks for each candidate."""
    engine = SelectorEngine()
    return all(engine.matches(engine.compile(e), device, GPU).matched for e in expressions)


H100 = f'device.attributes["{GPU}"].model == "H100"'


def test_should_match_a_device_with_matching_attributes():
    """Karpenter: should match a device with matching attributes."""
    assert matches(dev("gpu-0", {f"{GPU}/model": "H100"}), H100)


def test_should_not_match_a_device_with_non_matching_attributes():
    """Karpenter: should not match a device with non-matching attributes."""
    assert not matches(dev("gpu-0", {f"{GPU}/model": "A100"}), H100)


def test_should_match_when_all_selectors_pass_and_semantics():
    """Karpenter: should match when all selectors pass (AND semantics)."""
    d = capacity_device("gpu-0", attrs={f"{GPU}/model": "H100", f"{GPU}/memory": 80}, vram="80Gi")
    assert matches(
        d,
        H100,
        f'device.attributes["{GPU}"].memory > 40',
        f'device.capacity["{GPU}"].vram.isGreaterThan(quantity("40Gi"))',
        "device.allowMultipleAllocations == true",
    )


def test_should_not_match_when_any_selector_fails_and_semantics():
    """Karpenter: should not match when any selector fails (AND semantics)."""
    d = dev("gpu-0", {f"{GPU}/model": "H100", f"{GPU}/memory": 20})
    assert not matches(d, H100, f'device.attributes["{GPU}"].memory > 40')


def test_should_match_with_empty_selectors():
    """Karpenter: should match with empty selectors."""
    assert matches(dev("gpu-0"))


def test_should_return_error_when_cel_expression_fails_to_compile_in_device_matches_selectors():
    """Karpenter: should return error when CEL expression fails to compile in
    DeviceMatchesSelectors."""
    with pytest.raises(CelCompileError, match="failed to compile"):
        SelectorEngine().compile("this is not valid CEL")


def test_should_not_match_when_capacity_selector_fails():
    """Karpenter: should not match when capacity selector fails."""
    d = capacity_device("gpu-0", multi=False, memory="20Gi")
    assert not matches(d, f'device.capacity["{GPU}"].memory.isGreaterThan(quantity("40Gi"))')


def test_should_not_match_when_allow_multiple_allocations_is_false():
    """Karpenter: should not match when AllowMultipleAllocations is false."""
    assert not matches(dev("exclusive-gpu"), "device.allowMultipleAllocations == true")


def _h100_its(large: list[str], xlarge: list[str]):
    def devices(names):
        return [dev(n, {f"{GPU}/model": "H100" if n.startswith("h100") else "A100"}) for n in names]

    return [
        instance_type("c5.large", [tmpl("c5-large-gpus", devices(large))]),
        instance_type("c5.xlarge", [tmpl("c5-xlarge-gpus", devices(xlarge))]),
    ]


H100_RACK = [slice_("s-h100", [dev("h100-rack", {f"{GPU}/model": "H100"})], pool="pool-h100")]


def test_should_exclude_instance_types_with_no_matching_template_devices_from_all_template_devices_by_it():
    """Karpenter: should exclude instance types with no matching template devices from
    AllTemplateDevicesByIT."""
    data = validate(
        claim("test-claim", all_req("req", "gpu")),
        slices=[],
        instance_types=_h100_its(["h100-0"], ["a100-0"]),
    )
    assert list(data.requests[0].all_template_devices_by_it) == ["c5.large"]
    assert "c5.xlarge" in data.pruned_instance_types


def test_should_keep_instance_types_with_no_matching_template_devices_when_in_cluster_devices_exist():
    """Karpenter: should keep instance types with no matching template devices when in-cluster
    devices exist."""
    data = validate(
        claim("test-claim", all_req("req", "gpu")),
        slices=H100_RACK,
        instance_types=_h100_its(["h100-0"], ["a100-0"]),
    )
    by_it = data.requests[0].all_template_devices_by_it
    assert len(by_it["c5.large"]) == 1
    assert by_it.get("c5.xlarge", []) == []
    assert "c5.xlarge" not in data.pruned_instance_types


def test_should_keep_all_instance_types_with_empty_device_lists_when_in_cluster_devices_match_but_no_template_devices_match():
    """Karpenter: should keep all instance types with empty device lists when in-cluster devices
    match but no template devices match."""
    data = validate(
        claim("test-claim", all_req("req", "gpu")),
        slices=H100_RACK,
        instance_types=_h100_its(["a100-0"], ["a100-1"]),
    )
    r = data.requests[0]
    assert [d.id.device for d in r.all_devices] == ["h100-rack"]
    assert all(not (r.all_template_devices_by_it or {}).get(it) for it in ("c5.large", "c5.xlarge"))
    assert not data.pruned_instance_types
