"""Karpenter's ``pkg/controllers/provisioning/suite_test.go``: the "Resource Limits",
"Preferential Fallback" and "Multiple NodePools" parts, ported title by title (18 titles; the
DescribeTable "should ignore node preferredDuringSchedulingIgnoredDuringExecution affinity" is
one title with its two entries).

Left out, and why:
- "Preferential Fallback / Ignore Preferences" (1 title): the ``--preference-policy=Ignore``
  option of Karpenter's controller is not a simulation option here.
- Context "Daemonsets" is ported in test_karpenter_daemonsets.py; the suite's other parts
  (provisioning flow, taints, volumes, static NodePools ...) are outside this round.
- Two of "Resource Limits" use pod anti-affinity on the hostname only to keep two pods apart
  ("should partially schedule if limits would be exceeded", "should not schedule if limits
  would be exceeded (node)"): ported with pods that cannot share a node for their size, the
  anti-affinity itself belongs to the topology tests.

Karpenter launches a node per scheduling round; a later round is modelled as a snapshot that
holds the nodes of the earlier ones. ``test.NodePool()`` has no requirements; the fake cloud
provider's instance types are ``kit.default_instance_types()``.
"""

from __future__ import annotations

import pytest

from tests.scheduling.k8s import pod_result, run
from tests.scheduling.karpenter.kit import (
    GPU_VENDOR_A,
    HOSTNAME,
    INSTANCE_TYPE,
    NODEPOOL,
    ON_DEMAND,
    ZONE,
    default_instance_types,
    instance_type,
    launched_node,
    node_pool,
    placed,
    pod,
    req,
    requirement,
)


def _scheduled(result: dict, name: str) -> bool:
    return pod_result(result, f"default/{name}")["scheduled"]


# --- Context("Resource Limits") --------------------------------------------------------------


def test_should_not_schedule_when_limits_are_exceeded():
    docs = [
        node_pool(limits={"cpu": "20"}),
        *default_instance_types(),
        instance_type("m7i.24xlarge", cpu="100", memory="400Gi"),
        # A node of the NodePool the cluster already has, of 100 cpu (Go: a NodeClaim with
        # only a capacity, so no room for a pod).
        launched_node(
            "default-abcde",
            "m7i.24xlarge",
            cpu="0",
            memory="4Gi",
            pods="0",
            capacity_type=ON_DEMAND,
        ),
        pod("p"),
    ]
    result = run(docs)
    assert not _scheduled(result, "p")
    assert "exceed limits" in pod_result(result, "default/p")["error"]


def test_should_schedule_if_limits_would_be_met():
    docs = [node_pool(limits={"cpu": "2"}), *default_instance_types(), pod("p", cpu="1.75")]
    # requires a 2 CPU node, but leaves room for overhead
    nc = placed(run(docs), "p")
    assert nc["instanceTypes"] == ["c6i.large"]


def test_should_partially_schedule_if_limits_would_be_exceeded():
    # Under the 3 cpu limit only the 2 cpu type can be launched, and it holds one pod.
    docs = [
        node_pool(limits={"cpu": "3"}),
        *default_instance_types(),
        pod("p1", cpu="1.5"),
        pod("p2", cpu="1.5"),
    ]
    result = run(docs)
    assert sorted([_scheduled(result, "p1"), _scheduled(result, "p2")]) == [False, True]


def test_should_not_schedule_if_limits_would_be_exceeded():
    docs = [node_pool(limits={"cpu": "2"}), *default_instance_types(), pod("p", cpu="2.1")]
    assert not _scheduled(run(docs), "p")


def test_should_not_schedule_if_limits_would_be_exceeded_gpu():
    docs = [
        node_pool(limits={"pods": "1"}),
        *default_instance_types(),
        pod("p", limits={GPU_VENDOR_A: "1"}),
    ]
    # only available instance type has 2 GPUs which would exceed the limit
    result = run(docs)
    assert not _scheduled(result, "p")


def test_should_not_schedule_to_a_nodepool_after_a_scheduling_round_if_limits_would_be_exceeded():
    first = [node_pool(limits={"cpu": "2"}), *default_instance_types()]
    # A 2 CPU node can be launched
    assert placed(run([*first, pod("p1", cpu="1.75")]), "p1") is not None
    # The next round: that node exists; this pod would bring the NodePool to 3.5 CPUs.
    second = [
        *first,
        launched_node(
            "default-1", "c6i.large", cpu="1900m", memory="4Gi", pods="5", capacity_type=ON_DEMAND
        ),
        pod("p1", cpu="1.75", node_name="default-1"),
        pod("p2", cpu="1.75"),
    ]
    result = run(second)
    assert not _scheduled(result, "p2")


def test_should_not_schedule_if_limits_would_be_exceeded_node():
    base = [node_pool(limits={"nodes": "2"}), *default_instance_types()]
    # A node can be launched, then a second one (each round has the earlier nodes).
    assert _scheduled(run([*base, pod("p1", cpu="3")]), "p1")
    one = [
        launched_node(
            "default-1", "c6i.xlarge", cpu="3900m", memory="4Gi", pods="5", capacity_type=ON_DEMAND
        ),
        pod("p1", cpu="3", node_name="default-1"),
    ]
    assert _scheduled(run([*base, *one, pod("p2", cpu="3")]), "p2")
    two = [
        *one,
        launched_node(
            "default-2", "c6i.xlarge", cpu="3900m", memory="4Gi", pods="5", capacity_type=ON_DEMAND
        ),
        pod("p2", cpu="3", node_name="default-2"),
    ]
    # This pod would require a third node, but the limit would be exceeded.
    result = run([*base, *two, pod("p3", cpu="3")])
    assert not _scheduled(result, "p3")
    assert (
        'node limits have been exhausted for nodepool: "default"'
        in (pod_result(result, "default/p3")["error"])
    )


