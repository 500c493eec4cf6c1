"""The demo snapshot's failed pods get verified suggestions, valid against the result schema,
at a bounded cost."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from allocator.simulation import SimulationOptions, simulate
from allocator.snapshot import load_paths
from tests.scheduling.k8s import pod_result

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "allocator" / "result_schema.json").read_text())


@pytest.fixture(scope="module")
def result():
    return simulate(load_paths([str(ROOT / "examples" / "demo-snapshot.yaml")])).result


def kinds(result, key):
    return [s["kind"] for s in pod_result(result, key)["suggestions"]]


def test_demo_failed_pods_get_the_changes_that_would_place_them(result):
    giant = pod_result(result, "ml-training/giant-a100-0")["suggestions"][0]
    assert giant["kind"] == "reduce-count" and giant["change"]["value"] == 8
    eu = pod_result(result, "web/eu-only-0")["suggestions"][0]
    assert eu["kind"] == "nodepool-requirement"
    assert "topology.kubernetes.io/zone" in eu["message"]
    assert "relax-selector" in kinds(result, "ml-training/blackwell-probe-0")
    assert "nodepool-limit" in kinds(result, "ml-training/llama-train-2")
    # A DeviceClass that does not exist: no change of the pod's helps.
    assert kinds(result, "ml-training/tpu-job-0") == []
    # 4Ti of memory where the largest instance type has 1152Gi: the largest request that fits.
    (memory,) = pod_result(result, "web/huge-memory-0")["suggestions"]
    assert memory["kind"] == "reduce-request" and memory["scope"] == "pod"
    assert memory["change"]["value"] == {"requests": {"cpu": "64", "memory": "1151Gi"}}
    assert "pod template of ReplicaSet huge-memory" in memory["message"]


def test_demo_placed_pods_carry_none_and_the_document_validates(result):
    for entry in result["pods"]:
        if entry["scheduled"]:
            assert entry["suggestions"] == []
    jsonschema.Draft202012Validator(SCHEMA).validate(result)


def test_schema_refuses_a_suggestion_without_a_target(result):
    broken = json.loads(json.dumps(result))
    entry = next(e for e in broken["pods"] if e["suggestions"])
    del entry["suggestions"][0]["target"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(SCHEMA).validate(broken)


def test_demo_suggestions_cost_is_bounded(result):
    stats = result["stats"]
    assert 0 < stats["suggestionTrials"] <= 24 * stats["failed"]
    assert stats["suggestionSeconds"] < 5  # ~0.25 s on the shared 2-core machine
    off = simulate(
        load_paths([str(ROOT / "examples" / "demo-snapshot.yaml")]),
        SimulationOptions(suggestions=False),
    ).result
    assert [e["target"] for e in off["pods"]] == [e["target"] for e in result["pods"]]
