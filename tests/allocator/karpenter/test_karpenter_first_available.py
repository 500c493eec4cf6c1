"""Karpenter allocator_test.go: FirstAvailable DFS (prioritized alternatives: fallback order,
per-instance-type choice, backtracking across claims, constraints scoped to parents and
subrequests, counters and consumable capacity restored on backtrack, the 32-device limit) and
the tracking of the selected subrequest's name on every device."""

from __future__ import annotations

import pytest

from allocator.model import AllocationResult, ConsumerReference, DeviceRequestAllocationResult
from tests.allocator.builders import ZONE
from tests.allocator.karpenter.kit import (
    GPU,
    IT1,
    NIC,
    allocator,
    body,
    capacity_device,
    claim,
    counter_pool,
    dev,
    devs,
    fails,
    first_of,
    match,
    names,
    node_claim,
    q,
    req,
    shared,
    slice_,
    tmpl,
    zone_sel,
)

GPU_ZONE = f"{GPU}/zone"
BIG, SMALL, TINY = "p5.48xlarge", "g6.12xlarge", "g6.xlarge"
VRAM = f"{GPU}/vram"


def model(m: str) -> str:
    return f'device.attributes["{GPU}"].model == "{m}"'


def gpus(*names_: str):
    return [slice_("rack-a-gpus", devs(*names_))]


def nics(*names_: str):
    return [slice_("rack-a-nics", devs(*names_), pool="nic-pool", driver=NIC)]


def ladder(name: str, *counts: int, cls: str = "gpu", prefix: str = "prefer"):
    """A FirstAvailable request: prefer-N first, then fallback-M ..."""
    subs = [(f"{prefix if i == 0 else 'fallback'}-{n}", body(cls, n)) for i, n in enumerate(counts)]
    return first_of(name, *subs)


def by_request(result, index: int = 0, instance_type: str | None = None) -> dict[str, str]:
    outcome = result.claims[index]
    devices = outcome.devices_by_instance_type[instance_type] if instance_type else outcome.devices
    return {d.device: d.request for d in devices}


def committed_requests(a, key: str = "default/c1", it: str = IT1) -> dict[str, str]:
    return {d.device: d.request for d in a.claim_metadata[key].devices_by_instance_type[it]}


def commit(a, nc, claims):
    r = a.allocate(nc, claims)
    r.allocation.commit()
    return r


# --- Describe("FirstAvailable DFS") ------------------------------------------------------------


def test_should_allocate_using_the_first_satisfiable_sub_request():
    """Karpenter: should allocate using the first satisfiable sub-request."""
    r = allocator(gpus("gpu-0", "gpu-1")).allocate(
        node_claim("nc", IT1), [claim("c1", ladder("gpu-req", 2))]
    )
    assert r.instance_types == [IT1]
    assert by_request(r) == {"gpu-0": "gpu-req/prefer-2", "gpu-1": "gpu-req/prefer-2"}


def test_should_fall_back_to_lower_priority_sub_request_when_higher_fails():
    """Karpenter: should fall back to lower-priority sub-request when higher fails."""
    r = allocator(gpus("gpu-0", "gpu-1")).allocate(
        node_claim("nc", IT1), [claim("c1", ladder("gpu-req", 4, 2))]
    )
    assert r.instance_types == [IT1]
    assert set(by_request(r).values()) == {"gpu-req/fallback-2"}


def test_should_fail_when_no_sub_request_is_satisfiable():
    """Karpenter: should fail when no sub-request is satisfiable."""
    fails(allocator(gpus("gpu-0")), node_claim("nc", IT1), [claim("c1", ladder("gpu-req", 4, 2))])


def test_should_select_different_sub_requests_for_different_instance_types():
    """Karpenter: should select different sub-requests for different instance types."""
    nc = node_claim(
        "nc",
        templates={
            BIG: [tmpl("p5-gpus", ["gpu-0", "gpu-1", "gpu-2", "gpu-3"])],
            SMALL: [tmpl("g6-gpus", ["gpu-0", "gpu-1"])],
        },
    )
    r = allocator().allocate(nc, [claim("c1", ladder("gpu-req", 4, 2))])
    assert r.instance_types == [BIG, SMALL]


