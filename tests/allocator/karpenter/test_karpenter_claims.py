"""Karpenter allocator_test.go: multi-claim competition, multiple pools, class + request
selectors, edge cases (invalid pools, zero instance types), in-cluster allocated claims,
deleting-pod reclassification, cross-IT requirement accumulation, requirement recomputation
on release, and validation errors through Allocate."""

from __future__ import annotations

from allocator.claims import ALLOCATED_IN_CLUSTER, REALLOCATED
from allocator.errors import ValidationError
from allocator.model import (
    AllocationResult,
    ConsumerReference,
    DeviceConstraint,
    DeviceRequest,
    DeviceRequestAllocationResult,
    DeviceSelector,
    ExactDeviceRequest,
)
from allocator.nodeclaim import SimpleNodeClaim
from allocator.requirements import Requirements
from tests.allocator.builders import ZONE
from tests.allocator.karpenter.kit import (
    GPU,
    IT1,
    IT2,
    IT3,
    MODEL,
    NUMA,
    all_req,
    allocator,
    capacity_device,
    claim,
    dev,
    device_class,
    devs,
    fails,
    match,
    names,
    node_claim,
    req,
    slice_,
    tmpl,
    zone_sel,
)

TWO_ZONES = {ZONE: ["us-west-2a", "us-west-2b"]}


def held(name: str, node_selector: dict | None, *, consumers=()):
    """A claim already allocated in the cluster (status.allocation with this node selector)."""
    c = claim(name)
    c.allocation = AllocationResult(devices=[], node_selector=node_selector)
    c.reserved_for = list(consumers)
    return c


def zonal(*zones: str) -> list:
    return [
        slice_(
            f"gpus-{z}", devs(f"gpu-{z[-1]}0"), pool=f"pool-zone-{z[-1]}", node_selector=zone_sel(z)
        )
        for z in zones
    ]


# --- Describe("Multi-claim competition") -------------------------------------------------------


def test_should_consume_devices_across_claims_within_a_single_allocate_call():
    """Karpenter: should consume devices across claims within a single Allocate call."""
    a = allocator([slice_("rack-a", devs("gpu-0", "gpu-1", "gpu-2"))])
    claims = [claim("c1", req("gpu", count=2)), claim("c2", req("gpu", count=2))]
    fails(a, node_claim("nc", IT1), claims)


def test_should_succeed_when_claims_fit_within_the_total_device_count():
    """Karpenter: should succeed when claims fit within the total device count."""
    a = allocator([slice_("rack-a", devs("gpu-0", "gpu-1", "gpu-2", "gpu-3"))])
    claims = [claim("c1", req("gpu", count=2)), claim("c2", req("gpu", count=2))]
    r = a.allocate(node_claim("nc", IT1), claims)
    assert names(r, 0) == ["gpu-0", "gpu-1"] and names(r, 1) == ["gpu-2", "gpu-3"]


def test_should_maintain_independent_constraints_across_claims():
    """Karpenter: should maintain independent constraints across claims."""
    a = allocator(
        [
            slice_(
                "rack-a",
                [
                    dev("gpu-0", {NUMA: "numa-0"}),
                    dev("gpu-1", {NUMA: "numa-0"}),
                    dev("gpu-2", {NUMA: "numa-1"}),
                    dev("gpu-3", {NUMA: "numa-1"}),
                ],
            )
        ]
    )
    claims = [
        claim("c1", req("gpu", count=2), constraints=[match(NUMA)]),
        claim("c2", req("gpu", count=2), constraints=[match(NUMA)]),
    ]
    r = a.allocate(node_claim("nc", IT1), claims)
    assert names(r, 0) == ["gpu-0", "gpu-1"] and names(r, 1) == ["gpu-2", "gpu-3"]


# --- Describe("Multi-pool devices") ------------------------------------------------------------


def test_should_allocate_devices_from_multiple_pools():
    """Karpenter: should allocate devices from multiple pools."""
    a = allocator(
        [slice_("s1", devs("gpu-0"), pool="pool-a"), slice_("s2", devs("gpu-1"), pool="pool-b")]
    )
    r = a.allocate(node_claim("nc", IT1), [claim("c1", req("gpu", count=2))])
    assert [(d.pool, d.device) for d in r.claims[0].devices] == [
        ("pool-a", "gpu-0"),
        ("pool-b", "gpu-1"),
    ]


