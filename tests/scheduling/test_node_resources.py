"""What devices add to a pod's node resources (DRANodeAllocatableResources) in the loop."""

from __future__ import annotations

from tests.scheduling.k8s import (
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