def test_should_handle_first_available_with_selectors_distinguishing_sub_requests():
    """Karpenter: should handle FirstAvailable with selectors distinguishing sub-requests."""
    a = allocator(
        [slice_("rack-a", [dev("a100-0", {"model": "A100"}), dev("h100-0", {"model": "H100"})])]
    )
    c = claim(
        "c1",
        first_of(
            "gpu-req",
            ("prefer-a100", body("gpu", 2, selector=model("A100"))),
            ("fallback-h100", body("gpu", 1, selector=model("H100"))),
        ),
    )
    r = a.allocate(node_claim("nc", IT1), [c])
    assert r.instance_types == [IT1]
    assert by_request(r) == {"h100-0": "gpu-req/fallback-h100"}


def test_should_handle_first_available_interacting_with_multiple_claims():
    """Karpenter: should handle FirstAvailable interacting with multiple claims."""
    a = allocator(gpus("gpu-0", "gpu-1", "gpu-2", "gpu-3"))
    r = a.allocate(
        node_claim("nc", IT1),
        [claim("c1", ladder("gpu-req", 3)), claim("c2", ladder("gpu-req", 2, 1))],
    )
    assert len(names(r, 0)) == 3
    assert by_request(r, 1) == {"gpu-3": "gpu-req/fallback-1"}


def test_should_backtrack_across_claims_when_sub_request_consumes_too_much_capacity():
    """Karpenter: should backtrack across claims when sub-request consumes too much capacity."""
    a = allocator(gpus("gpu-0", "gpu-1", "gpu-2"))
    r = a.allocate(
        node_claim("nc", IT1), [claim("c1", ladder("gpu-req", 3, 1)), claim("c2", req("gpu"))]
    )
    assert by_request(r, 0) == {"gpu-0": "gpu-req/fallback-1"}
    assert names(r, 1) == ["gpu-1"]


def test_should_still_exercise_the_fallback_loop_for_a_second_first_available_request_in_a_claim():
    """Karpenter: should still exercise the fallback loop for a SECOND FirstAvailable request in
    a claim."""
    a = allocator(gpus("gpu-0", "gpu-1") + nics("nic-0"))
    c = claim("c1", ladder("gpu-req", 2, 1), ladder("nic-req", 2, 1, cls="nic"))
    commit(a, node_claim("nc", IT1), [c])
    assert committed_requests(a) == {
        "gpu-0": "gpu-req/prefer-2",
        "gpu-1": "gpu-req/prefer-2",
        "nic-0": "nic-req/fallback-1",
    }


def _gpu_counters_and_nics(budget: str = "40Gi"):
    draw = {"gpu-0-memory": {"memory": "40Gi"}}
    return counter_pool(
        [shared("gpu-0-memory", memory=budget)], [dev("gpu-0", **draw), dev("gpu-1", **draw)]
    )


def test_should_keep_the_it_alive_when_a_later_all_mode_sub_request_is_counter_feasible():
    """Karpenter: should keep the IT alive when a later All-mode sub-request is
    counter-feasible."""
    a = allocator(_gpu_counters_and_nics() + nics("nic-0", "nic-1"))
    c = claim(
        "c1",
        first_of(
            "dev-req",
            ("all-gpu", body("gpu", all_mode=True)),
            ("all-nic", body("nic", all_mode=True)),
        ),
    )
    commit(a, node_claim("nc", IT1), [c])
    assert committed_requests(a) == {"nic-0": "dev-req/all-nic", "nic-1": "dev-req/all-nic"}


def test_should_restore_consumed_capacity_after_a_multi_slot_sub_request_fails_mid_fill():
    """Karpenter: should restore consumed capacity after a multi-slot sub-request fails
    mid-fill."""
    a = allocator([slice_("rack-a", [capacity_device("gpu-0", vram="40Gi")])])
    thirty = {VRAM: "30Gi"}
    c = claim(
        "c1",
        first_of(
            "gpu-req",
            ("prefer-2", body("gpu", 2, capacity=thirty)),
            ("fallback-1", body("gpu", 1, capacity=thirty)),
        ),
    )
    commit(a, node_claim("nc", IT1), [c])
    (device,) = a.claim_metadata["default/c1"].devices_by_instance_type[IT1]
    assert (device.device, device.request) == ("gpu-0", "gpu-req/fallback-1")
    assert device.extra["consumedCapacity"] == {"vram": "30Gi"}


