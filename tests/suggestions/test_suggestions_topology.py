"""Topology fixes (``relax-topology``) on the project's topology examples, each made to fail
the way it does in a real cluster: the vLLM NodePool out of cpu for a third replica, the zone
spread with instance types offered in one zone only, the decoder whose NodePool shuts out the
zone of the kv-cache it must be near.

A topology term belongs to the workload: placed replicas keep a pod away through their own
anti-affinity, so the change is made to every pod of the workload (``change.objects``) and
verified by re-running the whole loop with it. Every suggestion here is applied to the
snapshot's documents and re-simulated: the pod is placed where the suggestion says.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from allocator.suggestions import apply_suggestion
from tests.scheduling.k8s import pod_result, run

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ZONE = "topology.kubernetes.io/zone"


def example(name: str) -> list[dict]:
    return list(yaml.safe_load_all((EXAMPLES / name).read_text()))


def of_kind(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d["kind"] == kind]


def placed_after(docs: list[dict], suggestion: dict, key: str) -> dict:
    again = run(apply_suggestion(docs, suggestion), suggestions=False)
    entry = pod_result(again, key)
    assert entry["scheduled"], entry["error"]
    assert entry["target"] == suggestion["target"]
    return again


def test_third_vllm_replica_out_of_nodepool_cpu_gets_a_limit_before_giving_up_anti_affinity():
    docs = example("topology-vllm-anti-affinity.yaml")
    (pool,) = of_kind(docs, "NodePool")
    pool["spec"]["limits"] = {"cpu": "400"}  # two p5.48xlarge
    result = run(docs)
    third = "inference/vllm-7c9d8f6b5-tn4vd"
    entry = pod_result(result, third)
    assert entry["scheduled"] is False
    assert "unsatisfiable topology constraint for pod anti-affinity" in entry["error"]
    limit, relaxed = entry["suggestions"]
    # Keeping the replicas apart (one more node) ranks above letting two share a node.
    assert (limit["kind"], limit["scope"]) == ("nodepool-limit", "nodepool")
    assert (relaxed["kind"], relaxed["scope"]) == ("relax-topology", "pod")
    replicas = [f"Pod {p['metadata']['namespace']}/{p['metadata']['name']}" for p in docs[-3:]]
    assert relaxed["change"]["field"] == "spec.affinity.podAntiAffinity"
    assert sorted(relaxed["change"]["objects"]) == sorted(replicas)
    term = relaxed["change"]["value"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["weight"] == 100
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in relaxed["change"]["value"]
    assert "replicas could then share a kubernetes.io/hostname" in relaxed["message"]
    assert relaxed["affects"] == []
    again = placed_after(docs, relaxed, third)
    assert all(e["scheduled"] for e in again["pods"])
    assert len(again["nodeClaims"]) == 2  # the third replica shares a p5.48xlarge
    placed_after(docs, limit, third)


def test_vllm_replicas_failing_alike_each_get_the_workload_change_naming_themselves():
    """Two replicas out of NodePool cpu (room for one p5.48xlarge): the second replica's
    suggestions are the first's, renamed (tried once). Each change names its own pod; the
    pods the change edits are the workload's, the same list for both."""
    docs = example("topology-vllm-anti-affinity.yaml")
    (pool,) = of_kind(docs, "NodePool")
    pool["spec"]["limits"] = {"cpu": "200"}  # one p5.48xlarge
    result = run(docs)
    failed = [e for e in result["pods"] if not e["scheduled"]]
    assert len(failed) == 2
    changes = []
    for entry in failed:
        (relaxed,) = [s for s in entry["suggestions"] if s["kind"] == "relax-topology"]
        assert relaxed["change"]["object"] == f"Pod {entry['pod']}"
        assert f"of pod {entry['pod']} " in relaxed["message"]
        changes.append(relaxed["change"])
    replicas = [f"Pod {p['metadata']['namespace']}/{p['metadata']['name']}" for p in docs[-3:]]
    assert sorted(changes[0]["objects"]) == sorted(replicas)
    assert changes[1]["objects"] == changes[0]["objects"]
    assert list(changes[1]) == list(changes[0])  # the change's fields in the same order


def test_the_pods_own_term_alone_is_not_enough_the_replicas_keep_it_away():
    # Only the failed replica's anti-affinity relaxed: the two placed replicas' required
    # anti-affinity still selects it, so it stays out (why the fix covers the workload).
    docs = example("topology-vllm-anti-affinity.yaml")
    (pool,) = of_kind(docs, "NodePool")
    pool["spec"]["limits"] = {"cpu": "400"}
    third = "inference/vllm-7c9d8f6b5-tn4vd"
    (relaxed,) = [
        s for s in pod_result(run(docs), third)["suggestions"] if s["kind"] == "relax-topology"
    ]
    alone = {**relaxed["change"], "objects": [f"Pod {third}"]}
    again = run(apply_suggestion(docs, {"change": alone}), suggestions=False)
    assert not pod_result(again, third)["scheduled"]


