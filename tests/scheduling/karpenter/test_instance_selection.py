"""Karpenter's ``pkg/controllers/provisioning/scheduling/instance_selection_test.go``, the
"MinValues" context, ported title by title: 11 of its 11 titles.

Left out: the file's other 25 titles ("should schedule on one of the cheapest instances" for
each arch / os / zone / capacity type, "should not schedule if no instance type matches
selector" x3, "should schedule on an instance with enough resources", "should schedule on
cheaper on-demand instance even when spot price ordering would place other instance types
first"): they test instance type choice by price and requirements, which this round did not
change; they are not ported yet.

The NodePool's ``minValues`` are held as Karpenter's Strict policy holds them: a NodeClaim
whose instance types would offer fewer values of a key is not made, and the pod goes to
another NodeClaim or fails with "minValues requirement is not met" naming the key. Where Go
counts the instance types of the created NodeClaim (``supportedInstanceTypes``), these tests
read ``nodeClaims[].instanceTypes``.
"""

from __future__ import annotations

import pytest

from allocator.scheduling import scheduler
from tests.scheduling.k8s import pod_result, run
from tests.scheduling.karpenter.kit import (
    INSTANCE_TYPE,
    default_instance_types,
    instance_type,
    node_pool,
    offering,
    placed,
    pod,
    req,
)

GENERATION = "karpenter/numerical-value"  # a custom key with numbers for Gt / Lt


def _it(name: str, cpu: str, price: float, generation: str | None = None) -> dict:
    """fake.NewInstanceType(arm64, linux, one spot offering in us-west-2a)."""
    return instance_type(
        name,
        cpu=cpu,
        memory=f"{cpu}Gi",
        arch="arm64",
        oses=("linux",),
        offerings=[offering("us-west-2a", "spot", price)],
        labels={GENERATION: generation} if generation else None,
    )


def _pods(affinity: list[dict] | None = None) -> list[dict]:
    """2 pods that fit together only on the larger instance types."""
    required = [affinity] if affinity else None
    return [pod(f"pod{i}", cpu="0.9", memory="0.9Gi", node_terms=required) for i in (1, 2)]


def _two_nodes(result: dict) -> None:
    """The pods went to two different NodeClaims, each with at least 2 instance types."""
    nc1, nc2 = placed(result, "pod1"), placed(result, "pod2")
    assert nc1 is not None and nc2 is not None
    assert nc1["name"] != nc2["name"]
    assert len(result["nodeClaims"][0]["instanceTypes"]) >= 2


def _failed(result: dict) -> list[str]:
    return [pod_result(result, f"default/pod{i}")["error"] for i in (1, 2)]


def test_should_schedule_respecting_the_min_values_from_instance_type_requirements():
    docs = [
        _it("instance-type-1", "1", 0.52),
        _it("instance-type-2", "4", 1.0),
        node_pool(
            requirements=[
                {**req(INSTANCE_TYPE, "In", "instance-type-1", "instance-type-2"), "minValues": 2}
            ]
        ),
        *_pods(),
    ]
    _two_nodes(run(docs))


def test_should_schedule_respecting_the_min_values_in_gt_operator():
    docs = [
        _it("instance-type-1", "1", 0.52, "2"),
        _it("instance-type-2", "1", 1.0, "3"),
        _it("instance-type-3", "4", 1.2, "4"),
        node_pool(requirements=[{**req(GENERATION, "Gt", "2"), "minValues": 2}]),
        *_pods(),
    ]
    result = run(docs)
    _two_nodes(result)
    # Both NodeClaims can only be of the types above generation 2.
    assert {it for nc in result["nodeClaims"] for it in nc["instanceTypes"]} == {
        "instance-type-2",
        "instance-type-3",
    }


def test_scheduler_should_fail_if_the_min_values_in_gt_operator_is_not_satisfied():
    docs = [
        _it("instance-type-1", "1", 0.52, "2"),
        _it("instance-type-2", "4", 1.0, "3"),
        node_pool(requirements=[{**req(GENERATION, "Exists"), "minValues": 2}]),
        *_pods(affinity=[req(GENERATION, "Gt", "2")]),
    ]
    for error in _failed(run(docs)):
        assert "minValues requirement is not met for label(s) karpenter/numerical-value" in error


def test_should_schedule_respecting_the_min_values_in_lt_operator():
    docs = [
        _it("instance-type-1", "1", 0.52, "2"),
        _it("instance-type-2", "2", 1.0, "3"),
        _it("instance-type-3", "4", 1.2, "4"),
        node_pool(requirements=[{**req(GENERATION, "Lt", "4"), "minValues": 2}]),
        *_pods(),
    ]
    _two_nodes(run(docs))


