"""Pods Karpenter does not provision for, through the whole run (docs/SIMULATION.md,
docs/RESULT.md): they are never scheduled, not even to an existing node that would fit them,
and the result lists them in ``ignoredPods`` with the reason; the CLI summary shows them."""

from __future__ import annotations

import io
import json
from pathlib import Path

import yaml
from jsonschema import Draft202012Validator

from allocator.cli import main
from tests.scheduling.k8s import (
    device_class,
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

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "allocator" / "result_schema.json").read_text()
)


def _cluster() -> list[dict]:
    return [
        device_class(),
        template("one-gpu", [request("gpu")]),
        node_pool("gpu"),
        instance_type("p5.48xlarge", gpus=8),
        node("ip-10-0-1-7", pool="gpu"),
        resource_slice(
            "ip-10-0-1-7-gpus", node="ip-10-0-1-7", owner="ip-10-0-1-7", devices=[gpu(0)]
        ),
    ]


def _gated(name: str, **kw) -> dict:
    doc = pod(name, templates={"gpu": "one-gpu"}, **kw)
    doc["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    doc["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}
    ]
    return doc


def _nominated(name: str) -> dict:
    doc = pod(name, templates={"gpu": "one-gpu"})
    doc["status"]["nominatedNodeName"] = "ip-10-0-1-7"
    return doc


def test_gated_and_nominated_pods_are_listed_not_scheduled():
    docs = _cluster() + [
        _gated("llama-finetune-0"),
        _nominated("llama-finetune-1"),
        pod("llama-finetune-2", templates={"gpu": "one-gpu"}),
    ]
    result = run(docs)
    assert [p["pod"] for p in result["pods"]] == ["default/llama-finetune-2"]
    assert pod_result(result, "default/llama-finetune-2")["target"]["name"] == "ip-10-0-1-7"
    assert result["ignoredPods"] == [
        {
            "pod": "default/llama-finetune-0",
            "reason": "scheduling gate kueue.x-k8s.io/admission",
            "code": "scheduling-gate",
        },
        {
            "pod": "default/llama-finetune-1",
            "reason": "nominated to node ip-10-0-1-7 (preemption in progress)",
            "code": "preempting",
        },
    ]
    assert result["stats"]["ignored"] == 2 and result["stats"]["pods"] == 1
    assert list(Draft202012Validator(SCHEMA).iter_errors(result)) == []


def test_an_ignored_pod_takes_nothing_an_existing_node_could_give():
    # The gated pod comes first in queue order (more CPU) and would take the node's only GPU.
    docs = _cluster() + [
        _gated("big-0", cpu="8"),
        pod("small-0", templates={"gpu": "one-gpu"}, cpu="1"),
    ]
    result = run(docs)
    assert pod_result(result, "default/small-0")["target"]["name"] == "ip-10-0-1-7"
    assert not result["nodeClaims"]


def test_an_empty_run_still_carries_the_list():
    result = run(_cluster() + [pod("api-0")])
    assert result["ignoredPods"] == [] and result["stats"]["ignored"] == 0


def test_the_cli_summary_lists_ignored_pods_with_their_reason(tmp_path):
    path = tmp_path / "snapshot.yaml"
    path.write_text(yaml.safe_dump_all(_cluster() + [_gated("llama-finetune-0")]))
    out, err = io.StringIO(), io.StringIO()
    assert main(["simulate", str(path)], stdout=out, stderr=err) == 0
    text = out.getvalue()
    assert "0 pending, 0 scheduled, 0 failed, 1 ignored" in text
    assert "Ignored (Karpenter does not provision for these pods):" in text
    assert "default/llama-finetune-0  scheduling gate kueue.x-k8s.io/admission" in text
