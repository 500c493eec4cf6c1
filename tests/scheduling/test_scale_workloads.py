"""Smoke test of the bench's generated clusters (bench/workloads.py), small: their shapes
hold, and the NodeClaim fast path decides as the plain one on them."""

from __future__ import annotations

import json

from allocator.scheduling.tuning import Tuning
from allocator.simulation import SimulationOptions, simulate
from allocator.snapshot import load_files
from bench.workloads import existing_nodes, new_nodeclaims, upload_yaml


def run(docs: list[dict], caches: bool = True) -> dict:
    snapshot = load_files([("bench.json", json.dumps(docs))])
    result = simulate(snapshot, SimulationOptions(), tuning=Tuning(nodeclaim_caches=caches)).result
    result["stats"].pop("seconds")
    result["stats"].pop("suggestionSeconds", None)
    return result


def test_existing_nodes_workload_fails_the_pods_asking_for_a_model_nobody_has() -> None:
    result = run(existing_nodes(nodes=30, pods=40))
    failed = [p for p in result["pods"] if not p["scheduled"]]
    # Every 20th pod asks for an A100; there are only H100 nodes and no NodePool.
    assert sorted(p["pod"] for p in failed) == ["ml-training/train-19", "ml-training/train-39"]
    assert not result["nodeClaims"]
    # The 30 nodes refused each of them in two kinds of way (no device is an A100, and on
    # the full nodes every device is also held): two reasons entries stand for the 30 nodes.
    for p in failed:
        assert sorted(r["targets"] for r in p["reasons"]) == [5, 25]
        assert {g["reason"] for f in p["explanation"] for g in f["rejections"]} == {"selector"}


def test_nodeclaims_workload_places_every_pod_on_nodes_and_new_nodeclaims() -> None:
    docs = new_nodeclaims(nodes=4, pods=60)
    assert sum(d["kind"] == "InstanceType" for d in docs) == 100
    fast = run(docs)
    assert fast == run(docs, caches=False)
    assert fast["stats"]["scheduled"] == 60
    on_nodes = [p for p in fast["pods"] if p["target"]["kind"] == "Node"]
    assert 1 <= len(on_nodes) <= 8  # 4 nodes with 2 GPUs free each
    assert len(fast["nodeClaims"]) >= (60 - len(on_nodes)) // 8


def test_upload_workload_is_about_the_size_asked_for() -> None:
    text = upload_yaml(0.2)
    assert 150_000 < len(text) < 250_000
    assert text.count("kind: Node\n") > 20