def test_should_backtrack_a_sub_request_across_claims_when_capacity_not_device_count_is_short():
    """Karpenter: should backtrack a sub-request across claims when capacity (not device count)
    is short."""
    a = allocator([slice_("rack-a", [capacity_device("gpu-0", vram="40Gi")])])
    c1 = claim(
        "c1",
        first_of(
            "gpu-req",
            ("prefer-big", body("gpu", 1, capacity={VRAM: "30Gi"})),
            ("fallback-small", body("gpu", 1, capacity={VRAM: "10Gi"})),
        ),
    )
    c2 = claim("c2", req("gpu", capacity={VRAM: "30Gi"}))
    commit(a, node_claim("nc", IT1), [c1, c2])
    (device,) = a.claim_metadata["default/c1"].devices_by_instance_type[IT1]
    assert device.request == "gpu-req/fallback-small"
    assert device.extra["consumedCapacity"] == {"vram": "10Gi"}


def test_should_handle_mixed_exactly_and_first_available_requests_in_the_same_claim():
    """Karpenter: should handle mixed Exactly and FirstAvailable requests in the same claim."""
    a = allocator(gpus("gpu-0", "gpu-1", "gpu-2"))
    commit(a, node_claim("nc", IT1), [claim("c1", req("exact-req"), ladder("fa-req", 2, 1))])
    assert sorted(committed_requests(a).values()) == [
        "exact-req",
        "fa-req/prefer-2",
        "fa-req/prefer-2",
    ]


def test_should_handle_first_available_with_different_device_classes_per_sub_request():
    """Karpenter: should handle FirstAvailable with different DeviceClasses per sub-request."""
    c = claim(
        "c1", first_of("device-req", ("prefer-gpu", body("gpu")), ("fallback-nic", body("nic")))
    )
    r = allocator(nics("nic-0", "nic-1")).allocate(node_claim("nc", IT1), [c])
    assert r.instance_types == [IT1]
    assert by_request(r) == {"nic-0": "device-req/fallback-nic"}


ZONED = [
    slice_(
        "rack-a",
        [
            dev("gpu-0", {GPU_ZONE: "zone-a"}),
            dev("gpu-1", {GPU_ZONE: "zone-a"}),
            dev("gpu-2", {GPU_ZONE: "zone-b"}),
        ],
    )
]


def test_should_handle_constraints_scoped_to_parent_name_applying_to_all_sub_requests():
    """Karpenter: should handle constraints scoped to parent name applying to all
    sub-requests."""
    a = allocator(ZONED)
    c = claim("c1", ladder("gpu-req", 3, 2), constraints=[match(GPU_ZONE, "gpu-req")])
    commit(a, node_claim("nc", IT1), [c])
    assert committed_requests(a) == {"gpu-0": "gpu-req/fallback-2", "gpu-1": "gpu-req/fallback-2"}


def test_should_reset_a_constraint_pin_from_a_failed_sub_request_before_the_winning_sub_request_needs_a_different_value():
    """Karpenter: should reset a constraint pin from a failed sub-request before the winning
    sub-request needs a different value."""
    a = allocator(
        [
            slice_(
                "rack-a",
                [
                    dev("gpu-0", {"model": "A", GPU_ZONE: "zone-a"}),
                    dev("gpu-1", {"model": "B", GPU_ZONE: "zone-b"}),
                    dev("gpu-2", {"model": "B", GPU_ZONE: "zone-b"}),
                ],
            )
        ]
    )
    c = claim(
        "c1",
        first_of(
            "gpu-req",
            ("prefer-2", body("gpu", 2, selector=model("A"))),
            ("fallback-2", body("gpu", 2, selector=model("B"))),
        ),
        constraints=[match(GPU_ZONE, "gpu-req")],
    )
    commit(a, node_claim("nc", IT1), [c])
    assert committed_requests(a) == {"gpu-1": "gpu-req/fallback-2", "gpu-2": "gpu-req/fallback-2"}


