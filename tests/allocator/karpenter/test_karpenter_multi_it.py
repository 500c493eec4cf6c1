"""Karpenter allocator_test.go: multi-IT allocation and constraint isolation, the commit
protocol, All mode, cross-NodeClaim contention, ReleaseInstanceType, topology narrowing,
uncommitted state, template tracking, constraints with templates and attribute bindings."""

from __future__ import annotations

from allocator.model import DeviceID
from tests.allocator.builders import ZONE, instance_type
from tests.allocator.karpenter.kit import (
    GPU,
    IT1,
    IT2,
    IT3,
    NUMA,
    all_req,
    allocator,
    claim,
    dev,
    device_class,
    devs,
    did,
    fails,
    match,
    names,
    node_claim,
    req,
    slice_,
    tmpl,
    zone_sel,
)

ONE_GPU = [slice_("rack-a-gpus", devs("gpu-0"))]
BIG, SMALL = "p5.48xlarge", "g6.xlarge"
TWO_ZONES = {ZONE: ["us-west-2a", "us-west-2b"]}


def numa_template(pool: str, *numas: str):
    return tmpl(pool, [dev(f"nvidia{i}", {NUMA: n}) for i, n in enumerate(numas)])


# --- Describe("Multi-IT allocation") -----------------------------------------------------------


def test_should_prune_instance_types_that_cannot_satisfy_requests():
    """Karpenter: should prune instance types that cannot satisfy requests."""
    nc = node_claim("nc", templates={BIG: [tmpl("p5-gpus", ["nvidia0", "nvidia1"])], SMALL: []})
    r = allocator(ONE_GPU).allocate(nc, [claim("c1", req("gpu", count=3))])
    assert r.instance_types == [BIG]
    assert SMALL in r.failed_instance_types


def test_should_keep_all_instance_types_that_can_satisfy_requests():
    """Karpenter: should keep all instance types that can satisfy requests."""
    nc = node_claim(
        "nc",
        templates={IT1: [tmpl("p5-gpus", ["nvidia0"])], IT2: [tmpl("p4d-gpus", ["nvidia0"])]},
    )
    r = allocator(ONE_GPU).allocate(nc, [claim("c1", req("gpu", count=2))])
    assert r.instance_types == [IT1, IT2]
    assert [d.pool for d in r.claims[0].devices_by_instance_type[IT2]] == ["pool-a", "p4d-gpus"]


def test_should_fail_when_no_instance_type_can_satisfy():
    """Karpenter: should fail when no instance type can satisfy."""
    nc = node_claim(
        "nc",
        templates={IT1: [tmpl("p5-gpus", ["nvidia0"])], IT2: [tmpl("p4d-gpus", ["nvidia0"])]},
    )
    fails(allocator(), nc, [claim("c1", req("gpu", count=5))], "no instance type can satisfy")


# --- Describe("Multi-IT constraint isolation") -------------------------------------------------


def test_should_not_leak_constraint_state_between_instance_type_iterations():
    """Karpenter: should not leak constraint state between instance type iterations."""
    nc = node_claim(
        "nc",
        templates={
            IT1: [numa_template("p5-gpus", "numa-0", "numa-0")],
            IT2: [numa_template("p4d-gpus", "numa-1", "numa-1")],
        },
    )
    c = claim("c1", req("gpu", count=2), constraints=[match(NUMA)])
    r = allocator().allocate(nc, [c])
    assert r.instance_types == [IT1, IT2]


def test_should_not_leak_binding_fallback_state_between_instance_type_iterations():
    """Karpenter: should not leak binding fallback state between instance type iterations."""
    # p5's template GPUs publish no numa attribute; the instance type declares they share one.
    bound = [DeviceID(GPU, "p5-gpus", "nvidia0"), DeviceID(GPU, "p5-gpus", "nvidia1")]
    p5 = instance_type(IT1, [tmpl("p5-gpus", ["nvidia0", "nvidia1"])], bindings=[(NUMA, bound)])
    p4d = instance_type(IT2, [numa_template("p4d-gpus", "numa-1", "numa-1")])
    nc = node_claim(
        "nc", templates={IT1: p5.resource_slice_templates, IT2: p4d.resource_slice_templates}
    )
    c = claim("c1", req("gpu", count=2), constraints=[match(NUMA)])
    r = allocator(instance_types=[p5, p4d]).allocate(nc, [c])
    assert r.instance_types == [IT1, IT2]


