"""Smoke test of the bench's generated clusters (bench/workloads.py), small: their shapes
hold, and the fast paths (Tuning on) decide as the plain ones (Tuning off) on them, failure
workloads and Karpenter's benchmark shapes included."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from allocator.scheduling.scheduler import Scheduler
from allocator.scheduling.tuning import Tuning
from allocator.simulation import SimulationOptions, simulate
from allocator.snapshot import load_files
from bench.workloads import (
    anti_affinity_past_limits,
    busy_nodes,
    existing_nodes,
    gpu_claim_template,
    held_devices,
    karpenter_benchmark,
    karpenter_instance_types,
    karpenter_preferences,
    new_nodeclaims,
    synthetic_cluster,
    training_pod,
    upload_yaml,
)
from tests.scheduling.k8s import node, pod

PLAIN = Tuning(funnel_refusal=False, nodeclaim_caches=False)
# Each fast path of the NodeClaims switched off alone (the others on).
ONE_OFF = (Tuning(instance_type_index=False), Tuning(explain_recorded=False))


def run(docs: list[dict], caches: bool = True, tuning: Tuning | None = None) -> dict:
    snapshot = load_files([("bench.json", json.dumps(docs))])
    tuning = tuning or Tuning(nodeclaim_caches=caches)
    result = simulate(snapshot, SimulationOptions(), tuning=tuning).result
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


def test_nodeclaims_failing_workload_fails_the_pods_asking_for_16_gpus_as_the_plain_path() -> None:
    docs = new_nodeclaims(nodes=4, pods=60, failing_every=20)
    fast = run(docs)
    assert fast == run(docs, tuning=PLAIN)
    failed = sorted(p["pod"] for p in fast["pods"] if not p["scheduled"])
    # Every 20th pod asks for 16 GPUs; no instance type has more than 8.
    assert failed == ["ml-training/train-19", "ml-training/train-39", "ml-training/train-59"]
    assert fast["nodeClaims"]


def test_held_devices_workload_fails_whole_node_pods_on_nodes_held_by_different_claims() -> None:
    docs = held_devices(nodes=12, pods=40)
    fast = run(docs)
    assert fast == run(docs, tuning=PLAIN)
    failed = sorted(p["pod"] for p in fast["pods"] if not p["scheduled"])
    assert failed == ["ml-training/train-19", "ml-training/train-39"]
    claims = [d for d in docs if d["kind"] == "ResourceClaim"]
    # Three claims hold three GPUs of every node, each claim another pod's.
    assert len(claims) == 36 == len({c["status"]["reservedFor"][0]["name"] for c in claims})


def test_karpenter_instance_types_are_the_fake_cloud_providers() -> None:
    types = karpenter_instance_types()
    assert len(types) == 400
    last = types[-1]
    assert last["metadata"]["name"] == "fake-it-399"
    # 400 vCPUs and 800 GiB less the fake kube-reserved 100m and 10Mi; 4,000 pods.
    assert last["spec"]["capacity"] == {"cpu": "399900m", "memory": "819190Mi", "pods": "4000"}
    zones = {(o["zone"], o["capacityType"]) for o in last["spec"]["offerings"]}
    assert zones == {
        ("test-zone-1", "spot"),
        ("test-zone-2", "spot"),
        ("test-zone-1", "on-demand"),
        ("test-zone-2", "on-demand"),
        ("test-zone-3", "on-demand"),
    }


def test_karpenter_benchmark_puts_anti_affinity_pods_one_per_nodeclaim() -> None:
    result = run(karpenter_benchmark(100))
    assert result["stats"]["scheduled"] == 100
    nginx = {f"default/pod-{i:05d}" for i in range(80, 100)}  # the fifth group
    by_claim = [{p for p in c["pods"] if p in nginx} for c in result["nodeClaims"]]
    assert sum(len(pods) for pods in by_claim) == 20
    assert all(len(pods) <= 1 for pods in by_claim)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**16),
    pods=st.integers(10, 60),
    topology=st.booleans(),
    dra=st.booleans(),
    failing_every=st.sampled_from([0, 4, 10]),
)
def test_karpenter_benchmark_shapes_decide_as_the_plain_path(
    seed: int, pods: int, topology: bool, dra: bool, failing_every: int
) -> None:
    docs = karpenter_benchmark(
        pods, topology=topology, dra=dra, failing_every=failing_every, seed=seed
    )
    fast = run(docs)
    assert fast == run(docs, tuning=PLAIN)
    for tuning in ONE_OFF:
        assert run(docs, tuning=tuning) == fast, tuning


@pytest.mark.parametrize("selector", [False, True])
def test_busy_nodes_workload_fails_the_pods_too_big_for_any_node_as_the_plain_path(
    selector: bool,
) -> None:
    docs = busy_nodes(nodes=140, pods=60, selector=selector)
    fast = run(docs)
    assert fast == run(docs, tuning=PLAIN)
    failed = sorted(p["pod"] for p in fast["pods"] if not p["scheduled"])
    # Every 20th pod asks 16 vCPU; the nodes have 8. The 40 full nodes (or, with the
    # selector, the 40 of another node group) refuse the others.
    assert failed == [
        "ml-training/storefront-19",
        "ml-training/storefront-39",
        "ml-training/storefront-59",
    ]
    [entry] = [p for p in fast["pods"] if p["pod"] == "ml-training/storefront-19"]
    assert sum(r.get("targets", 1) for r in entry["reasons"]) == 140


GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes=st.lists(
        st.tuples(
            st.sampled_from(["500m", "2", "4", "8"]),  # room
            st.sampled_from(["batch", "storefront"]),  # node group label
            st.booleans(),  # tainted
        ),
        min_size=1,
        max_size=12,
    ),
    pods=st.lists(
        st.tuples(
            st.sampled_from(["250m", "1", "3", "16"]),
            st.sampled_from([None, "batch", "storefront"]),  # node selector
            st.booleans(),  # tolerates the taint
        ),
        min_size=1,
        max_size=30,
    ),
)
def test_node_refusals_remembered_per_pod_shape_decide_and_word_as_the_plain_path(
    nodes: list[tuple[str, str, bool]], pods: list[tuple[str, str | None, bool]]
) -> None:
    """Pods of a few shapes pass nodes that refuse them for room, labels or taints: what a node
    refused for one pod of a shape it refuses for the next until a pod lands there."""
    docs = [
        node(
            f"ip-10-0-1-{i}",
            instance_type="m7i.2xlarge",
            cpu=cpu,
            memory="32Gi",
            labels={"node-group": group},
            taints=[GPU_TAINT] if tainted else None,
        )
        for i, (cpu, group, tainted) in enumerate(nodes)
    ]
    for j, (cpu, group, tolerates) in enumerate(pods):
        docs.append(
            pod(
                f"web-{j}",
                cpu=cpu,
                memory="1Gi",
                node_selector={"node-group": group} if group else None,
                tolerations=[GPU_TOLERATION] if tolerates else None,
            )
        )
    assert run(docs) == run(docs, tuning=PLAIN)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes=st.integers(min_value=1, max_value=6),
    gpus_per_node=st.sampled_from([1, 2, 4, 8]),
    running=st.integers(min_value=0, max_value=12),
    asks=st.lists(st.sampled_from([1, 2, 4, 8, 16]), min_size=1, max_size=24),
    node_pool=st.booleans(),
)
def test_nodes_without_enough_free_devices_passed_over_decide_and_word_as_the_plain_path(
    nodes: int, gpus_per_node: int, running: int, asks: list[int], node_pool: bool
) -> None:
    """H100 nodes fill up pod after pod, some GPUs held by running pods: an attempt without
    words passes over the nodes that cannot have enough free GPUs left; a pod that fails
    everywhere still has every node's reason."""
    docs = synthetic_cluster(
        nodes=nodes, gpus_per_node=gpus_per_node, running_pods=running, pending_pods=0
    )
    if not node_pool:
        docs = [d for d in docs if d["kind"] not in ("NodePool", "InstanceType")]
    for count in sorted(set(asks)):
        docs.append(gpu_claim_template(f"h100-x{count}", "H100", count))
    for i, count in enumerate(asks):
        docs.append(
            training_pod(f"train-{i}", i, claim={"resourceClaimTemplateName": f"h100-x{count}"})
        )
    fast = run(docs)
    assert fast == run(docs, tuning=PLAIN)
    for entry in fast["pods"]:
        if not entry["scheduled"] and entry["target"] is None and not node_pool:
            assert sum(r.get("targets", 1) for r in entry["reasons"]) == nodes


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    models=st.lists(st.sampled_from(["H100", "A100"]), min_size=1, max_size=8),
    gpus_per_node=st.sampled_from([1, 2, 4]),
    running=st.integers(min_value=0, max_value=6),
    asks=st.lists(
        st.tuples(
            st.sampled_from(["H100", "A100", "L4"]),
            st.sampled_from([1, 2, 8]),
            st.sampled_from([8, 100]),  # vCPUs: two of 100 fill a node's 191
        ),
        min_size=1,
        max_size=12,
    ),
    tainted=st.booleans(),
)
def test_existing_nodes_alike_share_count_stage_refusals_as_the_plain_path(
    models: list[str], gpus_per_node: int, running: int, asks: list, tainted: bool
) -> None:
    """H100 and A100 nodes (each GPU with its own UUID), some GPUs held, one node's GPUs maybe
    tainted; pods asking for a model some nodes have, or nobody, some filling nodes' CPUs:
    nodes alike share their count stage's refusal, each with its own devices as examples, and
    a pod every node refused asks again only the nodes placements changed since, as the plain
    path decides and words it."""
    docs = synthetic_cluster(
        nodes=len(models), gpus_per_node=gpus_per_node, running_pods=running, pending_pods=0
    )
    docs = [d for d in docs if d["kind"] not in ("NodePool", "InstanceType")]
    slices = [d for d in docs if d["kind"] == "ResourceSlice"]
    for model, s in zip(models, slices, strict=True):
        for device in s["spec"]["devices"]:
            device["attributes"]["model"] = {"string": model}
    if tainted:
        slices[-1]["spec"]["devices"][0]["taints"] = [
            {"key": "nvidia.com/xid", "value": "79", "effect": "NoSchedule"}
        ]
    for model, count in sorted({(model, count) for model, count, _ in asks}):
        docs.append(gpu_claim_template(f"{model.lower()}-x{count}", model, count))
    for i, (model, count, cpu) in enumerate(asks):
        claim = {"resourceClaimTemplateName": f"{model.lower()}-x{count}"}
        docs.append(training_pod(f"train-{i}", i, claim=claim, cpu=cpu))
    assert run(docs) == run(docs, tuning=PLAIN)


