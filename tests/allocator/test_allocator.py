"""The Allocator across calls: results, commit, release, in-memory claims, accumulation."""

from __future__ import annotations

import pytest

from allocator.claims import ALLOCATED_IN_CLUSTER, ALLOCATED_IN_MEMORY, REALLOCATED, UNALLOCATED
from allocator.errors import AllocationError, ValidationError
from allocator.model import DeviceID, PoolKey
from tests.allocator.builders import (
    GPU,
    NIC,
    P4D,
    P5,
    ZONE,
    allocate_in_cluster,
    claim,
    exact,
    existing_node,
    first_available,
    gpu,
    gpus,
    in_flight,
    instance_type,
    make_allocator,
    nic,
    picked,
    resource_slice,
    template,
    zone_selector,
)

RACK_GPU = DeviceID(GPU, "rack", "gpu-0")
BARE = instance_type("p5.48xlarge")  # no template devices


def test_nothing_to_allocate_returns_every_instance_type():
    a = make_allocator(instance_types=[P5, P4D])
    nc = in_flight("gpu-pool-1", [P5, P4D])
    held = allocate_in_cluster(
        claim("ready", exact("gpu")),
        [("gpu", RACK_GPU)],
        node_selector=zone_selector("us-west-2a"),
        reserved_for_pods=["train-0"],
    )
    r = a.allocate(nc, [held])
    assert r.instance_types == ["p5.48xlarge", "p4d.24xlarge"]
    assert r.claims[0].state == ALLOCATED_IN_CLUSTER
    assert [d.device for d in r.claims[0].devices] == ["gpu-0"]
    assert r.requirements.get(ZONE).values() == {"us-west-2a"}
    r.allocation.commit()  # a no-op handle
    assert a.tracker.cluster == {}


def test_allocate_does_not_mutate_shared_state_until_commit():
    a = make_allocator([resource_slice("rack", gpus(1), all_nodes=True)], instance_types=[P5])
    nc = in_flight("gpu-pool-1", [P5])
    r = a.allocate(nc, [claim("c", exact("gpu"))])
    assert a.tracker.cluster == {} and a.pool_cache == {} and a.claim_metadata == {}
    r.allocation.commit()
    assert a.tracker.holders(RACK_GPU) == {"gpu-pool-1": {"p5.48xlarge"}}
    assert "gpu-pool-1" in a.pool_cache and "default/c" in a.claim_metadata


def test_requirements_accumulate_across_instance_types():
    # rack-a: zone a, amd64 only; rack-b: zone b. p5 (amd64) goes first and pins zone a;
    # g5g (arm64) could only use rack-b in zone b: a disjoint NodeClaim, so it is pruned.
    a_sel = {
        "nodeSelectorTerms": [
            {
                "matchExpressions": [
                    {"key": ZONE, "operator": "In", "values": ["us-west-2a"]},
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                ]
            }
        ]
    }
    slices = [
        resource_slice("rack-a", gpus(1), node_selector=a_sel),
        resource_slice("rack-b", gpus(1), node_selector=zone_selector("us-west-2b")),
    ]
    p5 = instance_type("p5.48xlarge")
    g5g = instance_type("g5g.16xlarge", arch="arm64")
    a = make_allocator(slices, instance_types=[p5, g5g])
    nc = in_flight("gpu-pool-1", [p5, g5g], requirements={ZONE: ["us-west-2a", "us-west-2b"]})
    r = a.allocate(nc, [claim("c", exact("gpu"))])
    assert r.instance_types == ["p5.48xlarge"]
    assert r.requirements.get(ZONE).values() == {"us-west-2a"}
    assert "g5g.16xlarge" in r.failed_instance_types
    # Evaluated alone, g5g does fit (zone b): only the accumulation pruned it.
    alone = a.allocate(
        in_flight("gpu-pool-2", [g5g], requirements={ZONE: ["us-west-2a", "us-west-2b"]}),
        [claim("c", exact("gpu"))],
    )
    assert alone.instance_types == ["g5g.16xlarge"]
    assert alone.requirements.get(ZONE).values() == {"us-west-2b"}