def test_should_still_allow_second_it_to_succeed_when_first_it_fails_constraints():
    """Karpenter: should still allow second IT to succeed when first IT fails constraints."""
    nc = node_claim(
        "nc",
        templates={
            IT1: [numa_template("p5-gpus", "numa-0", "numa-1")],
            IT2: [numa_template("p4d-gpus", "numa-2", "numa-2")],
        },
    )
    c = claim("c1", req("gpu", count=2), constraints=[match(NUMA)])
    r = allocator().allocate(nc, [c])
    assert r.instance_types == [IT2]


# --- Describe("Commit protocol") ---------------------------------------------------------------


def test_should_mark_in_cluster_devices_as_allocated_after_commit():
    """Karpenter: should mark in-cluster devices as allocated after commit."""
    a = allocator([slice_("rack-a-gpus", devs("gpu-0", "gpu-1", "gpu-2"))])
    nc = node_claim("nc", IT1)
    a.allocate(nc, [claim("c1", req("gpu", count=2))]).allocation.commit()
    fails(a, nc, [claim("c2", req("gpu", count=2))])


def test_should_update_pool_cache_on_commit():
    """Karpenter: should update pool cache on commit."""
    a = allocator([slice_("rack-a-gpus", devs("gpu-0", "gpu-1"))])
    nc = node_claim("nc", IT1)
    a.allocate(nc, [claim("c1", req("gpu"))]).allocation.commit()
    assert "nc" in a.pool_cache
    assert names(a.allocate(nc, [claim("c2", req("gpu"))])) == ["gpu-1"]


# --- Describe("All-mode allocation") -----------------------------------------------------------


def test_should_allocate_all_matching_in_cluster_devices():
    """Karpenter: should allocate all matching in-cluster devices."""
    a = allocator([slice_("rack-a-gpus", devs("gpu-0", "gpu-1", "gpu-2"))])
    r = a.allocate(node_claim("nc", IT1), [claim("c1", all_req("gpu"))])
    assert names(r) == ["gpu-0", "gpu-1", "gpu-2"]


def test_should_allocate_all_matching_in_cluster_and_template_devices():
    """Karpenter: should allocate all matching in-cluster and template devices."""
    nc = node_claim("nc", templates={IT1: [tmpl("p5-gpus", ["nvidia0", "nvidia1"])]})
    r = allocator(ONE_GPU).allocate(nc, [claim("c1", all_req("gpu"))])
    assert names(r) == ["gpu-0", "nvidia0", "nvidia1"]


def test_should_include_different_template_device_counts_per_instance_type():
    """Karpenter: should include different template device counts per instance type."""
    nc = node_claim(
        "nc",
        templates={
            BIG: [tmpl("p5-gpus", ["nvidia0", "nvidia1", "nvidia2"])],
            SMALL: [tmpl("g6-gpus", ["nvidia0"])],
        },
    )
    r = allocator().allocate(nc, [claim("c1", all_req("gpu"))])
    assert r.instance_types == [BIG, SMALL]
    assert len(names(r, instance_type=BIG)) == 3
    assert len(names(r, instance_type=SMALL)) == 1


def test_should_fail_when_an_all_mode_request_matches_zero_devices():
    """Karpenter: should fail when an All-mode request matches zero devices."""
    efa = [slice_("rack-a-efa", devs("efa-0"), pool="efa-pool", driver="nic.example.com")]
    fails(allocator(efa), node_claim("nc", IT1), [claim("c1", all_req("gpu"))])


def test_should_fail_when_an_already_allocated_device_is_in_the_all_set():
    """Karpenter: should fail when an already-allocated device is in the all set."""
    a = allocator([slice_("rack-a-gpus", devs("gpu-0", "gpu-1"))], allocated=[did("gpu-0")])
    fails(a, node_claim("nc", IT1), [claim("c1", all_req("gpu"))])


def test_should_work_with_all_mode_and_exact_count_mixed_in_the_same_claim():
    """Karpenter: should work with All-mode and ExactCount mixed in the same claim."""
    kind = f"{GPU}/type"
    classes = {
        "compute": device_class("compute", f'device.attributes["{GPU}"].type == "compute"'),
        "network": device_class("network", f'device.attributes["{GPU}"].type == "network"'),
    }
    slices = [
        slice_(
            "rack-a",
            [
                dev("gpu-0", {kind: "compute"}),
                dev("gpu-1", {kind: "compute"}),
                dev("nic-0", {kind: "network"}),
            ],
        )
    ]
    c = claim("c1", all_req("all-compute", "compute"), req("one-nic", "network"))
    r = allocator(slices, classes=classes).allocate(node_claim("nc", IT1), [c])
    assert [(d.request, d.device) for d in r.claims[0].devices] == [
        ("all-compute", "gpu-0"),
        ("all-compute", "gpu-1"),
        ("one-nic", "nic-0"),
    ]


