"""Karpenter allocator_test.go: SharedCounters in-cluster, zero capacity, release and
pessimistic max, templates.

A partitionable H100 publishes its memory as a counter set; each MIG-like slice of it is a
device drawing from that set. The counter set lives in its own ResourceSlice of the pool.
"""

from __future__ import annotations

import pytest

from tests.allocator.karpenter.kit import (
    IT1,
    IT2,
    IT3,
    IT4,
    NIC,
    allocator,
    claim,
    counter_pool,
    dev,
    did,
    fails,
    names,
    node_claim,
    req,
    shared,
    slice_,
    tmpl,
    zone_sel,
)

TIER = 'device.attributes["gpu.nvidia.com"].tier == "{}"'
KIND = 'device.attributes["gpu.nvidia.com"].kind == "{}"'


def mem_gpus(budget: str, *each: str, counter_set: str = "gpu-0-memory"):
    """One pool: a memory budget and GPU partitions gpu-0.. drawing ``each`` from it."""
    return counter_pool(
        [shared(counter_set, memory=budget)],
        [dev(f"gpu-{i}", **{counter_set: {"memory": m}}) for i, m in enumerate(each)],
    )


def nic_pool(budget: str, *each: str):
    return counter_pool(
        [shared("port-bandwidth", bandwidth=budget)],
        [dev(f"nic-{i}", **{"port-bandwidth": {"bandwidth": b}}) for i, b in enumerate(each)],
        pool="pool-b",
        driver=NIC,
    )


def one(a, nc_id, *its, claim_name="c", **kw):
    """Allocate one claim on a NodeClaim and commit it."""
    r = a.allocate(node_claim(nc_id, *its), [claim(claim_name, req("gpu", **kw))])
    r.allocation.commit()
    return r


# --- Describe("SharedCounters — in-cluster") ---------------------------------------------------


def test_should_allocate_devices_when_counter_budget_is_sufficient():
    """Karpenter: should allocate devices when counter budget is sufficient."""
    a = allocator(mem_gpus("80Gi", "40Gi", "40Gi"))
    r = a.allocate(node_claim("nc", IT1), [claim("c1", req("gpu", count=2))])
    assert names(r) == ["gpu-0", "gpu-1"]


def test_should_reject_allocation_when_counter_budget_is_exhausted():
    """Karpenter: should reject allocation when counter budget is exhausted."""
    a = allocator(mem_gpus("80Gi", "40Gi", "40Gi", "40Gi"))
    fails(a, node_claim("nc", IT1), [claim("c1", req("gpu", count=3))], "counter")


def test_should_respect_preallocated_counter_consumption():
    """Karpenter: should respect preallocated counter consumption."""
    a = allocator(mem_gpus("80Gi", "40Gi", "40Gi"), allocated=[did("gpu-0")])
    r = a.allocate(node_claim("nc", IT1), [claim("c1", req("gpu"))])
    assert names(r) == ["gpu-1"]


def test_should_track_inflight_counter_consumption_across_pods():
    """Karpenter: should track inflight counter consumption across pods."""
    a = allocator(mem_gpus("80Gi", "40Gi", "40Gi", "40Gi"))
    one(a, "gpu-pool-1", IT1, count=2)
    # gpu-2 is free as a device, but the budget is spent by the first NodeClaim's pod.
    fails(a, node_claim("gpu-pool-2", IT1), [claim("c2", req("gpu"))], "counter")


def test_should_handle_devices_consuming_from_multiple_counter_sets():
    """Karpenter: should handle devices consuming from multiple counter sets."""
    both = {"memory-budget": {"memory": "40Gi"}, "compute-budget": {"flops": "50"}}
    a = allocator(
        counter_pool(
            [shared("memory-budget", memory="80Gi"), shared("compute-budget", flops="100")],
            [dev("gpu-0", **both), dev("gpu-1", **both), dev("gpu-2", **both)],
        )
    )
    nc = node_claim("nc", IT1)
    assert names(a.allocate(nc, [claim("c1", req("gpu", count=2))])) == ["gpu-0", "gpu-1"]
    fails(a, nc, [claim("c3", req("gpu", count=3))])