def test_a_model_nobody_has_is_counted_once_per_kind_of_node(monkeypatch) -> None:
    """30 free H100 nodes refuse an A100 pod alike: one count stage worded, each node's funnel
    naming its own GPUs."""
    from allocator.explanation.builder import FunnelBuilder

    counted = []
    original = FunnelBuilder._count_refusal

    def counting(self, search, claim, req):
        counted.append(search.node_claim_id)
        return original(self, search, claim, req)

    monkeypatch.setattr(FunnelBuilder, "_count_refusal", counting)
    docs = existing_nodes(nodes=30, pods=20)  # train-19 asks for an A100
    result = run(docs)
    [failed] = [p for p in result["pods"] if not p["scheduled"]]
    assert failed["pod"] == "ml-training/train-19"
    # The nodes holding GPUs of the 19 placed pods are worded each; the free ones once.
    held = {p["target"]["name"] for p in result["pods"] if p["scheduled"]}
    assert len(counted) <= len(held) + 2
    [free] = [f for f in failed["explanation"] if not f["rejections"][0].get("also")]
    node = free["exampleTargets"][0].removeprefix("node/")
    assert all(f"/{node}/" in d for d in free["rejections"][0]["exampleDevices"])
    assert run(docs, tuning=PLAIN)["pods"] == result["pods"]