def test_scheduler_should_fail_if_the_min_values_in_lt_operator_is_not_satisfied():
    docs = [
        _it("instance-type-1", "2", 0.52, "2"),
        _it("instance-type-2", "4", 1.2, "4"),
        node_pool(requirements=[{**req(GENERATION, "Lt", "4"), "minValues": 2}]),
        *_pods(),
    ]
    for error in _failed(run(docs)):
        assert "minValues requirement is not met" in error
        assert "karpenter/numerical-value (1 of minValues 2)" in error


def test_should_schedule_considering_the_max_of_the_min_values_of_in_and_not_in_operators():
    docs = [
        _it("instance-type-1", "1", 0.52),
        _it("instance-type-2", "2", 1.0),
        _it("instance-type-3", "4", 1.2),
        node_pool(
            requirements=[
                {
                    **req(
                        INSTANCE_TYPE, "In", "instance-type-1", "instance-type-2", "instance-type-3"
                    ),
                    "minValues": 1,
                },
                {**req(INSTANCE_TYPE, "NotIn", "instance-type-3"), "minValues": 2},
            ]
        ),
        *_pods(),
    ]
    _two_nodes(run(docs))


def test_should_schedule_considering_the_max_of_the_min_values_of_gt_and_lt_operators():
    docs = [
        _it("instance-type-1", "1", 0.52, "2"),
        _it("instance-type-2", "1", 1.0, "3"),
        _it("instance-type-3", "4", 1.2, "4"),
        _it("instance-type-4", "4", 1.2, "5"),
        node_pool(
            requirements=[
                {**req(GENERATION, "Gt", "2"), "minValues": 1},
                {**req(GENERATION, "Lt", "5"), "minValues": 2},
            ]
        ),
        *_pods(),
    ]
    _two_nodes(run(docs))


def test_schedule_should_fail_if_minimum_number_of_instance_types_is_not_met_as_per_the_min_values():
    docs = [
        *default_instance_types(),  # 6 instance types (Go keeps the first 10 of these)
        node_pool(requirements=[{**req(INSTANCE_TYPE, "Exists"), "minValues": 11}]),
        pod("p"),
    ]
    error = pod_result(run(docs), "default/p")["error"]
    assert "minValues requirement is not met" in error
    assert "node.kubernetes.io/instance-type (6 of minValues 11)" in error


def test_schedule_should_fail_if_minimum_number_of_instance_types_is_not_met_after_truncation(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setattr(scheduler, "MAX_INSTANCE_TYPES", 1)
    docs = [
        _it("instance-type-1", "1", 0.52),
        _it("instance-type-2", "4", 1.0),
        node_pool(
            requirements=[
                {**req(INSTANCE_TYPE, "In", "instance-type-1", "instance-type-2"), "minValues": 2}
            ]
        ),
        *_pods(),
    ]
    result = run(docs)
    for error in _failed(result):
        assert error.startswith(
            "pod didn't schedule because NodePool couldn't meet minValues requirements"
        )
    assert result["nodeClaims"] == []


def test_should_schedule_and_pick_the_max_of_min_values_if_multiple_operators_are_used_for_the_same_requirement():
    docs = [
        _it("instance-type-1", "1", 0.52),
        _it("instance-type-2", "4", 1.0),
        node_pool(
            requirements=[
                {**req(INSTANCE_TYPE, "Exists"), "minValues": 1},
                {**req(INSTANCE_TYPE, "In", "instance-type-1", "instance-type-2"), "minValues": 2},
            ]
        ),
        *_pods(),
    ]
    result = run(docs)
    _two_nodes(result)
    (entry,) = [r for r in result["nodeClaims"][0]["requirements"] if r["key"] == INSTANCE_TYPE]
    assert entry["minValues"] == 2  # the larger of the two


def test_should_schedule_and_respect_multiple_requirement_keys_with_min_values():
    docs = [
        _it("instance-type-1", "1", 0.52),
        {
            **_it("instance-type-2", "4", 1.0),
            "spec": {
                **_it("instance-type-2", "4", 1.0)["spec"],
                "requirements": [
                    req("kubernetes.io/arch", "In", "amd64"),
                    req("kubernetes.io/os", "In", "linux"),
                ],
            },
        },
        node_pool(
            requirements=[
                {**req("kubernetes.io/arch", "Exists"), "minValues": 2},
                {**req(INSTANCE_TYPE, "In", "instance-type-1", "instance-type-2"), "minValues": 1},
            ]
        ),
        *_pods(),
    ]
    # Both pods on one NodeClaim would leave only the amd64 type: each gets its own NodeClaim.
    _two_nodes(run(docs))