def test_should_deduct_preallocated_non_targeting_devices_from_counter_budget():
    """Karpenter: should deduct preallocated NonTargetingDevices from counter budget."""
    # gpu-far is reachable only from eu-west-1a, yet it draws from the same 80Gi: held, it
    # leaves 40Gi to the NodeClaim in us-west-2a.
    far = slice_(
        "pool-a-far",
        [dev("gpu-far", **{"gpu-0-memory": {"memory": "40Gi"}})],
        count=3,
        node_selector=zone_sel("eu-west-1a"),
    )
    slices = counter_pool(
        [shared("gpu-0-memory", memory="80Gi")],
        [dev("gpu-0", **{"gpu-0-memory": {"memory": "40Gi"}})],
        extra=[far],
    )
    a = allocator(slices, allocated=[did("gpu-far")])
    nc = node_claim("nc", IT1, requirements={"topology.kubernetes.io/zone": ["us-west-2a"]})
    assert names(a.allocate(nc, [claim("c1", req("gpu"))])) == ["gpu-0"]
    # The same pool with a 60Gi budget: the held far device leaves too little.
    tight = counter_pool(
        [shared("gpu-0-memory", memory="60Gi")],
        [dev("gpu-0", **{"gpu-0-memory": {"memory": "40Gi"}})],
        extra=[far],
    )
    fails(allocator(tight, allocated=[did("gpu-far")]), nc, [claim("c1", req("gpu"))])


def _bad_set_in_cluster():
    slices = counter_pool(
        [shared("gpu-0-memory", memory="80Gi")],
        [dev("gpu-0", **{"gpu-9-memory": {"memory": "40Gi"}})],
    )
    return allocator(slices), node_claim("nc", IT1)


def _bad_counter_in_cluster():
    slices = counter_pool(
        [shared("gpu-0-memory", memory="80Gi")],
        [dev("gpu-0", **{"gpu-0-memory": {"sm-count": "40Gi"}})],
    )
    return allocator(slices), node_claim("nc", IT1)


def _bad_set_template():
    t = tmpl(
        "p5-gpus",
        [dev("gpu-0", **{"gpu-9-memory": {"memory": "40Gi"}})],
        counters=[shared("gpu-0-memory", memory="80Gi")],
    )
    return allocator(), node_claim("nc", templates={IT1: [t]})


def _bad_counter_template():
    t = tmpl(
        "p5-gpus",
        [dev("gpu-0", **{"gpu-0-memory": {"sm-count": "40Gi"}})],
        counters=[shared("gpu-0-memory", memory="80Gi")],
    )
    return allocator(), node_claim("nc", templates={IT1: [t]})


@pytest.mark.parametrize(
    "setup",
    [_bad_set_in_cluster, _bad_counter_in_cluster, _bad_set_template, _bad_counter_template],
    ids=[
        "in-cluster device references non-existent counter set name",
        "in-cluster device references non-existent counter name",
        "template device references non-existent counter set",
        "template device references non-existent counter name",
    ],
)
def test_should_reject_allocation_when_device_references_invalid_counters(setup):
    """Karpenter: should reject allocation when device references invalid counters."""
    a, nc = setup()
    fails(a, nc, [claim("c1", req("gpu"))])


# --- Describe("SharedCounters — zero capacity edge cases") -------------------------------------


def test_should_reject_allocation_when_counter_has_zero_capacity():
    """Karpenter: should reject allocation when counter has zero capacity."""
    slices = counter_pool(
        [shared("slots", gpu="0")],
        [dev("gpu-0", slots={"gpu": "1"}), dev("gpu-1", slots={"gpu": "1"})],
    )
    fails(allocator(slices), node_claim("nc", IT1), [claim("c1", req("gpu"))])


def test_should_succeed_when_both_counter_capacity_and_device_consumption_are_zero():
    """Karpenter: should succeed when both counter capacity and device consumption are zero."""
    slices = counter_pool([shared("slots", gpu="0")], [dev("gpu-0", slots={"gpu": "0"})])
    r = allocator(slices).allocate(node_claim("nc", IT1), [claim("c1", req("gpu"))])
    assert names(r) == ["gpu-0"]


# --- Describe("SharedCounters — release and pessimistic max") ----------------------------------