def test_should_satisfy_match_attribute_constraints_in_all_mode():
    """Karpenter: should satisfy MatchAttribute constraints in All mode."""
    slices = [slice_("rack-a", [dev("gpu-0", {NUMA: "numa-0"}), dev("gpu-1", {NUMA: "numa-0"})])]
    c = claim("c1", all_req("gpu"), constraints=[match(NUMA)])
    assert names(allocator(slices).allocate(node_claim("nc", IT1), [c])) == ["gpu-0", "gpu-1"]
    # A device on another NUMA node is part of "all": the constraint cannot hold.
    split = [slice_("rack-a", [dev("gpu-0", {NUMA: "numa-0"}), dev("gpu-1", {NUMA: "numa-1"})])]
    fails(allocator(split), node_claim("nc", IT1), [c])


# --- Describe("Cross-NodeClaim device contention") ---------------------------------------------

THREE_GPUS = [slice_("rack-a-gpus", devs("gpu-0", "gpu-1", "gpu-2"))]


def test_should_block_devices_allocated_by_a_different_node_claim():
    """Karpenter: should block devices allocated by a different NodeClaim."""
    a = allocator(THREE_GPUS)
    a.allocate(node_claim("nc-a", IT1), [claim("c1", req("gpu", count=2))]).allocation.commit()
    fails(a, node_claim("nc-b", IT1), [claim("c2", req("gpu", count=2))])
    assert names(a.allocate(node_claim("nc-b", IT1), [claim("c3", req("gpu"))])) == ["gpu-2"]


def test_should_allow_the_same_device_on_the_same_node_claim_for_a_different_instance_type():
    """Karpenter: should allow the same device on the same NodeClaim for a different instance
    type."""
    a = allocator(THREE_GPUS)
    a.allocate(node_claim("nc-a", IT1), [claim("c1", req("gpu", count=2))]).allocation.commit()
    r = a.allocate(node_claim("nc-a", IT2), [claim("c2", req("gpu", count=2))])
    assert names(r) == ["gpu-0", "gpu-1"]


def test_should_block_the_same_device_on_the_same_node_claim_and_same_instance_type_from_a_prior_pod():
    """Karpenter: should block the same device on the same NodeClaim and same instance type
    from a prior pod."""
    a = allocator(THREE_GPUS)
    nc = node_claim("nc-a", IT1)
    a.allocate(nc, [claim("c1", req("gpu", count=2))]).allocation.commit()
    fails(a, nc, [claim("c2", req("gpu", count=2))])
    assert names(a.allocate(nc, [claim("c3", req("gpu"))])) == ["gpu-2"]


def test_should_handle_multi_it_node_claim_device_contention_across_node_claims():
    """Karpenter: should handle multi-IT NodeClaim device contention across NodeClaims."""
    a = allocator(THREE_GPUS)
    r1 = a.allocate(node_claim("nc-a", IT1, IT2), [claim("c1", req("gpu", count=2))])
    assert r1.instance_types == [IT1, IT2]
    r1.allocation.commit()
    fails(a, node_claim("nc-b", IT3), [claim("c2", req("gpu", count=2))])


# --- Describe("ReleaseInstanceType") -----------------------------------------------------------

TWO_GPUS = [slice_("rack-a-gpus", devs("gpu-0", "gpu-1"))]


def test_should_free_devices_for_other_node_claims_after_releasing_the_only_instance_type():
    """Karpenter: should free devices for other NodeClaims after releasing the only instance
    type."""
    a = allocator(TWO_GPUS)
    a.allocate(node_claim("nc-a", IT1), [claim("c1", req("gpu", count=2))]).allocation.commit()
    c2 = claim("c2", req("gpu"))
    fails(a, node_claim("nc-b", IT1), [c2])
    a.release_instance_type("nc-a", IT1)
    assert names(a.allocate(node_claim("nc-b", IT1), [c2])) == ["gpu-0"]


def test_should_free_devices_only_when_the_last_instance_type_referencing_them_is_released():
    """Karpenter: should free devices only when the last instance type referencing them is
    released."""
    a = allocator(TWO_GPUS)
    a.allocate(node_claim("nc-a", IT1, IT2), [claim("c1", req("gpu", count=2))]).allocation.commit()
    c2 = claim("c2", req("gpu"))
    a.release_instance_type("nc-a", IT1)
    fails(a, node_claim("nc-b", IT3), [c2])
    a.release_instance_type("nc-a", IT2)
    assert names(a.allocate(node_claim("nc-b", IT3), [c2])) == ["gpu-0"]


