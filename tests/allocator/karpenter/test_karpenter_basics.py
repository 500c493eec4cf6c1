"""Karpenter allocator_test.go: empty claims, in-cluster devices, node-name pinning, CEL
selectors, MatchAttribute constraints, single instance type with templates."""

from __future__ import annotations

from tests.allocator.karpenter.kit import (
    IT1,
    MODEL,
    NUMA,
    allocator,
    claim,
    dev,
    devs,
    did,
    fails,
    match,
    names,
    node_claim,
    req,
    slice_,
    tmpl,
)

FOUR_GPUS = [slice_("rack-a-gpus", devs("gpu-0", "gpu-1", "gpu-2", "gpu-3"))]


# --- Describe("Empty claims") ------------------------------------------------------------------


def test_should_return_immediately_with_no_claims():
    """Karpenter: should return immediately with no claims."""
    r = allocator().allocate(node_claim("gpu-pool-abc12", IT1), [])
    assert r.instance_types == [IT1]
    assert r.dfs_nodes == 0


# --- Describe("Single IT, in-cluster devices") -------------------------------------------------


def test_should_allocate_a_single_device():
    """Karpenter: should allocate a single device."""
    r = allocator(FOUR_GPUS).allocate(node_claim("nc", IT1), [claim("c1", req("gpu", count=1))])
    assert r.instance_types == [IT1]
    assert names(r) == ["gpu-0"]


def test_should_allocate_multiple_devices_for_a_single_request():
    """Karpenter: should allocate multiple devices for a single request."""
    r = allocator(FOUR_GPUS).allocate(node_claim("nc", IT1), [claim("c1", req("gpu", count=3))])
    assert names(r) == ["gpu-0", "gpu-1", "gpu-2"]


def test_should_fail_when_not_enough_devices_are_available():
    """Karpenter: should fail when not enough devices are available."""
    fails(allocator(FOUR_GPUS), node_claim("nc", IT1), [claim("c1", req("gpu", count=5))])


def test_should_handle_multiple_requests_in_a_single_claim():
    """Karpenter: should handle multiple requests in a single claim."""
    c = claim("c1", req("train", count=2), req("infer", count=2))
    r = allocator(FOUR_GPUS).allocate(node_claim("nc", IT1), [c])
    assert sorted(names(r)) == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]


def test_should_fail_when_multiple_requests_exceed_total_devices():
    """Karpenter: should fail when multiple requests exceed total devices."""
    c = claim("c1", req("train", count=3), req("infer", count=3))
    fails(allocator(FOUR_GPUS), node_claim("nc", IT1), [c])


def test_should_handle_multiple_claims():
    """Karpenter: should handle multiple claims."""
    claims = [claim("c1", req("gpu", count=2)), claim("c2", req("gpu", count=2))]
    r = allocator(FOUR_GPUS).allocate(node_claim("nc", IT1), claims)
    assert names(r, 0) == ["gpu-0", "gpu-1"]
    assert names(r, 1) == ["gpu-2", "gpu-3"]


def test_should_distinguish_claims_with_the_same_name_in_different_namespaces():
    """Karpenter: should distinguish claims with the same name in different namespaces."""
    a = allocator(FOUR_GPUS)
    team_a = claim("train-gpu", req("gpu"), namespace="team-a")
    team_b = claim("train-gpu", req("gpu"), namespace="team-b")
    r = a.allocate(node_claim("nc", IT1), [team_a, team_b])
    r.allocation.commit()
    got_a = [d.device for d in a.claim_devices("team-a/train-gpu")]
    got_b = [d.device for d in a.claim_devices("team-b/train-gpu")]
    assert len(got_a) == len(got_b) == 1
    assert got_a != got_b


def test_should_skip_already_allocated_devices():
    """Karpenter: should skip already-allocated devices."""
    held = [did("gpu-0"), did("gpu-1"), did("gpu-2")]
    a = allocator(FOUR_GPUS, allocated=held)
    fails(a, node_claim("nc", IT1), [claim("c1", req("gpu", count=2))])


def test_should_allocate_remaining_devices_when_some_are_already_allocated():
    """Karpenter: should allocate remaining devices when some are already allocated."""
    a = allocator(FOUR_GPUS, allocated=[did("gpu-0"), did("gpu-1")])
    r = a.allocate(node_claim("nc", IT1), [claim("c1", req("gpu", count=2))])
    assert names(r) == ["gpu-2", "gpu-3"]


# --- Describe("Node-name-pinned in-cluster devices") -------------------------------------------

PINNED = [slice_("ip-10-0-1-17-gpus", devs("gpu-0"), node_name="ip-10-0-1-17")]


def test_should_allocate_a_node_name_pinned_device_for_the_existing_node_it_belongs_to():
    """Karpenter: should allocate a node-name-pinned device for the existing node it belongs to."""
    nc = node_claim("node/ip-10-0-1-17", IT1, node_name="ip-10-0-1-17")
    r = allocator(PINNED).allocate(nc, [claim("c1", req("gpu"))])
    assert names(r) == ["gpu-0"]