def test_should_restore_counter_budget_when_an_instance_type_is_released():
    """Karpenter: should restore counter budget when an instance type is released."""
    a = allocator(mem_gpus("80Gi", "40Gi", "40Gi", "40Gi"))
    one(a, "gpu-pool-a", IT1, count=2)
    c2 = claim("c2", req("gpu"))
    fails(a, node_claim("gpu-pool-b", IT1), [c2])
    a.release_instance_type("gpu-pool-a", IT1)
    assert names(a.allocate(node_claim("gpu-pool-b", IT1), [c2])) == ["gpu-0"]


def test_should_commit_the_pessimistic_max_across_instance_types():
    """Karpenter: should commit the pessimistic max across instance types."""
    a = allocator(mem_gpus("120Gi", "40Gi", "40Gi", "40Gi"))
    r1 = one(a, "gpu-pool-a", IT1, IT2)
    assert r1.instance_types == [IT1, IT2]
    assert names(r1, instance_type=IT1) == names(r1, instance_type=IT2) == ["gpu-0"]
    # Both instance types took gpu-0: 40Gi held, 80Gi left for gpu-1 and gpu-2.
    r2 = a.allocate(node_claim("gpu-pool-b", IT3), [claim("c2", req("gpu", count=2))])
    assert names(r2) == ["gpu-1", "gpu-2"]


def test_should_handle_multiple_counter_sets_in_a_single_pool():
    """Karpenter: should handle multiple counter sets in a single pool."""
    draw = {"gpu-resources": {"memory": "40Gi", "compute-units": "2"}}
    a = allocator(
        counter_pool(
            [shared("gpu-resources", memory="80Gi", **{"compute-units": "4"})],
            [dev("gpu-0", **draw), dev("gpu-1", **draw), dev("gpu-2", **draw)],
        )
    )
    nc = node_claim("nc", IT1)
    assert names(a.allocate(nc, [claim("c1", req("gpu", count=2))])) == ["gpu-0", "gpu-1"]
    fails(a, nc, [claim("c3", req("gpu", count=3))])


def test_should_backtrack_counter_deductions_when_dfs_path_fails_constraints():
    """Karpenter: should backtrack counter deductions when DFS path fails constraints."""
    from tests.allocator.karpenter.kit import NUMA, match

    draw = {"gpu-0-memory": {"memory": "40Gi"}}
    a = allocator(
        counter_pool(
            [shared("gpu-0-memory", memory="80Gi")],
            [
                dev("gpu-0", {NUMA: "numa-0"}, **draw),
                dev("gpu-2", {NUMA: "numa-1"}, **draw),
                dev("gpu-1", {NUMA: "numa-0"}, **draw),
            ],
        )
    )
    c = claim("c1", req("gpu", count=2), constraints=[match(NUMA)])
    # gpu-2 is tried second and dropped: its 40Gi must come back for gpu-1.
    assert names(a.allocate(node_claim("nc", IT1), [c])) == ["gpu-0", "gpu-1"]


def test_should_enforce_all_mode_counter_budget():
    """Karpenter: should enforce all-mode counter budget."""
    from tests.allocator.karpenter.kit import all_req

    a = allocator(mem_gpus("60Gi", "40Gi", "40Gi"))
    fails(a, node_claim("nc", IT1), [claim("c1", all_req("gpu"))])


def test_should_succeed_with_all_mode_counters_on_first_pod_when_budget_is_sufficient():
    """Karpenter: should succeed with all-mode counters on first pod when budget is sufficient."""
    from tests.allocator.karpenter.kit import all_req

    a = allocator(mem_gpus("80Gi", "30Gi", "30Gi"))
    r = a.allocate(node_claim("nc", IT1), [claim("c1", all_req("gpu"))])
    assert names(r) == ["gpu-0", "gpu-1"]


def test_should_partially_refund_counter_budget_when_one_it_is_released_from_a_multi_it_nc():
    """Karpenter: should partially refund counter budget when one IT is released from a
    multi-IT NC."""
    a = allocator(mem_gpus("120Gi", "40Gi", "40Gi", "40Gi"))
    r1 = one(a, "gpu-pool-a", IT1, IT2, count=2)
    assert r1.instance_types == [IT1, IT2]
    c2 = claim("c2", req("gpu", count=2))
    fails(a, node_claim("gpu-pool-b", IT3), [c2])
    a.release_instance_type("gpu-pool-a", IT1)  # IT2 still holds gpu-0 and gpu-1
    fails(a, node_claim("gpu-pool-b", IT3), [c2])
    a.release_instance_type("gpu-pool-a", IT2)
    assert names(a.allocate(node_claim("gpu-pool-b", IT3), [c2])) == ["gpu-0", "gpu-1"]


