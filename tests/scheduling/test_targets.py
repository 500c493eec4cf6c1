"""The NodeClaim abstraction as the loop targets it (design: NodeClaim Abstraction, Existing /
In-Flight / New NodeClaim Evaluation; CONTRACT section 3, targets)."""

from __future__ import annotations

from tests.scheduling.k8s import (
    device_class,
    families,
    gpu,
    instance_type,
    node,
    node_claim,
    node_claim_result,
    node_pool,
    offering,
    pod,
    pod_result,
    request,
    resource_slice,
    run,
    template,
)

H100 = families("p5")


def _base() -> list[dict]:
    return [
        device_class(),
        template("one-gpu", [request("gpu")]),
        node_pool("gpu", requirements=H100),
        instance_type("p5.48xlarge", gpus=8),
    ]


def _devices(entry: dict) -> list[tuple]:
    return [
        (d["source"], d["pool"], d["device"], d["instanceType"])
        for c in entry["claims"]
        for d in c["devices"]
    ]


def test_existing_initialized_node_uses_its_published_slices():
    docs = _base() + [
        node("gpu-node-a", pool="gpu"),
        resource_slice(
            "gpu-node-a-gpus", node="gpu-node-a", owner="gpu-node-a", devices=[gpu(0), gpu(1)]
        ),
        pod("train-0", templates={"gpu": "one-gpu"}),
    ]
    entry = pod_result(run(docs), "default/train-0")
    assert entry["target"] == {"kind": "Node", "name": "gpu-node-a", "new": False}
    assert _devices(entry) == [("in-cluster", "gpu-node-a", "gpu-0", None)]
    assert entry["claims"][0]["claim"] == "default/train-0-gpu"
    assert entry["claims"][0]["state"] == "unallocated"


def test_initialized_nodes_are_tried_before_uninitialized_ones_each_by_name():
    docs = _base() + [
        node("a-booting", pool="gpu", initialized=False),
        node("z-ready", pool="gpu"),
        resource_slice("z-ready-gpus", node="z-ready", owner="z-ready", devices=[gpu(0)]),
        pod("first", templates={"gpu": "one-gpu"}, cpu="2"),
        pod("second", templates={"gpu": "one-gpu"}, cpu="1"),
    ]
    result = run(docs)
    assert pod_result(result, "default/first")["target"]["name"] == "z-ready"
    # z-ready's only GPU is taken: the next pod goes to the booting node's template devices.
    second = pod_result(result, "default/second")
    assert second["target"] == {"kind": "Node", "name": "a-booting", "new": False}
    assert _devices(second) == [("template", "p5.48xlarge-gpus", "gpu-0", "p5.48xlarge")]
    assert second["reasons"] == []


def test_pre_initialized_node_counts_templates_not_its_published_slices():
    """Its published slice (owned by the node) is out of the universe: devices come from the
    instance type's templates, so they are not double-counted."""
    docs = _base() + [
        node("gpu-booting", pool="gpu", initialized=False),
        resource_slice(
            "gpu-booting-gpus",
            node="gpu-booting",
            owner="gpu-booting",
            devices=[gpu(0, model="NVIDIA H100 published")],
        ),
        pod("train-0", templates={"gpu": "one-gpu"}),
    ]
    entry = pod_result(run(docs), "default/train-0")
    assert entry["target"]["name"] == "gpu-booting"
    assert _devices(entry) == [("template", "p5.48xlarge-gpus", "gpu-0", "p5.48xlarge")]


def test_startup_taints_of_the_nodepool_are_ignored_on_an_uninitialized_node():
    startup = {"key": "nvidia.com/gpu-driver-not-ready", "effect": "NoSchedule"}
    docs = [
        device_class(),
        template("one-gpu", [request("gpu")]),
        node_pool("gpu", requirements=H100, startup_taints=[startup]),
        instance_type("p5.48xlarge", gpus=8),
        node(
            "gpu-booting",
            pool="gpu",
            initialized=False,
            taints=[startup, {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}],
        ),
        node("gpu-ready", pool="gpu", taints=[startup], labels={"example.com/rack": "rack-2"}),
        resource_slice("gpu-ready-gpus", node="gpu-ready", owner="gpu-ready", devices=[gpu(0)]),
        pod("train-0", templates={"gpu": "one-gpu"}),
    ]
    result = run(docs)
    entry = pod_result(result, "default/train-0")
    assert entry["target"]["name"] == "gpu-booting"
    # Once initialized, a node's remaining taints count: gpu-ready was tried first and refused.
    docs.append(
        pod(
            "train-1",
            templates={"gpu": "one-gpu"},
            # Karpenter ignores pods selecting kubernetes.io/hostname: a rack label pins it.
            node_selector={"example.com/rack": "rack-2"},
        )
    )
    refused = pod_result(run(docs), "default/train-1")
    assert refused["scheduled"] is False
    assert {
        "target": "node/gpu-ready",
        "reason": "did not tolerate taint nvidia.com/gpu-driver-not-ready:NoSchedule",
    } in refused["reasons"]