# --- Context("Preferential Fallback") / Context("Required") ----------------------------------


def test_required_should_not_relax_the_final_term():
    docs = [
        node_pool(requirements=[req(ZONE, "In", "us-west-2a")]),
        *default_instance_types(),
        pod("p", node_terms=[[req(ZONE, "In", "invalid")]]),  # Should not be relaxed
    ]
    assert not _scheduled(run(docs), "p")


def test_required_should_relax_multiple_terms():
    terms = [
        [req(ZONE, "In", "invalid")],
        [req(ZONE, "In", "invalid")],
        [req(ZONE, "In", "us-west-2a")],
        [req(ZONE, "In", "us-west-2b")],  # OR operator, never get to this one
    ]
    result = run([node_pool(), *default_instance_types(), pod("p", node_terms=terms)])
    assert requirement(placed(result, "p"), ZONE)["values"] == ["us-west-2a"]


# --- Context("Preferences") ------------------------------------------------------------------


def test_preferences_should_relax_all_node_affinity_terms():
    preferred = [(1, [req(ZONE, "In", "invalid")]), (1, [req(INSTANCE_TYPE, "In", "invalid")])]
    result = run([node_pool(), *default_instance_types(), pod("p", preferred=preferred)])
    assert _scheduled(result, "p")


def test_preferences_should_relax_to_use_lighter_weights():
    preferred = [
        (100, [req(INSTANCE_TYPE, "In", "us-west-2c")]),
        (50, [req(ZONE, "In", "us-west-2b")]),
        (1, [req(ZONE, "In", "us-west-2a")]),  # OR operator, never get to this one
    ]
    docs = [
        node_pool(requirements=[req(ZONE, "In", "us-west-2a", "us-west-2b")]),
        *default_instance_types(),
        pod("p", preferred=preferred),
    ]
    assert requirement(placed(run(docs), "p"), ZONE)["values"] == ["us-west-2b"]


def test_preferences_should_tolerate_prefer_no_schedule_taint_only_after_trying_to_relax_affinity_terms():
    preferred = [(1, [req(ZONE, "In", "invalid")]), (1, [req(INSTANCE_TYPE, "In", "invalid")])]
    taint = {"key": "foo", "value": "bar", "effect": "PreferNoSchedule"}
    docs = [node_pool(taints=[taint]), *default_instance_types(), pod("p", preferred=preferred)]
    result = run(docs)
    entry = pod_result(result, "default/p")
    assert entry["scheduled"] is True
    assert [r["kind"] for r in entry["relaxed"]] == [
        "preferred-node-affinity",
        "preferred-node-affinity",
        "prefer-no-schedule",
    ]
    assert entry["relaxed"][-1]["term"] == {"operator": "Exists", "effect": "PreferNoSchedule"}


@pytest.mark.parametrize("topology_key", [ZONE, HOSTNAME])
def test_preferences_should_ignore_node_preferred_during_scheduling_affinity(topology_key):
    docs = [
        node_pool(),
        *default_instance_types(),
        pod("pod1", cpu="2"),
        # Create a nodePreference that can't be satisfied
        pod("node-preference-pod", cpu="1", preferred=[(1, [req(topology_key, "In", "value-1")])]),
    ]
    result = run(docs)
    assert placed(result, "pod1")["name"] == placed(result, "node-preference-pod")["name"]


# --- Context("Multiple NodePools") -----------------------------------------------------------


def test_should_schedule_to_an_explicitly_selected_nodepool():
    docs = [
        node_pool("selected"),
        node_pool("other"),
        *default_instance_types(),
        pod("p", node_selector={NODEPOOL: "selected"}),
    ]
    assert placed(run(docs), "p")["nodePool"] == "selected"


def test_should_schedule_to_a_nodepool_by_labels():
    docs = [
        node_pool("labelled", labels={"foo": "bar"}),
        node_pool("other"),
        *default_instance_types(),
        pod("p", node_selector={"foo": "bar"}),
    ]
    assert placed(run(docs), "p")["nodePool"] == "labelled"


def test_should_not_match_nodepool_with_prefer_no_schedule_taint_when_other_nodepool_match():
    taint = {"key": "foo", "value": "bar", "effect": "PreferNoSchedule"}
    # The tainted NodePool's name sorts later, so it is tried first.
    docs = [
        node_pool("tainted", taints=[taint]),
        node_pool("plain"),
        *default_instance_types(),
        pod("p"),
    ]
    result = run(docs)
    assert placed(result, "p")["nodePool"] == "plain"
    assert "relaxed" not in pod_result(result, "default/p")


# --- Context("Weighted NodePools") -----------------------------------------------------------


def test_should_schedule_to_the_nodepool_with_the_highest_priority_always():
    docs = [
        node_pool("np-a"),
        node_pool("np-b", weight=20),
        node_pool("np-c", weight=100),
        *default_instance_types(),
        pod("p1"),
        pod("p2"),
        pod("p3"),
    ]
    result = run(docs)
    assert {placed(result, p)["nodePool"] for p in ("p1", "p2", "p3")} == {"np-c"}


def test_should_schedule_to_explicitly_selected_nodepool_even_if_other_nodepools_are_higher_priority():
    docs = [
        node_pool("targeted"),
        node_pool("np-b", weight=20),
        node_pool("np-c", weight=100),
        *default_instance_types(),
        pod("p", node_selector={NODEPOOL: "targeted"}),
    ]
    assert placed(run(docs), "p")["nodePool"] == "targeted"
