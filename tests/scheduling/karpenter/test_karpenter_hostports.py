"""Host ports, Karpenter's own tests title by title, through the whole simulation:
pkg/controllers/provisioning/scheduling/suite_test.go "In-Flight Nodes" (its host port title).

Ported: 1 title; none left out. The DaemonSet host port titles of
pkg/controllers/provisioning/suite_test.go "Daemonsets" ("should account for daemonset
hostports", "should not account for daemonset hostports when daemonset would not schedule on
selected node") are in test_karpenter_daemonsets.py with the rest of that context.
"""

from __future__ import annotations

from tests.scheduling.karpenter.kit import (
    default_instance_types,
    node_pool,
    provision,
    unschedulable_pod,
)


def test_should_schedule_pods_with_the_same_host_port_to_different_nodes():
    pods = [unschedulable_pod(host_ports=(8080,)), unschedulable_pod(host_ports=(8080,))]
    result = provision(node_pool(), *default_instance_types(), *pods)
    assert result.target(pods[0]) != result.target(pods[1])