def test_should_treat_same_device_name_in_different_pools_as_distinct():
    """Karpenter: should treat same device name in different pools as distinct."""
    a = allocator(
        [slice_("s1", devs("gpu-0"), pool="pool-a"), slice_("s2", devs("gpu-0"), pool="pool-b")]
    )
    r = a.allocate(node_claim("nc", IT1), [claim("c1", req("gpu", count=2))])
    assert [(d.pool, d.device) for d in r.claims[0].devices] == [
        ("pool-a", "gpu-0"),
        ("pool-b", "gpu-0"),
    ]


# --- Describe("Combined class and request selectors") ------------------------------------------


def test_should_require_both_class_and_request_selectors_to_match():
    """Karpenter: should require both class and request selectors to match."""
    mem = f"{GPU}/memoryGiB"
    a = allocator(
        [
            slice_(
                "rack-a",
                [
                    dev("gpu-0", {MODEL: "H100", mem: 80}),
                    dev("gpu-1", {MODEL: "H100", mem: 40}),
                    dev("gpu-2", {MODEL: "A100", mem: 80}),
                ],
            )
        ],
        classes={
            "h100-class": device_class("h100-class", f'device.attributes["{GPU}"].model == "H100"')
        },
    )
    big = f'device.attributes["{GPU}"].memoryGiB > 60'
    nc = node_claim("nc", IT1)
    assert names(a.allocate(nc, [claim("c1", req("gpu", "h100-class", selector=big))])) == ["gpu-0"]
    fails(a, nc, [claim("c2", req("gpu", "h100-class", 2, selector=big))])


# --- Describe("Edge cases") --------------------------------------------------------------------


def test_should_succeed_with_templates_when_in_cluster_satisfies_everything():
    """Karpenter: should succeed with templates when in-cluster satisfies everything."""
    a = allocator([slice_("rack-a", devs("gpu-0", "gpu-1"))])
    nc = node_claim("nc", templates={IT1: [tmpl("p5-gpus", ["nvidia0", "nvidia1"])]})
    r = a.allocate(nc, [claim("c1", req("gpu", count=2))])
    assert r.instance_types == [IT1]
    assert {d.source for d in r.claims[0].devices} == {"in-cluster"}


def test_should_fail_with_zero_instance_types():
    """Karpenter: should fail with zero instance types."""
    nc = SimpleNodeClaim(
        id="nc", requirements=Requirements(), instance_types=[], node_pool="gpu-pool"
    )
    fails(allocator(), nc, [claim("c1", req("gpu"))])


def _duplicate_vram_pool(second_vram: str):
    return [
        slice_(
            "rack-a",
            [
                capacity_device("gpu-dup", vram="80Gi"),
                capacity_device("gpu-dup", vram=second_vram),
            ],
        )
    ]


def test_should_return_error_for_all_mode_request_against_an_invalid_pool_containing_capacity_devices():
    """Karpenter: should return error for All-mode request against an invalid pool containing
    capacity devices."""
    a = allocator(_duplicate_vram_pool("80Gi"))
    fails(a, node_claim("nc", IT1), [claim("c1", all_req("gpu"))], "gpu-dup")


def test_should_fail_exact_count_request_when_invalid_pools_capacity_devices_are_dropped():
    """Karpenter: should fail ExactCount request when invalid pool's capacity devices are
    dropped."""
    a = allocator(_duplicate_vram_pool("40Gi"))
    fails(a, node_claim("nc", IT1), [claim("c1", req("gpu"))], "pool-invalid")


# --- Describe("In-cluster allocated claim handling") -------------------------------------------


def test_should_pass_through_claims_with_no_node_selector():
    """Karpenter: should pass through claims with no nodeSelector."""
    r = allocator().allocate(node_claim("nc", IT1), [held("c1", None)])
    assert r.instance_types == [IT1]
    assert r.claims[0].state == ALLOCATED_IN_CLUSTER


