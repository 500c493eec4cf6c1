"""The demo snapshot shows every integration paragraph and fails pods for different reasons."""

from __future__ import annotations

from pathlib import Path

from allocator.simulation import SimulationOptions, simulate
from allocator.snapshot import load_paths
from tests.scheduling.k8s import pod_result

DEMO = str(Path(__file__).resolve().parents[2] / "examples" / "demo-snapshot.yaml")


def test_demo_snapshot_covers_the_design():
    snap = load_paths([DEMO])
    assert len(snap.instance_types) >= 10 and len(snap.node_pools) >= 3
    zones = {o.zone for it in snap.instance_types.values() for o in it.offerings}
    assert len(zones) >= 3
    result = simulate(snap, SimulationOptions()).result
    targets = {p["pod"]: p["target"] for p in result["pods"]}
    kinds = {(t["kind"], t["new"]) for t in targets.values() if t}
    assert kinds == {("Node", False), ("NodeClaim", False), ("NodeClaim", True)}
    # Pre-initialized node: template devices; the freed GPU of a terminating pod is reused.
    sdxl = pod_result(result, "inference/sdxl-l40s-0")
    assert sdxl["target"]["name"] == "gpu-node-c"
    assert sdxl["claims"][0]["devices"][0]["source"] == "template"
    bert = pod_result(result, "inference/bert-a100-0")
    assert bert["claims"][0]["devices"][0]["device"] == "gpu-4"
    # A claim shared by two pending pods: the second finds it allocated in memory.
    assert pod_result(result, "inference/rag-1")["claims"][0]["state"] == "allocated-in-memory"
    # Training pods: 8 GPU+NIC pairs bound by pcieRoot on a new p5.48xlarge.
    llama = pod_result(result, "ml-training/llama-train-0")
    assert llama["target"]["new"] is True
    assert len(llama["claims"]) == 8
    failures = {p["pod"]: p["error"] for p in result["pods"] if not p["scheduled"]}
    expected = {
        "ml-training/llama-train-2": "exceed limits",
        "ml-training/blackwell-probe-0": "no instance type can satisfy the allocation",
        "ml-training/tpu-job-0": "not found",
        "ml-training/giant-a100-0": "exceeding maximum",
        "web/eu-only-0": "incompatible",
        "web/huge-memory-0": "no instance type satisfied resources",
        "ml-training/h100-untolerated-0": "did not tolerate taint",
        "inference/gpu-debug-0": "admin access",
    }
    for key, text in expected.items():
        assert text in failures[key], (key, failures[key])
    # Admin access in a labelled namespace sees every A100 of the node, allocated or not.
    probe = pod_result(result, "gpu-ops/dcgm-probe-0")
    assert len(probe["claims"][0]["devices"]) == 8
    assert all(d["adminAccess"] for d in probe["claims"][0]["devices"])
    gating = {g["nodeClaim"]: g["status"] for g in result["initializationGating"]}
    assert gating == {
        "gpu-general-7hq2x": "Initialized",
        "gpu-general-p9rfm": "Unknown",
        "gpu-general-x4k8d": "Unknown",
    }


def test_runs_are_deterministic():
    snap = load_paths([DEMO])
    first = simulate(snap, SimulationOptions(trace=True))
    second = simulate(load_paths([DEMO]), SimulationOptions(trace=True))
    for out in (first, second):
        out.result["stats"].pop("seconds")
        out.result["stats"].pop("suggestionSeconds")  # a clock reading too
    assert first.result == second.result
    assert first.trace == second.trace