def test_taints_of_an_initialized_node_must_be_tolerated():
    taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    docs = [
        device_class(),
        template("one-gpu", [request("gpu")]),
        node("gpu-node-a", taints=[taint]),
        resource_slice("gpu-node-a-gpus", node="gpu-node-a", owner="gpu-node-a", devices=[gpu(0)]),
        pod("intolerant", templates={"gpu": "one-gpu"}, cpu="2"),
        pod(
            "tolerant",
            templates={"gpu": "one-gpu"},
            tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        ),
    ]
    result = run(docs)
    intolerant = pod_result(result, "default/intolerant")
    assert intolerant["reasons"] == [
        {
            "target": "node/gpu-node-a",
            "reason": "did not tolerate taint nvidia.com/gpu=present:NoSchedule",
        }
    ]
    assert pod_result(result, "default/tolerant")["target"]["name"] == "gpu-node-a"


def test_unregistered_nodeclaim_is_an_existing_not_initialized_target():
    docs = _base() + [
        node_claim("gpu-x4k8d", pool="gpu", instance_type="p5.48xlarge"),
        pod("train-0", templates={"gpu": "one-gpu"}),
    ]
    result = run(docs)
    entry = pod_result(result, "default/train-0")
    assert entry["target"] == {"kind": "NodeClaim", "name": "gpu-x4k8d", "new": False}
    assert _devices(entry) == [("template", "p5.48xlarge-gpus", "gpu-0", "p5.48xlarge")]
    assert result["nodeClaims"] == []  # existing NodeClaims appear only as targets


def test_unschedulable_and_full_nodes_are_skipped_with_reasons():
    docs = _base() + [
        node("cordoned", pool="gpu", unschedulable=True),
        node("tiny", pool="gpu", cpu="1", memory="1Gi"),
        pod("big", cpu="8", memory="8Gi", node_selector={"karpenter.sh/nodepool": "none"}),
    ]
    entry = pod_result(run(docs), "default/big")
    reasons = {r["target"]: r["reason"] for r in entry["reasons"]}
    assert reasons["node/cordoned"] == "node is unschedulable"
    assert reasons["node/tiny"].startswith("exceeds node resources")
    assert reasons["nodepool/gpu"].startswith(
        'incompatible with nodepool "gpu", daemonset overhead={}, incompatible requirements'
    )


def test_in_flight_nodeclaims_fewest_pods_first_and_new_names_count_per_nodepool():
    docs = _base() + [
        pod("a", cpu="150", templates={"gpu": "one-gpu"}, created="2026-12-01T10:00:00Z"),
        pod("b", cpu="150", templates={"gpu": "one-gpu"}, created="2026-12-01T10:01:00Z"),
        pod("c", cpu="10", templates={"gpu": "one-gpu"}, created="2026-12-01T10:02:00Z"),
        pod("d", cpu="10", templates={"gpu": "one-gpu"}, created="2026-12-01T10:03:00Z"),
    ]
    result = run(docs)
    targets = {p["pod"]: p["target"]["name"] for p in result["pods"]}
    # a and b cannot share a 192-cpu node; c joins the NodeClaim with fewest pods (a tie:
    # creation order), d then joins the other one.
    assert targets == {
        "default/a": "gpu-1",
        "default/b": "gpu-2",
        "default/c": "gpu-1",
        "default/d": "gpu-2",
    }
    one = node_claim_result(result, "gpu-1")
    assert one["pods"] == ["default/a", "default/c"]
    # Each pod of gpu-1 holds its own template GPU on the same instance type.
    devices = [
        d["device"]
        for p in ("default/a", "default/c")
        for c in pod_result(result, p)["claims"]
        for d in c["devices"]
    ]
    assert devices == ["gpu-0", "gpu-1"]


def test_nodepools_are_tried_by_weight_then_name_descending_falling_through():
    """Karpenter's OrderByWeight: of two NodePools of equal weight, the later name first."""
    docs = [
        device_class(),
        template("one-gpu", [request("gpu")]),
        node_pool(
            "b-cheap",
            weight=10,
            requirements=families("m7i"),
        ),
        node_pool(
            "a-gpu",
            weight=10,
            requirements=families("g6"),
        ),
        node_pool(
            "heavy",
            weight=50,
            requirements=H100,
            taints=[{"key": "dedicated", "value": "training", "effect": "NoSchedule"}],
        ),
        instance_type("m7i.4xlarge", cpu="16", memory="64Gi"),
        instance_type("g6.12xlarge", cpu="48", memory="192Gi", gpus=4, model="NVIDIA L4"),
        instance_type("p5.48xlarge", gpus=8),
        pod("infer-0", templates={"gpu": "one-gpu"}),
    ]
    entry = pod_result(run(docs), "default/infer-0")
    assert entry["target"] == {"kind": "NodeClaim", "name": "a-gpu-1", "new": True}
    reasons = [r["target"] for r in entry["reasons"]]
    assert reasons == []
    failed = run(docs + [pod("cpu-only", cpu="100")])
    order = [r["target"] for r in pod_result(failed, "default/cpu-only")["reasons"]]
    assert order[-3:] == ["nodepool/heavy", "nodepool/b-cheap", "nodepool/a-gpu"]


