"""Host ports, Karpenter's own tests title by title, through the whole simulation:
pkg/controllers/provisioning/scheduling/suite_test.go "In-Flight Nodes" and
pkg/controllers/provisioning/suite_test.go "Daemonsets" (their host port titles).

Ported: 2 titles. Left out (1):
- "should not account for daemonset hostports when daemonset would not schedule on selected
  node": Karpenter groups a NodePool's instance types by the DaemonSets each would run
  (DaemonOverheadGroup) and drops the groups whose DaemonSets hold a pod's port; here a
  DaemonSet counts for a whole NodePool when it fits the NodePool's requirements and taints
  (its overhead and its ports alike), so a DaemonSet that only some instance types would run
  still blocks its ports on all of them.
"""

from __future__ import annotations

from tests.scheduling.karpenter.kit import (
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