def test_should_propagate_topology_requirements_from_the_allocation_node_selector():
    """Karpenter: should propagate topology requirements from the allocation nodeSelector."""
    nc = node_claim("nc", IT1, requirements=TWO_ZONES)
    r = allocator().allocate(nc, [held("c1", zone_sel("us-west-2a"))])
    assert r.requirements.get(ZONE).values() == {"us-west-2a"}


def test_should_fail_when_the_allocation_node_selector_is_incompatible_with_node_claim_requirements():
    """Karpenter: should fail when the allocation nodeSelector is incompatible with NodeClaim
    requirements."""
    nc = node_claim("nc", IT1, requirements={ZONE: ["us-west-2a"]})
    fails(allocator(), nc, [held("c1", zone_sel("eu-west-1a"))], "incompatible")


def test_should_tighten_baseline_requirements_for_subsequent_unallocated_claims():
    """Karpenter: should tighten baseline requirements for subsequent unallocated claims."""
    a = allocator(zonal("us-west-2a", "us-west-2b"))
    nc = node_claim("nc", IT1, requirements=TWO_ZONES)
    r = a.allocate(
        nc, [held("c-allocated", zone_sel("us-west-2b")), claim("c-unalloc", req("gpu"))]
    )
    assert r.requirements.get(ZONE).values() == {"us-west-2b"}
    assert names(r, 1) == ["gpu-b0"]  # zone a's GPU comes first, but is out of reach


def test_should_handle_a_mix_of_allocated_and_unallocated_claims():
    """Karpenter: should handle a mix of allocated and unallocated claims."""
    a = allocator([slice_("rack-a", devs("gpu-0", "gpu-1"))])
    r = a.allocate(
        node_claim("nc", IT1), [held("c-already-done", None), claim("c-pending", req("gpu"))]
    )
    assert r.claims[0].state == ALLOCATED_IN_CLUSTER
    assert names(r, 1) == ["gpu-0"]


def test_should_return_early_when_all_claims_are_already_allocated():
    """Karpenter: should return early when all claims are already allocated."""
    r = allocator().allocate(node_claim("nc", IT1), [held("c1", None), held("c2", None)])
    assert r.instance_types == [IT1]
    assert r.dfs_nodes == 0 and r.allocation.device_ids() == {}


def test_should_fail_when_two_in_cluster_allocated_claims_have_incompatible_zones():
    """Karpenter: should fail when two in-cluster allocated claims have incompatible zones."""
    nc = node_claim("nc", IT1, requirements=TWO_ZONES)
    claims = [held("c-zone-a", zone_sel("us-west-2a")), held("c-zone-b", zone_sel("us-west-2b"))]
    fails(allocator(), nc, claims, "incompatible")


def test_should_succeed_when_two_in_cluster_allocated_claims_have_compatible_zones():
    """Karpenter: should succeed when two in-cluster allocated claims have compatible zones."""
    nc = node_claim("nc", IT1, requirements=TWO_ZONES)
    claims = [held("c1", zone_sel("us-west-2a")), held("c2", zone_sel("us-west-2a"))]
    r = allocator().allocate(nc, claims)
    assert r.requirements.get(ZONE).values() == {"us-west-2a"}


def test_should_fail_when_an_in_cluster_claim_and_in_memory_claim_have_incompatible_zones():
    """Karpenter: should fail when an in-cluster claim and in-memory claim have incompatible
    zones."""
    a = allocator([slice_("s1", devs("gpu-0"), node_selector=zone_sel("us-west-2a"))])
    zonal_claim = claim("zonal-claim", req("gpu"))
    a.allocate(node_claim("nc-a", IT1, requirements=TWO_ZONES), [zonal_claim]).allocation.commit()
    in_b = held("cluster-claim", zone_sel("us-west-2b"))
    fails(a, node_claim("nc-b", IT1, requirements=TWO_ZONES), [in_b, zonal_claim], "incompatible")


# --- Describe("Deleting-pod claim reclassification") -------------------------------------------


def reserved(*consumers: ConsumerReference):
    c = claim("c1", req("gpu"))
    c.allocation = AllocationResult(
        devices=[DeviceRequestAllocationResult("gpu", GPU, "pool-a", "gpu-0")]
    )
    c.reserved_for = list(consumers)
    return c