def test_should_restore_tightened_topology_requirements_when_a_sub_request_backtracks():
    """Karpenter: should restore tightened topology requirements when a sub-request
    backtracks."""
    a = allocator(
        [
            slice_(
                "s-a",
                [dev("gpu-a0", {"model": "A"})],
                pool="pool-zone-a",
                node_selector=zone_sel("us-west-2a"),
            ),
            slice_(
                "s-b",
                [dev("gpu-b0", {"model": "B"})],
                pool="pool-zone-b",
                node_selector=zone_sel("us-west-2b"),
            ),
        ]
    )
    c = claim(
        "c1",
        first_of(
            "gpu-req",
            ("prefer-2", body("gpu", 2, selector=model("A"))),
            ("fallback-1", body("gpu", 1, selector=model("B"))),
        ),
    )
    r = commit(a, node_claim("nc", IT1, requirements={ZONE: ["us-west-2a", "us-west-2b"]}), [c])
    assert committed_requests(a) == {"gpu-b0": "gpu-req/fallback-1"}
    assert r.requirements.get(ZONE).values() == {"us-west-2b"}


def test_should_handle_constraints_scoped_to_specific_sub_request():
    """Karpenter: should handle constraints scoped to specific sub-request."""
    a = allocator(
        [slice_("rack-a", [dev("gpu-0", {GPU_ZONE: "zone-a"}), dev("gpu-1", {GPU_ZONE: "zone-b"})])]
    )
    c = claim("c1", ladder("gpu-req", 2, 1), constraints=[match(GPU_ZONE, "gpu-req/prefer-2")])
    commit(a, node_claim("nc", IT1), [c])
    assert committed_requests(a) == {"gpu-0": "gpu-req/fallback-1"}


def test_should_carry_a_first_available_sub_requests_pinned_value_into_a_different_constrained_request():
    """Karpenter: should carry a FirstAvailable sub-request's pinned value into a different
    constrained request."""
    a = allocator(
        [
            slice_(
                "rack-a",
                [
                    dev("gpu-0", {"model": "A", GPU_ZONE: "zone-a"}),
                    dev("gpu-1", {"model": "B", GPU_ZONE: "zone-b"}),
                    dev("gpu-2", {"model": "B", GPU_ZONE: "zone-a"}),
                ],
            )
        ]
    )
    c = claim(
        "c1",
        first_of(
            "gpu-req",
            ("prefer-a", body("gpu", 1, selector=model("A"))),
            ("fallback-b", body("gpu", 1, selector=model("B"))),
        ),
        req("pin-req"),
        constraints=[match(GPU_ZONE, "gpu-req", "pin-req")],
    )
    commit(a, node_claim("nc", IT1), [c])
    assert committed_requests(a) == {"gpu-0": "gpu-req/prefer-a", "gpu-2": "pin-req"}


def test_should_handle_first_available_with_template_devices():
    """Karpenter: should handle FirstAvailable with template devices."""
    nc = node_claim("nc", templates={IT1: [tmpl("p5-gpus", ["gpu-0", "gpu-1", "gpu-2"])]})
    r = allocator().allocate(nc, [claim("c1", ladder("gpu-req", 4, 2))])
    assert r.instance_types == [IT1]
    assert set(by_request(r).values()) == {"gpu-req/fallback-2"}


def test_should_handle_multiple_first_available_requests_in_the_same_claim():
    """Karpenter: should handle multiple FirstAvailable requests in the same claim."""
    a = allocator(gpus("gpu-0", "gpu-1", "gpu-2", "gpu-3") + nics("nic-0", "nic-1"))
    c = claim("c1", ladder("gpu-req", 4, 2), ladder("nic-req", 2, 1, cls="nic"))
    r = a.allocate(node_claim("nc", IT1), [c])
    assert sorted(set(by_request(r).values())) == ["gpu-req/prefer-4", "nic-req/prefer-2"]


def test_should_correctly_commit_first_available_allocation_metadata():
    """Karpenter: should correctly commit FirstAvailable allocation metadata."""
    a = allocator(gpus("gpu-0", "gpu-1"))
    commit(a, node_claim("nc", IT1), [claim("c1", ladder("gpu-req", 4, 2))])
    devices = a.claim_metadata["default/c1"].devices_by_instance_type[IT1]
    assert len(devices) == 2
    for d in devices:
        parent, sub = d.request.split("/")
        assert (parent, sub) == ("gpu-req", "fallback-2")


