"""An existing node's requirements as pods are added (allocator/scheduling/existingnode.py):
Karpenter's ExistingNode.Add keeps the node's requirements with the pod's, and a later pod is
checked, and its topology domain read, against them. Karpenter has no test of its own for it
(its suites only reach it through the In-Flight Nodes titles, ported elsewhere)."""

from __future__ import annotations

from allocator.simulation import SimulationOptions
from tests.scheduling.k8s import node, pod, pod_result, run

TEAM = "example.com/team"


def _excluding_team(name: str, team: str, cpu: str) -> dict:
    return pod(
        name, cpu=cpu, affinity_terms=[[{"key": TEAM, "operator": "NotIn", "values": [team]}]]
    )


def _team(name: str, team: str) -> dict:
    return pod(name, cpu="1", affinity_terms=[[{"key": TEAM, "operator": "In", "values": [team]}]])


def test_a_later_pod_is_checked_against_the_requirements_an_earlier_pod_added():
    # The node has no team label. The first pod only excludes a team: it fits, and the node's
    # requirements now say team NotIn [ml-infra]. The second pod wants team search: against
    # the node's labels alone it would be refused ("does not have known values"); against the
    # narrowed requirements the team key is known and search is allowed.
    docs = [
        node("ip-10-0-1-7", instance_type="m7i.4xlarge", cpu="16", memory="64Gi"),
        _excluding_team("etl-0", "ml-infra", cpu="2"),
        _team("search-indexer-0", "search"),
    ]
    result = run(docs)
    assert pod_result(result, "default/etl-0")["target"]["name"] == "ip-10-0-1-7"
    assert pod_result(result, "default/search-indexer-0")["target"]["name"] == "ip-10-0-1-7"


def test_without_the_earlier_pod_the_node_refuses_the_undefined_label():
    docs = [
        node("ip-10-0-1-7", instance_type="m7i.4xlarge", cpu="16", memory="64Gi"),
        _team("search-indexer-0", "search"),
    ]
    entry = pod_result(run(docs), "default/search-indexer-0")
    assert not entry["scheduled"]
    assert f'label "{TEAM}" does not have known values' in entry["error"]


def test_the_narrowed_requirements_still_refuse_what_the_earlier_pod_excluded():
    docs = [
        node("ip-10-0-1-7", instance_type="m7i.4xlarge", cpu="16", memory="64Gi"),
        _excluding_team("etl-0", "ml-infra", cpu="2"),
        _team("trainer-0", "ml-infra"),
    ]
    result = run(docs)
    assert pod_result(result, "default/etl-0")["scheduled"]
    entry = pod_result(result, "default/trainer-0")
    assert not entry["scheduled"]
    assert f"key {TEAM}" in entry["error"]


def test_a_node_refusing_for_a_taint_and_for_room_says_the_taint_as_karpenter_checks_it_first():
    # Karpenter's ExistingNode.CanAdd checks taints, volume limits and host ports before the
    # resources left: a tainted full node is refused for its taint.
    gpu_taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    docs = [
        node(
            "ip-10-0-1-9",
            instance_type="p5.48xlarge",
            cpu="4",
            memory="16Gi",
            taints=[gpu_taint],
        ),
        pod("etl-0", cpu="8"),
    ]
    entry = pod_result(run(docs), "default/etl-0")
    assert not entry["scheduled"]
    assert "did not tolerate taint nvidia.com/gpu=present:NoSchedule" in entry["error"]
    assert "exceeds node resources" not in entry["error"]


def test_a_full_nodes_words_say_the_room_left_after_the_pods_placed_on_it():
    # The words of "exceeds node resources" are built once per requests and room left: after
    # web-0 lands, the retried trainer-0 reads the room that is left, not the room before.
    docs = [
        node("ip-10-0-1-7", instance_type="m7i.large", cpu="2", memory="8Gi"),
        pod("trainer-0", cpu="3"),
        pod("web-0", cpu="1"),
    ]
    result = run(docs)
    assert pod_result(result, "default/web-0")["target"]["name"] == "ip-10-0-1-7"
    entry = pod_result(result, "default/trainer-0")
    assert not entry["scheduled"]
    [reason] = [r["reason"] for r in entry["reasons"] if r["target"] == "node/ip-10-0-1-7"]
    assert reason.startswith("exceeds node resources")
    assert '"cpu":"1"' in reason.split("available", 1)[1], reason


def test_a_full_node_remembers_the_refusals_of_a_bounded_number_of_pod_shapes():
    # 40 pods of 40 different sizes pass a full node: each shape's refusal is remembered
    # there, but no more than MAX_REMEMBERED_SHAPES of them (memory does not grow with them).
    from allocator.pipeline import build_pipeline
    from allocator.scheduling.existingnode import MAX_REMEMBERED_SHAPES
    from allocator.scheduling.setup import build_run
    from allocator.trace import NULL_TRACE
    from tests.scheduling.k8s import snapshot

    docs = [node("ip-10-0-1-7", instance_type="m7i.large", cpu="1", memory="8Gi")]
    docs += [pod(f"etl-{i}", cpu=f"{2000 + 10 * i}m") for i in range(40)]
    options = SimulationOptions()
    pipeline = build_pipeline(options.gates)
    run_ = build_run(snapshot(docs), pipeline, NULL_TRACE, timeout=options.timeout)
    outcomes = run_.scheduler.solve(run_.pods.pending, run_.pod_claims)
    assert not any(o.scheduled for o in outcomes)
    [full] = run_.scheduler.existing
    assert 0 < len(full.refusals) <= MAX_REMEMBERED_SHAPES < 40
