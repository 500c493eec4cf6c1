"""Run diff: result changes and where two DFS traces first diverge."""

from __future__ import annotations

import copy

from allocator.trace import Trace
from dra_web.runs.diff import diff_results, diff_traces
from tests.pages.builders import result_device


def _pod(name, *, scheduled=True, target=None, devices=(), error=None):
    return {
        "pod": f"ml-training/{name}",
        "scheduled": scheduled,
        "target": target,
        "claims": [
            {"claim": f"ml-training/{name}-gpu", "state": "unallocated", "devices": list(devices)}
        ],
        "error": error,
    }


NODE_A = {"kind": "Node", "name": "ip-10-0-0-1", "new": False}
NEW_NC = {"kind": "NodeClaim", "name": "gpu-1", "new": True}

RESULT_A = {
    "schemaVersion": "v1",
    "pods": [
        _pod("train-0", target=NODE_A, devices=[result_device("ip-10-0-0-1", "gpu-1")]),
        _pod(
            "train-1",
            target=NEW_NC,
            devices=[result_device("p5.48xlarge-gpus", "gpu-0", "p5.48xlarge")],
        ),
        _pod("train-2", scheduled=False, error="no instance type can satisfy the allocation"),
    ],
    "nodeClaims": [
        {
            "name": "gpu-1",
            "nodePool": "gpu",
            "instanceTypes": ["p5.48xlarge"],
            "requirements": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-west-2a"]}
            ],
            "annotations": {"karpenter.sh/requested-dra-drivers": "gpu.nvidia.com"},
            "pods": ["ml-training/train-1"],
        }
    ],
    "stats": {"pods": 3, "scheduled": 2, "failed": 1, "dfsNodes": 40, "seconds": 0.01},
}


def test_identical_results_have_no_changes():
    d = diff_results(RESULT_A, copy.deepcopy(RESULT_A))
    assert d["pods"] == {
        "newlyPlaced": [],
        "newlyFailed": [],
        "onlyInA": [],
        "onlyInB": [],
        "changedTargets": [],
        "changedErrors": [],
    }
    assert d["devices"] == []
    assert d["nodeClaims"] == {"added": [], "removed": [], "changed": []}


def test_placed_failed_targets_devices_and_node_claims():
    b = copy.deepcopy(RESULT_A)
    # train-0 moves to another GPU of the same node, train-1 fails, train-2 is placed.
    b["pods"][0]["claims"][0]["devices"] = [result_device("ip-10-0-0-1", "gpu-5")]
    b["pods"][1] = _pod("train-1", scheduled=False, error="untolerated taint")
    b["pods"][2] = _pod("train-2", target={"kind": "NodeClaim", "name": "gpu-2", "new": True})
    b["nodeClaims"][0]["instanceTypes"] = ["p5.48xlarge", "p5e.48xlarge"]
    b["nodeClaims"][0]["pods"] = []
    b["nodeClaims"].append(
        {
            "name": "gpu-2",
            "nodePool": "gpu",
            "instanceTypes": ["p5.48xlarge"],
            "requirements": [],
            "pods": ["ml-training/train-2"],
        }
    )
    d = diff_results(RESULT_A, b)
    assert [p["pod"] for p in d["pods"]["newlyPlaced"]] == ["ml-training/train-2"]
    assert d["pods"]["newlyFailed"][0]["error"] == "untolerated taint"
    changed = {(c["pod"], c["claim"]): c for c in d["devices"]}
    moved = changed[("ml-training/train-0", "ml-training/train-0-gpu")]
    assert [x["device"] for x in moved["added"]] == ["gpu-5"]
    assert [x["device"] for x in moved["removed"]] == ["gpu-1"]
    assert [n["name"] for n in d["nodeClaims"]["added"]] == ["gpu-2"]
    nc = d["nodeClaims"]["changed"][0]
    assert nc["name"] == "gpu-1"
    assert nc["instanceTypesAdded"] == ["p5e.48xlarge"]
    assert nc["podsRemoved"] == ["ml-training/train-1"]


def test_changed_target_between_two_scheduled_runs():
    b = copy.deepcopy(RESULT_A)
    b["pods"][0]["target"] = {"kind": "Node", "name": "ip-10-0-0-2", "new": False}
    d = diff_results(RESULT_A, b)
    assert d["pods"]["changedTargets"] == [
        {"pod": "ml-training/train-0", "a": NODE_A, "b": b["pods"][0]["target"]}
    ]


def _base() -> Trace:
    t = Trace()
    pod = t.add(None, "pod", "ml-training/train-0")
    target = t.add(pod, "target", "node/ip-10-0-0-1")
    claim = t.add(target, "claim", "ml-training/train-0-gpu")
    request = t.add(claim, "request", "gpu")
    t.add(request, "device", "gpu.nvidia.com/ip-10-0-0-1/gpu-0", "failed", "taint")
    t.add(request, "device", "gpu.nvidia.com/ip-10-0-0-1/gpu-1", "ok", "allocated")
    pod = t.add(None, "pod", "ml-training/train-1")
    t.add(pod, "target", "nodepool/gpu")
    return t


def _base_trace():
    return _base().to_json()


def test_identical_traces_do_not_diverge():
    d = diff_traces(_base_trace(), _base_trace())
    assert d["identical"] is True
    assert d["firstDivergence"] is None
    assert d["aligned"] == 8


def test_changed_leaf_is_the_divergence_not_its_ancestors():
    b = _base_trace()
    b["nodes"][4].update(status="ok", reason="allocated")
    b["nodes"][5].update(status="pruned", reason=None)
    # The request's outcome is unchanged; pod/target too: only the two devices differ.
    d = diff_traces(_base_trace(), b)
    assert d["divergenceCount"] == 2
    first = d["firstDivergence"]
    assert first["type"] == "changed"
    assert first["path"] == [
        "ml-training/train-0",
        "node/ip-10-0-0-1",
        "ml-training/train-0-gpu",
        "gpu",
        "gpu.nvidia.com/ip-10-0-0-1/gpu-0",
    ]
    assert first["a"]["reason"] == "taint" and first["b"]["reason"] == "allocated"


def test_subtrees_present_in_one_trace_only_sorted_largest_first():
    a = _base()
    b = _base()
    # B tried an extra NodePool for train-1 (node 6) with two instance types under it.
    spot = b.add(6, "target", "nodepool/gpu-spot", "failed", "capacity")
    b.add(spot, "instanceType", "p5.48xlarge", "failed", "capacity")
    b.add(spot, "instanceType", "p4d.24xlarge", "failed", "capacity")
    # And A tried gpu-2 on node 1 (under request node 3) where B did not.
    a.add(3, "device", "gpu.nvidia.com/ip-10-0-0-1/gpu-2", "pruned")
    d = diff_traces(a.to_json(), b.to_json())
    kinds = [(p["type"], p["subtree"]) for p in d["divergences"]]
    assert kinds == [("onlyInB", 3), ("onlyInA", 1)]
    # The first in A's search order is the device under train-0, before train-1's NodePool.
    assert d["firstDivergence"]["path"][-1] == "gpu.nvidia.com/ip-10-0-0-1/gpu-2"


def test_same_label_siblings_align_by_occurrence():
    t = Trace()
    pod = t.add(None, "pod", "p")
    t.add(pod, "slot", "gpu[0]")
    t.add(pod, "slot", "gpu[0]")
    a = t.to_json()
    b = copy.deepcopy(a)
    b["nodes"][2]["status"] = "failed"
    d = diff_traces(a, b)
    assert d["divergenceCount"] == 1
    assert d["divergences"][0]["a"]["id"] == 2
