"""Karpenter's ``pkg/controllers/provisioning/scheduling/suite_test.go``, the
"Preferential Fallback" part, ported title by title (6 of 6 titles of that part).

The suite's other parts are ported where their feature lives (topology, host ports, volumes
in their own files); the reserved-capacity titles ("shouldn't fallback to ... reserved
offering", "shouldn't relax preferences when a pod fails to schedule due to a reserved
offering error") are left out: the snapshot has no capacity reservations to model them.

The suite's NodePool requires capacity type spot, on-demand or reserved; the fake cloud
provider's instance types are in ``fake.default_instance_types``. Where Go reads the launched
node's labels, these tests read the requirements of the pod's NodeClaim.
"""

from __future__ import annotations

from tests.scheduling.k8s import pod_result, run
from tests.scheduling.karpenter.fake import (
    CAPACITY_TYPE,
    INSTANCE_TYPE,
    ZONE,
    default_instance_types,
    expr,
    node_pool,
    placed,
    pod,
    requirement,
)


def _node_pool(requirements: list[dict] | None = None) -> dict:
    reqs = [expr(CAPACITY_TYPE, "In", "spot", "on-demand", "reserved")]
    return node_pool(requirements=reqs + (requirements or []))


def _zone(result: dict, name: str) -> list[str]:
    nc = placed(result, name)
    assert nc is not None, pod_result(result, f"default/{name}")["error"]
    return requirement(nc, ZONE)["values"]


# --- Describe("Preferential Fallback") / Context("Required") ---------------------------------


def test_required_should_not_relax_the_final_term():
    docs = [
        _node_pool(
            [expr(ZONE, "In", "test-zone-1"), expr(INSTANCE_TYPE, "In", "default-instance-type")]
        ),
        *default_instance_types(),
        pod("p", required=[[expr(ZONE, "In", "invalid")]]),  # should not be relaxed
    ]
    result = run(docs)
    entry = pod_result(result, "default/p")
    assert entry["scheduled"] is False
    assert "relaxed" not in entry


def test_required_should_relax_multiple_terms():
    terms = [
        [expr(ZONE, "In", "invalid")],
        [expr(ZONE, "In", "invalid")],
        [expr(ZONE, "In", "test-zone-1")],
        [expr(ZONE, "In", "test-zone-2")],  # OR operator, never get to this one
    ]
    result = run([_node_pool(), *default_instance_types(), pod("p", required=terms)])
    assert _zone(result, "p") == ["test-zone-1"]
    relaxed = pod_result(result, "default/p")["relaxed"]
    assert [r["kind"] for r in relaxed] == ["required-node-affinity-term"] * 2
    assert relaxed[0]["term"] == {"matchExpressions": [expr(ZONE, "In", "invalid")]}


# --- Context("Preferred") --------------------------------------------------------------------


def test_preferred_should_relax_all_terms():
    preferred = [(1, [expr(ZONE, "In", "invalid")]), (1, [expr(INSTANCE_TYPE, "In", "invalid")])]
    result = run([_node_pool(), *default_instance_types(), pod("p", preferred=preferred)])
    entry = pod_result(result, "default/p")
    assert entry["scheduled"] is True
    assert [r["kind"] for r in entry["relaxed"]] == ["preferred-node-affinity"] * 2


def test_preferred_should_relax_to_use_lighter_weights():
    preferred = [
        (100, [expr(INSTANCE_TYPE, "In", "test-zone-3")]),
        (50, [expr(ZONE, "In", "test-zone-2")]),
        (1, [expr(ZONE, "In", "test-zone-1")]),  # OR operator, never get to this one
    ]
    docs = [
        _node_pool([expr(ZONE, "In", "test-zone-1", "test-zone-2")]),
        *default_instance_types(),
        pod("p", preferred=preferred),
    ]
    result = run(docs)
    assert _zone(result, "p") == ["test-zone-2"]
    (relaxed,) = pod_result(result, "default/p")["relaxed"]
    assert relaxed == {
        "kind": "preferred-node-affinity",
        "term": {"weight": 100, "preference": {"matchExpressions": preferred[0][1]}},
    }


def test_preferred_should_schedule_even_if_preference_is_conflicting_with_requirement():
    docs = [
        _node_pool(),
        *default_instance_types(),
        pod(
            "p",
            preferred=[(1, [expr(ZONE, "NotIn", "test-zone-3")])],
            required=[[expr(ZONE, "In", "test-zone-3")]],  # should not be relaxed
        ),
    ]
    result = run(docs)
    assert _zone(result, "p") == ["test-zone-3"]


def test_preferred_should_schedule_even_if_preference_requirements_are_conflicting():
    preference = [expr(ZONE, "In", "invalid"), expr(ZONE, "NotIn", "invalid")]
    result = run([_node_pool(), *default_instance_types(), pod("p", preferred=[(1, preference)])])
    assert pod_result(result, "default/p")["scheduled"] is True
