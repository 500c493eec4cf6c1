"""The decisive cause first: a refused device counts under the most lasting check that refuses
it (what it is before what the cluster's state does to it), the others kept as ``also``; a
failed pod's ``cause`` says in one line what would have to change (docs/RESULT.md)."""

from __future__ import annotations

import json

import pytest

from allocator.simulation import SimulationOptions, simulate
from allocator.snapshot import load_files
from bench.workloads import existing_nodes
from tests.contract.conftest import (
    held_device,
    instance_type,
    node,
    nodepool,
    resource_slice,
    template_slice,
)
from tests.explanation.test_reasons import H100, failed, request, run, t4_node, t4s, wants
from tests.explanation.test_reasons import allocated_to as held_by


def selector(expression: str) -> list[dict]:
    return [{"cel": {"expression": expression}}]


def test_a_model_that_exists_nowhere_is_refused_by_the_selector_not_by_its_holders() -> None:
    """Four Tesla T4s, all held: an H100 request reads "selector", holders kept as also."""
    docs = (
        t4_node(t4s(4))
        + held_by("serve-0-gpu", "serve-0", ["gpu-0", "gpu-1", "gpu-2", "gpu-3"])
        + wants("train-0", request(selectors=selector(H100)))
    )
    result, _ = run(docs)
    entry = failed(result, "default/train-0")
    (funnel,) = entry["explanation"]
    assert [(g["reason"], g["devices"], g["also"]) for g in funnel["rejections"]] == [
        ("selector", 4, ["allocated"])
    ]
    assert "4 rejected by selector" in entry["error"]
    assert "rejected by allocated" not in entry["error"]
    assert entry["cause"]["reason"] == "selector"
    assert entry["cause"]["message"].startswith(
        "no device in reach matches the selector of claim default/train-0-gpu request gpu "
        '(productName is "Tesla T4" on 4 devices)'
    )


def test_a_device_both_held_and_tainted_counts_as_tainted() -> None:
    """Freeing a tainted device would not help: the taint decides, the holder is also."""
    taint = {"key": "nvidia.com/gpu-unhealthy", "value": "xid-79", "effect": "NoSchedule"}
    devices = t4s(2)
    devices[0]["taints"] = [taint]
    docs = t4_node(devices) + held_by("serve-0-gpu", "serve-0", ["gpu-0", "gpu-1"])
    docs += wants("train-0", request())
    result, _ = run(docs)
    (funnel,) = failed(result, "default/train-0")["explanation"]
    assert sorted((g["reason"], g["devices"], g["also"]) for g in funnel["rejections"]) == [
        ("allocated", 1, []),
        ("taint", 1, ["allocated"]),
    ]


def test_held_devices_of_the_right_model_are_the_cause() -> None:
    """What matches is held: the state decides, and the cause names the holder."""
    docs = t4_node(t4s(2)) + held_by("serve-0-gpu", "serve-0", ["gpu-0", "gpu-1"])
    docs += wants("train-0", request())
    result, _ = run(docs)
    entry = failed(result, "default/train-0")
    assert entry["cause"]["reason"] == "allocated"
    assert "claim default/serve-0-gpu (reserved for default/serve-0)" in entry["cause"]["message"]


def test_more_devices_than_any_node_or_instance_type_has() -> None:
    """12 GPUs where nodes and instance types have 8: the count, not what holds the 8."""
    gpus = [
        {"name": f"gpu-{i}", "attributes": {"productName": {"string": "NVIDIA H100 80GB HBM3"}}}
        for i in range(8)
    ]
    docs = t4_node(gpus) + held_by("serve-0-gpu", "serve-0", ["gpu-0"])
    docs += [
        nodepool("gpu-pool"),
        instance_type(
            "p5.48xlarge",
            cpu="192",
            memory="2048Gi",
            slices=[template_slice("p5-gpus", gpus)],
        ),
    ]
    docs += wants("train-0", request(count=12))
    result, _ = run(docs)
    entry = failed(result, "default/train-0")
    assert entry["cause"] == {
        "reason": "count",
        "message": "no node or instance type has 12 matching devices for claim "
        "default/train-0-gpu request gpu (largest: 8)",
    }


def test_a_cluster_without_nodepools_says_so() -> None:
    docs = t4_node(t4s(1)) + wants("train-0", request(count=2))
    result, _ = run(docs)
    entry = failed(result, "default/train-0")
    assert entry["cause"]["noNodePool"] is True
    assert entry["cause"]["message"].endswith(
        "the snapshot has no NodePool, so no new NodeClaim can be created for it"
    )
    assert not result["nodeClaims"]


@pytest.fixture(scope="module")
def demo() -> dict:
    with open("examples/demo-snapshot.yaml") as f:
        snapshot = load_files([("demo-snapshot.yaml", f.read())])
    return simulate(snapshot, SimulationOptions()).result