def test_should_not_leak_state_between_sub_request_attempts():
    """Karpenter: should not leak state between sub-request attempts."""
    a = allocator(gpus("gpu-0", "gpu-1", "gpu-2", "gpu-3"))
    r = a.allocate(node_claim("nc", IT1), [claim("c1", ladder("gpu-req", 5, 4))])
    assert sorted(by_request(r)) == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]


def test_should_handle_first_available_with_all_mode_sub_request():
    """Karpenter: should handle FirstAvailable with All-mode sub-request."""
    a = allocator(gpus("gpu-0", "gpu-1", "gpu-2"))
    c = claim("c1", first_of("gpu-req", ("all-gpus", body("gpu", all_mode=True))))
    commit(a, node_claim("nc", IT1), [c])
    assert len(a.claim_metadata["default/c1"].devices_by_instance_type[IT1]) == 3


def test_should_fall_back_from_all_mode_to_exact_count_when_all_mode_matches_zero_devices():
    """Karpenter: should fall back from All-mode to ExactCount when All-mode matches zero
    devices."""
    a = allocator(nics("nic-0"))
    c = claim(
        "c1",
        first_of(
            "device-req", ("all-gpus", body("gpu", all_mode=True)), ("fallback-nic", body("nic"))
        ),
    )
    commit(a, node_claim("nc", IT1), [c])
    assert committed_requests(a) == {"nic-0": "device-req/fallback-nic"}


def test_should_prune_its_where_no_sub_request_is_satisfiable():
    """Karpenter: should prune ITs where no sub-request is satisfiable."""
    nc = node_claim(
        "nc",
        templates={
            BIG: [tmpl("p5-gpus", ["gpu-0", "gpu-1", "gpu-2", "gpu-3"])],
            TINY: [tmpl("g6-gpus", ["gpu-0"])],
        },
    )
    r = allocator().allocate(nc, [claim("c1", ladder("gpu-req", 4, 2))])
    assert r.instance_types == [BIG]


def test_should_prune_when_all_all_mode_sub_requests_are_counter_infeasible():
    """Karpenter: should prune when all All-mode sub-requests are counter-infeasible."""
    c = claim(
        "c1",
        first_of(
            "gpu-req", ("all-a", body("gpu", all_mode=True)), ("all-b", body("gpu", all_mode=True))
        ),
    )
    fails(allocator(_gpu_counters_and_nics()), node_claim("nc", IT1), [c])


def test_should_not_prune_a_first_available_request_with_a_feasible_exact_count_sub_request():
    """Karpenter: should not prune a FirstAvailable request with a feasible ExactCount
    sub-request."""
    a = allocator(_gpu_counters_and_nics())
    c = claim(
        "c1",
        first_of("gpu-req", ("all-gpus", body("gpu", all_mode=True)), ("fallback-1", body("gpu"))),
    )
    commit(a, node_claim("nc", IT1), [c])
    assert list(committed_requests(a).values()) == ["gpu-req/fallback-1"]


def test_should_restore_shared_counter_budget_when_a_sub_request_backtracks():
    """Karpenter: should restore shared counter budget when a sub-request backtracks."""
    a = allocator(_gpu_counters_and_nics())
    commit(a, node_claim("nc", IT1), [claim("c1", ladder("gpu-req", 2, 1))])
    assert list(committed_requests(a).values()) == ["gpu-req/fallback-1"]


def test_should_restore_consumed_capacity_when_an_all_mode_sub_request_over_allocates_and_backtracks():
    """Karpenter: should restore consumed capacity when an All-mode sub-request over-allocates
    and backtracks."""
    running = claim("running-gpu-1", req("gpu"))
    running.allocation = AllocationResult(
        devices=[
            DeviceRequestAllocationResult(
                "gpu",
                GPU,
                "pool-a",
                "gpu-1",
                share_id="share-1",
                consumed_capacity={"vram": q("70Gi")},
            )
        ]
    )
    running.reserved_for = [ConsumerReference("pods", "inference-0", uid="uid-inference-0")]
    a = allocator(
        [
            slice_(
                "rack-a",
                [capacity_device("gpu-0", vram="50Gi"), capacity_device("gpu-1", vram="80Gi")],
            )
        ],
        resource_claims={running.key: running},
    )
    thirty = {VRAM: "30Gi"}
    c = claim(
        "c1",
        first_of(
            "gpu-req",
            ("all-gpus", body("gpu", all_mode=True, capacity=thirty)),
            ("fallback-small", body("gpu", 1, capacity=thirty)),
        ),
    )
    commit(a, node_claim("nc", IT1), [c])
    (device,) = a.claim_metadata["default/c1"].devices_by_instance_type[IT1]
    assert (device.device, device.request) == ("gpu-0", "gpu-req/fallback-small")
    assert device.extra["consumedCapacity"] == {"vram": "30Gi"}