def test_cross_node_claim_contention_and_same_node_claim_other_instance_type():
    nics_only = instance_type("p4d.24xlarge", [template("p4d-nics", [nic("nic-0")], driver=NIC)])
    a = make_allocator(
        [resource_slice("rack", gpus(1), all_nodes=True)], instance_types=[P5, nics_only]
    )
    nc1 = in_flight("gpu-pool-1", [P5, nics_only])
    # Two GPUs: p5 uses the rack GPU plus a template GPU; p4d has only the rack GPU.
    r1 = a.allocate(nc1, [claim("two", exact("gpu", count=2))])
    assert r1.instance_types == ["p5.48xlarge"]
    r1.allocation.commit()
    assert a.tracker.holders(RACK_GPU) == {"gpu-pool-1": {"p5.48xlarge"}}
    # Same NodeClaim: p5 may not reuse the rack GPU, p4d may (one IT will be launched).
    r2 = a.allocate(nc1, [claim("one", exact("gpu"))])
    assert picked(r2, instance_type="p5.48xlarge") == [f"{GPU}/p5-gpus/gpu-1"]
    assert picked(r2, instance_type="p4d.24xlarge") == [f"{GPU}/rack/gpu-0"]
    # Another NodeClaim never gets it.
    with pytest.raises(AllocationError, match="no instance type can satisfy"):
        a.allocate(in_flight("gpu-pool-2", [nics_only]), [claim("other", exact("gpu"))])


def test_release_makes_devices_available_again():
    a = make_allocator([resource_slice("rack", gpus(1), all_nodes=True)], instance_types=[P5, P4D])
    nc1 = in_flight("gpu-pool-1", [P5, P4D])
    r = a.allocate(nc1, [claim("c", exact("gpu"))])
    assert r.instance_types == ["p5.48xlarge", "p4d.24xlarge"]
    r.allocation.commit()
    nc2 = in_flight("gpu-pool-2", [instance_type("c7i.48xlarge")])
    with pytest.raises(AllocationError):
        a.allocate(nc2, [claim("d", exact("gpu"))])
    a.release_instance_type("gpu-pool-1", "p5.48xlarge")
    with pytest.raises(AllocationError):  # p4d still holds it
        a.allocate(nc2, [claim("d", exact("gpu"))])
    assert [d.instance_type for d in a.claim_devices("default/c")] == [None]
    a.release_instance_type("gpu-pool-1", "p4d.24xlarge")
    assert picked(a.allocate(nc2, [claim("d", exact("gpu"))])) == [f"{GPU}/rack/gpu-0"]
    assert a.claim_devices("default/c") == []


def test_in_memory_reuse_of_a_template_claim():
    a = make_allocator(instance_types=[P5])
    shared = claim("shared-gpus", exact("gpu", count=2))
    nc1 = in_flight("gpu-pool-1", [P5])
    r = a.allocate(nc1, [shared])
    r.allocation.commit()
    again = a.allocate(nc1, [shared, claim("own", exact("gpu"))])
    assert [c.state for c in again.claims] == [ALLOCATED_IN_MEMORY, UNALLOCATED]
    assert picked(again, 0) == [f"{GPU}/p5-gpus/gpu-0", f"{GPU}/p5-gpus/gpu-1"]
    assert picked(again, 1) == [f"{GPU}/p5-gpus/gpu-2"]  # the shared claim's devices stay taken
    with pytest.raises(AllocationError, match="bound to a different in-flight NodeClaim"):
        a.allocate(in_flight("gpu-pool-2", [P5]), [shared])


def test_in_memory_reuse_of_an_in_cluster_claim_carries_its_topology():
    a = make_allocator(
        [resource_slice("rack-b", gpus(1), node_selector=zone_selector("us-west-2b"))],
        instance_types=[P5],
    )
    shared = claim("shared", exact("gpu"))
    both = {ZONE: ["us-west-2a", "us-west-2b"]}
    r = a.allocate(in_flight("gpu-pool-1", [P5], requirements=both), [shared])
    r.allocation.commit()
    r2 = a.allocate(in_flight("gpu-pool-2", [P5], requirements=both), [shared])
    assert r2.claims[0].state == ALLOCATED_IN_MEMORY
    assert r2.requirements.get(ZONE).values() == {"us-west-2b"}
    assert r2.instance_types == ["p5.48xlarge"]
    with pytest.raises(AllocationError, match="incompatible"):
        a.allocate(in_flight("gpu-pool-3", [P5], requirements={ZONE: ["us-west-2a"]}), [shared])


