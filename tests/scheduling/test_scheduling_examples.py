"""The scheduling examples (examples/scheduling-*.yaml) through the command line, as a user
runs them: ``python -m allocator simulate FILE --json`` and the human summary."""

from __future__ import annotations

import io
import json
from pathlib import Path

from allocator.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _simulate(name: str, *flags: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["simulate", str(EXAMPLES / name), *flags], stdout=out, stderr=err)
    assert err.getvalue() == "" or code == 0, err.getvalue()
    return code, out.getvalue()


def _result(name: str) -> dict:
    code, out = _simulate(name, "--json")
    assert code == 0
    return json.loads(out)


def _pod(result: dict, key: str) -> dict:
    return next(p for p in result["pods"] if p["pod"] == key)


def _node_claim(result: dict, name: str) -> dict:
    return next(nc for nc in result["nodeClaims"] if nc["name"] == name)


def test_preferred_on_demand_is_held_and_an_impossible_preference_is_relaxed():
    result = _result("scheduling-preferred-on-demand.yaml")
    server = _pod(result, "default/llm-server-0")
    assert "relaxed" not in server
    nc = _node_claim(result, server["target"]["name"])
    assert {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]} in (
        nc["requirements"]
    )
    batch = _pod(result, "default/batch-embed-0")
    assert batch["scheduled"] is True
    assert batch["relaxed"] == [
        {
            "kind": "preferred-node-affinity",
            "term": {
                "weight": 10,
                "preference": {
                    "matchExpressions": [
                        {
                            "key": "topology.kubernetes.io/zone",
                            "operator": "In",
                            "values": ["us-west-2d"],
                        }
                    ]
                },
            },
        }
    ]
    _, summary = _simulate("scheduling-preferred-on-demand.yaml")
    assert "Placed after relaxing preferences:\ndefault/batch-embed-0: preferred-node-affinity" in (
        summary
    )


def test_equal_weight_nodepools_are_tried_name_descending():
    result = _result("scheduling-equal-weight-nodepools.yaml")
    entry = _pod(result, "default/whisper-0")
    assert entry["target"] == {"kind": "NodeClaim", "name": "spot-l4-1", "new": True}
    assert [nc["nodePool"] for nc in result["nodeClaims"]] == ["spot-l4"]


def test_min_values_refuses_a_nodeclaim_left_with_one_family_and_the_pod_falls_through():
    result = _result("scheduling-min-values.yaml")
    trainer = _pod(result, "default/trainer-0")
    assert trainer["target"]["name"] == "fallback-1"
    notebook = _node_claim(result, _pod(result, "default/notebook-0")["target"]["name"])
    assert notebook["nodePool"] == "flexible"
    assert notebook["instanceTypes"] == ["g6.12xlarge", "g6e.12xlarge"]
    family = next(
        r for r in notebook["requirements"] if r["key"] == "karpenter.k8s.aws/instance-family"
    )
    assert family["minValues"] == 2


def test_min_values_refusal_names_the_key_when_no_nodepool_can_take_the_pod(tmp_path):
    text = (EXAMPLES / "scheduling-min-values.yaml").read_text()
    # Without the fallback NodePool the trainer fails with Karpenter's words.
    docs = [d for d in text.split("\n---\n") if "name: fallback" not in d]
    path = tmp_path / "no-fallback.yaml"
    path.write_text("\n---\n".join(docs))
    out, err = io.StringIO(), io.StringIO()
    assert main(["simulate", str(path), "--json"], stdout=out, stderr=err) == 0
    trainer = _pod(json.loads(out.getvalue()), "default/trainer-0")
    assert trainer["scheduled"] is False
    assert (
        "minValues requirement is not met for label(s) karpenter.k8s.aws/instance-family "
        "(1 of minValues 2)" in trainer["error"]
    )


def test_nodes_limit_reached_sends_the_pod_to_the_next_nodepool():
    result = _result("scheduling-nodes-limit.yaml")
    entry = _pod(result, "default/finetune-0")
    assert entry["target"] == {"kind": "NodeClaim", "name": "burst-h100-1", "new": True}
    assert [nc["nodePool"] for nc in result["nodeClaims"]] == ["burst-h100"]


def test_a_preferred_anti_affinity_is_held_until_a_limit_forces_its_relaxation():
    """Relaxing the preference removes the term topology counts: the replicas then share the
    one NodeClaim the cpu limit allows, each naming the term it gave up."""
    result = _result("topology-vllm-preferred-anti-affinity.yaml")
    assert [nc["name"] for nc in result["nodeClaims"]] == ["gpu-1"]
    first, *others = result["pods"]
    assert first["target"]["name"] == "gpu-1" and "relaxed" not in first
    for pod in others:
        assert pod["scheduled"] and pod["target"]["name"] == "gpu-1"
        assert [r["kind"] for r in pod["relaxed"]] == ["preferred-pod-anti-affinity"]
        term = pod["relaxed"][0]["term"]["podAffinityTerm"]
        assert term["topologyKey"] == "kubernetes.io/hostname"


def test_a_gpu_only_daemonset_counts_only_on_gpu_instance_types():
    result = _result("scheduling-daemonset-overhead.yaml")
    api = _pod(result, "default/api-server-0")
    statsd = _pod(result, "default/statsd-exporter-0")
    # Both on one m7i NodeClaim: the DCGM exporter's 1 CPU and host port 9400 are only on g6e.
    assert (
        api["target"] == statsd["target"] == {"kind": "NodeClaim", "name": "mixed-1", "new": True}
    )
    assert sorted(_node_claim(result, "mixed-1")["instanceTypes"]) == ["m7i.2xlarge", "m7i.xlarge"]