def test_should_commit_the_pessimistic_max_when_its_have_asymmetric_counter_consumption():
    """Karpenter: should commit the pessimistic max when ITs have asymmetric counter
    consumption."""
    a = allocator(mem_gpus("120Gi", "40Gi", "40Gi", "40Gi"))
    one(a, "gpu-pool-a", IT1, IT2, claim_name="c1a")
    one(a, "gpu-pool-a", IT1, IT2, claim_name="c1b")
    # 80Gi held by gpu-pool-a on either instance type: 40Gi left.
    assert names(a.allocate(node_claim("gpu-pool-b", IT3), [claim("c2", req("gpu"))])) == ["gpu-2"]
    fails(a, node_claim("gpu-pool-c", IT4), [claim("c3", req("gpu", count=2))])


def test_should_not_over_deduct_counters_across_multiple_commits_with_alternating_it_winners():
    """Karpenter: should not over-deduct counters across multiple commits with alternating IT
    winners."""
    from tests.allocator.karpenter.kit import CLASSES  # noqa: F401 (nic class is in the kit)

    a = allocator(mem_gpus("120Gi", "60Gi", "20Gi", "40Gi"))
    # Only p5 ships an EFA NIC: the first pod (GPU + NIC) keeps p5 alone.
    nc = node_claim(
        "gpu-pool-a", IT1, IT2, templates={IT1: [tmpl("p5-efa", ["efa-0"], driver=NIC)]}
    )
    r1 = a.allocate(nc, [claim("c1", req("gpu"), req("nic", "nic"))])
    assert r1.instance_types == [IT1]
    r1.allocation.commit()
    r2 = a.allocate(nc, [claim("c2", req("gpu"))])
    assert r2.instance_types == [IT1, IT2]
    assert names(r2, instance_type=IT1) == ["gpu-1"]
    assert names(r2, instance_type=IT2) == ["gpu-0"]
    r2.allocation.commit()
    # p5's 60 + 20 is the worst case: 40Gi left, exactly gpu-2's share.
    r3 = a.allocate(node_claim("gpu-pool-b", IT3), [claim("c3", req("gpu"))])
    assert names(r3) == ["gpu-2"]


def test_should_accumulate_counter_consumption_across_multiple_pods_on_the_same_nc_it():
    """Karpenter: should accumulate counter consumption across multiple pods on the same
    NC/IT."""
    a = allocator(mem_gpus("120Gi", "40Gi", "40Gi", "40Gi"))
    one(a, "gpu-pool-a", IT1, claim_name="c1")
    one(a, "gpu-pool-a", IT1, claim_name="c2")
    r3 = a.allocate(node_claim("gpu-pool-b", IT2), [claim("c3", req("gpu"))])
    assert names(r3) == ["gpu-2"]
    fails(a, node_claim("gpu-pool-b", IT2), [claim("c4", req("gpu", count=2))])


def test_should_partially_refund_when_released_it_had_higher_consumption_than_survivors():
    """Karpenter: should partially refund when released IT had higher consumption than
    survivors."""
    a = allocator(mem_gpus("120Gi", "40Gi", "40Gi", "40Gi"))
    assert one(a, "gpu-pool-a", IT1, IT2, count=2).instance_types == [IT1, IT2]
    a.release_instance_type("gpu-pool-a", IT1)
    fails(a, node_claim("gpu-pool-b", IT3), [claim("c2", req("gpu", count=2))])
    r3 = a.allocate(node_claim("gpu-pool-b", IT3), [claim("c3", req("gpu"))])
    assert names(r3) == ["gpu-2"]


def test_should_not_refund_counters_when_released_it_had_lower_consumption_than_survivors():
    """Karpenter: should not refund counters when released IT had lower consumption than
    survivors (delta <= 0)."""
    a = allocator(mem_gpus("160Gi", "40Gi", "40Gi", "40Gi", "40Gi"))
    one(a, "gpu-pool-a", IT1, IT2, claim_name="c1")
    one(a, "gpu-pool-a", IT1, IT2, claim_name="c2", count=2)
    a.release_instance_type("gpu-pool-a", IT1)
    # IT2 still holds 120Gi: one 40Gi partition is left.
    assert names(a.allocate(node_claim("gpu-pool-b", IT3), [claim("c3", req("gpu"))])) == ["gpu-3"]
    fails(a, node_claim("gpu-pool-b", IT3), [claim("c4", req("gpu", count=2))])