def test_claim_of_deleting_pods_is_reallocated_through_the_dfs():
    # The caller freed rack/gpu-0 from the seed because only a deleting pod held it.
    old = allocate_in_cluster(
        claim("train-0-gpu", exact("gpu")), [("gpu", RACK_GPU)], reserved_for_pods=["train-0"]
    )
    a = make_allocator(
        [resource_slice("rack", gpus(1), all_nodes=True)],
        instance_types=[P5],
        deleting_pods={"default/train-0"},
    )
    r = a.allocate(in_flight("gpu-pool-1", [P5]), [old])
    assert r.claims[0].state == REALLOCATED
    assert picked(r) == [f"{GPU}/rack/gpu-0"]
    # Once committed, a second pod of the same claim reuses the new allocation: no second DFS.
    r.allocation.commit()
    again = a.allocate(in_flight("gpu-pool-1", [P5]), [old])
    assert again.claims[0].state == ALLOCATED_IN_MEMORY
    assert again.allocation.device_ids() == {}
    assert [d.device for d in again.claims[0].devices] == ["gpu-0"]
    # A live consumer keeps it in place: no DFS, devices from its status.
    live = make_allocator(
        [resource_slice("rack", gpus(1), all_nodes=True)], allocated=[RACK_GPU], instance_types=[P5]
    )
    r = live.allocate(in_flight("gpu-pool-1", [P5]), [old])
    assert r.claims[0].state == ALLOCATED_IN_CLUSTER


def test_pool_cache_serves_the_next_allocation_of_the_node_claim():
    a = make_allocator(
        [resource_slice("rack-b", gpus(2), node_selector=zone_selector("us-west-2b"))],
        instance_types=[BARE],
    )
    nc = in_flight("gpu-pool-1", [BARE], requirements={ZONE: ["us-west-2a", "us-west-2b"]})
    a.allocate(nc, [claim("c1", exact("gpu"))]).allocation.commit()

    def no_scan(*args, **kw):
        raise AssertionError("the pool cache should have been used")

    a.universe.gather = no_scan
    r = a.allocate(nc, [claim("c2", exact("gpu"))])
    assert picked(r) == [f"{GPU}/rack-b/gpu-1"]
    # Re-filtered against tightened requirements: zone a now drops the pool.
    nc.requirements = nc.requirements.intersect(
        type(nc.requirements).from_labels({ZONE: "us-west-2a"})
    )
    with pytest.raises(AllocationError):
        a.allocate(nc, [claim("c3", exact("gpu"))])


def test_existing_node_result_and_claim_node_selector():
    a = make_allocator([resource_slice("node-a-gpus", gpus(2), node_name="ip-10-0-1-17")])
    r = a.allocate(existing_node("ip-10-0-1-17"), [claim("c", exact("gpu"))])
    assert r.instance_types == ["p5.48xlarge"]
    assert r.claims[0].node_selector == {
        "nodeSelectorTerms": [
            {
                "matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": ["ip-10-0-1-17"]}
                ]
            }
        ]
    }
    assert r.claims[0].devices[0].to_json() == {
        "request": "gpu",
        "driver": GPU,
        "pool": "node-a-gpus",
        "device": "gpu-0",
        "source": "in-cluster",
        "instanceType": None,
    }


def test_template_devices_listed_per_instance_type_in_cluster_once():
    a = make_allocator(
        [resource_slice("rack", [gpu("gpu-0")], all_nodes=True)], instance_types=[P5, P4D]
    )
    r = a.allocate(in_flight("gpu-pool-1", [P5, P4D]), [claim("c", exact("gpu", count=2))])
    devs = r.claims[0].devices
    assert [(d.device, d.source, d.instance_type) for d in devs] == [
        ("gpu-0", "in-cluster", None),
        ("gpu-0", "template", "p5.48xlarge"),
        ("gpu-0", "template", "p4d.24xlarge"),
    ]
    assert [d.instance_type for d in r.claims[0].devices_for(["p4d.24xlarge"])] == [
        None,
        "p4d.24xlarge",
    ]


def test_validation_errors_surface_from_allocate():
    a = make_allocator(instance_types=[P5])
    with pytest.raises(AllocationError, match="not found"):
        a.allocate(in_flight("gpu-pool-1", [P5]), [claim("c", exact("gpu", "tpu.google.com"))])


def test_a_refusal_carries_its_funnels_count_stage_and_reach():
    # One instance type (an existing node): the scheduler keeps the count stage and the
    # pools it read to refuse the same requests there again without a search.
    a = make_allocator([resource_slice("node-a-gpus", gpus(2), node_name="node-a")])
    l4 = exact("gpu", selectors=['device.attributes["gpu.nvidia.com"].model == "L4"'])
    with pytest.raises(AllocationError) as err:
        a.allocate(existing_node("node-a"), [claim("infer", l4)])
    assert err.value.code == "no-instance-type"
    (funnel,) = err.value.funnels
    assert (funnel.request, funnel.candidates, funnel.usable) == ("gpu", 2, 0)
    assert err.value.counted == [(0, "gpu", funnel)]
    assert err.value.reach == (PoolKey(GPU, "node-a-gpus"),)


