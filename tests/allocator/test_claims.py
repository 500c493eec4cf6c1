"""ResourceClaim State Handling: classification against effective requirements."""

from __future__ import annotations

import pytest

from allocator.claims import (
    ALLOCATED_IN_CLUSTER,
    ALLOCATED_IN_MEMORY,
    REALLOCATED,
    UNALLOCATED,
    ClaimAllocationMetadata,
    classify_claims,
    in_cluster_devices,
)
from allocator.errors import AllocationError
from allocator.model import ConsumerReference, DeviceID
from allocator.requirements import Requirements
from tests.allocator.builders import (
    GPU,
    ZONE,
    allocate_in_cluster,
    claim,
    exact,
    in_flight,
    zone_selector,
)

D = DeviceID(GPU, "rack-1", "gpu-0")


def allocated(name, zone=None, pods=("train-0",)):
    return allocate_in_cluster(
        claim(name, exact("gpu")),
        [("gpu", D)],
        node_selector=zone_selector(zone) if zone else None,
        reserved_for_pods=pods,
    )


def classify(claims, nc=None, metadata=None, deleting=(), reallocation=()):
    nc = nc or in_flight("gpu-pool-1", [], requirements={ZONE: ["us-west-2a", "us-west-2b"]})
    eff = nc.requirements.copy()
    out = classify_claims(claims, eff, nc.id, metadata or {}, frozenset(deleting), reallocation)
    return out, eff


def test_unallocated_and_in_cluster_topology_tightens_effective_requirements():
    out, eff = classify([claim("fresh", exact("gpu")), allocated("old", zone="us-west-2b")])
    assert [c.state for c in out] == [UNALLOCATED, ALLOCATED_IN_CLUSTER]
    assert eff.get(ZONE).values() == {"us-west-2b"}
    assert out[0].needs_dfs and not out[1].needs_dfs


def test_mutually_incompatible_allocated_claims_fail_immediately():
    with pytest.raises(AllocationError, match="incompatible") as e:
        classify([allocated("a", zone="us-west-2a"), allocated("b", zone="us-west-2b")])
    assert "default/b" in str(e.value)


def test_in_cluster_allocation_incompatible_with_node_claim():
    nc = in_flight("gpu-pool-1", [], requirements={ZONE: ["us-west-2a"]})
    with pytest.raises(AllocationError, match="incompatible"):
        classify([allocated("a", zone="us-west-2b")], nc=nc)


def test_claim_reserved_only_by_deleting_pods_is_reallocated():
    out, eff = classify(
        [allocated("a", zone="us-west-2b", pods=("train-0", "train-1"))],
        deleting={"default/train-0", "default/train-1"},
    )
    assert out[0].state == REALLOCATED and out[0].needs_dfs
    assert eff.get(ZONE).values() == {"us-west-2a", "us-west-2b"}  # its topology no longer binds


def test_mixed_consumers_empty_reservations_and_non_pods_keep_the_allocation():
    mixed = allocated("mixed", pods=("train-0", "train-1"))
    empty = allocated("empty", pods=())
    other = allocated("other", pods=())
    other.reserved_for = [ConsumerReference("jobs", "train", api_group="batch")]
    out, _ = classify([mixed, empty, other], deleting={"default/train-0"})
    assert [c.state for c in out] == [ALLOCATED_IN_CLUSTER] * 3


def test_deleting_pod_in_another_namespace_does_not_count():
    out, _ = classify([allocated("a", pods=("train-0",))], deleting={"ml/train-0"})
    assert out[0].state == ALLOCATED_IN_CLUSTER


def meta(nc_id, templates, zone=None):
    reqs = Requirements.from_labels({ZONE: zone}) if zone else Requirements()
    return ClaimAllocationMetadata(nc_id, templates, reqs, {})


def test_in_memory_template_claim_only_on_its_own_node_claim():
    c = claim("shared", exact("gpu"))
    out, eff = classify([c], metadata={"default/shared": meta("gpu-pool-1", True)})
    assert out[0].state == ALLOCATED_IN_MEMORY and not out[0].needs_dfs
    with pytest.raises(AllocationError, match="bound to a different in-flight NodeClaim"):
        classify(
            [c],
            nc=in_flight("gpu-pool-2", []),
            metadata={"default/shared": meta("gpu-pool-1", True)},
        )


def test_in_memory_in_cluster_claim_merges_or_conflicts():
    c = claim("shared", exact("gpu"))
    md = {"default/shared": meta("gpu-pool-1", False, zone="us-west-2b")}
    out, eff = classify(
        [c],
        nc=in_flight("gpu-pool-2", [], requirements={ZONE: ["us-west-2a", "us-west-2b"]}),
        metadata=md,
    )
    assert out[0].state == ALLOCATED_IN_MEMORY
    assert eff.get(ZONE).values() == {"us-west-2b"}
    with pytest.raises(AllocationError, match="incompatible"):
        classify(
            [c], nc=in_flight("gpu-pool-3", [], requirements={ZONE: ["us-west-2a"]}), metadata=md
        )


def test_reallocation_predicates_of_the_pipeline():
    c = allocated("a", pods=("train-0",))
    out, _ = classify([c], reallocation=(lambda cl: cl.name == "a",))
    assert out[0].state == REALLOCATED
    out, _ = classify([c])  # the design's core: an in-cluster allocation stays
    assert out[0].state == ALLOCATED_IN_CLUSTER


def test_in_cluster_devices_for_the_result():
    (d,) = in_cluster_devices(allocated("a"))
    assert d.to_json() == {
        "request": "gpu",
        "driver": GPU,
        "pool": "rack-1",
        "device": "gpu-0",
        "source": "in-cluster",
        "instanceType": None,
    }


def test_malformed_allocation_node_selector_is_an_error_not_a_crash():
    bad = allocated("a")
    bad.allocation.node_selector = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": ZONE, "operator": "Near", "values": ["x"]}]}
        ]
    }
    with pytest.raises(AllocationError, match="default/a: allocation node selector"):
        classify([bad])


def test_claim_reallocated_earlier_in_this_run_is_in_memory_despite_its_stale_allocation():
    # The drain moved "shared" from zone b to zone a; the snapshot still shows the old
    # allocation. In-memory metadata wins, whether or not its old consumers count as deleting.
    stale = allocated("shared", zone="us-west-2b", pods=("embed-0", "embed-1"))
    md = {"default/shared": meta("gpu-pool-1", False, zone="us-west-2a")}
    for deleting in ({"default/embed-0", "default/embed-1"}, set()):
        out, eff = classify([stale], metadata=md, deleting=deleting)
        assert out[0].state == ALLOCATED_IN_MEMORY and not out[0].needs_dfs
        assert out[0].metadata is md["default/shared"]
        assert eff.get(ZONE).values() == {"us-west-2a"}
