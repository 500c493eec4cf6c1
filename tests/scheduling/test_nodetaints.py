"""Taints Karpenter disregards while a managed node initializes
(allocator/scheduling/nodetaints.py)."""

from __future__ import annotations

from allocator.model import Taint
from allocator.scheduling.nodetaints import counted_while_initializing, is_known_ephemeral_taint

GPU_DRIVER = Taint("nvidia.com/gpu-driver-not-ready", None, "NoSchedule")


def test_the_known_ephemeral_taints_match_on_key_and_effect():
    assert is_known_ephemeral_taint(Taint("node.kubernetes.io/not-ready", None, "NoExecute"))
    assert is_known_ephemeral_taint(
        Taint("node.cloudprovider.kubernetes.io/uninitialized", "true", "NoSchedule")
    )
    # Same key, another effect: a real taint (an unreachable node's eviction is no start-up).
    assert not is_known_ephemeral_taint(Taint("node.kubernetes.io/unreachable", None, "NoExecute"))
    assert not is_known_ephemeral_taint(Taint("karpenter.sh/unregistered", None, "NoSchedule"))


def test_readiness_controller_taints_are_ephemeral_by_prefix():
    assert is_known_ephemeral_taint(
        Taint("readiness.k8s.io/gpu-operator-ready", "false", "NoSchedule")
    )
    assert not is_known_ephemeral_taint(Taint("example.com/readiness.k8s.io", None, "NoSchedule"))


def test_startup_taints_are_disregarded_with_their_effect_only():
    dedicated = Taint("nvidia.com/gpu", "present", "NoSchedule")
    taints = [
        Taint("node.kubernetes.io/not-ready", None, "NoSchedule"),
        Taint("readiness.k8s.io/efa-ready", None, "NoSchedule"),
        GPU_DRIVER,
        Taint(GPU_DRIVER.key, None, "NoExecute"),
        dedicated,
    ]
    assert counted_while_initializing(taints, [GPU_DRIVER]) == [
        Taint(GPU_DRIVER.key, None, "NoExecute"),
        dedicated,
    ]