@pytest.mark.parametrize("pod", ["ml-training/h100-untolerated-0", "ml-training/blackwell-probe-0"])
def test_demo_pods_asking_for_models_in_no_reach_headline_the_selector(demo, pod) -> None:
    (entry,) = [p for p in demo["pods"] if p["pod"] == pod]
    assert entry["cause"]["reason"] == "selector"
    assert entry["cause"]["message"].startswith("no device in reach matches the selector")
    for funnel in entry["explanation"]:
        if funnel["rejections"]:
            assert funnel["rejections"][0]["reason"] != "allocated", funnel


def test_a_failed_pod_entry_stays_small_on_a_large_cluster() -> None:
    """400 nodes of 8 held-or-free H100s, pods asking for an A100: each failed pod's entry is
    bounded (grouped reasons, funnels by kind of cause), and reasons stand for every node."""
    docs = existing_nodes(nodes=400, pods=40)
    result = simulate(load_files([("c.json", json.dumps(docs))]), SimulationOptions()).result
    failures = [p for p in result["pods"] if not p["scheduled"]]
    assert failures
    for entry in failures:
        assert len(json.dumps(entry)) < 20_000
        assert sum(r["targets"] for r in entry["reasons"]) == 400
        assert all(len(r["exampleTargets"]) <= 5 for r in entry["reasons"])
        assert entry["cause"]["reason"] == "selector"


def test_every_node_holding_devices_for_other_claims_is_summarised() -> None:
    """Thirty nodes whose only GPU is held by a different claim each: one funnel for all of
    them, the holders counted and the first few named."""
    docs = []
    for i in range(30):
        name = f"ip-10-0-3-{i}.us-west-2.compute.internal"
        docs += [node(name, cpu="8", memory="32Gi"), resource_slice(name, t4s(1))]
        docs += held_device(f"serve-{i}", name, "gpu-0")
    docs = t4_node(t4s(0))[:2] + docs + wants("train-0", request())
    result, _ = run(docs)
    entry = failed(result, "default/train-0")
    held = [f for f in entry["explanation"] if f["rejections"]]
    (funnel,) = held
    assert funnel["targets"] == 30
    (group,) = funnel["rejections"]
    assert group["reason"] == "allocated"
    assert group["detail"]["claims"] == 30
    assert group["detail"]["pods"] == 30
    assert len(group["detail"]["holders"]) == 3
    assert "and 27 more claims" in group["message"]


def test_failing_nodeclaims_workload_decides_as_the_plain_path_and_stays_small() -> None:
    """The bench's new-NodeClaim workload with every 20th pod asking for 12 H100s (instance
    types have at most 8): the NodeClaim fast path decides as the plain one, and each failed
    pod is told the count, in an entry of bounded size."""
    from allocator.scheduling.tuning import Tuning
    from bench.workloads import gpu_claim_template, new_nodeclaims

    docs = new_nodeclaims(nodes=4, pods=60)
    docs.append(gpu_claim_template("too-many", "H100", 12))
    for d in docs:
        name = d["metadata"]["name"]
        if d["kind"] == "Pod" and name.startswith("train-") and int(name[6:]) % 20 == 19:
            d["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] = "too-many"
    snapshot_json = json.dumps(docs)

    def result(caches: bool) -> dict:
        snapshot = load_files([("bench.json", snapshot_json)])
        out = simulate(snapshot, SimulationOptions(), tuning=Tuning(nodeclaim_caches=caches))
        out.result["stats"].pop("seconds")
        out.result["stats"].pop("suggestionSeconds", None)
        return out.result

    fast = result(True)
    assert fast == result(False)
    failures = [p for p in fast["pods"] if not p["scheduled"]]
    assert sorted(p["pod"] for p in failures) == [f"ml-training/train-{i}" for i in (19, 39, 59)]
    for entry in failures:
        assert len(json.dumps(entry)) < 20_000
        assert entry["cause"]["reason"] == "count"
        assert "(largest: 8)" in entry["cause"]["message"]


def test_every_failed_pod_of_the_demo_stays_under_20_kb() -> None:
    """The demo's failed pods, with funnels, grouped reasons and suggestions carrying patches and
    manifests: each entry stays small enough to read and to store per pod."""
    from pathlib import Path

    from allocator.snapshot import load_paths

    demo = Path(__file__).resolve().parents[2] / "examples" / "demo-snapshot.yaml"
    result = simulate(load_paths([str(demo)]), SimulationOptions()).result
    failed = [p for p in result["pods"] if not p["scheduled"]]
    assert len(failed) >= 8
    for entry in failed:
        assert len(json.dumps(entry)) < 20_000, (entry["pod"], len(json.dumps(entry)))