def test_a_validation_error_names_its_request_and_the_funnel_shows_it():
    a = make_allocator(instance_types=[P5])
    c = claim("c", exact("gpu"), exact("accel", "tpu.google.com"))
    with pytest.raises(ValidationError) as err:
        a.allocate(in_flight("gpu-pool-1", [P5]), [c])
    assert err.value.code == "validation" and err.value.request == "accel"
    assert err.value.reach is None and err.value.counted is None
    (funnel,) = err.value.funnels
    assert (funnel.request, funnel.candidates) == ("accel", 0)
    assert funnel.whole == str(err.value)


def test_instance_types_refused_in_the_same_words_share_one_clause_of_the_error():
    # Six sizes of one family with 8 GPUs and two with 4: a claim for 16 GPUs is refused by
    # each the same way per GPU count, so the error names three of a kind and counts the rest.
    eights = [
        instance_type(f"p5.{size}", [template(f"p5-{size}-gpus", gpus(8))])
        for size in ("4xl", "8xl", "12xl", "16xl", "24xl", "48xl")
    ]
    fours = [
        instance_type(f"g6e.{size}", [template(f"g6e-{size}-gpus", gpus(4))])
        for size in ("12xl", "24xl")
    ]
    a = make_allocator(instance_types=eights + fours)
    with pytest.raises(AllocationError) as refused:
        a.allocate(in_flight("gpu-pool-1", eights + fours), [claim("big", exact("gpu", count=16))])
    error = str(refused.value)
    assert error.startswith("no instance type can satisfy the allocation: ")
    clauses = error.removeprefix("no instance type can satisfy the allocation: ").split("; ")
    assert len(clauses) == 2, error
    assert clauses[0].startswith("p5.4xl, p5.8xl, p5.12xl and 3 more: ")
    assert clauses[1].startswith("g6e.12xl, g6e.24xl: ")
    # Every instance type keeps its own funnel (the explanation counts each).
    assert len(refused.value.funnels) == 8


# --- template devices a request's selectors accept (the count bound of NodeClaims) -------------

H100 = 'device.attributes["gpu.nvidia.com"].model == "H100"'
A100 = 'device.attributes["gpu.nvidia.com"].model == "A100"'


def test_template_matches_counts_the_devices_a_requests_selectors_accept():
    allocator = make_allocator(instance_types=[P5, P4D])
    h100s = exact("gpu", count=2, selectors=[H100])
    p5, p4d = P5.resource_slice_templates, P4D.resource_slice_templates
    assert allocator.template_matches(h100s, "p5.48xlarge", p5) == 8
    assert allocator.template_matches(h100s, "p4d.24xlarge", p4d) == 0
    assert allocator.template_matches(exact("gpu", selectors=[A100]), "p4d.24xlarge", p4d) == 8
    # The device class's selectors count too: a NIC request accepts no GPU.
    assert allocator.template_matches(exact("nic", "nic.example.com"), "p5.48xlarge", p5) == 0


def test_template_matches_bounds_nothing_it_cannot_know_without_the_search():
    shared = gpu("gpu-0")
    shared.allow_multiple_allocations = True
    shared_it = instance_type("g7.shared", [template("g7-gpus", [shared])])
    allocator = make_allocator(instance_types=[P5, shared_it])
    p5 = P5.resource_slice_templates
    # A device several allocations may share serves several slots.
    assert (
        allocator.template_matches(
            exact("gpu", count=2), "g7.shared", shared_it.resource_slice_templates
        )
        is None
    )
    # A selector failing at run time (no such attribute), an unknown class, FirstAvailable, All.
    failing = 'device.attributes["gpu.nvidia.com"].missing == "x"'
    assert allocator.template_matches(exact("gpu", selectors=[failing]), "p5.48xlarge", p5) is None
    assert allocator.template_matches(exact("gpu", "tpu.example.com"), "p5.48xlarge", p5) is None
    either = first_available("gpu", ("h100", exact("x", selectors=[H100])))
    assert allocator.template_matches(either, "p5.48xlarge", p5) is None
    assert allocator.template_matches(exact("gpu", mode="All"), "p5.48xlarge", p5) is None
