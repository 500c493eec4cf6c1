"""What devices add to a pod's node resources (DRANodeAllocatableResources) in the loop."""

from __future__ import annotations

from allocator.featuregates import FeatureGates
from tests.scheduling.k8s import (
    claim,
    device_class,
    node,
    pod,
    pod_result,
    request,
    resource_slice,
    run,
    template,
)


def _cluster(*pods: dict) -> list[dict]:
    xpu = {
        "name": "xpu-0",
        "attributes": {"model": {"string": "model-x"}},
        "nodeAllocatableResources": {"overhead": {"memory": {"perPod": "8Gi"}}},
    }
    xpu1 = dict(xpu, name="xpu-1")
    return [
        device_class("xpu.example.com"),
        node("accel-node", cpu="16", memory="20Gi", instance_type=None),
        resource_slice(
            "accel-node-xpus",
            driver="xpu.example.com",
            node="accel-node",
            owner="accel-node",
            devices=[xpu, xpu1],
        ),
        template("one-xpu", [request("xpu", cls="xpu.example.com")]),
        *pods,
    ]


def test_device_overhead_is_charged_to_the_node():
    docs = _cluster(
        pod("infer-0", memory="4Gi", templates={"xpu": "one-xpu"}, created="2026-12-01T09:00:00Z"),
        pod("infer-1", memory="4Gi", templates={"xpu": "one-xpu"}, created="2026-12-01T09:01:00Z"),
    )
    result = run(docs)
    first = pod_result(result, "default/infer-0")
    assert first["draNodeResources"] == {"memory": "8Gi"}
    # 4Gi + 8Gi twice exceeds the node's 20Gi: the second pod fails on resources.
    second = pod_result(result, "default/infer-1")
    assert second["scheduled"] is False
    assert second["reasons"][0]["reason"].startswith("exceeds node resources")


def test_pod_level_requests_must_cover_device_overhead():
    limited = pod("infer-0", memory="4Gi", templates={"xpu": "one-xpu"})
    limited["spec"]["resources"] = {"requests": {"memory": "10Gi"}}
    entry = pod_result(run(_cluster(limited)), "default/infer-0")
    assert entry["scheduled"] is False
    assert entry["reasons"][0]["reason"].startswith(
        "allocating dynamic resources, pod default/infer-0"
    )


def _cpu_cluster(*docs: dict) -> list[dict]:
    """A CPU driver publishing whole cores (a mapping onto the node's cpu) and an xpu that
    only needs host memory (an overhead)."""
    cores = {
        "name": "socket0cpus",
        "capacity": {"cpu.example.com/cpu": {"value": "8"}},
        "nodeAllocatableResources": {"mapping": {"cpu": {"capacityKey": "cpu.example.com/cpu"}}},
    }
    xpu = {
        "name": "xpu-0",
        "nodeAllocatableResources": {"overhead": {"memory": {"perPod": "1Gi"}}},
    }
    return [
        device_class("cpu.example.com"),
        device_class("xpu.example.com"),
        node("cpu-node", cpu="64", memory="256Gi", instance_type=None),
        resource_slice("cpu-node-cpus", driver="cpu.example.com", node="cpu-node", devices=[cores]),
        resource_slice("cpu-node-xpus", driver="xpu.example.com", node="cpu-node", devices=[xpu]),
        claim("pinned-cpus", [request("cpus", cls="cpu.example.com")]),
        claim("shared-xpu", [request("xpu", cls="xpu.example.com")]),
        *docs,
    ]


def test_a_claim_mapping_node_resources_cannot_be_shared_by_two_pods():
    docs = _cpu_cluster(
        pod("pinned-0", claims={"cpus": "pinned-cpus"}, created="2026-12-01T09:00:00Z"),
        pod("pinned-1", claims={"cpus": "pinned-cpus"}, created="2026-12-01T09:01:00Z"),
        pod("xpu-0", claims={"xpu": "shared-xpu"}, created="2026-12-01T09:02:00Z"),
        pod("xpu-1", claims={"xpu": "shared-xpu"}, created="2026-12-01T09:03:00Z"),
    )
    result = run(docs)
    first = pod_result(result, "default/pinned-0")
    assert first["scheduled"] is True and first["draNodeResources"] == {"cpu": "8"}
    second = pod_result(result, "default/pinned-1")
    assert second["scheduled"] is False
    assert second["error"] == (
        "claim default/pinned-cpus maps node allocatable resources and cannot be shared by "
        "several pods (default/pinned-0, default/pinned-1)"
    )
    assert second["claims"][0]["state"] == "allocated-in-memory"
    # Overhead-only devices may be shared: each pod pays its own overhead.
    for name in ("xpu-0", "xpu-1"):
        entry = pod_result(result, f"default/{name}")
        assert entry["scheduled"] is True and entry["draNodeResources"] == {"memory": "1Gi"}
    # Without the feature nothing maps resources, so nothing forbids the sharing.
    off = run(docs, gates=FeatureGates.from_mapping({"DRANodeAllocatableResources": False}))
    assert pod_result(off, "default/pinned-1")["scheduled"] is True


def test_an_in_cluster_claim_reserved_for_a_running_pod_is_not_shared():
    docs = _cpu_cluster(
        claim(
            "held-cpus",
            [request("cpus", cls="cpu.example.com")],
            allocated=[("cpus", "cpu.example.com", "cpu-node", "socket0cpus")],
            reserved_for=["pinned-a"],
        ),
        pod("pinned-a", node_name="cpu-node", claims={"cpus": "held-cpus"}),
        pod("pinned-b", claims={"cpus": "held-cpus"}),
    )
    entry = pod_result(run(docs), "default/pinned-b")
    assert entry["scheduled"] is False
    assert (
        "cannot be shared by several pods (default/pinned-a, default/pinned-b)" in (entry["error"])
    )
