"""Which pods Karpenter acts on, Karpenter's own tests title by title, through the whole
simulation: pkg/controllers/provisioning/scheduling/suite_test.go, "Custom Constraints" /
"Constraints Validation" (both contexts of that name) and "Deleting Nodes".

Ported: 8 titles. Left out (1):
- "should reschedule pods from a deleting node when pods are not active and they are owned by a
  StatefulSet": CONTRACT section 3 decides otherwise (terminating pods are never rescheduled).
"Constraints Validation" also holds titles about label domains that are allowed and about
requirement operators (In, Exists, NotIn and DoesNotExist on undefined keys): they test
requirement compatibility, not which pods are provisioned for, and belong to the ports of
the requirements tests.
"""

from __future__ import annotations

import pytest

from tests.scheduling.karpenter.kit import (
    CAPACITY_TYPE,
    INSTANCE_TYPE,
    ZONE,
    default_instance_types,
    node,
    node_pool,
    pod_doc,
    provision,
    unschedulable_pod,
)

# The scheduling suite's NodePool: every capacity type.
NODE_POOL = node_pool(
    requirements=[
        {"key": CAPACITY_TYPE, "operator": "In", "values": ["spot", "on-demand", "reserved"]}
    ]
)
RESTRICTED_LABELS = ("kubernetes.io/hostname",)
RESTRICTED_LABEL_DOMAINS = ("karpenter.sh",)


def _not_scheduled_for(key: str) -> None:
    pod = unschedulable_pod(node_requirements=[{"key": key, "operator": "In", "values": ["test"]}])
    result = provision(NODE_POOL, *default_instance_types(), pod)
    assert not result.scheduled(pod)
    assert f"using label {key} is not allowed" in result.ignored(pod)


@pytest.mark.parametrize("context", ["first", "second"])
def test_should_not_schedule_pods_that_have_node_selectors_with_restricted_labels(context):
    for label in RESTRICTED_LABELS:
        _not_scheduled_for(label)


@pytest.mark.parametrize("context", ["first", "second"])
def test_should_not_schedule_pods_that_have_node_selectors_with_restricted_domains(context):
    for domain in RESTRICTED_LABEL_DOMAINS:
        _not_scheduled_for(f"{domain}/test")


def _small_node_running(pod: dict, **node_options) -> dict:
    """The node Karpenter launched for ``pod`` in an earlier loop, now marked for deletion."""
    doc = node(
        "small-node",
        labels={
            "karpenter.sh/nodepool": "default",
            "karpenter.sh/initialized": "true",
            INSTANCE_TYPE: "c6i.large",
            CAPACITY_TYPE: "on-demand",
            ZONE: "us-west-2a",
        },
        allocatable={"cpu": "1900m", "memory": "2038Mi", "pods": "5"},
    )
    doc["metadata"]["deletionTimestamp"] = "2026-12-01T10:00:00Z"
    pod["spec"]["nodeName"] = "small-node"
    pod["status"] = {"phase": "Running"}
    return doc


def test_should_re_schedule_pods_from_a_deleting_node_when_pods_are_active():
    pod = pod_doc(requests={"memory": "100M"})
    result = provision(NODE_POOL, *default_instance_types(), _small_node_running(pod), pod)
    (claim,) = result.new_node_claims
    assert result.launched(claim) == "c6i.large"  # the same size again
    assert result.target(pod) == claim["name"]


def test_should_not_re_schedule_pods_from_a_deleting_node_when_pods_are_not_active():
    pod = pod_doc(requests={"memory": "100M"})
    deleting = _small_node_running(pod)
    pod["metadata"]["deletionTimestamp"] = "2026-12-01T10:01:00Z"  # evicted, still terminating
    result = provision(NODE_POOL, *default_instance_types(), deleting, pod)
    assert result.new_node_claims == []


def test_should_not_re_schedule_pods_from_a_deleting_node_when_pods_are_owned_by_a_daemonset():
    pod = pod_doc(requests={"memory": "100M"})
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "controller": True}
    ]
    deleting = _small_node_running(pod)
    pod["metadata"]["deletionTimestamp"] = "2026-12-01T10:01:00Z"
    result = provision(NODE_POOL, *default_instance_types(), deleting, pod)
    assert result.new_node_claims == []


def test_should_not_reschedule_pods_from_a_deleting_node_when_pods_are_not_active_and_they_are_owned_by_a_replicaset():
    pod = pod_doc(requests={"memory": "100M"})
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "controller": True}
    ]
    deleting = _small_node_running(pod)
    pod["metadata"]["deletionTimestamp"] = "2026-12-01T10:01:00Z"
    result = provision(NODE_POOL, *default_instance_types(), deleting, pod)
    assert result.new_node_claims == []
