"""The examples for volume topology, host ports and ignored pods, through the command line
(``python -m allocator simulate EXAMPLE --json``)."""

from __future__ import annotations

import io
import json
from pathlib import Path

from allocator.cli import main

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def simulate(name: str) -> dict:
    out, err = io.StringIO(), io.StringIO()
    code = main(
        ["simulate", str(EXAMPLES / name), "--json", "--no-suggestions"], stdout=out, stderr=err
    )
    assert code == 0, err.getvalue()
    return json.loads(out.getvalue())


def pods(result: dict) -> dict[str, dict]:
    return {p["pod"]: p for p in result["pods"]}


def test_a_volume_bound_in_us_west_2b_takes_its_pod_there():
    result = simulate("volumes-zonal-model-cache.yaml")
    serve = pods(result)["inference/llama-serve-0"]
    (claim,) = result["nodeClaims"]
    assert serve["target"] == {"kind": "NodeClaim", "name": claim["name"], "new": True}
    zone = next(r for r in claim["requirements"] if r["key"] == "topology.kubernetes.io/zone")
    # us-west-2a is cheaper, but the model cache's EBS volume lives in us-west-2b.
    assert zone["values"] == ["us-west-2b"]
    assert claim["price"] == 2.40112
    assert result["ignoredPods"] == [
        {
            "pod": "inference/nightly-eval-0",
            "reason": "failed to validate pvc, pvc with immediate volume binding mode must be "
            "bound (PersistentVolumeClaim inference/eval-results, StorageClass io2-immediate)",
            "code": "volume",
        }
    ]


def test_three_vllm_replicas_with_the_same_host_port_take_three_nodes():
    result = simulate("hostports-vllm.yaml")
    by_pod = pods(result)
    targets = {by_pod[f"inference/vllm-{i}"]["target"]["name"] for i in range(3)}
    assert len(targets) == 3 and all(
        by_pod[f"inference/vllm-{i}"]["target"]["new"] for i in range(3)
    )
    assert len(result["nodeClaims"]) == 3
    # Port 9100 is held by node-exporter everywhere: on the existing node by its pod, on every
    # new node by the DaemonSet.
    metrics = by_pod["inference/vllm-metrics-0"]
    assert not metrics["scheduled"]
    reasons = {r["target"]: r["reason"] for r in metrics["reasons"]}
    assert reasons["node/ip-10-0-33-7.us-west-2.compute.internal"] == (
        "checking host port usage, pod hostport conflicts with existing hostport configuration "
        "(IP=0.0.0.0 Port=9100 Proto=TCP held by pod inference/node-exporter-q8w4z)"
    )
    # The DaemonSet stands as its newest pod, as Karpenter takes it.
    assert reasons["nodepool/gpu"].endswith("held by pod inference/node-exporter-q8w4z)")


def test_gated_nominated_and_unmarked_pods_are_ignored_with_their_reason():
    result = simulate("ignored-pods.yaml")
    assert [p["pod"] for p in result["pods"]] == ["ml/embed-0"]
    assert result["pods"][0]["target"]["name"] == "ip-10-0-12-34.us-west-2.compute.internal"
    reasons = {i["pod"]: (i["code"], i["reason"]) for i in result["ignoredPods"]}
    assert reasons == {
        "ml/llama-finetune-0": ("scheduling-gate", "scheduling gate kueue.x-k8s.io/admission"),
        "ml/embed-1": (
            "preempting",
            "nominated to node ip-10-0-12-34.us-west-2.compute.internal (preemption in progress)",
        ),
        "ml/batch-report-0": (
            "not-marked-unschedulable",
            "kube-scheduler has not marked it unschedulable (no PodScheduled condition)",
        ),
        "ml/karpenter-6d8f7b-x2k9q": (
            "karpenter-nodepool-does-not-exist",
            "configured to not run on a Karpenter provisioned node (requirement "
            "karpenter.sh/nodepool DoesNotExist)",
        ),
        "ml/debug-0": reasons["ml/debug-0"],
    }
    assert reasons["ml/debug-0"][1].startswith("using label kubernetes.io/hostname is not allowed")
    assert result["stats"]["ignored"] == 5 and not result["nodeClaims"]