def test_a_shape_every_node_refused_is_not_asked_again_until_devices_are_freed(
    monkeypatch,
) -> None:
    """train-19 and train-39 ask for an A100 of 30 H100 nodes: once every node refused
    train-19 in an attempt without words, train-39's attempt without words asks none of them
    (the placements in between only took room and devices); each still gets every node's
    reason from its attempt with words."""
    from allocator.scheduling.existingnode import ExistingNode
    from allocator.scheduling.scheduler import Scheduler

    asked: list[str] = []
    attempts: list[tuple[str, bool, bool, int]] = []
    can_add, attempt = ExistingNode.can_add, Scheduler._attempt

    def counting(self, pod, state, bounds):
        asked.append(pod.pod.name)
        return can_add(self, pod, state, bounds)

    def recording(self, outcome, explain=True):
        before = len(asked)
        placed = attempt(self, outcome, explain)
        attempts.append((outcome.pod.name, explain, placed, len(asked) - before))
        return placed

    monkeypatch.setattr(ExistingNode, "can_add", counting)
    monkeypatch.setattr(Scheduler, "_attempt", recording)
    docs = existing_nodes(nodes=30, pods=40)
    result = run(docs)
    unworded = [(name, n) for name, explain, placed, n in attempts if not explain and not placed]
    assert unworded[:2] == [("train-19", 29), ("train-39", 0)]  # one node full: passed over
    for entry in (p for p in result["pods"] if not p["scheduled"]):
        assert sum(r.get("targets", 1) for r in entry["reasons"]) == 30
    monkeypatch.undo()
    assert result == run(docs, tuning=PLAIN)