def test_should_not_cross_contaminate_counters_between_template_and_in_cluster_pools():
    """Karpenter: should not cross-contaminate counters between template and in-cluster pools
    sharing the same PoolKey."""
    slices = counter_pool(
        [shared("gpu-0-memory", memory="50Gi")],
        [dev("gpu-0", **{"gpu-0-memory": {"memory": "50Gi"}})],
        pool="shared-pool",
    )
    t = tmpl(
        "shared-pool",
        [dev("nvidia0", **{"gpu-0-memory": {"memory": "50Gi"}})],
        counters=[shared("gpu-0-memory", memory="50Gi")],
    )
    r = allocator(slices).allocate(
        node_claim("nc", templates={IT1: [t]}), [claim("c1", req("gpu", count=2))]
    )
    assert r.instance_types == [IT1]
    assert [(d.source, d.device) for d in r.claims[0].devices] == [
        ("in-cluster", "gpu-0"),
        ("template", "nvidia0"),
    ]


def test_should_refund_full_delta_when_released_it_consumed_from_a_pool_the_survivor_did_not():
    """Karpenter: should refund full delta when released IT consumed from a pool the survivor
    did not."""
    a = allocator(mem_gpus("100Gi", "50Gi", "50Gi") + nic_pool("100G", "50G", "50G"))
    r1 = a.allocate(node_claim("nc-1", IT1), [claim("c1", req("gpu"), req("nic", "nic"))])
    r1.allocation.commit()
    one(a, "nc-2", IT2, claim_name="c2")
    a.release_instance_type("nc-1", IT1)
    r3 = a.allocate(node_claim("nc-3", IT3), [claim("c-ok", req("nic", "nic", 2))])
    assert names(r3) == ["nic-0", "nic-1"]


def test_should_refund_full_delta_when_released_it_consumed_from_a_counter_set_the_survivor_did_not():
    """Karpenter: should refund full delta when released IT consumed from a counter set the
    survivor did not."""
    a = allocator(
        counter_pool(
            [shared("memory-budget", memory="80Gi"), shared("compute-budget", flops="100")],
            [
                dev(
                    "gpu-0",
                    {"gpu.nvidia.com/tier": "high"},
                    **{"memory-budget": {"memory": "40Gi"}, "compute-budget": {"flops": "50"}},
                ),
                dev(
                    "gpu-1",
                    {"gpu.nvidia.com/tier": "low"},
                    **{"memory-budget": {"memory": "40Gi"}},
                ),
            ],
        )
    )
    nc = node_claim("gpu-pool-a", IT1, IT2)
    r1 = a.allocate(nc, [claim("c1", req("gpu", selector=TIER.format("high")))])
    assert r1.instance_types == [IT1, IT2]
    r1.allocation.commit()
    a.allocate(nc, [claim("c2", req("gpu", selector=TIER.format("low")))]).allocation.commit()
    a.release_instance_type("gpu-pool-a", IT1)
    a.release_instance_type("gpu-pool-a", IT2)
    r3 = a.allocate(node_claim("gpu-pool-b", IT3), [claim("c3", req("gpu", count=2))])
    assert names(r3) == ["gpu-0", "gpu-1"]


def test_should_refund_full_delta_when_released_it_consumed_a_counter_name_the_survivor_did_not():
    """Karpenter: should refund full delta when released IT consumed a counter name the
    survivor did not."""
    a = allocator(
        counter_pool(
            [shared("resource-budget", memory="100Gi", bandwidth="200G")],
            [
                dev(
                    "dev-full",
                    {"gpu.nvidia.com/tier": "full"},
                    **{"resource-budget": {"memory": "50Gi", "bandwidth": "100G"}},
                ),
                dev(
                    "dev-lite",
                    {"gpu.nvidia.com/tier": "lite"},
                    **{"resource-budget": {"memory": "50Gi"}},
                ),
            ],
        )
    )
    nc = node_claim("gpu-pool-a", IT1, IT2)
    r1 = a.allocate(nc, [claim("c1", req("gpu", selector=TIER.format("full")))])
    assert r1.instance_types == [IT1, IT2]
    r1.allocation.commit()
    a.allocate(nc, [claim("c2", req("gpu", selector=TIER.format("lite")))]).allocation.commit()
    a.release_instance_type("gpu-pool-a", IT1)
    a.release_instance_type("gpu-pool-a", IT2)
    r3 = a.allocate(node_claim("gpu-pool-b", IT3), [claim("c3", req("gpu", count=2))])
    assert names(r3) == ["dev-full", "dev-lite"]


