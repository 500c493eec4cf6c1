"""Verified suggestions end to end through the command line, on snapshots written the way users
write them (tests/fixtures/suggestions: ``kubectl get -o yaml`` multi-document YAML and
``kubectl get -o json`` Lists, NVIDIA's GPU driver attributes, EKS nodes, Karpenter NodePools
and an AWS instance type catalog with template ResourceSlices). Each snapshot has one failed
pod; the test reads the result document of ``simulate --json`` and the first suggestion line of
the human summary, then applies the suggested change to the snapshot, simulates again and
checks that the pod lands where the suggestion said."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from allocator.suggestions import apply_change

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "suggestions"
CATALOG = FIXTURES / "aws-gpu-instance-types.json"
SCHEMA = json.loads((ROOT / "allocator" / "result_schema.json").read_text())


def cli(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "allocator", "simulate", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done


def simulate_json(*paths: Path, extra: tuple[str, ...] = ()) -> dict:
    return json.loads(cli(*map(str, paths), "--json", *extra).stdout)


def failed_pod(result: dict, key: str) -> dict:
    entries = [p for p in result["pods"] if p["pod"] == key]
    assert entries, [p["pod"] for p in result["pods"]]
    entry = entries[0]
    assert entry["scheduled"] is False, entry["target"]
    assert entry["target"] is None
    return entry


def first_of(entry: dict, kind: str) -> dict:
    found = [s for s in entry["suggestions"] if s["kind"] == kind]
    assert found, [(s["kind"], s["message"]) for s in entry["suggestions"]]
    return found[0]


def summary_suggestion(path: Path, key: str) -> str:
    """The summary's suggestion line under the pod's entry in "Failures"."""
    out = cli(str(path), str(CATALOG)).stdout
    failures = out.split("\nFailures:\n", 1)[1]
    section = failures.split(f"{key}:", 1)[1]
    for line in section.splitlines():
        if line.startswith("  suggestion ["):
            return line
        if line and not line.startswith(" "):
            break
    raise AssertionError(f"no suggestion line for {key} in:\n{out}")


def documents(path: Path) -> list[dict]:
    text = path.read_text()
    if path.suffix == ".json":
        doc = json.loads(text)
        return list(doc["items"]) if doc.get("kind", "").endswith("List") else [doc]
    return [d for d in yaml.safe_load_all(text) if d]


def placed_after(path: Path, suggestion: dict, key: str, tmp_path: Path) -> dict:
    """Apply the change to the snapshot's documents, simulate again (no suggestions): the pod
    is placed, on the suggestion's target."""
    changed = tmp_path / f"changed-{path.stem}.yaml"
    changed.write_text(yaml.safe_dump_all(apply_change(documents(path), suggestion["change"])))
    result = simulate_json(changed, CATALOG, extra=("--no-suggestions",))
    entry = next(p for p in result["pods"] if p["pod"] == key)
    assert entry["scheduled"], entry["error"]
    assert entry["target"] == suggestion["target"]
    return entry


def check_all_targets(result: dict) -> None:
    """Every suggestion names where the pod would go; placed pods carry none; the document
    is valid against the result schema."""
    jsonschema.validate(result, SCHEMA)
    for entry in result["pods"]:
        if entry["scheduled"]:
            assert entry["suggestions"] == []
            continue
        for s in entry["suggestions"]:
            assert s["target"]["kind"] in ("Node", "NodeClaim"), s
            assert s["target"]["name"], s
            assert isinstance(s["target"]["new"], bool), s
            assert s["change"]["object"] and s["message"], s


# --- taints ----------------------------------------------------------------------------------


