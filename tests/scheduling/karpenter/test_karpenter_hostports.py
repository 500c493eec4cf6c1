"""Host ports, Karpenter's own tests title by title, through the whole simulation:
pkg/controllers/provisioning/scheduling/suite_test.go "In-Flight Nodes" and
pkg/controllers/provisioning/suite_test.go "Daemonsets" (their host port titles).

Ported: 3 titles (every host port title of both files). The fake provider's label ``size`` is
well known there; here only the standard labels are, so the NodePool declares it
(``size Exists``) where a pod or DaemonSet selects it.
"""

from __future__ import annotations

from tests.scheduling.karpenter.kit import (
    SIZE,
    daemon_set,
    default_instance_types,
    node_pool,
    provision,
    unschedulable_pod,
)


def test_should_schedule_pods_with_the_same_host_port_to_different_nodes():
    pods = [unschedulable_pod(host_ports=(8080,)), unschedulable_pod(host_ports=(8080,))]
    result = provision(node_pool(), *default_instance_types(), *pods)
    assert result.target(pods[0]) != result.target(pods[1])


def test_should_account_for_daemonset_hostports():
    ds = daemon_set(requests={"cpu": "2", "memory": "2Gi"}, host_ports=(8080,))
    pod = unschedulable_pod(requests={"cpu": "1", "memory": "1Gi"}, host_ports=(8080,))
    result = provision(node_pool(), *default_instance_types(), ds, pod)
    # The port is blocked by a compatible DaemonSet on every node a NodeClaim could become.
    assert not result.scheduled(pod)
    assert result.new_node_claims == []


def test_should_not_account_for_daemonset_hostports_when_daemonset_would_not_schedule_on_selected_node():
    def size(value: str) -> list[dict]:
        return [{"key": SIZE, "operator": "In", "values": [value]}]

    large = daemon_set(
        requests={"cpu": "4", "memory": "4Gi"}, node_requirements=size("large"), host_ports=(8080,)
    )
    small = daemon_set(
        requests={"cpu": "2", "memory": "2Gi"}, node_requirements=size("small"), host_ports=(8081,)
    )
    pod = unschedulable_pod(
        requests={"cpu": "1", "memory": "1Gi"}, node_requirements=size("small"), host_ports=(8080,)
    )
    pool = node_pool(requirements=[{"key": SIZE, "operator": "Exists"}])
    result = provision(pool, *default_instance_types(), large, small, pod)
    claim = result.node_claim(pod)
    assert result.values(pod, SIZE) == {"small"}
    # 1 CPU for the pod and 2 for the small DaemonSet: a 4-CPU type, not the 2-CPU one.
    assert result.launched(claim) == "default-instance-type"