def _kinds_pool(*extra_counters):
    return counter_pool(
        [shared("resource-budget", memory="80Gi", flops="100")],
        [
            dev(
                "dev-mem-0",
                {"gpu.nvidia.com/kind": "mem"},
                **{"resource-budget": {"memory": "40Gi"}},
            ),
            dev(
                "dev-mem-1",
                {"gpu.nvidia.com/kind": "mem"},
                **{"resource-budget": {"memory": "40Gi"}},
            ),
            dev(
                "dev-compute-0",
                {"gpu.nvidia.com/kind": "compute"},
                **{"resource-budget": {"flops": "50"}},
            ),
        ],
    )


def test_should_include_disjoint_counter_names_from_different_its_in_pessimistic_max():
    """Karpenter: should include disjoint counter names from different ITs in pessimistic max."""
    a = allocator(_kinds_pool())
    nc = node_claim("gpu-pool-a", IT1, IT2)
    a.allocate(nc, [claim("c1", req("gpu", selector=KIND.format("mem")))]).allocation.commit()
    a.allocate(nc, [claim("c2", req("gpu", selector=KIND.format("compute")))]).allocation.commit()
    r3 = a.allocate(
        node_claim("gpu-pool-b", IT3), [claim("c3", req("gpu", selector=KIND.format("mem")))]
    )
    assert names(r3) == ["dev-mem-1"]


def test_should_accumulate_counter_consumption_from_a_new_pool_on_second_commit_for_the_same_nc_it():
    """Karpenter: should accumulate counter consumption from a new pool on second commit for
    the same NC/IT."""
    a = allocator(mem_gpus("80Gi", "40Gi") + nic_pool("100G", "50G"))
    one(a, "gpu-pool-a", IT1, claim_name="c1")
    a.allocate(node_claim("gpu-pool-a", IT1), [claim("c2", req("nic", "nic"))]).allocation.commit()
    both = [claim("c3", req("gpu"), req("nic", "nic"))]
    fails(a, node_claim("gpu-pool-b", IT2), both)
    a.release_instance_type("gpu-pool-a", IT1)
    r3 = a.allocate(node_claim("gpu-pool-b", IT2), both)
    assert names(r3) == ["gpu-0", "nic-0"]


def test_should_accumulate_counter_consumption_from_a_new_counter_set_on_second_commit():
    """Karpenter: should accumulate counter consumption from a new counter set on second
    commit for the same NC/IT/pool."""
    a = allocator(
        counter_pool(
            [shared("memory-budget", memory="80Gi"), shared("compute-budget", flops="100")],
            [
                dev(
                    "gpu-mem",
                    {"gpu.nvidia.com/kind": "mem"},
                    **{"memory-budget": {"memory": "40Gi"}},
                ),
                dev(
                    "gpu-compute",
                    {"gpu.nvidia.com/kind": "compute"},
                    **{"compute-budget": {"flops": "50"}},
                ),
            ],
        )
    )
    nc = node_claim("gpu-pool-a", IT1)
    a.allocate(nc, [claim("c1", req("gpu", selector=KIND.format("mem")))]).allocation.commit()
    a.allocate(nc, [claim("c2", req("gpu", selector=KIND.format("compute")))]).allocation.commit()
    two = [claim("c3", req("gpu", count=2))]
    fails(a, node_claim("gpu-pool-b", IT2), two)
    a.release_instance_type("gpu-pool-a", IT1)
    assert names(a.allocate(node_claim("gpu-pool-b", IT2), two)) == ["gpu-mem", "gpu-compute"]