def pod(name: str) -> ConsumerReference:
    return ConsumerReference("pods", name, uid=f"uid-{name}")


DELETING = {"default/train-0"}


def test_re_allocates_a_claim_reserved_entirely_by_deleting_pods():
    """Karpenter: re-allocates a claim reserved entirely by deleting pods."""
    a = allocator([slice_("rack-a", devs("gpu-0"))], deleting_pods=DELETING)
    r = a.allocate(node_claim("nc", IT1), [reserved(pod("train-0"))])
    assert r.claims[0].state == REALLOCATED
    assert r.allocation.device_ids() == {IT1: [("gpu.nvidia.com", "pool-a", "gpu-0")]}


def test_treats_a_claim_reserved_by_a_mix_of_deleting_and_live_pods_as_committed():
    """Karpenter: treats a claim reserved by a mix of deleting and live pods as committed."""
    # No slices at all: a DFS would fail, staying committed in place does not need one.
    a = allocator(deleting_pods=DELETING)
    r = a.allocate(node_claim("nc", IT1), [reserved(pod("train-0"), pod("train-1"))])
    assert r.instance_types == [IT1]
    assert r.claims[0].state == ALLOCATED_IN_CLUSTER


def test_treats_a_claim_reserved_by_a_live_pod_as_committed():
    """Karpenter: treats a claim reserved by a live pod as committed."""
    r = allocator(deleting_pods=DELETING).allocate(
        node_claim("nc", IT1), [reserved(pod("train-1"))]
    )
    assert r.claims[0].state == ALLOCATED_IN_CLUSTER


def test_treats_a_claim_reserved_by_a_non_pod_consumer_as_committed():
    """Karpenter: treats a claim reserved by a non-pod consumer as committed."""
    widget = ConsumerReference("widgets", "train-0", uid="uid-train-0", api_group="example.com")
    r = allocator(deleting_pods=DELETING).allocate(node_claim("nc", IT1), [reserved(widget)])
    assert r.claims[0].state == ALLOCATED_IN_CLUSTER


# --- Describe("Cross-IT requirement accumulation") ---------------------------------------------


def test_should_prune_later_instance_types_when_earlier_it_pins_topology_via_in_cluster_device():
    """Karpenter: should prune later instance types when earlier IT pins topology via
    in-cluster device."""
    a = allocator(zonal("us-west-2a", "us-west-2b"))
    nc = node_claim(
        "nc",
        requirements=TWO_ZONES,
        templates={IT1: [tmpl("p5-gpus", ["nvidia0"])], IT2: []},
    )
    r = a.allocate(nc, [claim("c1", req("gpu", count=2))])
    # p5 takes zone a's GPU plus its own: zone a is pinned; p4d alone would need both zones.
    assert r.instance_types == [IT1]
    assert r.requirements.get(ZONE).values() == {"us-west-2a"}


def test_should_allow_instance_types_with_compatible_topology_after_prior_it_contributions():
    """Karpenter: should allow instance types with compatible topology after prior IT
    contributions."""
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
        node_claim("nc", IT1, IT2, requirements=TWO_ZONES), [claim("c1", req("gpu", count=2))]
    )
    assert r.instance_types == [IT1, IT2]
    assert names(r, instance_type=IT2) == ["gpu-a0", "gpu-a1"]


# --- Describe("ReleaseInstanceType requirement recomputation") ---------------------------------
#
# Karpenter keeps per-instance-type ContributedRequirements in the claim's metadata and
# recomputes their intersection (TotalRequirements) on release. Here the claim's topology is
# what a later pod sharing the claim inherits: observed through an Allocate reusing it.


def _reuse_zone(a, nc_id="gpu-pool-b"):
    r = a.allocate(node_claim(nc_id, IT3, requirements=TWO_ZONES), [claim("c1", req("gpu"))])
    return r.requirements.get(ZONE).values()


