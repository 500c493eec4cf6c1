"""Suggestions ranked by what they touch (``scope``), honest about what the pod gives up, and
checked on the whole loop (``affects``); two changes together when no single one does it.

Each test builds a small GPU cluster of the shapes users run (p5.48xlarge H100 NodePools, L40S
nodes, tainted training nodes), reads the failed pod's suggestions, and applies them to the
snapshot's documents: the pod must be placed where the suggestion says.
"""

from __future__ import annotations

from allocator.suggestions import apply_suggestion
from tests.scheduling.k8s import (
    GPU,
    claim,
    device_class,
    families,
    gpu,
    instance_type,
    node,
    node_pool,
    offering,
    pod,
    pod_result,
    request,
    resource_slice,
    run,
    template,
)

H100 = "NVIDIA H100 80GB HBM3"
L40S = "NVIDIA L40S"
H100_TAINT = {"key": "nvidia.com/gpu", "value": "h100", "effect": "NoSchedule"}
ML_TAINT = {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}
H100_SELECTOR = f'device.attributes["{GPU}"].productName == "{H100}"'


def failed(docs: list[dict], key: str = "default/train-0") -> dict:
    entry = pod_result(run(docs), key)
    assert entry["scheduled"] is False, entry["target"]
    return entry


def placed_after(docs: list[dict], suggestion: dict, key: str = "default/train-0") -> dict:
    again = run(apply_suggestion(docs, suggestion), suggestions=False)
    entry = pod_result(again, key)
    assert entry["scheduled"], entry["error"]
    assert entry["target"] == suggestion["target"]
    return again


def l40s_node() -> list[dict]:
    return [
        node("gpu-node-l40s", instance_type="g6e.12xlarge", cpu="46", memory="360Gi"),
        resource_slice(
            "gpu-node-l40s-gpus", node="gpu-node-l40s", devices=[gpu(i, L40S) for i in range(4)]
        ),
    ]


def h100_pod(*, tolerations=None) -> list[dict]:
    return [
        template("h100", [request("gpu", selectors=[H100_SELECTOR])]),
        pod("train-0", cpu="8", memory="64Gi", templates={"gpu": "h100"}, tolerations=tolerations),
    ]


def test_a_fix_keeping_the_h100_ranks_above_a_selector_that_gives_it_for_an_l40s():
    # The H100 NodePool is at its cpu limit; an L40S node has room. Dropping the pod's own
    # productName condition is the smallest edit (pod scope) but trades the H100 for an L40S:
    # raising the NodePool's limit keeps the H100 and ranks first.
    docs = [
        device_class(GPU),
        *l40s_node(),
        node_pool("gpu-h100", requirements=families("p5"), limits={"cpu": "100"}),
        instance_type("p5.48xlarge", gpus=8),
        *h100_pod(),
    ]
    entry = failed(docs)
    ranked = [(s["kind"], s["scope"]) for s in entry["suggestions"]]
    assert ranked == [("nodepool-limit", "nodepool"), ("relax-selector", "pod")]
    limit, selector = entry["suggestions"]
    assert "shared by every pod it provisions for" in limit["message"]
    assert f'other hardware than it asked for: "{L40S}", not "{H100}"' in selector["message"]
    assert selector["target"] == {"kind": "Node", "name": "gpu-node-l40s", "new": False}
    for suggestion in entry["suggestions"]:
        assert suggestion["affects"] == []
        placed_after(docs, suggestion)


def test_a_device_class_edit_is_cluster_scope_and_flagged_as_shared():
    # The H100 condition lives in the DeviceClass every H100 workload uses: relaxing it is a
    # cluster-wide edit, flagged, and ranked after the NodePool fix.
    docs = [
        device_class("h100.nvidia.com", f'device.driver == "{GPU}" && {H100_SELECTOR}'),
        *l40s_node(),
        node_pool("gpu-h100", requirements=families("p5"), limits={"cpu": "100"}),
        instance_type("p5.48xlarge", gpus=8),
        template("h100", [request("gpu", cls="h100.nvidia.com")]),
        pod("train-0", cpu="8", memory="64Gi", templates={"gpu": "h100"}),
    ]
    entry = failed(docs)
    scopes = [s["scope"] for s in entry["suggestions"]]
    assert scopes == ["nodepool", "cluster"]
    relaxed = entry["suggestions"][1]
    assert relaxed["change"]["object"] == "DeviceClass h100.nvidia.com"
    assert "this edits DeviceClass h100.nvidia.com, shared by every workload" in relaxed["message"]