def _many(n: int):
    return gpus(*(f"gpu-{i}" for i in range(n)))


def test_should_allow_first_available_requests_that_fit_only_by_selecting_smaller_sub_requests():
    """Karpenter: should allow FirstAvailable requests that fit only by selecting smaller
    sub-requests."""
    a = allocator(_many(32))
    c = claim(
        "c1",
        first_of("gpu-a", ("prefer-20", body("gpu", 20)), ("fallback-10", body("gpu", 10))),
        first_of("gpu-b", ("prefer-20", body("gpu", 20)), ("fallback-10", body("gpu", 10))),
    )
    commit(a, node_claim("nc", IT1), [c])
    requests = list(committed_requests(a).values())
    assert len(requests) == 30
    assert requests.count("gpu-a/prefer-20") == 20 and requests.count("gpu-b/fallback-10") == 10


def test_should_fall_back_to_a_smaller_sub_request_when_the_larger_one_exceeds_the_device_limit():
    """Karpenter: should fall back to a smaller sub-request when the larger one exceeds the
    device limit."""
    a = allocator(_many(40))
    c = claim(
        "c1", first_of("gpu-req", ("prefer-40", body("gpu", 40)), ("fallback-20", body("gpu", 20)))
    )
    commit(a, node_claim("nc", IT1), [c])
    requests = list(committed_requests(a).values())
    assert requests == ["gpu-req/fallback-20"] * 20


def test_should_reject_a_claim_whose_smallest_sub_request_selection_still_exceeds_the_device_limit():
    """Karpenter: should reject a claim whose smallest sub-request selection still exceeds the
    device limit."""
    c = claim(
        "c1",
        first_of("gpu-a", ("prefer-24", body("gpu", 24)), ("fallback-20", body("gpu", 20))),
        first_of("gpu-b", ("prefer-24", body("gpu", 24)), ("fallback-20", body("gpu", 20))),
    )
    fails(allocator(_many(40)), node_claim("nc", IT1), [c], "exceeding maximum")


# --- Describe("FirstAvailable DFS — selected (sub-)request tracking") --------------------------


def _preferred():
    return None, gpus("gpu-0", "gpu-1"), claim("c1", ladder("gpu-req", 2, 1))


def _selector_fallback():
    slices = [
        slice_("rack-a", [dev("a100-0", {"model": "A100"}), dev("h100-0", {"model": "H100"})])
    ]
    c = claim(
        "c1",
        first_of(
            "gpu-req",
            ("prefer-a100", body("gpu", 2, selector=model("A100"))),
            ("fallback-h100", body("gpu", 1, selector=model("H100"))),
        ),
    )
    return None, slices, c


def _class_fallback():
    c = claim(
        "c1", first_of("device-req", ("prefer-gpu", body("gpu")), ("fallback-nic", body("nic")))
    )
    return None, nics("nic-0", "nic-1"), c


def _template_preferred():
    templates = {IT1: [tmpl("p5-gpus", ["gpu-0", "gpu-1", "gpu-2"])]}
    return templates, [], claim("c1", ladder("gpu-req", 2, 1))


def _plain_exactly():
    return None, gpus("gpu-0", "gpu-1"), claim("c1", req("req-1", count=2))


def _middle_wins():
    c = claim(
        "c1",
        first_of(
            "gpu-req",
            ("prefer-3", body("gpu", 3)),
            ("middle-2", body("gpu", 2)),
            ("last-1", body("gpu", 1)),
        ),
    )
    return None, gpus("gpu-0", "gpu-1"), c