def test_only_pods_nothing_but_the_node_decides_remember_every_node_refusing() -> None:
    """No memory of "every node refused" for a pod a topology or a trial decides too."""
    from allocator.pipeline import build_pipeline
    from allocator.scheduling.setup import build_run
    from allocator.simulation import SimulationOptions
    from allocator.trace import NULL_TRACE

    docs = existing_nodes(nodes=3, pods=2)
    spread = next(d for d in docs if d["kind"] == "Pod" and d["metadata"]["name"] == "train-1")
    spread["metadata"]["labels"] = {"app": "train"}
    spread["spec"]["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "train"}},
        }
    ]
    snapshot = load_files([("bench.json", json.dumps(docs))])
    options = SimulationOptions()
    built = build_run(snapshot, build_pipeline(options.gates), NULL_TRACE, timeout=options.timeout)
    scheduler = built.scheduler
    by_name = {p.name: p for p in built.pods.pending}
    plain = scheduler.pod_data(by_name["train-0"], built.pod_claims["ml-training/train-0"])
    spreading = scheduler.pod_data(by_name["train-1"], built.pod_claims["ml-training/train-1"])
    assert scheduler._refused_by_all_key(plain, trial=False) is not None
    assert scheduler._refused_by_all_key(plain, trial=True) is None
    assert scheduler._refused_by_all_key(spreading, trial=False) is None


