"""Explanations: per-target reasons and a Karpenter-style error, NodePool reasons last."""

from __future__ import annotations

from allocator.scheduling.explain import summarize
from tests.scheduling.k8s import (
    device_class,
    families,
    gpu,
    instance_type,
    node,
    node_pool,
    pod,
    pod_result,
    request,
    resource_slice,
    run,
    template,
)

P5 = families("p5")


def _cluster(*extra: dict) -> list[dict]:
    return [
        device_class(),
        node_pool("gpu", requirements=P5),
        instance_type("p5.48xlarge", gpus=8),
        node("gpu-node-a", pool="gpu"),
        resource_slice("gpu-node-a-gpus", node="gpu-node-a", owner="gpu-node-a", devices=[gpu(0)]),
        *extra,
    ]


def test_each_failure_carries_the_design_error_text():
    docs = _cluster(
        template(
            "b200",
            [
                request(
                    "gpu",
                    selectors=['device.attributes["gpu.nvidia.com"].productName == "NVIDIA B200"'],
                )
            ],
        ),
        template("tpu", [request("tpu", cls="tpu.google.com")]),
        template("forty", [request("gpus", count=40)]),
        pod("wants-b200", templates={"gpu": "b200"}),
        pod("wants-tpu", templates={"tpu": "tpu"}),
        pod("wants-forty", templates={"gpus": "forty"}),
    )
    result = run(docs)
    expected = {
        "default/wants-b200": "no instance type can satisfy the allocation",
        "default/wants-tpu": "not found",
        "default/wants-forty": "exceeding maximum",
    }
    for key, text in expected.items():
        entry = pod_result(result, key)
        assert entry["scheduled"] is False
        assert text in entry["error"], entry["error"]
        targets = [r["target"] for r in entry["reasons"]]
        assert targets == ["node/gpu-node-a", "nodepool/gpu"]
        for r in entry["reasons"]:
            assert r["reason"].startswith(
                (
                    "allocating dynamic resources",
                    'incompatible with nodepool "gpu", daemonset overhead={}, allocating',
                )
            )
            assert text in r["reason"]
        # Karpenter's log line: existing targets first, the NodePool reasons last.
        assert entry["error"].startswith("could not schedule pod, node/gpu-node-a: ")
        assert entry["error"].endswith(entry["reasons"][-1]["reason"])


def test_summary_groups_identical_node_reasons():
    reasons = [(f"node/n{i}", "node is unschedulable") for i in range(5)]
    reasons.append(
        ("nodepool/gpu", 'incompatible with nodepool "gpu", did not tolerate taint x:NoSchedule')
    )
    text = summarize(reasons)
    assert text == (
        "could not schedule pod, node/n0, node/n1, node/n2 and 2 more: node is unschedulable; "
        'incompatible with nodepool "gpu", did not tolerate taint x:NoSchedule'
    )