def test_should_be_a_no_op_when_releasing_an_instance_type_that_was_never_committed():
    """Karpenter: should be a no-op when releasing an instance type that was never committed."""
    a = allocator(TWO_GPUS)
    a.release_instance_type("gpu-pool-never", "x2iedn.32xlarge")
    r = a.allocate(node_claim("nc", IT1), [claim("c1", req("gpu", count=2))])
    assert names(r) == ["gpu-0", "gpu-1"]


# --- Describe("Topology requirement narrowing") ------------------------------------------------


def test_should_accumulate_topology_requirements_from_zonal_devices():
    """Karpenter: should accumulate topology requirements from zonal devices."""
    a = allocator(
        [
            slice_(
                "gpus-2a",
                devs("gpu-0"),
                pool="pool-us-west-2a",
                node_selector=zone_sel("us-west-2a"),
            ),
            slice_(
                "gpus-2b",
                devs("gpu-1"),
                pool="pool-us-west-2b",
                node_selector=zone_sel("us-west-2b"),
            ),
        ]
    )
    r = a.allocate(node_claim("nc", IT1, requirements=TWO_ZONES), [claim("c1", req("gpu"))])
    (zone,) = r.requirements.get(ZONE).values()
    r.allocation.commit()
    (device,) = a.claim_devices("default/c1")
    assert zone in device.pool


def test_should_narrow_pools_when_a_zonal_device_tightens_requirements():
    """Karpenter: should narrow pools when a zonal device tightens requirements."""
    a = allocator(
        [
            slice_(
                "s1",
                devs("gpu-a0", "gpu-a1"),
                pool="pool-zone-a",
                node_selector=zone_sel("us-west-2a"),
            ),
            slice_(
                "s2",
                devs("gpu-b0", "gpu-b1"),
                pool="pool-zone-b",
                node_selector=zone_sel("us-west-2b"),
            ),
        ]
    )
    r = a.allocate(
        node_claim("nc", IT1, requirements=TWO_ZONES), [claim("c1", req("gpu", count=2))]
    )
    assert names(r) == ["gpu-a0", "gpu-a1"]
    assert r.requirements.get(ZONE).values() == {"us-west-2a"}


def test_should_backtrack_and_restore_requirements_when_a_zonal_device_path_fails():
    """Karpenter: should backtrack and restore requirements when a zonal device path fails."""
    a = allocator(
        [
            slice_("s1", devs("gpu-a0"), pool="pool-zone-a", node_selector=zone_sel("us-west-2a")),
            slice_(
                "s2",
                devs("gpu-b0", "gpu-b1"),
                pool="pool-zone-b",
                node_selector=zone_sel("us-west-2b"),
            ),
        ]
    )
    r = a.allocate(
        node_claim("nc", IT1, requirements=TWO_ZONES), [claim("c1", req("gpu", count=2))]
    )
    assert names(r) == ["gpu-b0", "gpu-b1"]
    assert r.requirements.get(ZONE).values() == {"us-west-2b"}


def test_should_reject_a_device_whose_topology_is_incompatible_with_accumulated_requirements():
    """Karpenter: should reject a device whose topology is incompatible with accumulated
    requirements."""
    a = allocator([slice_("s1", devs("gpu-0"), node_selector=zone_sel("eu-west-1a"))])
    nc = node_claim("nc", IT1, requirements={ZONE: ["us-west-2a"]})
    fails(a, nc, [claim("c1", req("gpu"))])


# --- Describe("Uncommitted allocation state isolation") ----------------------------------------


def test_should_not_reserve_devices_when_allocation_is_not_committed():
    """Karpenter: should not reserve devices when allocation is not committed."""
    a = allocator(TWO_GPUS)
    nc = node_claim("nc", IT1)
    a.allocate(nc, [claim("c1", req("gpu", count=2))])
    assert names(a.allocate(nc, [claim("c2", req("gpu", count=2))])) == ["gpu-0", "gpu-1"]


def test_should_not_reserve_devices_for_a_different_node_claim_when_not_committed():
    """Karpenter: should not reserve devices for a different NodeClaim when not committed."""
    a = allocator(TWO_GPUS)
    a.allocate(node_claim("nc-a", IT1), [claim("c1", req("gpu", count=2))])
    r = a.allocate(node_claim("nc-b", IT1), [claim("c2", req("gpu", count=2))])
    assert names(r) == ["gpu-0", "gpu-1"]


