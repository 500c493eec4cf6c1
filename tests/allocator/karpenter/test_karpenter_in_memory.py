"""Karpenter allocator_test.go: constraint path exclusion (concrete attribute vs binding),
All mode + ExactCount under one constraint, contributed requirements, All-mode validation
failures, constraints scoped to a request subset, All mode over several pools, an empty pool
set, and in-memory allocated claims."""

from __future__ import annotations

from allocator.claims import ALLOCATED_IN_MEMORY
from allocator.model import DeviceID
from tests.allocator.builders import ZONE, instance_type
from tests.allocator.karpenter.kit import (
    GPU,
    IT1,
    IT2,
    NIC,
    NUMA,
    all_req,
    allocator,
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
CAPACITY_TYPE = "karpenter.sh/capacity-type"
KIND = f"{GPU}/type"
FPGA = "fpga.xilinx.com"


def zonal_pools(prefix: str = "gpu", driver: str = GPU, zones=("us-west-2a", "us-west-2b")):
    return [
        slice_(
            f"{prefix}-{z}",
            devs(f"{prefix}-{z[-1]}0"),
            pool=f"{prefix}-pool-{z}",
            driver=driver,
            node_selector=zone_sel(z),
        )
        for z in zones
    ]


# --- Describe("Constraint path exclusion during DFS") ------------------------------------------


def _bound_p5(*devices: str):
    bound = [DeviceID(GPU, "p5-gpus", d) for d in ("nvidia0", "nvidia1")]
    return instance_type(IT1, [tmpl("p5-gpus", list(devices))], bindings=[(NUMA, bound)])


def test_should_fail_when_no_consistent_constraint_evaluation_path_exists_across_devices():
    """Karpenter: should fail when no consistent constraint evaluation path exists across
    devices."""
    # The rack GPU publishes numa; the template GPU publishes none and relies on a binding.
    # A MatchAttribute is satisfied either by values or by bindings, never by a mix.
    p5 = _bound_p5("nvidia0")
    a = allocator([slice_("rack-a", [dev("gpu-0", {NUMA: "numa-0"})])], instance_types=[p5])
    nc = node_claim("nc", templates={IT1: p5.resource_slice_templates})
    fails(a, nc, [claim("c1", req("gpu", count=2), constraints=[match(NUMA)])])


def test_should_succeed_when_all_devices_use_binding_path_consistently():
    """Karpenter: should succeed when all devices use binding path consistently."""
    p5 = _bound_p5("nvidia0", "nvidia1")
    a = allocator(instance_types=[p5])
    nc = node_claim("nc", templates={IT1: p5.resource_slice_templates})
    r = a.allocate(nc, [claim("c1", req("gpu", count=2), constraints=[match(NUMA)])])
    assert names(r) == ["nvidia0", "nvidia1"]


def test_should_succeed_when_all_devices_use_concrete_path_consistently():
    """Karpenter: should succeed when all devices use concrete path consistently."""
    a = allocator(
        [slice_("rack-a", [dev("gpu-0", {NUMA: "numa-0"}), dev("gpu-1", {NUMA: "numa-0"})])]
    )
    c = claim("c1", req("gpu", count=2), constraints=[match(NUMA)])
    assert names(a.allocate(node_claim("nc", IT1), [c])) == ["gpu-0", "gpu-1"]


# --- Describe("All-mode + ExactCount under shared constraint") ---------------------------------

KIND_CLASSES = {
    "compute-class": device_class("compute-class", f'device.attributes["{GPU}"].type == "compute"'),
    "extra-class": device_class("extra-class", f'device.attributes["{GPU}"].type == "extra"'),
}


def _mixed(extra_numa: str):
    return [
        slice_(
            "rack-a",
            [
                dev("gpu-0", {KIND: "compute", NUMA: "numa-0"}),
                dev("gpu-1", {KIND: "compute", NUMA: "numa-0"}),
                dev("gpu-2", {KIND: "extra", NUMA: extra_numa}),
            ],
        )
    ]


def _mixed_claim():
    return claim(
        "c1",
        all_req("all-compute", "compute-class"),
        req("one-extra", "extra-class"),
        constraints=[match(NUMA)],
    )


def test_should_satisfy_match_attribute_spanning_all_mode_and_exact_count_requests():
    """Karpenter: should satisfy MatchAttribute spanning All-mode and ExactCount requests."""
    a = allocator(_mixed("numa-0"), classes=KIND_CLASSES)
    r = a.allocate(node_claim("nc", IT1), [_mixed_claim()])
    assert names(r) == ["gpu-0", "gpu-1", "gpu-2"]


def test_should_fail_when_mixed_mode_requests_cannot_share_constraint_value():
    """Karpenter: should fail when mixed-mode requests cannot share constraint value."""
    a = allocator(_mixed("numa-1"), classes=KIND_CLASSES)
    fails(a, node_claim("nc", IT1), [_mixed_claim()])


# --- Describe("ContributedRequirements tracking") ----------------------------------------------


def test_should_track_contributed_requirements_independently_per_instance_type():
    """Karpenter: should track ContributedRequirements independently per instance type."""
    a = allocator(
        [slice_("s1", devs("gpu-a0"), pool="pool-zone-a", node_selector=zone_sel("us-west-2a"))]
    )
    r = a.allocate(node_claim("nc", IT1, IT2, requirements=TWO_ZONES), [claim("c1", req("gpu"))])
    assert r.instance_types == [IT1, IT2]
    r.allocation.commit()
    meta = a.claim_metadata["default/c1"]
    assert {it: [d.device for d in ds] for it, ds in meta.devices_by_instance_type.items()} == {
        IT1: ["gpu-a0"],
        IT2: ["gpu-a0"],
    }
    assert meta.requirements.get(ZONE).values() == {"us-west-2a"}


def test_should_have_empty_total_requirements_when_it_uses_non_topology_device():
    """Karpenter: should have empty TotalRequirements when IT uses non-topology device."""
    a = allocator([slice_("s1", devs("gpu-g0"), pool="pool-global")])
    a.allocate(node_claim("nc", IT1), [claim("c1", req("gpu"))]).allocation.commit()
    assert len(a.claim_metadata["default/c1"].requirements) == 0


def test_should_track_contributed_requirements_independently_per_claim():
    """Karpenter: should track ContributedRequirements independently per claim."""
    on_demand_a = {
        "nodeSelectorTerms": [
            {
                "matchExpressions": [
                    {"key": ZONE, "operator": "In", "values": ["us-west-2a"]},
                    {"key": CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
                ]
            }
        ]
    }
    a = allocator(
        [
            slice_(
                "s1", devs("gpu-a0"), pool="pool-zone-only", node_selector=zone_sel("us-west-2a")
            ),
            slice_(
                "s2", devs("nic-0"), pool="pool-zone-and-ct", driver=NIC, node_selector=on_demand_a
            ),
        ]
    )
    nc = node_claim("nc", IT1, requirements={**TWO_ZONES, CAPACITY_TYPE: ["on-demand", "spot"]})
    r = a.allocate(nc, [claim("c1", req("gpu")), claim("c2", req("nic", "nic"))])
    r.allocation.commit()
    c1 = a.claim_metadata["default/c1"].requirements
    c2 = a.claim_metadata["default/c2"].requirements
    assert c1.get(ZONE).values() == {"us-west-2a"} and not c1.has(CAPACITY_TYPE)
    assert c2.get(ZONE).values() == {"us-west-2a"}
    assert c2.get(CAPACITY_TYPE).values() == {"on-demand"}


# --- Describe("All-mode validation failures through Allocate()") -------------------------------


def test_should_return_error_when_all_mode_pool_has_duplicate_device_names():
    """Karpenter: should return error when All-mode pool has duplicate device names."""
    a = allocator(
        [
            slice_("s1", devs("gpu-0", "gpu-1"), count=2),
            slice_("s2", devs("gpu-0", "gpu-2"), count=2),
        ]
    )
    fails(a, node_claim("nc", IT1), [claim("c1", all_req("gpu"))], "invalid")


def test_should_return_error_when_all_mode_pool_is_incomplete():
    """Karpenter: should return error when All-mode pool is incomplete."""
    a = allocator([slice_("s1", devs("gpu-0", "gpu-1"), count=2)])
    fails(a, node_claim("nc", IT1), [claim("c1", all_req("gpu"))], "incomplete")


# --- Describe("Constraint scoped to request subset") -------------------------------------------


def test_should_allow_non_scoped_requests_to_cross_constraint_boundaries():
    """Karpenter: should allow non-scoped requests to cross constraint boundaries."""
    a = allocator(
        [
            slice_(
                "rack-a",
                [
                    dev("gpu-0", {NUMA: "numa-0"}),
                    dev("gpu-1", {NUMA: "numa-0"}),
                    dev("gpu-2", {NUMA: "numa-1"}),
                ],
            )
        ]
    )
    c = claim(
        "c1",
        req("train", count=1),
        req("eval", count=1),
        req("monitor", count=1),
        constraints=[match(NUMA, "train", "eval")],
    )
    r = a.allocate(node_claim("nc", IT1), [c])
    assert [(d.request, d.device) for d in r.claims[0].devices] == [
        ("train", "gpu-0"),
        ("eval", "gpu-1"),
        ("monitor", "gpu-2"),
    ]


# --- Describe("Multiple pools in All-mode") ----------------------------------------------------


def test_should_aggregate_devices_from_multiple_pools_in_all_mode():
    """Karpenter: should aggregate devices from multiple pools in All-mode."""
    a = allocator(
        [
            slice_("s1", devs("gpu-0"), pool="pool-a"),
            slice_("s2", devs("gpu-1"), pool="pool-b"),
            slice_("s3", devs("gpu-2"), pool="pool-c"),
        ]
    )
    r = a.allocate(node_claim("nc", IT1), [claim("c1", all_req("gpu"))])
    assert [(d.pool, d.device) for d in r.claims[0].devices] == [
        ("pool-a", "gpu-0"),
        ("pool-b", "gpu-1"),
        ("pool-c", "gpu-2"),
    ]


# --- Describe("Empty pool set") ----------------------------------------------------------------


def test_should_fail_when_no_pools_match_and_no_templates_available():
    """Karpenter: should fail when no pools match and no templates available."""
    a = allocator(zonal_pools())
    nc = node_claim("nc", IT1, requirements={ZONE: ["us-west-2c"]})
    fails(a, nc, [claim("c1", req("gpu"))])


# --- Describe("In-memory allocated claim handling") --------------------------------------------

TWO_GPUS = [slice_("rack-a", devs("gpu-0", "gpu-1"))]


def test_should_skip_dfs_for_an_in_memory_allocated_claim_on_the_same_node_claim():
    """Karpenter: should skip DFS for an in-memory allocated claim on the same NodeClaim
    (in-cluster only)."""
    a = allocator(TWO_GPUS)
    nc = node_claim("nc", IT1)
    shared = claim("shared-claim", req("gpu"))
    a.allocate(nc, [shared]).allocation.commit()
    r = a.allocate(nc, [shared])
    assert r.instance_types == [IT1]
    assert r.claims[0].state == ALLOCATED_IN_MEMORY
    assert r.dfs_nodes == 0


def test_should_allow_an_in_memory_in_cluster_only_claim_to_be_used_from_a_different_node_claim():
    """Karpenter: should allow an in-memory in-cluster-only claim to be used from a different
    NodeClaim."""
    a = allocator(TWO_GPUS)
    shared = claim("shared-claim", req("gpu"))
    a.allocate(node_claim("nc-a", IT1), [shared]).allocation.commit()
    r = a.allocate(node_claim("nc-b", IT1), [shared])
    assert r.claims[0].state == ALLOCATED_IN_MEMORY
    assert names(r) == ["gpu-0"]


def test_should_fail_when_a_template_allocated_claim_is_referenced_from_a_different_node_claim():
    """Karpenter: should fail when a template-allocated claim is referenced from a different
    NodeClaim."""
    a = allocator()
    c = claim("template-claim", req("gpu"))
    a.allocate(
        node_claim("nc-a", templates={IT1: [tmpl("p5-gpus", ["nvidia0"])]}), [c]
    ).allocation.commit()
    nc_b = node_claim("nc-b", templates={IT2: [tmpl("p4d-gpus", ["nvidia0"])]})
    fails(a, nc_b, [c], "bound to a different in-flight NodeClaim")


def test_should_succeed_when_a_template_allocated_claim_is_referenced_from_the_same_node_claim():
    """Karpenter: should succeed when a template-allocated claim is referenced from the same
    NodeClaim."""
    a = allocator()
    nc = node_claim("nc-a", templates={IT1: [tmpl("p5-gpus", ["nvidia0", "nvidia1"])]})
    c = claim("template-claim", req("gpu"))
    a.allocate(nc, [c]).allocation.commit()
    r = a.allocate(nc, [c])
    assert r.claims[0].state == ALLOCATED_IN_MEMORY
    assert names(r) == ["nvidia0"]


def test_should_track_used_template_devices_per_claim_not_globally():
    """Karpenter: should track UsedTemplateDevices per-claim, not globally."""
    classes = {
        "gpu": device_class("gpu", f'device.driver == "{GPU}"'),
        "fpga": device_class("fpga", f'device.driver == "{FPGA}"'),
    }
    a = allocator([slice_("rack-a", devs("gpu-0"))], classes=classes)
    f1 = "f1.16xlarge"
    nc_a = node_claim("nc-a", templates={f1: [tmpl("f1-fpgas", ["fpga-0"], driver=FPGA)]})
    rack_claim = claim("in-cluster-claim", req("gpu"))
    fpga_claim = claim("template-claim", req("fpga", "fpga"))
    r1 = a.allocate(nc_a, [rack_claim, fpga_claim])
    r1.allocation.commit()
    assert not a.claim_metadata["default/in-cluster-claim"].used_templates
    assert a.claim_metadata["default/template-claim"].used_templates
    # nc-a's only FPGA is taken.
    fpga_claim_2 = claim("template-claim-2", req("fpga", "fpga"))
    fails(a, nc_a, [fpga_claim_2])
    # On nc-b the rack GPU is held by another claim of another NodeClaim.
    nc_b = node_claim("nc-b", templates={f1: [tmpl("f1-fpgas-2", ["fpga-0"], driver=FPGA)]})
    fails(a, nc_b, [claim("in-cluster-claim-2", req("gpu")), fpga_claim_2])
    # The FPGA of nc-b is its own.
    assert names(a.allocate(nc_b, [fpga_claim_2])) == ["fpga-0"]


def test_should_propagate_in_memory_topology_requirements_to_the_allocation_result():
    """Karpenter: should propagate in-memory topology requirements to the allocation result."""
    a = allocator([slice_("s1", devs("gpu-0"), node_selector=zone_sel("us-west-2a"))])
    c = claim("zonal-claim", req("gpu"))
    a.allocate(node_claim("nc-a", IT1, requirements=TWO_ZONES), [c]).allocation.commit()
    r = a.allocate(node_claim("nc-b", IT1, requirements=TWO_ZONES), [c])
    assert r.requirements.get(ZONE).values() == {"us-west-2a"}


def test_should_fail_when_in_memory_topology_requirements_are_incompatible_with_node_claim():
    """Karpenter: should fail when in-memory topology requirements are incompatible with
    NodeClaim."""
    a = allocator([slice_("s1", devs("gpu-0"), node_selector=zone_sel("us-west-2a"))])
    c = claim("zonal-claim", req("gpu"))
    a.allocate(node_claim("nc-a", IT1, requirements=TWO_ZONES), [c]).allocation.commit()
    nc_b = node_claim("nc-b", IT1, requirements={ZONE: ["eu-west-1a"]})
    fails(a, nc_b, [c], "incompatible")


def test_should_merge_in_memory_requirements_into_the_baseline_for_subsequent_unallocated_claims():
    """Karpenter: should merge in-memory requirements into the baseline for subsequent
    unallocated claims."""
    classes = {
        "gpu-class": device_class("gpu-class", f'device.driver == "{GPU}"'),
        "fpga-class": device_class("fpga-class", f'device.driver == "{FPGA}"'),
    }
    a = allocator(zonal_pools("gpu") + zonal_pools("fpga", FPGA), classes=classes)
    anywhere = [{"key": ZONE, "operator": "Exists"}]
    first = claim("zonal-claim", req("gpu", "gpu-class"))
    a.allocate(node_claim("nc-a", IT1, expressions=anywhere), [first]).allocation.commit()
    (zone,) = a.claim_metadata["default/zonal-claim"].requirements.get(ZONE).values()
    r = a.allocate(
        node_claim("nc-b", IT1, expressions=anywhere),
        [first, claim("new-claim", req("fpga", "fpga-class"))],
    )
    assert r.requirements.get(ZONE).values() == {zone}
    r.allocation.commit()
    (device,) = a.claim_devices("default/new-claim")
    assert zone in device.pool


def test_should_fail_when_two_in_memory_allocated_claims_have_incompatible_zones():
    """Karpenter: should fail when two in-memory allocated claims have incompatible zones."""
    a = allocator(zonal_pools())
    claim_a = claim("claim-zone-a", req("gpu"))
    claim_b = claim("claim-zone-b", req("gpu"))
    a.allocate(node_claim("nc-a", IT1, requirements=TWO_ZONES), [claim_a]).allocation.commit()
    a.allocate(node_claim("nc-b", IT1, requirements=TWO_ZONES), [claim_b]).allocation.commit()
    assert a.claim_devices("default/claim-zone-a")[0].pool.endswith("us-west-2a")
    assert a.claim_devices("default/claim-zone-b")[0].pool.endswith("us-west-2b")
    fails(a, node_claim("nc-c", IT1, requirements=TWO_ZONES), [claim_a, claim_b], "incompatible")