def test_device_taint_from_a_device_taint_rule_gets_a_request_toleration(tmp_path):
    path = FIXTURES / "device-taint.yaml"
    key = "ml-serving/llama-inference-6c9d8f7b5-x2k9q"
    result = simulate_json(path, CATALOG)
    check_all_targets(result)
    entry = failed_pod(result, key)
    s = entry["suggestions"][0]
    assert s["kind"] == "tolerate-taint"
    assert "gpu.nvidia.com/maintenance=driver-upgrade:NoSchedule" in s["message"]
    assert s["change"] == {
        "object": "ResourceClaimTemplate ml-serving/single-t4",
        "field": "spec.spec.devices.requests[0].exactly.tolerations",
        "op": "set",
        "value": [
            {"key": "gpu.nvidia.com/maintenance", "operator": "Exists", "effect": "NoSchedule"}
        ],
    }
    node = "ip-10-0-12-34.us-west-2.compute.internal"
    assert s["target"] == {"kind": "Node", "name": node, "new": False}
    line = summary_suggestion(path, key)
    assert line.startswith("  suggestion [tolerate-taint]: tolerate device taint ")
    assert "gpu.nvidia.com/maintenance=driver-upgrade:NoSchedule" in line
    assert f"the pod would then go to Node {node}" in line
    placed_after(path, s, key, tmp_path)


def test_node_taint_on_an_eks_gpu_node_gets_a_pod_toleration_json_list_and_plain_claim(tmp_path):
    path = FIXTURES / "node-taint.json"
    key = "research/notebook-0"
    result = simulate_json(path, CATALOG)
    check_all_targets(result)
    s = failed_pod(result, key)["suggestions"][0]
    assert s["kind"] == "tolerate-taint"
    assert "nvidia.com/gpu=true:NoSchedule" in s["message"]
    assert s["change"]["object"] == "Pod research/notebook-0"
    assert s["change"]["field"] == "spec.tolerations"
    # The pod's own tolerations are kept, the new one appended.
    assert s["change"]["value"][-1] == {
        "key": "nvidia.com/gpu",
        "operator": "Exists",
        "effect": "NoSchedule",
    }
    assert [t["key"] for t in s["change"]["value"][:2]] == [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ]
    node = "ip-10-0-33-7.us-west-2.compute.internal"
    assert s["target"] == {"kind": "Node", "name": node, "new": False}
    line = summary_suggestion(path, key)
    assert line.startswith("  suggestion [tolerate-taint]: tolerate taint nvidia.com/gpu=true")
    placed_after(path, s, key, tmp_path)


