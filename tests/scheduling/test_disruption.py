"""Disruption / Consolidation Re-allocation Semantics (--disrupt)."""

from __future__ import annotations

import pytest

from allocator.scheduling.disruption import DisruptionError
from tests.scheduling.k8s import (
    GPU,
    claim,
    device_class,
    families,
    gpu,
    instance_type,
    node,
    node_claim,
    node_pool,
    pod,
    pod_result,
    request,
    resource_slice,
    run,
)

P5 = families("p5")


def _cluster() -> list[dict]:
    pinned = {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-node-a"]}]}
        ]
    }
    return [
        device_class(),
        node_pool("gpu", requirements=P5),
        instance_type("p5.48xlarge", gpus=8),
        node("gpu-node-a", pool="gpu"),
        node("gpu-node-b", pool="gpu"),
        resource_slice(
            "gpu-node-a-gpus", node="gpu-node-a", owner="gpu-node-a", devices=[gpu(0), gpu(1)]
        ),
        resource_slice("gpu-node-b-gpus", node="gpu-node-b", owner="gpu-node-b", devices=[gpu(0)]),
        claim(
            "train-gpu",
            [request("gpu")],
            allocated=[("gpu", GPU, "gpu-node-a", "gpu-0")],
            reserved_for=["train-0"],
            node_selector=pinned,
        ),
        claim(
            "shared-gpu",
            [request("gpu")],
            allocated=[("gpu", GPU, "gpu-node-a", "gpu-1")],
            reserved_for=["embed-a", "embed-b"],
            node_selector=pinned,
        ),
        pod("train-0", cpu="8", node_name="gpu-node-a", claims={"gpu": "train-gpu"}),
        pod("embed-a", cpu="2", node_name="gpu-node-a", claims={"gpu": "shared-gpu"}),
        pod("embed-b", cpu="2", node_name="gpu-node-b", claims={"gpu": "shared-gpu"}),
        pod("exporter", cpu="100m", node_name="gpu-node-a", owner_kind="DaemonSet"),
    ]


def test_candidate_pods_move_their_exclusive_claims_are_reallocated():
    result = run(_cluster(), disrupt=["gpu-node-a"])
    train = pod_result(result, "default/train-0")
    assert train["scheduled"] is True
    (c,) = train["claims"]
    assert c["state"] == "reallocated"
    # The candidate's slices left the universe: the claim moves to gpu-node-b's free GPU.
    assert train["target"] == {"kind": "Node", "name": "gpu-node-b", "new": False}
    assert [(d["pool"], d["device"]) for d in c["devices"]] == [("gpu-node-b", "gpu-0")]


def test_claims_shared_with_live_pods_stay_and_block_the_consolidation():
    result = run(_cluster(), disrupt=["gpu-node-a"])
    embed = pod_result(result, "default/embed-a")
    assert embed["scheduled"] is False
    assert embed["claims"][0]["state"] == "allocated-in-cluster"
    assert embed["claims"][0]["devices"][0]["device"] == "gpu-1"
    assert result["disruption"] == {
        "candidates": ["gpu-node-a"],
        "displacedPods": ["default/train-0", "default/embed-a"],
        "allPlaced": False,
    }
    assert "default/exporter" not in [p["pod"] for p in result["pods"]]


def test_no_disruption_report_without_candidates_and_unknown_nodes_are_errors():
    assert run(_cluster())["disruption"] is None
    with pytest.raises(DisruptionError, match="node 'gpu-node-z' not found"):
        run(_cluster(), disrupt=["gpu-node-z"])


def test_a_deleting_nodeclaim_drains_its_node_like_a_deleting_node():
    docs = _cluster() + [
        node_claim(
            "gpu-old",
            pool="gpu",
            instance_type="p5.48xlarge",
            node_name="gpu-node-a",
            deleting=True,
        )
    ]
    result = run(docs)
    pods = [p["pod"] for p in result["pods"]]
    assert pods == ["default/train-0", "default/embed-a"]  # not the DaemonSet pod
    train = pod_result(result, "default/train-0")
    assert train["claims"][0]["state"] == "reallocated"
    assert train["target"]["name"] == "gpu-node-b"
    assert all(
        r["target"] != "node/gpu-node-a" for r in pod_result(result, "default/embed-a")["reasons"]
    )
    assert result["disruption"] is None  # draining is not a --disrupt proposal


def test_demo_drain_keeps_both_users_of_a_shared_claim_on_one_node_claim():
    # inference/shared-a100 is held by embed-0 and embed-1 on gpu-node-a. The first pod
    # re-allocates it; the second finds it allocated in memory (not "reallocated" again from its
    # stale status.allocation) and must follow it to the same NodeClaim.
    from pathlib import Path

    from allocator.simulation import SimulationOptions, simulate
    from allocator.snapshot import load_paths

    demo = Path(__file__).resolve().parents[2] / "examples" / "demo-snapshot.yaml"
    result = simulate(load_paths([str(demo)]), SimulationOptions(disrupt=["gpu-node-a"])).result
    embed = [pod_result(result, f"inference/embed-{i}") for i in (0, 1)]
    assert [p["claims"][0]["state"] for p in embed] == ["reallocated", "allocated-in-memory"]
    assert embed[0]["target"]["name"] == embed[1]["target"]["name"]
    assert embed[0]["target"]["new"] is True
    assert embed[0]["claims"][0]["devices"] == embed[1]["claims"][0]["devices"]