def test_should_deep_copy_allocating_counters_across_multiple_pools():
    """Karpenter: should deep copy allocating counters across multiple pools."""
    a = allocator(mem_gpus("80Gi", "40Gi", "40Gi") + nic_pool("100G", "50G", "50G"))
    r1 = a.allocate(
        node_claim("gpu-pool-a", IT1),
        [claim("c-gpu", req("gpu", count=2)), claim("c-nic", req("nic", "nic", 2))],
    )
    r1.allocation.commit()
    fails(a, node_claim("gpu-pool-b", IT2), [claim("c2-gpu", req("gpu"))])
    a.release_instance_type("gpu-pool-a", IT1)
    r3 = a.allocate(
        node_claim("gpu-pool-b", IT2),
        [claim("c3-gpu", req("gpu", count=2)), claim("c3-nic", req("nic", "nic", 2))],
    )
    assert names(r3, 0) == ["gpu-0", "gpu-1"] and names(r3, 1) == ["nic-0", "nic-1"]


# --- Describe("SharedCounters — templates") ----------------------------------------------------


def mig_template(pool: str, budget: str, *each: str, counter_set: str = "gpu-0-memory"):
    return tmpl(
        pool,
        [dev(f"gpu-{i}", **{counter_set: {"memory": m}}) for i, m in enumerate(each)],
        counters=[shared(counter_set, memory=budget)],
    )


def test_should_allocate_template_devices_when_counter_budget_is_sufficient():
    """Karpenter: should allocate template devices when counter budget is sufficient."""
    nc = node_claim("nc", templates={IT1: [mig_template("p5-gpus", "80Gi", "40Gi", "40Gi")]})
    r = allocator().allocate(nc, [claim("c1", req("gpu", count=2))])
    assert r.instance_types == [IT1]
    assert names(r) == ["gpu-0", "gpu-1"]


def test_should_reject_template_allocation_when_counter_budget_is_exhausted():
    """Karpenter: should reject template allocation when counter budget is exhausted."""
    t = mig_template("p5-gpus", "80Gi", "40Gi", "40Gi", "40Gi")
    fails(allocator(), node_claim("nc", templates={IT1: [t]}), [claim("c1", req("gpu", count=3))])


def test_should_evaluate_template_counters_independently_per_instance_type():
    """Karpenter: should evaluate template counters independently per instance type."""
    nc = node_claim(
        "nc",
        templates={
            "p5e.48xlarge": [mig_template("p5e-gpus", "160Gi", "40Gi", "40Gi", "40Gi")],
            "g6e.12xlarge": [mig_template("g6e-gpus", "80Gi", "40Gi", "40Gi", "40Gi")],
        },
    )
    r = allocator().allocate(nc, [claim("c1", req("gpu", count=3))])
    assert r.instance_types == ["p5e.48xlarge"]
    assert "g6e.12xlarge" in r.failed_instance_types


def test_should_not_share_template_counter_budgets_across_pods():
    """Karpenter: should not share template counter budgets across pods."""
    t = mig_template("p5-gpus", "80Gi", "40Gi", "40Gi")
    a = allocator()
    a.allocate(
        node_claim("gpu-pool-a", templates={IT1: [t]}), [claim("c1", req("gpu", count=2))]
    ).allocation.commit()
    r2 = a.allocate(
        node_claim("gpu-pool-b", templates={IT1: [t]}), [claim("c2", req("gpu", count=2))]
    )
    assert names(r2) == ["gpu-0", "gpu-1"]


def test_should_accumulate_template_counter_consumption_across_multiple_pods_on_the_same_nc_it():
    """Karpenter: should accumulate template counter consumption across multiple pods on the
    same NC/IT."""
    t = mig_template("p5-gpus", "80Gi", "40Gi", "40Gi", "40Gi", "40Gi")
    a = allocator()
    nc = node_claim("gpu-pool-a", templates={IT1: [t]})
    a.allocate(nc, [claim("c1", req("gpu", count=2))]).allocation.commit()
    fails(a, nc, [claim("c2", req("gpu"))], "counter")


def test_should_allow_template_counter_allocation_on_a_different_nc_after_exhausting_budget_on_the_first():
    """Karpenter: should allow template counter allocation on a different NC after exhausting
    budget on the first."""
    t = mig_template("p5-gpus", "80Gi", "40Gi", "40Gi", "40Gi")
    a = allocator()
    a.allocate(
        node_claim("gpu-pool-a", templates={IT1: [t]}), [claim("c1", req("gpu", count=2))]
    ).allocation.commit()
    r2 = a.allocate(
        node_claim("gpu-pool-b", templates={IT1: [t]}), [claim("c2", req("gpu", count=2))]
    )
    assert names(r2) == ["gpu-0", "gpu-1"]