def test_instance_types_are_tried_cheapest_available_offering_first():
    docs = [
        device_class(),
        template("one-gpu", [request("gpu")]),
        node_pool(
            "gpu",
            requirements=families("g6", "g6e"),
        ),
        instance_type(
            "g6e.xlarge",
            family="g6e",
            cpu="4",
            memory="32Gi",
            gpus=1,
            model="NVIDIA L40S",
            offerings=[offering("us-west-2a", 0.5, available=False), offering("us-west-2b", 1.86)],
        ),
        instance_type(
            "g6.xlarge",
            family="g6",
            cpu="4",
            memory="16Gi",
            gpus=1,
            model="NVIDIA L4",
            offerings=[offering("us-west-2a", 0.805)],
        ),
        pod("infer-0", templates={"gpu": "one-gpu"}),
    ]
    result = run(docs, trace=True)
    nc = node_claim_result(result, "gpu-1")
    assert nc["instanceTypes"] == ["g6.xlarge", "g6e.xlarge"]
    assert nc["price"] == 0.805
    # Both instance types' template devices are listed while both remain candidates.
    its = [
        d["instanceType"]
        for c in pod_result(result, "default/infer-0")["claims"]
        for d in c["devices"]
    ]
    assert its == ["g6.xlarge", "g6e.xlarge"]


def test_shared_template_allocated_claim_pulls_its_second_pod_onto_the_same_nodeclaim():
    docs = _base() + [
        claim_doc := {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "shared-h100", "namespace": "default"},
            "spec": {"devices": {"requests": [request("gpu")]}},
        },
        pod("leader", cpu="100", claims={"gpu": "shared-h100"}, created="2026-12-01T09:00:00Z"),
        # Too big to share a node with the leader: it must fail rather than take a fresh GPU.
        pod("follower-big", cpu="100", claims={"gpu": "shared-h100"}),
        pod("follower", cpu="10", claims={"gpu": "shared-h100"}),
    ]
    assert claim_doc["kind"] == "ResourceClaim"
    result = run(docs)
    leader = pod_result(result, "default/leader")
    follower = pod_result(result, "default/follower")
    assert leader["target"]["name"] == follower["target"]["name"] == "gpu-1"
    assert follower["claims"][0]["state"] == "allocated-in-memory"
    assert follower["claims"][0]["devices"] == leader["claims"][0]["devices"]
    big = pod_result(result, "default/follower-big")
    assert big["scheduled"] is False
    assert big["claims"][0]["state"] == "allocated-in-memory"
    assert "different in-flight NodeClaim" in big["error"]
    assert len(result["nodeClaims"]) == 1


def test_progress_is_reported_after_each_pod_attempt():
    from allocator.simulation import SimulationOptions, simulate
    from tests.scheduling.k8s import snapshot

    docs = _base() + [pod(f"p{i}", cpu="1") for i in range(3)] + [pod("never", cpu="999")]
    calls: list[tuple[int, int]] = []
    simulate(snapshot(docs), SimulationOptions(), lambda done, total: calls.append((done, total)))
    # The pass placed pods, so "never" is retried once: a fifth attempt, total grown to 5.
    assert calls == [(1, 4), (2, 4), (3, 4), (4, 4), (5, 5)]


def test_readiness_taints_of_an_uninitialized_node_are_disregarded_until_it_initializes():
    """The Node Readiness Controller's readiness.k8s.io/<rule> taints, and the known ephemeral
    taints by key and effect: an unreachable node (NoExecute) is not starting up."""
    readiness = {"key": "readiness.k8s.io/gpu-operator-ready", "effect": "NoSchedule"}
    docs = [
        device_class(),
        template("one-gpu", [request("gpu")]),
        node_pool("gpu", requirements=H100),
        instance_type("p5.48xlarge", gpus=8),
        node("gpu-booting", pool="gpu", initialized=False, taints=[readiness]),
        pod("train-0", templates={"gpu": "one-gpu"}),
    ]
    assert pod_result(run(docs), "default/train-0")["target"]["name"] == "gpu-booting"
    unreachable = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
    docs[4] = node("gpu-booting", pool="gpu", initialized=False, taints=[unreachable])
    moved = pod_result(run(docs), "default/train-0")
    assert moved["target"] == {"kind": "NodeClaim", "name": "gpu-1", "new": True}