def test_deleting_another_workloads_pod_ranks_after_the_pods_own_change_even_one_giving_up_the_h100():
    # The only H100 is held by a running pod of another workload; an L40S node has room.
    # Deleting that pod keeps the H100 but reaches into another workload: the pod's own
    # selector change (an L40S instead, said so) ranks first.
    docs = [
        device_class(GPU),
        node("gpu-node-h100", instance_type="p5.48xlarge", cpu="190", memory="2000Gi"),
        resource_slice("gpu-node-h100-gpus", node="gpu-node-h100", devices=[gpu(0, H100)]),
        claim(
            "batch-0-gpu",
            [request("gpu")],
            allocated=[("gpu", GPU, "gpu-node-h100", "gpu-0")],
            reserved_for=["batch-0"],
        ),
        pod("batch-0", node_name="gpu-node-h100", claims={"gpu": "batch-0-gpu"}),
        *l40s_node(),
        *h100_pod(),
    ]
    entry = failed(docs)
    ranked = [(s["kind"], s["scope"]) for s in entry["suggestions"]]
    assert ranked == [("relax-selector", "pod"), ("free-device", "other-pods")]
    assert "other hardware than it asked for" in entry["suggestions"][0]["message"]
    assert "default/batch-0" in entry["suggestions"][1]["message"]
    placed_after(docs, entry["suggestions"][0])


def test_no_single_change_places_the_pod_so_two_changes_are_offered_together():
    # The pod wants an H100; the only H100 NodePool is tainted for H100 workloads (the pod
    # does not tolerate it) and at its cpu limit. Neither the toleration nor the limit alone
    # places it: both together do.
    docs = [
        device_class(GPU),
        node_pool(
            "gpu-h100", requirements=families("p5"), taints=[H100_TAINT], limits={"cpu": "100"}
        ),
        instance_type("p5.48xlarge", gpus=8),
        *h100_pod(),
    ]
    entry = failed(docs)
    (both,) = [s for s in entry["suggestions"] if s["kind"] == "two-changes"]
    assert all(s["kind"] == "two-changes" for s in entry["suggestions"])
    first, second = both["changes"]
    assert both["change"] == first
    assert first["object"] == "Pod default/train-0" and first["field"] == "spec.tolerations"
    assert second["object"] == "NodePool gpu-h100" and second["field"] == "spec.limits"
    assert both["scope"] == "nodepool"  # the widest of the two
    assert "tolerate taint nvidia.com/gpu=h100:NoSchedule" in both["message"]
    assert "neither alone places the pod" in both["message"]
    assert both["target"] == {"kind": "NodeClaim", "name": "gpu-h100-1", "new": True}
    placed_after(docs, both)
    # Each change alone leaves it unplaced: that is why the pair is offered.
    for change in both["changes"]:
        alone = run(apply_suggestion(docs, {"change": change}), suggestions=False)
        assert not pod_result(alone, "default/train-0")["scheduled"]


def ml_node(name: str, slot: str) -> dict:
    return node(
        name,
        instance_type="m7i.4xlarge",
        cpu="16",
        memory="64Gi",
        taints=[ML_TAINT],
        labels={"example.com/ml-slot": slot},
    )


def test_a_fix_that_costs_another_pod_its_placement_says_so_and_ranks_last():
    # Two tainted ML nodes. early-0 tolerates the taint and may only run on ml-node-a (its
    # slot label); the
    # larger train-0 (queued first) tolerates nothing. Tried on the final state, a toleration
    # sends train-0 to ml-node-b; applied for real, train-0 goes first, takes ml-node-a and
    # early-0 is left out. Raising the cpu NodePool's limit places train-0 harming nobody.
    docs = [
        ml_node("ml-node-a", slot="a"),
        ml_node("ml-node-b", slot="b"),
        node_pool("cpu", requirements=families("m7i"), limits={"cpu": "8"}),
        instance_type("m7i.4xlarge", cpu="16", memory="64Gi"),
        pod(
            "early-0",
            cpu="8",
            memory="8Gi",
            node_selector={"example.com/ml-slot": "a"},
            tolerations=[{**ML_TAINT, "operator": "Equal"}],
        ),
        pod("train-0", cpu="12", memory="32Gi"),
    ]
    before = run(docs)
    assert pod_result(before, "default/early-0")["target"]["name"] == "ml-node-a"
    entry = pod_result(before, "default/train-0")
    assert entry["scheduled"] is False
    kinds = [s["kind"] for s in entry["suggestions"]]
    assert kinds == ["nodepool-limit", "tolerate-taint"]
    limit, toleration = entry["suggestions"]
    assert limit["affects"] == []
    assert toleration["affects"] == [
        {
            "pod": "default/early-0",
            "from": {"kind": "Node", "name": "ml-node-a", "new": False},
            "to": None,
        }
    ]
    assert "pod default/early-0 would no longer be placed" in toleration["message"]
    # The whole loop puts train-0 on ml-node-a, not where the trial on the final state said.
    assert toleration["target"] == {"kind": "Node", "name": "ml-node-a", "new": False}
    again = placed_after(docs, toleration)
    assert not pod_result(again, "default/early-0")["scheduled"]
    placed_after(docs, limit)