def test_zone_spread_with_one_zone_offered_gets_schedule_anyway_placing_every_replica():
    docs = example("topology-zone-spread.yaml")
    for it in of_kind(docs, "InstanceType"):
        it["spec"]["offerings"] = [o for o in it["spec"]["offerings"] if o["zone"] == "us-west-2a"]
    result = run(docs)
    failed = [e for e in result["pods"] if not e["scheduled"]]
    assert [e["pod"] for e in failed] == [f"ml/llama-finetune-{i}" for i in (1, 2, 3)]
    first = failed[0]
    kinds = [s["message"].split(" in the topology spread")[0] for s in first["suggestions"]]
    assert kinds == ["raise maxSkew from 1 to 2", "make it ScheduleAnyway"]
    skew, anyway = first["suggestions"]
    # maxSkew 2 lets one more replica into us-west-2a; ScheduleAnyway lets all three in.
    assert skew["affects"] == []
    assert sorted(a["pod"] for a in anyway["affects"]) == [
        "ml/llama-finetune-2",
        "ml/llama-finetune-3",
    ]
    assert all(a["from"] is None and a["to"]["new"] for a in anyway["affects"])
    for suggestion in first["suggestions"]:
        placed_after(docs, suggestion, "ml/llama-finetune-1")
    # The later replicas: maxSkew 2 does not place them (only one more fits the skew), so they
    # are offered ScheduleAnyway only, naming themselves, not the first replica.
    for entry in failed[1:]:
        (only,) = entry["suggestions"]
        assert "make it ScheduleAnyway" in only["message"]
        assert f"of pod {entry['pod']}," in only["message"]
        assert len(set(only["change"]["objects"])) == 4
        placed_after(docs, only, entry["pod"])


def test_decoder_whose_nodepool_shuts_out_the_kv_cache_zone_may_drop_its_pod_affinity():
    docs = example("topology-decoder-affinity.yaml")
    (pool,) = of_kind(docs, "NodePool")
    requirements = pool["spec"]["template"]["spec"]["requirements"]
    pool["spec"]["template"]["spec"]["requirements"] = [
        *(r for r in requirements if r["key"] != ZONE),
        {"key": ZONE, "operator": "In", "values": ["us-west-2a"]},
    ]
    entry = pod_result(run(docs), "inference/decoder-0")
    assert entry["scheduled"] is False
    relaxed = next(s for s in entry["suggestions"] if s["kind"] == "relax-topology")
    assert relaxed["change"]["field"] == "spec.affinity.podAffinity"
    assert relaxed["change"]["objects"] == ["Pod inference/decoder-0"]
    assert f"outside the {ZONE} of the pods it asked to be near" in relaxed["message"]
    placed_after(docs, relaxed, "inference/decoder-0")


def test_decoder_whose_nodepool_shuts_out_the_kv_cache_zone_is_offered_that_zone_first():
    """The kv-cache runs in us-west-2b and cannot move: allowing us-west-2b in the NodePool keeps
    the decoder's pod affinity, so it ranks above dropping the affinity."""
    docs = example("topology-decoder-affinity.yaml")
    (pool,) = of_kind(docs, "NodePool")
    requirements = pool["spec"]["template"]["spec"]["requirements"]
    pool["spec"]["template"]["spec"]["requirements"] = [
        *(r for r in requirements if r["key"] != ZONE),
        {"key": ZONE, "operator": "In", "values": ["us-west-2a"]},
    ]
    entry = pod_result(run(docs), "inference/decoder-0")
    kinds = [s["kind"] for s in entry["suggestions"]]
    allow = next(s for s in entry["suggestions"] if s["kind"] == "nodepool-requirement")
    assert kinds.index("nodepool-requirement") < kinds.index("relax-topology")
    assert allow["change"]["object"] == f"NodePool {pool['metadata']['name']}"
    zone = next(r for r in allow["change"]["value"] if r["key"] == ZONE)
    assert zone["values"] == ["us-west-2a", "us-west-2b"]
    assert "inference/kv-cache-0" in allow["message"]
    placed = placed_after(docs, allow, "inference/decoder-0")
    assert pod_result(placed, "inference/decoder-0")["target"]["new"] is True