def test_should_not_allocate_a_node_name_pinned_device_for_a_different_existing_node():
    """Karpenter: should not allocate a node-name-pinned device for a different existing node."""
    nc = node_claim("node/ip-10-0-2-33", IT1, node_name="ip-10-0-2-33")
    fails(allocator(PINNED), nc, [claim("c1", req("gpu"))])


def test_should_not_allocate_a_node_name_pinned_device_for_an_in_flight_node_claim():
    """Karpenter: should not allocate a node-name-pinned device for an in-flight NodeClaim."""
    fails(allocator(PINNED), node_claim("gpu-pool-abc12", IT1), [claim("c1", req("gpu"))])


# --- Describe("CEL selector filtering") --------------------------------------------------------

MIXED_MODELS = [
    slice_(
        "rack-a-gpus",
        [
            dev("gpu-0", {MODEL: "H100"}),
            dev("gpu-1", {MODEL: "A100"}),
            dev("gpu-2", {MODEL: "H100"}),
        ],
    )
]


def test_should_only_allocate_devices_matching_the_selector():
    """Karpenter: should only allocate devices matching the selector."""
    r = allocator(MIXED_MODELS).allocate(
        node_claim("nc", IT1), [claim("c1", req("gpu", "h100", 2))]
    )
    assert names(r) == ["gpu-0", "gpu-2"]


def test_should_fail_when_not_enough_devices_match_the_selector():
    """Karpenter: should fail when not enough devices match the selector."""
    fails(allocator(MIXED_MODELS), node_claim("nc", IT1), [claim("c1", req("gpu", "h100", 3))])


def test_should_filter_with_request_level_selectors():
    """Karpenter: should filter with request-level selectors."""
    a100 = req("gpu", selector='device.attributes["gpu.nvidia.com"].model == "A100"')
    r = allocator(MIXED_MODELS).allocate(node_claim("nc", IT1), [claim("c1", a100)])
    assert names(r) == ["gpu-1"]


# --- Describe("Constraint satisfaction") -------------------------------------------------------

TWO_NUMA = [
    slice_(
        "rack-a-gpus",
        [
            dev("gpu-0", {NUMA: "numa-0"}),
            dev("gpu-1", {NUMA: "numa-0"}),
            dev("gpu-2", {NUMA: "numa-1"}),
            dev("gpu-3", {NUMA: "numa-1"}),
        ],
    )
]


def test_should_satisfy_match_attribute_constraints():
    """Karpenter: should satisfy MatchAttribute constraints."""
    c = claim("c1", req("gpu", count=2), constraints=[match(NUMA)])
    r = allocator(TWO_NUMA).allocate(node_claim("nc", IT1), [c])
    assert names(r) == ["gpu-0", "gpu-1"]


def test_should_backtrack_to_satisfy_constraints():
    """Karpenter: should backtrack to satisfy constraints."""
    # Three GPUs on one NUMA node: only two per node, every path is tried and fails.
    c = claim("c1", req("gpu", count=3), constraints=[match(NUMA)])
    fails(allocator(TWO_NUMA), node_claim("nc", IT1), [c])


def test_should_satisfy_constraints_with_backtracking_across_requests():
    """Karpenter: should satisfy constraints with backtracking across requests."""
    c = claim(
        "c1",
        req("train", count=2),
        req("infer", count=2),
        constraints=[match(NUMA, "train"), match(NUMA, "infer")],
    )
    r = allocator(TWO_NUMA).allocate(node_claim("nc", IT1), [c])
    by_request = {d.request: [] for d in r.claims[0].devices}
    for d in r.claims[0].devices:
        by_request[d.request].append(d.device)
    assert by_request == {"train": ["gpu-0", "gpu-1"], "infer": ["gpu-2", "gpu-3"]}


# --- Describe("Single IT with templates") ------------------------------------------------------

TWO_IN_CLUSTER = [slice_("rack-a-gpus", devs("gpu-0", "gpu-1"))]
P5_TEMPLATES = {IT1: [tmpl("p5-gpus", ["nvidia0", "nvidia1"])]}


def test_should_allocate_from_templates_when_in_cluster_devices_are_insufficient():
    """Karpenter: should allocate from templates when in-cluster devices are insufficient."""
    nc = node_claim("nc", templates=P5_TEMPLATES)
    r = allocator(TWO_IN_CLUSTER).allocate(nc, [claim("c1", req("gpu", count=3))])
    assert r.instance_types == [IT1]
    assert [(d.pool, d.device) for d in r.claims[0].devices] == [
        ("pool-a", "gpu-0"),
        ("pool-a", "gpu-1"),
        ("p5-gpus", "nvidia0"),
    ]


def test_should_prefer_in_cluster_devices_over_templates():
    """Karpenter: should prefer in-cluster devices over templates."""
    nc = node_claim("nc", templates=P5_TEMPLATES)
    r = allocator(TWO_IN_CLUSTER).allocate(nc, [claim("c1", req("gpu", count=2))])
    assert [(d.pool, d.source) for d in r.claims[0].devices] == [
        ("pool-a", "in-cluster"),
        ("pool-a", "in-cluster"),
    ]