def test_should_relax_total_requirements_when_a_restricting_instance_type_is_released():
    """Karpenter: should relax TotalRequirements when a restricting instance type is released."""
    a = allocator(
        [slice_("s1", devs("gpu-a0"), pool="pool-zone-a", node_selector=zone_sel("us-west-2a"))]
    )
    nc = node_claim("nc", IT1, IT2, requirements=TWO_ZONES)
    r = a.allocate(nc, [claim("c1", req("gpu"))])
    assert r.instance_types == [IT1, IT2]
    r.allocation.commit()
    assert a.claim_metadata["default/c1"].requirements.get(ZONE).values() == {"us-west-2a"}
    assert _reuse_zone(a) == {"us-west-2a"}
    a.release_instance_type("nc", IT1)
    assert [d.device for d in a.claim_devices("default/c1")] == ["gpu-a0"]  # IT2 still holds it
    a.release_instance_type("nc", IT2)
    assert a.claim_devices("default/c1") == []


def test_should_empty_total_requirements_when_all_instance_types_are_released():
    """Karpenter: should empty TotalRequirements when all instance types are released."""
    a = allocator(
        [
            slice_(
                "s1",
                devs("gpu-a0", "gpu-a1"),
                pool="pool-zone-a",
                node_selector=zone_sel("us-west-2a"),
            )
        ]
    )
    nc = node_claim("nc", IT1, IT2, requirements=TWO_ZONES)
    a.allocate(nc, [claim("c1", req("gpu"))]).allocation.commit()
    a.release_instance_type("nc", IT1)
    a.release_instance_type("nc", IT2)
    assert a.claim_devices("default/c1") == []
    assert not a.claim_metadata["default/c1"].devices_by_instance_type


def test_should_correctly_intersect_remaining_contributed_requirements_after_partial_release():
    """Karpenter: should correctly intersect remaining ContributedRequirements after partial
    release."""
    a = allocator(
        [
            slice_(
                "s1",
                devs("gpu-a0", "gpu-a1", "gpu-a2"),
                pool="pool-zone-a",
                node_selector=zone_sel("us-west-2a"),
            )
        ]
    )
    nc = node_claim("nc", IT1, IT2, IT3, requirements=TWO_ZONES)
    r = a.allocate(nc, [claim("c1", req("gpu"))])
    assert r.instance_types == [IT1, IT2, IT3]
    r.allocation.commit()
    a.release_instance_type("nc", IT2)
    meta = a.claim_metadata["default/c1"]
    assert sorted(meta.devices_by_instance_type) == sorted([IT1, IT3])
    assert meta.requirements.get(ZONE).values() == {"us-west-2a"}
    assert _reuse_zone(a) == {"us-west-2a"}


# --- Describe("Validation errors through Allocate()") ------------------------------------------

P5_ONE = {IT1: [tmpl("p5-gpus", ["nvidia0"])]}


def test_should_return_error_when_device_class_does_not_exist():
    """Karpenter: should return error when DeviceClass does not exist."""
    nc = node_claim("nc", templates=P5_ONE)
    fails(allocator(), nc, [claim("c1", req("gpu", "tpu.google.com"))], "not found")


def test_should_return_error_for_unsupported_selector_type():
    """Karpenter: should return error for unsupported selector type."""
    body = ExactDeviceRequest(device_class_name="gpu", selectors=[DeviceSelector(cel=None, raw={})])
    c = claim("c1", DeviceRequest(name="gpu", exactly=body))
    err = fails(allocator(), node_claim("nc", templates=P5_ONE), [c], "unsupported selector")
    assert isinstance(err, ValidationError)


def test_should_return_error_when_request_has_neither_exactly_nor_first_available():
    """Karpenter: should return error when request has neither Exactly nor FirstAvailable."""
    c = claim("c1", DeviceRequest(name="gpu"))
    fails(allocator(), node_claim("nc", templates=P5_ONE), [c], "only Exactly")
    fails(
        allocator(), node_claim("nc", templates=P5_ONE), [c], "neither exactly nor firstAvailable"
    )


def test_should_return_error_for_unsupported_constraint_type():
    """Karpenter: should return error for unsupported constraint type."""
    c = claim("c1", req("gpu"), constraints=[DeviceConstraint(raw={})])
    fails(allocator(), node_claim("nc", templates=P5_ONE), [c], "unsupported constraint")
