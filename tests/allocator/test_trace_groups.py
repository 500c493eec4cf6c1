"""The trace groups a pod's targets as the result groups its ``reasons`` (docs/TRACE.md):
targets refused the same way share the first one's node, counted, and the trace of a failing
pod does not grow with the number of nodes."""

from __future__ import annotations

from allocator.funnel import trace_target_key
from allocator.simulation import SimulationOptions, simulate
from allocator.snapshot import load_files
from allocator.trace import Trace
from bench.workloads import existing_nodes, to_json


def _selector_funnel(pool: str) -> list[dict]:
    return [
        {
            "claim": "ml-training/train-19-gpu",
            "request": "gpu",
            "needed": 1,
            "instanceType": "p5.48xlarge",
            "candidates": 8,
            "usable": 0,
            "rejections": [
                {
                    "reason": "selector",
                    "devices": 8,
                    "message": 'productName is "NVIDIA H100 80GB HBM3" on 8 devices',
                    "exampleDevices": [f"gpu.nvidia.com/{pool}/gpu-0"],
                    "also": [],
                }
            ],
        }
    ]


def _refused(trace: Trace, pod: int, node: str) -> int:
    target = trace.add(pod, "target", f"node/{node}", "failed", "selector", f"{node}: refused")
    it = trace.add(target, "instanceType", "p5.48xlarge", "pruned", "selector", "by count")
    trace.nodes[it]["funnel"] = _selector_funnel(node)
    return target


def test_targets_refused_alike_share_the_first_ones_node_and_the_rest_is_renumbered():
    trace = Trace()
    earlier = trace.add(None, "pod", "ml-training/train-0", "ok", "scheduled")
    trace.add(earlier, "target", "node/ip-10-0-0-0", "ok", "fits")
    pod = trace.add(None, "pod", "ml-training/train-19")
    for name in ("ip-10-0-0-1", "ip-10-0-0-2", "ip-10-0-0-3"):
        _refused(trace, pod, name)
    trace.add(pod, "target", "node/ip-10-0-0-4", "failed", "taint", "did not tolerate taint")
    trace.add(pod, "target", "nodepool/gpu (new gpu-1)", "failed", "limits", "exceeds limits")
    trace.add(pod, "target", "nodepool/cpu (new cpu-1)", "failed", "limits", "exceeds limits")

    trace.group_targets(pod, trace_target_key)

    nodes = trace.nodes
    assert [n["id"] for n in nodes] == list(range(len(nodes)))
    assert all(n["parent"] is None or n["parent"] < n["id"] for n in nodes)
    assert nodes[:2] == [
        {
            "id": 0,
            "parent": None,
            "kind": "pod",
            "label": "ml-training/train-0",
            "status": "ok",
            "reason": "scheduled",
            "message": None,
        },
        {
            "id": 1,
            "parent": 0,
            "kind": "target",
            "label": "node/ip-10-0-0-0",
            "status": "ok",
            "reason": "fits",
            "message": None,
        },
    ]
    targets = [n for n in nodes if n["parent"] == pod]
    assert [(t["label"], t.get("targets", 1)) for t in targets] == [
        ("node/ip-10-0-0-1", 3),
        ("node/ip-10-0-0-4", 1),
        ("nodepool/gpu (new gpu-1)", 1),
        ("nodepool/cpu (new cpu-1)", 1),  # NodePools are never grouped, as in reasons
    ]
    assert targets[0]["exampleTargets"] == [
        "node/ip-10-0-0-1",
        "node/ip-10-0-0-2",
        "node/ip-10-0-0-3",
    ]
    # The first target keeps its own subtree (the instance type it was refused as).
    under_first = [n for n in nodes if n["parent"] == targets[0]["id"]]
    assert [n["label"] for n in under_first] == ["p5.48xlarge"]
    assert len(nodes) == 2 + 1 + 2 + 3


def test_holders_named_per_node_do_not_split_a_group_but_other_words_do():
    held = Trace()
    pod = held.add(None, "pod", "ml-training/train-19")
    for i in range(3):
        target = held.add(pod, "target", f"node/n{i}", "failed", "allocated", f"held by c-{i}")
        funnel = _selector_funnel(f"n{i}")
        funnel[0]["rejections"][0].update(reason="allocated", message=f"held by claim c-{i}")
        held.nodes[target]["funnel"] = funnel
    held.add(pod, "target", "node/n3", "failed", "resources", "exceeds node resources, cpu 4")
    held.add(pod, "target", "node/n4", "failed", "resources", "exceeds node resources, cpu 8")

    held.group_targets(pod, trace_target_key)

    targets = [n for n in held.nodes if n["parent"] == pod]
    assert [(t["label"], t.get("targets", 1)) for t in targets] == [
        ("node/n0", 3),
        ("node/n3", 1),
        ("node/n4", 1),
    ]


def _traced(nodes: int) -> tuple[dict, dict]:
    docs = existing_nodes(nodes, pods=40, missing_every=20)
    snapshot = load_files([("cluster.json", to_json(docs).encode())])
    out = simulate(snapshot, SimulationOptions(trace=True, suggestions=False))
    return out.result, out.trace


def _failed_subtrees(trace: dict) -> list[list[dict]]:
    nodes = trace["nodes"]
    roots = [n["id"] for n in nodes if n["kind"] == "pod" and n["status"] == "failed"]
    out = []
    for root in roots:
        inside = {root}
        subtree = []
        for n in nodes[root + 1 :]:
            if n["parent"] in inside:
                inside.add(n["id"])
                subtree.append(n)
        out.append(subtree)
    return out


def test_a_failing_pods_trace_does_not_grow_with_the_nodes_and_counts_every_target():
    small_result, small = _traced(30)
    large_result, large = _traced(120)

    for result, trace, nodes in ((small_result, small, 30), (large_result, large, 120)):
        failed = [p for p in result["pods"] if not p["scheduled"]]
        assert failed and all(p["cause"]["reason"] == "selector" for p in failed)
        # The cause counts every node's devices; the trace has them too, grouped.
        assert all(f"on {nodes * 8} devices" in p["cause"]["message"] for p in failed)
        for subtree in _failed_subtrees(trace):
            targets = [n for n in subtree if n["kind"] == "target"]
            assert sum(t.get("targets", 1) for t in targets) == nodes  # every node, counted
            assert len(targets) < 5
    assert [len(s) for s in _failed_subtrees(small)] == [len(s) for s in _failed_subtrees(large)]


def test_the_trace_changes_no_decision():
    docs = existing_nodes(60, pods=40, missing_every=20)
    snapshot = load_files([("cluster.json", to_json(docs).encode())])
    plain = simulate(snapshot, SimulationOptions(suggestions=False)).result
    traced, _ = _traced(60)
    for result in (plain, traced):
        result["stats"].pop("seconds")
    assert traced == plain