# --- Describe("Template device tracking after commit") -----------------------------------------


def test_should_block_template_devices_for_the_same_nc_it_after_commit():
    """Karpenter: should block template devices for the same NC/IT after commit."""
    a = allocator()
    nc = node_claim("nc", templates={IT1: [tmpl("p5-gpus", ["nvidia0", "nvidia1"])]})
    a.allocate(nc, [claim("c1", req("gpu", count=2))]).allocation.commit()
    fails(a, nc, [claim("c2", req("gpu"))])


def test_should_allow_template_devices_for_a_different_it_on_the_same_nc_after_commit():
    """Karpenter: should allow template devices for a different IT on the same NC after
    commit."""
    a = allocator()
    a.allocate(
        node_claim("nc-a", templates={IT1: [tmpl("p5-gpus", ["nvidia0", "nvidia1"])]}),
        [claim("c1", req("gpu", count=2))],
    ).allocation.commit()
    r = a.allocate(
        node_claim("nc-a", templates={IT2: [tmpl("p4d-gpus", ["nvidia0", "nvidia1"])]}),
        [claim("c2", req("gpu", count=2))],
    )
    assert [d.pool for d in r.claims[0].devices] == ["p4d-gpus", "p4d-gpus"]


# --- Describe("Constraint + template integration") ---------------------------------------------


def test_should_backtrack_from_in_cluster_to_template_devices_to_satisfy_constraints():
    """Karpenter: should backtrack from in-cluster to template devices to satisfy constraints."""
    slices = [slice_("rack-a", [dev("gpu-0", {NUMA: "numa-0"}), dev("gpu-1", {NUMA: "numa-1"})])]
    nc = node_claim("nc", templates={IT1: [numa_template("p5-gpus", "numa-2", "numa-2")]})
    c = claim("c1", req("gpu", count=2), constraints=[match(NUMA)])
    r = allocator(slices).allocate(nc, [c])
    assert [(d.pool, d.device) for d in r.claims[0].devices] == [
        ("p5-gpus", "nvidia0"),
        ("p5-gpus", "nvidia1"),
    ]


PCIE = f"{GPU}/pcie"


def test_should_satisfy_multiple_constraints_on_the_same_claim():
    """Karpenter: should satisfy multiple constraints on the same claim."""
    slices = [
        slice_(
            "rack-a",
            [
                dev("gpu-0", {NUMA: "numa-0", PCIE: "pci0000:00"}),
                dev("gpu-1", {NUMA: "numa-0", PCIE: "pci0000:00"}),
                dev("gpu-2", {NUMA: "numa-0", PCIE: "pci0000:40"}),
            ],
        )
    ]
    c = claim("c1", req("gpu", count=2), constraints=[match(NUMA), match(PCIE)])
    assert names(allocator(slices).allocate(node_claim("nc", IT1), [c])) == ["gpu-0", "gpu-1"]


def test_should_fail_when_multiple_constraints_cannot_be_simultaneously_satisfied():
    """Karpenter: should fail when multiple constraints cannot be simultaneously satisfied."""
    slices = [
        slice_(
            "rack-a",
            [
                dev("gpu-0", {NUMA: "numa-0", PCIE: "pci0000:00"}),
                dev("gpu-1", {NUMA: "numa-0", PCIE: "pci0000:40"}),
                dev("gpu-2", {NUMA: "numa-1", PCIE: "pci0000:00"}),
            ],
        )
    ]
    c = claim("c1", req("gpu", count=2), constraints=[match(NUMA), match(PCIE)])
    fails(allocator(slices), node_claim("nc", IT1), [c])


def test_should_use_attribute_binding_fallback_end_to_end_through_allocate():
    """Karpenter: should use attribute binding fallback end-to-end through Allocate."""
    bound = [DeviceID(GPU, "p5-gpus", "nvidia0"), DeviceID(GPU, "p5-gpus", "nvidia1")]
    p5 = instance_type(
        IT1, [tmpl("p5-gpus", ["nvidia0", "nvidia1", "nvidia2"])], bindings=[(NUMA, bound)]
    )
    a = allocator(instance_types=[p5])
    nc = node_claim("nc", templates={IT1: p5.resource_slice_templates})
    two = claim("c1", req("gpu", count=2), constraints=[match(NUMA)])
    assert names(a.allocate(nc, [two])) == ["nvidia0", "nvidia1"]
    three = claim("c3", req("gpu", count=3), constraints=[match(NUMA)])
    fails(a, nc, [three])