def test_nodepool_taint_gets_a_pod_toleration_and_a_new_nodeclaim(tmp_path):
    path = FIXTURES / "nodepool-taint.yaml"
    key = "finetune/lora-finetune-7xk2p"
    result = simulate_json(path, CATALOG)
    check_all_targets(result)
    s = failed_pod(result, key)["suggestions"][0]
    assert s["kind"] == "tolerate-taint"
    assert "nvidia.com/gpu:NoSchedule" in s["message"]
    assert s["change"] == {
        "object": "Pod finetune/lora-finetune-7xk2p",
        "field": "spec.tolerations",
        "op": "set",
        "value": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    assert s["target"] == {"kind": "NodeClaim", "name": "gpu-t4-1", "new": True}
    line = summary_suggestion(path, key)
    assert line.startswith(
        "  suggestion [tolerate-taint]: tolerate taint nvidia.com/gpu:NoSchedule"
    )
    assert line.rstrip().endswith("the pod would then go to NodeClaim gpu-t4-1 (new)")
    placed_after(path, s, key, tmp_path)


# --- the pod's claims --------------------------------------------------------------------------


def test_more_gpus_than_any_instance_type_gets_reduce_count_to_eight(tmp_path):
    path = FIXTURES / "too-many-gpus.json"
    key = "research/pretrain-llm-0"
    result = simulate_json(path, CATALOG)
    check_all_targets(result)
    s = failed_pod(result, key)["suggestions"][0]
    assert s["kind"] == "reduce-count"
    assert s["change"] == {
        "object": "ResourceClaim research/pretrain-gpus",
        "field": "spec.devices.requests[0].exactly.count",
        "op": "set",
        "value": 8,  # p5.48xlarge, the largest GPU count of the catalog
    }
    assert "from 16 to 8" in s["message"]
    assert s["target"] == {"kind": "NodeClaim", "name": "gpu-1", "new": True}
    line = summary_suggestion(path, key)
    assert line.startswith("  suggestion [reduce-count]: reduce request gpus of claim ")
    assert "from 16 to 8 devices" in line
    entry = placed_after(path, s, key, tmp_path)
    devices = entry["claims"][0]["devices"]
    assert {d["instanceType"] for d in devices} == {"p5.48xlarge"}


def test_selector_on_an_h100_in_a_t4_cluster_gets_relax_selector_naming_product_name(tmp_path):
    path = FIXTURES / "missing-model.yaml"
    key = "llm/embeddings-0"
    result = simulate_json(path, CATALOG)
    check_all_targets(result)
    entry = failed_pod(result, key)
    s = first_of(entry, "relax-selector")
    assert "the condition on gpu.nvidia.com/productName" in s["message"]
    assert (
        'other hardware than it asked for: "Tesla T4", not "NVIDIA H100 80GB HBM3"'
        in (s["message"])
    )
    assert s["change"] == {
        "object": "ResourceClaimTemplate llm/h100",
        "field": "spec.spec.devices.requests[0].exactly.selectors",
        "op": "set",
        "value": [],
    }
    node = "ip-10-0-40-11.us-west-2.compute.internal"
    assert s["target"] == {"kind": "Node", "name": node, "new": False}
    assert f"gpu.nvidia.com/{node}/gpu-0" in s["message"]  # the device it admits
    placed_after(path, s, key, tmp_path)
    # No H100 anywhere in reach: the supply side first (the NodePool, then the catalog's
    # p5.48xlarge), both keeping the H100; the selector that gives it up last.
    kinds = [(x["kind"], x["scope"]) for x in entry["suggestions"]]
    assert kinds == [
        ("nodepool-requirement", "nodepool"),
        ("add-instance-type", "catalog"),
        ("relax-selector", "pod"),
    ]
    line = summary_suggestion(path, key)
    assert line.startswith("  suggestion [nodepool-requirement]: drop requirement ")


def test_match_attribute_no_gpu_nic_pair_meets_gets_drop_constraint(tmp_path):
    path = FIXTURES / "drop-constraint.yaml"
    key = "training/nccl-worker-0"
    result = simulate_json(path, CATALOG)
    check_all_targets(result)
    s = first_of(failed_pod(result, key), "drop-constraint")
    assert "matchAttribute resource.kubernetes.io/pcieRoot" in s["message"]
    assert s["change"] == {
        "object": "ResourceClaimTemplate training/gpu-with-efa",
        "field": "spec.spec.devices.constraints",
        "op": "set",
        "value": [],
    }
    node = "ip-10-0-80-5.us-west-2.compute.internal"
    assert s["target"] == {"kind": "Node", "name": node, "new": False}
    assert summary_suggestion(path, key).startswith(
        "  suggestion [drop-constraint]: drop constraint matchAttribute "
        "resource.kubernetes.io/pcieRoot"
    )
    placed_after(path, s, key, tmp_path)


# --- requirements, limits, the catalog ---------------------------------------------------------


def test_arm64_pod_against_amd64_gpu_nodepool_gets_a_suggestion_naming_kubernetes_io_arch(
    tmp_path,
):
    path = FIXTURES / "arch-mismatch.yaml"
    key = "vision/detector-5f7d9c8b4-qx7lm"
    result = simulate_json(path, CATALOG)
    check_all_targets(result)
    s = failed_pod(result, key)["suggestions"][0]
    assert s["kind"] == "nodepool-requirement"
    assert "kubernetes.io/arch" in s["message"]
    assert s["change"] == {
        "object": "Pod vision/detector-5f7d9c8b4-qx7lm",
        "field": "spec.nodeSelector",
        "op": "set",
        "value": {"kubernetes.io/os": "linux"},
    }
    assert s["target"] == {"kind": "NodeClaim", "name": "gpu-1", "new": True}
    line = summary_suggestion(path, key)
    assert line.startswith("  suggestion [nodepool-requirement]: drop the pod's node selector ")
    assert "kubernetes.io/arch=arm64" in line
    placed_after(path, s, key, tmp_path)


def test_arm64_nodepool_with_only_amd64_gpu_types_gets_its_arch_requirement_dropped(tmp_path):
    path = FIXTURES / "arch-nodepool.yaml"
    key = "vision/detector-5f7d9c8b4-qx7lm"
    result = simulate_json(path, CATALOG)
    check_all_targets(result)
    entry = failed_pod(result, key)
    s = entry["suggestions"][0]
    assert s["kind"] == "nodepool-requirement"
    assert "kubernetes.io/arch In [arm64]" in s["message"]
    assert s["change"]["object"] == "NodePool gpu"
    assert s["change"]["field"] == "spec.template.spec.requirements"
    assert all(r["key"] != "kubernetes.io/arch" for r in s["change"]["value"])
    assert s["target"] == {"kind": "NodeClaim", "name": "gpu-1", "new": True}
    assert "kubernetes.io/arch" in summary_suggestion(path, key)
    placed_after(path, s, key, tmp_path)
    # The catalog alternative names a GPU type (one without GPUs could not take the pod) and
    # says why: the NodePool allows none of the catalog.
    for other in entry["suggestions"][1:]:
        if other["kind"] == "add-instance-type":
            assert "allow instance type g4dn." in other["message"]
            assert "allows no instance type of the catalog" in other["message"]


def test_nodepool_limit_gets_a_round_raise_and_the_placed_pod_none(tmp_path):
    path = FIXTURES / "nodepool-limit.yaml"
    key = "training/resnet-ddp-0"
    result = simulate_json(path, CATALOG)
    check_all_targets(result)
    placed = next(p for p in result["pods"] if p["pod"] == "training/metrics-exporter-0")
    assert placed["scheduled"] and placed["suggestions"] == []
    s = first_of(failed_pod(result, key), "nodepool-limit")
    assert s["change"]["object"] == "NodePool gpu-t4"
    assert s["change"]["field"] == "spec.limits"
    assert s["change"]["value"]["memory"] == "512Gi"  # not the blocking limit: unchanged
    assert s["change"]["value"]["cpu"] == "52"  # whole cores, enough for a g4dn.12xlarge
    assert "cpu from 32 to 52" in s["message"]
    assert s["target"] == {"kind": "NodeClaim", "name": "gpu-t4-1", "new": True}
    assert summary_suggestion(path, key).startswith(
        "  suggestion [nodepool-limit]: raise the limits of NodePool gpu-t4: cpu from 32 to 52"
    )
    placed_after(path, s, key, tmp_path)


def test_nodepool_pinned_to_a_one_gpu_type_gets_the_cheapest_four_gpu_type(tmp_path):
    path = FIXTURES / "add-instance-type.yaml"
    key = "media/blender-render-0"
    result = simulate_json(path, CATALOG)
    check_all_targets(result)
    entry = failed_pod(result, key)
    s = first_of(entry, "add-instance-type")
    assert "allow instance type g4dn.12xlarge ($1.5648/h)" in s["message"]
    assert "no allowed instance type has enough devices" in s["message"]
    assert s["change"]["value"][0] == {
        "key": "node.kubernetes.io/instance-type",
        "operator": "In",
        "values": ["g4dn.12xlarge", "g4dn.xlarge"],
    }
    assert s["target"] == {"kind": "NodeClaim", "name": "gpu-small-1", "new": True}
    # A smaller count is less invasive than a NodePool change: it comes first.
    assert entry["suggestions"][0]["kind"] == "reduce-count"
    assert entry["suggestions"][0]["change"]["value"] == 1
    assert summary_suggestion(path, key).startswith("  suggestion [reduce-count]: ")
    after = placed_after(path, s, key, tmp_path)
    assert {d["instanceType"] for d in after["claims"][0]["devices"]} == {"g4dn.12xlarge"}


def test_cpu_and_memory_no_allowed_type_has_get_the_instance_type_that_would(tmp_path):
    path = FIXTURES / "cpu-memory.json"
    key = "analytics/spark-driver-0"
    result = simulate_json(path, CATALOG)
    check_all_targets(result)
    s = first_of(failed_pod(result, key), "instance-type-resources")
    # The on-demand price: the NodePool buys on-demand only.
    assert "allow instance type c7i.48xlarge ($8.568/h) in NodePool general" in s["message"]
    assert "cpu=64, memory=256Gi" in s["message"]
    assert s["change"]["value"][0]["values"] == ["c7i", "m7i"]
    assert s["target"] == {"kind": "NodeClaim", "name": "general-1", "new": True}
    placed_after(path, s, key, tmp_path)


# --- other workloads ---------------------------------------------------------------------------


def test_t4_held_by_a_running_notebook_gets_free_device_naming_that_pod(tmp_path):
    path = FIXTURES / "held-device.yaml"
    key = "research/train-bob-0"
    result = simulate_json(path, CATALOG)
    check_all_targets(result)
    s = failed_pod(result, key)["suggestions"][0]
    assert s["kind"] == "free-device"
    assert "research/jupyter-alice" in s["message"]
    assert "research/jupyter-alice-gpu-7h2kd" in s["message"]
    assert s["change"] == {
        "object": "Pod research/jupyter-alice",
        "op": "delete",
        "objects": ["Pod research/jupyter-alice"],
    }
    node = "ip-10-0-51-9.us-west-2.compute.internal"
    assert s["target"] == {"kind": "Node", "name": node, "new": False}
    line = summary_suggestion(path, key)
    assert line.startswith("  suggestion [free-device]: free 1 devices held by claim ")
    assert "delete pod research/jupyter-alice" in line
    placed_after(path, s, key, tmp_path)


# --- options -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.iterdir() if p != CATALOG))
def test_no_suggestions_flag_leaves_them_and_their_stats_out(name):
    result = simulate_json(FIXTURES / name, CATALOG, extra=("--no-suggestions",))
    assert all("suggestions" not in p for p in result["pods"])
    assert "suggestionTrials" not in result["stats"]
    assert "suggestionSeconds" not in result["stats"]
    with_them = simulate_json(FIXTURES / name, CATALOG)
    stats = with_them["stats"]
    assert 0 < stats["suggestionTrials"] <= 24 * stats["failed"]
    assert 0 <= stats["suggestionSeconds"] < 1.0


# --- the trial cap, in process (the cap is a module constant) -----------------------------------


def _simulate_in_process(name: str) -> dict:
    from allocator.simulation import SimulationOptions, simulate
    from allocator.snapshot import load_paths

    snapshot = load_paths([str(FIXTURES / name), str(CATALOG)])
    return simulate(snapshot, SimulationOptions()).result


@pytest.mark.parametrize("cap", [0, 1, 2])
def test_the_trial_cap_bounds_trials_and_keeps_the_least_invasive(monkeypatch, cap):
    """With room for ``cap`` trials only the first candidates in scope order are tried: the
    claim's own selector before the NodePool, before the catalog."""
    from allocator.suggestions import core as suggestions

    full = _simulate_in_process("missing-model.yaml")
    monkeypatch.setattr(suggestions, "MAX_TRIALS_PER_POD", cap)
    capped = _simulate_in_process("missing-model.yaml")
    assert capped["stats"]["suggestionTrials"] == cap
    (entry,) = capped["pods"]
    (uncapped,) = full["pods"]
    found = entry["suggestions"]
    assert len(found) <= cap
    assert all(f in uncapped["suggestions"] for f in found)  # the same ones, verified alike
    tried_first = [("relax-selector", "pod"), ("nodepool-requirement", "nodepool")][:cap]
    assert [(f["kind"], f["scope"]) for f in found] == sorted(
        tried_first, key=lambda k: k[0] == "relax-selector"
    )  # tried by scope, offered keeping the hardware first


def test_output_json_is_the_same_document_as_json():
    path = FIXTURES / "too-many-gpus.json"
    a = json.loads(cli(str(path), str(CATALOG), "--output", "json").stdout)
    b = json.loads(cli(str(path), str(CATALOG), "--json").stdout)
    for doc in (a, b):
        doc["stats"].pop("seconds")
        doc["stats"].pop("suggestionSeconds")
    assert a == b
    assert a["pods"][0]["suggestions"][0]["change"]["value"] == 8


def test_holder_pod_left_out_of_the_export_is_still_named_from_reserved_for(tmp_path):
    """Only the claims were exported, not the notebook's pod: the claim's reservedFor still
    says which pod holds the T4."""
    docs = [
        d
        for d in documents(FIXTURES / "held-device.yaml")
        if not (d["kind"] == "Pod" and d["metadata"]["name"] == "jupyter-alice")
    ]
    path = tmp_path / "claims-only.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    key = "research/train-bob-0"
    result = simulate_json(path, CATALOG)
    check_all_targets(result)
    s = first_of(failed_pod(result, key), "free-device")
    assert "delete pod research/jupyter-alice" in s["message"]
    assert s["change"]["objects"] == ["Pod research/jupyter-alice"]
    placed_after(path, s, key, tmp_path)