def test_should_release_template_counter_budget_when_instance_type_is_pruned():
    """Karpenter: should release template counter budget when instance type is pruned."""
    t = mig_template("p5-gpus", "80Gi", "40Gi", "40Gi", "40Gi")
    a = allocator()
    a.allocate(
        node_claim("gpu-pool-a", templates={IT1: [t]}), [claim("c1", req("gpu", count=2))]
    ).allocation.commit()
    a.release_instance_type("gpu-pool-a", IT1)
    r2 = a.allocate(
        node_claim("gpu-pool-a", templates={IT2: [t]}), [claim("c2", req("gpu", count=2))]
    )
    assert names(r2) == ["gpu-0", "gpu-1"]
    # And on the released instance type itself the whole budget is back.
    r3 = a.allocate(
        node_claim("gpu-pool-a", templates={IT1: [t]}), [claim("c3", req("gpu", count=2))]
    )
    assert names(r3) == ["gpu-0", "gpu-1"]


def test_should_track_template_counter_deductions_within_a_single_claim_with_multiple_requests():
    """Karpenter: should track template counter deductions within a single claim with multiple
    requests."""
    t = mig_template("p5-gpus", "80Gi", "40Gi", "40Gi", "40Gi")
    c = claim("c1", req("train", count=2), req("infer", count=1))
    fails(allocator(), node_claim("nc", templates={IT1: [t]}), [c])


def test_should_handle_multiple_template_slices_for_the_same_pool_key():
    """Karpenter: should handle multiple template slices for the same pool key."""
    first = mig_template("p5-gpus", "40Gi", "20Gi")
    second = tmpl(
        "p5-gpus",
        [dev(f"gpu-{i}", **{"gpu-0-memory": {"memory": "20Gi"}}) for i in (1, 2)],
        counters=[shared("gpu-0-memory", memory="60Gi")],
    )
    r = allocator().allocate(
        node_claim("nc", templates={IT1: [first, second]}), [claim("c1", req("gpu", count=3))]
    )
    assert names(r) == ["gpu-0", "gpu-1", "gpu-2"]


def test_should_handle_multiple_counter_sets_per_template_slice():
    """Karpenter: should handle multiple counter sets per template slice."""
    both = {"memory-budget": {"memory": "40Gi"}, "compute-budget": {"flops": "50"}}
    t = tmpl(
        "p5-gpus",
        [dev("gpu-0", **both), dev("gpu-1", **both)],
        counters=[shared("memory-budget", memory="80Gi"), shared("compute-budget", flops="100")],
    )
    r = allocator().allocate(
        node_claim("nc", templates={IT1: [t]}), [claim("c1", req("gpu", count=2))]
    )
    assert names(r) == ["gpu-0", "gpu-1"]


def test_should_reject_template_device_when_template_remaining_counters_is_nil():
    """Karpenter: should reject template device when templateRemainingCounters is nil."""
    # The template's devices draw from a counter set no template of the instance type defines.
    t = tmpl("p5-gpus", [dev("gpu-0", **{"gpu-0-memory": {"memory": "40Gi"}})])
    fails(allocator(), node_claim("nc", templates={IT1: [t]}), [claim("c1", req("gpu"))])


def test_should_reject_template_device_when_its_pool_has_no_entry_in_template_remaining_counters():
    """Karpenter: should reject template device when its pool has no entry in
    templateRemainingCounters."""
    with_counters = tmpl(
        "p5-gpus-a", [dev("gpu-a")], counters=[shared("gpu-0-memory", memory="80Gi")]
    )
    without = tmpl("p5-gpus-b", [dev("gpu-b", **{"gpu-0-memory": {"memory": "40Gi"}})])
    nc = node_claim("nc", templates={IT1: [with_counters, without]})
    fails(allocator(), nc, [claim("c1", req("gpu", count=2))])
    # One device is there to take: the counter-free one.
    assert names(allocator().allocate(nc, [claim("c2", req("gpu"))])) == ["gpu-a"]
