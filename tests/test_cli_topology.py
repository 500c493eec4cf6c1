"""The topology examples (examples/topology-*.yaml) through the command line: where Karpenter's
topology puts the pods, and the zone each new NodeClaim gets."""

from __future__ import annotations

import io
import json
from pathlib import Path

from allocator.cli import main

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
ZONE = "topology.kubernetes.io/zone"


def simulate(name: str, *extra: str) -> dict:
    out, err = io.StringIO(), io.StringIO()
    code = main(["simulate", str(EXAMPLES / name), "--json", *extra], stdout=out, stderr=err)
    assert code == 0, err.getvalue()
    return json.loads(out.getvalue())


def zones(nodeclaim: dict) -> list[str]:
    (zone,) = [r for r in nodeclaim["requirements"] if r["key"] == ZONE]
    assert zone["operator"] == "In"
    return zone["values"]


def placements(result: dict) -> dict[str, str]:
    return {p["pod"]: p["target"]["name"] for p in result["pods"] if p["scheduled"]}


def test_zone_spread_puts_two_gpu_pods_in_each_zone():
    result = simulate("topology-zone-spread.yaml")
    assert placements(result) == {
        "ml/llama-finetune-0": "gpu-1",
        "ml/llama-finetune-1": "gpu-2",
        "ml/llama-finetune-2": "gpu-1",
        "ml/llama-finetune-3": "gpu-2",
    }
    assert [(nc["name"], zones(nc)) for nc in result["nodeClaims"]] == [
        ("gpu-1", ["us-west-2a"]),
        ("gpu-2", ["us-west-2b"]),
    ]
    # No placeholder hostname reaches the result.
    assert all(
        r["key"] != "kubernetes.io/hostname"
        for nc in result["nodeClaims"]
        for r in nc["requirements"]
    )


def test_zone_spread_summary_names_each_nodeclaims_zone():
    out = io.StringIO()
    assert main(["simulate", str(EXAMPLES / "topology-zone-spread.yaml")], stdout=out) == 0
    lines = out.getvalue().splitlines()
    header = next(line for line in lines if line.startswith("NAME"))
    assert header.split()[:5] == ["NAME", "NODEPOOL", "INSTANCE", "TYPES", "ZONES"]
    row = next(line for line in lines if line.startswith("gpu-2 "))
    assert row[header.index("ZONES") :].startswith("us-west-2b")


def test_vllm_replicas_with_hostname_anti_affinity_get_a_nodeclaim_each(tmp_path):
    trace_file = tmp_path / "trace.json"
    result = simulate("topology-vllm-anti-affinity.yaml", "--trace", str(trace_file))
    assert sorted(placements(result).values()) == ["gpu-1", "gpu-2", "gpu-3"]
    assert [len(nc["pods"]) for nc in result["nodeClaims"]] == [1, 1, 1]
    # The later replicas were refused by the earlier NodeClaims in Karpenter's words.
    trace = json.loads(trace_file.read_text())
    refusals = [
        n["message"]
        for n in trace["nodes"]
        if n["kind"] == "target" and n.get("reason") == "topology"
    ]
    assert len(refusals) == 3  # the second replica on gpu-1, the third on gpu-1 and gpu-2
    assert refusals[0].startswith(
        "unsatisfiable topology constraint for pod anti-affinity, key=kubernetes.io/hostname "
        "(counts = gpu-1: 1, podDomains = kubernetes.io/hostname Exists, "
        "nodeDomains = kubernetes.io/hostname In [gpu-1]"
    )


def test_decoder_follows_the_kv_cache_into_its_zone():
    result = simulate("topology-decoder-affinity.yaml")
    (decoder,) = result["pods"]
    assert decoder["pod"] == "inference/decoder-0" and decoder["scheduled"]
    (nodeclaim,) = result["nodeClaims"]
    # us-west-2a is the cheapest zone; the affinity to the running kv-cache pod wins.
    assert zones(nodeclaim) == ["us-west-2b"]
    assert nodeclaim["pods"] == ["inference/decoder-0"]


def test_an_anti_affinity_refusal_names_the_pod_in_the_way(tmp_path):
    """With the NodePool's cpu limit allowing one p5.48xlarge, the second and third replicas
    cannot get a node of their own: the refusal keeps Karpenter's words and names the replica
    already on gpu-1."""
    import yaml

    docs = list(yaml.safe_load_all((EXAMPLES / "topology-vllm-anti-affinity.yaml").read_text()))
    for doc in docs:
        if doc and doc["kind"] == "NodePool":
            doc["spec"]["limits"] = {"cpu": "200"}
    path = tmp_path / "limited.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    out, err = io.StringIO(), io.StringIO()
    assert main(["simulate", str(path), "--json"], stdout=out, stderr=err) == 0
    first, *others = json.loads(out.getvalue())["pods"]
    assert first["scheduled"]
    for pod in others:
        assert not pod["scheduled"]
        reason = dict((r["target"], r["reason"]) for r in pod["reasons"])["node/gpu-1"]
        assert reason.startswith(
            "unsatisfiable topology constraint for pod anti-affinity, key=kubernetes.io/hostname "
            "(counts = gpu-1: 1"
        )
        assert f"[pods it selects in kubernetes.io/hostname=gpu-1: 1 ({first['pod']})]" in reason