def _last_wins():
    c = claim(
        "c1",
        first_of(
            "gpu-req",
            ("prefer-4", body("gpu", 4)),
            ("middle-3", body("gpu", 3)),
            ("last-2", body("gpu", 2)),
        ),
    )
    return None, gpus("gpu-0", "gpu-1"), c


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (_preferred, {"gpu-0": "gpu-req/prefer-2", "gpu-1": "gpu-req/prefer-2"}),
        (_selector_fallback, {"h100-0": "gpu-req/fallback-h100"}),
        (_class_fallback, {"nic-0": "device-req/fallback-nic"}),
        (_template_preferred, {"gpu-0": "gpu-req/prefer-2", "gpu-1": "gpu-req/prefer-2"}),
        (_plain_exactly, {"gpu-0": "req-1", "gpu-1": "req-1"}),
        (_middle_wins, {"gpu-0": "gpu-req/middle-2", "gpu-1": "gpu-req/middle-2"}),
        (_last_wins, {"gpu-0": "gpu-req/last-2", "gpu-1": "gpu-req/last-2"}),
    ],
    ids=[
        "preferred sub-request selected (qualified)",
        "selector picks the fallback sub-request",
        "different device class fallback",
        "preferred sub-request selected from template devices",
        "plain Exactly request records the unqualified name",
        "three sub-requests, middle wins and later is not tried",
        "three sub-requests, falls through two failures to the last",
    ],
)
def test_records_the_winning_sub_request_name_on_each_allocated_device(build, expected):
    """Karpenter: records the winning (sub-)request name on each allocated device."""
    templates, slices, c = build()
    a = allocator(slices)
    nc = node_claim("nc", templates=templates) if templates else node_claim("nc", IT1)
    commit(a, nc, [c])
    assert committed_requests(a) == expected


def test_selects_a_different_sub_request_per_instance_type_and_records_the_matching_name():
    """Karpenter: selects a different sub-request per instance type and records the matching
    name."""
    a = allocator()
    nc = node_claim(
        "nc",
        templates={
            BIG: [tmpl("p5-gpus", ["gpu-0", "gpu-1", "gpu-2", "gpu-3"])],
            SMALL: [tmpl("g6-gpus", ["gpu-0", "gpu-1"])],
        },
    )
    r = commit(a, nc, [claim("c1", ladder("gpu-req", 4, 2))])
    assert r.instance_types == [BIG, SMALL]
    big = committed_requests(a, it=BIG)
    small = committed_requests(a, it=SMALL)
    assert len(big) == 4 and set(big.values()) == {"gpu-req/prefer-4"}
    assert len(small) == 2 and set(small.values()) == {"gpu-req/fallback-2"}


def test_records_the_sub_request_name_on_every_device_of_an_all_mode_sub_request():
    """Karpenter: records the sub-request name on every device of an All-mode sub-request."""
    a = allocator(gpus("gpu-0", "gpu-1", "gpu-2"))
    commit(
        a,
        node_claim("nc", IT1),
        [claim("c1", first_of("gpu-req", ("all-gpus", body("gpu", all_mode=True))))],
    )
    assert committed_requests(a) == {f"gpu-{i}": "gpu-req/all-gpus" for i in range(3)}


def test_records_the_fallback_name_after_cross_claim_backtracking_unwinds_the_preferred_sub_request():
    """Karpenter: records the fallback name after cross-claim backtracking unwinds the preferred
    sub-request."""
    a = allocator(gpus("gpu-0", "gpu-1", "gpu-2"))
    commit(
        a, node_claim("nc", IT1), [claim("c1", ladder("gpu-req", 3, 1)), claim("c2", req("gpu"))]
    )
    assert list(committed_requests(a).values()) == ["gpu-req/fallback-1"]


def test_co_records_consumed_capacity_and_the_qualified_sub_request_name_on_a_multi_alloc_fa_device():
    """Karpenter: co-records ConsumedCapacity and the qualified sub-request name on a
    multi-alloc FA device."""
    a = allocator([slice_("rack-a", [capacity_device("gpu-0", vram="80Gi")])])
    c = claim(
        "c1",
        first_of(
            "gpu-req",
            ("prefer-2", body("gpu", 2, capacity={VRAM: "50Gi"})),
            ("fallback-1", body("gpu", 1, capacity={VRAM: "16Gi"})),
        ),
    )
    commit(a, node_claim("nc", IT1), [c])
    (device,) = a.claim_metadata["default/c1"].devices_by_instance_type[IT1]
    assert (device.device, device.request) == ("gpu-0", "gpu-req/fallback-1")
    assert device.extra["consumedCapacity"] == {"vram": "16Gi"}
