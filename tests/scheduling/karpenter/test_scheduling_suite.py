"""Karpenter's ``pkg/controllers/provisioning/scheduling/suite_test.go``, the
"Preferential Fallback" part, ported title by title: 6 of its 6 titles.

Left out of this file: the suite's other parts. Topology, host ports, volumes and the
"Daemonsets" contexts of "In-Flight Nodes" and "Existing Nodes" are ported with those features
(test_topology.py, test_karpenter_hostports.py, test_karpenter_volume_*.py,
test_karpenter_daemonsets.py); custom constraints, instance type compatibility, the other
in-flight and existing node titles and the reserved-capacity titles
("shouldn't fallback to ... when compatible reserved offerings are available", "shouldn't
relax preferences when a pod fails to schedule due to a reserved offering error": the snapshot
has no capacity reservations) are not ported in this round.

The suite's NodePool requires capacity type spot, on-demand or reserved; the fake cloud
provider's instance types are ``kit.default_instance_types()``. Where Go reads the launched
node's labels, these tests read the requirements of the pod's NodeClaim.
"""

from __future__ import annotations

from tests.scheduling.k8s import pod_result, run
from tests.scheduling.karpenter.kit import (
    CAPACITY_TYPE,
    INSTANCE_TYPE,
    ZONE,
    default_instance_types,
    node_pool,
    placed,
    pod,
    req,
    requirement,
)


def _node_pool(requirements: list[dict] | None = None) -> dict:
    reqs = [req(CAPACITY_TYPE, "In", "spot", "on-demand", "reserved")]
    return node_pool(requirements=reqs + (requirements or []))


def _zone(result: dict, name: str) -> list[str]:
    nc = placed(result, name)
    assert nc is not None, pod_result(result, f"default/{name}")["error"]
    return requirement(nc, ZONE)["values"]


# --- Describe("Preferential Fallback") / Context("Required") ---------------------------------


def test_required_should_not_relax_the_final_term():
    docs = [
        _node_pool([req(ZONE, "In", "us-west-2a"), req(INSTANCE_TYPE, "In", "c6i.xlarge")]),
        *default_instance_types(),
        pod("p", node_terms=[[req(ZONE, "In", "invalid")]]),  # should not be relaxed
    ]
    result = run(docs)
    entry = pod_result(result, "default/p")
    assert entry["scheduled"] is False
    assert "relaxed" not in entry


def test_required_should_relax_multiple_terms():
    terms = [
        [req(ZONE, "In", "invalid")],
        [req(ZONE, "In", "invalid")],
        [req(ZONE, "In", "us-west-2a")],
        [req(ZONE, "In", "us-west-2b")],  # OR operator, never get to this one
    ]
    result = run([_node_pool(), *default_instance_types(), pod("p", node_terms=terms)])
    assert _zone(result, "p") == ["us-west-2a"]
    relaxed = pod_result(result, "default/p")["relaxed"]
    assert [r["kind"] for r in relaxed] == ["required-node-affinity-term"] * 2
    assert relaxed[0]["term"] == {"matchExpressions": [req(ZONE, "In", "invalid")]}


# --- Context("Preferred") --------------------------------------------------------------------


def test_preferred_should_relax_all_terms():
    preferred = [(1, [req(ZONE, "In", "invalid")]), (1, [req(INSTANCE_TYPE, "In", "invalid")])]
    result = run([_node_pool(), *default_instance_types(), pod("p", preferred=preferred)])
    entry = pod_result(result, "default/p")
    assert entry["scheduled"] is True
    assert [r["kind"] for r in entry["relaxed"]] == ["preferred-node-affinity"] * 2


def test_preferred_should_relax_to_use_lighter_weights():
    preferred = [
        (100, [req(INSTANCE_TYPE, "In", "us-west-2c")]),
        (50, [req(ZONE, "In", "us-west-2b")]),
        (1, [req(ZONE, "In", "us-west-2a")]),  # OR operator, never get to this one
    ]
    docs = [
        _node_pool([req(ZONE, "In", "us-west-2a", "us-west-2b")]),
        *default_instance_types(),
        pod("p", preferred=preferred),
    ]
    result = run(docs)
    assert _zone(result, "p") == ["us-west-2b"]
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
            preferred=[(1, [req(ZONE, "NotIn", "us-west-2c")])],
            node_terms=[[req(ZONE, "In", "us-west-2c")]],  # should not be relaxed
        ),
    ]
    result = run(docs)
    assert _zone(result, "p") == ["us-west-2c"]


def test_preferred_should_schedule_even_if_preference_requirements_are_conflicting():
    preference = [req(ZONE, "In", "invalid"), req(ZONE, "NotIn", "invalid")]
    result = run([_node_pool(), *default_instance_types(), pod("p", preferred=[(1, preference)])])
    assert pod_result(result, "default/p")["scheduled"] is True