def test_affects_is_null_when_the_run_is_too_large_to_re_run(monkeypatch):
    from allocator.suggestions import wholeloop

    monkeypatch.setattr(wholeloop, "MAX_RUN_SIZE", 0)
    docs = [
        device_class(GPU),
        node_pool("gpu-h100", requirements=families("p5"), limits={"cpu": "100"}),
        instance_type("p5.48xlarge", gpus=8),
        *h100_pod(),
    ]
    result = run(docs)
    (limit,) = pod_result(result, "default/train-0")["suggestions"]
    assert limit["kind"] == "nodepool-limit" and limit["affects"] is None
    assert result["stats"]["suggestionReruns"] == 0


def test_a_memory_request_above_every_instance_type_gets_the_largest_that_fits():
    # 512Gi asked; the NodePool's largest type (g6e.4xlarge) has 128Gi, the DaemonSet-free
    # node then offers 127Gi of whole Gi after the pod slot: the largest whole-Gi request.
    docs = [
        node_pool("general", requirements=families("g6e")),
        instance_type("g6e.4xlarge", cpu="16", memory="128Gi"),
        instance_type("g6e.2xlarge", cpu="8", memory="64Gi"),
        pod("train-0", cpu="4", memory="512Gi"),
    ]
    entry = failed(docs)
    (memory,) = entry["suggestions"]
    assert memory["kind"] == "reduce-request" and memory["scope"] == "pod"
    assert memory["change"] == {
        "object": "Pod default/train-0",
        "field": "spec.containers[0].resources",
        "op": "set",
        "value": {"requests": {"cpu": "4", "memory": "128Gi"}},
    }
    assert "the pod asks for 512Gi" in memory["message"]
    assert "pod template of ReplicaSet owner" in memory["message"]
    placed_after(docs, memory)


def test_an_eu_only_pod_gets_its_zone_allowed_in_the_nodepool_before_losing_its_selector():
    # The pod must run in eu-west-1a (data residency); the NodePool allows us-west-2 zones
    # only, and the catalog's m7i.4xlarge is offered in eu-west-1a too. Allowing the zone keeps
    # what the pod asked for; dropping its selector would not, and says where it would run.
    zone = "topology.kubernetes.io/zone"
    docs = [
        node_pool(
            "general",
            requirements=[
                *families("m7i"),
                {"key": zone, "operator": "In", "values": ["us-west-2a", "us-west-2b"]},
            ],
        ),
        instance_type(
            "m7i.4xlarge",
            cpu="16",
            memory="64Gi",
            offerings=[offering("us-west-2a", 0.806), offering("eu-west-1a", 0.902)],
        ),
        pod("eu-only-0", cpu="1", memory="2Gi", node_selector={zone: "eu-west-1a"}),
    ]
    entry = failed(docs, "default/eu-only-0")
    allow, drop_requirement, drop_selector = entry["suggestions"]
    assert allow["message"].startswith(f"allow {zone} eu-west-1a in NodePool general")
    assert allow["change"]["value"][1] == {
        "key": zone,
        "operator": "In",
        "values": ["eu-west-1a", "us-west-2a", "us-west-2b"],
    }
    assert drop_requirement["scope"] == "nodepool"
    assert drop_selector["scope"] == "pod"
    assert f"run in {zone} us-west-2a or us-west-2b, not eu-west-1a" in drop_selector["message"]
    for suggestion in entry["suggestions"]:
        placed_after(docs, suggestion, "default/eu-only-0")