def test_failed_pods_get_nodeclaim_filter_refusals_worded_from_what_the_filter_recorded(
    monkeypatch,
) -> None:
    # Karpenter's generic pods, every 10th asking for 1,000 vCPUs: the NodeClaims the others
    # opened refuse it by their instance type filter alone (no instance type has the CPUs).
    # Those refusals are worded from what the filter recorded, never by asking a NodeClaim
    # again in full, and read exactly as when they are asked again.
    from allocator.scheduling.nodeclaim import NodeClaim

    asked: list[str] = []
    explain = NodeClaim.explain

    def counted(self, pod, state):
        asked.append(self.name)
        return explain(self, pod, state)

    monkeypatch.setattr(NodeClaim, "explain", counted)
    docs = karpenter_benchmark(60, topology=False, failing_every=10)
    fast = run(docs)
    assert asked == []
    again = run(docs, tuning=Tuning(explain_recorded=False))
    assert asked  # asked again in full: the words to compare with
    assert fast == again
    failed = [p for p in fast["pods"] if not p["scheduled"]]
    assert len(failed) == 6
    for entry in failed:
        on_nodeclaims = [r for r in entry["reasons"] if r["target"].startswith("node/")]
        assert on_nodeclaims
        for r in on_nodeclaims:
            assert r["reason"].startswith("no instance type satisfied resources {")
            assert r["reason"].endswith("(no instance type had enough resources)")


def test_karpenter_preference_workload_relaxes_the_zone_anti_affinity_of_all_but_one() -> None:
    """makePreferencePods: nginx pods preferring test-zone-1 and preferring not to share a zone
    (weight 10) or a hostname (weight 1) with each other. Held as required, the zone term
    admits one pod; every later pod drops it first (the heaviest) and keeps the rest: one
    NodeClaim each, all in test-zone-1."""
    docs = karpenter_preferences(40)
    fast = run(docs)
    assert fast == run(docs, tuning=PLAIN)
    assert fast["stats"]["scheduled"] == 40
    assert len(fast["nodeClaims"]) == 40
    relaxed = [[r["term"]["weight"] for r in p.get("relaxed", [])] for p in fast["pods"]]
    assert relaxed.count([]) == 1 and relaxed.count([10]) == 39
    for nc in fast["nodeClaims"]:
        zone = next(r for r in nc["requirements"] if r["key"] == "topology.kubernetes.io/zone")
        assert zone["values"] == ["test-zone-1"]


def test_the_nodeclaim_order_kept_between_placements_is_the_one_sorted_again(monkeypatch) -> None:
    """Karpenter sorts its NodeClaims by pod count before every pod; the scheduler keeps their
    counts beside them and sorts only once a placement has unsorted them (a sorted list sorts
    to itself with Go's pdqsort). With the counts read again and the sort forced before every
    pod, Karpenter's benchmark mix (NodeClaims of 1 to 30 pods, ties everywhere) is placed
    the same way."""
    docs = karpenter_benchmark(400, topology=True, failing_every=15)
    kept = run(docs)

    def unsorted(self: Scheduler, index: int) -> None:
        self._by_pods_counts[:] = [len(nc.pods) for nc in self._by_pods]
        self._by_pods_sorted = False

    monkeypatch.setattr(Scheduler, "_note_more_pods", unsorted)
    assert run(docs) == kept


def test_a_deployment_past_its_limits_fails_each_extra_replica_for_one_cause() -> None:
    """60 nginx replicas that must not share a hostname, a cpu limit of 12 x 400: each
    NodeClaim is charged at its largest instance type (399.9 vCPUs), so a 13th fits in what is
    left. The other 47 fail, each refused by the 13 NodeClaims for one cause (one reasons
    entry) and by the NodePool's limit; the replicas share their suggestions, each naming
    itself."""
    docs = anti_affinity_past_limits(60, 12)
    fast = run(docs)
    assert fast == run(docs, tuning=PLAIN)
    assert fast["stats"]["scheduled"] == 13 and len(fast["nodeClaims"]) == 13
    failed = [p for p in fast["pods"] if not p["scheduled"]]
    assert len(failed) == 47
    for entry in failed:
        nodes, pool = entry["reasons"]
        assert nodes["targets"] == 13
        assert nodes["reason"].startswith("unsatisfiable")
        assert pool["target"] == "nodepool/default"
        for suggestion in entry["suggestions"]:
            change = suggestion.get("change") or suggestion["changes"][0]
            if change["object"].startswith("Pod "):
                assert change["object"] == f"Pod {entry['pod']}"
