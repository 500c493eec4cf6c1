"""The feature objects appended to the demo snapshot: MIG partitions, a shared NIC, a dry run."""

from __future__ import annotations

from allocator.simulation import SimulationOptions, simulate
from tests.features.conftest import load_example


def test_demo_mig_node_shares_and_dry_run() -> None:
    result = simulate(load_example("demo-snapshot.yaml"), SimulationOptions()).result
    by_pod = {p["pod"]: p for p in result["pods"]}
    picked = []
    for name in ("inference/mig-infer-0", "inference/mig-infer-1"):
        pod = by_pod[name]
        assert pod["target"] == {"kind": "Node", "name": "mig-node-1", "new": False}
        devices = {d["request"]: d for c in pod["claims"] for d in c["devices"]}
        picked.append(devices["gpu"]["device"])
        assert devices["net"]["device"] == "eth1"
        assert devices["net"]["consumedCapacity"] == {"bandwidth": "25G"}
    # The two MIG halves fill the 80Gi counter set: the whole GPU is no longer allocatable.
    assert sorted(picked) == ["gpu-0-mig-3g-0", "gpu-0-mig-3g-1"]
    pools = {(p["driver"], p["pool"]): p for p in result["pools"]}
    gpu = pools[("gpu.nvidia.com", "mig-node-1")]
    assert {s["type"]: s["allocatable"] for s in gpu["partitionSummary"]} == {
        "3g.40gb": 0,
        "full": 0,
    }
    nic = pools[("nic.example.com", "mig-node-1-shared-nics")]
    assert nic["shareableSummary"]["capacity"] == [
        {"name": "bandwidth", "total": "100G", "consumed": "50G", "available": "50G"}
    ]
    (rule,) = result["deviceTaintRules"]
    assert (rule["publishedDevices"], rule["effect"]) == (8, "None")
    assert rule["message"].startswith("8 published devices selected.")
